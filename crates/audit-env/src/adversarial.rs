//! Red/blue adversarial difficulty for the fraud task.
//!
//! The red side's level (1–5) is passed to the fraud generator, which changes *what* is planted
//! (subtle patterns forced in from level 4) and *how well it hides* (split sums and
//! concentration shares just over their thresholds, round multiples of ₹1,000 instead of
//! ₹10,000, mixed leading digits, fewer weekend transactions, and near-miss red herrings).
//! The blue side's final F1 on every fraud episode is recorded; the level adapts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::util::{push_bounded, round_n};

pub const MIN_LEVEL: u8 = 1;
pub const MAX_LEVEL: u8 = 5;
pub const ADAPT_WINDOW: usize = 5;
pub const ADAPT_MIN_RECORDS: usize = 3;
pub const RAISE_ABOVE_F1: f64 = 0.70;
pub const LOWER_BELOW_F1: f64 = 0.30;
pub const MAX_RECORDS: usize = 1_000;

pub fn level_name(level: u8) -> &'static str {
    match level {
        1 => "obvious",
        2 => "moderate",
        3 => "subtle",
        4 => "expert",
        _ => "adversarial",
    }
}

/// How the fraud level is chosen for new fraud episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FraudDifficulty {
    /// The controller adapts the level from blue-team results.
    Auto,
    /// A fixed level 1–5.
    Fixed(u8),
}

impl FraudDifficulty {
    /// `auto`, or the README's 0–4 scale (0 = obvious … 4 = adversarial).
    pub fn parse(s: &str) -> Option<FraudDifficulty> {
        let t = s.trim().to_ascii_lowercase();
        if t.is_empty() || t == "auto" {
            return Some(FraudDifficulty::Auto);
        }
        match t.parse::<u8>() {
            Ok(n) if n <= 4 => Some(FraudDifficulty::Fixed(n + 1)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlueRecord {
    pub seed: u64,
    pub f1: f64,
    pub caught: usize,
    pub missed: usize,
    pub red_level: u8,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdaptResult {
    pub action: String,
    pub old_level: u8,
    pub new_level: u8,
    pub avg_f1: Option<f64>,
    pub samples: usize,
    pub round: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ArmsRace {
    pub current_red_level: u8,
    pub level_name: String,
    pub mode: FraudDifficulty,
    pub detection_history: Vec<BlueRecord>,
    pub arms_race_log: Vec<AdaptResult>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AdversarialController {
    pub mode: FraudDifficulty,
    pub red_level: u8,
    pub history: Vec<BlueRecord>,
    pub log: Vec<AdaptResult>,
}

impl AdversarialController {
    pub fn new(mode: FraudDifficulty) -> Self {
        let red_level = match mode {
            FraudDifficulty::Fixed(l) => l.clamp(MIN_LEVEL, MAX_LEVEL),
            FraudDifficulty::Auto => MIN_LEVEL,
        };
        AdversarialController {
            mode,
            red_level,
            history: vec![],
            log: vec![],
        }
    }

    /// The level the next fraud episode is generated at.
    pub fn level(&self) -> u8 {
        self.red_level
    }

    /// Record a blue-team result; in auto mode the level adapts after each record.
    pub fn record(
        &mut self,
        seed: u64,
        f1: f64,
        caught: usize,
        missed: usize,
    ) -> Option<AdaptResult> {
        let record = BlueRecord {
            seed,
            f1,
            caught,
            missed,
            red_level: self.red_level,
        };
        push_bounded(&mut self.history, record, MAX_RECORDS);
        match self.mode {
            FraudDifficulty::Auto => Some(self.adapt()),
            FraudDifficulty::Fixed(_) => None,
        }
    }

    pub fn adapt(&mut self) -> AdaptResult {
        let old = self.red_level;
        let round = self.log.len() + 1;
        let res = if self.history.len() < ADAPT_MIN_RECORDS {
            AdaptResult {
                action: "no_change".into(),
                old_level: old,
                new_level: old,
                avg_f1: None,
                samples: self.history.len(),
                round,
            }
        } else {
            let recent: Vec<f64> = self
                .history
                .iter()
                .rev()
                .take(ADAPT_WINDOW)
                .map(|r| r.f1)
                .collect();
            let avg = recent.iter().sum::<f64>() / recent.len() as f64;
            let (action, new) = if avg > RAISE_ABOVE_F1 && old < MAX_LEVEL {
                ("increased", old + 1)
            } else if avg < LOWER_BELOW_F1 && old > MIN_LEVEL {
                ("decreased", old - 1)
            } else {
                ("maintained", old)
            };
            self.red_level = new;
            AdaptResult {
                action: action.into(),
                old_level: old,
                new_level: new,
                avg_f1: Some(round_n(avg, 4)),
                samples: recent.len(),
                round,
            }
        };
        push_bounded(&mut self.log, res.clone(), MAX_RECORDS);
        res
    }

    pub fn arms_race(&self) -> ArmsRace {
        ArmsRace {
            current_red_level: self.red_level,
            level_name: level_name(self.red_level).into(),
            mode: self.mode,
            detection_history: self.history.clone(),
            arms_race_log: self.log.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{generate, Documents};
    use crate::model::{TaskId, WorldRules};

    #[test]
    fn adapts_up_and_down() {
        let mut c = AdversarialController::new(FraudDifficulty::Auto);
        assert_eq!(c.record(1, 0.9, 9, 1).unwrap().action, "no_change");
        c.record(2, 0.95, 10, 0);
        let r = c.record(3, 0.9, 9, 1).unwrap();
        assert_eq!((r.action.as_str(), r.new_level), ("increased", 2));
        for s in 0..10 {
            c.record(10 + s, 0.05, 0, 10);
        }
        assert_eq!(c.level(), 1);
        assert!(FraudDifficulty::parse("4") == Some(FraudDifficulty::Fixed(5)));
        assert!(FraudDifficulty::parse("9").is_none());
    }

    #[test]
    fn higher_levels_hide_patterns_closer_to_thresholds() {
        // Level 5 split sums sit just above the threshold; level 1 far above it.
        let split_sum = |level: u8| -> Option<f64> {
            let d = generate(
                TaskId::FraudDetection,
                7,
                &WorldRules {
                    fraud_level: level,
                    ..Default::default()
                },
            );
            let Documents::Fraud(f) = &d.documents else {
                return None;
            };
            let g = d
                .ground_truth
                .iter()
                .find(|g| g.error_type == crate::model::ErrorType::SplitInvoice)?;
            let ids: Vec<&str> = g.docs().collect();
            Some(
                f.transactions
                    .iter()
                    .filter(|t| ids.contains(&t.txn_id.as_str()))
                    .map(|t| crate::util::dec_f64(t.amount))
                    .sum(),
            )
        };
        let mut compared = 0;
        for seed_level in [(1u8, 5u8)] {
            if let (Some(a), Some(b)) = (split_sum(seed_level.0), split_sum(seed_level.1)) {
                assert!(a > b, "level 1 sum {a} should exceed level 5 sum {b}");
                compared += 1;
            }
        }
        // Level 4+ always plants the subtle patterns.
        for seed in 0..5 {
            let d = generate(
                TaskId::FraudDetection,
                seed,
                &WorldRules {
                    fraud_level: 4,
                    ..Default::default()
                },
            );
            let types: Vec<_> = d.ground_truth.iter().map(|g| g.error_type).collect();
            assert!(types.contains(&crate::model::ErrorType::CircularInvoicing));
            assert!(types.contains(&crate::model::ErrorType::ShellCompany));
        }
        let _ = compared;
    }
}
