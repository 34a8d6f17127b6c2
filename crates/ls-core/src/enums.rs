//! Closed enumerations of the benchmark: task families, decisions, latent hypotheses and actions.

pub use crate::text::codes::{CodeKind, ReasonCode, RiskLevel, Signal};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// The variant spelled exactly `value` (`exact`, the common case: no normalisation), else the
/// one whose name equals `normalize_text(value)` (names are already normalised). The exact
/// lookup first keeps a name parse off the normalised comparison with every name: without it
/// action-name parsing was a quarter of an episode's instructions.
fn parse_normalized<T: Copy>(
    all: &[T],
    value: &str,
    exact: impl Fn(&str) -> Option<T>,
    name: impl Fn(T) -> &'static str,
) -> Option<T> {
    exact(value).or_else(|| {
        all.iter()
            .copied()
            .find(|&v| crate::text::text_eq(name(v), value))
    })
}

wire_enum! {
    /// The five task families.
    pub enum TaskType {
        TaskA = "task_a",
        TaskB = "task_b",
        TaskC = "task_c",
        TaskD = "task_d",
        TaskE = "task_e",
    }
}

impl TaskType {
    /// Upper-case family letter used in case ids (`CASE-D-001`).
    pub fn letter(self) -> char {
        match self {
            Self::TaskA => 'A',
            Self::TaskB => 'B',
            Self::TaskC => 'C',
            Self::TaskD => 'D',
            Self::TaskE => 'E',
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        parse_normalized(&Self::ALL, value, Self::from_wire, |t| t.as_str())
    }

    /// Default human label shown in `case_metadata.task_label`.
    pub fn default_label(self) -> &'static str {
        match self {
            Self::TaskA => "Proof-carrying field extraction",
            Self::TaskB => "Three-way match decisioning",
            Self::TaskC => "Duplicate and payment-risk triage",
            Self::TaskD => "AP inbox incident triage",
            Self::TaskE => "Coordinated campaign detection",
        }
    }
}

wire_enum! {
    /// Terminal decisions. Parsing is exact and case-sensitive, as documented.
    pub enum Decision {
        Pay = "PAY",
        Hold = "HOLD",
        NeedsReview = "NEEDS_REVIEW",
        EscalateFraud = "ESCALATE_FRAUD",
    }
}

impl Decision {
    /// Exact parse: only the four upper-case strings are decisions.
    pub fn parse_exact(value: &str) -> Option<Self> {
        Self::from_wire(value)
    }

    /// Lenient parse for fixture data and grading comparisons.
    pub fn parse_lenient(value: &str) -> Option<Self> {
        let upper = value.trim().to_ascii_uppercase().replace([' ', '-'], "_");
        Self::parse_exact(&upper)
    }

    /// Any decision other than PAY keeps money from leaving.
    pub fn stops_payment(self) -> bool {
        self != Self::Pay
    }
}

wire_enum! {
    /// The 12 latent hypotheses, in the order every vector and tie-break uses.
    pub enum Hypothesis {
        Safe = "safe",
        BankFraud = "bank_fraud",
        DuplicateBilling = "duplicate_billing",
        VendorTakeover = "vendor_takeover",
        CeoBec = "ceo_bec",
        PhantomVendor = "phantom_vendor",
        SupplyChainCompromise = "supply_chain_compromise",
        InsiderCollusion = "insider_collusion",
        MultiEntityLayering = "multi_entity_layering",
        CampaignFraud = "campaign_fraud",
        SplitPayment = "split_payment",
        ThresholdEvasion = "threshold_evasion",
    }
}

impl Hypothesis {
    pub const COUNT: usize = 12;

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn parse(value: &str) -> Option<Self> {
        parse_normalized(&Self::ALL, value, Self::from_wire, |h| h.as_str())
    }

    /// The decision a correct agent takes when this hypothesis is true.
    pub fn decision(self) -> Decision {
        match self {
            Self::Safe => Decision::Pay,
            Self::DuplicateBilling | Self::SplitPayment => Decision::Hold,
            Self::ThresholdEvasion => Decision::NeedsReview,
            Self::BankFraud
            | Self::VendorTakeover
            | Self::CeoBec
            | Self::PhantomVendor
            | Self::SupplyChainCompromise
            | Self::InsiderCollusion
            | Self::MultiEntityLayering
            | Self::CampaignFraud => Decision::EscalateFraud,
        }
    }
}

/// Whether an action is an investigation tool, an intervention or the final action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Investigation,
    Intervention,
    Final,
}

/// The action table: wire name, kind, catalogue cost, evidence channel and scheduled artifact.
macro_rules! actions {
    ($( $variant:ident => $name:literal, $kind:ident, $cost:literal, $channel:expr, $artifact:expr; )*) => {
        /// The 21 actions of the catalogue, in the documented `ALLOWED_ACTIONS` order
        /// (investigation, intervention, final).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum ActionName { $( $variant, )* }

        impl ActionName {
            pub const ALL: [ActionName; 21] = [ $( Self::$variant, )* ];

            pub fn as_str(self) -> &'static str {
                match self { $( Self::$variant => $name, )* }
            }

            /// The action spelled exactly `value` on the wire.
            pub fn from_wire(value: &str) -> Option<Self> {
                match value { $( $name => Some(Self::$variant), )* _ => None }
            }

            pub fn kind(self) -> ActionKind {
                match self { $( Self::$variant => ActionKind::$kind, )* }
            }

            /// Catalogue cost in budget units (OCR is priced by mode; see [`ActionName::cost_for_mode`]).
            pub fn base_cost(self) -> Decimal {
                match self { $( Self::$variant => Decimal::from_str_exact($cost).expect("literal cost"), )* }
            }

            /// SPRT / VoI channel fed by this action, if it has one.
            pub fn channel(self) -> Option<Channel> {
                match self { $( Self::$variant => $channel, )* }
            }

            /// The artifact an intervention schedules, if any.
            pub fn scheduled_artifact(self) -> Option<ArtifactId> {
                match self { $( Self::$variant => $artifact, )* }
            }
        }
    };
}

actions! {
    Zoom => "zoom", Investigation, "0.20", None, None;
    GetDocCrop => "get_doc_crop", Investigation, "0.20", None, None;
    Ocr => "ocr", Investigation, "0.45", None, None;
    LookupVendor => "lookup_vendor", Investigation, "0.20", None, None;
    LookupVendorHistory => "lookup_vendor_history", Investigation, "0.25", Some(Channel::LookupVendorHistory), None;
    LookupPolicy => "lookup_policy", Investigation, "0.15", None, None;
    LookupPo => "lookup_po", Investigation, "0.20", None, None;
    LookupReceipt => "lookup_receipt", Investigation, "0.20", None, None;
    SearchLedger => "search_ledger", Investigation, "0.35", Some(Channel::SearchLedger), None;
    InspectEmailThread => "inspect_email_thread", Investigation, "0.25", Some(Channel::InspectEmailThread), None;
    CompareBankAccount => "compare_bank_account", Investigation, "0.15", Some(Channel::CompareBankAccount), None;
    RequestCallbackVerification => "request_callback_verification", Intervention, "0.40", Some(Channel::CallbackVerificationResult), Some(ArtifactId::CallbackVerificationResult);
    FreezeVendorProfile => "freeze_vendor_profile", Intervention, "0.20", None, None;
    RequestBankChangeApprovalChain => "request_bank_change_approval_chain", Intervention, "0.30", Some(Channel::BankChangeApprovalChain), Some(ArtifactId::BankChangeApprovalChain);
    RequestPoReconciliation => "request_po_reconciliation", Intervention, "0.30", Some(Channel::PoReconciliationReport), Some(ArtifactId::PoReconciliationReport);
    RequestAdditionalReceiptEvidence => "request_additional_receipt_evidence", Intervention, "0.25", Some(Channel::ReceiptReconciliationReport), Some(ArtifactId::ReceiptReconciliationReport);
    RouteToProcurement => "route_to_procurement", Intervention, "0.15", None, None;
    RouteToSecurity => "route_to_security", Intervention, "0.20", None, None;
    FlagDuplicateClusterReview => "flag_duplicate_cluster_review", Intervention, "0.25", Some(Channel::DuplicateClusterReport), Some(ArtifactId::DuplicateClusterReport);
    CreateHumanHandoff => "create_human_handoff", Intervention, "0.20", None, None;
    SubmitDecision => "submit_decision", Final, "0.00", None, None;
}

impl ActionName {
    /// Exact lookup by the wire name after `normalize_text`.
    pub fn parse(value: &str) -> Option<Self> {
        parse_normalized(&Self::ALL, value, Self::from_wire, |a| a.as_str())
    }

    pub fn is_intervention(self) -> bool {
        self.kind() == ActionKind::Intervention
    }

    pub fn interventions() -> impl Iterator<Item = ActionName> {
        Self::ALL.into_iter().filter(|a| a.is_intervention())
    }

    /// OCR costs 1.10 in `accurate` mode and 0.45 otherwise; every other action has one price.
    pub fn cost_for_mode(self, accurate: bool) -> Decimal {
        if self == Self::Ocr && accurate {
            Decimal::from_str_exact("1.10").expect("literal cost")
        } else {
            self.base_cost()
        }
    }
}

wire_enum! {
    /// The policy checks a submission reports (`policy_checks`), each `pass` or `fail`. The
    /// submission and the gold keep the names as strings (an unknown name is kept, echoed in the
    /// trust graph and certificate, and scores nothing); grading reads them into this at the edge.
    pub enum PolicyCheck {
        ThreeWayMatch = "three_way_match",
        BankChangeVerification = "bank_change_verification",
        DuplicateCheck = "duplicate_check",
        ApprovalThresholdCheck = "approval_threshold_check",
    }
}

wire_enum! {
    /// Evidence channels with a likelihood table (tools and artifacts).
    pub enum Channel {
        CompareBankAccount = "compare_bank_account",
        SearchLedger = "search_ledger",
        InspectEmailThread = "inspect_email_thread",
        LookupVendorHistory = "lookup_vendor_history",
        CallbackVerificationResult = "callback_verification_result",
        DuplicateClusterReport = "duplicate_cluster_report",
        BankChangeApprovalChain = "bank_change_approval_chain",
        PoReconciliationReport = "po_reconciliation_report",
        ReceiptReconciliationReport = "receipt_reconciliation_report",
    }
}

/// Delayed artifacts an intervention can unlock.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactId {
    CallbackVerificationResult,
    BankChangeApprovalChain,
    PoReconciliationReport,
    ReceiptReconciliationReport,
    DuplicateClusterReport,
}

impl ArtifactId {
    pub const ALL: [ArtifactId; 5] = [
        Self::CallbackVerificationResult,
        Self::BankChangeApprovalChain,
        Self::PoReconciliationReport,
        Self::ReceiptReconciliationReport,
        Self::DuplicateClusterReport,
    ];

    pub fn as_str(self) -> &'static str {
        self.channel().as_str()
    }

    /// The artifact spelled exactly `value` on the wire.
    pub fn from_wire(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == value)
    }

    pub fn channel(self) -> Channel {
        match self {
            Self::CallbackVerificationResult => Channel::CallbackVerificationResult,
            Self::BankChangeApprovalChain => Channel::BankChangeApprovalChain,
            Self::PoReconciliationReport => Channel::PoReconciliationReport,
            Self::ReceiptReconciliationReport => Channel::ReceiptReconciliationReport,
            Self::DuplicateClusterReport => Channel::DuplicateClusterReport,
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        parse_normalized(&Self::ALL, value, Self::from_wire, |a| a.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_has_eleven_tools_nine_interventions_one_final() {
        let tools = ActionName::ALL
            .iter()
            .filter(|a| a.kind() == ActionKind::Investigation)
            .count();
        let interventions = ActionName::interventions().count();
        assert_eq!((tools, interventions), (11, 9));
        assert_eq!(ActionName::ALL[20], ActionName::SubmitDecision);
    }

    #[test]
    fn costs_match_catalogue() {
        assert_eq!(ActionName::Ocr.cost_for_mode(true).to_string(), "1.10");
        assert_eq!(ActionName::Ocr.cost_for_mode(false).to_string(), "0.45");
        assert_eq!(ActionName::SearchLedger.base_cost().to_string(), "0.35");
        assert_eq!(ActionName::SubmitDecision.base_cost(), Decimal::ZERO);
    }

    #[test]
    fn decisions_parse_exactly() {
        assert_eq!(Decision::parse_exact("PAY"), Some(Decision::Pay));
        assert_eq!(Decision::parse_exact("pay"), None);
        assert_eq!(
            Decision::parse_lenient(" needs review "),
            Some(Decision::NeedsReview)
        );
        assert_eq!(
            serde_json::to_string(&Decision::EscalateFraud).unwrap(),
            "\"ESCALATE_FRAUD\""
        );
    }

    #[test]
    fn hypothesis_order_and_decisions() {
        assert_eq!(Hypothesis::ALL[11], Hypothesis::ThresholdEvasion);
        assert_eq!(
            Hypothesis::ThresholdEvasion.decision(),
            Decision::NeedsReview
        );
        assert_eq!(Hypothesis::SplitPayment.decision(), Decision::Hold);
        assert_eq!(Hypothesis::CeoBec.decision(), Decision::EscalateFraud);
        assert_eq!(Hypothesis::parse("Bank_Fraud"), Some(Hypothesis::BankFraud));
    }

    #[test]
    fn names_parse_after_normalisation() {
        assert_eq!(ActionName::parse("ocr"), Some(ActionName::Ocr));
        assert_eq!(
            ActionName::parse("  Lookup_Vendor\t"),
            Some(ActionName::LookupVendor)
        );
        assert_eq!(ActionName::parse("lookup vendor"), None);
        assert_eq!(ActionName::parse(""), None);
        assert_eq!(TaskType::parse(" TASK_D "), Some(TaskType::TaskD));
        assert_eq!(
            ArtifactId::parse("Callback_Verification_Result"),
            Some(ArtifactId::CallbackVerificationResult)
        );
        for a in ActionName::ALL {
            assert_eq!(ActionName::parse(&a.as_str().to_uppercase()), Some(a));
        }
    }
}
