//! Stage 14: the experiment suite. Real re-runs without each component (controls, artifact
//! waiting, the calibration gate; the certificate ablation comes from the certificate stage),
//! the baseline matrix of quarter profiles, cost sensitivity and the falsification tests.

use super::ablation::{ablation, Ablation, GateAblationRow, ABLATION_AGENT};
use super::certificate::CertificateRun;
use super::quarter::{QuarterProfile, QuarterRun};
use super::Ctx;
use crate::human::HumanBaselineSummary;
use crate::metrics::{mean, pearson, r4, CaseRow, SectionSummary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostSensitivity {
    pub available: bool,
    pub weight_scenarios: BTreeMap<String, BTreeMap<String, f64>>,
    pub scenario_scores: BTreeMap<String, BTreeMap<String, f64>>,
    pub scenario_rankings: BTreeMap<String, Vec<String>>,
    pub top3_rank_stability_vs_default: BTreeMap<String, f64>,
    pub ranking_stable: bool,
    pub note: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FalsificationTest {
    pub test: String,
    pub threshold: f64,
    pub observed: f64,
    pub falsified: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExperimentSuite {
    pub suite_version: String,
    pub baseline_matrix: Vec<QuarterProfile>,
    pub accuracy_vs_loss_correlation: Option<f64>,
    pub top_by_accuracy: String,
    pub top_by_institutional_loss_score: String,
    pub ranking_disagrees: bool,
    pub cost_sensitivity: CostSensitivity,
    pub ablations: Vec<Ablation>,
    pub trust_graph_support_rate: f64,
    pub trust_graph_cap_hit_rate: f64,
    pub human_baseline_status: String,
    pub falsification_tests: Vec<FalsificationTest>,
}

/// Weighted loss score with normalised weights (§4.9 cost sensitivity).
fn weighted(surface: &BTreeMap<String, f64>, w: &BTreeMap<String, f64>) -> f64 {
    let total: f64 = w.values().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let s: f64 = w
        .iter()
        .map(|(k, wt)| wt * surface.get(k).copied().unwrap_or(0.0))
        .sum();
    r4((1.0 - s / total).clamp(0.0, 1.0))
}

const RATIOS: [&str; 10] = [
    "fraud_loss_ratio",
    "false_positive_ratio",
    "operational_delay_ratio",
    "review_burn_ratio",
    "supplier_friction_ratio",
    "calibration_debt_ratio",
    "vigilance_loss_ratio",
    "compliance_breach_ratio",
    "authority_restriction_ratio",
    "catastrophic_event_ratio",
];

fn scenarios() -> BTreeMap<String, BTreeMap<String, f64>> {
    let table: [(&str, [f64; 10]); 4] = [
        (
            "default",
            [0.36, 0.12, 0.11, 0.10, 0.08, 0.10, 0.08, 0.05, 0.05, 0.10],
        ),
        (
            "fraud_dominant",
            [0.50, 0.07, 0.06, 0.06, 0.05, 0.08, 0.08, 0.04, 0.03, 0.20],
        ),
        (
            "operations_dominant",
            [0.22, 0.18, 0.18, 0.16, 0.14, 0.06, 0.04, 0.04, 0.08, 0.06],
        ),
        (
            "calibration_dominant",
            [0.25, 0.08, 0.08, 0.08, 0.06, 0.28, 0.06, 0.04, 0.12, 0.10],
        ),
    ];
    table
        .iter()
        .map(|(n, w)| {
            (
                (*n).to_owned(),
                RATIOS
                    .iter()
                    .zip(w)
                    .map(|(k, v)| ((*k).to_owned(), *v))
                    .collect(),
            )
        })
        .collect()
}

fn cost_sensitivity(profiles: &[QuarterProfile]) -> CostSensitivity {
    if profiles.iter().any(|p| p.loss_surface.is_empty()) || profiles.is_empty() {
        return CostSensitivity { note: "The environment's institutional memory exposes no loss surface, so weights cannot be varied.".into(), ..Default::default() };
    }
    let sc = scenarios();
    let mut scores = BTreeMap::new();
    let mut rankings = BTreeMap::new();
    for (name, w) in &sc {
        let s: BTreeMap<String, f64> = profiles
            .iter()
            .map(|p| (p.agent_name.clone(), weighted(&p.loss_surface, w)))
            .collect();
        let mut r: Vec<(String, f64)> = s.iter().map(|(k, v)| (k.clone(), *v)).collect();
        r.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        rankings.insert(name.clone(), r.into_iter().map(|x| x.0).collect::<Vec<_>>());
        scores.insert(name.clone(), s);
    }
    let top = |n: &str| {
        rankings
            .get(n)
            .map(|r: &Vec<String>| r.iter().take(3).cloned().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let base = top("default");
    let mut stab = BTreeMap::new();
    for n in sc.keys().filter(|n| *n != "default") {
        let t = top(n);
        let inter = t.iter().filter(|x| base.contains(x)).count();
        stab.insert(n.clone(), r4(inter as f64 / base.len().clamp(1, 3) as f64));
    }
    CostSensitivity {
        available: true,
        ranking_stable: stab.values().all(|v| *v >= 0.67),
        weight_scenarios: sc,
        scenario_scores: scores,
        scenario_rankings: rankings,
        top3_rank_stability_vs_default: stab,
        note: "Weighted scores normalise by the sum of weights; profiles come from real agent runs on the same sequence.".into(),
    }
}

/// The calibration-gate ablation: every ladder agent's quarter re-run with the gate off. Its
/// headline figures are the first of `headline` (the ablation agent, else the protocol agent)
/// that played the quarter.
fn gate_ablation(headline: &[&str], rows: Vec<GateAblationRow>) -> Ablation {
    let Some(p) = headline
        .iter()
        .find_map(|a| rows.iter().find(|r| r.agent_name == *a))
        .cloned()
    else {
        return Ablation {
            name: "calibration_gate_ablation".into(),
            component: "calibration-gated authority".into(),
            method: "not run".into(),
            available: false,
            note: "The ControlBench quarter was not played, so the gate could not be ablated."
                .into(),
            ..Default::default()
        };
    };
    let affected = rows.iter().filter(|r| r.gate_penalty.abs() > 0.01).count();
    let mean_penalty = mean(&rows.iter().map(|r| r.gate_penalty).collect::<Vec<_>>());
    Ablation {
        name: "calibration_gate_ablation".into(),
        component: "calibration-gated authority".into(),
        method: "every ladder agent's ControlBench quarter re-played with the institution's calibration gate switched off (calibration measured, authority never restricted); scores are institutional loss scores".into(),
        available: true,
        with_component_score: p.with_gate_score,
        without_component_score: p.gate_disabled_score,
        delta: r4(p.with_gate_score - p.gate_disabled_score),
        without_unsafe_release_rate: p.gate_disabled_unsafe_release_rate,
        without_result_class_counts: BTreeMap::new(),
        note: format!(
            "average gate penalty (disabled − with gate) {:.4}; {affected} of {} agents affected (|penalty| > 0.01)",
            r4(mean_penalty),
            rows.len()
        ),
        rows,
    }
}

/// The experiment suite. `public_reference` is the public section of [`ABLATION_AGENT`], the
/// agent the `teacher-no-*` re-runs ablate: "with" is always its own run, whichever agent the
/// ladder lists first (`report --agents naive-pay,llm` compared naive-pay with the teacher's
/// ablations and reported every delta with the wrong sign).
pub fn run(
    ctx: &Ctx<'_>,
    public_reference: &SectionSummary,
    quarter: &QuarterRun,
    certificate: &CertificateRun,
    human: &HumanBaselineSummary,
) -> ExperimentSuite {
    let mut ablations: Vec<Ablation> = certificate.ablation.iter().cloned().collect();
    let controls_off = ctx.evaluate_public("teacher-no-controls");
    ablations.push(ablation(
        "controls_ablation",
        "interventions (callbacks, approval chains, duplicate review, security, freeze, handoff)",
        "teacher re-run on the public cases with interventions switched off",
        public_reference,
        &controls_off,
    ));
    let wait_off = ctx.evaluate_public("teacher-no-artifact-wait");
    ablations.push(ablation(
        "artifact_wait_ablation",
        "waiting for delayed artifacts",
        "teacher re-run on the public cases submitting without waiting for pending artifacts",
        public_reference,
        &wait_off,
    ));
    ablations.push(gate_ablation(
        &[ABLATION_AGENT, ctx.primary],
        quarter.gate_rows.clone(),
    ));
    let matrix: Vec<QuarterProfile> = quarter.profiles.values().cloned().collect();
    let corr = if matrix.iter().all(|p| p.institutional_loss_score.is_some()) && matrix.len() >= 2 {
        Some(pearson(
            &matrix.iter().map(|p| p.accuracy).collect::<Vec<_>>(),
            &matrix
                .iter()
                .map(|p| p.institutional_loss_score.unwrap_or(0.0))
                .collect::<Vec<_>>(),
        ))
    } else {
        None
    };
    let top_by = |f: &dyn Fn(&QuarterProfile) -> f64| {
        matrix
            .iter()
            .max_by(|a, b| f(a).total_cmp(&f(b)).then(b.agent_name.cmp(&a.agent_name)))
            .map(|p| p.agent_name.clone())
            .unwrap_or_default()
    };
    let top_acc = top_by(&|p| p.accuracy);
    let top_loss = top_by(&|p| p.institutional_loss_score.unwrap_or(p.average_case_score));
    let controls_delta = r4(public_reference.average_score - controls_off.average_score);
    let falsification_tests =
        falsification_tests(corr, &top_loss, &matrix, &ablations, controls_delta);
    let (tg_support, tg_cap_hit) = trust_graph_rates(&quarter.primary_rows);
    ExperimentSuite {
        suite_version: "controlbench-experiments-v1".into(),
        accuracy_vs_loss_correlation: corr,
        ranking_disagrees: top_acc != top_loss,
        top_by_accuracy: top_acc,
        top_by_institutional_loss_score: top_loss,
        cost_sensitivity: cost_sensitivity(&matrix),
        baseline_matrix: matrix,
        ablations,
        trust_graph_support_rate: tg_support,
        trust_graph_cap_hit_rate: tg_cap_hit,
        human_baseline_status: if human.available {
            format!("{} participants loaded", human.participant_count)
        } else {
            format!("no human data: {}", human.note)
        },
        falsification_tests,
    }
}

/// The share of the primary agent's quarter rows whose decision the TrustGraph supports, and
/// its complement (both 0 without rows).
fn trust_graph_rates(rows: &[CaseRow]) -> (f64, f64) {
    if rows.is_empty() {
        return (0.0, 0.0);
    }
    let support =
        r4(rows.iter().filter(|r| r.trust_graph_supported).count() as f64 / rows.len() as f64);
    (support, r4(1.0 - support))
}

fn falsification_tests(
    corr: Option<f64>,
    top_loss: &str,
    matrix: &[QuarterProfile],
    ablations: &[Ablation],
    controls_delta: f64,
) -> Vec<FalsificationTest> {
    let mut tests = Vec::new();
    if let Some(c) = corr {
        tests.push(FalsificationTest {
            test: "accuracy_correlates_too_strongly_with_loss".into(),
            threshold: 0.95,
            observed: c.abs(),
            falsified: c.abs() > 0.95,
        });
    }
    for (agent, test) in [
        ("always-escalate", "always_escalate_wins"),
        ("naive-pay", "always_pay_wins"),
    ] {
        if !matrix.is_empty() {
            tests.push(FalsificationTest {
                test: test.into(),
                threshold: 0.0,
                observed: if top_loss == agent { 1.0 } else { 0.0 },
                falsified: top_loss == agent,
            });
        }
    }
    if !matrix.is_empty() && matrix.iter().any(|p| p.sleeper_activation_count > 0) {
        let rates: Vec<f64> = matrix.iter().map(|p| p.sleeper_detection_rate).collect();
        let degenerate = rates.iter().all(|r| *r == 0.0) || rates.iter().all(|r| *r == 1.0);
        tests.push(FalsificationTest {
            test: "all_or_no_agents_catch_sleepers".into(),
            threshold: 0.0,
            observed: if degenerate { 1.0 } else { 0.0 },
            falsified: degenerate,
        });
    }
    // Judged on the real re-run without a certificate (not on compatibility vs strict means,
    // which coincide for an agent whose certificates are valid).
    if let Some(ab) = ablations.iter().find(|a| a.name == "certificate_ablation") {
        tests.push(FalsificationTest {
            test: "certificate_validity_does_not_affect_score".into(),
            threshold: 0.0,
            observed: ab.delta,
            falsified: ab.delta == 0.0,
        });
    }
    tests.push(FalsificationTest {
        test: "controls_have_no_effect".into(),
        threshold: 0.01,
        observed: controls_delta,
        falsified: controls_delta.abs() <= 0.01,
    });
    tests
}
