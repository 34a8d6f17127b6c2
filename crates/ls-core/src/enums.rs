//! Closed enumerations of the benchmark: task families, decisions, latent hypotheses and actions.

pub use crate::text::codes::{
    CodeKind, HistoryFlag, ObservedSignal, ReasonCode, RiskLevel, Signal,
};
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

/// The statechart phase an action belongs to (`ls_grading::boundary`): a state's phase follows
/// from the actions taken so far, and an action can move it on. The two investigation phases
/// refine [`ActionKind::Investigation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionPhase {
    /// Reading the case's own documents (`document_review`).
    DocumentReview,
    /// Checking them against master data, ledgers, policies and threads (`corroboration`).
    Corroboration,
    /// Acting on the case: callbacks, freezes, routings (`intervention`).
    Intervention,
    /// The final action (`terminal`).
    Submission,
}

impl ActionPhase {
    /// The kind of action of this phase.
    pub const fn kind(self) -> ActionKind {
        match self {
            Self::DocumentReview | Self::Corroboration => ActionKind::Investigation,
            Self::Intervention => ActionKind::Intervention,
            Self::Submission => ActionKind::Final,
        }
    }
}

/// The three audits the watchdog's strategy mixes (`ls_env::watchdog`); an action may focus one
/// of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchdogAudit {
    /// `audit_payment` (the bank-change focus).
    Payment,
    /// `audit_identity`.
    Identity,
    /// `audit_duplicate`.
    Duplicate,
}

wire_enum! {
    /// The actions of the catalogue, in the documented `ALLOWED_ACTIONS` order (investigation,
    /// intervention, final). What each one is and does is its row in the action table
    /// ([`ActionName::spec`]).
    pub enum ActionName {
        Zoom = "zoom",
        GetDocCrop = "get_doc_crop",
        Ocr = "ocr",
        LookupVendor = "lookup_vendor",
        LookupVendorHistory = "lookup_vendor_history",
        LookupPolicy = "lookup_policy",
        LookupPo = "lookup_po",
        LookupReceipt = "lookup_receipt",
        SearchLedger = "search_ledger",
        InspectEmailThread = "inspect_email_thread",
        CompareBankAccount = "compare_bank_account",
        RequestCallbackVerification = "request_callback_verification",
        FreezeVendorProfile = "freeze_vendor_profile",
        RequestBankChangeApprovalChain = "request_bank_change_approval_chain",
        RequestPoReconciliation = "request_po_reconciliation",
        RequestAdditionalReceiptEvidence = "request_additional_receipt_evidence",
        RouteToProcurement = "route_to_procurement",
        RouteToSecurity = "route_to_security",
        FlagDuplicateClusterReview = "flag_duplicate_cluster_review",
        CreateHumanHandoff = "create_human_handoff",
        SubmitDecision = "submit_decision",
    }
}

wire_enum! {
    /// The control boundary's statechart phases (`ls_grading::boundary`), in the order an
    /// investigation moves through them.
    pub enum BoundaryPhase {
        Intake = "intake",
        DocumentReview = "document_review",
        Corroboration = "corroboration",
        DecisionReady = "decision_ready",
        Intervention = "intervention",
        Terminal = "terminal",
    }
}

wire_enum! {
    /// What the control boundary warns about a proposed action (`ls_grading::boundary`).
    pub enum BoundaryWarning {
        /// The action is not in the phase's action set.
        UnusualForPhase = "action_unusual_for_statechart_phase",
        /// A third or later call of a tool other than a document review.
        RepeatedMarginalValue = "repeated_action_marginal_value",
    }
}

wire_enum! {
    /// The benchmark tracks an episode can be graded on. What each one is and does is its row in
    /// the track table ([`BenchmarkTrack::spec`]).
    pub enum BenchmarkTrack {
        Case = "case",
        Portfolio = "portfolio",
        Adversarial = "adversarial",
        Controlbench = "controlbench",
        CertificateRequired = "certificate_required",
        GeneratedHoldout = "generated_holdout",
        SleeperVigilance = "sleeper_vigilance",
        BlindControl = "blind_control",
        HumanBaseline = "human_baseline",
    }
}

/// One row of the track table. Every column is named and none has a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackSpec {
    pub track: BenchmarkTrack,
    /// The display label (as the reference's benchmark contract names it).
    pub label: &'static str,
    /// One line on what the track evaluates.
    pub description: &'static str,
    /// Other spellings a reset may name it by (compared after `normalize_text`).
    pub aliases: &'static [&'static str],
    /// Does the institution govern the episode (memory, calibration-gated authority, the loss
    /// ledger and callback capacity)? On every other track a case's grade is a function of the
    /// case and the episode's own trajectory (decision 9).
    pub institution_governs: bool,
}

/// The track table, one row per track in [`BenchmarkTrack`] order (checked at compile time).
const TRACKS: [TrackSpec; BenchmarkTrack::ALL.len()] = [
    TrackSpec {
        track: BenchmarkTrack::Case,
        label: "Case Track",
        description: "One case graded on its own trajectory.",
        aliases: &[],
        institution_governs: false,
    },
    TrackSpec {
        track: BenchmarkTrack::Portfolio,
        label: "Portfolio Track",
        description: "Linked invoices and AP-week consequences: institutional memory governs the episode.",
        aliases: &["portfolio_track"],
        institution_governs: true,
    },
    TrackSpec {
        track: BenchmarkTrack::Adversarial,
        label: "Adversarial Data Track",
        description: "Adversarial payment cases: spoofed senders, bank overrides, pressure and injected instructions.",
        aliases: &["adversarial_track", "adversarial_data_track", "adversarial_data"],
        institution_governs: false,
    },
    TrackSpec {
        track: BenchmarkTrack::Controlbench,
        label: "ControlBench Track",
        description: "A long institutional sequence graded on loss, calibration-gated authority and deployability.",
        aliases: &["controlbench_track", "institutional_control"],
        institution_governs: true,
    },
    TrackSpec {
        track: BenchmarkTrack::CertificateRequired,
        label: "Certificate-Required Track",
        description: "The decision must carry an agent-authored decision certificate.",
        aliases: &["certificate_required_track", "proof_required"],
        institution_governs: false,
    },
    TrackSpec {
        track: BenchmarkTrack::GeneratedHoldout,
        label: "Generated-Holdout Track",
        description: "Seeded generated variants not seen in the public cases.",
        aliases: &["generated_holdout_track", "holdout_track", "holdout"],
        institution_governs: false,
    },
    TrackSpec {
        track: BenchmarkTrack::SleeperVigilance,
        label: "Sleeper-Vigilance Track",
        description: "Vendors that build trust before an attack.",
        aliases: &["sleeper_vigilance_track"],
        institution_governs: true,
    },
    TrackSpec {
        track: BenchmarkTrack::BlindControl,
        label: "Blind-Control Track",
        description: "No instrumented state (SPRT, VoI, reward machine) is exposed.",
        aliases: &["blind_control_track", "blind"],
        institution_governs: false,
    },
    TrackSpec {
        track: BenchmarkTrack::HumanBaseline,
        label: "Human-Baseline Track",
        description: "Cases with a recorded human baseline for comparison.",
        aliases: &["human_baseline_track", "human"],
        institution_governs: false,
    },
];

rows_in_enum_order!(
    TRACKS.track,
    "TRACKS lists its rows in BenchmarkTrack order"
);

impl BenchmarkTrack {
    /// This track's row of the track table.
    pub const fn spec(self) -> &'static TrackSpec {
        &TRACKS[self as usize]
    }

    /// The track a reset names, by its wire name or an alias after `normalize_text`; anything
    /// else is the case track.
    pub fn normalize(value: &str) -> Self {
        let norm = crate::text::normalize_text(value);
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == norm || t.spec().aliases.contains(&norm.as_str()))
            .unwrap_or(Self::Case)
    }

    pub const fn label(self) -> &'static str {
        self.spec().label
    }

    pub const fn description(self) -> &'static str {
        self.spec().description
    }

    pub const fn institution_governs(self) -> bool {
        self.spec().institution_governs
    }
}

/// One row of the action table: everything the catalogue declares about an action. Every column
/// is named and none has a default, so a new action states each of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ActionSpec {
    pub action: ActionName,
    /// Its statechart phase (and so its kind).
    pub phase: ActionPhase,
    /// Catalogue cost in budget units (OCR's accurate mode is priced apart:
    /// [`ActionName::cost_for_mode`]).
    pub cost: Decimal,
    /// The SPRT / VoI evidence channel it feeds, if any.
    pub channel: Option<Channel>,
    /// The artifact it schedules, if any (an intervention's delayed report).
    pub artifact: Option<ArtifactId>,
    /// A cross-check against master data (vendor record, history, bank comparison, ledger): a
    /// decision on observed signals waits for all of them (`ls_grading::boundary`).
    pub master_data_check: bool,
    /// How much the watchdog's suspicion moves when the analyst takes it (before the signals it
    /// reveals): investigation raises it a little, interventions lower it.
    pub watchdog_suspicion: f64,
    /// The watchdog audit whose focus weight this action engages, if any.
    pub watchdog_focus: Option<WatchdogAudit>,
}

/// `n` hundredths, with two decimal places (`cents(45)` is `0.45`).
const fn cents(n: u32) -> Decimal {
    Decimal::from_parts(n, 0, 0, false, 2)
}

/// The action table, one row per action in [`ActionName`] order (its length is the number of
/// actions, and a compile-time check below keeps rows and variants in step).
const ACTIONS: [ActionSpec; ActionName::ALL.len()] = [
    ActionSpec {
        action: ActionName::Zoom,
        phase: ActionPhase::DocumentReview,
        cost: cents(20),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: 0.02,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::GetDocCrop,
        phase: ActionPhase::DocumentReview,
        cost: cents(20),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: 0.02,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::Ocr,
        phase: ActionPhase::DocumentReview,
        cost: cents(45),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: 0.02,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::LookupVendor,
        phase: ActionPhase::Corroboration,
        cost: cents(20),
        channel: None,
        artifact: None,
        master_data_check: true,
        watchdog_suspicion: 0.02,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::LookupVendorHistory,
        phase: ActionPhase::Corroboration,
        cost: cents(25),
        channel: Some(Channel::LookupVendorHistory),
        artifact: None,
        master_data_check: true,
        watchdog_suspicion: 0.02,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::LookupPolicy,
        phase: ActionPhase::Corroboration,
        cost: cents(15),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: 0.02,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::LookupPo,
        phase: ActionPhase::Corroboration,
        cost: cents(20),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: 0.02,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::LookupReceipt,
        phase: ActionPhase::Corroboration,
        cost: cents(20),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: 0.02,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::SearchLedger,
        phase: ActionPhase::Corroboration,
        cost: cents(35),
        channel: Some(Channel::SearchLedger),
        artifact: None,
        master_data_check: true,
        watchdog_suspicion: 0.02,
        watchdog_focus: Some(WatchdogAudit::Duplicate),
    },
    ActionSpec {
        action: ActionName::InspectEmailThread,
        phase: ActionPhase::Corroboration,
        cost: cents(25),
        channel: Some(Channel::InspectEmailThread),
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: 0.02,
        watchdog_focus: Some(WatchdogAudit::Identity),
    },
    ActionSpec {
        action: ActionName::CompareBankAccount,
        phase: ActionPhase::Corroboration,
        cost: cents(15),
        channel: Some(Channel::CompareBankAccount),
        artifact: None,
        master_data_check: true,
        watchdog_suspicion: 0.02,
        watchdog_focus: Some(WatchdogAudit::Payment),
    },
    ActionSpec {
        action: ActionName::RequestCallbackVerification,
        phase: ActionPhase::Intervention,
        cost: cents(40),
        channel: Some(Channel::CallbackVerificationResult),
        artifact: Some(ArtifactId::CallbackVerificationResult),
        master_data_check: false,
        watchdog_suspicion: -0.08,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::FreezeVendorProfile,
        phase: ActionPhase::Intervention,
        cost: cents(20),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: -0.06,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::RequestBankChangeApprovalChain,
        phase: ActionPhase::Intervention,
        cost: cents(30),
        channel: Some(Channel::BankChangeApprovalChain),
        artifact: Some(ArtifactId::BankChangeApprovalChain),
        master_data_check: false,
        watchdog_suspicion: -0.06,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::RequestPoReconciliation,
        phase: ActionPhase::Intervention,
        cost: cents(30),
        channel: Some(Channel::PoReconciliationReport),
        artifact: Some(ArtifactId::PoReconciliationReport),
        master_data_check: false,
        watchdog_suspicion: -0.03,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::RequestAdditionalReceiptEvidence,
        phase: ActionPhase::Intervention,
        cost: cents(25),
        channel: Some(Channel::ReceiptReconciliationReport),
        artifact: Some(ArtifactId::ReceiptReconciliationReport),
        master_data_check: false,
        watchdog_suspicion: -0.03,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::RouteToProcurement,
        phase: ActionPhase::Intervention,
        cost: cents(15),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: -0.03,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::RouteToSecurity,
        phase: ActionPhase::Intervention,
        cost: cents(20),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: -0.07,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::FlagDuplicateClusterReview,
        phase: ActionPhase::Intervention,
        cost: cents(25),
        channel: Some(Channel::DuplicateClusterReport),
        artifact: Some(ArtifactId::DuplicateClusterReport),
        master_data_check: false,
        watchdog_suspicion: -0.05,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::CreateHumanHandoff,
        phase: ActionPhase::Intervention,
        cost: cents(20),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: -0.04,
        watchdog_focus: None,
    },
    ActionSpec {
        action: ActionName::SubmitDecision,
        phase: ActionPhase::Submission,
        cost: cents(0),
        channel: None,
        artifact: None,
        master_data_check: false,
        watchdog_suspicion: 0.0,
        watchdog_focus: None,
    },
];

rows_in_enum_order!(ACTIONS.action, "ACTIONS lists its rows in ActionName order");

impl ActionName {
    /// Number of actions in the catalogue.
    pub const COUNT: usize = Self::ALL.len();

    /// Its row of the action table.
    pub const fn spec(self) -> &'static ActionSpec {
        &ACTIONS[self as usize]
    }

    /// Exact lookup by the wire name after `normalize_text`.
    pub fn parse(value: &str) -> Option<Self> {
        parse_normalized(&Self::ALL, value, Self::from_wire, |a| a.as_str())
    }

    pub const fn kind(self) -> ActionKind {
        self.spec().phase.kind()
    }

    pub const fn phase(self) -> ActionPhase {
        self.spec().phase
    }

    /// Catalogue cost in budget units (OCR is priced by mode; see [`ActionName::cost_for_mode`]).
    pub const fn base_cost(self) -> Decimal {
        self.spec().cost
    }

    /// SPRT / VoI channel fed by this action, if it has one.
    pub const fn channel(self) -> Option<Channel> {
        self.spec().channel
    }

    /// The artifact an intervention schedules, if any.
    pub const fn scheduled_artifact(self) -> Option<ArtifactId> {
        self.spec().artifact
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
            cents(110)
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

impl std::fmt::Display for ArtifactId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_track_is_found_by_its_name_and_aliases_and_nothing_else_is_a_track() {
        for t in BenchmarkTrack::ALL {
            assert_eq!(BenchmarkTrack::normalize(t.as_str()), t);
            for a in t.spec().aliases {
                assert_eq!(BenchmarkTrack::normalize(a), t, "{a}");
                assert_eq!(BenchmarkTrack::normalize(&a.to_uppercase()), t, "{a}");
            }
            assert!(!t.description().is_empty());
        }
        assert_eq!(
            BenchmarkTrack::normalize("no such track"),
            BenchmarkTrack::Case
        );
        let governs: Vec<&str> = BenchmarkTrack::ALL
            .into_iter()
            .filter(|t| t.institution_governs())
            .map(BenchmarkTrack::as_str)
            .collect();
        assert_eq!(governs, ["portfolio", "controlbench", "sleeper_vigilance"]);
    }

    /// `ALL` is in the documented order (investigation tools, then interventions, then the one
    /// final action), whatever the catalogue holds; each row is consistent in itself.
    #[test]
    fn catalogue_is_in_documented_order_and_its_rows_agree() {
        let kinds: Vec<ActionKind> = ActionName::ALL.iter().map(|a| a.kind()).collect();
        let rank = |k: &ActionKind| match k {
            ActionKind::Investigation => 0,
            ActionKind::Intervention => 1,
            ActionKind::Final => 2,
        };
        assert!(
            kinds.windows(2).all(|w| rank(&w[0]) <= rank(&w[1])),
            "{kinds:?}"
        );
        assert_eq!(kinds.iter().filter(|k| **k == ActionKind::Final).count(), 1);
        assert_eq!(ActionName::ALL.last(), Some(&ActionName::SubmitDecision));
        for a in ActionName::ALL {
            let s = a.spec();
            assert_eq!(s.action, a);
            assert_eq!(ActionName::from_wire(a.as_str()), Some(a));
            // An artifact is an intervention's, and it is read on its own channel.
            if let Some(art) = s.artifact {
                assert_eq!(a.kind(), ActionKind::Intervention, "{a}");
                assert_eq!(s.channel, Some(art.channel()), "{a}");
            }
            // Master-data checks and watchdog focus are corroboration; interventions calm the
            // watchdog, investigation does not.
            if s.master_data_check || s.watchdog_focus.is_some() {
                assert_eq!(s.phase, ActionPhase::Corroboration, "{a}");
            }
            match a.kind() {
                ActionKind::Investigation => assert!(s.watchdog_suspicion > 0.0, "{a}"),
                ActionKind::Intervention => assert!(s.watchdog_suspicion < 0.0, "{a}"),
                ActionKind::Final => assert_eq!(s.watchdog_suspicion, 0.0),
            }
            assert_eq!(s.cost.scale(), 2, "{a}: costs are written in hundredths");
        }
    }

    #[test]
    fn costs_match_catalogue() {
        assert_eq!(ActionName::Ocr.cost_for_mode(true).to_string(), "1.10");
        assert_eq!(ActionName::Ocr.cost_for_mode(false).to_string(), "0.45");
        assert_eq!(ActionName::SearchLedger.base_cost().to_string(), "0.35");
        assert_eq!(ActionName::SubmitDecision.base_cost(), Decimal::ZERO);
        // The exact decimal text the wire shows (`cents` keeps two places).
        assert_eq!(ActionName::SubmitDecision.base_cost().to_string(), "0.00");
        assert_eq!(
            ActionName::Zoom.base_cost(),
            Decimal::from_str_exact("0.20").unwrap()
        );
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
