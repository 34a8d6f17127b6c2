//! The rule-based baseline (`audit_env::baseline`) as an auditor, so it is played, graded,
//! stored and ranked exactly as the LLM auditor is. It checks the documents the seed generates
//! under the default rules (the documents a single task shows); in a campaign it does not read
//! the period's rule changes, and as the overseer it decides nothing.

use super::{AuditPolicy, Findings, TaskView};
use audit_env::baseline::{findings_for, BaselineConfig};
use audit_env::campaign::Instruction;
use audit_env::model::TaskId;
use serde_json::Value;

/// The baseline's model name (`audit_env::baseline::run` reports the same).
pub const BASELINE_MODEL: &str = "rule-based-baseline-v1";

#[derive(Default)]
pub struct BaselineAuditor {
    pub config: BaselineConfig,
}

impl AuditPolicy for BaselineAuditor {
    fn name(&self) -> String {
        "audit-baseline".into()
    }
    fn model(&self) -> String {
        BASELINE_MODEL.into()
    }
    fn agent_type(&self) -> String {
        "rule-based".into()
    }
    fn findings(&mut self, view: &TaskView<'_>) -> Findings {
        let seed = view
            .observation
            .pointer("/metadata/seed")
            .and_then(Value::as_u64);
        let task = TaskId::parse(view.task);
        let (Some(seed), Some(task)) = (seed, task) else {
            return Findings {
                error: Some("the observation names no task or seed".into()),
                ..Default::default()
            };
        };
        let findings = findings_for(task, seed, &self.config)
            .into_iter()
            .filter_map(|f| serde_json::to_value(f).ok())
            .collect();
        Findings {
            findings,
            ..Default::default()
        }
    }
    fn review(
        &mut self,
        _period: u32,
        _submitted: &[Value],
        _instructions: &[Instruction],
    ) -> Findings {
        Findings::default()
    }
}
