//! Built-in rule-based baseline auditor (no LLM).
//!
//! It runs the documented rule checks on the documents it is shown, but only for the error
//! types in its checklist. The default checklist leaves out the checks that need multi-row
//! reasoning (cumulative totals, cascading arithmetic, rate slabs, Benford, reference cycles,
//! shared PAN/bank details, memory and regulatory rules), so it is a real but beatable floor;
//! the self-improvement critic can add checks to it.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::data::{self, Documents};
use crate::episode::evaluate;
use crate::model::{ErrorType, Finding, TaskId, WorldRules};
use crate::util::{self, round_n};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BaselineConfig {
    pub enabled: BTreeSet<ErrorType>,
}

impl Default for BaselineConfig {
    fn default() -> Self {
        use ErrorType::*;
        let hard = [
            CumulativeBreach,
            CascadingTotal,
            ExcessClaim,
            TaxRateMismatch,
            BenfordViolation,
            CircularInvoicing,
            DuplicateBankAccount,
            ShellCompany,
            HighRiskNewVendor,
            UndocumentedCashPayment,
            WrongTaxType,
        ];
        BaselineConfig {
            enabled: ErrorType::ALL
                .iter()
                .copied()
                .filter(|t| !hard.contains(t))
                .collect(),
        }
    }
}

/// Findings the baseline reports on a set of documents.
pub fn audit(docs: &Documents, cfg: &BaselineConfig) -> Vec<Finding> {
    data::detect_all(docs, &BTreeSet::new())
        .into_iter()
        .filter(|(_, t)| cfg.enabled.contains(t))
        .map(|(d, t)| {
            let mut f = Finding::new(&d, t.as_str());
            f.description = format!("baseline rule check: {}", t.as_str().replace('_', " "));
            f.confidence = Some(0.8);
            f
        })
        .collect()
}

pub fn findings_for(task: TaskId, seed: u64, cfg: &BaselineConfig) -> Vec<Finding> {
    let d = data::generate(task, seed, &WorldRules::default());
    audit(&d.documents, cfg)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskBaseline {
    pub scores: BTreeMap<u64, f64>,
    pub weighted_scores: BTreeMap<u64, f64>,
    pub mean_score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BaselineReport {
    pub model: String,
    pub seeds: Vec<u64>,
    pub tasks: BTreeMap<String, TaskBaseline>,
    pub average_score: f64,
}

/// Run the baseline over every task and seed (in-process, deterministic).
pub fn run(seeds: &[u64], cfg: &BaselineConfig) -> BaselineReport {
    let mut tasks = BTreeMap::new();
    let mut all = vec![];
    for task in TaskId::ALL {
        let mut scores = BTreeMap::new();
        let mut weighted = BTreeMap::new();
        for &s in seeds {
            let f = findings_for(task, s, cfg);
            if let Ok(g) = evaluate(task, s, f) {
                scores.insert(s, g.score);
                weighted.insert(s, g.weighted_score);
                all.push(g.score);
            }
        }
        let mean = util::mean(scores.values().copied());
        tasks.insert(
            task.as_str().to_string(),
            TaskBaseline {
                scores,
                weighted_scores: weighted,
                mean_score: round_n(mean, 4),
            },
        );
    }
    let avg = util::mean(all);
    BaselineReport {
        model: "rule-based-baseline-v1".into(),
        seeds: seeds.to_vec(),
        tasks,
        average_score: round_n(avg, 4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_is_between_floor_and_perfect() {
        let r = run(&[42, 43], &BaselineConfig::default());
        assert!(
            r.average_score > 0.3 && r.average_score < 0.95,
            "{}",
            r.average_score
        );
        let full = BaselineConfig {
            enabled: ErrorType::ALL.iter().copied().collect(),
        };
        let r2 = run(&[42, 43], &full);
        assert!(r2.average_score > r.average_score);
    }
}
