//! Typed domain model shared by generators, grading, episodes and campaigns.

use std::collections::BTreeMap;
use std::fmt;

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::util::Date;

/// One expense claim of Task 1 (here, not in `data::expense`, so the world rules can carry one
/// over without the model depending on a generator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpenseClaim {
    pub expense_id: String,
    pub date: Date,
    pub employee: String,
    pub category: String,
    #[serde(with = "crate::util::money")]
    pub amount: Decimal,
    pub description: String,
    pub receipt_id: String,
    pub vendor: String,
}

/// Hard limits (TigerBeetle style: everything bounded, units in names).
pub mod limits {
    pub const MAX_FINDINGS_PER_STEP_DEFAULT: usize = 200;
    pub const MAX_FINDINGS_PER_STEP_CEILING: usize = 500;
    pub const MAX_FINDINGS_PER_EPISODE: usize = 2_000;
    pub const MAX_CAMPAIGNS: usize = 256;
    pub const MAX_BODY_BYTES: usize = 1_048_576;
    pub const MAX_TEXT_CHARS: usize = 500;
    pub const MAX_ID_CHARS: usize = 100;
    pub const MAX_EVIDENCE_REFS: usize = 10;
    pub const MAX_LEADERBOARD_ENTRIES: usize = 100;
    pub const MAX_PERIODS: u32 = 12;
    pub const MAX_SELF_IMPROVE_SEEDS: usize = 32;
    pub const MAX_HISTORY_ENTRIES: usize = 20_000;
}

pub const TRAIN_SEEDS: std::ops::RangeInclusive<u64> = 42..=51;
/// The default held-out evaluation list (the reference's five seeds).
pub const HELD_OUT_SEEDS: std::ops::RangeInclusive<u64> = 100..=104;
/// A reserved range of held-out seeds for evaluations (and red-team tests) that draw fresh
/// seeds: every seed here is held out like 100-104.
pub const HELD_OUT_RANGE: std::ops::RangeInclusive<u64> = 100_000..=109_999;

/// Whether `seed` is held out: in [`HELD_OUT_SEEDS`] or [`HELD_OUT_RANGE`]. Held-out episodes
/// are sealed (`episode::OutcomeFeedback::Sealed`); every other seed is a training seed.
pub fn is_held_out(seed: u64) -> bool {
    HELD_OUT_SEEDS.contains(&seed) || HELD_OUT_RANGE.contains(&seed)
}

macro_rules! tasks {
    ($( $v:ident = $s:literal, )*) => {
        // The audit tasks, in number order (a task's number is its position, 1-4); what each
        // one is is its row of `TASKS`. (A comment, not a doc comment: the served JSON Schema
        // of `TaskId` has no description.)
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
        pub enum TaskId { $( #[serde(rename = $s)] $v, )* }

        impl TaskId {
            pub const ALL: [TaskId; [$(TaskId::$v),*].len()] = [$(TaskId::$v,)*];
            /// The wire id.
            pub fn as_str(self) -> &'static str { match self { $(TaskId::$v => $s,)* } }
        }
    };
}

// The tasks and their wire ids (the serde name, `as_str` and `ALL` come from this one list).
tasks! {
    ExpenseAudit = "expense_audit",
    InvoiceMatch = "invoice_match",
    GstReconciliation = "gst_reconciliation",
    FraudDetection = "fraud_detection",
}

/// One row of the task table: what the catalogue declares about a task, every column named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSpec {
    pub task: TaskId,
    /// The human title.
    pub title: &'static str,
    /// easy / medium / hard / expert.
    pub difficulty: &'static str,
    /// The step budget of an episode.
    pub max_steps: u32,
    /// The documented ground-truth count of a generated instance.
    pub gt_count: usize,
}

/// The task table, one row per task in [`TaskId`] order (checked at compile time below).
pub const TASKS: [TaskSpec; TaskId::ALL.len()] = [
    TaskSpec {
        task: TaskId::ExpenseAudit,
        title: "Expense Policy Violation Detection",
        difficulty: "easy",
        max_steps: 5,
        gt_count: 7,
    },
    TaskSpec {
        task: TaskId::InvoiceMatch,
        title: "Invoice Three-Way Match Audit",
        difficulty: "medium",
        max_steps: 8,
        gt_count: 9,
    },
    TaskSpec {
        task: TaskId::GstReconciliation,
        title: "GST Return Reconciliation",
        difficulty: "hard",
        max_steps: 10,
        gt_count: 12,
    },
    TaskSpec {
        task: TaskId::FraudDetection,
        title: "Fraud Pattern Detection",
        difficulty: "expert",
        max_steps: 12,
        gt_count: 10,
    },
];

const _: () = {
    let mut i = 0;
    while i < TASKS.len() {
        assert!(
            TASKS[i].task as usize == i,
            "TASKS lists its rows in TaskId order"
        );
        i += 1;
    }
};

impl TaskId {
    /// Its row of the task table.
    pub const fn spec(self) -> &'static TaskSpec {
        &TASKS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().title
    }

    pub fn difficulty(self) -> &'static str {
        self.spec().difficulty
    }

    pub fn max_steps(self) -> u32 {
        self.spec().max_steps
    }

    /// The documented ground-truth count per task.
    pub fn gt_count(self) -> usize {
        self.spec().gt_count
    }
}

impl TaskId {
    pub fn number(self) -> u8 {
        self as u8 + 1
    }

    /// Accepts the string ids, the README's integers 1–4 and numeric strings.
    pub fn parse(s: &str) -> Option<TaskId> {
        let t = s.trim().to_ascii_lowercase();
        TaskId::ALL
            .into_iter()
            .find(|k| k.as_str() == t || k.number().to_string() == t)
    }

    /// Base error types (campaign shocks may add more to a live episode).
    pub fn error_types(self) -> &'static [ErrorType] {
        use ErrorType::*;
        match self {
            TaskId::ExpenseAudit => &[
                OverLimit,
                WrongCategory,
                DuplicateClaim,
                WeekendExpense,
                MissingReceipt,
                UnapprovedVendor,
                CumulativeBreach,
            ],
            TaskId::InvoiceMatch => &[
                PriceMismatch,
                QuantityMismatch,
                DuplicateInvoice,
                UnmatchedInvoice,
                TaxError,
                TotalMismatch,
                VendorMismatch,
                DateAnomaly,
                CascadingTotal,
            ],
            TaskId::GstReconciliation => &[
                MissingInGstr2b,
                MissingInBooks,
                AmountMismatch,
                TaxRateMismatch,
                GstinMismatch,
                DateMismatch,
                DuplicateEntry,
                InvalidGstin,
                WrongTaxType,
                ItcIneligible,
                LateClaim,
                ExcessClaim,
            ],
            TaskId::FraudDetection => &[
                CircularInvoicing,
                SplitInvoice,
                ShellCompany,
                RoundNumberAnomaly,
                BenfordViolation,
                VendorConcentration,
                DuplicateBankAccount,
                SuddenVolumeSpike,
                InvoiceBeforeIncorporation,
                WeekendPattern,
            ],
        }
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TaskId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let s = match &v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "task_id must be a string or an integer 1-4, got {other}"
                )))
            }
        };
        TaskId::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown task_id '{s}'; valid: expense_audit, invoice_match, gst_reconciliation, fraud_detection (or 1-4)"
            ))
        })
    }
}

macro_rules! error_types {
    ($( $v:ident = $s:literal, $w:literal, $val:literal, $family:ident; )*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum ErrorType { $( #[serde(rename = $s)] $v, )* }

        impl ErrorType {
            pub const ALL: &'static [ErrorType] = &[$(ErrorType::$v,)*];
            pub fn as_str(self) -> &'static str { match self { $(ErrorType::$v => $s,)* } }
            /// Severity weight (≥ 1.5 is "critical").
            pub fn weight(self) -> f64 { match self { $(ErrorType::$v => $w,)* } }
            /// Documented monetary exposure of one occurrence, in rupees.
            pub fn value_inr(self) -> i64 { match self { $(ErrorType::$v => $val,)* } }
            /// The family this type belongs to (every type is in exactly one family; see
            /// [`ErrorFamily`]).
            pub fn family(self) -> ErrorFamily { match self { $(ErrorType::$v => ErrorFamily::$family,)* } }
            pub fn parse(s: &str) -> Option<ErrorType> {
                let t = s.trim().to_ascii_lowercase();
                match t.as_str() { $($s => Some(ErrorType::$v),)* _ => None }
            }
        }
    };
}

// The error-type table: wire name, severity weight, monetary exposure (INR) and family.
error_types! {
    OverLimit = "over_limit", 0.8, 3000, ExpenseLimit;
    WrongCategory = "wrong_category", 0.9, 15000, ExpenseEligibility;
    DuplicateClaim = "duplicate_claim", 1.2, 5000, ExpenseReceipt;
    WeekendExpense = "weekend_expense", 0.5, 1200, ExpenseTiming;
    MissingReceipt = "missing_receipt", 0.7, 3500, ExpenseReceipt;
    UnapprovedVendor = "unapproved_vendor", 0.8, 2800, ExpenseEligibility;
    CumulativeBreach = "cumulative_breach", 1.3, 50000, ExpenseLimit;
    PriceMismatch = "price_mismatch", 1.3, 25000, InvoiceLineMatch;
    QuantityMismatch = "quantity_mismatch", 1.2, 15000, InvoiceLineMatch;
    DuplicateInvoice = "duplicate_invoice", 1.5, 50000, InvoiceIdentity;
    UnmatchedInvoice = "unmatched_invoice", 1.4, 59000, InvoiceIdentity;
    TaxError = "tax_error", 1.1, 10000, InvoiceArithmetic;
    TotalMismatch = "total_mismatch", 1.0, 7500, InvoiceArithmetic;
    VendorMismatch = "vendor_mismatch", 1.2, 30000, InvoiceIdentity;
    DateAnomaly = "date_anomaly", 0.9, 20000, InvoiceTiming;
    CascadingTotal = "cascading_total", 0.8, 5000, InvoiceArithmetic;
    MissingInGstr2b = "missing_in_gstr2b", 1.4, 4500, GstPresence;
    MissingInBooks = "missing_in_books", 1.3, 3240, GstPresence;
    AmountMismatch = "amount_mismatch", 1.2, 5000, GstTaxAmount;
    TaxRateMismatch = "tax_rate_mismatch", 1.1, 1000, GstTaxAmount;
    GstinMismatch = "gstin_mismatch", 1.5, 25000, GstIdentity;
    DateMismatch = "date_mismatch", 0.9, 15000, GstTiming;
    DuplicateEntry = "duplicate_entry", 1.3, 20000, GstPresence;
    InvalidGstin = "invalid_gstin", 1.5, 14160, GstIdentity;
    WrongTaxType = "wrong_tax_type", 1.2, 18000, GstTaxAmount;
    ItcIneligible = "itc_ineligible", 1.0, 400, GstEligibility;
    LateClaim = "late_claim", 1.1, 2700, GstTiming;
    ExcessClaim = "excess_claim", 1.4, 4000, GstTaxAmount;
    CircularInvoicing = "circular_invoicing", 2.0, 150000, FraudPaymentTrail;
    SplitInvoice = "split_invoice", 1.8, 95000, FraudAmountPattern;
    ShellCompany = "shell_company", 2.0, 200000, FraudVendorIdentity;
    RoundNumberAnomaly = "round_number_anomaly", 1.3, 50000, FraudAmountPattern;
    BenfordViolation = "benford_violation", 1.4, 75000, FraudAmountPattern;
    VendorConcentration = "vendor_concentration", 1.5, 500000, FraudActivityPattern;
    DuplicateBankAccount = "duplicate_bank_account", 1.8, 100000, FraudVendorIdentity;
    SuddenVolumeSpike = "sudden_volume_spike", 1.6, 300000, FraudActivityPattern;
    InvoiceBeforeIncorporation = "invoice_before_incorporation", 1.7, 80000, FraudVendorIdentity;
    WeekendPattern = "weekend_pattern", 1.2, 60000, FraudActivityPattern;
    HighRiskNewVendor = "high_risk_new_vendor", 1.5, 120000, FraudVendorIdentity;
    UndocumentedCashPayment = "undocumented_cash_payment", 1.2, 25000, FraudPaymentTrail;
}

impl ErrorType {
    pub fn is_critical(self) -> bool {
        self.weight() >= 1.5
    }
}

macro_rules! error_families {
    ($(#[$doc:meta])* $( $v:ident = $s:literal, $task:ident; )*) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum ErrorFamily { $( #[serde(rename = $s)] $v, )* }

        impl ErrorFamily {
            pub const ALL: [ErrorFamily; [$(ErrorFamily::$v),*].len()] = [$(ErrorFamily::$v,)*];
            pub fn as_str(self) -> &'static str { match self { $(ErrorFamily::$v => $s,)* } }
            /// The task whose types the family groups.
            pub fn task(self) -> TaskId { match self { $(ErrorFamily::$v => TaskId::$task,)* } }
        }
    };
}

// The family table: wire name and task.
error_families! {
    /// Groups of error types that describe the same kind of problem within one task. Grading uses
    /// them for partial credit: a finding on an erroneous document whose type is wrong but in the
    /// same family as an unfound error there is a *near miss* (the auditor saw the right problem and
    /// named it imprecisely); a type from another family is a plain false positive.
    ///
    /// | task | family | types | what they share |
    /// | --- | --- | --- | --- |
    /// | expense | `expense_limit` | over_limit, cumulative_breach | an amount above a policy limit |
    /// | expense | `expense_receipt` | missing_receipt, duplicate_claim | the receipt evidence |
    /// | expense | `expense_eligibility` | wrong_category, unapproved_vendor | what or whom the company may reimburse |
    /// | expense | `expense_timing` | weekend_expense | when the expense was incurred |
    /// | invoice | `invoice_line_match` | price_mismatch, quantity_mismatch | an invoice line disagrees with its PO / GRN |
    /// | invoice | `invoice_arithmetic` | tax_error, total_mismatch, cascading_total | the invoice's own GST and totals |
    /// | invoice | `invoice_identity` | duplicate_invoice, unmatched_invoice, vendor_mismatch | which invoice / counterparty it is |
    /// | invoice | `invoice_timing` | date_anomaly | the invoice date |
    /// | GST | `gst_presence` | missing_in_gstr2b, missing_in_books, duplicate_entry | whether the invoice is recorded once on each side |
    /// | GST | `gst_tax_amount` | amount_mismatch, tax_rate_mismatch, wrong_tax_type, excess_claim | taxable value and tax computed |
    /// | GST | `gst_identity` | gstin_mismatch, invalid_gstin | the supplier GSTIN |
    /// | GST | `gst_timing` | date_mismatch, late_claim | the invoice date (between returns, or against the ITC window) |
    /// | GST | `gst_eligibility` | itc_ineligible | blocked input-tax-credit categories |
    /// | fraud | `fraud_vendor_identity` | shell_company, duplicate_bank_account, invoice_before_incorporation, high_risk_new_vendor | the vendor's legitimacy (registry data) |
    /// | fraud | `fraud_amount_pattern` | split_invoice, round_number_anomaly, benford_violation | the amounts billed |
    /// | fraud | `fraud_activity_pattern` | vendor_concentration, sudden_volume_spike, weekend_pattern | volume and timing of a vendor's activity |
    /// | fraud | `fraud_payment_trail` | circular_invoicing, undocumented_cash_payment | how money moves and is documented |
    ///
    /// The invoice amount errors are split in two (line match against the PO/GRN versus the
    /// invoice's own arithmetic): the invoice task is dense (8 of 12 invoices carry an error),
    /// and one broad "amounts" family let random document ids collect partial credit too often.
    ExpenseLimit = "expense_limit", ExpenseAudit;
    ExpenseReceipt = "expense_receipt", ExpenseAudit;
    ExpenseEligibility = "expense_eligibility", ExpenseAudit;
    ExpenseTiming = "expense_timing", ExpenseAudit;
    InvoiceLineMatch = "invoice_line_match", InvoiceMatch;
    InvoiceArithmetic = "invoice_arithmetic", InvoiceMatch;
    InvoiceIdentity = "invoice_identity", InvoiceMatch;
    InvoiceTiming = "invoice_timing", InvoiceMatch;
    GstPresence = "gst_presence", GstReconciliation;
    GstTaxAmount = "gst_tax_amount", GstReconciliation;
    GstIdentity = "gst_identity", GstReconciliation;
    GstTiming = "gst_timing", GstReconciliation;
    GstEligibility = "gst_eligibility", GstReconciliation;
    FraudVendorIdentity = "fraud_vendor_identity", FraudDetection;
    FraudAmountPattern = "fraud_amount_pattern", FraudDetection;
    FraudActivityPattern = "fraud_activity_pattern", FraudDetection;
    FraudPaymentTrail = "fraud_payment_trail", FraudDetection;
}

impl ErrorFamily {
    /// Member types, in catalogue order.
    pub fn members(self) -> Vec<ErrorType> {
        ErrorType::ALL
            .iter()
            .copied()
            .filter(|t| t.family() == self)
            .collect()
    }
}

impl fmt::Display for ErrorFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Weight of an arbitrary (possibly unknown) type string: unknown types weigh 1.0.
pub fn weight_of(t: &str) -> f64 {
    ErrorType::parse(t).map(ErrorType::weight).unwrap_or(1.0)
}

/// One ground-truth item. `aliases` are other documents of the same pattern that also match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GtItem {
    pub document_id: String,
    pub error_type: ErrorType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Why it is an error (never shown to agents; used in reports and tests).
    pub reason: String,
    /// Items that exist only because of a campaign rule change or a shock.
    #[serde(default)]
    pub origin: GtOrigin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GtOrigin {
    #[default]
    Planted,
    /// Depends on a world rule that changed in the campaign (meal limit, vendor status).
    RuleChange,
    /// Requires memory of an earlier period's documents.
    Memory,
    /// Added by a mid-period regulatory shock.
    Shock,
}

impl GtItem {
    pub fn new(doc: impl Into<String>, t: ErrorType, reason: impl Into<String>) -> GtItem {
        GtItem {
            document_id: doc.into(),
            error_type: t,
            aliases: vec![],
            reason: reason.into(),
            origin: GtOrigin::Planted,
        }
    }
    pub fn with_aliases(mut self, a: Vec<String>) -> Self {
        self.aliases = a;
        self
    }
    pub fn with_origin(mut self, o: GtOrigin) -> Self {
        self.origin = o;
        self
    }
    pub fn docs(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.document_id.as_str()).chain(self.aliases.iter().map(String::as_str))
    }
}

/// The agent's claim about one document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Finding {
    pub document_id: String,
    pub error_type: String,
    /// Optional in the README's shape; defaults to "Finding".
    #[serde(default = "default_description")]
    pub description: String,
    // Unset fields are sent as null (the reference's findings_so_far keeps every key).
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub suggested_fix: Option<String>,
    #[serde(default)]
    pub severity: Option<f64>,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub evidence_refs: Vec<String>,
    #[serde(default)]
    pub rationale: Option<String>,
}

fn default_description() -> String {
    "Finding".to_string()
}

fn clean_text(s: &str, max_chars: usize) -> String {
    let filtered: String = s
        .chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
        .collect();
    filtered.trim().chars().take(max_chars).collect()
}

impl Finding {
    pub fn new(doc: &str, t: &str) -> Finding {
        Finding {
            document_id: doc.to_string(),
            error_type: t.to_string(),
            description: default_description(),
            field: None,
            suggested_fix: None,
            severity: None,
            confidence: None,
            evidence_refs: vec![],
            rationale: None,
        }
    }

    /// Strip control characters, trim and truncate every text field; validate numbers.
    /// Returns the name of the offending field on a hard error.
    pub fn sanitize(mut self) -> Result<Finding, (String, String)> {
        use limits::*;
        self.document_id = clean_text(&self.document_id, MAX_ID_CHARS);
        self.error_type = clean_text(&self.error_type, MAX_ID_CHARS);
        self.description = clean_text(&self.description, MAX_TEXT_CHARS);
        if self.description.is_empty() {
            self.description = default_description();
        }
        if self.document_id.is_empty() {
            return Err((
                "document_id".into(),
                "document_id must be a non-empty string".into(),
            ));
        }
        if self.error_type.is_empty() {
            return Err((
                "error_type".into(),
                "error_type must be a non-empty string".into(),
            ));
        }
        self.field = self
            .field
            .map(|f| clean_text(&f, MAX_ID_CHARS))
            .filter(|f| !f.is_empty());
        self.suggested_fix = self.suggested_fix.map(|f| clean_text(&f, MAX_TEXT_CHARS));
        self.rationale = self.rationale.map(|f| clean_text(&f, MAX_TEXT_CHARS));
        self.evidence_refs.truncate(MAX_EVIDENCE_REFS);
        self.evidence_refs = self
            .evidence_refs
            .iter()
            .map(|r| clean_text(r, MAX_ID_CHARS))
            .collect();
        if let Some(c) = self.confidence {
            if !(0.0..=1.0).contains(&c) || c.is_nan() {
                return Err((
                    "confidence".into(),
                    format!("confidence must be within [0, 1], got {c}"),
                ));
            }
        }
        if let Some(s) = self.severity {
            if !s.is_finite() {
                return Err(("severity".into(), "severity must be a finite number".into()));
            }
        }
        Ok(self)
    }

    pub fn key(&self) -> (String, String) {
        norm_key(&self.document_id, &self.error_type)
    }
}

pub fn norm_key(doc: &str, t: &str) -> (String, String) {
    (
        doc.trim().to_ascii_uppercase(),
        t.trim().to_ascii_lowercase(),
    )
}

/// Rules of the world that documents and ground truth depend on. Campaigns mutate these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorldRules {
    pub fiscal_period: u32,
    pub meal_limit_inr: i64,
    /// Vendors added to the approved list by onboarding (period 2+).
    pub onboarded_vendors: Vec<String>,
    /// Vendors suspended from the approved list (vendor under investigation, period 4+).
    pub suspended_vendors: Vec<String>,
    /// GST rate on IT services (HSN 998314), percent; None before IT rows exist.
    pub it_services_rate_pct: Option<u32>,
    /// Emit IT-service rows in GST data (period 3+).
    pub emit_it_services: bool,
    /// Field renames applied to every document the agent sees.
    pub schema_renames: BTreeMap<String, String>,
    pub schema_version: u32,
    /// REG-002: cash/UPI threshold in force (rupees).
    pub cash_upi_threshold_inr: Option<i64>,
    /// Emit cash/UPI payments in fraud data (period 4+).
    pub emit_cash_payments: bool,
    /// REG-003: vendors younger than this many months are high-risk.
    pub new_vendor_risk_months: Option<u32>,
    /// Receipts reimbursed in the previous period (carried-over duplicate, memory).
    #[serde(skip)]
    pub carry_over_claim: Option<ExpenseClaim>,
    /// Adversarial fraud difficulty 1–5.
    pub fraud_level: u8,
    /// "Today" of the data set: every generated date is relative to it and the date rules
    /// (ITC window, audit window, spike window, vendor age) are evaluated against it. Campaigns
    /// move it one month forward per period ([`crate::util::period_reference_date`]).
    #[schemars(with = "String")]
    pub today: Date,
}

impl Default for WorldRules {
    fn default() -> Self {
        WorldRules {
            fiscal_period: 1,
            meal_limit_inr: 1500,
            onboarded_vendors: vec![],
            suspended_vendors: vec![],
            it_services_rate_pct: None,
            emit_it_services: false,
            schema_renames: BTreeMap::new(),
            schema_version: 1,
            cash_upi_threshold_inr: None,
            emit_cash_payments: false,
            new_vendor_risk_months: None,
            carry_over_claim: None,
            fraud_level: 1,
            today: crate::util::REFERENCE_DATE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_partition_each_tasks_types() {
        let shock_types = [
            ErrorType::HighRiskNewVendor,
            ErrorType::UndocumentedCashPayment,
        ];
        let mut seen = std::collections::BTreeSet::new();
        for f in ErrorFamily::ALL {
            let members = f.members();
            assert!(!members.is_empty(), "{f} is empty");
            for t in members {
                assert!(seen.insert(t), "{t} is in two families");
                assert_eq!(t.family(), f);
                let in_task = f.task().error_types().contains(&t);
                let shock = shock_types.contains(&t) && f.task() == TaskId::FraudDetection;
                assert!(in_task || shock, "{t} is not a {} type", f.task());
            }
        }
        assert_eq!(seen.len(), ErrorType::ALL.len(), "every type has a family");
        for task in TaskId::ALL {
            let fams: std::collections::BTreeSet<ErrorFamily> =
                task.error_types().iter().map(|t| t.family()).collect();
            assert!(fams.len() >= 4, "{task}: families too coarse");
            assert!(fams.iter().all(|f| f.task() == task));
        }
        assert_eq!(
            ErrorType::CascadingTotal.family(),
            ErrorType::TotalMismatch.family()
        );
        assert_eq!(
            ErrorType::UnmatchedInvoice.family(),
            ErrorType::VendorMismatch.family()
        );
        assert_ne!(
            ErrorType::PriceMismatch.family(),
            ErrorType::TotalMismatch.family()
        );
    }
}
