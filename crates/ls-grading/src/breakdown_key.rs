//! The score breakdown's names, as a type: every entry the grader writes is one of these, so
//! the breakdown is assembled into a slot per name (no sort, no per-entry name comparisons) and
//! the set of names is one list a reader can check against the reference's clients.
//!
//! Variants are spelled exactly as the names on the wire and listed in name order, so the enum's
//! order is the breakdown's JSON key order (asserted in the tests below).

/// Declares [`BreakdownKey`] from its names, in name order.
macro_rules! breakdown_keys {
    ($($name:ident,)*) => {
        /// One name of the score breakdown (see the module doc).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub enum BreakdownKey {
            $($name,)*
        }

        impl BreakdownKey {
            /// Every name, in name order (`ALL[k as usize] == k`).
            pub const ALL: &'static [BreakdownKey] = &[$(BreakdownKey::$name,)*];

            /// The name on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(BreakdownKey::$name => stringify!($name),)*
                }
            }
        }
    };
}

breakdown_keys! {
    adversarial_falsifier_blocking,
    adversarial_falsifier_cap,
    adversarial_falsifier_finding_count,
    adversarial_falsifier_max_severity,
    adversarial_falsifier_reasons,
    adversarial_falsifier_verdict,
    authority_compliant,
    authority_gate_blocking,
    authority_gate_cap,
    authority_gate_reasons,
    authority_level,
    benign_escalation_cap,
    benign_hold_cap,
    brier_score,
    budget_penalty,
    calibration_score,
    callback_interpretation_score,
    campaign_detection_score,
    causal_adjustment,
    causal_association_score,
    causal_counterfactual_score,
    causal_intervention_score,
    causal_score,
    certificate_adjustment,
    certificate_auto_generated,
    certificate_contradiction_count,
    certificate_gate_cap,
    certificate_gate_reasons,
    certificate_minimality_score,
    certificate_overall_score,
    certificate_present,
    certificate_required,
    certificate_score,
    certificate_stability_score,
    certificate_support_score,
    certificate_supported,
    certificate_unsupported_claim_rate,
    certificate_valid,
    certificate_validity_score,
    checklist_cap,
    claim_precision,
    compliance_adjustment,
    compliance_penalty,
    compliance_score,
    control_boundary_blocking,
    control_boundary_cap,
    control_boundary_clear,
    control_boundary_reasons,
    control_failure_reasons,
    control_satisfied_resolution,
    controls_completed,
    controls_skipped_cap,
    counterfactual_amount_refs,
    counterfactual_doc_refs,
    counterfactual_required_links,
    counterfactual_score,
    cross_invoice_gold_links,
    cross_invoice_link_matches,
    cross_invoice_link_score,
    cross_invoice_pred_links,
    currency_adjustment,
    currency_score,
    d_separation_score,
    decision_correct,
    decision_score,
    degenerate_penalty,
    discrepancy_score,
    duplicate_score,
    efficiency_score,
    empty_evidence_cap,
    essential_evidence_grounded,
    evidence_score,
    explicit_certificate,
    falsifier_clear,
    field_score,
    fraud_score,
    gold_codes_misdirected,
    gold_codes_supported,
    institutional_adjustment,
    institutional_loss_score,
    institutional_utility,
    intervention_score,
    investigation_score,
    justified_exception,
    length_penalty,
    line_item_score,
    log_score,
    missing_required_actions,
    missing_required_artifacts,
    no_investigation_cap,
    outcome_score,
    outcome_type,
    overconfidence_gap,
    overcontrol_penalty,
    pay_citation_penalty,
    penalized_brier_score,
    perfect_clean_override,
    policy_completion_score,
    policy_score,
    pressure_event_score,
    pressure_resistance_raw,
    probability_unknown_key_count,
    proper_score,
    raw_score,
    reason_score,
    repeat_penalty,
    repeated_actions,
    required_action_coverage,
    required_artifact_coverage,
    resolution_state_score,
    result_class,
    result_class_cap,
    supported_code_recall,
    task_e_link_gate,
    trust_graph_cap,
    trust_graph_reasons,
    trust_graph_required_threshold,
    trust_graph_score,
    trust_graph_supported,
    uncalled_interventions,
    unsafe_pay_penalty,
    unsafe_release,
    unsupported_claim_penalty,
    unsupported_decision_cap,
    unverified_pay_cap,
    weighted_score,
}

impl BreakdownKey {
    /// How many names there are.
    pub const COUNT: usize = Self::ALL.len();

    /// The key spelled `name`, if it is one (binary search over the names).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .binary_search_by(|k| k.as_str().cmp(name))
            .ok()
            .map(|i| Self::ALL[i])
    }

    /// This key's slot in a per-name table.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for BreakdownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_in_name_order() {
        assert!(BreakdownKey::ALL
            .windows(2)
            .all(|w| w[0].as_str() < w[1].as_str()));
        for (i, k) in BreakdownKey::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
            assert_eq!(BreakdownKey::from_name(k.as_str()), Some(*k));
        }
        assert_eq!(BreakdownKey::from_name("not_a_breakdown_key"), None);
        assert_eq!(BreakdownKey::from_name(""), None);
    }

    /// Every rubric dimension is a breakdown name (the graded reports of every curated case are
    /// checked name by name in `tests/golden.rs`).
    #[test]
    fn rubric_dimensions_are_listed() {
        use ls_core::TaskType;
        for task in [
            TaskType::TaskA,
            TaskType::TaskB,
            TaskType::TaskC,
            TaskType::TaskD,
            TaskType::TaskE,
        ] {
            for (name, _) in crate::rubric::weights(task) {
                assert!(BreakdownKey::from_name(name).is_some(), "{name}");
            }
        }
    }
}
