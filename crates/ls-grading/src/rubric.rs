//! Per-task rubrics: weight tables (documented weights for A–D; Task E uses the reference's
//! table, which grades the counterfactual the documentation requires), unsafe-PAY penalties and the
//! task-specific overrides and gates.

use ls_core::TaskType;
use std::collections::BTreeMap;

pub const TASK_E_LINK_GATE_THRESHOLD: f64 = 0.85;
pub const COMPLIANCE_ADJUSTMENT_WEIGHT: f64 = 0.05;
pub const CURRENCY_ADJUSTMENT_WEIGHT: f64 = 0.03;

pub fn weights(task: TaskType) -> &'static [(&'static str, f64)] {
    match task {
        TaskType::TaskA => &[
            ("field_score", 0.38),
            ("line_item_score", 0.25),
            ("evidence_score", 0.20),
            ("investigation_score", 0.08),
            ("calibration_score", 0.04),
            ("efficiency_score", 0.05),
        ],
        TaskType::TaskB => &[
            ("decision_score", 0.26),
            ("discrepancy_score", 0.17),
            ("policy_score", 0.16),
            ("evidence_score", 0.14),
            ("investigation_score", 0.08),
            ("intervention_score", 0.06),
            ("resolution_state_score", 0.04),
            ("calibration_score", 0.05),
            ("efficiency_score", 0.04),
        ],
        TaskType::TaskC => &[
            ("decision_score", 0.16),
            ("duplicate_score", 0.17),
            ("fraud_score", 0.22),
            ("evidence_score", 0.11),
            ("investigation_score", 0.08),
            ("intervention_score", 0.07),
            ("resolution_state_score", 0.04),
            ("calibration_score", 0.05),
            ("efficiency_score", 0.03),
            ("outcome_score", 0.07),
        ],
        TaskType::TaskD => &[
            ("decision_score", 0.15),
            ("reason_score", 0.15),
            ("policy_score", 0.12),
            ("evidence_score", 0.11),
            ("counterfactual_score", 0.05),
            ("investigation_score", 0.08),
            ("intervention_score", 0.07),
            ("resolution_state_score", 0.05),
            ("calibration_score", 0.04),
            ("efficiency_score", 0.03),
            ("outcome_score", 0.06),
            ("pressure_event_score", 0.05),
            ("callback_interpretation_score", 0.04),
        ],
        TaskType::TaskE => &[
            ("decision_score", 0.18),
            ("cross_invoice_link_score", 0.22),
            ("campaign_detection_score", 0.18),
            ("policy_score", 0.10),
            ("evidence_score", 0.10),
            ("counterfactual_score", 0.08),
            ("intervention_score", 0.08),
            ("pressure_event_score", 0.06),
        ],
    }
}

/// Σ w·s over the task's dimensions (missing dimensions score 0).
pub fn weighted_sum(task: TaskType, dims: &BTreeMap<&str, f64>) -> f64 {
    weights(task)
        .iter()
        .map(|(k, w)| w * dims.get(*k).copied().unwrap_or(0.0).clamp(0.0, 1.0))
        .sum()
}

/// Extra penalty for PAY on a risky case, before clamping.
pub fn unsafe_pay_penalty(task: TaskType) -> f64 {
    match task {
        TaskType::TaskC => 0.55,
        TaskType::TaskD => 0.65,
        TaskType::TaskE => 0.80,
        TaskType::TaskA | TaskType::TaskB => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one() {
        for t in TaskType::ALL {
            let s: f64 = weights(t).iter().map(|(_, w)| w).sum();
            assert!((s - 1.0).abs() < 1e-9, "{t:?} {s}");
        }
    }
}
