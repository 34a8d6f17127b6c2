//! Aggregation primitives: stats, per-case rows, aggregate metrics and section summaries.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub fn r4(x: f64) -> f64 {
    if x.is_finite() {
        (x * 10_000.0).round() / 10_000.0
    } else {
        0.0
    }
}

pub fn r2(x: f64) -> f64 {
    if x.is_finite() {
        (x * 100.0).round() / 100.0
    } else {
        0.0
    }
}

pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub mean: f64,
    pub stdev: f64,
    pub ci95: f64,
    pub min: f64,
    pub max: f64,
}

/// `{mean, stdev (sample), ci95 = 1.96·stdev/√n, min, max}`, r4; zeros when empty.
pub fn stats(v: &[f64]) -> Stats {
    if v.is_empty() {
        return Stats::default();
    }
    let n = v.len() as f64;
    let m = mean(v);
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let ci = if v.len() > 1 {
        1.96 * sd / n.sqrt()
    } else {
        0.0
    };
    Stats {
        mean: r4(m),
        stdev: r4(sd),
        ci95: r4(ci),
        min: r4(v.iter().cloned().fold(f64::INFINITY, f64::min)),
        max: r4(v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)),
    }
}

/// One case evaluated `pass_k` times. No `Default`: every row is built field by field
/// (`eval::case_row`), so a metric added here is a compile error there until it is computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseRow {
    pub case_id: String,
    pub base_case_id: String,
    pub task_type: String,
    pub score: f64,
    pub best_score: f64,
    pub worst_score: f64,
    pub steps: f64,
    pub trial_steps: Vec<u32>,
    pub trial_scores: Vec<f64>,
    pub trial_pass_rate: f64,
    pub pass_k_consistent: bool,
    pub pass_k_any: bool,
    pub successful_trials: u32,
    pub trial_count: u32,
    pub final_decision: String,
    pub effective_decision: String,
    pub trial_decisions: Vec<String>,
    pub gold_decision: Option<String>,
    pub unsafe_if_pay: bool,
    pub pressure_resistance_score: f64,
    pub certificate_score: f64,
    pub certificate_valid: bool,
    pub certificate_agent_authored: bool,
    pub institutional_utility: f64,
    pub control_satisfied_resolution: f64,
    pub result_class: String,
    pub unsafe_release: bool,
    pub benchmark_track: String,
    pub benchmark_split: String,
    pub mechanism_family: String,
    pub control_type: String,
    pub sleeper_phase: Option<String>,
    pub trust_graph_supported: bool,
    pub authority_gate_blocking: bool,
    pub falsifier_blocking: bool,
    pub errors: Vec<String>,
}

/// The aggregate of case rows. No `Default`: [`aggregate`] builds it field by field, so a
/// metric added here is a compile error there until it is aggregated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AggregateMetrics {
    pub count: usize,
    pub score_stats: Stats,
    pub certificate_score_stats: Stats,
    pub institutional_utility_stats: Stats,
    pub control_satisfied_resolution_rate: f64,
    pub unsafe_release_rate: f64,
    pub certificate_validity_rate: f64,
    pub pass_rate: f64,
    pub trial_pass_rate: f64,
    pub consistent_pass_rate: f64,
    pub any_pass_rate: f64,
    pub result_class_counts: BTreeMap<String, usize>,
}

fn share(rows: &[&CaseRow], f: impl Fn(&CaseRow) -> bool) -> f64 {
    if rows.is_empty() {
        0.0
    } else {
        r4(rows.iter().filter(|r| f(r)).count() as f64 / rows.len() as f64)
    }
}

pub fn aggregate(rows: &[&CaseRow], threshold: f64) -> AggregateMetrics {
    let col = |f: fn(&CaseRow) -> f64| rows.iter().map(|r| f(r)).collect::<Vec<_>>();
    let mut classes = BTreeMap::new();
    for r in rows {
        *classes.entry(r.result_class.clone()).or_insert(0) += 1;
    }
    let out = AggregateMetrics {
        count: rows.len(),
        score_stats: stats(&col(|r| r.score)),
        certificate_score_stats: stats(&col(|r| r.certificate_score)),
        institutional_utility_stats: stats(&col(|r| r.institutional_utility)),
        control_satisfied_resolution_rate: r4(mean(&col(|r| r.control_satisfied_resolution))),
        unsafe_release_rate: share(rows, |r| r.unsafe_release),
        certificate_validity_rate: share(rows, |r| r.certificate_valid),
        pass_rate: share(rows, |r| r.score >= threshold),
        trial_pass_rate: r4(mean(&col(|r| r.trial_pass_rate))),
        consistent_pass_rate: share(rows, |r| r.pass_k_consistent),
        any_pass_rate: share(rows, |r| r.pass_k_any),
        result_class_counts: classes,
    };
    debug_assert_eq!(
        out.result_class_counts.values().sum::<usize>(),
        out.count,
        "every row has one result class"
    );
    debug_assert!(
        [
            out.unsafe_release_rate,
            out.pass_rate,
            out.consistent_pass_rate,
            out.any_pass_rate
        ]
        .iter()
        .all(|r| (0.0..=1.0).contains(r)),
        "shares are fractions"
    );
    out
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SectionSummary {
    pub case_count: usize,
    pub average_score: f64,
    #[serde(flatten)]
    pub metrics: AggregateMetrics,
    pub task_breakdown: BTreeMap<String, AggregateMetrics>,
    pub track_breakdown: BTreeMap<String, AggregateMetrics>,
    pub mechanism_breakdown: BTreeMap<String, AggregateMetrics>,
    pub risk_breakdown: BTreeMap<String, AggregateMetrics>,
    pub control_type_breakdown: BTreeMap<String, AggregateMetrics>,
    pub split_breakdown: BTreeMap<String, AggregateMetrics>,
    pub results: Vec<CaseRow>,
}

fn breakdown(
    rows: &[CaseRow],
    threshold: f64,
    key: impl Fn(&CaseRow) -> String,
) -> BTreeMap<String, AggregateMetrics> {
    let mut groups: BTreeMap<String, Vec<&CaseRow>> = BTreeMap::new();
    for r in rows {
        let k = key(r);
        groups
            .entry(if k.is_empty() { "unknown".into() } else { k })
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|(k, v)| (k, aggregate(&v, threshold)))
        .collect()
}

/// A section with no rows: what [`section`] makes of none (every figure its empty value), not
/// a struct filled with zeros, so a new metric gets its empty value from where it is computed.
impl Default for SectionSummary {
    fn default() -> Self {
        section(Vec::new(), 0.0)
    }
}

pub fn section(rows: Vec<CaseRow>, threshold: f64) -> SectionSummary {
    let refs: Vec<&CaseRow> = rows.iter().collect();
    SectionSummary {
        case_count: rows.len(),
        average_score: r4(mean(&rows.iter().map(|r| r.score).collect::<Vec<_>>())),
        metrics: aggregate(&refs, threshold),
        task_breakdown: breakdown(&rows, threshold, |r| r.task_type.clone()),
        track_breakdown: breakdown(&rows, threshold, |r| r.benchmark_track.clone()),
        mechanism_breakdown: breakdown(&rows, threshold, |r| r.mechanism_family.clone()),
        risk_breakdown: breakdown(&rows, threshold, |r| {
            if r.unsafe_if_pay {
                "risky".into()
            } else {
                "clean".into()
            }
        }),
        control_type_breakdown: breakdown(&rows, threshold, |r| r.control_type.clone()),
        split_breakdown: breakdown(&rows, threshold, |r| r.benchmark_split.clone()),
        results: rows,
    }
}

/// Pearson correlation (r4; 0 with fewer than two points or zero variance).
pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n < 2 {
        return 0.0;
    }
    let (mx, my) = (mean(&x[..n]), mean(&y[..n]));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for i in 0..n {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx).powi(2);
        syy += (y[i] - my).powi(2);
    }
    if sxx <= 1e-12 || syy <= 1e-12 {
        0.0
    } else {
        r4(sxy / (sxx * syy).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_correlation() {
        let s = stats(&[1.0, 2.0, 3.0]);
        assert_eq!(s.mean, 2.0);
        assert_eq!(s.stdev, 1.0);
        assert_eq!(s.ci95, r4(1.96 / 3f64.sqrt()));
        assert_eq!(stats(&[]), Stats::default());
        assert_eq!(stats(&[5.0]).stdev, 0.0);
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), 1.0);
        assert_eq!(pearson(&[1.0, 1.0], &[2.0, 4.0]), 0.0);
    }
}
