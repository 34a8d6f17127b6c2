//! Stage 13: the independent FraudGen ecosystem (100 generated cases, seed 9090), summarised and
//! played by every ladder agent (fresh environment per case).

use super::{Ctx, Unavailable};
use crate::eval::pool_of;
use crate::metrics::{r4, SectionSummary};
use ls_core::schema::Case;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FraudgenSummary {
    pub generator: String,
    pub case_count: usize,
    pub sequence_seed: u64,
    pub task_counts: BTreeMap<String, usize>,
    pub risky_share: f64,
    pub scenario_examples: Vec<BTreeMap<String, String>>,
    pub evaluated_by_agent: bool,
    /// Every ladder agent played on the generated ecosystem (fresh environment per case).
    #[serde(default)]
    pub agent_results: BTreeMap<String, FraudgenAgentResult>,
}

/// One agent on the FraudGen ecosystem.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FraudgenAgentResult {
    pub case_count: usize,
    pub average_score: f64,
    pub unsafe_release_rate: f64,
    pub control_satisfied_resolution_rate: f64,
    pub trial_pass_rate: f64,
    pub pass_k_consistent_rate: f64,
    pub result_class_counts: BTreeMap<String, usize>,
    pub task_breakdown: BTreeMap<String, f64>,
}

impl FraudgenAgentResult {
    pub fn of(s: &SectionSummary) -> Self {
        Self {
            case_count: s.case_count,
            average_score: s.average_score,
            unsafe_release_rate: s.metrics.unsafe_release_rate,
            control_satisfied_resolution_rate: s.metrics.control_satisfied_resolution_rate,
            trial_pass_rate: s.metrics.trial_pass_rate,
            pass_k_consistent_rate: s.metrics.consistent_pass_rate,
            result_class_counts: s.metrics.result_class_counts.clone(),
            task_breakdown: s
                .task_breakdown
                .iter()
                .map(|(k, m)| (k.clone(), m.score_stats.mean))
                .collect(),
        }
    }
}

pub fn run(ctx: &Ctx<'_>, unavailable: &mut Vec<Unavailable>) -> Option<FraudgenSummary> {
    let cases = match ctx.gen.fraudgen(100, 9090) {
        Err(e) => {
            unavailable.push(Unavailable {
                track: "independent_fraudgen_ecosystem".into(),
                reason: e,
            });
            return None;
        }
        Ok(cases) => cases,
    };
    let mut tasks = BTreeMap::new();
    for c in &cases {
        *tasks.entry(c.task_type.as_str().to_owned()).or_insert(0) += 1;
    }
    let pool = pool_of(&ctx.master, &cases);
    let agent_results: BTreeMap<String, FraudgenAgentResult> = ctx
        .agents
        .iter()
        .map(|a| {
            let rows = ctx.evaluate(a, &pool, &cases, None);
            (a.clone(), FraudgenAgentResult::of(&ctx.section(rows)))
        })
        .collect();
    Some(FraudgenSummary {
        evaluated_by_agent: !agent_results.is_empty(),
        agent_results,
        generator: "fraudgen_independent_ecosystem_v1".into(),
        case_count: cases.len(),
        sequence_seed: 9090,
        risky_share: if cases.is_empty() {
            0.0
        } else {
            r4(cases.iter().filter(|c| c.gold.unsafe_if_pay).count() as f64 / cases.len() as f64)
        },
        task_counts: tasks,
        scenario_examples: cases.iter().take(8).map(scenario_example).collect(),
    })
}

fn scenario_example(c: &Case) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("case_id".into(), c.case_id.clone());
    m.insert("task_type".into(), c.task_type.as_str().to_owned());
    m.insert(
        "difficulty".into(),
        format!("{:?}", c.difficulty).to_lowercase(),
    );
    if let Some(s) = c.latent_mechanism.get("scenario_type") {
        m.insert("scenario_type".into(), s.clone());
    }
    m
}
