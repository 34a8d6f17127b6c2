//! What the `llm` agent adds to a model's own replies, as explicit options, all off by default.
//!
//! Every model is played alike: the prompt, the tools, the reply cap and the parsing do not
//! depend on the model's name. Anything beyond the model's own reply (the teacher's suggested
//! next action in the prompt, repairing broken JSON, the agent-side guardrails, the evidence
//! ledger or the candidate list in the prompt, decoding against the candidates) is an
//! [`Assistance`] or [`crate::prompt::PromptOptions`] switch the user sets; a run with any of them
//! on is *assisted*: its [`Harness`] is stored in the run's provenance and it is ranked on its own
//! track of the leaderboard, never beside unassisted runs.

use crate::prompt::PromptOptions;
use serde::{Deserialize, Serialize};

/// Help the agent gives the model (each off by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assistance {
    /// Show the teacher's suggested next action in every step prompt.
    pub teacher_hint: bool,
    /// Repair broken JSON: recover the action name (and a submission's decision word).
    pub repair: bool,
    /// Agent-side guardrails on submissions (`crate::guardrails`): the payload sanitised to the
    /// submission contract and the verification records the episode revealed attached.
    pub guardrails: bool,
}

/// The leaderboard track of runs with no assistance and the default prompt.
pub const UNASSISTED: &str = "unassisted";
/// The leaderboard track of every other run.
pub const ASSISTED: &str = "assisted";

/// How an `llm` run was played: what its provenance records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Harness {
    /// [`UNASSISTED`] or [`ASSISTED`].
    pub track: String,
    /// The options that were on, by name (empty on the unassisted track).
    pub assistance: Vec<String>,
    /// Reply token cap of every model call.
    pub max_tokens: u32,
    pub temperature: f64,
}

impl Harness {
    pub fn new(a: Assistance, p: PromptOptions, max_tokens: u32, temperature: f64) -> Self {
        let assistance: Vec<String> = [
            (a.teacher_hint, "teacher_hint"),
            (a.repair, "repair"),
            (a.guardrails, "guardrails"),
            (p.ledger, "ledger"),
            (p.candidates, "candidates"),
            (p.constrain, "constrained"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| name.to_owned())
        .collect();
        Self {
            track: if assistance.is_empty() {
                UNASSISTED
            } else {
                ASSISTED
            }
            .into(),
            assistance,
            max_tokens,
            temperature,
        }
    }

    /// The agent type a run is stored and ranked under: `llm-agent`, or `llm-agent+<option>+…`
    /// for an assisted run (so assisted and unassisted runs of one model are separate entries).
    pub fn agent_type(&self) -> String {
        std::iter::once("llm-agent")
            .chain(self.assistance.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("+")
    }

    pub fn assisted(&self) -> bool {
        !self.assistance.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_option_makes_a_run_assisted() {
        let plain = Harness::new(Assistance::default(), PromptOptions::default(), 3072, 0.0);
        assert_eq!(plain.track, UNASSISTED);
        assert_eq!(plain.agent_type(), "llm-agent");
        assert!(!plain.assisted());
        let hint = Harness::new(
            Assistance {
                teacher_hint: true,
                repair: true,
                ..Default::default()
            },
            PromptOptions::default(),
            3072,
            0.0,
        );
        assert_eq!(hint.track, ASSISTED);
        assert_eq!(hint.agent_type(), "llm-agent+teacher_hint+repair");
        let ledger = Harness::new(
            Assistance::default(),
            PromptOptions {
                ledger: true,
                ..Default::default()
            },
            3072,
            0.0,
        );
        assert_eq!(ledger.assistance, vec!["ledger"]);
        assert!(ledger.assisted());
    }
}
