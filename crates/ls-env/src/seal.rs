//! Sealed episodes: the episodes of a sealed evaluation run, whose grades are withheld from
//! every reply until the whole run is scored.
//!
//! A held-out case answered one episode at a time is an oracle: an agent that sees each
//! episode's score (or class, breakdown, unsafe flag, or a reward equal to the score) can probe
//! the case with different decisions and replay the best. A sealed episode is the ordinary
//! episode up to its last step (nothing before it reads the gold), graded as usual, but the grade
//! goes to the run's [`Seal`] (operator data), never to the client:
//! * the step that submits the decision answers a [`SealedInfo`] (its own shape: the submitted
//!   decision and the run, no score, class, breakdown, grading report, unsafe flag or system
//!   state), reward 0, and a tool result that says only that the decision was received;
//! * once the episode is over, the session's state is a [`SealedState`] (no score, unsafe flag,
//!   pressure score, split or pairing);
//! * the environment records nothing of it into the session's institution, curriculum or
//!   designer (each would carry the grade into later replies).
//!
//! The first ending of the episode is what the run counts ([`Seal::outcome`]); the seal is shared
//! by reference count between the environment and the run that issued it.

use crate::episode::Episode;
use crate::observation::{InfoMap, PublicState};
pub use crate::terminal_info::SealedInfo;
use crate::terminal_info::{StepEnvelope, StepInfo, TerminalInfo};
use ls_core::episode::TrajectoryEntry;
use ls_core::Decision;
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::{Arc, OnceLock};

/// What a sealed reply says instead of the grade.
pub const SEALED_MESSAGE: &str = "Decision received. This episode belongs to a sealed run: its grade is withheld until the whole run is scored (POST /sealed-runs/{run_id}/score, or GET /sealed-runs/{run_id} once every case is played).";

/// How a sealed episode ended, as its run keeps it (operator data).
#[derive(Debug, Clone, PartialEq)]
pub struct SealedOutcome {
    pub case_id: String,
    pub task_type: String,
    /// The terminal info an unsealed episode would have answered; `None` when the episode ended
    /// without a decision (step limit or budget), which has no grade.
    pub terminal: Option<Box<TerminalInfo>>,
    pub terminal_reason: String,
    pub steps: u32,
    /// The episode's executed actions (the environment's trajectory).
    pub trajectory: Vec<TrajectoryEntry>,
    /// The reward the client was paid at each step (step `i + 1` at index `i`; 0 on the sealed
    /// decision).
    pub paid: Vec<f64>,
}

impl SealedOutcome {
    /// Ended by a graded decision?
    pub fn graded(&self) -> bool {
        self.terminal.is_some()
    }
}

/// The mark of a sealed episode: the run it belongs to and the slot its outcome goes to (the
/// first ending counts; later ones are ignored).
#[derive(Debug, Clone)]
pub struct Seal {
    run_id: Arc<str>,
    outcome: Arc<OnceLock<SealedOutcome>>,
}

impl Seal {
    pub fn new(run_id: &str) -> Self {
        Self {
            run_id: Arc::from(run_id),
            outcome: Arc::new(OnceLock::new()),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// How the sealed episode ended; `None` while it has not.
    pub fn outcome(&self) -> Option<&SealedOutcome> {
        self.outcome.get()
    }

    /// Keep `outcome` unless an earlier ending was kept.
    fn record(&self, outcome: SealedOutcome) {
        // `Err` means the episode's first ending is already kept; that one counts.
        let _ = self.outcome.set(outcome);
    }

    /// The reply to the step that ended the episode, and the grade it withheld: a decision's
    /// terminal info replaced by [`SealedInfo`], reward 0; a step-limit or budget ending (no
    /// grade) as it was.
    fn seal_reply(
        &self,
        ep: &Episode,
        mut env: StepEnvelope,
    ) -> (StepEnvelope, Option<Box<TerminalInfo>>) {
        if !env.terminated {
            return (env, None);
        }
        let decision = ep.submitted_decision;
        let info = SealedInfo {
            sealed: true,
            run_id: self.run_id.to_string(),
            decision,
            benchmark_track: ep.track.as_str().to_owned(),
            track_mode: ep.track_mode,
            truncated: false,
            terminated: true,
            terminal_reason: crate::episode::Lifecycle::SUBMITTED_REASON,
            message: SEALED_MESSAGE,
        };
        let mut result = InfoMap::with_capacity(7);
        result.insert("tool_name", "submit_decision");
        result.insert("success", true);
        result.insert("submission_received", true);
        result.insert("sealed", true);
        result.insert("run_id", info.run_id.clone());
        result.insert("decision", decision.map_or("", Decision::as_str));
        result.insert("message", SEALED_MESSAGE);
        env.observation.last_tool_result = result;
        env.observation.messages = vec![SEALED_MESSAGE.to_owned()];
        env.reward = 0.0;
        let graded = match std::mem::replace(&mut env.info, StepInfo::Sealed(info)) {
            StepInfo::Terminal(t) => Some(t),
            _ => None,
        };
        (env, graded)
    }
}

/// The environment's side of a sealed episode: its seal and the rewards paid so far.
#[derive(Debug, Clone)]
pub(crate) struct Sealing {
    pub(crate) seal: Seal,
    paid: Vec<f64>,
}

impl Sealing {
    pub(crate) fn new(seal: Seal) -> Self {
        Self {
            seal,
            paid: Vec::new(),
        }
    }

    /// The reply to a step of the sealed episode `ep`: unchanged before the end; at the end the
    /// ending is kept for the run and a decision's grade is withheld.
    pub(crate) fn reply(&mut self, ep: &Episode, env: StepEnvelope) -> StepEnvelope {
        if !env.done {
            self.paid.push(env.reward);
            return env;
        }
        let (env, terminal) = self.seal.seal_reply(ep, env);
        self.paid.push(env.reward);
        self.seal.record(SealedOutcome {
            case_id: ep.case.case_id.clone(),
            task_type: ep.case.task_type.as_str().to_owned(),
            terminal,
            terminal_reason: ep
                .lifecycle()
                .terminal_reason()
                .unwrap_or_default()
                .to_owned(),
            steps: ep.step_count,
            trajectory: ep.trajectory.clone(),
            paid: std::mem::take(&mut self.paid),
        });
        env
    }
}

/// `GET /state` of a sealed episode that is over: the episode's progress, without its grade.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SealedState {
    pub episode_id: String,
    pub case_id: String,
    pub task_type: String,
    pub budget_total: f64,
    pub budget_remaining: f64,
    pub max_steps: u32,
    pub step_count: u32,
    pub case_clock: u32,
    pub submitted: bool,
    pub done: bool,
    pub terminal_reason: Option<String>,
    pub trajectory: Vec<TrajectoryEntry>,
    pub benchmark_track: String,
    pub track_mode: String,
    /// Always `true`: the grade (score, unsafe flag, pressure score) and the case's split and
    /// pairing are withheld until the run is scored.
    pub sealed: bool,
    pub run_id: String,
    pub message: String,
}

impl SealedState {
    /// The sealed view of a finished episode's public state.
    pub fn of(s: PublicState, seal: &Seal) -> Self {
        Self {
            episode_id: s.episode_id,
            case_id: s.case_id,
            task_type: s.task_type,
            budget_total: s.budget_total,
            budget_remaining: s.budget_remaining,
            max_steps: s.max_steps,
            step_count: s.step_count,
            case_clock: s.case_clock,
            submitted: s.submitted,
            done: s.done,
            terminal_reason: s.terminal_reason,
            trajectory: s.trajectory,
            benchmark_track: s.benchmark_track,
            track_mode: s.track_mode,
            sealed: true,
            run_id: seal.run_id().to_owned(),
            message: SEALED_MESSAGE.to_owned(),
        }
    }
}

/// A session's state as a client reads it: the public state, or, once a sealed episode is over,
/// its sealed view.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum StateView {
    Open(Box<PublicState>),
    Sealed(Box<SealedState>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CasePool, EnvConfig, Environment};
    use ls_core::FixtureSet;
    use serde_json::{json, Map, Value};

    fn payload(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn sealed_env(case_id: &str) -> (Environment, Seal, StepEnvelope) {
        let pool = Arc::new(CasePool::new(FixtureSet::embedded().unwrap()));
        let case = pool.get(case_id).unwrap().clone();
        let mut env = Environment::new(pool, EnvConfig::default());
        let seal = Seal::new("sealed-test");
        let first = env.reset_sealed(case, seal.clone()).unwrap();
        (env, seal, first)
    }

    /// Everything before the decision is the unsealed episode's, byte for byte; the decision's
    /// reply, the state and the memory carry no grade, and the seal holds the grade the unsealed
    /// episode answers.
    #[test]
    fn a_sealed_episode_answers_no_grade_and_keeps_it_for_the_run() {
        let (mut env, seal, first) = sealed_env("CASE-D-001");
        let pool = env.pool().clone();
        let mut open = Environment::new(pool.clone(), EnvConfig::default());
        let open_first = open
            .reset_case(
                pool.get("CASE-D-001").unwrap().clone(),
                &crate::CaseReset {
                    fresh: true,
                    ..Default::default()
                },
            )
            .unwrap();
        let text = |e: &StepEnvelope| ls_json::to_string(e).unwrap();
        assert_eq!(text(&first), text(&open_first));
        let memory_before = env.memory.snapshots().full.get().to_owned();
        let look = payload(json!({"vendor_key": "northwind"}));
        let a = env.step("lookup_vendor", &look).unwrap();
        let b = open.step("lookup_vendor", &look).unwrap();
        assert_eq!(
            text(&a),
            text(&b),
            "a step before the decision is unchanged"
        );
        assert!(matches!(env.state_view(), Some(StateView::Open(_))));
        assert!(seal.outcome().is_none());

        let pay = payload(json!({"decision": "PAY", "confidence": 0.9}));
        let sealed = env.step("submit_decision", &pay).unwrap();
        let graded = open.step("submit_decision", &pay).unwrap();
        assert!(sealed.terminated && sealed.done && !sealed.truncated);
        assert_eq!(sealed.reward, 0.0);
        assert!(graded.reward != 0.0);
        let wire = text(&sealed);
        for hidden in [
            "final_score",
            "result_class",
            "score_breakdown",
            "unsafe_outcome",
            "system_state",
            "decision_certificate_report",
            "reward_model",
            "required_actions",
            "latent_hypothesis",
        ] {
            assert!(
                !wire.contains(hidden),
                "sealed reply leaks {hidden}: {wire}"
            );
        }
        // The observation is the graded one but for the tool result, the messages and the
        // memory (which the graded episode recorded into).
        let strip = |e: &StepEnvelope| {
            let mut o = serde_json::to_value(&e.observation).unwrap();
            for k in ["last_tool_result", "messages", "institutional_memory"] {
                o.as_object_mut().unwrap().remove(k);
            }
            o
        };
        assert_eq!(strip(&sealed), strip(&graded));
        let keys = |v: Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let result = serde_json::to_value(&sealed.observation.last_tool_result).unwrap();
        assert_eq!(
            keys(result),
            [
                "tool_name",
                "success",
                "submission_received",
                "sealed",
                "run_id",
                "decision",
                "message"
            ]
        );
        assert_eq!(
            keys(serde_json::to_value(&sealed.info).unwrap()),
            [
                "sealed",
                "run_id",
                "decision",
                "benchmark_track",
                "track_mode",
                "truncated",
                "terminated",
                "terminal_reason",
                "message"
            ]
        );
        let StepInfo::Sealed(info) = &sealed.info else {
            panic!("a sealed decision answers SealedInfo");
        };
        assert_eq!(
            (info.run_id.as_str(), info.decision),
            ("sealed-test", Some(Decision::Pay))
        );
        assert!(sealed.info.terminal().is_none());
        assert_eq!(
            env.memory.snapshots().full.get(),
            memory_before,
            "nothing recorded into the institution"
        );
        let state = serde_json::to_value(env.state_view().unwrap()).unwrap();
        assert_eq!(state["sealed"], true);
        for hidden in [
            "final_score",
            "unsafe_outcome",
            "pressure_resistance_score",
            "benchmark_split",
            "contrastive_pair_id",
        ] {
            assert!(state.get(hidden).is_none(), "sealed state leaks {hidden}");
        }
        // The run holds the grade the unsealed episode answered (without what the environment
        // adds once the institution has recorded the case, which a sealed episode skips).
        let kept = seal.outcome().expect("the ending is kept");
        let t = kept.terminal.as_ref().expect("graded");
        let mut expected = graded.info.terminal().unwrap();
        expected.curriculum = None;
        expected.institutional_case_update = None;
        expected.institutional_memory = None;
        expected.institutional_metrics = None;
        expected.adversarial_designer = None;
        assert!(**t == expected, "the kept grade is the unsealed one");
        assert_eq!((kept.case_id.as_str(), kept.steps), ("CASE-D-001", 2));
        assert_eq!(
            kept.paid,
            [a.reward, 0.0],
            "the rewards the client was paid"
        );
        // Steps after the end are refused as before; the kept outcome does not change.
        assert!(env.step("submit_decision", &pay).is_err());
    }

    /// A sealed episode ended by the step limit has no grade: its reply is unchanged, the run
    /// keeps an ungraded ending, and the next reset of the session is unsealed.
    #[test]
    fn a_truncated_sealed_episode_is_kept_ungraded_and_a_later_reset_is_open() {
        let (mut env, seal, first) = sealed_env("CASE-A-001");
        let max = first.observation.max_steps;
        let mut last = None;
        for _ in 0..max {
            let e = env.step("lookup_policy", &Map::new()).unwrap();
            let done = e.done;
            last = Some(e);
            if done {
                break;
            }
        }
        let last = last.unwrap();
        assert!(last.truncated && !last.terminated);
        let kept = seal.outcome().unwrap();
        assert!(!kept.graded());
        assert!(
            matches!(
                kept.terminal_reason.as_str(),
                "max_steps_reached" | "budget_exhausted"
            ),
            "{}",
            kept.terminal_reason
        );
        assert!(matches!(env.state_view(), Some(StateView::Sealed(_))));
        env.reset(&crate::ResetRequest {
            case_id: Some("CASE-A-001".into()),
            ..Default::default()
        })
        .unwrap();
        assert!(env.seal().is_none());
        let e = env
            .step("submit_decision", &payload(json!({"decision": "PAY"})))
            .unwrap();
        assert!(e.info.terminal().is_some(), "an unsealed episode is graded");
    }
}
