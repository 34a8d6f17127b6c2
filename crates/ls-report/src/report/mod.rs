//! The benchmark report: every documented track, built in the documented order.
//!
//! [`build_report`] is a pipeline of stages, one module per track or section, each taking the
//! shared [`Ctx`] (fixtures, generator, configuration, the ladder) and the earlier stages' typed
//! results: [`public`] → [`holdout`] → [`contrastive`] → [`tracks`] (case, adversarial) →
//! [`portfolio`] → [`quarter`] (ControlBench quarter, two-agent demo, gate re-runs) →
//! [`tracks`] (blind control, sleeper vigilance) → [`certificate`] → human baseline →
//! [`fraudgen`] → [`experiments`] → [`ladder`] → gaming resistance, aging. Tracks that cannot
//! be built are listed in `unavailable_tracks`, in that order.

use crate::eval::{evaluate_cases, pool_of, EvalConfig};
use crate::gen::CaseSource;
use crate::human::{self, HumanBaselineSummary};
use crate::metrics::{section, CaseRow, SectionSummary};
use ls_agents::{offline_agent, Agent};
use ls_core::fixtures::MasterData;
use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::{CasePool, TrackMode};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

pub mod ablation;
pub mod certificate;
pub mod contrastive;
pub mod experiments;
pub mod fraudgen;
pub mod holdout;
pub mod ladder;
pub mod portfolio;
pub mod public;
pub mod quarter;
pub mod tracks;

pub use ablation::{Ablation, GateAblationRow, ABLATION_AGENT};
pub use certificate::CertificateTrack;
pub use contrastive::{joint_score, ContrastiveSection, Joint, PairReport};
pub use experiments::{CostSensitivity, ExperimentSuite, FalsificationTest};
pub use fraudgen::{FraudgenAgentResult, FraudgenSummary};
pub use holdout::{GeneratedHoldoutTrack, HoldoutSection, HoldoutSeedReport};
pub use ladder::{AgentSummary, PublicFigures};
pub use portfolio::{PortfolioSequence, PortfolioTrack};
pub use quarter::{
    loss_total, quarter_profile, ControlbenchTrack, QuarterProfile, QuarterSection, TwoAgentDemo,
};
pub use tracks::{BlindControlTrack, SleeperTrack, TrackSection};

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

pub(crate) fn factory(name: &str) -> impl Fn() -> Box<dyn Agent> + '_ {
    move || {
        offline_agent(name).unwrap_or_else(|| Box::new(ls_agents::FixedDecisionAgent::NAIVE_PAY))
    }
}

/// What every stage reads: the fixtures, the generator, the configuration and the ladder.
pub struct Ctx<'a> {
    pub set: &'a FixtureSet,
    pub gen: &'a dyn CaseSource,
    pub cfg: &'a ReportConfig,
    pub master: Arc<MasterData>,
    pub public_cases: Vec<Case>,
    pub public_pool: Arc<CasePool>,
    /// Blind-mode evaluation settings (pass^k clamped to 1..=16).
    pub base: EvalConfig,
    /// The protocol agent (full sections).
    pub primary: &'a str,
    /// The playable ladder agents, the primary agent among them.
    pub agents: Vec<String>,
}

impl<'a> Ctx<'a> {
    pub fn new(set: &'a FixtureSet, gen: &'a dyn CaseSource, cfg: &'a ReportConfig) -> Self {
        let master = Arc::new(set.master.clone());
        let public_cases: Vec<Case> = set.cases.clone();
        let public_pool = pool_of(&master, &public_cases);
        let primary = cfg.primary_agent.as_str();
        let mut agents: Vec<String> = cfg.agents.clone();
        if !agents.iter().any(|a| a == primary) {
            agents.insert(0, primary.to_owned());
        }
        agents.retain(|a| offline_agent(a).is_some());
        Self {
            set,
            gen,
            cfg,
            master,
            public_cases,
            public_pool,
            base: EvalConfig {
                pass_k: cfg.pass_k.clamp(1, 16),
                threshold: cfg.pass_threshold,
                seed: cfg.seed,
                track_mode: TrackMode::Blind,
            },
            primary,
            agents,
        }
    }

    /// An agent's model name and agent type (empty for an unknown agent).
    pub fn model_of(&self, agent: &str) -> (String, String) {
        offline_agent(agent)
            .map(|x| (x.model(), x.agent_type()))
            .unwrap_or_default()
    }

    /// The section summary of rows at the configured pass threshold.
    pub fn section(&self, rows: Vec<CaseRow>) -> SectionSummary {
        section(rows, self.cfg.pass_threshold)
    }

    /// One agent over `cases` (fresh environment per trial), blind unless `cfg` says otherwise.
    pub fn evaluate(
        &self,
        agent: &str,
        pool: &Arc<CasePool>,
        cases: &[Case],
        track: Option<&str>,
    ) -> Vec<CaseRow> {
        evaluate_cases(&factory(agent), pool, cases, track, &self.base).0
    }

    /// One agent over the public cases.
    pub fn evaluate_public(&self, agent: &str) -> SectionSummary {
        self.section(self.evaluate(agent, &self.public_pool, &self.public_cases, None))
    }
}

/// The stages [`build_report_with_progress`] announces, in order (a progress display's length).
pub const STAGES: [&str; 11] = [
    "public benchmark",
    "generated holdouts",
    "contrastive pairs",
    "case and adversarial tracks",
    "portfolio sequences",
    "ControlBench quarter",
    "certificate-required clones",
    "FraudGen ecosystem",
    "experiments and ablations",
    "agent ladder",
    "gaming resistance",
];

/// Build the whole report.
pub fn build_report(set: &FixtureSet, gen: &dyn CaseSource, cfg: &ReportConfig) -> BenchmarkReport {
    build_report_with_progress(set, gen, cfg, &|_| {})
}

/// [`build_report`], calling `progress` with each stage's name (one of [`STAGES`], in order) as
/// the stage starts, so a command can show how far a minutes-long report is.
pub fn build_report_with_progress(
    set: &FixtureSet,
    gen: &dyn CaseSource,
    cfg: &ReportConfig,
    progress: &dyn Fn(&'static str),
) -> BenchmarkReport {
    let ctx = Ctx::new(set, gen, cfg);
    let mut unavailable = Vec::new();
    progress(STAGES[0]);
    let public = public::run(&ctx);
    let public_primary = public.get(ctx.primary).cloned().unwrap_or_default();
    progress(STAGES[1]);
    let holdout = holdout::run(&ctx, &mut unavailable);
    progress(STAGES[2]);
    let contrastive = contrastive::run(&ctx, &public, &mut unavailable);
    progress(STAGES[3]);
    let case_track = tracks::case_track(&public_primary);
    let adversarial_track = tracks::adversarial_track(&ctx, &public_primary);
    progress(STAGES[4]);
    let portfolio = portfolio::run(&ctx);
    progress(STAGES[5]);
    let quarter = quarter::run(&ctx, &mut unavailable);
    let blind = tracks::blind_control(&ctx, &public_primary);
    let sleeper = tracks::sleeper(quarter.section.as_ref(), &quarter.primary_rows);
    progress(STAGES[6]);
    let certificate = certificate::run(&ctx, &mut unavailable);
    let human = human::load(cfg.human_baseline_path.as_deref());
    if !human.available {
        unavailable.push(Unavailable {
            track: "human_baseline".into(),
            reason: human.note.clone(),
        });
    }
    progress(STAGES[7]);
    let fraudgen = fraudgen::run(&ctx, &mut unavailable);
    progress(STAGES[8]);
    let public_reference = public
        .get(ABLATION_AGENT)
        .cloned()
        .unwrap_or_else(|| ctx.evaluate_public(ABLATION_AGENT));
    let experiment = experiments::run(&ctx, &public_reference, &quarter, &certificate, &human);
    progress(STAGES[9]);
    let ladder = ladder::run(
        &ctx,
        &public,
        &holdout,
        &contrastive,
        &quarter,
        &certificate,
    );
    progress(STAGES[10]);
    let gaming = gaming_resistance(&ctx, &holdout, contrastive.twin_pairs);
    let measured = Measured {
        public_primary,
        holdout: holdout.sections.get(ctx.primary).cloned(),
        contrastive: contrastive.sections.get(ctx.primary).cloned(),
        case_track,
        adversarial_track,
        portfolio,
        quarter,
        blind,
        sleeper,
        certificate,
        human,
        fraudgen,
        experiment,
        ladder,
        gaming,
        unavailable,
    };
    assemble(&ctx, measured)
}

/// What the report's stages measured for the primary agent (and the ladder for every agent),
/// before it is laid out as a [`BenchmarkReport`].
struct Measured {
    public_primary: SectionSummary,
    holdout: Option<HoldoutSection>,
    contrastive: Option<ContrastiveSection>,
    case_track: TrackSection,
    adversarial_track: TrackSection,
    portfolio: PortfolioTrack,
    quarter: quarter::QuarterRun,
    blind: BlindControlTrack,
    sleeper: Option<SleeperTrack>,
    certificate: certificate::CertificateRun,
    human: HumanBaselineSummary,
    fraudgen: Option<FraudgenSummary>,
    experiment: ExperimentSuite,
    ladder: Vec<AgentSummary>,
    gaming: crate::gaming::GamingResistance,
    unavailable: Vec<Unavailable>,
}

/// Lay the stages' measurements out as the report, each track in its place.
fn assemble(ctx: &Ctx<'_>, m: Measured) -> BenchmarkReport {
    let cfg = ctx.cfg;
    let aging = {
        let items = crate::aging::open_items(ctx.set);
        crate::aging::latest_date(&items)
            .and_then(|d| crate::aging::aging_report(&items, "USD", &d).ok())
    };
    let generated_holdout_track = m.holdout.as_ref().map(GeneratedHoldoutTrack::from_section);
    let quarter_section = m.quarter.section;
    let official_tracks = OfficialTracks {
        case_track: m.case_track,
        adversarial_data_track: m.adversarial_track,
        portfolio_track: m.portfolio,
        controlbench_track: quarter_section.as_ref().map(ControlbenchTrack::of),
        generated_holdout_track: generated_holdout_track.clone(),
        blind_control_track: m.blind.clone(),
        sleeper_vigilance_track: m.sleeper.clone(),
        certificate_required_track: m.certificate.primary.clone(),
        human_baseline_track: m.human.clone(),
    };
    BenchmarkReport {
        benchmark: BENCHMARK.into(),
        benchmark_identity: "LedgerShield ControlBench: verified institutional control intelligence in enterprise accounts-payable workflows".into(),
        primary_theme: "World Modeling — Professional Tasks".into(),
        secondary_theme: "Long-Horizon Planning & Instruction Following".into(),
        generated_at: cfg.generated_at.clone(),
        evaluation_protocol: protocol(ctx),
        agents: m.ladder,
        public_benchmark: m.public_primary,
        holdout_challenge: m.holdout,
        generated_holdout_track,
        contrastive_pairs: m.contrastive,
        official_tracks,
        controlbench_quarter: quarter_section,
        controlbench_two_agent_demo: m.quarter.demo,
        blind_control_track: m.blind,
        sleeper_vigilance_track: m.sleeper,
        certificate_required_track: m.certificate.primary,
        human_baseline_track: m.human,
        independent_fraudgen_ecosystem: m.fraudgen,
        experiment_suite: m.experiment,
        gaming_resistance: Some(m.gaming),
        stored_runs: cfg
            .stored_runs
            .iter()
            .map(|r| crate::stored::summarize_run(r, cfg.pass_threshold))
            .collect(),
        aging_report: aging,
        unavailable_tracks: m.unavailable,
    }
}

fn protocol(ctx: &Ctx<'_>) -> EvaluationProtocol {
    let cfg = ctx.cfg;
    let (model, kind) = ctx.model_of(ctx.primary);
    EvaluationProtocol {
        pass_threshold: cfg.pass_threshold,
        pass_k: ctx.base.pass_k,
        temperature: cfg.temperature,
        holdout_seeds: cfg.holdout_seeds.clone(),
        variants_per_case: cfg.variants_per_case,
        controlbench_sequence_length: quarter::length(cfg),
        controlbench_standard_sequence_length: STANDARD_SEQUENCE_LENGTH,
        sequence_seed: cfg.sequence_seed,
        model_name: model,
        agent_type: kind,
        track_mode: "blind".into(),
        generator: ctx.gen.name(),
        pass_k_definition: "pass^k: a case passes consistently when every one of its k trials (seeds seed..seed+k-1, fresh environment each) scores at least the pass threshold".into(),
    }
}

/// Gaming resistance: every evidence-blind gaming family over the curated cases, each holdout
/// seed's pool and the contrastive pairs (each twin with its risky counterpart, so the pool is
/// half benign and an always-PAY or always-escalate policy is right only half the time).
fn gaming_resistance(
    ctx: &Ctx<'_>,
    holdout: &holdout::HoldoutRun,
    twin_pairs: Vec<Case>,
) -> crate::gaming::GamingResistance {
    let mut pools: Vec<(String, Vec<Case>)> = vec![("curated".into(), ctx.public_cases.clone())];
    pools.extend(
        holdout
            .cases
            .iter()
            .map(|(seed, cases)| (format!("holdout-{seed}"), cases.clone())),
    );
    pools.push(("twins".into(), twin_pairs));
    let learned = |name: &str, cases: &[Case], seed: u64| {
        crate::gaming::learned_attacker_rows(ctx.set, name, cases, seed)
    };
    crate::gaming::gaming_resistance_with(&ctx.master, &pools, ctx.cfg.seed, Some(&learned))
}
