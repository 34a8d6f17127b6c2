//! Live multi-model comparison (`ledgershield compare`): several models play the same cases,
//! each in one environment after an institutional reset (so the institution's loss surface
//! accumulates over the model's run), and the summary reports per model the scores, a capability
//! profile per task family, certificate and institutional-loss metrics and per-case traces, plus
//! the monotonic-strength check of the models ordered by their documented capability score.
//!
//! Departure from the reference: the reference runs a debug agent as a subprocess and parses its
//! stdout; here the agent is played in-process and every number comes from the episode records
//! and the environment's institutional memory.

use crate::eval::{run_sequence, EvalConfig};
use crate::headline::{Headline, TwinPair};
use crate::metrics::r4;
use crate::report::quarter_profile;
use ls_agents::{Agent, EpisodeRecord, Harness};
use ls_core::schema::Case;
use ls_env::CasePool;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub const COMPARE_VERSION: &str = "ledgershield-compare-v1";

/// A model's documented capability score, read from its name, used **only** to order the models
/// of a comparison for the monotonic-strength check (the reference's scale: `gpt-4o` 4.6, else
/// the number after `gpt-`, otherwise 4.0; +0.5 pro, +0.2 latest, −0.7 mini, −1.1 nano, −0.3
/// turbo; `local/…` checkpoints 4.0). The agent never reads it: every model is prompted,
/// capped and parsed alike (`ls_agents::assist`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapabilityProfile {
    pub model: String,
    pub capability_score: f64,
    /// `elite` (≥ 5.0), `strong` (≥ 4.5) or `standard`: a label of the score.
    pub tier: String,
}

impl CapabilityProfile {
    pub fn from_model(model: &str) -> Self {
        let n = model.trim().to_ascii_lowercase();
        let local = n.starts_with("local/");
        let mut score = if local {
            4.0
        } else if n.contains("gpt-4o") {
            4.6
        } else if let Some(rest) = n.split("gpt-").nth(1) {
            let num: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            num.trim_end_matches('.').parse::<f64>().unwrap_or(4.0)
        } else {
            4.0
        };
        for (word, delta) in [
            ("pro", 0.5),
            ("latest", 0.2),
            ("mini", -0.7),
            ("nano", -1.1),
            ("turbo", -0.3),
        ] {
            if !local && n.contains(word) {
                score += delta;
            }
        }
        let score = ls_core::text::round_dp(score, 2);
        let tier = if score >= 5.0 {
            "elite"
        } else if score >= 4.5 {
            "strong"
        } else {
            "standard"
        };
        Self {
            model: model.to_owned(),
            capability_score: score,
            tier: tier.into(),
        }
    }
}

/// One model to compare: its name and a factory building its agent.
pub struct ModelUnderTest<'a> {
    pub model: String,
    pub factory: &'a dyn Fn() -> Box<dyn Agent>,
}

/// Scores of one task family (task type) for one model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FamilyProfile {
    pub case_count: usize,
    pub average_score: f64,
    pub success_rate: f64,
    pub unsafe_release_rate: f64,
    pub certificate_validity_rate: f64,
    pub mean_steps: f64,
}

/// What one model did on one case (operator data: it shows per-case outcomes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseTrace {
    pub case_id: String,
    pub task_type: String,
    pub score: f64,
    pub decision: String,
    pub result_class: String,
    pub steps: u32,
    pub unsafe_release: bool,
    pub certificate_score: f64,
    pub certificate_valid: bool,
    pub actions: Vec<String>,
    pub errors: Vec<String>,
}

/// Institutional-loss metrics of one model's run (the environment's memory after its cases).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InstitutionalMetrics {
    pub institutional_loss_score: Option<f64>,
    pub institutional_loss_total: Option<f64>,
    pub loss_surface: BTreeMap<String, f64>,
    pub deployability_rating: String,
    pub authority_level: Option<String>,
    pub catastrophic_event_count: Option<u64>,
    pub unsafe_release_rate: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelResult {
    pub model: String,
    pub agent_type: String,
    pub model_profile: CapabilityProfile,
    /// How the model was played (the same for every model of a comparison).
    #[serde(default)]
    pub harness: Harness,
    /// The model's endpoint calls over its run (attempts, answers, failures, tokens, seconds).
    #[serde(default)]
    pub model_calls: ls_agents::CallStats,
    pub average_score: f64,
    pub success_rate: f64,
    pub min_score: f64,
    pub max_score: f64,
    pub api_calls: u64,
    pub average_certificate_score: f64,
    pub certificate_validity_rate: f64,
    pub certificate_agent_authored_rate: f64,
    pub institutional: InstitutionalMetrics,
    /// The headline (paired discrimination over twin pairs) when the comparison played the pairs.
    #[serde(default)]
    pub headline: Option<Headline>,
    pub task_families: BTreeMap<String, FamilyProfile>,
    /// Operator data (per-case outcomes): stripped from the public aggregate.
    pub failed_cases: Vec<String>,
    pub case_scores: BTreeMap<String, f64>,
    pub traces: Vec<CaseTrace>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairCheck {
    pub weaker_model: String,
    pub stronger_model: String,
    pub weaker_tier: String,
    pub stronger_tier: String,
    pub average_score_gap: f64,
    pub success_rate_gap: f64,
    pub ordering_ok: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapabilityOrder {
    pub ordered_models: Vec<String>,
    pub monotonic_by_capability: bool,
    pub pairwise: Vec<PairCheck>,
    pub violations: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompareSummary {
    pub version: String,
    pub generated_at_utc: String,
    pub models: Vec<String>,
    pub cases: Vec<String>,
    pub case_count: usize,
    pub pass_threshold: f64,
    pub seed: u64,
    pub track_mode: String,
    /// The endpoint's origin (scheme, host, port), never a key.
    pub api_base: String,
    /// The seeds of the headline's pairs every model played (empty: no headline).
    #[serde(default)]
    pub headline_seeds: Vec<u64>,
    pub capability_order: CapabilityOrder,
    pub results: Vec<ModelResult>,
}

impl CompareSummary {
    /// The public aggregate: per-model and per-family numbers, no per-case outcome (no case
    /// scores, failed cases or traces), so a keyless client learns nothing about a case's answer.
    pub fn public_aggregate(&self) -> CompareSummary {
        let mut s = self.clone();
        s.cases.clear();
        // The operator's endpoint is not the public's business.
        s.api_base.clear();
        for r in &mut s.results {
            r.failed_cases.clear();
            r.case_scores.clear();
            r.traces.clear();
        }
        s
    }
}

fn rate(n: usize, d: usize) -> f64 {
    if d == 0 {
        0.0
    } else {
        r4(n as f64 / d as f64)
    }
}

fn clamped(r: &EpisodeRecord) -> f64 {
    if r.terminated {
        r.final_score.clamp(0.01, 0.99)
    } else {
        0.01
    }
}

fn families(recs: &[EpisodeRecord], threshold: f64) -> BTreeMap<String, FamilyProfile> {
    let mut by: BTreeMap<String, Vec<&EpisodeRecord>> = BTreeMap::new();
    for r in recs {
        by.entry(r.task_type.clone()).or_default().push(r);
    }
    by.into_iter()
        .map(|(k, v)| {
            let n = v.len();
            let scores: Vec<f64> = v.iter().map(|r| clamped(r)).collect();
            (
                k,
                FamilyProfile {
                    case_count: n,
                    average_score: r4(scores.iter().sum::<f64>() / n.max(1) as f64),
                    success_rate: rate(scores.iter().filter(|s| **s >= threshold).count(), n),
                    unsafe_release_rate: rate(v.iter().filter(|r| r.unsafe_release).count(), n),
                    certificate_validity_rate: rate(
                        v.iter().filter(|r| r.certificate_valid).count(),
                        n,
                    ),
                    mean_steps: r4(
                        v.iter().map(|r| f64::from(r.steps)).sum::<f64>() / n.max(1) as f64
                    ),
                },
            )
        })
        .collect()
}

fn trace(r: &EpisodeRecord) -> CaseTrace {
    CaseTrace {
        case_id: r.case_id.clone(),
        task_type: r.task_type.clone(),
        score: r4(clamped(r)),
        decision: r.decision.clone(),
        result_class: r.result_class.clone(),
        steps: r.steps,
        unsafe_release: r.unsafe_release,
        certificate_score: r4(r.certificate_score),
        certificate_valid: r.certificate_valid,
        actions: r.trajectory.iter().map(|s| s.action_type.clone()).collect(),
        errors: r.errors.iter().take(8).cloned().collect(),
    }
}

/// Called with the model's name at the start of each episode (a command's progress bar).
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// An agent that reports its model calls to a shared counter and the start of each episode to
/// `progress` (the sequence runner owns and drops the agent it builds).
struct Counted {
    inner: Box<dyn Agent>,
    calls: Arc<AtomicU64>,
    model: String,
    progress: Progress,
}

impl Agent for Counted {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn model(&self) -> String {
        self.inner.model()
    }
    fn agent_type(&self) -> String {
        self.inner.agent_type()
    }
    fn begin(&mut self, reset: &ls_env::StepEnvelope, seed: u64) {
        (self.progress)(&self.model);
        self.inner.begin(reset, seed);
    }
    fn next_action(&mut self, last: &ls_env::StepEnvelope) -> ls_agents::Action {
        let a = self.inner.next_action(last);
        self.calls.store(self.inner.api_calls(), Ordering::SeqCst);
        a
    }
    fn api_calls(&self) -> u64 {
        self.inner.api_calls()
    }
    fn call_stats(&self) -> Option<ls_agents::CallStats> {
        self.inner.call_stats()
    }
    fn harness(&self) -> Option<Harness> {
        self.inner.harness()
    }
}

/// What one model's run produced: its summary, its episodes of the cases, its episodes of the
/// headline's pairs (empty when none were played).
type ModelRun = (ModelResult, Vec<EpisodeRecord>, Vec<EpisodeRecord>);

/// Play one model over `cases` (one environment, in order), then over the headline's pairs (a
/// fresh environment per member), and summarise it.
fn run_model(m: &ModelUnderTest<'_>, setup: &CompareSetup<'_>, progress: &Progress) -> ModelRun {
    let (pool, cases, cfg) = (setup.pool, setup.cases, &setup.cfg);
    let calls = Arc::new(AtomicU64::new(0));
    let counted = || -> Box<dyn Agent> {
        Box::new(Counted {
            inner: (m.factory)(),
            calls: calls.clone(),
            model: m.model.clone(),
            progress: progress.clone(),
        })
    };
    let out = run_sequence(&counted, pool, cases, None, cfg);
    let api_calls = calls.load(Ordering::SeqCst);
    let probe = (m.factory)();
    let q = quarter_profile(&probe.name(), &m.model, &out);
    let recs = &out.records;
    let scores: Vec<f64> = recs.iter().map(clamped).collect();
    let n = recs.len();
    let result = ModelResult {
        model: m.model.clone(),
        agent_type: probe.agent_type(),
        model_profile: CapabilityProfile::from_model(&m.model),
        harness: probe.harness().unwrap_or_default(),
        model_calls: ls_agents::CallStats::total(
            recs.iter().filter_map(|r| r.model_calls.as_ref()),
        ),
        average_score: r4(scores.iter().sum::<f64>() / n.max(1) as f64),
        success_rate: rate(scores.iter().filter(|s| **s >= cfg.threshold).count(), n),
        min_score: r4(scores.iter().cloned().fold(1.0, f64::min)),
        max_score: r4(scores.iter().cloned().fold(0.0, f64::max)),
        api_calls,
        average_certificate_score: r4(
            recs.iter().map(|r| r.certificate_score).sum::<f64>() / n.max(1) as f64
        ),
        certificate_validity_rate: rate(recs.iter().filter(|r| r.certificate_valid).count(), n),
        certificate_agent_authored_rate: rate(
            recs.iter().filter(|r| r.certificate_agent_authored).count(),
            n,
        ),
        institutional: InstitutionalMetrics {
            institutional_loss_score: q.institutional_loss_score,
            institutional_loss_total: q.institutional_loss_total,
            loss_surface: q.loss_surface.clone(),
            deployability_rating: q.deployability_rating.clone(),
            authority_level: q.authority_level.clone(),
            catastrophic_event_count: q.catastrophic_event_count,
            unsafe_release_rate: q.unsafe_release_rate,
        },
        task_families: families(recs, cfg.threshold),
        failed_cases: recs
            .iter()
            .filter(|r| clamped(r) < cfg.threshold)
            .map(|r| r.case_id.clone())
            .collect(),
        case_scores: recs
            .iter()
            .map(|r| (r.case_id.clone(), r4(clamped(r))))
            .collect(),
        traces: recs.iter().map(trace).collect(),
        headline: None,
    };
    let mut result = result;
    let (headline, pair_records) = play_pairs(m, setup);
    result.headline = headline;
    (result, out.records, pair_records)
}

/// The model's headline over the setup's pairs (a fresh environment per member) and those
/// episodes; nothing when the setup has no pairs.
fn play_pairs(
    m: &ModelUnderTest<'_>,
    setup: &CompareSetup<'_>,
) -> (Option<crate::headline::Headline>, Vec<EpisodeRecord>) {
    if setup.pairs.is_empty() {
        return (None, Vec::new());
    }
    let pair_cfg = EvalConfig {
        pass_k: 1,
        ..setup.cfg
    };
    let (h, recs) = crate::headline::play(
        m.factory,
        &setup.pool.master,
        setup.pairs,
        setup.headline_seeds,
        &pair_cfg,
    );
    (Some(h), recs)
}

/// Order the models by capability score (ties by name) and check that each stronger model's
/// average score and success rate are at least its weaker neighbour's.
pub fn capability_order(results: &[ModelResult]) -> CapabilityOrder {
    let mut ordered: Vec<&ModelResult> = results.iter().collect();
    ordered.sort_by(|a, b| {
        a.model_profile
            .capability_score
            .total_cmp(&b.model_profile.capability_score)
            .then(a.model.cmp(&b.model))
    });
    let mut pairwise = Vec::new();
    let mut violations = Vec::new();
    for w in ordered.windows(2) {
        let (weak, strong) = (w[0], w[1]);
        let score_gap = r4(strong.average_score - weak.average_score);
        let success_gap = r4(strong.success_rate - weak.success_rate);
        let ok = score_gap >= 0.0 && success_gap >= 0.0;
        if !ok {
            violations.push(format!(
                "{} (capability {}) is below {} (capability {}): average score gap {score_gap}, success rate gap {success_gap}",
                strong.model,
                strong.model_profile.capability_score,
                weak.model,
                weak.model_profile.capability_score
            ));
        }
        pairwise.push(PairCheck {
            weaker_model: weak.model.clone(),
            stronger_model: strong.model.clone(),
            weaker_tier: weak.model_profile.tier.clone(),
            stronger_tier: strong.model_profile.tier.clone(),
            average_score_gap: score_gap,
            success_rate_gap: success_gap,
            ordering_ok: ok,
        });
    }
    CapabilityOrder {
        ordered_models: ordered.iter().map(|r| r.model.clone()).collect(),
        monotonic_by_capability: violations.is_empty(),
        pairwise,
        violations,
    }
}

/// What a comparison needs besides the models.
pub struct CompareSetup<'a> {
    pub pool: &'a Arc<CasePool>,
    pub cases: &'a [Case],
    pub cfg: EvalConfig,
    pub api_base: String,
    pub generated_at: String,
    /// The headline's pairs every model also plays (none: no headline).
    pub pairs: &'a [TwinPair],
    pub headline_seeds: &'a [u64],
}

/// Each model's episode records: of the cases, and of the headline's pairs.
#[derive(Debug, Clone, Default)]
pub struct ModelRecords {
    pub cases: Vec<EpisodeRecord>,
    pub pairs: Vec<EpisodeRecord>,
}

/// Compare the models on the same cases (and the headline's pairs, when the setup has them).
/// Returns the summary and each model's episode records (in the order of `models`), which the
/// caller may store as runs.
pub fn compare_models(
    models: &[ModelUnderTest<'_>],
    setup: &CompareSetup<'_>,
) -> (CompareSummary, Vec<ModelRecords>) {
    compare_models_with_progress(models, setup, Arc::new(|_| {}))
}

/// [`compare_models`], calling `progress` with the model's name as each episode starts
/// (`models × cases` calls), so a command can show how far a comparison is.
pub fn compare_models_with_progress(
    models: &[ModelUnderTest<'_>],
    setup: &CompareSetup<'_>,
    progress: Progress,
) -> (CompareSummary, Vec<ModelRecords>) {
    let mut results = Vec::new();
    let mut records = Vec::new();
    for m in models {
        let (r, cases, pairs) = run_model(m, setup, &progress);
        results.push(r);
        records.push(ModelRecords { cases, pairs });
    }
    let summary = CompareSummary {
        version: COMPARE_VERSION.into(),
        generated_at_utc: setup.generated_at.clone(),
        models: models.iter().map(|m| m.model.clone()).collect(),
        cases: setup.cases.iter().map(|c| c.case_id.clone()).collect(),
        case_count: setup.cases.len(),
        pass_threshold: setup.cfg.threshold,
        seed: setup.cfg.seed,
        track_mode: setup.cfg.track_mode.as_str().into(),
        api_base: setup.api_base.clone(),
        headline_seeds: if setup.pairs.is_empty() {
            Vec::new()
        } else {
            setup.headline_seeds.to_vec()
        },
        capability_order: capability_order(&results),
        results,
    };
    (summary, records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(model: &str, avg: f64, success: f64) -> ModelResult {
        ModelResult {
            model: model.into(),
            model_profile: CapabilityProfile::from_model(model),
            average_score: avg,
            success_rate: success,
            ..Default::default()
        }
    }

    #[test]
    fn progress_is_called_once_per_episode_with_the_model() {
        let set = ls_core::FixtureSet::embedded().unwrap();
        let cases: Vec<Case> = set.cases[..2].to_vec();
        let pool = crate::eval::pool_of(&Arc::new(set.master.clone()), &cases);
        let pay = || Box::new(ls_agents::FixedDecisionAgent::NAIVE_PAY) as Box<dyn Agent>;
        let models = [
            ModelUnderTest {
                model: "a".into(),
                factory: &pay,
            },
            ModelUnderTest {
                model: "b".into(),
                factory: &pay,
            },
        ];
        let setup = CompareSetup {
            pool: &pool,
            cases: &cases,
            cfg: EvalConfig {
                pass_k: 1,
                threshold: 0.85,
                seed: 7,
                track_mode: ls_env::TrackMode::Blind,
            },
            api_base: String::new(),
            generated_at: String::new(),
            pairs: &[],
            headline_seeds: &[],
        };
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        compare_models_with_progress(
            &models,
            &setup,
            Arc::new(move |m: &str| log.lock().unwrap().push(m.to_owned())),
        );
        assert_eq!(*seen.lock().unwrap(), ["a", "a", "b", "b"]);
    }

    #[test]
    fn capability_scores_label_names_only() {
        assert_eq!(CapabilityProfile::from_model("gpt-5.4").tier, "elite");
        assert_eq!(CapabilityProfile::from_model("gpt-4o").tier, "strong");
        assert_eq!(
            CapabilityProfile::from_model("gpt-4o-mini").tier,
            "standard"
        );
        assert_eq!(
            CapabilityProfile::from_model("gpt-5-pro").capability_score,
            5.5
        );
        assert_eq!(
            CapabilityProfile::from_model("local/pro-latest").capability_score,
            4.0
        );
        // The profile is a label: nothing of the agent's behaviour is in it.
        let v = serde_json::to_value(CapabilityProfile::from_model("gpt-5.4")).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 3, "{v}");
    }

    #[test]
    fn ordering_is_by_capability_and_flags_an_inversion() {
        let ok = capability_order(&[
            result("gpt-5.4", 0.8, 0.6),
            result("gpt-4o-mini", 0.5, 0.2),
            result("gpt-4o", 0.7, 0.2),
        ]);
        assert_eq!(ok.ordered_models, vec!["gpt-4o-mini", "gpt-4o", "gpt-5.4"]);
        assert!(ok.monotonic_by_capability, "{:?}", ok.violations);
        assert_eq!(ok.pairwise[0].average_score_gap, 0.2);
        assert_eq!(ok.pairwise[1].stronger_tier, "elite");
        // The elite model scores below the standard one: one violation, named.
        let bad = capability_order(&[result("gpt-5.4", 0.4, 0.2), result("gpt-4o-mini", 0.5, 0.2)]);
        assert!(!bad.monotonic_by_capability);
        assert_eq!(bad.violations.len(), 1);
        assert!(
            bad.violations[0].starts_with("gpt-5.4"),
            "{}",
            bad.violations[0]
        );
        assert!(!bad.pairwise[0].ordering_ok);
    }

    #[test]
    fn the_public_aggregate_has_no_per_case_outcome() {
        let mut r = result("gpt-5.4", 0.8, 0.6);
        r.case_scores.insert("CASE-B-001".into(), 0.9);
        r.failed_cases.push("CASE-B-002".into());
        r.traces.push(CaseTrace::default());
        let s = CompareSummary {
            cases: vec!["CASE-B-001".into()],
            results: vec![r],
            ..Default::default()
        };
        let p = serde_json::to_string(&s.public_aggregate()).unwrap();
        assert!(!p.contains("CASE-B-00"), "{p}");
        assert_eq!(s.public_aggregate().results[0].average_score, 0.8);
    }
}
