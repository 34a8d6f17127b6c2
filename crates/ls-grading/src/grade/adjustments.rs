//! Stage "adjustments": the degenerate-submission penalty, compliance, currency, the causal
//! grade and the institutional adjustment.

use super::{set, union, Adjustments, Breakdown, Intake};
use crate::compliance::ComplianceReport;
use crate::currency::CurrencyReport;
use crate::dimensions::{self as dim, CounterfactualText};
use crate::BreakdownKey as K;
use crate::{causal, compliance, currency, normalized, rubric, GradingInput};
use ls_core::{CallbackResult, PolicyCheck, ReasonCode};
use std::borrow::Cow;
use std::collections::BTreeSet;

pub(super) fn evaluate(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    cf: &CounterfactualText<'_>,
    bd: &mut Breakdown,
) -> Adjustments {
    let gold = &input.case.gold;
    let degenerate = dim::degenerate_penalty(
        intake.task,
        input.submission,
        cf,
        !gold.discrepancies.is_empty(),
    );
    bd.insert(K::degenerate_penalty, degenerate);

    let compliance = compliance_report(input, intake);
    let currency = currency_report(input, intake);
    let compliance_adj = rubric::COMPLIANCE_ADJUSTMENT_WEIGHT * (compliance.score - 1.0);
    let currency_adj = rubric::CURRENCY_ADJUSTMENT_WEIGHT * (currency.score.clamp(0.0, 1.0) - 1.0);
    bd.insert(K::compliance_score, compliance.score);
    bd.insert(K::compliance_penalty, compliance.penalty);
    bd.insert(K::compliance_adjustment, crate::round4(compliance_adj));
    bd.insert(K::currency_score, currency.score);
    bd.insert(K::currency_adjustment, crate::round4(currency_adj));

    let causal = causal_grade(input, intake, cf);
    bd.insert(K::causal_score, causal.overall);
    bd.insert(K::causal_association_score, causal.association_score);
    bd.insert(K::causal_intervention_score, causal.intervention_score);
    bd.insert(K::d_separation_score, causal.d_separation_score);
    bd.insert(K::causal_counterfactual_score, causal.counterfactual_score);
    bd.insert(K::causal_adjustment, causal.adjustment);

    let institutional = input
        .institutional_loss_score
        .filter(|v| v.is_finite())
        .map_or(0.0, |l| 0.02 * (l.clamp(0.0, 1.0) - 0.5));
    bd.insert(K::institutional_adjustment, crate::round4(institutional));
    Adjustments {
        degenerate,
        compliance,
        compliance_adj,
        currency,
        currency_adj,
        causal,
        institutional,
    }
}

/// Compliance with the policies the case's signals and failed gold checks call for.
fn compliance_report(input: &GradingInput<'_>, intake: &Intake<'_>) -> ComplianceReport {
    let case = input.case;
    let gold = &case.gold;
    // The gold's check names, normalised, read into `PolicyCheck` where they spell one.
    let named: Vec<(Cow<'_, str>, bool)> = (gold.policy_checks.iter())
        .map(|(k, v)| (normalized(k), normalized(v) == "fail"))
        .collect();
    let parsed = || {
        named
            .iter()
            .filter_map(|(k, f)| Some((PolicyCheck::from_wire(k)?, *f)))
    };
    let gold_checks: BTreeSet<PolicyCheck> = parsed().map(|(c, _)| c).collect();
    let failed_checks: BTreeSet<PolicyCheck> =
        parsed().filter(|(_, f)| *f).map(|(c, _)| c).collect();
    let unknown_failed = (named.iter())
        .filter(|(k, f)| *f && PolicyCheck::from_wire(k).is_none())
        .map(|(k, _)| &**k);
    // An unknown failed check's name counts only where it spells a code.
    let comp_signals: BTreeSet<ReasonCode> = (intake.codes.gold_signals.iter().copied())
        .chain(unknown_failed.filter_map(ReasonCode::from_wire))
        .collect();
    let instruction = input
        .instruction_normalized
        .map_or_else(|| normalized(&case.instruction), Cow::Borrowed);
    compliance::evaluate(&compliance::ComplianceInput {
        task: intake.task,
        decision: intake.decision,
        risky: intake.risky,
        unsafe_if_pay: gold.unsafe_if_pay,
        signals: &comp_signals,
        gold_checks: &gold_checks,
        failed_checks: &failed_checks,
        instruction: &instruction,
        actions: &intake.successful,
        revealed_artifacts: &intake.revealed_ids,
        step_count: input.trajectory.len(),
    })
}

/// Currency and bank-account validation against the invoice, PO and vendor master data.
fn currency_report(input: &GradingInput<'_>, intake: &Intake<'_>) -> CurrencyReport {
    let case = input.case;
    let gold = &case.gold;
    let sub = input.submission;
    let first = intake.invoices.first();
    let vendor_key = gold
        .vendor_key
        .as_deref()
        .or(case.vendor_key.as_deref())
        .or(first.map(|f| f.vendor_display.as_str()))
        .unwrap_or_default();
    let vendor = input.world.vendor(vendor_key);
    let po_currency = first
        .and_then(|f| f.po_id.as_deref())
        .and_then(|p| input.world.po(p))
        .map(|p| p.currency.as_str());
    let field_text = |k: &str| sub.extracted_fields.get(k).map(|v| v.text().into_owned());
    currency::evaluate(&currency::CurrencyInput {
        task_a: intake.task == ls_core::TaskType::TaskA,
        gold_currency: gold.fields.get("currency").map(String::as_str),
        gold_bank_account: gold.fields.get("bank_account").map(String::as_str),
        submitted_currency: field_text("currency"),
        submitted_bank_account: field_text("bank_account"),
        invoice_currency: first.and_then(|f| f.currency.as_deref()),
        po_currency,
        vendor_currency: vendor.map(|v| v.currency.as_str()),
        invoice_total: first.and_then(|f| f.total),
    })
}

/// The causal grade of the agent's codes, actions and counterfactual.
fn causal_grade(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    cf: &CounterfactualText<'_>,
) -> causal::CausalReport {
    let c = &intake.codes;
    let code_f1 = dim::set_f1(
        &union(&[
            &set(&c.sub_reasons),
            &set(&c.sub_fraud),
            &set(&c.sub_campaign),
        ]),
        &union(&[&c.gold_reasons, &c.gold_fraud, &c.gold_campaign]),
    );
    let has_email = input
        .case
        .documents
        .iter()
        .any(|d| d.doc_type == "email" || d.thread_data.is_some());
    causal::grade(&causal::CausalInput {
        hypothesis: input.hidden.latent_hypothesis,
        signals: &c.gold_signals,
        callback_suspicious: intake
            .callback_signal
            .as_deref()
            .and_then(CallbackResult::from_signal)
            .is_some_and(CallbackResult::suspicious),
        has_email,
        successful: &intake.successful,
        decision_correct: intake.decision_correct,
        code_f1,
        counterfactual: cf,
    })
}
