//! The benchmark report: every documented track, built in the documented order.

use crate::eval::{
    evaluate_cases, pool_of, run_sequence, run_sequence_gated, AgentFactory, EvalConfig,
    MemorySnapshot, SequenceOutcome, TimelinePoint,
};
use crate::gen::CaseSource;
use crate::human::{self, HumanBaselineSummary};
use crate::metrics::{mean, pearson, r2, r4, section, stats, CaseRow, SectionSummary, Stats};
use ls_agents::{offline_agent, Agent};
use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::{CasePool, TrackMode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub const BENCHMARK: &str = "ledgershield-controlbench-v1";
pub const STANDARD_SEQUENCE_LENGTH: usize = 100;
/// Longest ControlBench sequence a report runs.
pub const MAX_SEQUENCE_LENGTH: usize = 1000;

#[derive(Debug, Clone)]
pub struct ReportConfig {
    pub pass_k: u32,
    pub pass_threshold: f64,
    pub temperature: f64,
    pub holdout_seeds: Vec<u64>,
    pub variants_per_case: usize,
    pub controlbench_sequence_length: usize,
    pub sequence_seed: u64,
    pub seed: u64,
    /// The protocol agent (full sections).
    pub primary_agent: String,
    /// Every agent on the ladder (public, holdout, contrastive, quarter).
    pub agents: Vec<String>,
    pub human_baseline_path: Option<PathBuf>,
    pub generated_at: String,
    /// Stored runs to include on the ladder (read by the caller from the store).
    pub stored_runs: Vec<crate::stored::StoredRunInput>,
}

impl Default for ReportConfig {
    fn default() -> Self {
        Self {
            pass_k: 1,
            pass_threshold: 0.85,
            temperature: 0.0,
            holdout_seeds: vec![2026, 2027, 2028],
            variants_per_case: 1,
            controlbench_sequence_length: STANDARD_SEQUENCE_LENGTH,
            sequence_seed: 2026,
            seed: 7,
            primary_agent: "teacher".into(),
            agents: vec![
                "teacher".into(),
                "random".into(),
                "naive-pay".into(),
                "always-escalate".into(),
            ],
            human_baseline_path: None,
            generated_at: String::new(),
            stored_runs: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvaluationProtocol {
    pub pass_threshold: f64,
    pub pass_k: u32,
    pub temperature: f64,
    pub holdout_seeds: Vec<u64>,
    pub variants_per_case: usize,
    pub controlbench_sequence_length: usize,
    pub controlbench_standard_sequence_length: usize,
    pub sequence_seed: u64,
    pub model_name: String,
    pub agent_type: String,
    pub track_mode: String,
    pub generator: String,
    pub pass_k_definition: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unavailable {
    pub track: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HoldoutSeedReport {
    pub seed: u64,
    pub case_count: usize,
    pub average_score: f64,
    pub score_stats: Stats,
    pub trial_pass_rate: f64,
    pub consistent_pass_rate: f64,
    pub any_pass_rate: f64,
    pub results: Vec<CaseRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HoldoutSection {
    pub seed_count: usize,
    pub variants_per_case: usize,
    pub total_case_count: usize,
    pub average_score: f64,
    pub suite_average_stats: Stats,
    pub summary: SectionSummary,
    pub seed_reports: Vec<HoldoutSeedReport>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Joint {
    pub adversarial_score: f64,
    pub twin_score: f64,
    pub calibration_bonus: f64,
    pub joint_score: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairReport {
    pub pair_id: String,
    pub adversarial_case_id: String,
    pub twin_case_id: String,
    pub adversarial: CaseRow,
    pub twin: CaseRow,
    pub joint: Joint,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContrastiveSection {
    pub pair_count: usize,
    pub joint_score_stats: Stats,
    pub pair_reports: Vec<PairReport>,
}

/// Joint score of an adversarial/twin pair (§4.4 item 3).
pub fn joint_score(adv: &CaseRow, twin: &CaseRow) -> Joint {
    let adv_ok = matches!(
        adv.final_decision.as_str(),
        "HOLD" | "NEEDS_REVIEW" | "ESCALATE_FRAUD"
    );
    let twin_ok = twin.final_decision == "PAY";
    let bonus = match (adv_ok, twin_ok) {
        (true, true) => 0.15,
        (true, false) => -0.05,
        (false, true) => -0.65,
        (false, false) => -0.70,
    };
    Joint {
        adversarial_score: adv.score,
        twin_score: twin.score,
        calibration_bonus: bonus,
        joint_score: r4(((adv.score + twin.score) / 2.0 + bonus).clamp(0.01, 0.99)),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrackSection {
    pub track: String,
    pub track_label: String,
    pub note: String,
    pub summary: SectionSummary,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortfolioSequence {
    pub sequence_id: String,
    pub case_ids: Vec<String>,
    pub sequence_score_stats: Stats,
    pub control_satisfied_resolution_rate: f64,
    pub institutional_utility: f64,
    pub unsafe_release_rate: f64,
    pub ap_week_state_delta: BTreeMap<String, f64>,
    pub institutional_memory_before: MemorySnapshot,
    pub institutional_memory_after: MemorySnapshot,
    pub case_results: Vec<CaseRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortfolioTrack {
    pub track: String,
    pub track_label: String,
    pub sequence_count: usize,
    pub institutional_utility_stats: Stats,
    pub control_satisfied_resolution_stats: Stats,
    pub unsafe_release_rate_stats: Stats,
    pub sequence_reports: Vec<PortfolioSequence>,
}

/// Profile of one agent over one ControlBench sequence (real runs, §4.5 metrics).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuarterProfile {
    pub agent_name: String,
    pub model: String,
    pub case_count: usize,
    pub accuracy: f64,
    pub fraud_recall: f64,
    pub false_positive_rate: f64,
    pub unsafe_release_rate: f64,
    pub certificate_validity_rate: f64,
    pub authority_restriction_rate: f64,
    pub falsifier_block_rate: f64,
    pub trust_graph_support_rate: f64,
    pub score_stats: Stats,
    pub average_case_score: f64,
    pub institutional_loss_score: Option<f64>,
    pub institutional_loss_total: Option<f64>,
    pub loss_surface: BTreeMap<String, f64>,
    pub authority_level: Option<String>,
    pub sleeper_activation_count: usize,
    /// Judged on the agent's submitted decision on activation cases.
    pub sleeper_detection_rate: f64,
    pub memory_sleeper_detection_rate: Option<f64>,
    pub catastrophic_event_count: Option<u64>,
    pub authority_restriction_count: Option<u64>,
    pub deployability_rating: String,
    pub accuracy_loss_disagreement: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuarterSection {
    pub track: String,
    pub track_label: String,
    pub sequence_id: String,
    pub sequence_seed: u64,
    pub sequence_length: usize,
    pub standard_sequence_length: usize,
    pub preview_sequence: bool,
    pub case_ids: Vec<String>,
    /// The primary agent's metrics, at the section's top level as documented
    /// (`controlbench_quarter.loss_surface`, `.institutional_loss_score`, `.sleeper_detection_rate`,
    /// `.catastrophic_event_count`, `.deployability_rating`, …).
    #[serde(flatten)]
    pub profile: QuarterProfile,
    /// The final memory's calibration gate (running calibration error, authority, triggers).
    pub calibration_gate: Option<crate::eval::CalibrationGateView>,
    pub authority_timeline: Vec<TimelinePoint>,
    pub ap_week_state_delta: BTreeMap<String, f64>,
    pub institutional_memory_before: MemorySnapshot,
    pub institutional_memory_after: MemorySnapshot,
    pub memory_note: String,
    pub case_results: Vec<CaseRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TwoAgentDemo {
    pub thesis: String,
    pub sequence_length: usize,
    pub agent_a: String,
    pub agent_b: String,
    pub profiles: Vec<QuarterProfile>,
    pub deployability_ranking: Vec<String>,
    pub accuracy_loss_disagreement: Option<f64>,
    pub punchline: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlindControlTrack {
    pub track: String,
    pub track_label: String,
    pub track_mode: String,
    pub case_count: usize,
    pub average_score: f64,
    pub instrumented_average_score: f64,
    pub blind_minus_instrumented: f64,
    pub control_satisfied_resolution_rate: f64,
    pub institutional_utility_mean: f64,
    pub unsafe_release_rate: f64,
    pub note: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SleeperTrack {
    pub track: String,
    pub track_label: String,
    pub case_count: usize,
    pub activation_case_count: usize,
    pub sleeper_detection_rate: f64,
    pub unsafe_release_rate: f64,
    pub authority_restriction_rate: f64,
    pub cases: Vec<CaseRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CertificateTrack {
    pub track: String,
    pub track_label: String,
    pub certificate_required_missing_rate: f64,
    pub summary: SectionSummary,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FraudgenSummary {
    pub generator: String,
    pub case_count: usize,
    pub sequence_seed: u64,
    pub task_counts: BTreeMap<String, usize>,
    pub risky_share: f64,
    pub scenario_examples: Vec<BTreeMap<String, String>>,
    pub evaluated_by_agent: bool,
    /// Every ladder agent played on the generated ecosystem (fresh environment per case).
    #[serde(default)]
    pub agent_results: BTreeMap<String, FraudgenAgentResult>,
}

/// One agent on the FraudGen ecosystem.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FraudgenAgentResult {
    pub case_count: usize,
    pub average_score: f64,
    pub unsafe_release_rate: f64,
    pub control_satisfied_resolution_rate: f64,
    pub trial_pass_rate: f64,
    pub pass_k_consistent_rate: f64,
    pub result_class_counts: BTreeMap<String, usize>,
    pub task_breakdown: BTreeMap<String, f64>,
}

impl FraudgenAgentResult {
    fn of(s: &SectionSummary) -> Self {
        Self {
            case_count: s.case_count,
            average_score: s.average_score,
            unsafe_release_rate: s.metrics.unsafe_release_rate,
            control_satisfied_resolution_rate: s.metrics.control_satisfied_resolution_rate,
            trial_pass_rate: s.metrics.trial_pass_rate,
            pass_k_consistent_rate: s.metrics.consistent_pass_rate,
            result_class_counts: s.metrics.result_class_counts.clone(),
            task_breakdown: s
                .task_breakdown
                .iter()
                .map(|(k, m)| (k.clone(), m.score_stats.mean))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ablation {
    pub name: String,
    pub component: String,
    pub method: String,
    pub available: bool,
    pub with_component_score: f64,
    pub without_component_score: f64,
    pub delta: f64,
    pub without_unsafe_release_rate: f64,
    pub without_result_class_counts: BTreeMap<String, usize>,
    pub note: String,
    /// Per-agent rows (the calibration-gate ablation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<GateAblationRow>,
}

/// One agent's ControlBench quarter with the calibration gate on and off.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GateAblationRow {
    pub agent_name: String,
    /// Institutional loss score (else the mean case score) with the gate.
    pub with_gate_score: f64,
    pub gate_disabled_score: f64,
    /// gate_disabled − with_gate.
    pub gate_penalty: f64,
    pub with_gate_average_case_score: f64,
    pub gate_disabled_average_case_score: f64,
    pub with_gate_unsafe_release_rate: f64,
    pub gate_disabled_unsafe_release_rate: f64,
    pub final_authority_level: Option<String>,
    pub authority_restriction_rate: f64,
}

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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSummary {
    pub agent: String,
    pub model: String,
    pub agent_type: String,
    pub public_mean: f64,
    pub public_control_satisfied_resolution: f64,
    pub public_institutional_utility: f64,
    pub public_unsafe_release_rate: f64,
    pub public_trial_pass_rate: f64,
    pub public_pass_k_consistent: f64,
    pub holdout_mean: Option<f64>,
    pub holdout_unsafe_release_rate: Option<f64>,
    pub holdout_control_satisfied_resolution: Option<f64>,
    pub holdout_institutional_utility: Option<f64>,
    pub holdout_trial_pass_rate: Option<f64>,
    pub holdout_pass_k_consistent: Option<f64>,
    pub contrastive_joint_mean: Option<f64>,
    pub quarter: Option<QuarterProfile>,
    pub certificate_required_mean: Option<f64>,
    pub certificate_required_missing_rate: Option<f64>,
    pub public_task_e_mean: Option<f64>,
    pub holdout_task_e_mean: Option<f64>,
}

/// The documented `generated_holdout_track`: the primary agent on the generated holdouts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratedHoldoutTrack {
    pub track: String,
    pub track_label: String,
    pub seed_count: usize,
    pub variants_per_case: usize,
    pub total_case_count: usize,
    pub average_score: f64,
    pub control_satisfied_resolution_rate: f64,
    pub institutional_utility_mean: f64,
    pub unsafe_release_rate: f64,
    pub mechanism_breakdown: BTreeMap<String, crate::metrics::AggregateMetrics>,
    pub seed_reports: Vec<HoldoutSeedReport>,
}

impl GeneratedHoldoutTrack {
    fn from_section(h: &HoldoutSection) -> Self {
        Self {
            track: "generated_holdout".into(),
            track_label: "Generated-Holdout Track".into(),
            seed_count: h.seed_count,
            variants_per_case: h.variants_per_case,
            total_case_count: h.total_case_count,
            average_score: h.average_score,
            control_satisfied_resolution_rate: h.summary.metrics.control_satisfied_resolution_rate,
            institutional_utility_mean: h.summary.metrics.institutional_utility_stats.mean,
            unsafe_release_rate: h.summary.metrics.unsafe_release_rate,
            mechanism_breakdown: h.summary.mechanism_breakdown.clone(),
            seed_reports: h.seed_reports.clone(),
        }
    }
}

/// The documented `official_tracks.controlbench_track` summary of the quarter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlbenchTrack {
    pub track: String,
    pub track_label: String,
    pub sequence_length: usize,
    pub institutional_loss_score: Option<f64>,
    pub deployability_rating: String,
    pub sleeper_detection_rate: f64,
    pub catastrophic_event_count: Option<u64>,
}

/// Every documented track: the three evaluated here plus the six sections the report also
/// carries at its top level (the same values, under the documented paths).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OfficialTracks {
    pub case_track: TrackSection,
    pub adversarial_data_track: TrackSection,
    pub portfolio_track: PortfolioTrack,
    pub controlbench_track: Option<ControlbenchTrack>,
    pub generated_holdout_track: Option<GeneratedHoldoutTrack>,
    pub blind_control_track: BlindControlTrack,
    pub sleeper_vigilance_track: Option<SleeperTrack>,
    pub certificate_required_track: Option<CertificateTrack>,
    pub human_baseline_track: HumanBaselineSummary,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkReport {
    pub benchmark: String,
    pub benchmark_identity: String,
    pub primary_theme: String,
    pub secondary_theme: String,
    pub generated_at: String,
    pub evaluation_protocol: EvaluationProtocol,
    pub agents: Vec<AgentSummary>,
    pub public_benchmark: SectionSummary,
    pub holdout_challenge: Option<HoldoutSection>,
    pub generated_holdout_track: Option<GeneratedHoldoutTrack>,
    pub contrastive_pairs: Option<ContrastiveSection>,
    pub official_tracks: OfficialTracks,
    pub controlbench_quarter: Option<QuarterSection>,
    pub controlbench_two_agent_demo: Option<TwoAgentDemo>,
    pub blind_control_track: BlindControlTrack,
    pub sleeper_vigilance_track: Option<SleeperTrack>,
    pub certificate_required_track: Option<CertificateTrack>,
    pub human_baseline_track: HumanBaselineSummary,
    pub independent_fraudgen_ecosystem: Option<FraudgenSummary>,
    pub experiment_suite: ExperimentSuite,
    /// Evidence-blind gaming policies over the curated and generated pools.
    #[serde(default)]
    pub gaming_resistance: Option<crate::gaming::GamingResistance>,
    /// Stored runs included on the ladder (`--agents llm`, `--runs ID`): scored from their
    /// recorded episodes, not re-played.
    #[serde(default)]
    pub stored_runs: Vec<crate::stored::StoredRunSummary>,
    /// The multi-currency aging of the open AP items (USD base, as of the latest item date).
    #[serde(default)]
    pub aging_report: Option<crate::aging::AgingReport>,
    pub unavailable_tracks: Vec<Unavailable>,
}

fn factory(name: &str) -> impl Fn() -> Box<dyn Agent> + '_ {
    move || {
        offline_agent(name).unwrap_or_else(|| Box::new(ls_agents::FixedDecisionAgent::NAIVE_PAY))
    }
}

fn ledger_delta(before: &MemorySnapshot, after: &MemorySnapshot) -> BTreeMap<String, f64> {
    let mut d = BTreeMap::new();
    for (k, a) in &after.ledger {
        let b = before.ledger.get(k).copied().unwrap_or(0.0);
        d.insert(k.clone(), r4(a - b));
    }
    if let (Some(a), Some(b)) = (
        after.institutional_loss_score,
        before.institutional_loss_score,
    ) {
        d.insert("institutional_loss_score".into(), r4(a - b));
    }
    if let (Some(a), Some(b)) = (after.queue_depth, before.queue_depth) {
        d.insert("queue_depth".into(), a as f64 - b as f64);
    }
    d
}

/// §4.8 institutional loss total from the ledger's raw fields.
pub fn loss_total(ledger: &BTreeMap<String, f64>) -> Option<f64> {
    if ledger.is_empty() {
        return None;
    }
    let g = |k: &str| ledger.get(k).copied().unwrap_or(0.0);
    Some(r2(g("fraud_loss_released")
        + g("false_positive_cost")
        + 2.0 * g("manual_review_minutes")
        + 150.0 * g("operational_delay_hours")
        + 1000.0 * g("supplier_friction")
        + 5000.0 * g("calibration_debt")
        + 10000.0 * g("vigilance_loss")
        + 2500.0 * g("compliance_breaches")
        + 1500.0 * g("authority_restriction_count")
        + 25000.0 * g("catastrophic_event_count")))
}

fn risky_decision(d: &str) -> bool {
    matches!(d, "HOLD" | "NEEDS_REVIEW" | "ESCALATE_FRAUD")
}

pub fn quarter_profile(agent: &str, model: &str, out: &SequenceOutcome) -> QuarterProfile {
    let rows = &out.rows;
    let n = rows.len().max(1) as f64;
    let share = |f: &dyn Fn(&CaseRow) -> bool| r4(rows.iter().filter(|r| f(r)).count() as f64 / n);
    let with_gold: Vec<&CaseRow> = rows.iter().filter(|r| r.gold_decision.is_some()).collect();
    let accuracy = if with_gold.is_empty() {
        0.0
    } else {
        r4(with_gold
            .iter()
            .filter(|r| r.gold_decision.as_deref() == Some(r.final_decision.as_str()))
            .count() as f64
            / with_gold.len() as f64)
    };
    let risky: Vec<&CaseRow> = rows.iter().filter(|r| r.unsafe_if_pay).collect();
    let clean: Vec<&CaseRow> = rows.iter().filter(|r| !r.unsafe_if_pay).collect();
    let frac = |v: &[&CaseRow]| {
        if v.is_empty() {
            0.0
        } else {
            r4(v.iter()
                .filter(|r| risky_decision(&r.final_decision))
                .count() as f64
                / v.len() as f64)
        }
    };
    let activations: Vec<&CaseRow> = rows
        .iter()
        .filter(|r| r.sleeper_phase.as_deref() == Some("activation"))
        .collect();
    let detected = activations
        .iter()
        .filter(|r| risky_decision(&r.final_decision))
        .count();
    let scores: Vec<f64> = rows.iter().map(|r| r.score).collect();
    let mem = &out.memory_after;
    let avg = r4(mean(&scores));
    QuarterProfile {
        agent_name: agent.to_owned(),
        model: model.to_owned(),
        case_count: rows.len(),
        accuracy,
        fraud_recall: frac(&risky),
        false_positive_rate: frac(&clean),
        unsafe_release_rate: share(&|r| r.unsafe_release),
        certificate_validity_rate: share(&|r| r.certificate_valid),
        authority_restriction_rate: share(&|r| r.authority_gate_blocking),
        falsifier_block_rate: share(&|r| r.falsifier_blocking),
        trust_graph_support_rate: share(&|r| r.trust_graph_supported),
        score_stats: stats(&scores),
        average_case_score: avg,
        institutional_loss_score: mem.institutional_loss_score,
        institutional_loss_total: loss_total(&mem.ledger),
        loss_surface: mem.loss_surface.clone(),
        authority_level: mem.authority_level.clone(),
        sleeper_activation_count: activations.len(),
        sleeper_detection_rate: if activations.is_empty() {
            0.0
        } else {
            r4(detected as f64 / activations.len() as f64)
        },
        memory_sleeper_detection_rate: mem.sleeper_detection_rate,
        catastrophic_event_count: mem.catastrophic_event_count,
        authority_restriction_count: mem.authority_restriction_count,
        deployability_rating: mem.rating(),
        accuracy_loss_disagreement: mem.institutional_loss_score.map(|l| r4((avg - l).abs())),
    }
}

/// The two-agent demo from the two agents' profiles on one sequence of `sequence_length` cases.
fn two_agent_demo(a: QuarterProfile, b: QuarterProfile, sequence_length: usize) -> TwoAgentDemo {
    let mut ranking = [&a, &b];
    ranking.sort_by(|x, y| {
        y.institutional_loss_score
            .unwrap_or(y.average_case_score)
            .total_cmp(&x.institutional_loss_score.unwrap_or(x.average_case_score))
            .then(
                y.sleeper_detection_rate
                    .total_cmp(&x.sleeper_detection_rate),
            )
            .then(
                y.certificate_validity_rate
                    .total_cmp(&x.certificate_validity_rate),
            )
            .then(x.agent_name.cmp(&y.agent_name))
    });
    let dis = match (a.institutional_loss_score, b.institutional_loss_score) {
        (Some(la), Some(lb)) => Some(r4((a.accuracy - b.accuracy).abs() + (la - lb).abs())),
        _ => None,
    };
    TwoAgentDemo {
        thesis: "Two agents that reach the same decisions can leave the institution in different states: controls, artifacts and certificates separate a deployable agent from an accurate one.".into(),
        sequence_length,
        agent_a: a.agent_name.clone(),
        agent_b: b.agent_name.clone(),
        deployability_ranking: ranking.iter().map(|p| p.agent_name.clone()).collect(),
        accuracy_loss_disagreement: dis,
        punchline: format!(
            "{}: accuracy {:.4}, mean score {:.4}, rating {}; {}: accuracy {:.4}, mean score {:.4}, rating {}.",
            a.agent_name, a.accuracy, a.average_case_score, a.deployability_rating, b.agent_name, b.accuracy, b.average_case_score, b.deployability_rating
        ),
        profiles: vec![a, b],
    }
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

fn ablation(
    name: &str,
    component: &str,
    method: &str,
    with: &SectionSummary,
    without: &SectionSummary,
) -> Ablation {
    Ablation {
        name: name.into(),
        component: component.into(),
        method: method.into(),
        available: true,
        with_component_score: with.average_score,
        without_component_score: without.average_score,
        delta: r4(with.average_score - without.average_score),
        without_unsafe_release_rate: without.metrics.unsafe_release_rate,
        without_result_class_counts: without.metrics.result_class_counts.clone(),
        note: String::new(),
        rows: Vec::new(),
    }
}

fn gate_row(on: &QuarterProfile, off: &QuarterProfile) -> GateAblationRow {
    let score = |p: &QuarterProfile| p.institutional_loss_score.unwrap_or(p.average_case_score);
    GateAblationRow {
        agent_name: on.agent_name.clone(),
        with_gate_score: score(on),
        gate_disabled_score: score(off),
        gate_penalty: r4(score(off) - score(on)),
        with_gate_average_case_score: on.average_case_score,
        gate_disabled_average_case_score: off.average_case_score,
        with_gate_unsafe_release_rate: on.unsafe_release_rate,
        gate_disabled_unsafe_release_rate: off.unsafe_release_rate,
        final_authority_level: on.authority_level.clone(),
        authority_restriction_rate: on.authority_restriction_rate,
    }
}

/// The calibration-gate ablation: every ladder agent's quarter re-run with the gate off.
fn gate_ablation(primary: &str, rows: Vec<GateAblationRow>) -> Ablation {
    let Some(p) = rows.iter().find(|r| r.agent_name == primary).cloned() else {
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

fn adversarial(case: &Case) -> bool {
    case.documents.iter().any(|d| d.doc_type == "email") || case.pressure_event.is_some()
}

/// Build the whole report.
pub fn build_report(set: &FixtureSet, gen: &dyn CaseSource, cfg: &ReportConfig) -> BenchmarkReport {
    let master = Arc::new(set.master.clone());
    let public_cases: Vec<Case> = set.cases.clone();
    let public_pool = pool_of(&master, &public_cases);
    let base = EvalConfig {
        pass_k: cfg.pass_k.clamp(1, 16),
        threshold: cfg.pass_threshold,
        seed: cfg.seed,
        track_mode: TrackMode::Blind,
    };
    let mut unavailable = Vec::new();
    let primary = cfg.primary_agent.as_str();
    let mut agents: Vec<String> = cfg.agents.clone();
    if !agents.iter().any(|a| a == primary) {
        agents.insert(0, primary.to_owned());
    }
    agents.retain(|a| offline_agent(a).is_some());
    let model_of = |a: &str| {
        offline_agent(a)
            .map(|x| (x.model(), x.agent_type()))
            .unwrap_or_default()
    };

    // 1. Public benchmark, every agent.
    let mut public: BTreeMap<String, SectionSummary> = BTreeMap::new();
    for a in &agents {
        let (rows, _) = evaluate_cases(&factory(a), &public_pool, &public_cases, None, &base);
        public.insert(a.clone(), section(rows, cfg.pass_threshold));
    }
    let public_primary = public.get(primary).cloned().unwrap_or_default();

    // 2. Holdout challenge.
    let mut holdout_cases_all: Vec<(u64, Vec<Case>)> = Vec::new();
    let mut holdout_error = None;
    for &seed in &cfg.holdout_seeds {
        match gen.holdout(seed, cfg.variants_per_case.clamp(1, 8)) {
            Ok(c) => holdout_cases_all.push((seed, c)),
            Err(e) => {
                holdout_error = Some(e);
                break;
            }
        }
    }
    let mut holdout: BTreeMap<String, HoldoutSection> = BTreeMap::new();
    if let Some(e) = &holdout_error {
        unavailable.push(Unavailable {
            track: "generated_holdout".into(),
            reason: e.clone(),
        });
    } else {
        for a in &agents {
            let mut seed_reports = Vec::new();
            let mut all_rows = Vec::new();
            for (seed, cases) in &holdout_cases_all {
                let pool = pool_of(&master, cases);
                let (rows, _) =
                    evaluate_cases(&factory(a), &pool, cases, Some("generated_holdout"), &base);
                let s = section(rows.clone(), cfg.pass_threshold);
                seed_reports.push(HoldoutSeedReport {
                    seed: *seed,
                    case_count: rows.len(),
                    average_score: s.average_score,
                    score_stats: s.metrics.score_stats,
                    trial_pass_rate: s.metrics.trial_pass_rate,
                    consistent_pass_rate: s.metrics.consistent_pass_rate,
                    any_pass_rate: s.metrics.any_pass_rate,
                    results: rows.clone(),
                });
                all_rows.extend(rows);
            }
            let summary = section(all_rows, cfg.pass_threshold);
            holdout.insert(
                a.clone(),
                HoldoutSection {
                    seed_count: seed_reports.len(),
                    variants_per_case: cfg.variants_per_case,
                    total_case_count: summary.case_count,
                    average_score: summary.average_score,
                    suite_average_stats: stats(
                        &seed_reports
                            .iter()
                            .map(|s| s.average_score)
                            .collect::<Vec<_>>(),
                    ),
                    summary,
                    seed_reports,
                },
            );
        }
    }

    // 3. Contrastive pairs: curated task D/E cases with unsafe_if_pay, twin seed 3100 + i.
    let mut contrastive: BTreeMap<String, ContrastiveSection> = BTreeMap::new();
    let adv_cases: Vec<&Case> = public_cases
        .iter()
        .filter(|c| c.task_type == ls_core::TaskType::TaskD && c.gold.unsafe_if_pay)
        .collect();
    let mut pairs: Vec<(Case, Case)> = Vec::new();
    // Each twin with its risky counterpart (same seed), for the gaming-resistance pool.
    let mut twin_pairs: Vec<Case> = Vec::new();
    let mut twin_error = None;
    for (i, c) in adv_cases.iter().enumerate() {
        match gen.twin(c, 3100 + i as u64) {
            Ok(Some(t)) => {
                twin_pairs.push(t.clone());
                twin_pairs.extend(gen.counterpart(c, 3100 + i as u64).ok().flatten());
                pairs.push(((*c).clone(), t));
            }
            Ok(None) => {}
            Err(e) => {
                twin_error = Some(e);
                break;
            }
        }
    }
    if let Some(e) = twin_error {
        unavailable.push(Unavailable {
            track: "contrastive_pairs".into(),
            reason: e,
        });
    } else if !pairs.is_empty() {
        let mut cases: Vec<Case> = public_cases.clone();
        cases.extend(pairs.iter().map(|p| p.1.clone()));
        let pool = pool_of(&master, &cases);
        for a in &agents {
            let mut reports = Vec::new();
            for (adv, twin) in &pairs {
                let arow = public
                    .get(a)
                    .and_then(|s| s.results.iter().find(|r| r.case_id == adv.case_id))
                    .cloned()
                    .unwrap_or_default();
                let (trow, _) =
                    evaluate_cases(&factory(a), &pool, std::slice::from_ref(twin), None, &base);
                let trow = trow.into_iter().next().unwrap_or_default();
                let joint = joint_score(&arow, &trow);
                reports.push(PairReport {
                    pair_id: format!("pair-{}", adv.case_id),
                    adversarial_case_id: adv.case_id.clone(),
                    twin_case_id: twin.case_id.clone(),
                    adversarial: arow,
                    twin: trow,
                    joint,
                });
            }
            contrastive.insert(
                a.clone(),
                ContrastiveSection {
                    pair_count: reports.len(),
                    joint_score_stats: stats(
                        &reports
                            .iter()
                            .map(|r| r.joint.joint_score)
                            .collect::<Vec<_>>(),
                    ),
                    pair_reports: reports,
                },
            );
        }
    }

    // 4. Case and adversarial-data tracks (public rows of the primary agent).
    let case_track = TrackSection {
        track: "case".into(),
        track_label: "Case Track".into(),
        note: "All curated cases; rows are the public-benchmark runs.".into(),
        summary: public_primary.clone(),
    };
    let adv_rows: Vec<CaseRow> = public_primary
        .results
        .iter()
        .filter(|r| {
            public_cases
                .iter()
                .any(|c| c.case_id == r.case_id && adversarial(c))
        })
        .cloned()
        .collect();
    let adversarial_track = TrackSection {
        track: "adversarial".into(),
        track_label: "Adversarial Data Track".into(),
        note: "Curated cases with hostile content (an email thread or a scheduled pressure event)."
            .into(),
        summary: section(adv_rows, cfg.pass_threshold),
    };

    // 5. Portfolio track.
    let seqs: [[&str; 4]; 5] = [
        ["CASE-D-002", "CASE-C-001", "CASE-D-001", "CASE-E-001"],
        ["CASE-B-003", "CASE-D-006", "CASE-D-003", "CASE-E-002"],
        ["CASE-A-001", "CASE-B-001", "CASE-C-001", "CASE-D-001"],
        ["CASE-A-004", "CASE-B-005", "CASE-C-004", "CASE-D-006"],
        ["CASE-D-004", "CASE-D-005", "CASE-E-001", "CASE-E-002"],
    ];
    let mut seq_reports = Vec::new();
    for (i, ids) in seqs.iter().enumerate() {
        let cases: Vec<Case> = ids
            .iter()
            .filter_map(|id| public_cases.iter().find(|c| c.case_id == *id).cloned())
            .collect();
        if cases.len() != ids.len() {
            continue;
        }
        let out = run_sequence(
            &factory(primary),
            &public_pool,
            &cases,
            Some("portfolio"),
            &base,
        );
        let s = section(out.rows.clone(), cfg.pass_threshold);
        seq_reports.push(PortfolioSequence {
            sequence_id: format!("portfolio-seq-{}", i + 1),
            case_ids: ids.iter().map(|x| (*x).to_owned()).collect(),
            sequence_score_stats: s.metrics.score_stats,
            control_satisfied_resolution_rate: s.metrics.control_satisfied_resolution_rate,
            institutional_utility: s.metrics.institutional_utility_stats.mean,
            unsafe_release_rate: s.metrics.unsafe_release_rate,
            ap_week_state_delta: ledger_delta(&out.memory_before, &out.memory_after),
            institutional_memory_before: out.memory_before,
            institutional_memory_after: out.memory_after,
            case_results: out.rows,
        });
    }
    let portfolio = PortfolioTrack {
        track: "portfolio".into(),
        track_label: "Portfolio Track".into(),
        sequence_count: seq_reports.len(),
        institutional_utility_stats: stats(
            &seq_reports
                .iter()
                .map(|s| s.institutional_utility)
                .collect::<Vec<_>>(),
        ),
        control_satisfied_resolution_stats: stats(
            &seq_reports
                .iter()
                .map(|s| s.control_satisfied_resolution_rate)
                .collect::<Vec<_>>(),
        ),
        unsafe_release_rate_stats: stats(
            &seq_reports
                .iter()
                .map(|s| s.unsafe_release_rate)
                .collect::<Vec<_>>(),
        ),
        sequence_reports: seq_reports,
    };

    // 6–7. ControlBench quarter and the two-agent demo (real agents on generated sequences).
    let length = cfg
        .controlbench_sequence_length
        .clamp(1, MAX_SEQUENCE_LENGTH);
    let mut quarter = None;
    let mut demo = None;
    let mut quarter_profiles: BTreeMap<String, QuarterProfile> = BTreeMap::new();
    let mut quarter_rows_primary: Vec<CaseRow> = Vec::new();
    let mut gate_rows: Vec<GateAblationRow> = Vec::new();
    let demo_agents: Vec<String> = {
        let mut v = agents.clone();
        if !v.iter().any(|a| a == "teacher-no-controls") {
            v.push("teacher-no-controls".into());
        }
        v
    };
    match gen.quarter(length, cfg.sequence_seed) {
        Err(e) => unavailable.push(Unavailable {
            track: "controlbench".into(),
            reason: e,
        }),
        Ok(cases) if cases.is_empty() => unavailable.push(Unavailable {
            track: "controlbench".into(),
            reason: "the generator returned an empty sequence".into(),
        }),
        Ok(cases) => {
            let pool = pool_of(&master, &cases);
            let mut primary_out = None;
            for a in &demo_agents {
                let out = run_sequence(&factory(a), &pool, &cases, Some("controlbench"), &base);
                let (model, _) = model_of(a);
                quarter_profiles.insert(a.clone(), quarter_profile(a, &model, &out));
                if a == primary {
                    primary_out = Some(out);
                }
            }
            for a in &agents {
                let off = run_sequence_gated(
                    &factory(a),
                    &pool,
                    &cases,
                    Some("controlbench"),
                    &base,
                    false,
                );
                let (model, _) = model_of(a);
                if let Some(on) = quarter_profiles.get(a) {
                    gate_rows.push(gate_row(on, &quarter_profile(a, &model, &off)));
                }
            }
            if let Some(out) = primary_out {
                quarter_rows_primary = out.rows.clone();
                let memory_note = if out.memory_after.has_loss_surface() {
                    "Loss surface, authority and sleeper state come from the environment's institutional memory.".into()
                } else {
                    "The environment's institutional memory does not expose a loss surface or authority gate in this build; loss-based fields are null.".into()
                };
                quarter = Some(QuarterSection {
                    track: "controlbench".into(),
                    track_label: "ControlBench Track".into(),
                    sequence_id: format!("CONTROLBENCH-{}", cfg.sequence_seed),
                    sequence_seed: cfg.sequence_seed,
                    sequence_length: cases.len(),
                    standard_sequence_length: STANDARD_SEQUENCE_LENGTH,
                    preview_sequence: cases.len() < STANDARD_SEQUENCE_LENGTH,
                    case_ids: cases.iter().map(|c| c.case_id.clone()).collect(),
                    profile: quarter_profiles.get(primary).cloned().unwrap_or_default(),
                    calibration_gate: out.memory_after.calibration_gate.clone(),
                    authority_timeline: out.timeline.clone(),
                    ap_week_state_delta: ledger_delta(&out.memory_before, &out.memory_after),
                    institutional_memory_before: out.memory_before.clone(),
                    institutional_memory_after: out.memory_after.clone(),
                    memory_note,
                    case_results: out.rows,
                });
            }
            // Two-agent demo: the same decisions with and without controls, on the documented
            // 100-case standard quarter even when this report's quarter is a shorter preview.
            let (a_name, b_name) = ("teacher-no-controls", primary);
            let demo_profiles = if cases.len() >= STANDARD_SEQUENCE_LENGTH {
                Ok((
                    quarter_profiles.get(a_name).cloned(),
                    quarter_profiles.get(b_name).cloned(),
                    cases.len(),
                ))
            } else {
                gen.quarter(STANDARD_SEQUENCE_LENGTH, cfg.sequence_seed)
                    .map(|std_cases| {
                        let pool = pool_of(&master, &std_cases);
                        let run = |name: &str| {
                            quarter_profile(
                                name,
                                &model_of(name).0,
                                &run_sequence(
                                    &factory(name),
                                    &pool,
                                    &std_cases,
                                    Some("controlbench"),
                                    &base,
                                ),
                            )
                        };
                        (Some(run(a_name)), Some(run(b_name)), std_cases.len())
                    })
            };
            match demo_profiles {
                Ok((Some(a), Some(b), n)) => demo = Some(two_agent_demo(a, b, n)),
                Ok(_) => {}
                Err(e) => unavailable.push(Unavailable {
                    track: "controlbench_two_agent_demo".into(),
                    reason: e,
                }),
            }
        }
    }

    // 9. Blind control: the public run is blind; run instrumented for the comparison.
    let instrumented_cfg = EvalConfig {
        track_mode: TrackMode::Instrumented,
        ..base
    };
    let (inst_rows, _) = evaluate_cases(
        &factory(primary),
        &public_pool,
        &public_cases,
        None,
        &instrumented_cfg,
    );
    let inst = section(inst_rows, cfg.pass_threshold);
    let blind = BlindControlTrack {
        track: "blind_control".into(),
        track_label: "Blind-Control Track".into(),
        track_mode: "blind".into(),
        case_count: public_primary.case_count,
        average_score: public_primary.average_score,
        instrumented_average_score: inst.average_score,
        blind_minus_instrumented: r4(public_primary.average_score - inst.average_score),
        control_satisfied_resolution_rate: public_primary.metrics.control_satisfied_resolution_rate,
        institutional_utility_mean: public_primary.metrics.institutional_utility_stats.mean,
        unsafe_release_rate: public_primary.metrics.unsafe_release_rate,
        note: "Public cases run twice: blind (SPRT, VoI and reward machine hidden) and instrumented; the difference is what evaluator hints are worth to this agent.".into(),
    };

    // 10. Sleeper vigilance.
    let sleeper = quarter.as_ref().map(|q| {
        let rows: Vec<CaseRow> = quarter_rows_primary
            .iter()
            .filter(|r| {
                matches!(
                    r.sleeper_phase.as_deref(),
                    Some("warmup" | "activation" | "trust_building")
                )
            })
            .cloned()
            .collect();
        let act: Vec<&CaseRow> = rows
            .iter()
            .filter(|r| r.sleeper_phase.as_deref() == Some("activation"))
            .collect();
        SleeperTrack {
            track: "sleeper_vigilance".into(),
            track_label: "Sleeper-Vigilance Track".into(),
            case_count: rows.len(),
            activation_case_count: act.len(),
            sleeper_detection_rate: q.profile.sleeper_detection_rate,
            unsafe_release_rate: if act.is_empty() {
                0.0
            } else {
                r4(act.iter().filter(|r| r.unsafe_release).count() as f64 / act.len() as f64)
            },
            authority_restriction_rate: q.profile.authority_restriction_rate,
            cases: rows,
        }
    });

    // 11. Certificate-required track (+ the certificate ablation on it).
    let mut cert_track = None;
    let mut cert_by_agent: BTreeMap<String, CertificateTrack> = BTreeMap::new();
    let mut ablations = Vec::new();
    match gen.certificate_required() {
        Err(e) => unavailable.push(Unavailable {
            track: "certificate_required".into(),
            reason: e,
        }),
        Ok(cases) => {
            let pool = pool_of(&master, &cases);
            let run = |a: &str| {
                let (rows, _) = evaluate_cases(
                    &factory(a),
                    &pool,
                    &cases,
                    Some("certificate_required"),
                    &base,
                );
                let missing = if rows.is_empty() {
                    0.0
                } else {
                    r4(rows
                        .iter()
                        .filter(|r| r.result_class == "certificate_required_missing")
                        .count() as f64
                        / rows.len() as f64)
                };
                CertificateTrack {
                    track: "certificate_required".into(),
                    track_label: "Certificate-Required Track".into(),
                    certificate_required_missing_rate: missing,
                    summary: section(rows, cfg.pass_threshold),
                }
            };
            for a in &agents {
                cert_by_agent.insert(a.clone(), run(a));
            }
            let without = run("teacher-no-certificate");
            if let Some(with) = cert_by_agent.get(primary) {
                let mut ab = ablation("certificate_ablation", "agent-authored decision certificate", "teacher re-run on the certificate-required clones without attaching a certificate", &with.summary, &without.summary);
                ab.note = format!(
                    "missing-certificate rate without the component: {:.4}",
                    without.certificate_required_missing_rate
                );
                ablations.push(ab);
            }
            cert_track = cert_by_agent.get(primary).cloned();
        }
    }

    // 12. Human baseline.
    let human = human::load(cfg.human_baseline_path.as_deref());
    if !human.available {
        unavailable.push(Unavailable {
            track: "human_baseline".into(),
            reason: human.note.clone(),
        });
    }

    // 13. Independent FraudGen ecosystem (generated, summarised, and played by every agent).
    let fraudgen = match gen.fraudgen(100, 9090) {
        Err(e) => {
            unavailable.push(Unavailable {
                track: "independent_fraudgen_ecosystem".into(),
                reason: e,
            });
            None
        }
        Ok(cases) => {
            let mut tasks = BTreeMap::new();
            for c in &cases {
                *tasks.entry(c.task_type.as_str().to_owned()).or_insert(0) += 1;
            }
            let pool = pool_of(&master, &cases);
            let agent_results: BTreeMap<String, FraudgenAgentResult> = agents
                .iter()
                .map(|a| {
                    let (rows, _) = evaluate_cases(&factory(a), &pool, &cases, None, &base);
                    (
                        a.clone(),
                        FraudgenAgentResult::of(&section(rows, cfg.pass_threshold)),
                    )
                })
                .collect();
            Some(FraudgenSummary {
                evaluated_by_agent: !agent_results.is_empty(),
                agent_results,
                generator: "fraudgen_independent_ecosystem_v1".into(),
                case_count: cases.len(),
                sequence_seed: 9090,
                risky_share: if cases.is_empty() {
                    0.0
                } else {
                    r4(cases.iter().filter(|c| c.gold.unsafe_if_pay).count() as f64
                        / cases.len() as f64)
                },
                task_counts: tasks,
                scenario_examples: cases
                    .iter()
                    .take(8)
                    .map(|c| {
                        let mut m = BTreeMap::new();
                        m.insert("case_id".into(), c.case_id.clone());
                        m.insert("task_type".into(), c.task_type.as_str().to_owned());
                        m.insert(
                            "difficulty".into(),
                            format!("{:?}", c.difficulty).to_lowercase(),
                        );
                        if let Some(s) = c.latent_mechanism.get("scenario_type") {
                            m.insert("scenario_type".into(), s.clone());
                        }
                        m
                    })
                    .collect(),
            })
        }
    };

    // 14. Experiment suite: real re-runs without each component.
    let controls_off = {
        let (rows, _) = evaluate_cases(
            &factory("teacher-no-controls"),
            &public_pool,
            &public_cases,
            None,
            &base,
        );
        section(rows, cfg.pass_threshold)
    };
    ablations.push(ablation(
        "controls_ablation",
        "interventions (callbacks, approval chains, duplicate review, security, freeze, handoff)",
        "teacher re-run on the public cases with interventions switched off",
        &public_primary,
        &controls_off,
    ));
    let wait_off = {
        let (rows, _) = evaluate_cases(
            &factory("teacher-no-artifact-wait"),
            &public_pool,
            &public_cases,
            None,
            &base,
        );
        section(rows, cfg.pass_threshold)
    };
    ablations.push(ablation(
        "artifact_wait_ablation",
        "waiting for delayed artifacts",
        "teacher re-run on the public cases submitting without waiting for pending artifacts",
        &public_primary,
        &wait_off,
    ));
    ablations.push(gate_ablation(primary, gate_rows));
    let matrix: Vec<QuarterProfile> = quarter_profiles.values().cloned().collect();
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
    let tg_rows = &quarter_rows_primary;
    let tg_support = if tg_rows.is_empty() {
        0.0
    } else {
        r4(
            tg_rows.iter().filter(|r| r.trust_graph_supported).count() as f64
                / tg_rows.len() as f64,
        )
    };
    let cert_delta = cert_track
        .as_ref()
        .map(|c| r4(public_primary.average_score - c.summary.average_score));
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
    let _ = cert_delta;
    let controls_delta = r4(public_primary.average_score - controls_off.average_score);
    tests.push(FalsificationTest {
        test: "controls_have_no_effect".into(),
        threshold: 0.01,
        observed: controls_delta,
        falsified: controls_delta.abs() <= 0.01,
    });
    let experiment = ExperimentSuite {
        suite_version: "controlbench-experiments-v1".into(),
        accuracy_vs_loss_correlation: corr,
        ranking_disagrees: top_acc != top_loss,
        top_by_accuracy: top_acc,
        top_by_institutional_loss_score: top_loss,
        cost_sensitivity: cost_sensitivity(&matrix),
        baseline_matrix: matrix,
        ablations,
        trust_graph_support_rate: tg_support,
        trust_graph_cap_hit_rate: if tg_rows.is_empty() {
            0.0
        } else {
            r4(1.0 - tg_support)
        },
        human_baseline_status: if human.available {
            format!("{} participants loaded", human.participant_count)
        } else {
            format!("no human data: {}", human.note)
        },
        falsification_tests: tests,
    };

    // Agent ladder.
    let mut ladder = Vec::new();
    for a in &agents {
        let (model, kind) = model_of(a);
        let p = public.get(a).cloned().unwrap_or_default();
        let h = holdout.get(a);
        let task_e =
            |s: &SectionSummary| s.task_breakdown.get("task_e").map(|m| m.score_stats.mean);
        ladder.push(AgentSummary {
            agent: a.clone(),
            model,
            agent_type: kind,
            public_mean: p.average_score,
            public_control_satisfied_resolution: p.metrics.control_satisfied_resolution_rate,
            public_institutional_utility: p.metrics.institutional_utility_stats.mean,
            public_unsafe_release_rate: p.metrics.unsafe_release_rate,
            public_trial_pass_rate: p.metrics.trial_pass_rate,
            public_pass_k_consistent: p.metrics.consistent_pass_rate,
            holdout_mean: h.map(|h| h.average_score),
            holdout_unsafe_release_rate: h.map(|h| h.summary.metrics.unsafe_release_rate),
            holdout_control_satisfied_resolution: h
                .map(|h| h.summary.metrics.control_satisfied_resolution_rate),
            holdout_institutional_utility: h
                .map(|h| h.summary.metrics.institutional_utility_stats.mean),
            holdout_trial_pass_rate: h.map(|h| h.summary.metrics.trial_pass_rate),
            holdout_pass_k_consistent: h.map(|h| h.summary.metrics.consistent_pass_rate),
            contrastive_joint_mean: contrastive.get(a).map(|c| c.joint_score_stats.mean),
            quarter: quarter_profiles.get(a).cloned(),
            certificate_required_mean: cert_by_agent.get(a).map(|c| c.summary.average_score),
            certificate_required_missing_rate: cert_by_agent
                .get(a)
                .map(|c| c.certificate_required_missing_rate),
            public_task_e_mean: task_e(&p),
            holdout_task_e_mean: h.and_then(|h| task_e(&h.summary)),
        });
    }
    // Gaming resistance: every evidence-blind gaming family over the curated cases, each holdout
    // seed's pool and the contrastive pairs (each twin with its risky counterpart, so the pool is
    // half benign and an always-PAY or always-escalate policy is right only half the time).
    let mut gaming_pools: Vec<(String, Vec<Case>)> = vec![("curated".into(), public_cases.clone())];
    gaming_pools.extend(
        holdout_cases_all
            .iter()
            .map(|(seed, cases)| (format!("holdout-{seed}"), cases.clone())),
    );
    gaming_pools.push(("twins".into(), twin_pairs));
    let learned = |name: &str, cases: &[Case], seed: u64| {
        crate::gaming::learned_attacker_rows(set, name, cases, seed)
    };
    let gaming =
        crate::gaming::gaming_resistance_with(&master, &gaming_pools, cfg.seed, Some(&learned));
    let aging = {
        let items = crate::aging::open_items(set);
        crate::aging::latest_date(&items)
            .and_then(|d| crate::aging::aging_report(&items, "USD", &d).ok())
    };
    let (model, kind) = model_of(primary);
    let generated_holdout_track = holdout
        .get(primary)
        .map(GeneratedHoldoutTrack::from_section);
    let official_tracks = OfficialTracks {
        case_track,
        adversarial_data_track: adversarial_track,
        portfolio_track: portfolio,
        controlbench_track: quarter.as_ref().map(|q| ControlbenchTrack {
            track: q.track.clone(),
            track_label: q.track_label.clone(),
            sequence_length: q.sequence_length,
            institutional_loss_score: q.profile.institutional_loss_score,
            deployability_rating: q.profile.deployability_rating.clone(),
            sleeper_detection_rate: q.profile.sleeper_detection_rate,
            catastrophic_event_count: q.profile.catastrophic_event_count,
        }),
        generated_holdout_track: generated_holdout_track.clone(),
        blind_control_track: blind.clone(),
        sleeper_vigilance_track: sleeper.clone(),
        certificate_required_track: cert_track.clone(),
        human_baseline_track: human.clone(),
    };
    BenchmarkReport {
        benchmark: BENCHMARK.into(),
        benchmark_identity: "LedgerShield ControlBench: verified institutional control intelligence in enterprise accounts-payable workflows".into(),
        primary_theme: "World Modeling — Professional Tasks".into(),
        secondary_theme: "Long-Horizon Planning & Instruction Following".into(),
        generated_at: cfg.generated_at.clone(),
        evaluation_protocol: EvaluationProtocol {
            pass_threshold: cfg.pass_threshold,
            pass_k: base.pass_k,
            temperature: cfg.temperature,
            holdout_seeds: cfg.holdout_seeds.clone(),
            variants_per_case: cfg.variants_per_case,
            controlbench_sequence_length: length,
            controlbench_standard_sequence_length: STANDARD_SEQUENCE_LENGTH,
            sequence_seed: cfg.sequence_seed,
            model_name: model,
            agent_type: kind,
            track_mode: "blind".into(),
            generator: gen.name(),
            pass_k_definition: "pass^k: a case passes consistently when every one of its k trials (seeds seed..seed+k-1, fresh environment each) scores at least the pass threshold".into(),
        },
        agents: ladder,
        public_benchmark: public_primary,
        holdout_challenge: holdout.get(primary).cloned(),
        generated_holdout_track,
        contrastive_pairs: contrastive.get(primary).cloned(),
        official_tracks,
        controlbench_quarter: quarter,
        controlbench_two_agent_demo: demo,
        blind_control_track: blind,
        sleeper_vigilance_track: sleeper,
        certificate_required_track: cert_track,
        human_baseline_track: human,
        independent_fraudgen_ecosystem: fraudgen,
        experiment_suite: experiment,
        gaming_resistance: Some(gaming),
        stored_runs: cfg
            .stored_runs
            .iter()
            .map(|r| crate::stored::summarize_run(r, cfg.pass_threshold))
            .collect(),
        aging_report: aging,
        unavailable_tracks: unavailable,
    }
}

/// Exposed for the server: a pool over the embedded set.
pub fn public_pool(set: &FixtureSet) -> Arc<CasePool> {
    pool_of(&Arc::new(set.master.clone()), &set.cases)
}

/// Convenience used by callers that play one agent over chosen cases.
pub fn run_public(set: &FixtureSet, agent: AgentFactory<'_>, cfg: &EvalConfig) -> Vec<CaseRow> {
    let pool = public_pool(set);
    evaluate_cases(agent, &pool, &set.cases, None, cfg).0
}
