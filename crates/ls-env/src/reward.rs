//! The step reward a learner maximises, and the potential it is shaped with.
//!
//! Two modes ([`RewardMode`]), chosen per reset:
//!
//! * **`score`** (the default on every track). Every step pays
//!   `r_t = −c_t + Φ(s_t) − Φ(s_{t−1})`, and the graded step adds the final score. `c_t` is the
//!   step's documented action cost: the share of the budget it spent times
//!   [`STEP_COST_WEIGHT`](crate::episode::STEP_COST_WEIGHT), plus the penalty of a failed tool,
//!   a refused action or an invalid decision. `Φ` is [`PROGRESS_SCALE`] times the reward
//!   machine's best progress through the family's temporal specification (which of the family's
//!   required checks have been performed, in order): a function of the actions taken and of
//!   whether they succeeded, never of what they revealed. `Φ = 0` at the reset and once the
//!   episode has ended, terminated *or* truncated, so the shaping telescopes (Ng, Harada &
//!   Russell 1999, γ = 1) and **the return is the score**: `Σ r_t = final score − Σ c_t`
//!   (0 for an episode that is never graded). Stalling returns `−Σ c_t < 0`.
//! * **`reference`** (opt-in, instrumented track only). The reference implementation's mix: the
//!   value of information, an information-gain bonus and a γ = 0.98 shaping term read from the
//!   SPRT belief, milestones (the first risk signal among them) and reward-machine bonuses. The
//!   belief is updated by what the agent revealed, so these terms tell a benign case from a risky
//!   one before the decision: they are **label-revealing**, which is why the blind track refuses
//!   this mode, and the return is not the score.
//!
//! Tested in `tests/reward.rs`: the return equals the score minus the costs on random episodes of
//! every family (truncated ones included), and benign/risky twins give byte-identical rewards,
//! components and metadata for the same actions.

use crate::temporal::RewardMachine;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Weight of the public-progress potential: performing the whole of the family's required
/// sequence raises `Φ` by this much, which the step that ends the episode gives back.
pub const PROGRESS_SCALE: f64 = 0.1;

/// Which reward a reset's episode pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RewardMode {
    /// Label-free costs and public-progress shaping; the return is the score.
    #[default]
    Score,
    /// The reference's label-revealing VoI / information-gain / belief shaping (instrumented
    /// track only).
    Reference,
}

impl RewardMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Score => "score",
            Self::Reference => "reference",
        }
    }

    /// Does this mode read the belief (and so the evidence) into the reward?
    pub fn reveals_label(self) -> bool {
        match self {
            Self::Score => false,
            Self::Reference => true,
        }
    }
}

/// `Φ(s)`: [`PROGRESS_SCALE`] times the reward machine's best progress while the episode runs,
/// 0 once it has ended.
pub fn potential(rm: &RewardMachine, ended: bool) -> f64 {
    if ended {
        return 0.0;
    }
    let phi = PROGRESS_SCALE * rm.best_progress();
    debug_assert!(
        (0.0..=PROGRESS_SCALE).contains(&phi),
        "the potential is bounded by its scale"
    );
    phi
}

#[cfg(test)]
mod tests {
    use super::*;
    use ls_core::{ActionName, TaskType};

    #[test]
    fn potential_starts_at_zero_grows_with_progress_and_is_zero_at_the_end() {
        let mut rm = RewardMachine::new(TaskType::TaskD);
        assert_eq!(potential(&rm, false), 0.0);
        rm.transition(ActionName::InspectEmailThread, true);
        let p1 = potential(&rm, false);
        assert!(p1 > 0.0);
        // A failed action is no progress.
        rm.transition(ActionName::LookupVendorHistory, false);
        assert_eq!(potential(&rm, false), p1);
        rm.transition(ActionName::LookupVendorHistory, true);
        assert!(potential(&rm, false) > p1);
        assert_eq!(potential(&rm, true), 0.0);
    }

    #[test]
    fn modes_read_and_write_their_wire_names() {
        for m in [RewardMode::Score, RewardMode::Reference] {
            let v = serde_json::to_value(m).unwrap();
            assert_eq!(v, m.as_str());
            assert_eq!(serde_json::from_value::<RewardMode>(v).unwrap(), m);
        }
        assert!(serde_json::from_value::<RewardMode>("shaped".into()).is_err());
        assert!(!RewardMode::Score.reveals_label());
        assert!(RewardMode::Reference.reveals_label());
    }
}
