//! Multi-period campaigns: four specialists with their own episodes in dependency order, an
//! overseer, a world that mutates between periods, 22 instructions with binary checks, three
//! regulatory shocks that change ground truth mid-period, and the campaign score.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::baseline::BaselineConfig;
use crate::data::{self, Documents, BASE_APPROVED_VENDORS, ONBOARDED_VENDOR};
use crate::episode::{AuditAction, AuditObservation, Episode, OutcomeFeedback};
use crate::error::AuditError;
use crate::grading::{
    self, CampaignScore, CampaignScoreInputs, Class, FeedbackDetail, GradeResult, Matcher,
};
use crate::improve::{self, IterationRecord};
use crate::model::{limits, ErrorType, Finding, GtItem, GtOrigin, TaskId, WorldRules};
use crate::util::{self, mean, push_bounded, ratio, round_n, Rng8};
use rand::Rng;

pub const STEP_COST: f64 = 2.5;
pub const INITIAL_BUDGET: f64 = 100.0;
pub const HISTORY_SUMMARY_LEN: usize = 25;
pub const HIGH_VALUE_INR: i64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    ExpenseSpecialist,
    InvoiceSpecialist,
    GstSpecialist,
    FraudSpecialist,
    Overseer,
}

impl Role {
    pub const SPECIALISTS: [Role; 4] = [
        Role::ExpenseSpecialist,
        Role::InvoiceSpecialist,
        Role::GstSpecialist,
        Role::FraudSpecialist,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ExpenseSpecialist => "expense_specialist",
            Role::InvoiceSpecialist => "invoice_specialist",
            Role::GstSpecialist => "gst_specialist",
            Role::FraudSpecialist => "fraud_specialist",
            Role::Overseer => "overseer",
        }
    }
    /// Accepts `expense_specialist` and the README's short `expense` (and the task ids).
    pub fn parse(s: &str) -> Option<Role> {
        match s.trim().to_ascii_lowercase().as_str() {
            "expense_specialist" | "expense" | "expense_audit" => Some(Role::ExpenseSpecialist),
            "invoice_specialist" | "invoice" | "invoice_match" => Some(Role::InvoiceSpecialist),
            "gst_specialist" | "gst" | "gst_reconciliation" => Some(Role::GstSpecialist),
            "fraud_specialist" | "fraud" | "fraud_detection" => Some(Role::FraudSpecialist),
            "overseer" => Some(Role::Overseer),
            _ => None,
        }
    }
    pub fn task(self) -> Option<TaskId> {
        match self {
            Role::ExpenseSpecialist => Some(TaskId::ExpenseAudit),
            Role::InvoiceSpecialist => Some(TaskId::InvoiceMatch),
            Role::GstSpecialist => Some(TaskId::GstReconciliation),
            Role::FraudSpecialist => Some(TaskId::FraudDetection),
            Role::Overseer => None,
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Role::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("invalid role '{s}'; valid: expense_specialist, invoice_specialist, gst_specialist, fraud_specialist, overseer (or expense, invoice, gst, fraud)")))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Instruction {
    pub id: String,
    pub bucket: String,
    pub text: String,
    pub severity: f64,
    pub active_from_period: u32,
}

pub fn instructions() -> Vec<Instruction> {
    let raw: [(&str, &str, f64, u32, &str); 22] = [
        ("POL-001", "policy", 1.0, 1, "Meals claims above the meal limit in force are violations (over_limit)."),
        ("POL-002", "policy", 1.0, 1, "Travel claims need a receipt_id; a missing receipt above the threshold is a violation."),
        ("POL-003", "policy", 0.8, 1, "Weekend-dated business expenses need pre-approval and are flagged."),
        ("POL-004", "policy", 1.2, 1, "Cumulative claims per employee per calendar month must not exceed ₹50,000."),
        ("POL-005", "policy", 1.5, 1, "Invoices above ₹50,000 need dual approval (two distinct approvers in approvals); the invoice specialist flags every invoice without it."),
        ("POL-006", "policy", 1.0, 1, "A vendor outside the approved list in force is a violation."),
        ("POL-007", "policy", 1.0, 2, "From period 2 the meal limit rises from ₹1,500 to ₹2,000; claims up to ₹2,000 are compliant."),
        ("POL-008", "policy", 0.8, 1, "Three-way-match tolerance is ₹1; differences within it are not flagged."),
        ("DEP-001", "dependency", 1.5, 1, "GST reconciliation starts only after invoice matching is complete."),
        ("DEP-002", "dependency", 1.2, 1, "Fraud analysis must consider earlier specialists' findings (cite them in evidence_refs)."),
        ("DEP-003", "dependency", 1.0, 1, "The overseer reviews after all specialists have submitted."),
        ("DEP-004", "dependency", 1.5, 2, "Period N findings are carried into period N+1 (cite prior findings in evidence_refs)."),
        ("DL-001", "deadline", 1.0, 1, "Specialists finish with submit_final within their step budget."),
        ("DL-002", "deadline", 0.8, 1, "The overseer reviews within 2 campaign actions of the last specialist completing."),
        ("DL-003", "deadline", 1.5, 1, "The campaign must complete all periods; incomplete campaigns are penalised."),
        ("ESC-001", "escalation", 2.0, 1, "Every fraud finding is decided by the overseer."),
        ("ESC-002", "escalation", 1.5, 1, "Findings on amounts above ₹1,00,000 carry severity ≥ 1.5."),
        ("ESC-003", "escalation", 1.5, 2, "A vendor flagged in an earlier period has all its current-period documents reviewed."),
        ("ESC-004", "escalation", 1.0, 1, "Findings agreed by two or more specialists are decided by the overseer."),
        ("SCH-001", "schema", 1.0, 3, "From period 3, vendor_gstin is renamed supplier_gstin in every document."),
        ("SCH-002", "schema", 0.5, 3, "From period 3, the purchase register carries hsn_description."),
        ("SCH-003", "schema", 0.8, 3, "From period 3, findings must not use the old field name vendor_gstin."),
    ];
    raw.iter()
        .map(|(id, b, s, p, t)| Instruction {
            id: id.to_string(),
            bucket: b.to_string(),
            text: t.to_string(),
            severity: *s,
            active_from_period: *p,
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Shock {
    pub id: String,
    pub text: String,
    pub severity: f64,
    pub trigger_period: u32,
    pub trigger_after_step: u32,
    pub affected_tasks: Vec<TaskId>,
    pub rule_change: Value,
}

pub fn shocks() -> Vec<Shock> {
    vec![
        Shock { id: "REG-001".into(), text: "URGENT: GST on IT services (HSN 998314) is cut from 18% to 12% effective immediately (see context.rate_notices). IT-service invoices dated on or after the effective date booked at 18% are tax_rate_mismatch.".into(), severity: 1.5, trigger_period: data::gst::IT_RATE_CHANGE_PERIOD, trigger_after_step: 2, affected_tasks: vec![TaskId::GstReconciliation], rule_change: serde_json::json!({"tax_rate": {"998314": 12}, "effective_from": data::gst::it_rate_change_date().to_string()}) },
        Shock { id: "REG-002".into(), text: "Cash and UPI payments above ₹20,000 now need a supporting document; flag those without one as undocumented_cash_payment.".into(), severity: 1.2, trigger_period: 4, trigger_after_step: 1, affected_tasks: vec![TaskId::FraudDetection], rule_change: serde_json::json!({"cash_upi_threshold": 20000}) },
        Shock { id: "REG-003".into(), text: "Vendors incorporated less than 6 months ago are high-risk; flag their earliest transaction as high_risk_new_vendor.".into(), severity: 1.5, trigger_period: 4, trigger_after_step: 3, affected_tasks: vec![TaskId::FraudDetection], rule_change: serde_json::json!({"new_vendor_risk_months": 6}) },
    ]
}

impl Shock {
    /// The specialist whose task the shock changes (the first of `affected_tasks`).
    pub fn affected_role(&self) -> Role {
        match self.affected_tasks.first() {
            Some(TaskId::ExpenseAudit) => Role::ExpenseSpecialist,
            Some(TaskId::InvoiceMatch) => Role::InvoiceSpecialist,
            Some(TaskId::FraudDetection) => Role::FraudSpecialist,
            // Every shock names a task; one that named none would fall to the GST specialist.
            Some(TaskId::GstReconciliation) | None => Role::GstSpecialist,
        }
    }

    /// The ground-truth type the shock's rule adds to the documents it applies to.
    pub fn ground_truth_type(&self) -> ErrorType {
        match self.id.as_str() {
            "REG-002" => ErrorType::UndocumentedCashPayment,
            "REG-003" => ErrorType::HighRiskNewVendor,
            _ => ErrorType::TaxRateMismatch,
        }
    }
}

fn shock_notification(s: &Shock) -> String {
    format!(
        "REGULATORY CHANGE - {}\n{}\nAffected tasks: {}\nSeverity: {}\nApply this rule to remaining findings in this period.",
        s.id,
        s.text,
        s.affected_tasks.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", "),
        s.severity
    )
}

/// GST rates as fractions, under the reference's keys (`gst_standard: 0.18`). `it_services`
/// (HSN 998314) is ours: 0.18, then 0.12 once REG-001 is in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaxRates {
    pub gst_standard: f64,
    pub gst_reduced: f64,
    pub gst_low: f64,
    pub it_services: f64,
}

fn rate_fraction(pct: u32) -> f64 {
    round_n(pct as f64 / 100.0, 4)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorldState {
    pub fiscal_period: u32,
    /// "Today" of the period: documents are dated up to it; one month later each period.
    #[schemars(with = "String")]
    pub current_date: util::Date,
    pub policy_version: u32,
    pub meal_limit_inr: i64,
    pub approved_vendors: Vec<String>,
    pub tax_rates: TaxRates,
    pub schema_version: u32,
    pub schema_changes: BTreeMap<String, String>,
    pub vendor_status_changes: BTreeMap<String, String>,
    pub policy_updates: Vec<String>,
    pub active_alerts: Vec<String>,
    pub mid_period_rule_drops: Vec<Shock>,
    pub annual_reconciliation: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HistoryEntry {
    pub period: u32,
    pub role: Role,
    pub document_id: String,
    pub error_type: String,
    pub confidence: Option<f64>,
    pub counterparty: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ShockRecord {
    pub id: String,
    pub period: u32,
    /// The period clock when it fired: the number of specialist submits so far this period.
    pub step: u32,
    pub severity: f64,
    /// The specialist whose task the shock changes.
    pub role: Role,
    /// Ground-truth items the rule put into that task's documents this period (counted when
    /// the task's episode is created, or when a live episode is updated in place).
    pub ground_truth_items_added: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstructionCheck {
    pub id: String,
    /// passed | failed | not_applicable | enforced
    pub status: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PeriodScore {
    pub period: u32,
    pub score: CampaignScore,
    pub inputs: CampaignScoreInputs,
    pub instruction_checks: Vec<InstructionCheck>,
    pub specialist_scores: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverseerDecision {
    pub finding_ref: String,
    pub verdict: String,
    #[serde(default)]
    pub reason_code: Option<String>,
    #[serde(default)]
    pub confidence: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConflictResolution {
    #[serde(default)]
    pub agents: Vec<String>,
    pub finding: String,
    pub resolution: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverseerAction {
    #[serde(default)]
    pub audit_trail_id: Option<String>,
    #[serde(default)]
    pub decisions: Vec<OverseerDecision>,
    #[serde(default)]
    pub conflicts_resolved: Vec<ConflictResolution>,
    #[serde(default)]
    pub task_reassignments: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
/// One overseer decision as judged. A decision that names no submitted finding, or carries a
/// verdict outside approve / reject / escalate, is kept with `error` set and counts nowhere;
/// the rest of the review stands.
pub struct ReviewedDecision {
    pub finding_ref: String,
    /// The specialist whose finding it decides (null when the ref matched nothing).
    pub role: Option<Role>,
    pub document_id: String,
    pub error_type: String,
    pub verdict: String,
    pub matched: bool,
    pub document_exists: bool,
    pub type_valid_for_role: bool,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Conflict {
    pub role: Role,
    pub document_id: String,
    pub competing_types: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OverseerReview {
    pub campaign_id: String,
    pub period: u32,
    pub audit_trail_id: String,
    pub accepted: usize,
    pub rejected: usize,
    pub escalated: usize,
    pub undecided: usize,
    /// Decisions that could not be applied (see [`ReviewedDecision::error`]).
    pub invalid_decisions: usize,
    pub decisions: Vec<ReviewedDecision>,
    pub conflicts_detected: Vec<Conflict>,
    pub conflicts_resolved: usize,
    pub unresolved_conflicts: Vec<Conflict>,
    pub reassignments: BTreeMap<String, String>,
    pub all_specialists_complete: bool,
    pub resolutions: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CampaignObservation {
    pub campaign_id: String,
    pub current_period: u32,
    pub total_periods: u32,
    pub world_state: WorldState,
    pub period_observation: Option<AuditObservation>,
    pub findings_history_summary: Vec<HistoryEntry>,
    pub active_alerts: Vec<String>,
    pub budget_remaining: f64,
    pub specialist_assignments: BTreeMap<String, String>,
    pub completed_roles: Vec<Role>,
    pub pending_regulatory_shocks: Vec<Shock>,
    pub finished: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CampaignState {
    pub campaign_id: String,
    pub seed: u64,
    pub total_periods: u32,
    pub current_period: u32,
    pub world_state: WorldState,
    pub agent_roles: BTreeMap<String, String>,
    pub period_scores: Vec<PeriodScore>,
    pub findings_history: Vec<HistoryEntry>,
    pub instruction_compliance: BTreeMap<String, bool>,
    pub budget_remaining: f64,
    pub specialist_consecutive_tasks: BTreeMap<String, u32>,
    pub regulatory_shocks_applied: Vec<ShockRecord>,
    pub finished: bool,
}

/// The full campaign controller. All state transitions live in its methods.
#[derive(Debug, Clone)]
pub struct Campaign {
    pub id: String,
    pub seed: u64,
    pub total_periods: u32,
    pub current_period: u32,
    pub world: WorldState,
    pub episodes: BTreeMap<Role, Episode>,
    pub completed: BTreeSet<Role>,
    pub history: Vec<HistoryEntry>,
    pub shocks_applied: Vec<ShockRecord>,
    pub delivered: BTreeSet<String>,
    pub budget_remaining: f64,
    pub reviews: BTreeMap<u32, OverseerReview>,
    pub period_scores: Vec<PeriodScore>,
    pub improve_history: Vec<IterationRecord>,
    pub checklist: BaselineConfig,
    pub consecutive: BTreeMap<Role, u32>,
    pub action_counter: u64,
    pub last_completion_action: Option<u64>,
    pub review_action: Option<u64>,
    pub prev_expense_claims: Vec<data::expense::ExpenseClaim>,
    pub prev_expense_gt_docs: BTreeSet<String>,
    pub flagged_vendors: BTreeMap<u32, BTreeSet<String>>,
    pub investigated_vendor: String,
    pub finished: bool,
    pub max_findings_per_step: usize,
    /// Period clock: specialist submits so far this period (shocks fire on it).
    pub period_submits: u32,
    /// The specialist whose episode was started last this period (its observation is the
    /// `period_observation` of replies that carry no other).
    pub active: Option<Role>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SubmitResult {
    pub observation: CampaignObservation,
    pub reward: f64,
    pub done: bool,
    /// Always false: a shock never defers a final submit (kept for clients that read it).
    pub deferred: bool,
    pub shock: Option<Shock>,
    pub grader: Option<GradeResult>,
    pub warnings: Vec<String>,
}

impl Campaign {
    pub fn new(
        id: String,
        seed: u64,
        total_periods: u32,
        max_findings_per_step: usize,
    ) -> Result<Campaign, AuditError> {
        if !(1..=limits::MAX_PERIODS).contains(&total_periods) {
            return Err(AuditError::invalid(
                "total_periods",
                format!("total_periods must be 1-{}", limits::MAX_PERIODS),
            ));
        }
        let mut r: Rng8 = util::rng_for(seed, 77);
        let pool: Vec<&str> = BASE_APPROVED_VENDORS
            .iter()
            .copied()
            .filter(|v| *v != "ITC Foods" && *v != "HCL Furniture")
            .collect();
        let investigated = pool[r.random_range(0..pool.len())].to_string();
        let mut c = Campaign {
            id,
            seed,
            total_periods,
            current_period: 1,
            world: WorldState {
                fiscal_period: 1,
                current_date: util::REFERENCE_DATE,
                policy_version: 1,
                meal_limit_inr: 1500,
                approved_vendors: vec![],
                tax_rates: TaxRates {
                    gst_standard: rate_fraction(18),
                    gst_reduced: rate_fraction(12),
                    gst_low: rate_fraction(5),
                    it_services: rate_fraction(18),
                },
                schema_version: 1,
                schema_changes: BTreeMap::new(),
                vendor_status_changes: BTreeMap::new(),
                policy_updates: vec![],
                active_alerts: vec![],
                mid_period_rule_drops: vec![],
                annual_reconciliation: false,
            },
            episodes: BTreeMap::new(),
            completed: BTreeSet::new(),
            history: vec![],
            shocks_applied: vec![],
            delivered: BTreeSet::new(),
            budget_remaining: INITIAL_BUDGET,
            reviews: BTreeMap::new(),
            period_scores: vec![],
            improve_history: vec![],
            checklist: BaselineConfig::default(),
            consecutive: BTreeMap::new(),
            action_counter: 0,
            last_completion_action: None,
            review_action: None,
            prev_expense_claims: vec![],
            prev_expense_gt_docs: BTreeSet::new(),
            flagged_vendors: BTreeMap::new(),
            investigated_vendor: investigated,
            finished: false,
            max_findings_per_step,
            period_submits: 0,
            active: None,
        };
        c.sync_world();
        c.prime();
        Ok(c)
    }

    pub fn period_seed(&self) -> u64 {
        self.seed.wrapping_add(self.current_period as u64 - 1)
    }

    /// World rules in force now (period + delivered shocks).
    pub fn rules(&self) -> WorldRules {
        let p = self.current_period;
        let mut renames = BTreeMap::new();
        if p >= 3 {
            renames.insert("vendor_gstin".to_string(), "supplier_gstin".to_string());
        }
        let carry = if p >= 2 {
            self.prev_expense_claims
                .iter()
                .find(|c| {
                    !self.prev_expense_gt_docs.contains(&c.expense_id)
                        && !c.receipt_id.is_empty()
                        && !c.date.is_weekend()
                        && c.amount <= rust_decimal::Decimal::from(5000)
                        && c.category != "Meals"
                })
                .cloned()
        } else {
            None
        };
        WorldRules {
            fiscal_period: p,
            meal_limit_inr: if p >= 2 { 2000 } else { 1500 },
            onboarded_vendors: if p >= 2 {
                vec![ONBOARDED_VENDOR.to_string()]
            } else {
                vec![]
            },
            suspended_vendors: if p >= 4 {
                vec![self.investigated_vendor.clone()]
            } else {
                vec![]
            },
            it_services_rate_pct: (p >= 4 || self.delivered.contains("REG-001")).then_some(12),
            emit_it_services: p >= 3,
            schema_renames: renames,
            schema_version: if p >= 3 { 2 } else { 1 },
            cash_upi_threshold_inr: (p >= 5 || self.delivered.contains("REG-002"))
                .then_some(20_000),
            emit_cash_payments: p >= 4,
            new_vendor_risk_months: (p >= 5 || self.delivered.contains("REG-003")).then_some(6),
            carry_over_claim: carry,
            fraud_level: if p >= 5 {
                3
            } else if p >= 3 {
                2
            } else {
                1
            },
            today: util::period_reference_date(p),
        }
    }

    fn sync_world(&mut self) {
        let r = self.rules();
        let p = self.current_period;
        self.world.fiscal_period = p;
        self.world.current_date = r.today;
        self.world.policy_version = p;
        self.world.meal_limit_inr = r.meal_limit_inr;
        self.world.approved_vendors = data::approved_vendors(&r);
        self.world.tax_rates.it_services = rate_fraction(r.it_services_rate_pct.unwrap_or(18));
        self.world.schema_version = r.schema_version;
        self.world.schema_changes = r.schema_renames.clone();
        self.world.vendor_status_changes.clear();
        if p >= 2 {
            self.world
                .vendor_status_changes
                .insert(ONBOARDED_VENDOR.into(), "onboarded".into());
        }
        if p >= 4 {
            self.world.vendor_status_changes.insert(
                self.investigated_vendor.clone(),
                "under_investigation".into(),
            );
        }
        self.world.annual_reconciliation =
            p >= self.total_periods.max(5) || (p == self.total_periods && p >= 5);
        let ins = instructions();
        self.world.policy_updates = if p >= 2 {
            ins.iter()
                .filter(|i| {
                    i.bucket == "policy" && i.active_from_period <= p && i.active_from_period >= 2
                })
                .map(|i| i.text.clone())
                .collect()
        } else {
            vec![]
        };
        self.world.active_alerts.clear();
        if p >= 4 {
            self.world.active_alerts.push(format!(
                "Vendor '{}' is under investigation: removed from the approved list",
                self.investigated_vendor
            ));
        }
        if p >= 2 {
            self.world
                .active_alerts
                .push("Expense claims may reuse receipts reimbursed in earlier periods".into());
        }
    }

    pub fn active_instructions(&self) -> Vec<Instruction> {
        instructions()
            .into_iter()
            .filter(|i| i.active_from_period <= self.current_period)
            .collect()
    }

    fn tick(&mut self) -> u64 {
        self.action_counter += 1;
        self.action_counter
    }

    fn check_deps(&self, role: Role) -> Result<(), AuditError> {
        for dep in Role::SPECIALISTS.iter().take(role.index()) {
            if !self.completed.contains(dep) {
                return Err(AuditError::Dependency(format!(
                    "Dependency violation: '{}' requires '{}' completed first.",
                    role.as_str(),
                    dep.as_str()
                )));
            }
        }
        Ok(())
    }

    fn ensure_open(&self) -> Result<(), AuditError> {
        if self.finished {
            return Err(AuditError::Conflict(
                "campaign finished: start a new campaign".into(),
            ));
        }
        Ok(())
    }

    pub fn start_task(&mut self, role: Role) -> Result<&Episode, AuditError> {
        self.ensure_open()?;
        let task = role.task().ok_or_else(|| {
            AuditError::invalid(
                "role",
                "Overseer does not run specialist tasks; use /overseer/review",
            )
        })?;
        self.check_deps(role)?;
        if self.completed.contains(&role) {
            return Err(AuditError::Conflict(format!(
                "'{}' already completed period {}",
                role.as_str(),
                self.current_period
            )));
        }
        self.tick();
        self.open_episode(role, task);
        self.active = Some(role);
        Ok(&self.episodes[&role])
    }

    /// Create the role's episode for this period if it has none, with the rules in force now
    /// (including shocks already fired this period) and the notices of those shocks.
    fn open_episode(&mut self, role: Role, task: TaskId) {
        if self.episodes.contains_key(&role) {
            return;
        }
        let id = format!("{}-p{}-{}", self.id, self.current_period, role.as_str());
        let mut ep = Episode::new(
            task,
            self.period_seed(),
            self.rules(),
            id,
            false,
            self.max_findings_per_step,
        );
        ep.feedback_detail = FeedbackDetail::Counts;
        ep.outcome_feedback = OutcomeFeedback::AtFinal;
        let p = self.current_period;
        for s in shocks().into_iter().filter(|s| {
            s.trigger_period == p
                && self.delivered.contains(&s.id)
                && s.affected_tasks.contains(&task)
        }) {
            ep.notices.push(shock_notification(&s));
            let added = ep
                .gt()
                .iter()
                .filter(|g| {
                    g.error_type == s.ground_truth_type()
                        && matches!(g.origin, GtOrigin::RuleChange | GtOrigin::Shock)
                })
                .count();
            if let Some(rec) = self
                .shocks_applied
                .iter_mut()
                .find(|r| r.id == s.id && r.period == p)
            {
                rec.ground_truth_items_added = added;
            }
        }
        self.episodes.insert(role, ep);
    }

    /// The period's first task is ready without a `task/start` (the reference primes it), so
    /// `/campaign/start` and `/campaign/period/advance` carry its documents.
    fn prime(&mut self) {
        if !self.finished {
            self.open_episode(Role::ExpenseSpecialist, TaskId::ExpenseAudit);
            self.active = Some(Role::ExpenseSpecialist);
        }
    }

    /// Observation of the active episode while it is open (`period_observation` when a reply
    /// has no step of its own to show).
    fn live_observation(&self) -> Option<AuditObservation> {
        let ep = self
            .active
            .and_then(|r| self.episodes.get(&r))
            .filter(|e| !e.done)?;
        let feedback = if ep.step_count == 0 {
            ep.reset_feedback()
        } else {
            format!(
                "Step {}/{} in progress; submit_final=true to finish.",
                ep.step_count, ep.max_steps
            )
        };
        Some(ep.observation(0.0, feedback, false))
    }

    pub fn observation(&self, period_obs: Option<AuditObservation>) -> CampaignObservation {
        let mut assign = BTreeMap::new();
        for r in Role::SPECIALISTS {
            assign.insert(
                r.as_str().to_string(),
                r.task().map(|t| t.as_str()).unwrap_or("").to_string(),
            );
        }
        assign.insert("overseer".into(), "overseer_review".into());
        let n = self.history.len();
        CampaignObservation {
            campaign_id: self.id.clone(),
            current_period: self.current_period,
            total_periods: self.total_periods,
            world_state: self.world.clone(),
            period_observation: period_obs.or_else(|| self.live_observation()),
            findings_history_summary: self.history[n.saturating_sub(HISTORY_SUMMARY_LEN)..]
                .to_vec(),
            active_alerts: self.world.active_alerts.clone(),
            budget_remaining: self.budget_remaining,
            specialist_assignments: assign,
            completed_roles: self.completed.iter().copied().collect(),
            pending_regulatory_shocks: self.world.mid_period_rule_drops.clone(),
            finished: self.finished,
        }
    }

    pub fn submit(
        &mut self,
        role: Role,
        mut action: AuditAction,
    ) -> Result<SubmitResult, AuditError> {
        self.ensure_open()?;
        if role == Role::Overseer {
            return Err(AuditError::invalid(
                "role",
                "Use /overseer/review for overseer decisions",
            ));
        }
        self.check_deps(role)?;
        if self.completed.contains(&role) {
            return Err(AuditError::Conflict(format!(
                "'{}' already completed period {}; advance the period",
                role.as_str(),
                self.current_period
            )));
        }
        if self.budget_remaining < STEP_COST {
            return Err(AuditError::Conflict(
                "campaign budget exhausted: no further specialist submissions are possible".into(),
            ));
        }
        if !self.episodes.contains_key(&role) {
            self.start_task(role)?;
        }
        // Campaign submissions are final unless the client says otherwise.
        action.submit_final = Some(action.submit_final.unwrap_or(true));
        self.episodes[&role].check_action(&action)?;
        let p = self.current_period;
        let at = self.tick();
        self.budget_remaining = (self.budget_remaining - STEP_COST).max(0.0);
        *self.consecutive.entry(role).or_default() += 1;
        let ep = self.episodes.get_mut(&role).ok_or(AuditError::Internal)?;
        let out = ep.step(action, vec![])?;
        let docs = ep.data.documents.clone();
        self.record_history(p, role, &out.new_findings, &docs);
        let mut env = out.envelope;
        if env.done {
            self.completed.insert(role);
            self.last_completion_action = Some(at);
        }
        self.period_submits += 1;
        let mut warnings = env.info.warnings.clone();
        let fired = self.fire_due_shocks();
        for s in &fired {
            env.observation.feedback.push_str("\n\n");
            env.observation.feedback.push_str(&shock_notification(s));
            warnings.push(format!("{} is in force from now on for {} in period {p} (work already submitted is not regraded)", s.id, s.affected_role().as_str()));
        }
        let obs = self.observation(Some(env.observation.clone()));
        Ok(SubmitResult {
            observation: obs,
            reward: env.reward,
            done: env.done,
            deferred: false,
            shock: fired.into_iter().next(),
            grader: env.grader,
            warnings,
        })
    }

    fn record_history(&mut self, p: u32, role: Role, findings: &[Finding], docs: &Documents) {
        for f in findings {
            let entry = HistoryEntry {
                period: p,
                role,
                document_id: f.document_id.trim().to_ascii_uppercase(),
                error_type: f.error_type.trim().to_ascii_lowercase(),
                confidence: f.confidence,
                counterparty: docs.doc_info(&f.document_id).map(|x| x.1),
            };
            push_bounded(&mut self.history, entry, limits::MAX_HISTORY_ENTRIES);
        }
    }

    /// Shocks of this period whose `trigger_after_step` the period clock has reached. Each
    /// fires once per campaign; its rule holds for the rest of the period for every task it
    /// affects that is not finished (episodes created later are generated under it).
    fn fire_due_shocks(&mut self) -> Vec<Shock> {
        let p = self.current_period;
        let due: Vec<Shock> = shocks()
            .into_iter()
            .filter(|s| {
                s.trigger_period == p
                    && !self.delivered.contains(&s.id)
                    && self.period_submits >= s.trigger_after_step
            })
            .collect();
        for s in &due {
            self.deliver_shock(s);
        }
        due
    }

    /// Put a shock in force: world state, and a live unfinished episode of an affected task
    /// (documents' context and ground truth updated in place). Finished work is never regraded.
    fn deliver_shock(&mut self, s: &Shock) {
        self.delivered.insert(s.id.clone());
        self.world.mid_period_rule_drops.push(s.clone());
        self.sync_world();
        let role = s.affected_role();
        let live = self.episodes.get(&role).is_some_and(|e| !e.done);
        debug_assert!(
            !self.episodes.get(&role).is_some_and(|e| e.done),
            "a shock fires before its task can finish"
        );
        let added = if live {
            self.apply_shock_in_place(role, s)
        } else {
            0
        };
        self.shocks_applied.push(ShockRecord {
            id: s.id.clone(),
            period: self.current_period,
            step: self.period_submits,
            severity: s.severity,
            role,
            ground_truth_items_added: added,
        });
    }

    fn apply_shock_in_place(&mut self, role: Role, s: &Shock) -> usize {
        let rules = self.rules();
        let Some(ep) = self.episodes.get_mut(&role) else {
            return 0;
        };
        ep.rules.it_services_rate_pct = rules.it_services_rate_pct;
        ep.rules.cash_upi_threshold_inr = rules.cash_upi_threshold_inr;
        ep.rules.new_vendor_risk_months = rules.new_vendor_risk_months;
        let before: BTreeSet<(String, ErrorType)> = ep
            .data
            .ground_truth
            .iter()
            .map(|g| (g.document_id.clone(), g.error_type))
            .collect();
        let mut new_items: Vec<GtItem> = vec![];
        match &mut ep.data.documents {
            Documents::Gst(d) => {
                d.context.rate_notices = data::gst::rate_notices(&rules);
                for (doc, t) in
                    data::gst::detect_rate_notices(&d.purchase_register, &d.context.rate_notices)
                {
                    new_items.push(GtItem::new(
                        doc,
                        t,
                        format!("{}: booked at the old rate", s.id),
                    ));
                }
            }
            Documents::Fraud(d) => {
                d.audit_context.cash_upi_threshold_inr = rules.cash_upi_threshold_inr;
                d.audit_context.new_vendor_risk_months = rules.new_vendor_risk_months;
                new_items.extend(data::fraud::shock_items(d));
                if rules.cash_upi_threshold_inr.is_some()
                    && !ep.extra_types.contains(&ErrorType::UndocumentedCashPayment)
                {
                    ep.extra_types.push(ErrorType::UndocumentedCashPayment);
                }
                if rules.new_vendor_risk_months.is_some()
                    && !ep.extra_types.contains(&ErrorType::HighRiskNewVendor)
                {
                    ep.extra_types.push(ErrorType::HighRiskNewVendor);
                }
            }
            // Expense and invoice data have no shock-only items.
            Documents::Expense(_) | Documents::Invoice(_) => {}
        }
        let mut added = 0;
        for mut it in new_items {
            if !before.contains(&(it.document_id.clone(), it.error_type)) {
                it.origin = GtOrigin::Shock;
                ep.data.ground_truth.push(it);
                added += 1;
            }
        }
        ep.notices.push(shock_notification(s));
        added
    }

    /// Final findings of each specialist this period.
    fn period_findings(&self) -> BTreeMap<Role, Vec<Finding>> {
        self.episodes
            .iter()
            .map(|(r, e)| (*r, e.findings.clone()))
            .collect()
    }

    fn resolve_ref(&self, r: &str) -> Option<(Role, String, String)> {
        let parts: Vec<&str> = r.split(':').map(str::trim).collect();
        let (role, doc, t) = match parts.as_slice() {
            [role, doc, t] => (Role::parse(role), *doc, *t),
            [doc, t] => (None, *doc, *t),
            _ => return None,
        };
        let (d, t) = crate::model::norm_key(doc, t);
        for (rr, fs) in self.period_findings() {
            if role.is_some_and(|x| x != rr) {
                continue;
            }
            if fs.iter().any(|f| f.key() == (d.clone(), t.clone())) {
                return Some((rr, d, t));
            }
        }
        None
    }

    fn conflicts(&self) -> Vec<Conflict> {
        let mut out = vec![];
        for (r, fs) in self.period_findings() {
            let mut by_doc: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for f in fs {
                let (d, t) = f.key();
                by_doc.entry(d).or_default().insert(t);
            }
            for (d, ts) in by_doc {
                if ts.len() >= 2 {
                    out.push(Conflict {
                        role: r,
                        document_id: d,
                        competing_types: ts.into_iter().collect(),
                    });
                }
            }
        }
        out
    }

    /// DEP-003: the overseer reviews a period only after all four specialists have finished it.
    fn check_review_order(&self) -> Result<(), AuditError> {
        let pending: Vec<String> = Role::SPECIALISTS
            .iter()
            .filter(|r| !self.completed.contains(r))
            .map(|r| format!("'{}'", r.as_str()))
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        Err(AuditError::DependencyConflict(format!(
            "Dependency violation: 'overseer' requires {} completed first (period {}: every specialist must finish before the review).",
            pending.join(", "),
            self.current_period
        )))
    }

    /// Judge one decision: resolve its ref to a submitted finding and check the verdict.
    fn judge_decision(&self, d: &OverseerDecision) -> ReviewedDecision {
        let v = d.verdict.trim().to_ascii_lowercase();
        let mut out = ReviewedDecision {
            finding_ref: d.finding_ref.clone(),
            role: None,
            document_id: String::new(),
            error_type: String::new(),
            verdict: v.clone(),
            matched: false,
            document_exists: false,
            type_valid_for_role: false,
            error: None,
        };
        match self.resolve_ref(&d.finding_ref) {
            Some((role, doc, t)) => {
                let ep = &self.episodes[&role];
                out.role = Some(role);
                out.document_exists = ep.data.documents.document_ids().contains(&doc);
                out.type_valid_for_role = ep.valid_types().iter().any(|x| x.as_str() == t);
                out.document_id = doc;
                out.error_type = t;
                out.matched = true;
            }
            None => out.error = Some(format!("'{}' does not name a finding submitted this period (use ROLE:DOC:type or DOC:type); decision not applied", d.finding_ref)),
        }
        if !["approve", "reject", "escalate"].contains(&v.as_str()) {
            out.matched = false;
            out.error = Some(format!(
                "verdict must be approve, reject or escalate; got '{}'; decision not applied",
                d.verdict
            ));
        }
        out
    }

    pub fn review(&mut self, action: OverseerAction) -> Result<OverseerReview, AuditError> {
        self.ensure_open()?;
        self.check_review_order()?;
        for (i, d) in action.decisions.iter().enumerate() {
            if let Some(c) = d.confidence {
                if !(0.0..=1.0).contains(&c) {
                    return Err(AuditError::invalid(
                        format!("decisions[{i}].confidence"),
                        "confidence must be within [0, 1]",
                    ));
                }
            }
        }
        let decided: Vec<ReviewedDecision> = action
            .decisions
            .iter()
            .take(limits::MAX_HISTORY_ENTRIES)
            .map(|d| self.judge_decision(d))
            .collect();
        let at = self.tick();
        let conflicts = self.conflicts();
        let mut resolutions = BTreeMap::new();
        for c in &action.conflicts_resolved {
            resolutions.insert(
                c.finding.trim().to_ascii_uppercase(),
                c.resolution.trim().to_ascii_lowercase(),
            );
        }
        let unresolved: Vec<Conflict> = conflicts
            .iter()
            .filter(|c| !resolutions.contains_key(&c.document_id))
            .cloned()
            .collect();
        let total: usize = self.period_findings().values().map(|v| v.len()).sum();
        let count = |v: &str| {
            decided
                .iter()
                .filter(|d| d.matched && d.verdict == v)
                .count()
        };
        let invalid = decided.iter().filter(|d| !d.matched).count();
        let review = OverseerReview {
            campaign_id: self.id.clone(),
            period: self.current_period,
            audit_trail_id: action
                .audit_trail_id
                .clone()
                .unwrap_or_else(|| format!("AT-{}-P{}", self.id, self.current_period)),
            accepted: count("approve"),
            rejected: count("reject"),
            escalated: count("escalate"),
            undecided: total.saturating_sub(decided.len() - invalid),
            invalid_decisions: invalid,
            decisions: decided,
            conflicts_resolved: action.conflicts_resolved.len(),
            unresolved_conflicts: unresolved,
            conflicts_detected: conflicts,
            reassignments: action.task_reassignments.clone(),
            all_specialists_complete: Role::SPECIALISTS.iter().all(|r| self.completed.contains(r)),
            resolutions,
        };
        self.review_action = Some(at);
        self.reviews.insert(self.current_period, review.clone());
        Ok(review)
    }

    /// Overseer quality: F1 of the approved findings (undecided = approved, conflicts resolved
    /// by type) against the ground truth of each role's episode. 0 without a review.
    fn overseer_quality(&self) -> f64 {
        let Some(rv) = self.reviews.get(&self.current_period) else {
            return 0.0;
        };
        let verdict: BTreeMap<(Role, String, String), String> = rv
            .decisions
            .iter()
            .filter_map(|d| {
                Some((
                    (
                        d.role.filter(|_| d.matched)?,
                        d.document_id.clone(),
                        d.error_type.clone(),
                    ),
                    d.verdict.clone(),
                ))
            })
            .collect();
        let (mut tp, mut fp, mut gt_total) = (0usize, 0usize, 0usize);
        for (role, ep) in &self.episodes {
            gt_total += ep.gt().len();
            let mut m = Matcher::new(ep.gt());
            for f in &ep.findings {
                let (d, t) = f.key();
                let v = verdict
                    .get(&(*role, d.clone(), t.clone()))
                    .map(String::as_str)
                    .unwrap_or("approve");
                let resolved_out = rv.resolutions.get(&d).is_some_and(|keep| *keep != t);
                if v == "reject" || resolved_out {
                    continue;
                }
                match m.classify(&d, &t) {
                    Class::Match(_) => tp += 1,
                    Class::Duplicate(_) => {}
                    _ => fp += 1,
                }
            }
        }
        for r in Role::SPECIALISTS {
            if !self.episodes.contains_key(&r) {
                let t = r.task().map(|t| t.gt_count()).unwrap_or(0);
                gt_total += t;
            }
        }
        grading::f1(
            ratio(tp as f64, (tp + fp) as f64, 0.0),
            ratio(tp as f64, gt_total as f64, 0.0),
        )
    }

    fn all_findings(&self) -> Vec<(Role, Finding)> {
        self.episodes
            .iter()
            .flat_map(|(r, e)| e.findings.iter().map(move |f| (*r, f.clone())))
            .collect()
    }

    fn flagged_in(
        &self,
        role: Role,
        pred: impl Fn(&data::expense::ExpenseClaim) -> bool,
        t: ErrorType,
    ) -> Option<bool> {
        let ep = self.episodes.get(&role)?;
        let Documents::Expense(d) = &ep.data.documents else {
            return None;
        };
        let targets: Vec<&String> = d
            .expenses
            .iter()
            .filter(|c| pred(c))
            .map(|c| &c.expense_id)
            .collect();
        if targets.is_empty() {
            return None;
        }
        let keys: BTreeSet<(String, String)> = ep.findings.iter().map(|f| f.key()).collect();
        Some(
            targets
                .iter()
                .all(|id| keys.contains(&(id.to_string(), t.as_str().to_owned()))),
        )
    }

    pub fn instruction_checks(&self) -> Vec<InstructionCheck> {
        let p = self.current_period;
        let mut out = vec![];
        let rules = self.rules();
        let approved: BTreeSet<String> = data::approved_vendors(&rules).into_iter().collect();
        let meal = rules.meal_limit_inr;
        let status = |b: Option<bool>| match b {
            Some(true) => "passed",
            Some(false) => "failed",
            None => "not_applicable",
        };
        let findings = self.all_findings();
        let ex = Role::ExpenseSpecialist;
        let expense_gt_hit = |t: ErrorType| -> Option<bool> {
            let ep = self.episodes.get(&ex)?;
            let g = ep.full_grade.as_ref()?;
            let missed = g.missed_errors.iter().any(|k| k.error_type == t.as_str());
            ep.gt().iter().any(|x| x.error_type == t).then_some(!missed)
        };
        let prior_docs: BTreeSet<String> = self
            .history
            .iter()
            .filter(|h| h.period < p)
            .map(|h| h.document_id.clone())
            .collect();
        let prior_vendors: BTreeSet<String> = self
            .flagged_vendors
            .iter()
            .filter(|(k, _)| **k < p)
            .flat_map(|(_, v)| v.iter().cloned())
            .collect();
        let rv = self.reviews.get(&p);
        for ins in self.active_instructions() {
            let (st, detail): (&str, String) = match ins.id.as_str() {
                "POL-001" => (status(self.flagged_in(ex, |c| c.category == "Meals" && c.amount > rust_decimal::Decimal::from(meal), ErrorType::OverLimit)), format!("meal limit ₹{meal}")),
                "POL-002" => (status(self.flagged_in(ex, |c| c.category == "Travel" && c.receipt_id.is_empty(), ErrorType::MissingReceipt)), "travel without receipt".into()),
                "POL-003" => (status(self.flagged_in(ex, |c| c.date.is_weekend(), ErrorType::WeekendExpense)), "weekend claims".into()),
                "POL-004" => (status(expense_gt_hit(ErrorType::CumulativeBreach)), "monthly cumulative breach".into()),
                "POL-005" => {
                    // Like POL-001..006: every document that breaks the rule is flagged by the
                    // specialist. There is no approval error type, so any finding on the invoice
                    // counts (the gaps sit on invoices that also carry a ground-truth error).
                    let v = self.episodes.get(&Role::InvoiceSpecialist).and_then(|ep| {
                        let Documents::Invoice(d) = &ep.data.documents else { return None };
                        let gaps = data::invoice::approval_gaps(d);
                        (!gaps.is_empty()).then(|| gaps.iter().all(|id| ep.findings.iter().any(|f| f.key().0 == *id)))
                    });
                    (status(v), format!("invoices above ₹{} without two distinct approvers flagged", data::invoice::DUAL_APPROVAL_THRESHOLD_INR))
                }
                "POL-006" => (status(self.flagged_in(ex, |c| !approved.contains(&c.vendor), ErrorType::UnapprovedVendor)), "vendors off the approved list".into()),
                "POL-007" => {
                    let v = self.episodes.get(&ex).and_then(|ep| {
                        let Documents::Expense(d) = &ep.data.documents else { return None };
                        let band: BTreeSet<&String> = d.expenses.iter().filter(|c| c.category == "Meals" && c.amount > rust_decimal::Decimal::from(1500) && c.amount <= rust_decimal::Decimal::from(meal)).map(|c| &c.expense_id).collect();
                        (!band.is_empty()).then(|| !ep.findings.iter().any(|f| band.contains(&f.key().0) && f.key().1 == ErrorType::OverLimit.as_str()))
                    });
                    (status(v), "no over_limit on meals within the new limit".into())
                }
                "POL-008" => {
                    let v = self.episodes.get(&Role::InvoiceSpecialist).and_then(|ep| {
                        let Documents::Invoice(d) = &ep.data.documents else { return None };
                        let within: BTreeSet<&String> = d.invoices.iter().filter(|i| { let diff = (i.total - i.subtotal - i.gst_amount).abs(); !diff.is_zero() && diff <= rust_decimal::Decimal::ONE }).map(|i| &i.invoice_id).collect();
                        (!within.is_empty()).then(|| !ep.findings.iter().any(|f| within.contains(&f.key().0) && f.key().1 == ErrorType::TotalMismatch.as_str()))
                    });
                    (status(v), "rounding differences within ₹1 not flagged".into())
                }
                "DEP-001" | "DEP-003" | "SCH-001" | "SCH-002" => ("enforced", "guaranteed by the environment".into()),
                "DEP-002" => {
                    let earlier: BTreeSet<String> = findings.iter().filter(|(r, _)| *r != Role::FraudSpecialist).flat_map(|(_, f)| [f.document_id.trim().to_ascii_uppercase(), format!("{}:{}", f.key().0, f.key().1)]).collect();
                    let fraud: Vec<&Finding> = findings.iter().filter(|(r, _)| *r == Role::FraudSpecialist).map(|(_, f)| f).collect();
                    let v = (!fraud.is_empty()).then(|| fraud.iter().any(|f| f.evidence_refs.iter().any(|e| earlier.contains(&e.trim().to_ascii_uppercase()) || earlier.contains(e.trim()))));
                    (status(v), "fraud evidence cites earlier findings".into())
                }
                "DEP-004" => {
                    let v = (!prior_docs.is_empty()).then(|| findings.iter().any(|(_, f)| f.evidence_refs.iter().any(|e| { let u = e.trim().to_ascii_uppercase(); prior_docs.iter().any(|d| u.contains(d.as_str())) })));
                    (status(v), "current findings cite prior-period findings".into())
                }
                "DL-001" => {
                    let v = Role::SPECIALISTS.iter().all(|r| self.episodes.get(r).is_some_and(|e| e.done && e.submitted_final));
                    (status(Some(v)), "all specialists finished with submit_final".into())
                }
                "DL-002" => (status(rv.map(|_| matches!((self.last_completion_action, self.review_action), (Some(a), Some(b)) if b > a && b - a <= 2))), "review promptly after completion".into()),
                "DL-003" => (status((p == self.total_periods).then(|| Role::SPECIALISTS.iter().all(|r| self.completed.contains(r)))), "final period completed".into()),
                "ESC-001" => {
                    let fraud: Vec<(String, String)> = findings.iter().filter(|(r, _)| *r == Role::FraudSpecialist).map(|(_, f)| f.key()).collect();
                    let v = (!fraud.is_empty()).then(|| rv.is_some_and(|r| fraud.iter().all(|k| r.decisions.iter().any(|d| d.matched && d.role == Some(Role::FraudSpecialist) && (d.document_id.clone(), d.error_type.clone()) == *k))));
                    (status(v), "every fraud finding decided".into())
                }
                "ESC-002" => {
                    let big: Vec<&Finding> = findings.iter().filter(|(r, f)| self.episodes[r].data.documents.doc_info(&f.document_id).is_some_and(|(a, _)| a > rust_decimal::Decimal::from(HIGH_VALUE_INR))).map(|(_, f)| f).collect();
                    (status((!big.is_empty()).then(|| big.iter().all(|f| f.severity.unwrap_or(0.0) >= 1.5))), "high-value findings carry high severity".into())
                }
                "ESC-003" => {
                    let v = self.episodes.get(&Role::FraudSpecialist).and_then(|ep| {
                        let present: BTreeSet<String> = ep.data.documents.counterparties().intersection(&prior_vendors).cloned().collect();
                        (!present.is_empty()).then(|| present.iter().all(|v| findings.iter().any(|(r, f)| ep.data.documents.doc_info(&f.document_id).is_some_and(|(_, n)| &n == v) && *r == Role::FraudSpecialist || f.evidence_refs.iter().chain(std::iter::once(&f.description)).any(|e| e.contains(v.as_str())))))
                    });
                    (status(v), "previously flagged vendors re-reviewed".into())
                }
                "ESC-004" => {
                    let by: BTreeMap<String, Vec<Finding>> = self.period_findings().into_iter().map(|(r, f)| (r.as_str().to_string(), f)).collect();
                    let agreed = grading::agreements(&by);
                    let v = (!agreed.is_empty()).then(|| rv.is_some_and(|r| agreed.keys().all(|k| r.decisions.iter().any(|d| d.matched && (d.document_id.clone(), d.error_type.clone()) == *k))));
                    (status(v), "agreed findings decided".into())
                }
                "SCH-003" => {
                    let used: Vec<&Finding> = findings.iter().map(|(_, f)| f).filter(|f| f.field.is_some() || !f.evidence_refs.is_empty()).collect();
                    let v = (!used.is_empty()).then(|| !used.iter().any(|f| f.field.as_deref() == Some("vendor_gstin") || f.evidence_refs.iter().any(|e| e.contains("vendor_gstin"))));
                    (status(v), "no old field names after the schema change".into())
                }
                _ => ("not_applicable", String::new()),
            };
            out.push(InstructionCheck {
                id: ins.id.clone(),
                status: st.into(),
                detail,
            });
        }
        out
    }

    /// Score of the current period (computed at advance, or on demand while it runs).
    pub fn score_period(&self) -> PeriodScore {
        let p = self.current_period;
        let mut spec = BTreeMap::new();
        let mut specialist_scores = BTreeMap::new();
        let mut critical = false;
        let mut steps_used = 0u32;
        let mut steps_budget = 0u32;
        let mut change_hits = (0usize, 0usize);
        let mut memory_hits = (0usize, 0usize);
        for r in Role::SPECIALISTS {
            let t = r.task().unwrap_or(TaskId::ExpenseAudit);
            steps_budget += t.max_steps();
            match self.episodes.get(&r).filter(|e| e.done) {
                Some(ep) => {
                    let g = ep
                        .full_grade
                        .clone()
                        .unwrap_or_else(|| grading::grade(ep.gt(), &ep.findings));
                    spec.insert(r.as_str().to_string(), g.weighted_score);
                    specialist_scores.insert(r.as_str().to_string(), g.score);
                    critical |= g.critical_missed;
                    steps_used += ep.step_count;
                    let matched: BTreeSet<(String, String)> = g
                        .matched_errors
                        .iter()
                        .map(|k| (k.document_id.clone(), k.error_type.clone()))
                        .collect();
                    for it in ep.gt() {
                        let hit = matched.contains(&(
                            it.document_id.clone(),
                            it.error_type.as_str().to_string(),
                        ));
                        match it.origin {
                            GtOrigin::RuleChange | GtOrigin::Shock => {
                                change_hits.1 += 1;
                                change_hits.0 += hit as usize;
                            }
                            GtOrigin::Memory => {
                                memory_hits.1 += 1;
                                memory_hits.0 += hit as usize;
                            }
                            GtOrigin::Planted => {}
                        }
                    }
                }
                None => {
                    spec.insert(r.as_str().to_string(), 0.0);
                    specialist_scores.insert(r.as_str().to_string(), 0.0);
                    critical = true;
                    steps_used += t.max_steps();
                }
            }
        }
        let checks = self.instruction_checks();
        let applicable: Vec<&InstructionCheck> = checks
            .iter()
            .filter(|c| c.status == "passed" || c.status == "failed")
            .collect();
        let compliance = ratio(
            applicable.iter().filter(|c| c.status == "passed").count() as f64,
            applicable.len() as f64,
            0.0,
        );
        let esc3 = checks
            .iter()
            .find(|c| c.id == "ESC-003")
            .filter(|c| c.status != "not_applicable")
            .map(|c| if c.status == "passed" { 1.0 } else { 0.0 });
        let memory = if p == 1 {
            1.0
        } else {
            let mut parts = vec![];
            if memory_hits.1 > 0 {
                parts.push(memory_hits.0 as f64 / memory_hits.1 as f64);
            }
            if let Some(x) = esc3 {
                parts.push(x);
            }
            mean(parts)
        };
        let mut adapt_parts = vec![];
        if change_hits.1 > 0 {
            adapt_parts.push(change_hits.0 as f64 / change_hits.1 as f64);
        }
        for id in ["POL-007", "SCH-003"] {
            if let Some(c) = checks
                .iter()
                .find(|c| c.id == id && (c.status == "passed" || c.status == "failed"))
            {
                adapt_parts.push(if c.status == "passed" { 1.0 } else { 0.0 });
            }
        }
        let adaptation = if adapt_parts.is_empty() && p == 1 {
            1.0
        } else {
            mean(adapt_parts)
        };
        let improvement = self
            .improve_history
            .iter()
            .rev()
            .find(|r| r.accepted)
            .map(|r| (r.transfer_delta.max(0.0) * 10.0).min(1.0))
            .unwrap_or(0.0);
        let efficiency = if steps_budget == 0 {
            0.0
        } else {
            1.0 - steps_used as f64 / steps_budget as f64
        };
        let inputs = CampaignScoreInputs {
            specialist_weighted_f1: spec,
            overseer_quality: round_n(self.overseer_quality(), 4),
            instruction_compliance_rate: round_n(compliance, 4),
            memory_score: round_n(memory, 4),
            schema_adaptation_score: round_n(adaptation, 4),
            self_improvement_delta: round_n(improvement, 4),
            efficiency_score: round_n(efficiency, 4),
            critical_missed: critical,
            overseer_reviewed: self.reviews.contains_key(&p),
        };
        PeriodScore {
            period: p,
            score: grading::campaign_score(&inputs),
            inputs,
            instruction_checks: checks,
            specialist_scores,
        }
    }

    /// Campaign score: mean of the scored periods (0.01 before any period is scored).
    pub fn score(&self) -> f64 {
        if self.period_scores.is_empty() {
            return 0.01;
        }
        util::clamp_score(
            self.period_scores
                .iter()
                .map(|p| p.score.score)
                .sum::<f64>()
                / self.period_scores.len() as f64,
        )
    }

    /// Close the current period (score it) and mutate the world for the next one.
    pub fn advance(&mut self) -> Result<&'static str, AuditError> {
        self.ensure_open()?;
        self.tick();
        let ps = self.score_period();
        self.period_scores.push(ps);
        // Memory for the next period.
        let mut vendors = BTreeSet::new();
        for e in self
            .history
            .iter()
            .filter(|h| h.period == self.current_period)
        {
            if let Some(c) = &e.counterparty {
                vendors.insert(c.clone());
            }
        }
        self.flagged_vendors.insert(self.current_period, vendors);
        if let Some(ep) = self.episodes.get(&Role::ExpenseSpecialist) {
            if let Documents::Expense(d) = &ep.data.documents {
                self.prev_expense_claims = d.expenses.clone();
                self.prev_expense_gt_docs = ep.gt().iter().map(|g| g.document_id.clone()).collect();
            }
        } else {
            let d = data::generate(TaskId::ExpenseAudit, self.period_seed(), &self.rules());
            if let Documents::Expense(x) = d.documents {
                self.prev_expense_claims = x.expenses;
                self.prev_expense_gt_docs = d
                    .ground_truth
                    .iter()
                    .map(|g| g.document_id.clone())
                    .collect();
            }
        }
        if self.current_period >= self.total_periods {
            self.finished = true;
            return Ok("completed");
        }
        self.current_period += 1;
        self.episodes.clear();
        self.completed.clear();
        self.world.mid_period_rule_drops.clear();
        self.last_completion_action = None;
        self.review_action = None;
        self.period_submits = 0;
        self.active = None;
        self.sync_world();
        self.prime();
        Ok("advanced")
    }

    pub fn state(&self) -> CampaignState {
        let mut roles = BTreeMap::new();
        for r in Role::SPECIALISTS.iter().chain([Role::Overseer].iter()) {
            roles.insert(r.as_str().to_string(), r.as_str().to_string());
        }
        let mut compliance = BTreeMap::new();
        if let Some(ps) = self.period_scores.last() {
            for c in &ps.instruction_checks {
                compliance.insert(c.id.clone(), c.status == "passed" || c.status == "enforced");
            }
        }
        CampaignState {
            campaign_id: self.id.clone(),
            seed: self.seed,
            total_periods: self.total_periods,
            current_period: self.current_period,
            world_state: self.world.clone(),
            agent_roles: roles,
            period_scores: self.period_scores.clone(),
            findings_history: self.history.clone(),
            instruction_compliance: compliance,
            budget_remaining: self.budget_remaining,
            specialist_consecutive_tasks: self
                .consecutive
                .iter()
                .map(|(r, n)| (r.as_str().to_string(), *n))
                .collect(),
            regulatory_shocks_applied: self.shocks_applied.clone(),
            finished: self.finished,
        }
    }

    /// Critic input: final grades of every scored and current period, and memory gaps.
    pub fn self_improve(
        &mut self,
        train: &[u64],
        held: &[u64],
    ) -> Result<IterationRecord, AuditError> {
        improve::validate_seeds(train, held)?;
        let mut grades: Vec<(u32, String, GradeResult)> = vec![];
        for (r, e) in &self.episodes {
            if let Some(g) = &e.full_grade {
                grades.push((self.current_period, r.as_str().to_string(), g.clone()));
            }
        }
        let gaps: Vec<String> = self
            .period_scores
            .iter()
            .flat_map(|ps| {
                ps.instruction_checks
                    .iter()
                    .filter(|c| c.status == "failed" && (c.id == "ESC-003" || c.id == "DEP-004"))
                    .map(move |c| format!("period {} {}", ps.period, c.id))
            })
            .collect();
        let mut grades_all = grades;
        grades_all.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let critic = improve::critic(&grades_all, gaps);
        let (rec, cand) = improve::iterate(
            self.improve_history.len() + 1,
            &self.checklist,
            critic,
            train,
            held,
        )?;
        if let Some(c) = cand {
            self.checklist = c;
        }
        push_bounded(
            &mut self.improve_history,
            rec.clone(),
            limits::MAX_HISTORY_ENTRIES,
        );
        Ok(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perfect(c: &Campaign, r: Role) -> AuditAction {
        AuditAction {
            findings: grading::perfect_findings(c.episodes[&r].gt()),
            submit_final: Some(true),
        }
    }

    fn run_period(c: &mut Campaign) {
        for r in Role::SPECIALISTS {
            c.start_task(r).unwrap();
            loop {
                let a = perfect(c, r);
                let res = c.submit(r, a).unwrap();
                if res.done {
                    break;
                }
            }
        }
        c.review(OverseerAction::default()).unwrap();
    }

    #[test]
    fn dependency_order_and_roles() {
        let mut c = Campaign::new("c1".into(), 42, 5, 50).unwrap();
        let e = c.start_task(Role::InvoiceSpecialist).unwrap_err();
        assert!(e.to_string().contains("Dependency violation: 'invoice_specialist' requires 'expense_specialist' completed first."));
        assert!(c.start_task(Role::Overseer).is_err());
        assert_eq!(Role::parse("gst"), Some(Role::GstSpecialist));
    }

    #[test]
    fn full_campaign_mutates_world_fires_shocks_and_scores() {
        let mut c = Campaign::new("c2".into(), 42, 5, 50).unwrap();
        let mut gst_docs = vec![];
        for p in 1..=5 {
            assert_eq!(c.current_period, p);
            assert_eq!(
                c.active_instructions().len(),
                match p {
                    1 => 16,
                    2 => 19,
                    _ => 22,
                }
            );
            run_period(&mut c);
            if let Some(ep) = c.episodes.get(&Role::GstSpecialist) {
                gst_docs.push(
                    ep.data
                        .documents
                        .render(&ep.rules.schema_renames)
                        .to_string(),
                );
            }
            let st = c.advance().unwrap();
            assert_eq!(st, if p == 5 { "completed" } else { "advanced" });
        }
        assert!(c.finished);
        let ids: Vec<&str> = c.shocks_applied.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, vec!["REG-001", "REG-002", "REG-003"]);
        assert!(
            c.shocks_applied
                .iter()
                .all(|s| s.ground_truth_items_added > 0),
            "{:?}",
            c.shocks_applied
        );
        assert!(!gst_docs[0].contains("supplier_gstin\":\"") || gst_docs[0].contains("gstr2b"));
        assert!(gst_docs[2].contains("hsn_description") && !gst_docs[2].contains("vendor_gstin"));
        assert!(gst_docs[0].contains("vendor_gstin"));
        // perfect specialists + approve-all overseer score well; every period is scored
        assert_eq!(c.period_scores.len(), 5);
        assert!(
            c.score() > 0.6,
            "{:?}",
            c.period_scores.iter().map(|p| &p.score).collect::<Vec<_>>()
        );
        assert!(c.advance().is_err(), "finished campaigns stay finished");
    }

    fn check(c: &Campaign, id: &str) -> InstructionCheck {
        c.instruction_checks()
            .into_iter()
            .find(|x| x.id == id)
            .unwrap()
    }

    #[test]
    fn overseer_review_waits_for_every_specialist() {
        let mut c = Campaign::new("c-dep3".into(), 42, 2, 50).unwrap();
        let e = c.review(OverseerAction::default()).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Conflict);
        assert_eq!(e.code(), "dependency_violation");
        let msg = e.to_string();
        assert!(msg.starts_with("Dependency violation: 'overseer' requires 'expense_specialist', 'invoice_specialist', 'gst_specialist', 'fraud_specialist' completed first"), "{msg}");
        for (k, r) in Role::SPECIALISTS.into_iter().enumerate() {
            c.start_task(r).unwrap();
            let a = perfect(&c, r);
            assert!(c.submit(r, a).unwrap().done);
            if k < 3 {
                let msg = c.review(OverseerAction::default()).unwrap_err().to_string();
                for (j, other) in Role::SPECIALISTS.into_iter().enumerate() {
                    assert_eq!(
                        msg.contains(&format!("'{}'", other.as_str())),
                        j > k,
                        "{msg}"
                    );
                }
                assert!(c.reviews.is_empty(), "a rejected review stores nothing");
                assert!(c.review_action.is_none());
            }
        }
        let rv = c.review(OverseerAction::default()).unwrap();
        assert!(rv.all_specialists_complete);
        assert_eq!(check(&c, "DEP-003").status, "enforced");
        // The next period starts over: reviewing before its specialists finish is refused again.
        c.advance().unwrap();
        assert!(c.review(OverseerAction::default()).is_err());
    }

    #[test]
    fn pol005_is_checked_from_the_approval_records() {
        for seed in [42u64, 43, 44, 100] {
            let mut c = Campaign::new("c-pol5".into(), seed, 1, 50).unwrap();
            assert_eq!(
                check(&c, "POL-005").status,
                "not_applicable",
                "no invoice episode yet"
            );
            c.submit(Role::ExpenseSpecialist, AuditAction::default())
                .unwrap();
            c.start_task(Role::InvoiceSpecialist).unwrap();
            assert_eq!(
                check(&c, "POL-005").status,
                "failed",
                "seed {seed}: nothing flagged yet"
            );
            let Documents::Invoice(d) = &c.episodes[&Role::InvoiceSpecialist].data.documents else {
                panic!()
            };
            let gaps = data::invoice::approval_gaps(d);
            assert!(!gaps.is_empty(), "seed {seed}");
            let gt = c.episodes[&Role::InvoiceSpecialist].gt().to_vec();
            // Every erroneous invoice but one approval gap flagged: failed.
            let most: Vec<Finding> = grading::perfect_findings(&gt)
                .into_iter()
                .filter(|f| f.document_id != gaps[0])
                .collect();
            let mut c2 = c.clone();
            c2.submit(
                Role::InvoiceSpecialist,
                AuditAction {
                    findings: most,
                    submit_final: Some(true),
                },
            )
            .unwrap();
            assert_eq!(check(&c2, "POL-005").status, "failed", "seed {seed}");
            // Every gap flagged, whatever the type: passed (and graded like any other finding).
            let f: Vec<Finding> = gaps
                .iter()
                .map(|g| Finding::new(g, "vendor_mismatch"))
                .collect();
            let res = c
                .submit(
                    Role::InvoiceSpecialist,
                    AuditAction {
                        findings: f,
                        submit_final: Some(true),
                    },
                )
                .unwrap();
            assert_eq!(check(&c, "POL-005").status, "passed", "seed {seed}");
            let g = res.grader.unwrap();
            assert_eq!(
                g.true_positives + g.partial_matches + g.false_positives,
                gaps.len()
            );
            let ps = c.score_period();
            assert!(ps
                .instruction_checks
                .iter()
                .any(|x| x.id == "POL-005" && x.status == "passed"));
        }
    }

    #[test]
    fn time_advances_one_month_per_period_and_ground_truth_stays_consistent() {
        let mut c = Campaign::new("c-dates".into(), 44, 5, 50).unwrap();
        for p in 1..=5u32 {
            let today = util::period_reference_date(p);
            assert_eq!(c.world.current_date, today);
            assert_eq!(c.rules().today, today);
            run_period(&mut c);
            for (role, ep) in &c.episodes {
                // Documents (with every shock delivered this period) agree with the rule checker.
                let prior: BTreeSet<String> = ep
                    .rules
                    .carry_over_claim
                    .iter()
                    .map(|x| x.receipt_id.clone())
                    .collect();
                let mut detected = data::detect_all(&ep.data.documents, &prior);
                detected.sort();
                let mut gt: Vec<(String, ErrorType)> = ep
                    .gt()
                    .iter()
                    .map(|g| (g.document_id.clone(), g.error_type))
                    .collect();
                gt.sort();
                assert_eq!(detected, gt, "period {p} {}", role.as_str());
                match &ep.data.documents {
                    Documents::Gst(d) => {
                        assert_eq!(d.context.current_date, today);
                        assert!(d.purchase_register.iter().all(|b| b.date <= today));
                        for n in &d.context.rate_notices {
                            assert_eq!(
                                n.effective_from,
                                data::gst::it_rate_change_date(),
                                "REG-001 date is fixed"
                            );
                        }
                    }
                    Documents::Fraud(d) => assert_eq!(d.audit_context.audit_period_end, today),
                    Documents::Expense(d) => assert!(d.expenses.iter().all(|e| e.date <= today)),
                    Documents::Invoice(d) => assert!(d
                        .invoices
                        .iter()
                        .all(|i| i.date <= today && i.approvals.iter().all(|a| a.date <= today))),
                }
            }
            c.advance().unwrap();
        }
        let reg1 = c.shocks_applied.iter().find(|s| s.id == "REG-001").unwrap();
        assert!(reg1.ground_truth_items_added > 0);
    }

    #[test]
    fn empty_specialists_trigger_the_floor() {
        let mut c = Campaign::new("c3".into(), 42, 2, 50).unwrap();
        for r in Role::SPECIALISTS {
            let res = c.submit(r, AuditAction::default()).unwrap();
            assert!(res.done);
        }
        c.advance().unwrap();
        assert_eq!(c.period_scores[0].score.score, 0.01);
        assert!(c.period_scores[0].score.specialist_floor_triggered);
    }

    #[test]
    fn same_seed_same_campaign() {
        let run = || {
            let mut c = Campaign::new("x".into(), 43, 3, 50).unwrap();
            run_period(&mut c);
            c.advance().unwrap();
            serde_json::to_string(&c.state()).unwrap()
        };
        assert_eq!(run(), run());
    }
}
