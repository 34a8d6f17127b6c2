//! What the attacker fits on its training pools: a gate per family (count gates, amount gate),
//! a random-forest regressor per family and strategy (the learner), a random-forest classifier
//! per family (a diagnostic: how well blind-visible fields tell benign from risky), and the
//! single-field scan.

use super::arms::Arm;
use super::CaseRow;
use crate::redteam::{GamingFamily, Gate};
use smartcore::ensemble::random_forest_classifier::{
    RandomForestClassifier, RandomForestClassifierParameters,
};
use smartcore::ensemble::random_forest_regressor::{
    RandomForestRegressor, RandomForestRegressorParameters,
};
use smartcore::linalg::basic::matrix::DenseMatrix;
use std::collections::{BTreeMap, BTreeSet};

/// The two sides a gate picks between.
pub const PAY_SIDE: Arm = Arm::ChecklistPay;
pub const ESCALATE_SIDE: Arm = Arm::Family(GamingFamily::PriorEscalation);

/// The score a gate's policy gets on a row (the side it picks, played as itself).
pub fn gate_outcome(gate: &Gate, row: &CaseRow) -> Option<super::Outcome> {
    let side = if gate_pays(gate, row) {
        PAY_SIDE
    } else {
        ESCALATE_SIDE
    };
    row.outcomes.get(&side).copied()
}

/// Does `gate` pay on `row`? (The random gate is not fitted and never asked here.)
pub fn gate_pays(gate: &Gate, row: &CaseRow) -> bool {
    match gate {
        Gate::Count {
            feature,
            threshold,
            pay_at_or_below,
        } => {
            let v = row
                .features
                .get(&format!("count.{feature}"))
                .copied()
                .unwrap_or(0.0);
            (v <= *threshold) == *pay_at_or_below
        }
        Gate::Amount {
            threshold,
            pay_at_or_below,
        } => {
            let v = row.features.get("amount").copied().unwrap_or(0.0);
            (v <= *threshold) == *pay_at_or_below
        }
        Gate::Random { .. } => true,
    }
}

/// The best gate of one family on its training rows: every candidate feature (the document counts
/// for a count gate, the restated amount for an amount gate), every observed value as threshold,
/// both directions; the highest training mean wins (the first on a tie: "PAY everything" when
/// nothing beats it).
pub fn fit_gate(rows: &[&CaseRow], amount: bool) -> Gate {
    let mut candidates: Vec<(String, f64)> = Vec::new();
    for r in rows {
        for (k, v) in &r.features {
            let take = if amount {
                k == "amount"
            } else {
                k.starts_with("count.")
            };
            if take {
                candidates.push((k.clone(), *v));
            }
        }
    }
    candidates.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    candidates.dedup();
    let make = |name: &str, t: f64, below: bool| {
        if amount {
            Gate::Amount {
                threshold: t,
                pay_at_or_below: below,
            }
        } else {
            Gate::Count {
                feature: name.trim_start_matches("count.").to_owned(),
                threshold: t,
                pay_at_or_below: below,
            }
        }
    };
    let mean = |g: &Gate| {
        let s: f64 = rows
            .iter()
            .filter_map(|r| gate_outcome(g, r))
            .map(|o| o.score)
            .sum();
        s / rows.len().max(1) as f64
    };
    let first = candidates
        .first()
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| "docs.total".into());
    let mut best = make(&first, f64::MAX, true);
    let mut best_mean = mean(&best);
    for (name, t) in &candidates {
        for below in [true, false] {
            let g = make(name, *t, below);
            let m = mean(&g);
            if m > best_mean + 1e-12 {
                best = g;
                best_mean = m;
            }
        }
    }
    best
}

/// The columns a family's models read: every feature of its training rows that varies among
/// them, identical columns kept once.
fn columns(rows: &[&CaseRow]) -> Vec<String> {
    let names: BTreeSet<&String> = rows.iter().flat_map(|r| r.features.keys()).collect();
    let mut seen: BTreeSet<Vec<u64>> = BTreeSet::new();
    names
        .into_iter()
        .filter(|n| {
            let col: Vec<u64> = rows
                .iter()
                .map(|r| r.features.get(*n).copied().unwrap_or(-1.0).to_bits())
                .collect();
            col.iter().any(|v| *v != col[0]) && seen.insert(col)
        })
        .cloned()
        .collect()
}

fn matrix(rows: &[&CaseRow], cols: &[String]) -> Vec<Vec<f64>> {
    rows.iter()
        .map(|r| {
            cols.iter()
                .map(|c| r.features.get(c).copied().unwrap_or(-1.0))
                .collect()
        })
        .collect()
}

type Regressor = RandomForestRegressor<f64, f64, DenseMatrix<f64>, Vec<f64>>;
type Classifier = RandomForestClassifier<f64, u32, DenseMatrix<f64>, Vec<u32>>;

/// The learner of one family: a regressor per strategy over the blind-visible columns; it plays
/// the strategy with the highest predicted score.
pub struct Learner {
    cols: Vec<String>,
    models: Vec<(Arm, Regressor)>,
    /// The strategy with the best training mean (played when no model could be fitted).
    pub fallback: Arm,
}

/// The strategy with the best mean over `rows` (the first of [`Arm::all`] on a tie).
pub fn best_arm(rows: &[&CaseRow]) -> Arm {
    let mut best = (Arm::ChecklistPay, f64::MIN);
    for a in Arm::all() {
        let m = rows
            .iter()
            .filter_map(|r| r.outcomes.get(&a))
            .map(|o| o.score)
            .sum::<f64>()
            / rows.len().max(1) as f64;
        if m > best.1 + 1e-12 {
            best = (a, m);
        }
    }
    best.0
}

impl Learner {
    pub fn fit(rows: &[&CaseRow], seed: u64) -> Self {
        let cols = columns(rows);
        let fallback = best_arm(rows);
        let mut models = Vec::new();
        if rows.len() >= 6 && !cols.is_empty() {
            let x = matrix(rows, &cols);
            for a in Arm::all() {
                let y: Vec<f64> = rows
                    .iter()
                    .map(|r| r.outcomes.get(&a).map_or(0.0, |o| o.score))
                    .collect();
                let params = RandomForestRegressorParameters::default()
                    .with_n_trees(40)
                    .with_max_depth(6)
                    .with_min_samples_leaf(2)
                    .with_seed(seed);
                if let Ok(m) =
                    DenseMatrix::from_2d_vec(&x).and_then(|m| Regressor::fit(&m, &y, params))
                {
                    models.push((a, m));
                }
            }
        }
        Self {
            cols,
            models,
            fallback,
        }
    }

    /// The strategy the learner plays on each row.
    pub fn choose(&self, rows: &[&CaseRow]) -> Vec<Arm> {
        if self.models.is_empty() || rows.is_empty() {
            return vec![self.fallback; rows.len()];
        }
        let Ok(x) = DenseMatrix::from_2d_vec(&matrix(rows, &self.cols)) else {
            return vec![self.fallback; rows.len()];
        };
        let preds: Vec<(Arm, Vec<f64>)> = self
            .models
            .iter()
            .filter_map(|(a, m)| m.predict(&x).ok().map(|p| (*a, p)))
            .collect();
        (0..rows.len())
            .map(|i| {
                preds
                    .iter()
                    .fold((self.fallback, f64::MIN), |best, (a, p)| {
                        if p[i] > best.1 + 1e-12 {
                            (*a, p[i])
                        } else {
                            best
                        }
                    })
                    .0
            })
            .collect()
    }
}

/// A class-balanced random-forest classifier of risky vs benign over a family's blind-visible
/// columns (the minority class repeated until both weigh the same); `None` when the training rows
/// lack a class.
pub fn label_classifier(rows: &[&CaseRow], seed: u64) -> Option<(Vec<String>, Classifier)> {
    let cols = columns(rows);
    let pos: Vec<&CaseRow> = rows.iter().copied().filter(|r| r.risky).collect();
    let neg: Vec<&CaseRow> = rows.iter().copied().filter(|r| !r.risky).collect();
    if pos.is_empty() || neg.is_empty() || cols.is_empty() {
        return None;
    }
    let n = pos.len().max(neg.len());
    let mut balanced = Vec::with_capacity(2 * n);
    let mut y = Vec::with_capacity(2 * n);
    for i in 0..n {
        balanced.push(pos[i % pos.len()]);
        y.push(1u32);
        balanced.push(neg[i % neg.len()]);
        y.push(0u32);
    }
    let params = RandomForestClassifierParameters::default()
        .with_n_trees(60)
        .with_max_depth(6)
        .with_min_samples_leaf(2)
        .with_seed(seed);
    let m = DenseMatrix::from_2d_vec(&matrix(&balanced, &cols))
        .and_then(|x| Classifier::fit(&x, &y, params))
        .ok()?;
    Some((cols, m))
}

/// Predicted "risky" per row (all false when prediction fails).
pub fn classify(model: &(Vec<String>, Classifier), rows: &[&CaseRow]) -> Vec<bool> {
    DenseMatrix::from_2d_vec(&matrix(rows, &model.0))
        .and_then(|x| model.1.predict(&x))
        .map(|y| y.into_iter().map(|v| v == 1).collect())
        .unwrap_or_else(|_| vec![false; rows.len()])
}

/// Balanced accuracy of `pred` against `truth` (0.5 when one class is absent).
pub fn balanced_accuracy(truth: &[bool], pred: &[bool]) -> f64 {
    let recall = |class: bool| {
        let idx: Vec<usize> = (0..truth.len()).filter(|&i| truth[i] == class).collect();
        if idx.is_empty() {
            return None;
        }
        Some(idx.iter().filter(|&&i| pred[i] == class).count() as f64 / idx.len() as f64)
    };
    match (recall(true), recall(false)) {
        (Some(a), Some(b)) => (a + b) / 2.0,
        _ => 0.5,
    }
}

/// Balanced accuracy within each pool kind, averaged with the kinds' sizes as weights (kinds with
/// fewer than two cases of either class are left out; with none left, the pooled figure). The
/// kinds' base rates differ by design (a quarter is mostly clean), so a pooled figure would credit
/// a field that only names the kind.
pub fn stratified_balanced_accuracy(rows: &[&CaseRow], pred: &[bool]) -> f64 {
    let kinds: BTreeSet<&str> = rows.iter().map(|r| r.pool.as_str()).collect();
    let (mut sum, mut weight) = (0.0, 0.0);
    for k in kinds {
        let idx: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].pool == k).collect();
        let pos = idx.iter().filter(|&&i| rows[i].risky).count();
        if pos < 2 || idx.len() - pos < 2 {
            continue;
        }
        let truth: Vec<bool> = idx.iter().map(|&i| rows[i].risky).collect();
        let p: Vec<bool> = idx.iter().map(|&i| pred[i]).collect();
        sum += balanced_accuracy(&truth, &p) * idx.len() as f64;
        weight += idx.len() as f64;
    }
    if weight == 0.0 {
        let truth: Vec<bool> = rows.iter().map(|r| r.risky).collect();
        return balanced_accuracy(&truth, pred);
    }
    sum / weight
}

/// The standard normal quantile for an upper-tail probability `alpha` (0 < alpha < 0.5):
/// Abramowitz & Stegun 26.2.23, absolute error under 4.5e-4.
pub fn upper_quantile(alpha: f64) -> f64 {
    let t = (-2.0 * alpha.clamp(1e-300, 0.5).ln()).sqrt();
    t - (2.515_517 + 0.802_853 * t + 0.010_328 * t * t)
        / (1.0 + 1.432_788 * t + 0.189_269 * t * t + 0.001_308 * t * t * t)
}

/// The one-sided sampling allowance, at upper-tail probability `alpha`, of a balanced accuracy
/// measured on `pos` risky and `neg` benign cases (its standard error under no signal times the
/// normal quantile).
pub fn sampling_allowance(pos: usize, neg: usize, alpha: f64) -> f64 {
    let (p, n) = (pos.max(1) as f64, neg.max(1) as f64);
    upper_quantile(alpha) * 0.5 * (0.25 / p + 0.25 / n).sqrt()
}

/// One field's single-field balanced accuracy in one family.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FieldLeak {
    pub family: String,
    pub feature: String,
    pub balanced_accuracy: f64,
}

/// A non-monotone single-feature predictor: value (or bin) → majority label, each class
/// reweighted so the majority is balanced; unseen keys get the label of the larger class.
fn fit_map(keys: &[i64], labels: &[bool]) -> (BTreeMap<i64, bool>, bool) {
    let pos = labels.iter().filter(|&&l| l).count().max(1) as f64;
    let neg = labels.iter().filter(|&&l| !l).count().max(1) as f64;
    let mut score: BTreeMap<i64, f64> = BTreeMap::new();
    for (k, &l) in keys.iter().zip(labels) {
        *score.entry(*k).or_default() += if l { 1.0 / pos } else { -1.0 / neg };
    }
    (
        score.into_iter().map(|(k, s)| (k, s > 0.0)).collect(),
        pos >= neg,
    )
}

fn quartile_edges(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return Vec::new();
    }
    let mut e: Vec<f64> = (1..4)
        .map(|q| v[(v.len() * q / 4).min(v.len() - 1)])
        .collect();
    e.dedup();
    e
}

/// Per family, every single field as a predictor of the label (value → majority label, and for
/// numbers quartile bins → majority label, the better of the two), fitted on `train` and scored on `test`
/// within each pool kind ([`stratified_balanced_accuracy`]); best first.
pub fn field_scan(train: &[CaseRow], test: &[CaseRow]) -> Vec<FieldLeak> {
    let mut out = Vec::new();
    let families: BTreeSet<&str> = train.iter().map(|r| r.family.as_str()).collect();
    for fam in families {
        let tr: Vec<&CaseRow> = train.iter().filter(|r| r.family == fam).collect();
        let te: Vec<&CaseRow> = test.iter().filter(|r| r.family == fam).collect();
        if te.is_empty() || tr.iter().all(|r| r.risky) || tr.iter().all(|r| !r.risky) {
            continue;
        }
        let ytr: Vec<bool> = tr.iter().map(|r| r.risky).collect();
        for name in columns(&tr) {
            let get = |r: &&CaseRow| r.features.get(&name).copied().unwrap_or(-1.0);
            let xtr: Vec<f64> = tr.iter().map(get).collect();
            let xte: Vec<f64> = te.iter().map(get).collect();
            // A string's code is a category: its value, never its bin (bins of hash codes are
            // arbitrary groups of values).
            let edges = if name.ends_with("#code") {
                Vec::new()
            } else {
                quartile_edges(&xtr)
            };
            let keys: [&dyn Fn(f64) -> i64; 2] =
                [&|x: f64| (x * 1000.0).round() as i64, &|x: f64| {
                    edges.iter().filter(|&&e| x >= e).count() as i64
                }];
            let best = keys
                .iter()
                .take(if edges.is_empty() { 1 } else { 2 })
                .map(|key| {
                    let ktr: Vec<i64> = xtr.iter().map(|&x| key(x)).collect();
                    let (map, fallback) = fit_map(&ktr, &ytr);
                    let pred: Vec<bool> = xte
                        .iter()
                        .map(|&x| *map.get(&key(x)).unwrap_or(&fallback))
                        .collect();
                    stratified_balanced_accuracy(&te, &pred)
                })
                .fold(0.0, f64::max);
            out.push(FieldLeak {
                family: fam.to_owned(),
                feature: name,
                balanced_accuracy: best,
            });
        }
    }
    out.sort_by(|a, b| {
        b.balanced_accuracy
            .total_cmp(&a.balanced_accuracy)
            .then_with(|| a.family.cmp(&b.family))
            .then_with(|| a.feature.cmp(&b.feature))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quantile_matches_known_values() {
        for (alpha, z) in [
            (0.05, 1.6449),
            (0.025, 1.9600),
            (0.01, 2.3263),
            (0.001, 3.0902),
        ] {
            assert!((upper_quantile(alpha) - z).abs() < 1e-3, "{alpha}");
        }
        // 50 risky and 50 benign cases: the balanced accuracy's standard error is 0.05.
        assert!((sampling_allowance(50, 50, 0.05) - 1.6449 * 0.05).abs() < 1e-3);
    }

    #[test]
    fn balanced_accuracy_of_known_predictors() {
        let truth = [true, false, true, false];
        assert_eq!(balanced_accuracy(&truth, &truth), 1.0);
        assert_eq!(balanced_accuracy(&truth, &[true; 4]), 0.5);
        assert_eq!(balanced_accuracy(&[true, true], &[false, true]), 0.5);
    }
}
