//! The hidden world derived from a case at reset: risk signals, required actions and artifacts,
//! the latent hypothesis. Pure functions of the case, shared by the episode loop and grading.

use crate::enums::{ActionName, ArtifactId, Decision, Hypothesis, TaskType};
use crate::schema::Case;
use crate::text::codes::ReasonCode;
use crate::text::risk_bucket;
use serde::Serialize;

/// Hidden facts about a case the agent must discover.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HiddenWorld {
    /// Canonical gold signals plus `unsafe_if_pay` when set; sorted.
    pub hidden_signals: Vec<String>,
    /// `high` / `medium` / `low`.
    pub risk_bucket: &'static str,
    /// Gold `unsafe_if_pay` or a high-risk bucket.
    pub risky: bool,
    pub required_actions: Vec<ActionName>,
    pub required_artifacts: Vec<ArtifactId>,
    pub latent_hypothesis: Hypothesis,
    pub case_seed: u64,
}

fn any(codes: &[ReasonCode], set: &[ReasonCode]) -> bool {
    codes.iter().any(|c| set.contains(c))
}

fn all(codes: &[ReasonCode], set: &[ReasonCode]) -> bool {
    set.iter().all(|c| codes.contains(c))
}

impl HiddenWorld {
    pub fn derive(case: &Case) -> Self {
        let canonical = case.gold.canonical_signals();
        let mut hidden: Vec<String> = canonical.iter().map(|s| (*s).to_owned()).collect();
        if case.gold.unsafe_if_pay {
            hidden.push("unsafe_if_pay".to_owned());
        }
        hidden.sort();
        hidden.dedup();
        let bucket = risk_bucket(hidden.iter().map(String::as_str));
        let risky = case.gold.unsafe_if_pay || bucket == "high";
        let codes: Vec<ReasonCode> = canonical
            .iter()
            .filter_map(|c| ReasonCode::from_wire(c))
            .collect();
        let s = codes.as_slice();

        let mut actions: Vec<ActionName> = base_required_actions(case.task_type).to_vec();
        use ActionName::*;
        if any(
            s,
            &[
                ReasonCode::BankOverrideAttempt,
                ReasonCode::CallbackVerificationFailed,
                ReasonCode::VendorAccountTakeoverSuspected,
                ReasonCode::PolicyBypassAttempt,
            ],
        ) {
            actions.push(RequestCallbackVerification);
        }
        if any(
            s,
            &[
                ReasonCode::DuplicateNearMatch,
                ReasonCode::ApprovalThresholdEvasion,
            ],
        ) {
            actions.push(FlagDuplicateClusterReview);
        }
        if any(
            s,
            &[ReasonCode::SharedBankAccount, ReasonCode::CoordinatedTiming],
        ) {
            actions.push(FlagDuplicateClusterReview);
            actions.push(FreezeVendorProfile);
        }
        if any(
            s,
            &[
                ReasonCode::SenderDomainSpoof,
                ReasonCode::VendorNameSpoof,
                ReasonCode::PolicyBypassAttempt,
            ],
        ) {
            actions.push(RouteToSecurity);
        }
        // A record the scenario says is missing cannot be looked up; its reconciliation request
        // (required below as an artifact) is the control instead.
        if s.contains(&ReasonCode::MissingReceipt) {
            actions.retain(|a| *a != LookupReceipt);
            actions.push(RequestAdditionalReceiptEvidence);
        }
        if s.contains(&ReasonCode::MissingPo) {
            actions.retain(|a| *a != LookupPo);
            actions.push(RequestPoReconciliation);
        }
        if let Some(fg) = case
            .generator_metadata
            .as_ref()
            .and_then(|g| g.fraudgen.as_ref())
        {
            actions.extend(
                fg.required_tools
                    .iter()
                    .chain(&fg.recommended_interventions)
                    .filter_map(|a| ActionName::parse(a)),
            );
        }
        dedup_in_order(&mut actions);

        let mut artifacts = Vec::new();
        use ArtifactId::*;
        if any(
            s,
            &[
                ReasonCode::BankOverrideAttempt,
                ReasonCode::CallbackVerificationFailed,
                ReasonCode::VendorAccountTakeoverSuspected,
            ],
        ) {
            artifacts.extend([CallbackVerificationResult, BankChangeApprovalChain]);
        }
        if any(
            s,
            &[
                ReasonCode::DuplicateNearMatch,
                ReasonCode::ApprovalThresholdEvasion,
            ],
        ) {
            artifacts.push(DuplicateClusterReport);
        }
        if any(
            s,
            &[ReasonCode::SharedBankAccount, ReasonCode::CoordinatedTiming],
        ) {
            artifacts.extend([DuplicateClusterReport, CallbackVerificationResult]);
        }
        if any(
            s,
            &[
                ReasonCode::MissingReceipt,
                ReasonCode::PartialReceiptOnly,
                ReasonCode::ReceiptDateMismatch,
            ],
        ) {
            artifacts.push(ReceiptReconciliationReport);
        }
        if any(
            s,
            &[
                ReasonCode::MissingPo,
                ReasonCode::PriceMismatch,
                ReasonCode::QuantityMismatch,
                ReasonCode::TotalMismatch,
            ],
        ) {
            artifacts.push(PoReconciliationReport);
        }
        if let Some(fg) = case
            .generator_metadata
            .as_ref()
            .and_then(|g| g.fraudgen.as_ref())
        {
            artifacts.extend(
                fg.revealable_artifacts
                    .iter()
                    .filter_map(|a| ArtifactId::parse(a)),
            );
        }
        dedup_in_order(&mut artifacts);

        Self {
            hidden_signals: hidden,
            risk_bucket: bucket,
            risky,
            required_actions: actions,
            required_artifacts: artifacts,
            latent_hypothesis: latent_hypothesis(case, s),
            case_seed: case.case_seed(),
        }
    }
}

/// Base required actions per task family.
pub fn base_required_actions(task: TaskType) -> &'static [ActionName] {
    use ActionName::*;
    match task {
        TaskType::TaskA => &[Ocr, Zoom],
        TaskType::TaskB => &[LookupPolicy, LookupPo, LookupReceipt],
        TaskType::TaskC => &[SearchLedger, CompareBankAccount],
        TaskType::TaskD => &[
            InspectEmailThread,
            LookupVendorHistory,
            LookupPolicy,
            CompareBankAccount,
            SearchLedger,
        ],
        TaskType::TaskE => &[
            InspectEmailThread,
            LookupVendorHistory,
            LookupPolicy,
            CompareBankAccount,
            SearchLedger,
            RequestCallbackVerification,
            FlagDuplicateClusterReview,
            RouteToSecurity,
            FreezeVendorProfile,
        ],
    }
}

/// Attack name → hypothesis (the 16 attacks of the attack library).
pub fn attack_hypothesis(attack: &str) -> Option<Hypothesis> {
    use Hypothesis::*;
    Some(match crate::text::normalize_text(attack).as_str() {
        "bank_override_attack" => BankFraud,
        "vendor_takeover_attack" | "domain_typosquat_attack" => VendorTakeover,
        "ceo_fraud_attack" | "urgency_spoof_attack" => CeoBec,
        "near_duplicate_invoice_attack" | "fake_receipt_attack" | "inflated_line_items_attack" => {
            DuplicateBilling
        }
        "phantom_vendor_attack" => PhantomVendor,
        "approval_threshold_evasion_attack" => ThresholdEvasion,
        "workflow_override_attack" | "insider_collusion_attack" => InsiderCollusion,
        "split_payment_attack" => SplitPayment,
        "coordinated_campaign_attack" => CampaignFraud,
        "supply_chain_compromise_attack" => SupplyChainCompromise,
        "multi_entity_layering_attack" => MultiEntityLayering,
        _ => return None,
    })
}

/// Latent hypothesis: the first mapped applied attack, else the documented signal rules. Unlike the
/// reference, a case whose only signals are invoice discrepancies with a HOLD gold decision gets the
/// HOLD-type hypothesis `duplicate_billing` (billing error) instead of `safe`, so proper scoring and
/// calibration see a non-safe truth for a case that must not be paid.
fn latent_hypothesis(case: &Case, codes: &[ReasonCode]) -> Hypothesis {
    case.generator_metadata
        .as_ref()
        .and_then(|g| g.applied_attacks.iter().find_map(|a| attack_hypothesis(a)))
        .unwrap_or_else(|| hypothesis_from_codes(codes, case.gold.decision))
}

/// The hypothesis canonical codes point to (the first rule that matches), with the decision
/// breaking the tie of codes that match no rule: a case (or a submission) naming codes but no
/// fraud pattern and not paying is duplicate billing. No codes at all is `Safe`.
pub fn hypothesis_from_codes(codes: &[ReasonCode], decision: Option<Decision>) -> Hypothesis {
    use Hypothesis::*;
    use ReasonCode::*;
    let any = |set: &[ReasonCode]| any(codes, set);
    let all = |set: &[ReasonCode]| all(codes, set);
    let h = if codes.is_empty() {
        Safe
    } else if all(&[
        SharedBankAccount,
        CoordinatedTiming,
        VendorAccountTakeoverSuspected,
    ]) {
        MultiEntityLayering
    } else if any(&[SharedBankAccount, CoordinatedTiming]) {
        CampaignFraud
    } else if all(&[VendorAccountTakeoverSuspected, BankOverrideAttempt]) {
        SupplyChainCompromise
    } else if all(&[PolicyBypassAttempt, ApprovalThresholdEvasion]) {
        InsiderCollusion
    } else if any(&[UrgentPaymentPressure, SenderDomainSpoof]) {
        CeoBec
    } else if any(&[VendorAccountTakeoverSuspected]) {
        VendorTakeover
    } else if all(&[DuplicateNearMatch, ApprovalThresholdEvasion]) {
        SplitPayment
    } else if any(&[ApprovalThresholdEvasion]) {
        ThresholdEvasion
    } else if any(&[DuplicateNearMatch]) {
        DuplicateBilling
    } else if any(&[BankOverrideAttempt]) {
        BankFraud
    } else {
        Safe
    };
    if h == Safe && !codes.is_empty() && decision.is_some_and(|d| d != Decision::Pay) {
        return DuplicateBilling;
    }
    h
}

fn dedup_in_order<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    for x in v.iter() {
        if !out.contains(x) {
            out.push(*x);
        }
    }
    *v = out;
}
