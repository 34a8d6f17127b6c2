//! Stage "claims": the evidence map and the reasons stage (gold codes named with grounded
//! evidence, unsupported claims, investigation, interventions the case did not call for).

use super::{set, Breakdown, Claims, Conduct, Intake};
use crate::dimensions as dim;
use crate::BreakdownKey as K;
use crate::{reasons, GradingInput};
use ls_core::{Decision, TaskType};

pub(super) fn evaluate(
    input: &GradingInput<'_>,
    intake: &Intake<'_>,
    conduct: &Conduct<'_>,
    bd: &mut Breakdown,
) -> Claims {
    let case = input.case;
    let gold = &case.gold;
    let hidden = input.hidden;
    let sub = input.submission;
    let (task, decision) = (intake.task, intake.decision);
    let revealed = intake.revealed();
    let named_codes = set(&intake.codes.agent);
    // Reasons: gold codes named with evidence establishing them, unsupported claims,
    // investigation, interventions the case did not call for, what a PAY lacks. The case's fact
    // places come precomputed per case when the caller has them.
    let clean_here: reasons::CleanTargets;
    let clean_targets = match input.clean_targets {
        Some(t) => t,
        None => {
            clean_here = reasons::CleanTargets::of(case);
            &clean_here
        }
    };
    debug_assert!(
        input
            .clean_targets
            .is_none_or(|t| *t == reasons::CleanTargets::of(case)),
        "precomputed clean targets are the case's"
    );
    let evidence = dim::evidence_map_score(
        &sub.evidence_map,
        &gold.evidence_targets,
        task,
        revealed,
        (task != TaskType::TaskA).then_some(&named_codes),
        Some(&clean_targets.places),
    );
    let reasons = reasons::evaluate(&reasons::ReasonsInput {
        task,
        agent_codes: &intake.codes.agent,
        gold_codes: &intake.codes.gold_signals,
        evidence_map: &sub.evidence_map,
        gold_targets: &gold.evidence_targets,
        revealed,
        trajectory: input.trajectory,
        successful: &intake.successful,
        required_actions: &conduct.required_actions,
        required_artifacts: &hidden.required_artifacts,
        fraud_case: intake.expected_decision == Decision::EscalateFraud,
        observed_signals: input.observed_signals,
        decision,
        clean_targets,
    });
    let (overcontrol_penalty, unsupported_claim_penalty) = reasons::penalties(&reasons);
    bd.count(K::gold_codes_supported, reasons.supported_gold);
    bd.count(K::gold_codes_misdirected, reasons.misdirected_gold);
    bd.insert(K::supported_code_recall, reasons.supported_recall());
    bd.insert(K::claim_precision, reasons.precision());
    bd.count(
        K::uncalled_interventions,
        reasons.uncalled_interventions.len(),
    );
    bd.insert(K::overcontrol_penalty, overcontrol_penalty);
    bd.insert(K::unsupported_claim_penalty, unsupported_claim_penalty);
    let pay_citation_penalty = reasons::pay_citation_penalty(&reasons);
    if pay_citation_penalty != 0.0 {
        bd.insert(K::pay_citation_penalty, crate::round4(pay_citation_penalty));
    }
    Claims {
        evidence,
        reasons,
        overcontrol_penalty,
        unsupported_claim_penalty,
        pay_citation_penalty,
    }
}
