//! Competence-adaptive curriculum for seeded random resets.
//!
//! Random resets draw from the task families unlocked by the current tier and adjust the step
//! limit and budget; explicit `case_id` resets are never adjusted. Competence is an exponential
//! moving average of graded scores.

use ls_core::TaskType;
use rust_decimal::Decimal;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tier {
    pub level: u8,
    pub name: &'static str,
    pub threshold: f64,
    pub allowed: &'static [TaskType],
    pub max_steps_floor: u32,
    /// Budget multiplier in hundredths.
    pub budget_pct: i64,
}

pub const TIERS: [Tier; 4] = [
    Tier {
        level: 0,
        name: "novice",
        threshold: 0.0,
        allowed: &[TaskType::TaskA, TaskType::TaskB],
        max_steps_floor: 25,
        budget_pct: 130,
    },
    Tier {
        level: 1,
        name: "competent",
        threshold: 0.30,
        allowed: &[TaskType::TaskA, TaskType::TaskB, TaskType::TaskC],
        max_steps_floor: 22,
        budget_pct: 115,
    },
    Tier {
        level: 2,
        name: "proficient",
        threshold: 0.55,
        allowed: &[
            TaskType::TaskA,
            TaskType::TaskB,
            TaskType::TaskC,
            TaskType::TaskD,
        ],
        max_steps_floor: 20,
        budget_pct: 100,
    },
    Tier {
        level: 3,
        name: "expert",
        threshold: 0.75,
        allowed: &TaskType::ALL,
        max_steps_floor: 18,
        budget_pct: 90,
    },
];

pub const EMA_ALPHA: f64 = 0.15;
pub const WINDOW: usize = 20;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Curriculum {
    pub competence_ema: f64,
    pub tier: u8,
    pub stagnation: u32,
    #[serde(skip)]
    window: VecDeque<f64>,
    #[serde(skip)]
    per_task: BTreeMap<TaskType, VecDeque<f64>>,
    pub weakest_task: Option<TaskType>,
    pub episodes_graded: u32,
    /// How many tier changes the session has had (the reference's `tier_transitions`, a count).
    #[serde(rename = "tier_transitions")]
    pub tier_transition_count: u32,
    /// Tier changes, oldest first (the last [`WINDOW`] kept), on the wire as
    /// `tier_transition_log`.
    #[serde(rename = "tier_transition_log")]
    pub tier_transitions: VecDeque<TierTransition>,
}

/// One tier change: after which graded episode, from and to which tier, at what competence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TierTransition {
    pub episode: u32,
    pub from_tier: u8,
    pub to_tier: u8,
    pub competence_ema: f64,
}

impl Default for Curriculum {
    fn default() -> Self {
        Self {
            competence_ema: 0.10,
            tier: 0,
            stagnation: 0,
            window: VecDeque::new(),
            per_task: BTreeMap::new(),
            weakest_task: None,
            episodes_graded: 0,
            tier_transition_count: 0,
            tier_transitions: VecDeque::new(),
        }
    }
}

impl Curriculum {
    /// Mean of the last five graded scores (0 before any).
    pub fn recent_5_avg(&self) -> f64 {
        let n = self.window.len().min(5);
        if n == 0 {
            return 0.0;
        }
        let sum: f64 = self.window.iter().rev().take(n).sum();
        ls_core::text::round_to(sum / n as f64, 4)
    }

    pub fn tier(&self) -> &'static Tier {
        &TIERS[self.tier as usize]
    }

    /// Adjust a case's step limit and budget for the current tier.
    pub fn adjust(&self, max_steps: u32, budget: Decimal) -> (u32, Decimal) {
        let t = self.tier();
        (
            max_steps.max(t.max_steps_floor),
            (budget * Decimal::new(t.budget_pct, 2)).round_dp(2),
        )
    }

    pub fn update(&mut self, task: TaskType, score: f64) {
        let s = score.clamp(0.0, 1.0);
        self.competence_ema = (1.0 - EMA_ALPHA) * self.competence_ema + EMA_ALPHA * s;
        push_bounded(&mut self.window, s);
        push_bounded(self.per_task.entry(task).or_default(), s);
        self.weakest_task = self
            .per_task
            .iter()
            .map(|(t, v)| (*t, v.iter().sum::<f64>() / v.len() as f64))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(t, _)| t);
        if s > self.competence_ema + 0.02 {
            self.stagnation = 0;
        } else {
            self.stagnation += 1;
        }
        let before = self.tier;
        self.tier = TIERS
            .iter()
            .rev()
            .find(|t| self.competence_ema >= t.threshold)
            .map_or(0, |t| t.level);
        self.episodes_graded += 1;
        if self.tier != before {
            self.tier_transition_count = self.tier_transition_count.saturating_add(1);
            self.tier_transitions.push_back(TierTransition {
                episode: self.episodes_graded,
                from_tier: before,
                to_tier: self.tier,
                competence_ema: ls_core::text::round_to(self.competence_ema, 4),
            });
            while self.tier_transitions.len() > WINDOW {
                self.tier_transitions.pop_front();
            }
        }
    }
}

fn push_bounded(v: &mut VecDeque<f64>, s: f64) {
    v.push_back(s);
    while v.len() > WINDOW {
        v.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn competence_raises_tier() {
        let mut c = Curriculum::default();
        assert_eq!(c.tier().name, "novice");
        for _ in 0..30 {
            c.update(TaskType::TaskA, 0.95);
        }
        assert_eq!(c.tier().name, "expert");
        let t = &c.tier_transitions;
        assert_eq!(t.len(), 3, "{t:?}");
        assert_eq!(c.tier_transition_count, 3);
        let wire = serde_json::to_value(&c).unwrap();
        assert_eq!(wire["tier_transitions"], 3, "the reference's count");
        assert_eq!(
            wire["tier_transition_log"].as_array().map(Vec::len),
            Some(3)
        );
        assert_eq!((t[0].from_tier, t[2].to_tier), (0, 3));
        assert!(t.iter().all(|x| x.to_tier == x.from_tier + 1));
        assert_eq!(c.recent_5_avg(), 0.95);
        let (steps, budget) = c.adjust(12, Decimal::from(10));
        assert_eq!((steps, budget), (18, Decimal::new(900, 2)));
    }
}
