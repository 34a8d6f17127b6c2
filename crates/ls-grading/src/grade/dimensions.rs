//! Stage "dimensions": the rubric's dimension scores (shared and per task) and the proper
//! scoring of the submitted probabilities.

use super::{set, union, Breakdown, Claims, Conduct, Dimensions, Intake, LinkCounts};
use crate::dimensions::{self as dim, CounterfactualText};
use crate::BreakdownKey as K;
use crate::{proper, GradingInput};
use ls_core::{CallbackResult, Decision, TaskType};
use rust_decimal::Decimal;
use std::collections::BTreeMap;

fn b(x: bool) -> f64 {
    f64::from(u8::from(x))
}

/// A submitted list, absent read as empty.
fn list_or_empty(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

pub(super) fn score(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    conduct: &Conduct<'_>,
    claims: &Claims,
    cf: &CounterfactualText<'_>,
    bd: &mut Breakdown,
) -> Dimensions {
    let sub = input.submission;
    let gold = &input.case.gold;
    let outcome = &conduct.outcome;
    let mut dims: BTreeMap<&'static str, f64> = BTreeMap::new();
    dims.insert("decision_score", b(intake.decision_correct));
    dims.insert("evidence_score", claims.evidence.score);
    dims.insert("investigation_score", conduct.investigation);
    dims.insert("intervention_score", conduct.intervention);
    dims.insert("efficiency_score", conduct.efficiency);
    dims.insert("resolution_state_score", conduct.resolution_state);
    dims.insert("outcome_score", outcome.graded.score);
    dims.insert(
        "policy_score",
        dim::policy_score(&sub.policy_checks, &gold.policy_checks),
    );
    let pressure = dim::pressure_score(outcome.pressure_raw, outcome.pressure_injected);
    dims.insert("pressure_event_score", pressure);
    let links = task_dimensions(input, intake, cf, &mut dims, bd);

    // Proper scoring.
    let named = ls_core::world::hypothesis_from_codes(&intake.codes.agent, intake.decision);
    let probs = proper::resolve(
        sub.predicted_probabilities.as_ref(),
        intake.decision,
        sub.confidence,
        &input.sprt_posterior,
        Some(named),
    );
    let ps = proper::score(&probs.vector, input.hidden.latent_hypothesis);
    dims.insert("calibration_score", ps.composite);
    bd.insert(K::proper_score, ps.composite);
    bd.insert(K::brier_score, ps.brier_score);
    bd.insert(K::log_score, ps.log_score);
    bd.insert(K::penalized_brier_score, ps.penalized_brier_score);
    bd.insert(K::overconfidence_gap, ps.overconfidence_gap);
    bd.count(K::probability_unknown_key_count, probs.unknown_keys.len());
    Dimensions {
        scores: dims,
        links,
        probabilities: probs,
        proper: ps,
    }
}

/// The task's own dimensions; Task E's link counts.
fn task_dimensions(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    cf: &CounterfactualText<'_>,
    dims: &mut BTreeMap<&'static str, f64>,
    bd: &mut Breakdown,
) -> Option<LinkCounts> {
    let sub = input.submission;
    let gold = &input.case.gold;
    let c = &intake.codes;
    match intake.task {
        TaskType::TaskA => {
            dims.insert(
                "field_score",
                dim::field_score(&sub.extracted_fields, &gold.fields),
            );
            dims.insert(
                "line_item_score",
                dim::line_item_score(&sub.line_items, &gold.line_items),
            );
        }
        TaskType::TaskB => {
            dims.insert(
                "discrepancy_score",
                dim::set_f1(&set(&c.sub_discrepancies), &c.gold_discrepancies),
            );
        }
        TaskType::TaskC => {
            dims.insert(
                "fraud_score",
                dim::fraud_score(&set(&c.sub_fraud), &c.gold_fraud),
            );
            dims.insert(
                "duplicate_score",
                dim::list_f1(list_or_empty(&sub.duplicate_links), &gold.duplicate_links),
            );
        }
        TaskType::TaskD => {
            dims.insert(
                "reason_score",
                dim::set_f1(
                    &set(&c.sub_reasons),
                    &union(&[&c.gold_reasons, &c.gold_fraud]),
                ),
            );
            dims.insert("counterfactual_score", dim::counterfactual_score_of(cf));
            dims.insert(
                "callback_interpretation_score",
                callback_interpretation(
                    intake.callback_signal.as_deref(),
                    intake.risky,
                    intake.decision,
                ),
            );
        }
        TaskType::TaskE => return Some(task_e_dimensions(input, intake, cf, dims, bd)),
    }
    None
}

/// Task E: cross-invoice links, campaign detection and the counterfactual's document and amount
/// references.
fn task_e_dimensions(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    cf: &CounterfactualText<'_>,
    dims: &mut BTreeMap<&'static str, f64>,
    bd: &mut Breakdown,
) -> LinkCounts {
    let sub = input.submission;
    let gold = &input.case.gold;
    // The batch's links are the invoices of one scheme (`cross_invoice_links`) where the gold
    // links invoices; where it links none, they are the ledger ids of the earlier payments the
    // batch repeats (`duplicate_links`, which the instruction asks for too). Either list stands
    // in for the other when the agent left it empty.
    let non_empty = |v: &Option<Vec<String>>| v.as_ref().is_some_and(|v| !v.is_empty());
    let (gold_links, preferred, other) = if gold.cross_invoice_links.is_empty() {
        (
            &gold.duplicate_links,
            &sub.duplicate_links,
            &sub.cross_invoice_links,
        )
    } else {
        (
            &gold.cross_invoice_links,
            &sub.cross_invoice_links,
            &sub.duplicate_links,
        )
    };
    let pred_links = if non_empty(preferred) {
        list_or_empty(preferred)
    } else {
        list_or_empty(other)
    };
    let (ls, matched, gl, pl) = dim::link_score(pred_links, gold_links);
    dims.insert("cross_invoice_link_score", ls);
    bd.count(K::cross_invoice_link_matches, matched);
    bd.count(K::cross_invoice_gold_links, gl);
    bd.count(K::cross_invoice_pred_links, pl);
    dims.insert(
        "campaign_detection_score",
        dim::set_f1(
            &set(&intake.codes.sub_campaign),
            &intake.codes.gold_campaign,
        ),
    );
    let totals: BTreeMap<String, Decimal> = intake
        .invoices
        .iter()
        .filter_map(|f| f.total.map(|t| (dim::norm_link(&f.doc_id), t)))
        .collect();
    let (cs, docs, amounts, req) = dim::task_e_counterfactual(cf, gold_links, &totals);
    dims.insert("counterfactual_score", cs);
    bd.count(K::counterfactual_doc_refs, docs);
    bd.count(K::counterfactual_amount_refs, amounts);
    bd.count(K::counterfactual_required_links, req);
    LinkCounts {
        matched,
        gold: gl,
        doc_refs: docs,
    }
}

/// Agreement between the callback result and the decision.
fn callback_interpretation(signal: Option<&str>, risky: bool, decision: Option<Decision>) -> f64 {
    let Some(sig) = signal else {
        return if risky { 0.0 } else { 1.0 };
    };
    let Some(result) = CallbackResult::from_signal(sig) else {
        return 0.5;
    };
    let d = decision;
    match result {
        CallbackResult::DisputesChange | CallbackResult::AdversarialConfirm => match d {
            Some(Decision::EscalateFraud) => 1.0,
            Some(Decision::Hold | Decision::NeedsReview) => 0.6,
            Some(Decision::Pay) | None => 0.0,
        },
        CallbackResult::ConfirmsLegitimate => match d {
            Some(Decision::Pay) => 1.0,
            // A clean callback does not clear other signals; holding is still defensible.
            Some(Decision::Hold | Decision::NeedsReview | Decision::EscalateFraud) => 0.8,
            None => 0.0,
        },
        CallbackResult::NoAnswer if d.is_some_and(Decision::stops_payment) => 1.0,
        CallbackResult::NoAnswer => 0.3,
    }
}
