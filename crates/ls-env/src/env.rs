//! The environment a session owns: the case pool, the current episode, the curriculum and the
//! institutional memory that persists across resets within the session.

use crate::action::ActionRequest;
use crate::curriculum::Curriculum;
use crate::designer::Designer;
use crate::episode::{CaseDerived, Episode, EpisodeSpec, StepError, TrackMode};
use crate::memory::{InstitutionalMemory, RecordInput};
use crate::observation::{PublicState, RawJson, SharedJson};
use crate::reward::RewardMode;
use crate::seal::{Seal, SealedState, Sealing, StateView};
use crate::terminal_info::{Report, StepEnvelope, StepInfo};
use ls_core::fixtures::{FixtureSet, MasterData};
use ls_core::schema::Case;
use ls_core::{ActionName, BenchmarkTrack};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Cases and master data shared (read-only) by every session.
#[derive(Debug, Clone)]
pub struct CasePool {
    pub cases: Vec<Arc<Case>>,
    pub master: Arc<MasterData>,
    /// What episodes derive from each case alone, aligned with `cases` (computed once per pool
    /// rather than at every reset, hand-off, tool call and grading).
    derived: Vec<CaseDerived>,
    /// Fresh institutional memory for this pool (it reads every case's documents once); sessions
    /// and `/institutional-reset` start from a clone instead of re-deriving it.
    memory_template: Arc<InstitutionalMemory>,
}

impl CasePool {
    pub fn new(set: FixtureSet) -> Self {
        Self::from_parts(
            set.cases.into_iter().map(Arc::new).collect(),
            Arc::new(set.master),
        )
    }

    /// A pool over shared cases and master data.
    pub fn from_parts(cases: Vec<Arc<Case>>, master: Arc<MasterData>) -> Self {
        let memory_template = Arc::new(InstitutionalMemory::for_pool(
            cases.iter().map(|c| c.as_ref()),
        ));
        let derived = cases.iter().map(|c| CaseDerived::of(&master, c)).collect();
        Self {
            cases,
            master,
            derived,
            memory_template,
        }
    }

    /// What episodes derive from `case` alone: shared for a pool case, computed afresh for any
    /// other (custom).
    pub fn derived(&self, case: &Arc<Case>) -> CaseDerived {
        match self.cases.iter().position(|c| Arc::ptr_eq(c, case)) {
            Some(i) => self.derived[i].clone(),
            None => CaseDerived::of(&self.master, case),
        }
    }

    /// A fresh institutional memory for a session over this pool.
    pub fn fresh_memory(&self) -> InstitutionalMemory {
        (*self.memory_template).clone()
    }

    pub fn get(&self, case_id: &str) -> Option<&Arc<Case>> {
        self.cases.iter().find(|c| c.case_id == case_id)
    }
}

/// `POST /reset` body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// Seed for random case selection (ignored when `case_id` or `custom_case` is given).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Load this exact case.
    #[serde(default)]
    pub case_id: Option<String>,
    /// Benchmark track (filters random selection; labels the episode).
    #[serde(default)]
    pub track: Option<String>,
    /// Clone a template case under a new id with a new instruction.
    #[serde(default)]
    pub custom_case: Option<Value>,
    /// Session to reset (HTTP clients may also use the `X-Session-Id` header).
    #[serde(default)]
    pub session_id: Option<String>,
    /// OpenEnv clients send an episode id; accepted and ignored (ids are derived from the seed).
    #[serde(default)]
    pub episode_id: Option<String>,
    /// Start this episode from a fresh institutional memory (as a new session would), so its
    /// authority, trust and loss surface do not depend on what the session played before. The
    /// episode's own outcome is then recorded into that fresh memory.
    #[serde(default)]
    pub fresh_institution: bool,
    /// The reward this episode pays: `score` (default; label-free, the return is the score) or
    /// `reference` (the reference's label-revealing shaping; instrumented track only). See
    /// [`crate::reward`].
    #[serde(default)]
    pub reward_mode: Option<RewardMode>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResetError {
    #[error("unknown case_id: {0}")]
    UnknownCase(String),
    #[error("custom_case: {0}")]
    InvalidCustomCase(String),
    #[error("no cases are loaded")]
    NoCases,
    #[error("reward_mode 'reference' reads the belief (and so the evidence) into every step reward; it is refused on the blind track: reset with track_mode instrumented, or use reward_mode 'score'")]
    LabelRevealingRewardOnBlindTrack,
    #[error("institutional memory cannot be reset inside a ControlBench sequence: the governed agent does not reset its own institution; start a new session for a new sequence")]
    InsideControlBenchSequence,
}

/// How [`Environment::reset_case`] starts an episode of a given case.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaseReset {
    /// Start from a new session's state (institution, curriculum, counters).
    pub fresh: bool,
    /// Benchmark track (else the case's primary track).
    pub track: Option<String>,
    /// The reward the episode pays (default `score`).
    pub reward_mode: Option<RewardMode>,
}

/// A resolved reset: the case and its limits, ready to start.
struct EpisodeStart {
    case: Arc<Case>,
    max_steps: u32,
    budget: Decimal,
    /// Were the limits adjusted by the curriculum (a random reset)?
    adjusted: bool,
    selection_seed: u64,
    requested_track: Option<BenchmarkTrack>,
    reward_mode: RewardMode,
}

fn track_matches(case: &Case, track: BenchmarkTrack) -> bool {
    use BenchmarkTrack as T;
    let listed = || case.official_tracks.iter().any(|t| t == track.as_str());
    match track {
        T::GeneratedHoldout => matches!(
            case.benchmark_split.as_str(),
            "challenge" | "generated" | "holdout"
        ),
        T::SleeperVigilance => case
            .controlbench
            .as_ref()
            .is_some_and(|c| c.sleeper_phase.is_sleeper()),
        T::BlindControl => case.benchmark_split == "benchmark",
        T::HumanBaseline => case.human_baseline_case || case.benchmark_split == "benchmark",
        T::CertificateRequired => case.certificate_required || listed(),
        T::Controlbench => case.controlbench.is_some() || listed(),
        T::Case => case.official_tracks.is_empty() || listed(),
        T::Portfolio | T::Adversarial => listed(),
    }
}

/// Environment configuration shared by sessions.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvConfig {
    pub track_mode: TrackMode,
}

/// One session's environment.
#[derive(Debug)]
pub struct Environment {
    pool: Arc<CasePool>,
    config: EnvConfig,
    selection_rng: ChaCha8Rng,
    episodes_started: u64,
    pub curriculum: Curriculum,
    pub memory: InstitutionalMemory,
    /// Public view of `memory`, rebuilt only when memory changes (reset, graded submit) and shared
    /// by every observation in between.
    memory_view: SharedJson,
    /// Regret-driven designer fed with every graded episode of the session.
    pub designer: Designer,
    episode: Option<Episode>,
    /// The current episode belongs to a sealed run ([`crate::seal`]): its grade is withheld.
    seal: Option<Sealing>,
}

impl Environment {
    pub fn new(pool: Arc<CasePool>, config: EnvConfig) -> Self {
        let memory = pool.fresh_memory();
        Self {
            pool,
            config,
            selection_rng: ChaCha8Rng::seed_from_u64(42),
            episodes_started: 0,
            curriculum: Curriculum::default(),
            memory_view: memory.snapshots().observation,
            memory,
            designer: Designer::default(),
            episode: None,
            seal: None,
        }
    }

    pub fn pool(&self) -> &Arc<CasePool> {
        &self.pool
    }

    pub fn episode(&self) -> Option<&Episode> {
        self.episode.as_ref()
    }

    /// The current episode, mutably (a second agent's watchdog verdicts are recorded on it).
    pub fn episode_mut(&mut self) -> Option<&mut Episode> {
        self.episode.as_mut()
    }

    /// `POST /reset`. With `fresh_institution` the episode starts in a new session's state (a
    /// fresh institutional memory, curriculum, designer, episode counter and selection stream),
    /// so it is what the same request gives in a new session, byte for byte, whatever this
    /// session played before; a refused reset leaves the session as it was.
    pub fn reset(&mut self, req: &ResetRequest) -> Result<StepEnvelope, ResetError> {
        if req.fresh_institution {
            self.check_institution_resettable()?;
            let mut fresh = self.fresh_session();
            let out = fresh.reset_session(req)?;
            *self = fresh;
            return Ok(out);
        }
        self.reset_session(req)
    }

    /// A new session's state over this environment's pool and configuration.
    fn fresh_session(&self) -> Self {
        Self::new(self.pool.clone(), self.config)
    }

    /// Reset within this session's state (`fresh_institution` is handled by [`Self::reset`]).
    fn reset_session(&mut self, req: &ResetRequest) -> Result<StepEnvelope, ResetError> {
        let requested_track = req.track.as_deref().map(BenchmarkTrack::normalize);
        let reward_mode = req.reward_mode.unwrap_or_default();
        self.check_reward_mode(requested_track, reward_mode)?;
        let (case, max_steps, budget, adjusted, selection_seed) =
            if let Some(custom) = &req.custom_case {
                let (c, steps, budget) = self.custom_case(custom)?;
                (c, steps, budget, false, 0)
            } else if let Some(id) = req.case_id.as_deref().filter(|s| !s.trim().is_empty()) {
                let c = self
                    .pool
                    .get(id.trim())
                    .ok_or_else(|| ResetError::UnknownCase(id.chars().take(128).collect()))?
                    .clone();
                let (s, b) = (c.max_steps, c.budget_total);
                (c, s, b, false, 0)
            } else {
                if self.pool.cases.is_empty() {
                    return Err(ResetError::NoCases);
                }
                let seed = req
                    .seed
                    .unwrap_or_else(|| self.selection_rng.random_range(0..=(i32::MAX as u64)));
                let c = self.select(seed, requested_track);
                let (s, b) = self.curriculum.adjust(c.max_steps, c.budget_total);
                (c, s, b, true, seed)
            };
        self.start_episode(EpisodeStart {
            case,
            max_steps,
            budget,
            adjusted,
            selection_seed,
            requested_track,
            reward_mode,
        })
    }

    /// Start an episode of `case`, a case the caller built (a draw of a task distribution, say),
    /// with the case's own step limit and budget, on `track` (else the case's primary track).
    /// Nothing is parsed or serialized on the way in. With `fresh`, the episode starts in a new
    /// session's state, as [`Self::reset`] with `fresh_institution` does; a curated case then
    /// gives exactly the episode of `reset` with its `case_id` in a new session. Unlike the
    /// HTTP reset, a fresh start is allowed after a ControlBench-track episode: it starts a new
    /// session, which an HTTP client may always do.
    pub fn reset_case(
        &mut self,
        case: Arc<Case>,
        opts: &CaseReset,
    ) -> Result<StepEnvelope, ResetError> {
        let requested_track = opts.track.as_deref().map(BenchmarkTrack::normalize);
        let reward_mode = opts.reward_mode.unwrap_or_default();
        self.check_reward_mode(requested_track, reward_mode)?;
        let start = EpisodeStart {
            max_steps: case.max_steps,
            budget: case.budget_total,
            case,
            adjusted: false,
            selection_seed: 0,
            requested_track,
            reward_mode,
        };
        if opts.fresh {
            let mut fresh = self.fresh_session();
            let out = fresh.start_episode(start)?;
            *self = fresh;
            return Ok(out);
        }
        self.start_episode(start)
    }

    /// A label-revealing reward is refused before anything is drawn when the track is known to
    /// be blind already (a case whose own track is blind is refused in [`Self::start_episode`],
    /// before any state changes).
    fn check_reward_mode(
        &self,
        requested_track: Option<BenchmarkTrack>,
        reward_mode: RewardMode,
    ) -> Result<(), ResetError> {
        if reward_mode.reveals_label()
            && (self.config.track_mode == TrackMode::Blind
                || requested_track == Some(BenchmarkTrack::BlindControl))
        {
            return Err(ResetError::LabelRevealingRewardOnBlindTrack);
        }
        Ok(())
    }

    /// Start a sealed episode of `case` for the run `seal` names ([`crate::seal`]): a new
    /// session's state (as [`Self::reset_case`] with `fresh`: its grade depends on the case and
    /// the trajectory only), the case's own track and the `score` reward. Its grade is withheld
    /// from every reply and kept in `seal`; nothing of it is recorded into the institution.
    /// Refused inside a ControlBench sequence (a sealed case would clear the governing
    /// institution); any later reset of the session is unsealed.
    pub fn reset_sealed(
        &mut self,
        case: Arc<Case>,
        seal: Seal,
    ) -> Result<StepEnvelope, ResetError> {
        self.check_institution_resettable()?;
        let fresh = CaseReset {
            fresh: true,
            ..Default::default()
        };
        let out = self.reset_case(case, &fresh)?;
        self.seal = Some(Sealing::new(seal));
        Ok(out)
    }

    /// The seal of the current episode, when it belongs to a sealed run.
    pub fn seal(&self) -> Option<&Seal> {
        self.seal.as_ref().map(|s| &s.seal)
    }

    fn start_episode(&mut self, start: EpisodeStart) -> Result<StepEnvelope, ResetError> {
        self.seal = None;
        let (case, reward_mode) = (start.case, start.reward_mode);
        let track = start
            .requested_track
            .or_else(|| case.primary_track.as_deref().map(BenchmarkTrack::normalize))
            .unwrap_or(BenchmarkTrack::Case);
        let track_mode = if track == BenchmarkTrack::BlindControl {
            TrackMode::Blind
        } else {
            self.config.track_mode
        };
        if track_mode == TrackMode::Blind && reward_mode.reveals_label() {
            return Err(ResetError::LabelRevealingRewardOnBlindTrack);
        }
        self.episodes_started += 1;
        // Episode randomness (ids, event ids) flows from the case and the session's episode count,
        // so a fresh session replaying the same resets and actions is byte-identical.
        let episode_seed = case.case_seed()
            ^ self.episodes_started.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ start.selection_seed;
        let tier = self.curriculum.tier();
        let mut extra = Map::new();
        extra.insert("curriculum".into(), json!({"tier": tier.name, "level": tier.level, "adjusted": start.adjusted, "competence_ema": ls_core::text::round_to(self.curriculum.competence_ema, 4)}));
        let derived = self.pool.derived(&case);
        let spec = EpisodeSpec {
            case: case.clone(),
            master: self.pool.master.clone(),
            track,
            track_mode,
            reward_mode,
            budget_total: start.budget,
            max_steps: start.max_steps,
            episode_seed,
            reset_message: format!("Loaded case {} (curriculum: {})", case.case_id, tier.name),
            case_metadata_extra: extra,
            institution: Some(self.memory.handoff(&case, &derived.invoices)),
            derived,
        };
        let (ep, mut env) = Episode::new(spec);
        env.observation.institutional_memory = self.memory_view.clone();
        if let StepInfo::Reset(info) = &mut env.info {
            info.curriculum = Some(self.curriculum_info_json());
        }
        self.episode = Some(ep);
        Ok(env)
    }

    fn select(&mut self, seed: u64, track: Option<BenchmarkTrack>) -> Arc<Case> {
        let mut candidates: Vec<&Arc<Case>> = match track {
            Some(t) => self
                .pool
                .cases
                .iter()
                .filter(|c| track_matches(c, t))
                .collect(),
            None => self.pool.cases.iter().collect(),
        };
        if candidates.is_empty() {
            candidates = self.pool.cases.iter().collect();
        }
        let tier = self.curriculum.tier();
        let mut eligible: Vec<&Arc<Case>> = candidates
            .iter()
            .copied()
            .filter(|c| tier.allowed.contains(&c.task_type))
            .collect();
        if eligible.is_empty() {
            eligible = candidates;
        }
        if self.curriculum.stagnation > 5 {
            if let Some(w) = self.curriculum.weakest_task {
                let narrowed: Vec<&Arc<Case>> = eligible
                    .iter()
                    .copied()
                    .filter(|c| c.task_type == w)
                    .collect();
                if !narrowed.is_empty() {
                    eligible = narrowed;
                }
            }
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        eligible[rng.random_range(0..eligible.len())].clone()
    }

    fn custom_case(&self, v: &Value) -> Result<(Arc<Case>, u32, Decimal), ResetError> {
        let bad = |m: &str| ResetError::InvalidCustomCase(m.to_owned());
        let o = v.as_object().ok_or_else(|| bad("must be an object"))?;
        let get = |a: &str, b: &str| o.get(a).or_else(|| o.get(b)).filter(|v| !v.is_null());
        let template_id = get("template_case_id", "templateCaseId")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("template_case_id must be a non-empty string"))?;
        let template = self.pool.get(template_id).ok_or_else(|| {
            bad(&format!(
                "unknown template_case_id: {}",
                template_id.chars().take(64).collect::<String>()
            ))
        })?;
        let case_id = get("case_id", "caseId")
            .and_then(Value::as_str)
            .map(|s| s.trim().to_ascii_uppercase())
            .ok_or_else(|| bad("case_id must be a non-empty string"))?;
        let suffix = case_id
            .strip_prefix("CUSTOM-")
            .ok_or_else(|| bad("case_id must match CUSTOM-[A-Z0-9]{2,16}"))?;
        if !(2..=16).contains(&suffix.len())
            || !suffix
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        {
            return Err(bad("case_id must match CUSTOM-[A-Z0-9]{2,16}"));
        }
        let instruction = get("instruction", "instruction")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("instruction must be a non-empty string"))?;
        if instruction.contains(['\n', '\r']) || instruction.chars().count() > 800 {
            return Err(bad(
                "instruction must be one line of at most 800 characters",
            ));
        }
        let mut c: Case = (**template).clone();
        c.case_id = case_id;
        c.instruction = instruction.to_owned();
        if let Some(ms) = get("max_steps", "maxSteps") {
            let n = ms
                .as_f64()
                .filter(|f| f.fract() == 0.0 && !ms.is_boolean())
                .ok_or_else(|| bad("max_steps must be an integer"))?;
            if !(4.0..=50.0).contains(&n) {
                return Err(bad("max_steps must be between 4 and 50"));
            }
            c.max_steps = n as u32;
        }
        if let Some(b) = get("budget_total", "budgetTotal") {
            let d = ls_core::text::json_decimal(b)
                .filter(|_| !b.is_boolean())
                .ok_or_else(|| bad("budget_total must be a number"))?;
            if d < Decimal::ONE || d > Decimal::from(50) {
                return Err(bad("budget_total must be between 1 and 50"));
            }
            c.budget_total = d.round_dp(4);
        }
        let (s, b) = (c.max_steps, c.budget_total);
        Ok((Arc::new(c), s, b))
    }

    /// Step by action name and payload (parsed here into an [`ActionRequest`]).
    pub fn step(
        &mut self,
        action_type: &str,
        payload: &Map<String, Value>,
    ) -> Result<StepEnvelope, EnvStepError> {
        self.step_request(ActionRequest::parse(action_type, payload))
    }

    /// Step with an action the protocol edge has parsed.
    pub fn step_request(&mut self, req: ActionRequest<'_>) -> Result<StepEnvelope, EnvStepError> {
        let ep = self.episode.as_mut().ok_or(EnvStepError::NotReset)?;
        let mut env = ep.step_request(req)?;
        if let Some(sealing) = &mut self.seal {
            // Nothing of a sealed episode reaches the institution (see `crate::seal`).
            env.observation.institutional_memory = self.memory_view.clone();
            return Ok(sealing.reply(ep, env));
        }
        // Only terminated (submitted) episodes reach memory; truncated ones leave it untouched.
        if let (true, Some(g), Some(decision)) =
            (env.terminated, ep.grade.as_ref(), ep.submitted_decision)
        {
            let actions: std::collections::BTreeSet<ActionName> = ep
                .trajectory
                .iter()
                .filter(|t| t.success)
                .map(|t| t.action_type)
                .collect();
            if ep.callback_refused {
                self.memory.note_callback_refusal();
            }
            let amendment = self.memory.record(&RecordInput {
                case: &ep.case,
                grade: g,
                submitted: decision,
                confidence: ep.submitted_confidence,
                actions: &actions,
                gate: ep.authority_gate.as_ref(),
            });
            self.curriculum.update(ep.case.task_type, g.final_score);
            self.designer.record(&ep.case, g.final_score);
            let snaps = self.memory.snapshots();
            self.memory_view = snaps.observation;
            // The terminal tool result carries the snapshots too (as the reference's does),
            // shared with `info` by reference count.
            let tool = &mut env.observation.last_tool_result;
            tool.insert_raw("institutional_metrics", snaps.metrics.clone());
            tool.insert_raw("institutional_memory", snaps.full.clone());
            if let StepInfo::Terminal(info) = &mut env.info {
                info.curriculum = Some(Report::from_raw(self.curriculum_info_json()));
                info.institutional_case_update = Some(Report::from_raw(amendment));
                info.institutional_memory = Some(Report::from_raw(snaps.full));
                info.institutional_metrics = Some(Report::from_raw(snaps.metrics));
                info.adversarial_designer = Some(Report::of(&self.designer.summary(5)));
            }
        }
        env.observation.institutional_memory = self.memory_view.clone();
        Ok(env)
    }

    /// The session's state as a client reads it (`GET /state`, the WebSocket and MCP state):
    /// [`Self::state`], or once a sealed episode is over its [`SealedState`].
    pub fn state_view(&self) -> Option<StateView> {
        let state = self.state()?;
        Some(match self.seal() {
            Some(seal) if state.done => StateView::Sealed(Box::new(SealedState::of(state, seal))),
            _ => StateView::Open(Box::new(state)),
        })
    }

    /// The current episode's public state, the grade included once it is over (in-process
    /// readers; a reply to a client is [`Self::state_view`]).
    pub fn state(&self) -> Option<PublicState> {
        self.episode.as_ref().map(|e| {
            let mut s = e.public_state();
            s.institutional_memory = self.memory_view.clone();
            s
        })
    }

    /// Is this session inside a ControlBench sequence (its latest episode, running or finished,
    /// is on the `controlbench` track)? Its memory is then the institution governing it.
    pub fn in_controlbench_sequence(&self) -> bool {
        self.episode
            .as_ref()
            .is_some_and(|e| e.track == BenchmarkTrack::Controlbench)
    }

    fn check_institution_resettable(&self) -> Result<(), ResetError> {
        if self.in_controlbench_sequence() {
            return Err(ResetError::InsideControlBenchSequence);
        }
        Ok(())
    }

    /// `POST /institutional-reset`: a fresh memory, refused inside a ControlBench sequence.
    pub fn institutional_reset(&mut self) -> Result<Map<String, Value>, ResetError> {
        self.check_institution_resettable()?;
        Ok(self.reset_memory())
    }

    /// A fresh memory, unconditionally (operator tooling and tests).
    pub fn reset_memory(&mut self) -> Map<String, Value> {
        let full = self.clear_memory();
        serde_json::from_str(full.get()).unwrap_or_default()
    }

    /// Replace the institutional memory with the pool's fresh one; returns its full snapshot.
    fn clear_memory(&mut self) -> RawJson {
        self.memory = self.pool.fresh_memory();
        let snaps = self.memory.snapshots();
        self.memory_view = snaps.observation;
        snaps.full
    }

    /// Curriculum state as shown in `info.curriculum` (tier, competence, allowed tasks, ...),
    /// serialized straight from the curriculum; it goes into `info` at every reset and graded
    /// submission.
    fn curriculum_info_json(&self) -> RawJson {
        RawJson::from_serialize(&self.curriculum_view())
    }

    fn curriculum_view(&self) -> CurriculumView<'_> {
        let t = self.curriculum.tier();
        CurriculumView {
            curriculum: &self.curriculum,
            tier_name: t.name,
            allowed_tasks: t.allowed.iter().map(|x| x.as_str()).collect(),
            max_steps_floor: t.max_steps_floor,
            budget_multiplier: t.budget_pct as f64 / 100.0,
            episode_count: self.curriculum.episodes_graded,
            stagnation_counter: self.curriculum.stagnation,
            recent_5_avg: self.curriculum.recent_5_avg(),
        }
    }
}

/// `info.curriculum`: the curriculum's own fields, then its tier's, then the reference's names
/// for the counters (`episode_count` = `episodes_graded`, `stagnation_counter` = `stagnation`).
#[derive(Serialize)]
struct CurriculumView<'a> {
    #[serde(flatten)]
    curriculum: &'a Curriculum,
    tier_name: &'static str,
    allowed_tasks: Vec<&'static str>,
    max_steps_floor: u32,
    budget_multiplier: f64,
    episode_count: u32,
    stagnation_counter: u32,
    recent_5_avg: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvStepError {
    #[error("no episode is active; call reset first")]
    NotReset,
    #[error(transparent)]
    Step(#[from] StepError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use ls_core::fixtures::CaseWorld;
    use ls_core::validate::InvoiceFacts;
    use ls_core::world::HiddenWorld;
    use ls_grading::reasons::CleanTargets;

    /// `info.curriculum` is the curriculum's fields followed by its tier's, as the map it
    /// replaced (the curriculum as a JSON object plus the inserted keys) wrote them.
    #[test]
    fn curriculum_info_is_the_curriculum_then_its_tier() {
        let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
        let mut env = Environment::new(pool, EnvConfig::default());
        for score in [0.0, 0.9, 0.95, 0.97, 0.99, 0.2] {
            let t = env.curriculum.tier();
            let mut expected = serde_json::to_value(&env.curriculum).unwrap();
            let o = expected.as_object_mut().unwrap();
            o.insert("tier_name".into(), json!(t.name));
            o.insert(
                "allowed_tasks".into(),
                json!(t.allowed.iter().map(|x| x.as_str()).collect::<Vec<_>>()),
            );
            o.insert("max_steps_floor".into(), json!(t.max_steps_floor));
            o.insert(
                "budget_multiplier".into(),
                json!(t.budget_pct as f64 / 100.0),
            );
            o.insert(
                "episode_count".into(),
                json!(env.curriculum.episodes_graded),
            );
            o.insert(
                "stagnation_counter".into(),
                json!(env.curriculum.stagnation),
            );
            o.insert("recent_5_avg".into(), json!(env.curriculum.recent_5_avg()));
            assert_eq!(
                env.curriculum_info_json().get(),
                serde_json::to_string(&expected).unwrap()
            );
            env.curriculum.update(ls_core::TaskType::TaskD, score);
        }
    }

    /// The per-case derivations shared by a pool's episodes are exactly what each episode would
    /// compute itself, for pool cases and for cases outside the pool alike.
    #[test]
    fn derived_case_data_matches_a_fresh_derivation() {
        let pool = CasePool::new(FixtureSet::embedded().expect("fixtures"));
        for case in &pool.cases {
            let d = pool.derived(case);
            let rules = CaseWorld::new(&pool.master, case).policy_rules;
            assert!(!rules.is_empty(), "{}", case.case_id);
            assert_eq!(
                d.policy_rules.get(),
                serde_json::to_string(rules).unwrap(),
                "{}",
                case.case_id
            );
            let facts: Vec<InvoiceFacts> = case
                .invoices()
                .map(ls_core::validate::invoice_facts)
                .collect();
            assert_eq!(&*d.invoices, facts.as_slice(), "{}", case.case_id);
            let outside = Arc::new((**case).clone());
            let fresh = pool.derived(&outside);
            assert_eq!(
                (fresh.policy_rules.get(), &*fresh.invoices),
                (d.policy_rules.get(), &*d.invoices)
            );
            assert_eq!(*d.hidden, HiddenWorld::derive(case));
            assert_eq!(
                &*d.instruction_normalized,
                ls_core::text::normalize_text(&case.instruction)
            );
            assert_eq!(*d.clean_targets, CleanTargets::of(case), "{}", case.case_id);
            assert_eq!(*fresh.clean_targets, *d.clean_targets);
        }
    }

    /// The lifecycle moves once, from `Running` to one end, and every reply agrees with it: a
    /// submission terminates with `decision_submitted`, a limit truncates with its name, and an
    /// ended episode refuses every step with the reason it ended, changing nothing.
    #[test]
    fn the_lifecycle_ends_once_and_every_reply_agrees() {
        use crate::episode::Lifecycle;
        let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
        let mut env = Environment::new(pool, EnvConfig::default());
        let reset = |env: &mut Environment| {
            env.reset(&ResetRequest {
                case_id: Some("CASE-B-001".into()),
                ..Default::default()
            })
            .unwrap()
        };
        let obj = |v: Value| -> Map<String, Value> { serde_json::from_value(v).unwrap() };
        // Submitted.
        reset(&mut env);
        assert_eq!(env.episode().unwrap().lifecycle(), Lifecycle::Running);
        let end = env
            .step("submit_decision", &obj(json!({"decision": "HOLD"})))
            .unwrap();
        assert!(end.done && end.terminated && !end.truncated);
        let ep = env.episode().unwrap();
        assert_eq!(ep.lifecycle(), Lifecycle::Submitted);
        assert_eq!(ep.lifecycle().terminal_reason(), Some("decision_submitted"));
        let steps = ep.step_count;
        match env.step("lookup_policy", &Map::new()) {
            Err(EnvStepError::Step(StepError::EpisodeEnded(reason))) => {
                assert_eq!(reason, "decision_submitted")
            }
            other => panic!("an ended episode refuses a step: {other:?}"),
        }
        assert_eq!(env.episode().unwrap().step_count, steps, "nothing changed");
        // Truncated: steps (accepted or rejected) until a limit ends the episode.
        reset(&mut env);
        let mut last = None;
        for i in 0..200 {
            let r = if i % 2 == 0 {
                env.step("lookup_policy", &Map::new()).unwrap()
            } else {
                env.step("not_an_action", &Map::new()).unwrap()
            };
            let ep = env.episode().unwrap();
            assert_eq!(ep.case_clock, ep.step_count);
            assert_eq!(r.done, ep.lifecycle().is_done());
            assert_eq!(r.truncated, ep.lifecycle().is_truncated());
            assert!(!r.terminated);
            if r.done {
                last = Some(ep.lifecycle());
                break;
            }
        }
        let Some(Lifecycle::Truncated(reason)) = last else {
            panic!("a limit truncates the episode: {last:?}")
        };
        assert!(
            matches!(reason, "max_steps_reached" | "budget_exhausted"),
            "{reason}"
        );
        match env.step("submit_decision", &obj(json!({"decision": "PAY"}))) {
            Err(EnvStepError::Step(StepError::EpisodeEnded(r))) => assert_eq!(r, reason),
            other => panic!("a truncated episode refuses a submission: {other:?}"),
        }
        assert!(env.episode().unwrap().grade.is_none());
    }

    /// `fresh_institution` starts the episode from the pool's fresh memory (what a new session
    /// has); without it memory carries over; a rejected reset leaves memory untouched.
    #[test]
    fn fresh_institution_resets_memory_only_for_a_valid_reset() {
        let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
        let mut env = Environment::new(pool.clone(), EnvConfig::default());
        let reset = |env: &mut Environment, case: &str, fresh: bool| {
            env.reset(&ResetRequest {
                case_id: Some(case.into()),
                fresh_institution: fresh,
                ..Default::default()
            })
        };
        reset(&mut env, "CASE-D-001", false).unwrap();
        let pay: Map<String, Value> =
            serde_json::from_value(json!({"decision": "PAY", "confidence": 0.99})).unwrap();
        assert!(env.step("submit_decision", &pay).unwrap().terminated);
        assert_eq!(env.memory.case_counter, 1);
        let carried = reset(&mut env, "CASE-A-001", false).unwrap();
        assert_eq!(env.memory.case_counter, 1);
        assert!(reset(&mut env, "CASE-NOPE", true).is_err());
        assert_eq!(env.memory.case_counter, 1, "a rejected reset keeps memory");
        let fresh = reset(&mut env, "CASE-A-001", true).unwrap();
        assert_eq!(env.memory.case_counter, 0);
        let new_session = Environment::new(pool, EnvConfig::default())
            .reset(&ResetRequest {
                case_id: Some("CASE-A-001".into()),
                ..Default::default()
            })
            .unwrap();
        let view =
            |e: &StepEnvelope| serde_json::to_value(&e.observation.institutional_memory).unwrap();
        assert_eq!(view(&fresh), view(&new_session));
        assert_ne!(view(&carried), view(&fresh));
        let parsed: ResetRequest =
            serde_json::from_value(json!({"fresh_institution": true})).unwrap();
        assert!(parsed.fresh_institution);
        assert!(!ResetRequest::default().fresh_institution);
    }

    /// A `fresh_institution` reset is a new session's reset, byte for byte, whatever the session
    /// played before: the curriculum's tier and stagnation counter, the selection stream and the
    /// episode counter start afresh with the memory (seed 7 used to give another case after ten
    /// earlier episodes, because the stagnation counter survived).
    #[test]
    fn a_fresh_institution_reset_is_a_new_sessions_reset() {
        let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
        let text = |e: &StepEnvelope| ls_json::to_string(e).unwrap();
        let seeded = |seed: u64, fresh: bool| ResetRequest {
            seed: Some(seed),
            fresh_institution: fresh,
            ..Default::default()
        };
        let new_session = text(
            &Environment::new(pool.clone(), EnvConfig::default())
                .reset(&seeded(7, false))
                .unwrap(),
        );
        let mut env = Environment::new(pool.clone(), EnvConfig::default());
        let hold: Map<String, Value> =
            serde_json::from_value(json!({"decision": "HOLD", "confidence": 0.3})).unwrap();
        for seed in 0..10 {
            env.reset(&seeded(seed, false)).unwrap();
            env.step("submit_decision", &hold).unwrap();
        }
        assert!(
            env.curriculum.stagnation > 5,
            "the counter that used to leak"
        );
        let after_ten = text(&env.reset(&seeded(7, true)).unwrap());
        assert_eq!(after_ten, new_session);
        assert_eq!(env.curriculum, Curriculum::default());
        // And again mid-episode, and after a fresh episode was played.
        env.step("lookup_policy", &Map::new()).unwrap();
        assert_eq!(text(&env.reset(&seeded(7, true)).unwrap()), new_session);
        // A refused fresh reset leaves the session as it was.
        let before = text(&env.reset(&seeded(3, false)).unwrap());
        assert!(env
            .reset(&ResetRequest {
                case_id: Some("CASE-NOPE".into()),
                fresh_institution: true,
                ..Default::default()
            })
            .is_err());
        assert_eq!(env.episodes_started, 2);
        assert!(before.contains(&env.episode().unwrap().case.case_id));
    }

    /// `reset_case` starts an episode of a case built by the caller: a curated case gives the
    /// `case_id` reset's episode (in a fresh session, byte for byte), a generated case plays to
    /// a graded end, and a fresh start is allowed after a ControlBench-track episode.
    #[test]
    fn reset_case_plays_a_given_case() {
        let set = FixtureSet::embedded().expect("fixtures");
        let pool = Arc::new(CasePool::new(set.clone()));
        let text = |e: &StepEnvelope| ls_json::to_string(e).unwrap();
        let fresh = CaseReset {
            fresh: true,
            ..Default::default()
        };
        let mut env = Environment::new(pool.clone(), EnvConfig::default());
        let curated = pool.get("CASE-C-002").unwrap().clone();
        let by_case = env.reset_case(curated, &fresh).unwrap();
        let by_id = Environment::new(pool.clone(), EnvConfig::default())
            .reset(&ResetRequest {
                case_id: Some("CASE-C-002".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(text(&by_case), text(&by_id));
        let quarter = ls_gen::controlbench(
            &set,
            &ls_gen::QuarterConfig {
                length: 10,
                seed: 11,
                ..Default::default()
            },
        );
        let generated = quarter
            .iter()
            .find(|c| c.primary_track.as_deref() == Some("controlbench"))
            .expect("a plain quarter case");
        let generated = Arc::new(generated.clone());
        let r = env.reset_case(generated.clone(), &fresh).unwrap();
        assert_eq!(r.observation.case_id, generated.case_id);
        assert_eq!(env.episode().unwrap().track, BenchmarkTrack::Controlbench);
        let hold: Map<String, Value> =
            serde_json::from_value(json!({"decision": "HOLD", "confidence": 0.5})).unwrap();
        let end = env.step("submit_decision", &hold).unwrap();
        assert!(end.terminated && env.state().unwrap().final_score > 0.0);
        // Inside a ControlBench sequence the HTTP reset refuses a fresh institution; a fresh
        // start of a given case is a new session instead.
        let again = env.reset_case(generated, &fresh).unwrap();
        assert_eq!(text(&again), text(&r));
        let blind = CaseReset {
            reward_mode: Some(RewardMode::Reference),
            ..fresh.clone()
        };
        assert_eq!(
            env.reset_case(pool.cases[0].clone(), &blind).unwrap_err(),
            ResetError::LabelRevealingRewardOnBlindTrack
        );
    }

    /// Inside a ControlBench sequence the governed agent cannot reset its institution, neither
    /// through the institutional reset nor through `fresh_institution`; outside one it can.
    #[test]
    fn institution_reset_is_refused_inside_a_controlbench_sequence() {
        let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
        let mut env = Environment::new(pool, EnvConfig::default());
        assert!(
            env.institutional_reset().is_ok(),
            "a fresh session may reset"
        );
        env.reset(&ResetRequest {
            case_id: Some("CASE-D-001".into()),
            track: Some("controlbench".into()),
            ..Default::default()
        })
        .unwrap();
        let pay: Map<String, Value> =
            serde_json::from_value(json!({"decision": "PAY", "confidence": 0.99})).unwrap();
        env.step("submit_decision", &pay).unwrap();
        assert_eq!(
            env.institutional_reset(),
            Err(ResetError::InsideControlBenchSequence)
        );
        let fresh = ResetRequest {
            case_id: Some("CASE-A-001".into()),
            fresh_institution: true,
            ..Default::default()
        };
        assert_eq!(
            env.reset(&fresh).unwrap_err(),
            ResetError::InsideControlBenchSequence
        );
        assert_eq!(env.memory.case_counter, 1, "memory kept");
        // A case-track episode ends the sequence; then an operator may reset again.
        env.reset(&ResetRequest {
            case_id: Some("CASE-A-001".into()),
            ..Default::default()
        })
        .unwrap();
        assert!(env.institutional_reset().is_ok());
    }

    /// `/state` names the case's split and pairing only once the episode is over, and every
    /// case (benign or risky) gets a pressure event at the same, public step.
    #[test]
    fn state_hides_the_split_and_pressure_arrives_on_benign_cases() {
        let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
        for id in ["CASE-B-003", "CASE-D-001"] {
            let mut env = Environment::new(pool.clone(), EnvConfig::default());
            let r = env
                .reset(&ResetRequest {
                    case_id: Some(id.into()),
                    ..Default::default()
                })
                .unwrap();
            assert_eq!(env.state().unwrap().benchmark_split, "", "{id}");
            let trigger = (r.observation.max_steps / 2).max(2);
            let mut arrived = None;
            for _ in 0..trigger {
                let e = env.step("lookup_policy", &Map::new()).unwrap();
                if e.observation
                    .last_tool_result
                    .to_map()
                    .contains_key("pressure_event")
                {
                    arrived = Some(e.observation.step_count);
                    break;
                }
            }
            assert_eq!(
                arrived,
                Some(trigger),
                "{id}: pressure event at the trigger step"
            );
            let pay: Map<String, Value> =
                serde_json::from_value(json!({"decision": "HOLD", "confidence": 0.6})).unwrap();
            env.step("submit_decision", &pay).unwrap();
            let split = env.state().unwrap().benchmark_split;
            assert_eq!(
                split,
                env.pool().get(id).unwrap().benchmark_split,
                "{id}: shown after the episode"
            );
        }
    }
}
