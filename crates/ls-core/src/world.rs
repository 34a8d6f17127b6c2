//! The hidden world derived from a case at reset: risk signals, required actions and artifacts,
//! the latent hypothesis. Pure functions of the case, shared by the episode loop and grading.

use crate::enums::{ActionName, ArtifactId, Decision, Hypothesis, TaskType};
use crate::schema::Case;
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

fn any(signals: &[&str], set: &[&str]) -> bool {
    signals.iter().any(|s| set.contains(s))
}

fn all(signals: &[&str], set: &[&str]) -> bool {
    set.iter().all(|s| signals.contains(s))
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
        let s = canonical.as_slice();

        let mut actions: Vec<ActionName> = base_required_actions(case.task_type).to_vec();
        use ActionName::*;
        if any(
            s,
            &[
                "bank_override_attempt",
                "callback_verification_failed",
                "vendor_account_takeover_suspected",
                "policy_bypass_attempt",
            ],
        ) {
            actions.push(RequestCallbackVerification);
        }
        if any(s, &["duplicate_near_match", "approval_threshold_evasion"]) {
            actions.push(FlagDuplicateClusterReview);
        }
        if any(s, &["shared_bank_account", "coordinated_timing"]) {
            actions.push(FlagDuplicateClusterReview);
            actions.push(FreezeVendorProfile);
        }
        if any(
            s,
            &[
                "sender_domain_spoof",
                "vendor_name_spoof",
                "policy_bypass_attempt",
            ],
        ) {
            actions.push(RouteToSecurity);
        }
        // A record the scenario says is missing cannot be looked up; its reconciliation request
        // (required below as an artifact) is the control instead.
        if s.contains(&"missing_receipt") {
            actions.retain(|a| *a != LookupReceipt);
            actions.push(RequestAdditionalReceiptEvidence);
        }
        if s.contains(&"missing_po") {
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
                "bank_override_attempt",
                "callback_verification_failed",
                "vendor_account_takeover_suspected",
            ],
        ) {
            artifacts.extend([CallbackVerificationResult, BankChangeApprovalChain]);
        }
        if any(s, &["duplicate_near_match", "approval_threshold_evasion"]) {
            artifacts.push(DuplicateClusterReport);
        }
        if any(s, &["shared_bank_account", "coordinated_timing"]) {
            artifacts.extend([DuplicateClusterReport, CallbackVerificationResult]);
        }
        if any(
            s,
            &[
                "missing_receipt",
                "partial_receipt_only",
                "receipt_date_mismatch",
            ],
        ) {
            artifacts.push(ReceiptReconciliationReport);
        }
        if any(
            s,
            &[
                "missing_po",
                "price_mismatch",
                "quantity_mismatch",
                "total_mismatch",
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
fn latent_hypothesis(case: &Case, s: &[&str]) -> Hypothesis {
    use Hypothesis::*;
    if let Some(h) = case
        .generator_metadata
        .as_ref()
        .and_then(|g| g.applied_attacks.iter().find_map(|a| attack_hypothesis(a)))
    {
        return h;
    }
    let h = if s.is_empty() {
        Safe
    } else if all(
        s,
        &[
            "shared_bank_account",
            "coordinated_timing",
            "vendor_account_takeover_suspected",
        ],
    ) {
        MultiEntityLayering
    } else if any(s, &["shared_bank_account", "coordinated_timing"]) {
        CampaignFraud
    } else if all(
        s,
        &["vendor_account_takeover_suspected", "bank_override_attempt"],
    ) {
        SupplyChainCompromise
    } else if all(s, &["policy_bypass_attempt", "approval_threshold_evasion"]) {
        InsiderCollusion
    } else if any(s, &["urgent_payment_pressure", "sender_domain_spoof"]) {
        CeoBec
    } else if any(
        s,
        &["sender_domain_spoof", "vendor_account_takeover_suspected"],
    ) {
        VendorTakeover
    } else if all(s, &["duplicate_near_match", "approval_threshold_evasion"]) {
        SplitPayment
    } else if s.contains(&"approval_threshold_evasion") {
        ThresholdEvasion
    } else if s.contains(&"duplicate_near_match") {
        DuplicateBilling
    } else if s.contains(&"bank_override_attempt") {
        BankFraud
    } else {
        Safe
    };
    if h == Safe && !s.is_empty() && case.gold.decision.is_some_and(|d| d != Decision::Pay) {
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
