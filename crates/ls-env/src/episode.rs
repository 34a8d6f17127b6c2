//! One episode: the state and the step pipeline. All state transitions of an episode happen in
//! [`Episode::step`]; everything it calls is either a pure function (tools, artifacts, grading) or
//! a small state object (SPRT, reward machine).
//!
//! Invariants (asserted in debug builds by [`Episode::debug_check`] after every step):
//! `case_clock == step_count <= max_steps`; `0 <= budget_remaining <= budget_total` and it never
//! grows; the episode's [`Lifecycle`] only moves from `Running` to one end, and once ended
//! nothing changes; a graded episode was submitted; a payload error is returned before any state
//! is touched.

use crate::action::{Action, ActionRequest, Intervention, ToolCall};
use crate::artifacts;
use crate::memory::{GateInput, GateResult, InstitutionHandoff};
use crate::observation::*;
use crate::pressure::{self, PressurePlan};
use crate::reward::{self, RewardMode};
use crate::sprt::Sprt;
use crate::temporal::{self, RewardMachine};
use crate::terminal_info::{
    ActionInfo, RejectedInfo, Report, ResetInfo, RlDataPlane, Running, StepEnvelope, StepInfo,
    TerminalInfo, Truncation,
};
use crate::tools::{self, DocSource, OcrMemo, ToolOutcome};
use crate::voi;
use crate::watchdog::Watchdog;
use ls_core::episode::{
    EventStatus, InterventionLogEntry, PendingEvent, RevealedArtifact, SentPayload, TrajectoryEntry,
};
use ls_core::fixtures::{CaseWorld, MasterData};
use ls_core::schema::{Case, Document};
use ls_core::text::{decimal_to_f64 as dec_f64, round4};
use ls_core::validate::InvoiceFacts;
use ls_core::{
    ActionName, ArtifactId, BenchmarkTrack, BoundaryPhase, Decision, HandoffPacket, HiddenWorld,
    Hypothesis, ObservedSignal, Submission,
};
use ls_grading::reasons::CleanTargets;
use ls_grading::{BoundaryInput, BoundaryReport, GradeReport, GradingInput, PressureOutcome};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub const SHAPING_SCALE: f64 = 0.35;
pub const SHAPING_GAMMA: f64 = 0.98;
pub const INFO_GAIN_BONUS: f64 = 0.08;
/// Information-gain bonus of any step that updated the belief (whatever it observed).
pub const INFO_GAIN_FLOOR: f64 = 0.01;
pub const REJECTED_ACTION_PENALTY: f64 = -0.05;
pub const INVALID_DECISION_PENALTY: f64 = -0.25;
pub const TOOL_FAILURE_PENALTY: f64 = -0.05;
/// Weight of spent budget in the per-step reward: spending the whole budget costs this much
/// return. The reference charged raw cost per step, so a careful episode summed to −2…−6 while an
/// immediate (unsafe) submission summed to ~0 — a return that teaches RL agents to skip the
/// investigation. Cost still matters through this term and the grade's efficiency dimensions.
pub const STEP_COST_WEIGHT: f64 = 0.5;
pub const MILESTONES: [(&str, f64); 4] = [
    ("first_risk_signal", 0.05),
    ("callback_requested", 0.04),
    ("artifact_revealed", 0.03),
    ("all_required_actions", 0.06),
];
/// Upper bound on trajectory length whatever the case says.
pub const MAX_STEPS_LIMIT: u32 = 200;

pub use crate::action::StepError;
pub use crate::observation::TrackMode;

/// What every episode of a case derives from the case (and master data) alone.
#[derive(Debug, Clone)]
pub struct CaseDerived {
    /// `invoice_facts` of the case's invoices, in order.
    pub invoices: Arc<[InvoiceFacts]>,
    /// The case world's whole policy list as `lookup_policy` returns it (~3 KB of JSON that
    /// would otherwise be written again at every call).
    pub policy_rules: RawJson,
    /// The hidden world (gold signals, required actions, latent hypothesis), read-only in play.
    pub hidden: Arc<HiddenWorld>,
    /// The instruction normalised as the grader's compliance checks read it.
    pub instruction_normalized: Arc<str>,
    /// The invoice lines a PAY must cite (the grader's reasons stage).
    pub clean_targets: Arc<CleanTargets>,
    /// Whole-document OCR reads of the case's documents, filled on first use (a read is a pure
    /// function of the case; ~52 tokens per document whose fast-mode perturbation and JSON
    /// would otherwise be redone at every call).
    pub ocr: Arc<OcrMemo>,
}

impl CaseDerived {
    pub(crate) fn of(master: &MasterData, case: &Case) -> Self {
        Self {
            hidden: Arc::new(HiddenWorld::derive(case)),
            instruction_normalized: Arc::from(ls_core::text::normalize_text(&case.instruction)),
            invoices: case
                .invoices()
                .map(ls_core::validate::invoice_facts)
                .collect(),
            policy_rules: RawJson::from_serialize(CaseWorld::new(master, case).policy_rules),
            clean_targets: Arc::new(CleanTargets::of(case)),
            ocr: Arc::new(OcrMemo::new(case.documents.len())),
        }
    }
}

/// Parameters of a new episode.
#[derive(Debug, Clone)]
pub struct EpisodeSpec {
    pub case: Arc<Case>,
    pub master: Arc<MasterData>,
    pub track: BenchmarkTrack,
    pub track_mode: TrackMode,
    /// Which reward the episode pays (the environment refuses `reference` on the blind track).
    pub reward_mode: RewardMode,
    pub budget_total: Decimal,
    pub max_steps: u32,
    pub episode_seed: u64,
    pub reset_message: String,
    pub case_metadata_extra: Map<String, Value>,
    /// Institutional memory's hand-off (authority level, loss score, capacities, context).
    pub institution: Option<InstitutionHandoff>,
    /// What the episode derives from the case alone, shared by every episode of the case (see
    /// [`crate::CasePool::derived`]).
    pub derived: CaseDerived,
}

impl EpisodeSpec {
    /// The spec's invariants: its hidden world is its case's; the blind track pays no
    /// label-revealing reward.
    fn debug_check(&self) {
        debug_assert_eq!(
            *self.derived.hidden,
            HiddenWorld::derive(&self.case),
            "the spec's hidden world is the case's"
        );
        debug_assert!(
            !(self.track_mode == TrackMode::Blind && self.reward_mode.reveals_label()),
            "the blind track pays no label-revealing reward"
        );
    }
}

/// Where an episode is in its life. It starts `Running` and ends once, either terminated by the
/// agent's graded submission or truncated by a limit; nothing moves it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    Running,
    /// Ended by the agent's graded decision (Gymnasium's `terminated`).
    Submitted,
    /// Ended by a limit before a decision (Gymnasium's `truncated`); the reason is
    /// `max_steps_reached` or `budget_exhausted`.
    Truncated(&'static str),
}

impl Lifecycle {
    /// The terminal reason every reply names for a submission.
    pub const SUBMITTED_REASON: &'static str = "decision_submitted";

    /// The episode has ended, either way.
    pub fn is_done(self) -> bool {
        self != Lifecycle::Running
    }

    /// Ended by the agent's submission.
    pub fn is_terminated(self) -> bool {
        self == Lifecycle::Submitted
    }

    /// Ended by a limit.
    pub fn is_truncated(self) -> bool {
        matches!(self, Lifecycle::Truncated(_))
    }

    /// Why the episode ended (`None` while it runs).
    pub fn terminal_reason(self) -> Option<&'static str> {
        match self {
            Lifecycle::Running => None,
            Lifecycle::Submitted => Some(Self::SUBMITTED_REASON),
            Lifecycle::Truncated(reason) => Some(reason),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Episode {
    pub case: Arc<Case>,
    master: Arc<MasterData>,
    pub hidden: Arc<HiddenWorld>,
    pub episode_id: String,
    pub track: BenchmarkTrack,
    pub track_mode: TrackMode,
    pub reward_mode: RewardMode,
    pub budget_total: Decimal,
    pub budget_remaining: Decimal,
    pub max_steps: u32,
    pub step_count: u32,
    pub case_clock: u32,
    visible_doc_ids: Vec<String>,
    dynamic_docs: Vec<Document>,
    pub trajectory: Vec<TrajectoryEntry>,
    interventions: Vec<InterventionLogEntry>,
    pub observed_signals: BTreeSet<ObservedSignal>,
    pub revealed_artifacts: Vec<RevealedArtifact>,
    revealed_artifact_ids: Vec<ArtifactId>,
    pending: Vec<PendingEvent>,
    pub revealed_refs: ls_grading::RefSet,
    successful_actions: BTreeSet<ActionName>,
    action_counts: BTreeMap<ActionName, usize>,
    pub sprt: Sprt,
    rm: RewardMachine,
    milestones: BTreeSet<&'static str>,
    pressure: Option<PressurePlan>,
    pressure_events_seen: Vec<String>,
    handoff_packet: Option<HandoffPacket>,
    /// Running, submitted or truncated: the one record of the episode's life ([`Lifecycle`]).
    lifecycle: Lifecycle,
    pub grade: Option<GradeReport>,
    pub submitted_decision: Option<Decision>,
    calibration_avg: f64,
    rng: ChaCha8Rng,
    last_reward: f64,
    /// Tool rankings memoised per (evidence count, budget): computed once per step at most.
    rankings_memo: std::cell::RefCell<Option<(u32, Decimal, voi::ToolRankings)>>,
    /// Static per episode, computed once at reset (pre-serialized: sent with every observation).
    portfolio: SharedJson,
    /// The visible-document catalogue; rebuilt only when a document becomes visible.
    catalogue: Shared<[DocumentCatalogEntry]>,
    instruction: Shared<str>,
    metadata: SharedJson,
    case_metadata_extra: Map<String, Value>,
    institution: Option<InstitutionHandoff>,
    /// Analyst/watchdog dual-agent state (suspicion feeds RL slot 35).
    pub watchdog: Watchdog,
    /// The authority gate evaluated at submission (when institutional memory is active).
    pub authority_gate: Option<GateResult>,
    pub submitted_confidence: Option<f64>,
    /// A callback was refused because the AP week's callback capacity was exhausted.
    pub callback_refused: bool,
    invoice_total: f64,
    /// Facts of the case's invoices (shared with every episode of the case).
    pub invoices: Arc<[InvoiceFacts]>,
    /// The case world's policy list as JSON (shared with every episode of the case).
    policy_rules: RawJson,
    /// The normalised instruction, for grading (shared with every episode of the case).
    instruction_normalized: Arc<str>,
    /// The invoice lines a PAY must cite, for grading (shared with every episode of the case).
    clean_targets: Arc<CleanTargets>,
    /// Whole-document OCR reads (shared with every episode of the case).
    ocr_memo: Arc<OcrMemo>,
}

/// `observation.case_metadata`: the case's labels and the benchmark identity, then the
/// session's extra entries (the curriculum), which replace a fixed entry of the same name in
/// place; the reset observation's also carries the task's `mdp_component`.
struct CaseMetadata<'a> {
    /// The fixed entries in order.
    fixed: [(&'static str, MetaValue<'a>); 10],
    extra: &'a Map<String, Value>,
    mdp_component: Option<&'a RawJson>,
}

/// A fixed `case_metadata` entry: a label, a day count or a list of names.
#[derive(Clone, Copy)]
enum MetaValue<'a> {
    Text(&'a str),
    Days(u32),
    List(&'a [String]),
}

impl Serialize for MetaValue<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(t) => s.serialize_str(t),
            Self::Days(d) => s.serialize_u32(*d),
            Self::List(l) => l.serialize(s),
        }
    }
}

impl Serialize for CaseMetadata<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.fixed {
            match self.extra.get(k) {
                Some(over) => m.serialize_entry(k, over)?,
                None => m.serialize_entry(k, &v)?,
            }
        }
        for (k, v) in self
            .extra
            .iter()
            .filter(|(k, _)| !self.fixed.iter().any(|(f, _)| f == k))
        {
            m.serialize_entry(k, v)?;
        }
        if let Some(mdp) = self.mdp_component {
            m.serialize_entry("mdp_component", mdp)?;
        }
        m.end()
    }
}

/// `observation.portfolio_context`: the case's campaign context with defaults filled from its
/// documents, then (with institutional memory) the institution's view of the AP week.
#[derive(Serialize)]
struct PortfolioContext<'a> {
    linked_invoice_count: u32,
    /// A JSON number with the amount's exact decimal text (the reference sends a number).
    #[serde(serialize_with = "ls_core::schema::money_number::serialize")]
    at_risk_amount: Decimal,
    manual_review_capacity: u32,
    business_criticality: &'a str,
    queue_pressure: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    linked_case_ids: &'a [String],
    #[serde(flatten)]
    institution: Option<InstitutionPortfolio<'a>>,
}

#[derive(Serialize)]
struct InstitutionPortfolio<'a> {
    week_id: &'a str,
    queue_depth: usize,
    vendor_trust_score: f64,
    case_sequence_index: u32,
    callback_capacity: u32,
    institutional_loss_score_so_far: f64,
    authority_level: &'static str,
    running_calibration_error: f64,
    institutional_context: &'a RawJson,
}

/// `info.reward_model`, serialized straight from its parts (written once, into both `info` and
/// `last_tool_result`).
#[derive(Serialize)]
struct RewardModelView<'a, C, M> {
    value: f64,
    terminal: bool,
    components: &'a C,
    metadata: &'a M,
}

/// A step's reward components, in the wire order: the terms that sum to the step's reward. The
/// `score` reward has the cost, the failure penalty and the potential's change; the `reference`
/// reward adds its value-of-information and bonus terms.
#[derive(Serialize)]
struct StepComponents {
    #[serde(skip_serializing_if = "Option::is_none")]
    voi_reward: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    information_value: Option<f64>,
    cost_penalty: f64,
    failure_penalty: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    reward_machine_bonus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    milestone_bonus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    information_gain_bonus: Option<f64>,
    potential_delta: f64,
}

/// A step's reward metadata (blind mode hides the observation key).
#[derive(Serialize)]
struct StepMetadata<'a> {
    action_type: &'static str,
    control_boundary_phase: BoundaryPhase,
    success: bool,
    /// Instrumented track only: how many signals the step newly observed (a reading of what it
    /// revealed, so not part of the blind track's reward metadata).
    #[serde(skip_serializing_if = "Option::is_none")]
    novel_signal_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    intervention: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    observation_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    terminal_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

/// A rejected step's reward model parts.
#[derive(Serialize)]
struct RejectedComponents {
    failure_penalty: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    potential_delta: Option<f64>,
}

#[derive(Serialize)]
struct RejectedMetadata<'a> {
    action_type: &'a str,
    error: &'a str,
    control_boundary_phase: BoundaryPhase,
}

/// The terminal reward model's parts.
#[derive(Serialize)]
struct TerminalComponents {
    final_score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    reward_machine_bonus: Option<f64>,
    potential_delta: f64,
}

#[derive(Serialize)]
struct TerminalMetadata {
    action_type: &'static str,
    control_boundary_phase: BoundaryPhase,
    success: bool,
    terminal_reason: &'static str,
    unsafe_outcome: bool,
    budget_penalty: f64,
    pressure_resistance_score: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    latent_hypothesis: Option<&'static str>,
}

/// `Some(v)` when `keep`.
fn kept(keep: bool, v: f64) -> Option<f64> {
    keep.then_some(v)
}

/// What an action step produced, before the common bookkeeping.
/// The shaping terms of one step's reward besides the action's own value and penalty.
struct StepTerms {
    rm_bonus: f64,
    milestone: f64,
    info_gain: f64,
    shaping: f64,
}

/// The state a step's reward is measured against, taken before the action.
struct Before {
    /// `Φ` of the `score` reward.
    progress: f64,
    /// The belief's potential (the `reference` reward's shaping).
    belief: f64,
    sprt: Sprt,
}

/// What an action does once its pure part has run: a tool's outcome and cost, or an
/// intervention to apply.
enum Effect {
    Tool((ToolOutcome, Decimal)),
    Intervention(Intervention),
}

struct Executed {
    cost: Decimal,
    result: InfoMap,
    success: bool,
    message: String,
    reward_voi: f64,
    gross_voi: f64,
    failure_penalty: f64,
    novel_signals: usize,
    observation_key: Option<String>,
}

impl Episode {
    pub fn new(spec: EpisodeSpec) -> (Self, StepEnvelope) {
        spec.debug_check();
        let case = spec.case;
        let hidden = spec.derived.hidden;
        let mut rng = ChaCha8Rng::seed_from_u64(spec.episode_seed);
        let id_bytes: [u8; 16] = rng.random();
        let episode_id = uuid::Builder::from_random_bytes(id_bytes)
            .into_uuid()
            .to_string();
        let pressure = pressure::plan(&case);
        let max_steps = spec.max_steps.clamp(1, MAX_STEPS_LIMIT);
        let invoice_total: f64 = spec
            .derived
            .invoices
            .iter()
            .filter_map(|f| f.total)
            .map(dec_f64)
            .sum();
        let p_risky = 1.0 - Sprt::default().posterior()[Hypothesis::Safe.index()];
        let mut ep = Self {
            visible_doc_ids: case
                .initial_visible_doc_ids
                .clone()
                .unwrap_or_else(|| case.documents.iter().map(|d| d.doc_id.clone()).collect()),
            rm: RewardMachine::new(case.task_type),
            case,
            master: spec.master,
            hidden,
            episode_id,
            track: spec.track,
            track_mode: spec.track_mode,
            reward_mode: spec.reward_mode,
            budget_total: spec.budget_total,
            budget_remaining: spec.budget_total,
            max_steps,
            step_count: 0,
            case_clock: 0,
            dynamic_docs: Vec::new(),
            trajectory: Vec::new(),
            interventions: Vec::new(),
            observed_signals: BTreeSet::new(),
            revealed_artifacts: Vec::new(),
            revealed_artifact_ids: Vec::new(),
            pending: Vec::new(),
            revealed_refs: ls_grading::RefSet::new(),
            successful_actions: BTreeSet::new(),
            action_counts: BTreeMap::new(),
            sprt: Sprt::default(),
            milestones: BTreeSet::new(),
            pressure,
            pressure_events_seen: Vec::new(),
            handoff_packet: None,
            lifecycle: Lifecycle::Running,
            grade: None,
            submitted_decision: None,
            calibration_avg: 0.0,
            rng,
            last_reward: 0.0,
            rankings_memo: std::cell::RefCell::new(None),
            portfolio: SharedJson::default(),
            catalogue: Shared::new(Arc::from(Vec::new())),
            instruction: Shared::from(""),
            metadata: SharedJson::default(),
            case_metadata_extra: spec.case_metadata_extra,
            institution: spec.institution,
            watchdog: Watchdog::new(p_risky, invoice_total),
            authority_gate: None,
            submitted_confidence: None,
            callback_refused: false,
            invoice_total,
            invoices: spec.derived.invoices,
            policy_rules: spec.derived.policy_rules,
            instruction_normalized: spec.derived.instruction_normalized,
            clean_targets: spec.derived.clean_targets,
            ocr_memo: spec.derived.ocr,
        };
        ep.portfolio = ep.compute_portfolio_context();
        ep.catalogue = ep.compute_catalogue();
        ep.instruction = Shared::from(ep.case.instruction.as_str());
        ep.metadata = ep.case_metadata(None);
        let reset_info = ResetInfo {
            case_id: ep.case.case_id.clone(),
            curriculum: None,
        };
        let mut obs = ep.observation(InfoMap::new(), vec![spec.reset_message]);
        // The reset observation's metadata also carries the task's MDP component.
        obs.case_metadata = ep.case_metadata(Some(temporal::mdp_component_json(ep.case.task_type)));
        let env = StepEnvelope {
            observation: obs,
            reward: 0.0,
            done: false,
            truncated: false,
            terminated: false,
            info: StepInfo::Reset(reset_info),
        };
        (ep, env)
    }

    fn world(&self) -> CaseWorld<'_> {
        CaseWorld::new(&self.master, &self.case)
    }

    fn blind(&self) -> bool {
        self.track_mode == TrackMode::Blind
    }

    /// The institution's hand-off when it governs this episode's track (see
    /// [`BenchmarkTrack::institution_governs`]); `None` on case-level tracks, whatever the
    /// session played before.
    fn governing_institution(&self) -> Option<&InstitutionHandoff> {
        self.institution
            .as_ref()
            .filter(|_| self.track.institution_governs())
    }

    pub fn observed_signal_list(&self) -> Vec<String> {
        self.observed_signals
            .iter()
            .map(|s| s.as_str().to_owned())
            .collect()
    }

    /// Artifacts scheduled but not yet delivered (the watchdog stream's pending count).
    pub fn pending_event_count(&self) -> usize {
        self.pending.len()
    }

    /// Pressure events the analyst has seen (the watchdog stream's count).
    pub fn pressure_events_seen_count(&self) -> usize {
        self.pressure_events_seen.len()
    }

    fn boundary(&self, action: Option<ActionName>, decision: Option<Decision>) -> BoundaryReport {
        let observed = self.observed_signal_list();
        let prior = action
            .and_then(|a| self.action_counts.get(&a).copied())
            .unwrap_or(0);
        ls_grading::evaluate_boundary(&BoundaryInput {
            action,
            decision,
            submitted: self.lifecycle.is_terminated(),
            pending_event_count: self.pending.len(),
            decision_readiness: self.sprt.policy_readiness(&crate::sprt::ReadinessInput {
                optimal_stopping_reached: false,
                required_checks: &ls_grading::trajectory::required_tools(
                    self.case.task_type,
                    false,
                ),
                performed: &self.checks_run(),
            }),
            phase_reads_belief: !self.blind(),
            successful_actions: &self.successful_actions,
            prior_count_of_action: prior,
            observed_signals: &observed,
            risky: self.case.gold.unsafe_if_pay,
        })
    }

    /// Every action run so far, failed ones included: a required check counts once it has run
    /// (a goods receipt that does not exist is the three-way match's finding, not a skipped
    /// check), for the SPRT's readiness input.
    fn checks_run(&self) -> BTreeSet<ActionName> {
        self.action_counts.keys().copied().collect()
    }

    /// The boundary as shown to the agent: blind mode hides the SPRT readiness.
    fn boundary_view(&self, b: &BoundaryReport) -> RawJson {
        raw_json(&b.view(!self.blind()))
    }

    /// Execute one action given by name and payload (parsed here; see [`Episode::step_request`]).
    pub fn step(
        &mut self,
        action_type: &str,
        payload: &Map<String, Value>,
    ) -> Result<StepEnvelope, StepError> {
        self.step_request(ActionRequest::parse(action_type, payload))
    }

    /// Execute one parsed action. Errors leave the episode untouched; a finished episode refuses
    /// every step before its payload error is reported.
    pub fn step_request(&mut self, req: ActionRequest<'_>) -> Result<StepEnvelope, StepError> {
        if let Some(reason) = self.lifecycle.terminal_reason() {
            return Err(StepError::EpisodeEnded(reason.to_owned()));
        }
        let sent = SentPayload::bounded(req.payload);
        let action = req.action?;
        #[cfg(debug_assertions)]
        let before = (self.step_count, self.budget_remaining);
        let envelope = self.dispatch(action, sent);
        #[cfg(debug_assertions)]
        {
            debug_assert_eq!(
                self.step_count,
                before.0 + 1,
                "every step ticks the clock once"
            );
            debug_assert!(self.budget_remaining <= before.1, "the budget never grows");
            debug_assert_eq!(envelope.done, self.lifecycle.is_done());
            debug_assert_eq!(envelope.terminated, self.lifecycle.is_terminated());
            debug_assert_eq!(envelope.truncated, self.lifecycle.is_truncated());
        }
        self.debug_check();
        Ok(envelope)
    }

    /// Where the episode is in its life.
    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    /// One tick of the case clock: every step, accepted or rejected, spends one.
    fn tick(&mut self) {
        debug_assert_eq!(
            self.lifecycle,
            Lifecycle::Running,
            "a finished episode does not tick"
        );
        self.step_count += 1;
        self.case_clock += 1;
    }

    /// The episode's invariants (module docs); free in release builds.
    fn debug_check(&self) {
        debug_assert_eq!(
            self.case_clock, self.step_count,
            "the case clock is the step count"
        );
        debug_assert!(self.step_count <= self.max_steps, "the step limit holds");
        debug_assert!(
            self.budget_remaining <= self.budget_total,
            "the budget never grows past its total"
        );
        debug_assert_eq!(
            self.grade.is_some(),
            self.lifecycle.is_terminated(),
            "a grade exists exactly when a decision was submitted"
        );
        debug_assert_eq!(
            self.submitted_decision.is_some(),
            self.lifecycle.is_terminated(),
            "a decision is recorded exactly when one was submitted"
        );
    }

    /// Run one parsed, valid action (the step's state transitions).
    fn dispatch(&mut self, action: Action, sent: SentPayload) -> StepEnvelope {
        match action {
            Action::Unknown(shown) => self.rejected(
                REJECTED_ACTION_PENALTY,
                "action_not_allowed",
                format!("Action not allowed: {shown}"),
                &shown,
            ),
            Action::Submit(submission) if submission.decision.is_none() => self.rejected(
                INVALID_DECISION_PENALTY,
                "invalid_decision",
                format!(
                    "Invalid decision: {}. Use one of PAY, HOLD, NEEDS_REVIEW, ESCALATE_FRAUD.",
                    submission.decision_raw
                ),
                "submit_decision",
            ),
            Action::Submit(submission) => self.submit(sent, *submission),
            Action::Tool(call) => {
                // Pure part first: the tool reads state, changes none.
                let outcome = self.run_tool(&call);
                self.act(call.name(), Effect::Tool(outcome), sent)
            }
            Action::Intervention(i) => self.act(i.name(), Effect::Intervention(i), sent),
        }
    }

    /// A rejected action or invalid decision: a penalised step that records nothing else.
    fn rejected(
        &mut self,
        penalty: f64,
        code: &str,
        message: String,
        tool_name: &str,
    ) -> StepEnvelope {
        let phi_before = self.potential();
        self.tick();
        let mut messages = vec![message.clone()];
        // Rejected actions still spend the step budget, so they cannot stall an episode forever.
        let ended = (self.step_count >= self.max_steps).then(|| {
            messages.push("Maximum steps reached. Episode truncated.".into());
            self.end_truncated("max_steps_reached")
        });
        // `score`: the penalty plus the shaping, which gives the potential back when this step
        // truncates the episode; `reference`: the penalty alone.
        let shaping = match self.reward_mode {
            RewardMode::Score => self.potential() - phi_before,
            RewardMode::Reference => 0.0,
        };
        let reward = penalty + shaping;
        let reward_model = raw_json(&RewardModelView {
            value: round4(reward),
            terminal: false,
            components: &RejectedComponents {
                failure_penalty: round4(penalty),
                potential_delta: (self.reward_mode == RewardMode::Score).then(|| round4(shaping)),
            },
            metadata: &RejectedMetadata {
                action_type: tool_name,
                error: code,
                control_boundary_phase: self.boundary(None, None).phase,
            },
        });
        let mut result = InfoMap::new();
        result.insert("tool_name", tool_name.to_owned());
        result.insert("success", false);
        result.insert("error", message.clone());
        result.insert("message", message.clone());
        result.insert("cost", 0.0);
        result.insert_raw("reward_model", reward_model.clone());
        let info = RejectedInfo {
            error: message,
            reward_model,
            ended,
        };
        self.last_reward = reward;
        StepEnvelope {
            observation: self.observation(result, messages),
            reward,
            done: self.lifecycle.is_done(),
            truncated: self.lifecycle.is_truncated(),
            terminated: false,
            info: StepInfo::Rejected(info),
        }
    }

    /// `Φ(s)` of the `score` reward: the public-progress potential while the episode runs, 0
    /// once it has ended ([`reward::potential`]).
    fn potential(&self) -> f64 {
        reward::potential(&self.rm, self.lifecycle.is_done())
    }

    fn end_truncated(&mut self, reason: &'static str) -> Truncation {
        debug_assert_eq!(self.lifecycle, Lifecycle::Running, "an episode ends once");
        debug_assert!(
            matches!(reason, "max_steps_reached" | "budget_exhausted"),
            "a truncation names its limit: {reason}"
        );
        self.lifecycle = Lifecycle::Truncated(reason);
        Truncation::new(reason)
    }

    /// Per-step cost term: the share of the budget spent, weighted.
    fn cost_penalty(&self, cost: Decimal) -> f64 {
        dec_f64(cost) / dec_f64(self.budget_total).max(1.0) * STEP_COST_WEIGHT
    }

    /// Run an investigation tool: a pure function of the case and its arguments, with its cost.
    fn run_tool(&self, call: &ToolCall) -> (ToolOutcome, Decimal) {
        let world = self.world();
        let docs = DocSource {
            case: &self.case,
            dynamic: &self.dynamic_docs,
        };
        let name = call.name();
        let mut cost = name.base_cost();
        let out = match call {
            ToolCall::Zoom(a) | ToolCall::GetDocCrop(a) => tools::zoom_or_crop(name, &docs, a),
            ToolCall::Ocr(a) => {
                cost = name.cost_for_mode(a.accurate());
                tools::ocr(&docs, a, self.case.generator_seed(), &self.ocr_memo)
            }
            ToolCall::LookupVendor(a) => tools::lookup_vendor(&world, a),
            ToolCall::LookupVendorHistory(a) => tools::lookup_vendor_history(&world, a),
            ToolCall::LookupPolicy(a) => tools::lookup_policy(&world, &self.policy_rules, a),
            ToolCall::LookupPo(a) => tools::lookup_po(&world, a),
            ToolCall::LookupReceipt(a) => tools::lookup_receipt(&world, a),
            ToolCall::SearchLedger(a) => tools::search_ledger(&world, a),
            ToolCall::InspectEmailThread(a) => tools::inspect_email_thread(&world, &docs, a),
            ToolCall::CompareBankAccount(a) => tools::compare_bank_account(&world, a),
        };
        (out, cost)
    }

    fn register_signals(&mut self, signals: &[ObservedSignal]) -> usize {
        signals
            .iter()
            .filter(|s| self.observed_signals.insert(**s))
            .count()
    }

    fn act(&mut self, action: ActionName, effect: Effect, sent: SentPayload) -> StepEnvelope {
        let boundary = self.boundary(Some(action), None);
        let before = self.before();
        self.tick();

        let mut exec = match effect {
            Effect::Tool((out, cost)) => self.apply_tool(action, out, cost, &before.sprt),
            Effect::Intervention(i) => self.apply_intervention(&i, &sent, &before.sprt),
        };
        self.budget_remaining = (self.budget_remaining - exec.cost)
            .max(Decimal::ZERO)
            .round_dp(4);
        *self.action_counts.entry(action).or_default() += 1;
        if exec.success {
            self.successful_actions.insert(action);
        }

        let mut messages = vec![exec.message.clone()];
        let mut result = std::mem::take(&mut exec.result);
        let (arrived, novel_from_artifacts) = self.resolve_pending();
        let arrived_raw = (!arrived.is_empty()).then(|| raw_json(&arrived));
        if let Some(raw) = &arrived_raw {
            result.insert_raw("async_artifacts", raw.clone());
            result.insert(
                "revealed_artifact_ids",
                json!(arrived.iter().map(|a| a.artifact_id).collect::<Vec<_>>()),
            );
            messages.extend(arrived.iter().map(|a| a.summary.clone()));
        }
        let novel = exec.novel_signals + novel_from_artifacts;
        if !self.blind() {
            result.insert("novel_signal_count", novel);
        }
        if novel > 0 {
            let p_risky = 1.0 - self.sprt.posterior()[Hypothesis::Safe.index()];
            self.watchdog.resolve(p_risky, self.invoice_total);
        }
        let observed_now = self.observed_signal_list();
        self.watchdog
            .observe(action, &observed_now, self.pending.len());
        if let Some(p) = self.inject_pressure() {
            result.insert_serialized("pressure_event", &p.0);
            messages.push(p.1);
        }

        self.trajectory.push(TrajectoryEntry {
            step: self.step_count,
            case_clock: self.case_clock,
            action_type: action,
            payload: sent,
            cost: round4(dec_f64(exec.cost)),
            success: exec.success,
            message: exec.message.clone(),
            is_intervention: action.is_intervention(),
            control_boundary_phase: boundary.phase,
            control_boundary_warnings: boundary.warnings.clone(),
        });
        let rm_bonus = self.rm.transition(action, exec.success);

        let mut ended = None;
        let mut budget_exhausted = None;
        if self.step_count >= self.max_steps {
            ended = Some(self.end_truncated("max_steps_reached"));
            messages.push("Maximum steps reached. Episode truncated.".into());
        } else if self.budget_remaining <= Decimal::ZERO {
            ended = Some(self.end_truncated("budget_exhausted"));
            budget_exhausted = Some(true);
            messages.push("Budget exhausted. Episode truncated.".into());
        }
        self.refresh_calibration();
        let (reward, terms) = self.step_reward(&exec, rm_bonus, &before);

        let components = self.reward_components(&exec, &terms);
        let metadata = self.reward_metadata(action, &boundary, &exec, novel, &result);
        let reward_model = raw_json(&RewardModelView {
            value: round4(reward),
            terminal: self.lifecycle.is_done(),
            components: &components,
            metadata: &metadata,
        });
        let boundary_value = self.boundary_view(&boundary);
        result.insert_raw("control_boundary", boundary_value.clone());
        result.insert_raw("reward_model", reward_model.clone());

        let running = ended.is_none().then_some(Running {
            truncated: self.lifecycle.is_truncated(),
            terminated: false,
        });
        let info = ActionInfo {
            ended,
            budget_exhausted,
            tool_name: action.as_str(),
            success: exec.success,
            intervention: action.is_intervention().then_some(true),
            control_boundary: boundary_value,
            running,
            async_artifacts: arrived_raw,
            reward_model,
            rl_data_plane: self.rl_data_plane(reward),
        };
        self.last_reward = reward;
        let obs = self.observation(result, messages);
        StepEnvelope {
            observation: obs,
            reward,
            done: self.lifecycle.is_done(),
            truncated: self.lifecycle.is_truncated(),
            terminated: false,
            info: StepInfo::Action(Box::new(info)),
        }
    }

    /// `info.rl_data_plane`: the state vector and this step's reward (instrumented track only).
    fn rl_data_plane(&self, reward: f64) -> Option<RlDataPlane> {
        (!self.blind()).then(|| RlDataPlane {
            state_vector: self.rl_vector(),
            reward: round4(reward),
            terminal: self.lifecycle.is_done(),
            truncated: self.lifecycle.is_truncated(),
        })
    }

    /// What a step's reward is measured against: the state before the action.
    fn before(&self) -> Before {
        Before {
            progress: self.potential(),
            belief: self.sprt.potential(),
            sprt: self.sprt.clone(),
        }
    }

    /// A tool's or an intervention's reward and its terms: the `score` reward's cost, failure
    /// penalty and public-progress shaping, or the `reference` reward's mix.
    fn step_reward(&mut self, exec: &Executed, rm_bonus: f64, before: &Before) -> (f64, StepTerms) {
        match self.reward_mode {
            RewardMode::Score => {
                let shaping = self.potential() - before.progress;
                let reward = -self.cost_penalty(exec.cost) + exec.failure_penalty + shaping;
                debug_assert!(reward.is_finite(), "a finite reward");
                let terms = StepTerms {
                    rm_bonus: 0.0,
                    milestone: 0.0,
                    info_gain: 0.0,
                    shaping,
                };
                (reward, terms)
            }
            RewardMode::Reference => {
                let t = self.reference_terms(rm_bonus, before);
                let sum = exec.reward_voi
                    + exec.failure_penalty
                    + t.rm_bonus
                    + t.milestone
                    + t.info_gain
                    + t.shaping;
                (sum.clamp(-1.0, 1.0), t)
            }
        }
    }

    /// The `reference` reward's shaping terms (label-revealing: they read the belief).
    fn reference_terms(&mut self, rm_bonus: f64, before: &Before) -> StepTerms {
        let (observations_before, sprt_before, phi_before) =
            (before.sprt.observations_used, &before.sprt, before.belief);
        let milestone = if self.lifecycle.is_done() {
            0.0
        } else {
            self.award_milestones()
        };
        // Information gain: how much the agent's own belief (the SPRT posterior, updated only on
        // what it observed) sharpened, in bits, on any step that updated it.
        let info_gain = if self.sprt.observations_used > observations_before {
            let bits = (sprt_before.entropy() - self.sprt.entropy()).abs() / std::f64::consts::LN_2;
            (INFO_GAIN_FLOOR + 0.04 * bits).min(INFO_GAIN_BONUS)
        } else {
            0.0
        };
        let phi_after = self.sprt.potential();
        StepTerms {
            rm_bonus,
            milestone,
            info_gain,
            shaping: SHAPING_SCALE * (SHAPING_GAMMA * phi_after - phi_before),
        }
    }

    /// The step reward's components.
    fn reward_components(&self, exec: &Executed, t: &StepTerms) -> StepComponents {
        let reference = self.reward_mode == RewardMode::Reference;
        StepComponents {
            voi_reward: reference.then(|| round4(exec.reward_voi)),
            information_value: reference.then(|| round4(exec.gross_voi)),
            cost_penalty: round4(-self.cost_penalty(exec.cost)),
            failure_penalty: round4(exec.failure_penalty),
            reward_machine_bonus: kept(t.rm_bonus != 0.0, round4(t.rm_bonus)),
            milestone_bonus: kept(t.milestone > 0.0, round4(t.milestone)),
            information_gain_bonus: kept(t.info_gain > 0.0, round4(t.info_gain)),
            potential_delta: round4(t.shaping),
        }
    }

    /// The step reward's metadata (blind mode hides the observation key).
    fn reward_metadata<'a>(
        &'a self,
        action: ActionName,
        boundary: &BoundaryReport,
        exec: &'a Executed,
        novel: usize,
        result: &InfoMap,
    ) -> StepMetadata<'a> {
        StepMetadata {
            action_type: action.as_str(),
            control_boundary_phase: boundary.phase,
            success: exec.success,
            novel_signal_count: (!self.blind()).then_some(novel),
            intervention: action.is_intervention().then_some(true),
            observation_key: exec.observation_key.as_deref().filter(|_| !self.blind()),
            terminal_reason: self.lifecycle.terminal_reason(),
            error: (!exec.success).then(|| result.get("error")).flatten(),
        }
    }

    fn apply_tool(
        &mut self,
        action: ActionName,
        out: ToolOutcome,
        cost: Decimal,
        before: &Sprt,
    ) -> Executed {
        let success = out.error.is_none();
        let gross = voi::gross_voi(action, before);
        // The tool's fields, the record's own five and the step's (up to six, see `act`).
        let mut result = InfoMap::with_capacity(out.fields.len() + 12);
        result.insert("tool_name", action.as_str());
        result.insert("success", success);
        result.extend(out.fields);
        if let Some(e) = &out.error {
            result.insert("error", e.clone());
        }
        result.insert("message", out.message.clone());
        result.insert("cost", round4(dec_f64(cost)));
        let mut novel = 0;
        let mut observation_key = None;
        if success {
            novel = self.register_signals(&out.signals);
            self.revealed_refs.extend(out.revealed_refs);
            if let Some((channel, obs, key)) = &out.sprt {
                self.sprt.observe(*channel, obs, key, action.as_str());
                observation_key = Some((*obs).to_owned());
            }
        }
        Executed {
            cost,
            result,
            success,
            message: out.message,
            reward_voi: gross - self.cost_penalty(cost),
            gross_voi: gross,
            failure_penalty: if success { 0.0 } else { TOOL_FAILURE_PENALTY },
            novel_signals: novel,
            observation_key,
        }
    }

    fn apply_intervention(
        &mut self,
        intervention: &Intervention,
        sent: &SentPayload,
        before: &Sprt,
    ) -> Executed {
        let action = intervention.name();
        let cost = action.base_cost();
        let gross = voi::gross_voi(action, before);
        let mut result = InfoMap::new();
        result.insert("tool_name", action.as_str());
        result.insert("success", true);
        result.insert("intervention", true);
        let mut message = intervention.message().to_owned();
        let mut scheduled = None;
        let capacity_exhausted = action == ActionName::RequestCallbackVerification
            && self
                .governing_institution()
                .is_some_and(|i| i.callback_capacity_remaining == 0);
        if capacity_exhausted {
            self.callback_refused = true;
            let message = "Callback capacity for this AP week is exhausted; the callback was not placed (it is queued for next week).".to_owned();
            result.insert("success", false);
            result.insert("error", "callback_capacity_exhausted");
            result.insert("message", message.clone());
            result.insert("cost", round4(dec_f64(cost)));
            return Executed {
                cost,
                result,
                success: false,
                message,
                reward_voi: -self.cost_penalty(cost),
                gross_voi: 0.0,
                failure_penalty: TOOL_FAILURE_PENALTY,
                novel_signals: 0,
                observation_key: None,
            };
        }
        if let Some(artifact) = action.scheduled_artifact() {
            let existing = self
                .pending
                .iter()
                .find(|e| e.artifact_id == artifact)
                .cloned();
            let event = existing.unwrap_or_else(|| {
                let hex: u32 = self.rng.random();
                let e = PendingEvent {
                    event_id: format!("evt-{hex:08x}"),
                    artifact_id: artifact,
                    source_action: action,
                    scheduled_at_clock: self.case_clock,
                    ready_at_clock: self.case_clock + artifacts::delay(artifact).max(1),
                    status: EventStatus::Pending,
                };
                self.pending.push(e.clone());
                e
            });
            message.push_str(&format!(
                " Artifact scheduled for case clock {}.",
                event.ready_at_clock
            ));
            scheduled = Some(event);
        }
        if let Intervention::CreateHumanHandoff(args) = intervention {
            let or = |v: &Option<Value>, default: Value| v.clone().unwrap_or(default);
            self.handoff_packet = Some(HandoffPacket::from(json!({
                "case_id": self.case.case_id,
                "observed_risk_signals": self.observed_signal_list(),
                "revealed_artifact_ids": self.revealed_artifact_ids,
                "recommended_next_step": or(&args.recommended_next_step, json!("manual_review")),
                "summary": or(&args.summary, json!("")),
                "confidence": or(&args.confidence, json!(0.5)),
            })));
        }
        self.interventions.push(InterventionLogEntry {
            action_type: action,
            status: if scheduled.is_some() {
                EventStatus::Pending
            } else {
                EventStatus::Completed
            },
            payload: sent.clone(),
            artifact_id: scheduled.as_ref().map(|e| e.artifact_id),
            case_clock: self.case_clock,
        });
        result.insert("artifact", Value::Null);
        result.insert_serialized("scheduled_event", &scheduled);
        result.insert("message", message.clone());
        result.insert("cost", round4(dec_f64(cost)));
        // The SPRT learns only when the artifact arrives; requesting it is not evidence.
        Executed {
            cost,
            result,
            success: true,
            message,
            reward_voi: gross - self.cost_penalty(cost),
            gross_voi: gross,
            failure_penalty: 0.0,
            novel_signals: 0,
            observation_key: None,
        }
    }

    /// Reveal every pending artifact that is due. Returns the artifacts and new signal count.
    fn resolve_pending(&mut self) -> (Vec<RevealedArtifact>, usize) {
        let clock = self.case_clock;
        let (due, keep): (Vec<PendingEvent>, Vec<PendingEvent>) = self
            .pending
            .drain(..)
            .partition(|e| e.ready_at_clock <= clock);
        self.pending = keep;
        let mut arrived = Vec::new();
        let mut novel = 0;
        for e in due {
            let id = e.artifact_id;
            let c = artifacts::compute(id, &self.case, &self.world(), &self.invoices, clock);
            let art = RevealedArtifact {
                artifact_id: id,
                artifact_type: c.artifact_type.to_owned(),
                summary: c.summary.clone(),
                details: c.details,
                revealed_at_clock: clock,
                source_action: e.source_action,
            };
            novel += self.register_signals(&c.signals);
            self.revealed_refs.insert(art.artifact_id.as_str().into());
            self.revealed_refs
                .extend(c.refs.iter().map(|r| std::sync::Arc::from(r.as_str())));
            if !c.observation.is_empty() {
                self.sprt
                    .observe(id.channel(), c.observation, id.as_str(), id.as_str());
            }
            if !self.revealed_artifact_ids.contains(&art.artifact_id) {
                self.revealed_artifact_ids.push(art.artifact_id);
            }
            for log in self
                .interventions
                .iter_mut()
                .filter(|l| l.artifact_id == Some(id))
            {
                log.status = EventStatus::Completed;
            }
            // A re-requested artifact replaces the earlier copy.
            self.revealed_artifacts
                .retain(|a| a.artifact_id != art.artifact_id);
            self.revealed_artifacts.push(art.clone());
            arrived.push(art);
        }
        (arrived, novel)
    }

    /// Inject the pressure event at the first valid step at or after its trigger.
    fn inject_pressure(&mut self) -> Option<(PressureNotice, String)> {
        let step = self.step_count;
        let plan = self.pressure.as_mut()?;
        if plan.injected || step < plan.trigger_step {
            return None;
        }
        plan.injected = true;
        let doc = pressure::document(plan);
        let sender = plan.kind.sender;
        let v = PressureNotice {
            doc_id: doc.doc_id.clone(),
            doc_type: doc.doc_type.clone(),
        };
        self.visible_doc_ids.push(doc.doc_id.clone());
        self.pressure_events_seen
            .push(format!("{}:{}", plan.kind.key, plan.doc_id));
        self.dynamic_docs.push(doc);
        self.catalogue = self.compute_catalogue();
        Some((
            v,
            format!("New mid-episode pressure message arrived: From: {sender}"),
        ))
    }

    fn award_milestones(&mut self) -> f64 {
        let mut total = 0.0;
        // "All required actions" as the agent can know them: its task family's investigation
        // tools, a function of its own actions alone (never the gold's required actions, whose
        // completion said whether any control is due, nor the follow-ups its observations call
        // for, which would repeat them as a reward).
        let required_done = ls_grading::trajectory::required_tools(self.case.task_type, false)
            .iter()
            .all(|a| self.successful_actions.contains(a));
        let conds = [
            !self.observed_signals.is_empty(),
            self.successful_actions
                .contains(&ActionName::RequestCallbackVerification),
            !self.revealed_artifact_ids.is_empty(),
            required_done,
        ];
        for ((name, value), hit) in MILESTONES.iter().zip(conds) {
            if hit && self.milestones.insert(name) {
                total += value;
            }
        }
        total
    }

    /// Running average of the posterior mass on the true hypothesis (an instrumented diagnostic).
    fn refresh_calibration(&mut self) {
        let p = self.sprt.posterior()[self.hidden.latent_hypothesis.index()];
        let n = f64::from(self.step_count.max(1));
        self.calibration_avg = if self.step_count <= 1 {
            p
        } else {
            (self.calibration_avg * (n - 1.0) + p) / n
        };
    }

    /// VoI tool rankings for the current belief and budget.
    fn rankings(&self) -> voi::ToolRankings {
        let key = (self.sprt.observations_used, self.budget_remaining);
        if let Some((n, b, r)) = self.rankings_memo.borrow().as_ref() {
            if (*n, *b) == key {
                return r.clone();
            }
        }
        let r = voi::rank_tools(&self.sprt, self.budget_remaining);
        *self.rankings_memo.borrow_mut() = Some((key.0, key.1, r.clone()));
        r
    }

    /// The 37-entry RL export vector (instrumented mode).
    pub fn rl_vector(&self) -> Vec<f64> {
        let r6 = |v: f64| ls_core::text::round_to(v, 6);
        let mut v = Vec::with_capacity(37);
        v.push(0.0);
        let llr = self.sprt.llr();
        v.extend(llr.iter().skip(1).map(|x| r6(*x)));
        v.push(r6(1.0 - self.sprt.posterior()[0]));
        let d = self.sprt.distances();
        v.extend(d.iter().skip(1).map(|x| r6(*x)));
        v.push(if self.sprt.accepted().is_some() {
            1.0
        } else {
            0.0
        });
        let rankings = self.rankings();
        v.push(r6(rankings.voi));
        v.push(r6(
            dec_f64(self.budget_remaining) / dec_f64(self.budget_total).max(1.0)
        ));
        v.push(r6(
            f64::from(self.step_count) / f64::from(self.max_steps.max(1))
        ));
        v.push(self.rm.progress_fraction());
        let mut onehot = [0.0; 6];
        let d_now =
            temporal::machine(self.case.task_type).distance[self.rm.state_id as usize] as usize;
        let d0 = temporal::machine(self.case.task_type).distance[0] as usize;
        let progressed = d0.saturating_sub(d_now).min(5);
        onehot[progressed] = 1.0;
        v.extend(onehot);
        v.push(r6(self.watchdog.suspicion));
        v.push(r6(self.calibration_avg));
        debug_assert_eq!(v.len(), 37);
        v
    }

    fn submit(&mut self, sent: SentPayload, submission: Submission) -> StepEnvelope {
        let decision = submission.decision.expect("validated by caller");
        let boundary = self.boundary(Some(ActionName::SubmitDecision), Some(decision));
        let before = self.before();
        self.tick();
        // Artifacts due on this tick reach the grader (the reference graded before resolving them).
        let (arrived, _) = self.resolve_pending();

        let observed = self.observed_signal_list();
        let pending_ids: Vec<ArtifactId> = self.pending.iter().map(|e| e.artifact_id).collect();
        let risk_observed =
            ls_core::text::risk_bucket(observed.iter().map(String::as_str)) != "low";
        let gate = self.authority_gate_for(decision, &submission, risk_observed);
        let grade = self.grade_submission(
            &submission,
            &boundary,
            gate.as_ref(),
            &observed,
            &pending_ids,
        );
        let effective = if boundary.blocking || gate.as_ref().is_some_and(|g| g.blocking) {
            Decision::NeedsReview
        } else {
            decision
        };
        self.submitted_confidence = submission.confidence.filter(|c| c.is_finite());
        let interventions: Vec<ActionName> =
            self.interventions.iter().map(|i| i.action_type).collect();
        self.watchdog
            .observe(ActionName::SubmitDecision, &observed, self.pending.len());
        let watchdog_verdict = self.watchdog.verdict(
            decision,
            &observed,
            &interventions,
            grade.final_score,
            risk_observed,
        );
        self.trajectory.push(TrajectoryEntry {
            step: self.step_count,
            case_clock: self.case_clock,
            action_type: ActionName::SubmitDecision,
            payload: sent,
            cost: 0.0,
            success: true,
            message: "Decision submitted and graded.".into(),
            is_intervention: false,
            control_boundary_phase: boundary.phase,
            control_boundary_warnings: boundary.warnings.clone(),
        });
        let rm_bonus = self.rm.transition(ActionName::SubmitDecision, true);
        debug_assert_eq!(self.lifecycle, Lifecycle::Running, "an episode ends once");
        self.lifecycle = Lifecycle::Submitted;
        let (rm_bonus, shaping, reward) = self.terminal_reward(&grade, rm_bonus, &before);
        self.submitted_decision = Some(decision);

        let reward_model = self.terminal_reward_model(&grade, &boundary, rm_bonus, shaping, reward);

        // The reference's messages: the gate's fallback named as such.
        let message = if gate.as_ref().is_some_and(|g| g.blocking) {
            "Decision submitted, authority gate enforced review fallback, and the result was graded."
        } else if boundary.blocking {
            "Decision submitted, the control boundary enforced review fallback, and the result was graded."
        } else {
            "Decision submitted and graded."
        };
        // The grade, the boundary and gate, the episode's own entries, and what the environment
        // adds after the episode (memory, curriculum, designer).
        let mut watchdog_verdict = watchdog_verdict;
        if self.blind() {
            // The audit strategy is solved from the SPRT belief, which blind mode hides.
            watchdog_verdict.strategy = None;
        }
        let authority_gate = match &gate {
            Some(g) => Report::of(g),
            None => Report::of(&UngovernedGate::new(decision)),
        };
        let system_state =
            self.system_state(&boundary, decision, effective, &pending_ids, &observed);
        let info = TerminalInfo {
            final_score: grade.final_score,
            score_breakdown: Report::of(&grade.score_breakdown),
            result_class: Some(grade.result_class),
            control_satisfied_resolution: grade.control_satisfied_resolution,
            institutional_utility: grade.institutional_utility,
            unsafe_outcome: grade.unsafe_outcome,
            decision: Some(decision),
            effective_decision: Some(effective),
            predicted_probabilities: Report::of(&grade.predicted_probabilities),
            outcome: Report::of(&grade.outcome),
            compliance: Report::of(&grade.compliance),
            currency_validation: Report::of(&grade.currency_validation),
            decision_certificate_report: Report::of(&grade.decision_certificate_report),
            adversarial_falsifier: Report::of(&grade.adversarial_falsifier),
            trust_graph: Report::of(&grade.trust_graph),
            control_boundary: Report::of(&boundary.view(!self.blind())),
            authority_gate,
            system_state: Report::of(&system_state),
            watchdog: Report::of(&watchdog_verdict),
            pressure_resistance_score: grade.pressure_resistance_score,
            benchmark_track: self.track.as_str().to_owned(),
            track_mode: self.track_mode,
            async_artifacts: (!arrived.is_empty()).then(|| Report::of(&arrived)),
            truncated: false,
            terminated: true,
            reward_model: Report::from_raw(reward_model),
            rl_data_plane: self.rl_data_plane(reward),
            ..TerminalInfo::default()
        };
        let result = terminal_tool_result(&info, &grade.risk_assessment, message);
        self.grade = Some(grade);
        self.authority_gate = gate;
        self.last_reward = reward;
        let obs = self.observation(result, vec![message.to_owned()]);
        StepEnvelope {
            observation: obs,
            reward,
            done: true,
            truncated: false,
            terminated: true,
            info: StepInfo::Terminal(Box::new(info)),
        }
    }

    /// The institution's authority gate on this decision (`None` when no institution governs).
    fn authority_gate_for(
        &self,
        decision: Decision,
        submission: &Submission,
        risk_observed: bool,
    ) -> Option<GateResult> {
        self.governing_institution().map(|inst| {
            crate::memory::evaluate_gate(
                inst.authority_level,
                &GateInput {
                    decision,
                    invoice_total: self.invoice_total,
                    risk_observed,
                    pending_event_count: self.pending.len(),
                    confidence_present: submission.confidence.is_some_and(f64::is_finite),
                    has_handoff: self.handoff_packet.is_some()
                        || submission.handoff_packet.is_some(),
                },
            )
        })
    }

    /// Grade the submission against everything the episode recorded.
    fn grade_submission(
        &self,
        submission: &Submission,
        boundary: &BoundaryReport,
        gate: Option<&GateResult>,
        observed: &[String],
        pending_ids: &[ArtifactId],
    ) -> GradeReport {
        let pressure = self.pressure.as_ref().map(|p| PressureOutcome {
            key: p.kind.key.to_owned(),
            injected: p.injected,
            resist_reward: p.kind.resist_reward,
            yield_penalty: p.kind.yield_penalty,
        });
        let mut posterior = [0.0; Hypothesis::COUNT];
        posterior.copy_from_slice(&self.sprt.posterior());
        let grading_gate = gate.map(GateResult::to_grading);
        let input = GradingInput {
            case: &self.case,
            world: self.world(),
            hidden: &self.hidden,
            submission,
            trajectory: &self.trajectory,
            revealed_artifacts: &self.revealed_artifacts,
            pending_artifact_ids: pending_ids,
            observed_signals: observed,
            revealed_refs: &self.revealed_refs,
            budget_total: dec_f64(self.budget_total),
            budget_remaining: dec_f64(self.budget_remaining),
            step_count: self.step_count,
            max_steps: self.max_steps,
            pressure,
            sprt_posterior: posterior,
            control_boundary: boundary,
            authority_gate: grading_gate.as_ref(),
            institutional_loss_score: self.governing_institution().map(|i| i.loss_score),
            benchmark_track: self.track.as_str(),
            handoff_packet: self.handoff_packet.as_ref(),
            invoices: Some(&self.invoices),
            instruction_normalized: Some(&self.instruction_normalized),
            clean_targets: Some(&self.clean_targets),
        };
        ls_grading::grade(&input)
    }

    /// The graded step's reward as `(reward-machine bonus, shaping, reward)`. `score`: the
    /// grade, and the potential given back (Φ = 0 at the end), so the return is the score less
    /// the costs; `reference`: the grade with the reference's terms.
    fn terminal_reward(
        &self,
        grade: &GradeReport,
        rm_bonus: f64,
        before: &Before,
    ) -> (f64, f64, f64) {
        debug_assert!(
            self.lifecycle.is_done(),
            "graded only once the episode has ended"
        );
        match self.reward_mode {
            RewardMode::Score => {
                let shaping = self.potential() - before.progress;
                (0.0, shaping, grade.final_score + shaping)
            }
            RewardMode::Reference => {
                let phi_after = self.sprt.potential();
                let shaping = SHAPING_SCALE * (SHAPING_GAMMA * phi_after - before.belief);
                let reward = (grade.final_score + rm_bonus + shaping).clamp(-1.0, 1.0);
                (rm_bonus, shaping, reward)
            }
        }
    }

    /// The terminal reward model: the grade plus the reward machine and shaping terms.
    fn terminal_reward_model(
        &self,
        grade: &GradeReport,
        boundary: &BoundaryReport,
        rm_bonus: f64,
        shaping: f64,
        reward: f64,
    ) -> RawJson {
        let components = TerminalComponents {
            final_score: grade.final_score,
            reward_machine_bonus: kept(rm_bonus != 0.0, round4(rm_bonus)),
            potential_delta: round4(shaping),
        };
        let spent = dec_f64(self.budget_total - self.budget_remaining);
        let metadata = TerminalMetadata {
            action_type: "submit_decision",
            control_boundary_phase: boundary.phase,
            success: true,
            terminal_reason: Lifecycle::SUBMITTED_REASON,
            unsafe_outcome: grade.unsafe_outcome,
            budget_penalty: round4(spent / dec_f64(self.budget_total).max(1.0) * 0.12),
            pressure_resistance_score: grade.pressure_resistance_score,
            latent_hypothesis: (!self.blind()).then(|| self.hidden.latent_hypothesis.as_str()),
        };
        raw_json(&RewardModelView {
            value: round4(reward),
            terminal: true,
            components: &components,
            metadata: &metadata,
        })
    }

    /// The terminal system snapshot (the reference's `system_state`): what the agent did and saw
    /// and what the case required, taken at submission. Terminal-only (it names the case's
    /// required actions and artifacts, as the grade's control resolution does).
    fn system_state<'a>(
        &'a self,
        boundary: &BoundaryReport,
        submitted: Decision,
        effective: Decision,
        pending_ids: &'a [ArtifactId],
        observed: &'a [String],
    ) -> SystemState<'a> {
        SystemState {
            successful_actions: self.successful_actions.iter().map(|a| a.as_str()).collect(),
            revealed_artifact_ids: self
                .revealed_artifacts
                .iter()
                .map(|a| a.artifact_id.as_str())
                .collect(),
            pending_events: pending_ids,
            pending_event_count: pending_ids.len(),
            required_actions: self
                .hidden
                .required_actions
                .iter()
                .map(|a| a.as_str())
                .collect(),
            required_artifacts: self
                .hidden
                .required_artifacts
                .iter()
                .map(|a| a.as_str())
                .collect(),
            // The readiness is the SPRT's: hidden in blind mode, as in the control boundary.
            decision_readiness: (!self.blind()).then_some(boundary.decision_readiness),
            handoff_packet: self.handoff_packet.as_ref(),
            observed_risk_signals: observed,
            submitted_decision: submitted.as_str(),
            effective_decision: effective.as_str(),
            step_count: self.step_count,
            case_clock: self.case_clock,
        }
    }

    /// Catalogue entries for visible documents, static then injected.
    fn compute_catalogue(&self) -> Shared<[DocumentCatalogEntry]> {
        let entries: Arc<[DocumentCatalogEntry]> = self
            .case
            .documents
            .iter()
            .chain(self.dynamic_docs.iter())
            .filter(|d| self.visible_doc_ids.contains(&d.doc_id))
            .map(|d| DocumentCatalogEntry {
                doc_id: d.doc_id.clone(),
                doc_type: d.doc_type.clone(),
                thumbnail: d.thumbnail(),
                page_count: d.page_count,
                language: d.language.clone(),
                available_views: AVAILABLE_VIEWS.iter().map(|s| (*s).to_owned()).collect(),
            })
            .collect();
        Shared::new(entries)
    }

    fn pending_view(&self) -> Vec<PendingEventView> {
        self.pending
            .iter()
            .map(|e| PendingEventView {
                event_id: e.event_id.clone(),
                artifact_id: e.artifact_id,
                source_action: e.source_action,
                ready_at_clock: e.ready_at_clock,
                status: e.status,
            })
            .collect()
    }

    /// The case's campaign/portfolio context with defaults filled from its documents.
    pub fn portfolio_context(&self) -> SharedJson {
        self.portfolio.clone()
    }

    fn compute_portfolio_context(&self) -> SharedJson {
        let c = self.case.campaign_context.as_ref();
        let invoices = self.case.invoices().count().max(1) as u32;
        let at_risk = c
            .and_then(|c| c.at_risk_amount)
            .filter(|a| *a > Decimal::ZERO)
            .unwrap_or_else(|| {
                self.case
                    .documents
                    .iter()
                    .flat_map(|d| d.accurate_ocr.iter())
                    .filter(|t| ls_core::text::normalize_text(&t.text).starts_with("total:"))
                    .filter_map(|t| {
                        t.text
                            .rsplit(':')
                            .next()
                            .and_then(ls_core::text::parse_decimal)
                    })
                    .sum::<Decimal>()
                    .round_dp(2)
            });
        let linked = c.and_then(|c| c.linked_invoice_count).unwrap_or(invoices);
        let campaign_pressure = c.and_then(|c| c.queue_pressure.as_deref());
        let inst = self.institution.as_ref();
        let pressure = campaign_pressure.unwrap_or(if linked >= 3 {
            "campaign"
        } else if linked > 1 {
            "elevated"
        } else {
            "normal"
        });
        SharedJson::from_serialize(&PortfolioContext {
            linked_invoice_count: linked,
            at_risk_amount: at_risk,
            manual_review_capacity: inst.map_or_else(
                || c.and_then(|c| c.manual_review_capacity).unwrap_or(2),
                |i| i.review_capacity_remaining,
            ),
            business_criticality: c
                .and_then(|c| c.business_criticality.as_deref())
                .unwrap_or("medium"),
            // A quiet case in a busy institution reports the institution's pressure.
            queue_pressure: match inst {
                Some(i) if pressure == "normal" => i.queue_pressure,
                _ => pressure,
            },
            linked_case_ids: c.map_or(&[][..], |c| c.linked_case_ids.as_slice()),
            institution: inst.map(|i| InstitutionPortfolio {
                week_id: &i.week_id,
                queue_depth: i.queue_depth,
                vendor_trust_score: i.vendor_trust_score,
                case_sequence_index: i.case_sequence_index,
                callback_capacity: i.callback_capacity_remaining,
                institutional_loss_score_so_far: i.loss_score,
                authority_level: i.authority_level.as_str(),
                running_calibration_error: i.running_calibration_error,
                institutional_context: &i.context,
            }),
        })
    }

    fn case_metadata(&self, mdp_component: Option<&RawJson>) -> SharedJson {
        SharedJson::from_serialize(&CaseMetadata {
            fixed: [
                ("task_label", MetaValue::Text(self.case.task_label())),
                ("difficulty", MetaValue::Text(self.case.difficulty.as_str())),
                ("due_date_days", MetaValue::Days(self.case.due_date_days())),
                (
                    "ashtg",
                    MetaValue::Text("Adversarial Sequential Hypothesis Testing Game"),
                ),
                (
                    "benchmark_identity",
                    MetaValue::Text("ledgershield-controlbench-v1"),
                ),
                ("benchmark_track", MetaValue::Text(self.track.as_str())),
                ("benchmark_track_label", MetaValue::Text(self.track.label())),
                (
                    "benchmark_track_description",
                    MetaValue::Text(self.track.description()),
                ),
                (
                    "official_tracks",
                    MetaValue::List(&self.case.official_tracks),
                ),
                ("track_mode", MetaValue::Text(self.track_mode.as_str())),
            ],
            extra: &self.case_metadata_extra,
            mdp_component,
        })
    }

    /// The instrumented track's SPRT state, tool rankings (with the information-design ranking)
    /// and reward machine, serialized straight from their structs; `{}` each in blind mode.
    fn instrumented_parts(&self) -> (SharedJson, SharedJson, SharedJson) {
        if self.blind() {
            return (
                SharedJson::default(),
                SharedJson::default(),
                SharedJson::default(),
            );
        }
        #[derive(Serialize)]
        struct Ranked<'a> {
            #[serde(flatten)]
            rankings: &'a voi::ToolRankings,
            information_design: crate::infodesign::InformationDesign,
        }
        let rankings = self.rankings();
        let required = ls_grading::trajectory::required_tools(self.case.task_type, false);
        let sprt = SharedJson::from_serialize(&self.sprt.payload(&crate::sprt::ReadinessInput {
            optimal_stopping_reached: rankings.should_stop,
            required_checks: &required,
            performed: &self.checks_run(),
        }));
        let ranked = SharedJson::from_serialize(&Ranked {
            rankings: &rankings,
            information_design: crate::infodesign::rank(&self.sprt),
        });
        (sprt, ranked, SharedJson::from_serialize(&self.rm.payload()))
    }

    /// Build the observation for the current state.
    pub fn observation(&self, last_tool_result: InfoMap, messages: Vec<String>) -> Observation {
        let observed = self.observed_signal_list();
        let tool_calls = self
            .trajectory
            .iter()
            .filter(|t| !t.is_intervention && t.action_type != ActionName::SubmitDecision)
            .count();
        let (sprt_state, tool_rankings, reward_machine) = self.instrumented_parts();
        Observation {
            case_id: self.case.case_id.clone(),
            task_type: self.case.task_type.as_str().to_owned(),
            instruction: self.instruction.clone(),
            visible_documents: self.catalogue.clone(),
            revealed_artifacts: self.revealed_artifacts.clone(),
            pending_events: self.pending_view(),
            budget_remaining: ls_core::text::round_to(dec_f64(self.budget_remaining), 3),
            budget_total: ls_core::text::round_to(dec_f64(self.budget_total), 3),
            step_count: self.step_count,
            max_steps: self.max_steps,
            case_clock: self.case_clock,
            risk_snapshot: RiskSnapshot {
                observed_risk_bucket: ls_core::text::risk_bucket(
                    observed.iter().map(String::as_str),
                )
                .to_owned(),
                observed_signal_count: observed.len(),
                observed_signals: observed,
                pending_event_count: self.pending.len(),
                revealed_artifact_count: self.revealed_artifact_ids.len(),
                days_until_due: self.case.due_date_days(),
                pressure_events_seen: self.pressure_events_seen.len(),
            },
            investigation_status: InvestigationStatus {
                tool_calls,
                interventions_taken: self.interventions.len(),
                revealed_artifacts: self.revealed_artifact_ids.len(),
                budget_used: round4(dec_f64(self.budget_total - self.budget_remaining)),
                pending_events: self.pending.len(),
            },
            last_tool_result,
            messages,
            allowed_actions: crate::observation::ALLOWED_ACTIONS.clone(),
            available_interventions: crate::observation::AVAILABLE_INTERVENTIONS.clone(),
            case_metadata: self.metadata.clone(),
            portfolio_context: self.portfolio_context(),
            sprt_state,
            tool_rankings,
            reward_machine,
            institutional_memory: Default::default(),
        }
    }

    /// Re-issue the last envelope (used by `/state`-like reads).
    pub fn last_reward(&self) -> f64 {
        self.last_reward
    }

    pub fn public_state(&self) -> PublicState {
        let (instrumented, done) = (!self.blind(), self.lifecycle.is_done());
        let boundary = self.boundary(None, None);
        let mut cb = Map::new();
        cb.insert("phase".into(), json!(boundary.phase));
        cb.insert("allowed_actions".into(), json!(boundary.allowed_actions));
        cb.insert(
            "pending_event_count".into(),
            json!(boundary.pending_event_count),
        );
        cb.insert(
            "prompt_injection_detected".into(),
            json!(boundary.prompt_injection_detected),
        );
        cb.insert(
            "required_followups".into(),
            json!(boundary.required_followups),
        );
        if instrumented {
            cb.insert(
                "decision_readiness".into(),
                json!(boundary.decision_readiness),
            );
        }
        let (sprt_state, tool_rankings, rm) = self.instrumented_parts();
        PublicState {
            episode_id: self.episode_id.clone(),
            case_id: self.case.case_id.clone(),
            task_type: self.case.task_type.as_str().to_owned(),
            budget_total: round4(dec_f64(self.budget_total)),
            budget_remaining: round4(dec_f64(self.budget_remaining)),
            max_steps: self.max_steps,
            step_count: self.step_count,
            case_clock: self.case_clock,
            submitted: self.lifecycle.is_terminated(),
            done,
            final_score: self.grade.as_ref().map_or(0.0, |g| g.final_score),
            unsafe_outcome: self.grade.as_ref().is_some_and(|g| g.unsafe_outcome),
            visible_doc_ids: self.visible_doc_ids.clone(),
            revealed_artifact_ids: self.revealed_artifact_ids.clone(),
            trajectory: self.trajectory.clone(),
            interventions_taken: self.interventions.clone(),
            observed_risk_signals: self.observed_signal_list(),
            handoff_packet: self.handoff_packet.as_ref().map(|p| p.as_json().clone()),
            pending_events: self.pending_view(),
            pending_event_count: self.pending.len(),
            portfolio_context: self.portfolio_context(),
            institutional_context: self
                .institution
                .as_ref()
                .map_or_else(SharedJson::default, |i| {
                    SharedJson::from_raw(i.context.clone())
                }),
            sprt_state,
            tool_rankings,
            reward_machine_state: rm,
            terminal_reason: self.lifecycle.terminal_reason().map(str::to_owned),
            pressure_events_seen: self.pressure_events_seen.clone(),
            pressure_resistance_score: self
                .grade
                .as_ref()
                .map_or(0.0, |g| g.pressure_resistance_score),
            // Suite membership and pairing are part of the answer key: shown once the episode is over.
            contrastive_pair_id: self.case.contrastive_pair_id.clone().filter(|_| done),
            benchmark_split: if done {
                self.case.benchmark_split.clone()
            } else {
                String::new()
            },
            benchmark_track: self.track.as_str().to_owned(),
            track_mode: self.track_mode.as_str().to_owned(),
            institutional_memory: Default::default(),
            control_boundary: cb,
        }
    }
}

/// The terminal step's `last_tool_result`: the grade as the reference's terminal tool result
/// carries it (every grading report of `info`, shared with `info` by reference count, not
/// serialized again), the heuristic submission risk, then the tool's own fields. `curriculum` and the memory snapshots are
/// added by the environment after the institution has recorded the case.
fn terminal_tool_result(
    info: &TerminalInfo,
    risk: &ls_grading::risk::RiskAssessment,
    message: &'static str,
) -> InfoMap {
    let mut result = InfoMap::with_capacity(36);
    result.insert("tool_name", "submit_decision");
    result.insert("success", true);
    result.insert("submission_received", true);
    result.insert("final_score", info.final_score);
    result.insert_raw("score_breakdown", info.score_breakdown.raw().clone());
    result.insert("result_class", info.result_class_str());
    result.insert(
        "control_satisfied_resolution",
        info.control_satisfied_resolution,
    );
    result.insert("institutional_utility", info.institutional_utility);
    result.insert("unsafe_outcome", info.unsafe_outcome);
    result.insert("decision", info.decision_str());
    result.insert("effective_decision", info.effective_decision_str());
    let reports = [
        ("predicted_probabilities", &info.predicted_probabilities),
        ("outcome", &info.outcome),
        ("system_state", &info.system_state),
        ("compliance", &info.compliance),
        ("currency_validation", &info.currency_validation),
    ];
    for (key, report) in reports {
        result.insert_raw(key, report.raw().clone());
    }
    let certificate = info.decision_certificate_report.raw();
    result.insert_raw("decision_certificate_report", certificate.clone());
    let falsifier = info.adversarial_falsifier.raw();
    result.insert_raw("adversarial_falsifier", falsifier.clone());
    result.insert_raw("trust_graph", info.trust_graph.raw().clone());
    result.insert_raw("authority_gate", info.authority_gate.raw().clone());
    result.insert_raw("control_boundary", info.control_boundary.raw().clone());
    result.insert("pressure_resistance_score", info.pressure_resistance_score);
    result.insert("benchmark_track", info.benchmark_track.clone());
    result.insert("track_mode", info.track_mode.as_str());
    result.insert_raw("watchdog", info.watchdog.raw().clone());
    result.insert_raw("reward_model", info.reward_model.raw().clone());
    if let Some(a) = &info.async_artifacts {
        result.insert_raw("async_artifacts", a.raw().clone());
    }
    // The reference's diagnostic heuristic (tool result only, as in the reference).
    result.insert("risk_assessment", risk.risk);
    result.insert_serialized("triggered_risk_reasons", &risk.reasons);
    result.insert("message", message);
    result.insert("cost", 0.0);
    result
}

/// The step result's `pressure_event`: the document a pressure message arrived as.
#[derive(Serialize)]
struct PressureNotice {
    doc_id: String,
    doc_type: String,
}

/// The terminal `system_state` (see [`Episode::system_state`]).
#[derive(Serialize)]
struct SystemState<'a> {
    successful_actions: Vec<&'static str>,
    revealed_artifact_ids: Vec<&'a str>,
    pending_events: &'a [ArtifactId],
    pending_event_count: usize,
    required_actions: Vec<&'static str>,
    required_artifacts: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decision_readiness: Option<f64>,
    handoff_packet: Option<&'a HandoffPacket>,
    observed_risk_signals: &'a [String],
    submitted_decision: &'static str,
    effective_decision: &'static str,
    step_count: u32,
    case_clock: u32,
}

/// `authority_gate` on a track the institution does not govern (decision 9): no gate applied,
/// the decision stands, written in the gate's shape so clients reading `blocking` or
/// `authority_level` find them.
#[derive(Serialize)]
struct UngovernedGate {
    governed: bool,
    authority_level: &'static str,
    decision: &'static str,
    allowed: bool,
    blocking: bool,
    reasons: [&'static str; 0],
    requires_handoff: bool,
    score_cap: f64,
    enforced_decision: &'static str,
}

impl UngovernedGate {
    fn new(decision: Decision) -> Self {
        Self {
            governed: false,
            authority_level: "full_authority",
            decision: decision.as_str(),
            allowed: true,
            blocking: false,
            reasons: [],
            requires_handoff: false,
            score_cap: 1.0,
            enforced_decision: decision.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `case_metadata` is what inserting the fixed entries, then the extra ones (replacing in
    /// place), then `mdp_component` into an ordered map would write.
    #[test]
    fn case_metadata_matches_the_ordered_map_it_replaced() {
        let tracks = vec!["case".to_owned(), "adversarial".to_owned()];
        let fixed = [
            ("task_label", MetaValue::Text("label \"q\"")),
            ("difficulty", MetaValue::Text("hard")),
            ("due_date_days", MetaValue::Days(9)),
            ("ashtg", MetaValue::Text("a")),
            ("benchmark_identity", MetaValue::Text("b")),
            ("benchmark_track", MetaValue::Text("case")),
            ("benchmark_track_label", MetaValue::Text("Case Track")),
            ("benchmark_track_description", MetaValue::Text("d")),
            ("official_tracks", MetaValue::List(&tracks)),
            ("track_mode", MetaValue::Text("blind")),
        ];
        let mdp = raw_json(&json!({"states": 3}));
        for extra in [
            json!({}),
            json!({"curriculum": {"tier": "t"}}),
            json!({"difficulty": "override", "due_date_days": "x", "z": 1}),
        ] {
            let extra = extra.as_object().unwrap().clone();
            for with_mdp in [false, true] {
                let mut expected = Map::new();
                for (k, v) in fixed {
                    let v = match v {
                        MetaValue::Text(t) => json!(t),
                        MetaValue::Days(d) => json!(d),
                        MetaValue::List(l) => json!(l),
                    };
                    expected.insert(k.to_owned(), v);
                }
                for (k, v) in &extra {
                    expected.insert(k.clone(), v.clone());
                }
                if with_mdp {
                    expected.insert("mdp_component".into(), json!({"states": 3}));
                }
                let written = SharedJson::from_serialize(&CaseMetadata {
                    fixed,
                    extra: &extra,
                    mdp_component: with_mdp.then_some(&mdp),
                });
                assert_eq!(written.get(), serde_json::to_string(&expected).unwrap());
            }
        }
    }
}
