//! Self-improvement: a critic built from a campaign's real grades, a candidate checklist for the
//! baseline auditor, and a regression gate evaluated on real episodes over disjoint seed pools.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::baseline::{self, BaselineConfig};
use crate::error::AuditError;
use crate::grading::GradeResult;
use crate::model::{limits, ErrorType};
use crate::util::{self, round_n};

pub const TRAIN_GAIN_MIN: f64 = 0.005;
pub const TRANSFER_MIN: f64 = -0.002;
pub const PER_SEED_REGRESSION_MAX: f64 = 0.02;
pub const HIGH_FP_RATE: f64 = 0.30;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CriticReport {
    pub missed_error_types: Vec<String>,
    pub high_fp_agents: Vec<String>,
    pub cross_period_gaps: Vec<String>,
    pub checklist_updates: Vec<String>,
    pub overall_diagnosis: String,
}

/// Build the critic from final grades per (period, role) and vendor memory gaps.
pub fn critic(grades: &[(u32, String, GradeResult)], gaps: Vec<String>) -> CriticReport {
    let mut missed: BTreeSet<String> = BTreeSet::new();
    let mut fp_by_role: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (_, role, g) in grades {
        for (t, e) in &g.confusion_matrix {
            if e.missed > 0 {
                missed.insert(t.clone());
            }
        }
        let x = fp_by_role.entry(role.clone()).or_default();
        x.0 += g.true_positives;
        x.1 += g.false_positives + g.partial_matches;
    }
    let high_fp: Vec<String> = fp_by_role
        .iter()
        .filter(|(_, (tp, fp))| tp + fp > 0 && *fp as f64 / (tp + fp) as f64 > HIGH_FP_RATE)
        .map(|(r, _)| r.clone())
        .collect();
    let mut updates: Vec<String> = missed.iter().map(|t| format!("add check: {t}")).collect();
    updates.extend(
        high_fp
            .iter()
            .map(|r| format!("{r}: require documentary evidence before flagging")),
    );
    updates.extend(gaps.iter().map(|g| format!("re-review: {g}")));
    let diagnosis = if grades.is_empty() {
        "no completed specialist submissions yet; nothing to learn from".to_string()
    } else {
        format!(
            "{} missed error type(s), {} high-false-positive role(s), {} cross-period gap(s)",
            missed.len(),
            high_fp.len(),
            gaps.len()
        )
    };
    CriticReport {
        missed_error_types: missed.into_iter().collect(),
        high_fp_agents: high_fp,
        cross_period_gaps: gaps,
        checklist_updates: updates,
        overall_diagnosis: diagnosis,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvalSummary {
    /// Mean score per held-out seed, in the order of `seeds` (the reference's list).
    pub scores: Vec<f64>,
    pub seeds: Vec<u64>,
    pub mean_score: f64,
    pub safety_regression: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IterationRecord {
    pub iteration: usize,
    pub train_seeds: Vec<u64>,
    pub held_out_seeds: Vec<u64>,
    pub critic: CriticReport,
    pub baseline: EvalSummary,
    pub candidate: EvalSummary,
    pub train_delta: f64,
    pub transfer_delta: f64,
    pub delta: f64,
    pub accepted: bool,
    pub gate: String,
}

pub fn validate_seeds(train: &[u64], held: &[u64]) -> Result<(), AuditError> {
    if train.is_empty() || held.is_empty() {
        return Err(AuditError::invalid(
            "train_seeds",
            "train_seeds and held_out_seeds must be non-empty",
        ));
    }
    if train.len() > limits::MAX_SELF_IMPROVE_SEEDS || held.len() > limits::MAX_SELF_IMPROVE_SEEDS {
        return Err(AuditError::invalid(
            "train_seeds",
            format!("at most {} seeds per pool", limits::MAX_SELF_IMPROVE_SEEDS),
        ));
    }
    let a: BTreeSet<u64> = train.iter().copied().collect();
    if held.iter().any(|s| a.contains(s)) {
        return Err(AuditError::invalid(
            "held_out_seeds",
            "train_seeds and held_out_seeds must be disjoint",
        ));
    }
    // Every seed that is not held out is a training seed (docs/audit.md); the gate's own
    // "held-out" pool may be any seeds disjoint from the training ones (the reference's campaign
    // test uses train [1, 2, 3] and held-out [4, 5]). What is never allowed is training the
    // checklist on the sealed evaluation seeds.
    if let Some(s) = train.iter().find(|s| crate::model::is_held_out(**s)) {
        return Err(AuditError::invalid(
            "train_seeds",
            format!("seed {s} is held out (100-104, 100000-109999): training seeds are every other seed"),
        ));
    }
    Ok(())
}

fn per_seed(seeds: &[u64], cfg: &BaselineConfig) -> BTreeMap<u64, f64> {
    let r = baseline::run(seeds, cfg);
    seeds
        .iter()
        .map(|s| {
            let v = r.tasks.values().filter_map(|t| t.scores.get(s).copied());
            (*s, round_n(util::mean(v), 4))
        })
        .collect()
}

fn mean(m: &BTreeMap<u64, f64>) -> f64 {
    round_n(util::mean(m.values().copied()), 4)
}

/// One iteration: critic → candidate checklist → real evaluation → gate.
pub fn iterate(
    iteration: usize,
    current: &BaselineConfig,
    critic: CriticReport,
    train: &[u64],
    held: &[u64],
) -> Result<(IterationRecord, Option<BaselineConfig>), AuditError> {
    validate_seeds(train, held)?;
    let mut cand = current.clone();
    for t in &critic.missed_error_types {
        if let Some(e) = ErrorType::parse(t) {
            cand.enabled.insert(e);
        }
    }
    let bt = per_seed(train, current);
    let ct = if cand == *current {
        bt.clone()
    } else {
        per_seed(train, &cand)
    };
    let bh = per_seed(held, current);
    let ch = if cand == *current {
        bh.clone()
    } else {
        per_seed(held, &cand)
    };
    let regression = held.iter().any(|s| ch[s] + PER_SEED_REGRESSION_MAX < bh[s]);
    let train_delta = round_n(mean(&ct) - mean(&bt), 4);
    let transfer = round_n(mean(&ch) - mean(&bh), 4);
    let accepted = train_delta > TRAIN_GAIN_MIN && transfer > TRANSFER_MIN && !regression;
    let gate = format!(
        "train_delta {train_delta} > {TRAIN_GAIN_MIN}: {}; transfer_delta {transfer} > {TRANSFER_MIN}: {}; no per-seed regression > {PER_SEED_REGRESSION_MAX}: {}",
        train_delta > TRAIN_GAIN_MIN, transfer > TRANSFER_MIN, !regression
    );
    let rec = IterationRecord {
        iteration,
        train_seeds: train.to_vec(),
        held_out_seeds: held.to_vec(),
        critic,
        baseline: EvalSummary {
            scores: held.iter().map(|s| bh[s]).collect(),
            seeds: held.to_vec(),
            mean_score: mean(&bh),
            safety_regression: false,
        },
        candidate: EvalSummary {
            scores: held.iter().map(|s| ch[s]).collect(),
            seeds: held.to_vec(),
            mean_score: mean(&ch),
            safety_regression: regression,
        },
        train_delta,
        transfer_delta: transfer,
        delta: transfer,
        accepted,
        gate,
    };
    Ok((rec, accepted.then_some(cand)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_pools_enforced() {
        assert!(validate_seeds(&[42, 43], &[100]).is_ok());
        assert!(validate_seeds(&[42, 100], &[100])
            .unwrap_err()
            .to_string()
            .contains("disjoint"));
        assert!(validate_seeds(&[], &[100]).is_err());
        // Every seed that is not held out trains (the reference's campaign test: train
        // [1, 2, 3], gate pool [4, 5]); a held-out seed never does.
        assert!(validate_seeds(&[7], &[100]).is_ok());
        assert!(validate_seeds(&[1, 2, 3], &[4, 5]).is_ok());
        assert!(validate_seeds(&[1, 2, 3], &[3, 4]).is_err());
        let e = validate_seeds(&[42, 107_023], &[100])
            .unwrap_err()
            .to_string();
        assert!(e.contains("held out"), "{e}");
    }

    #[test]
    fn critic_driven_candidate_can_be_accepted() {
        let c = CriticReport {
            missed_error_types: vec!["cumulative_breach".into(), "cascading_total".into()],
            high_fp_agents: vec![],
            cross_period_gaps: vec![],
            checklist_updates: vec![],
            overall_diagnosis: String::new(),
        };
        let (rec, cfg) = iterate(1, &BaselineConfig::default(), c, &[42, 43], &[100, 101]).unwrap();
        assert!(rec.train_delta > 0.0);
        assert_eq!(rec.accepted, cfg.is_some());
        assert!(rec.accepted, "{}", rec.gate);
        let empty = CriticReport {
            missed_error_types: vec![],
            high_fp_agents: vec![],
            cross_period_gaps: vec![],
            checklist_updates: vec![],
            overall_diagnosis: String::new(),
        };
        let (rec, cfg) = iterate(2, &BaselineConfig::default(), empty, &[42], &[100]).unwrap();
        assert!(
            !rec.accepted && cfg.is_none(),
            "no change cannot pass the gate"
        );
    }
}
