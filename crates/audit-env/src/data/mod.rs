//! Seeded synthetic data for the four tasks, with planted errors and rule checkers.

/// A generator's own enumeration of the error types it plants by drawing them: exactly those,
/// in draw order, each named as its [`ErrorType`] variant (`error_type` maps it, so a misspelt
/// name does not compile). A planter matches on it with no catch-all arm: a type added here is
/// a compile error until it is planted, and a type of the task missing here fails
/// `tests::every_task_plants_each_of_its_error_types`.
macro_rules! planted_types {
    ($(#[$meta:meta])* $name:ident { $( $v:ident ),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum $name { $( $v, )* }

        impl $name {
            /// Every type, in draw order.
            pub(crate) const ALL: [$name; [$( $name::$v ),*].len()] = [$( $name::$v ),*];

            /// The error type it plants.
            pub(crate) const fn error_type(self) -> crate::model::ErrorType {
                match self { $( $name::$v => crate::model::ErrorType::$v, )* }
            }
        }
    };
}

pub mod expense;
pub mod fraud;
pub mod gst;
pub mod invoice;

use std::collections::{BTreeMap, BTreeSet};

use rust_decimal::Decimal;
use serde_json::Value;

use crate::model::{ErrorType, GtItem, TaskId, WorldRules};

pub const VENDOR_NAMES: [&str; 20] = [
    "Reliance Office Supplies",
    "Tata Stationery Co.",
    "Infosys Catering",
    "Wipro Tech Solutions",
    "Mahindra Logistics",
    "HCL Furniture",
    "Bajaj Electronics",
    "Godrej Interiors",
    "Larsen & Toubro Services",
    "Adani Power Solutions",
    "Bharti Telecom",
    "Sun Pharma Supplies",
    "ITC Foods",
    "Asian Paints",
    "Hindustan Unilever Services",
    "Tech Mahindra Solutions",
    "JSW Steel Trading",
    "Vedanta Resources",
    "ONGC Services",
    "BPCL Petroleum",
];

pub const EMPLOYEE_NAMES: [&str; 15] = [
    "Rajesh Kumar",
    "Priya Sharma",
    "Amit Patel",
    "Sunita Gupta",
    "Vikram Singh",
    "Neha Verma",
    "Arjun Reddy",
    "Kavita Iyer",
    "Rahul Mehta",
    "Deepa Nair",
    "Ananya Krishnan",
    "Rohit Malhotra",
    "Sanjay Deshmukh",
    "Meera Pillai",
    "Karthik Subramaniam",
];

pub const BASE_APPROVED_VENDORS: [&str; 10] = [
    "Reliance Office Supplies",
    "Tata Stationery Co.",
    "Wipro Tech Solutions",
    "Mahindra Logistics",
    "HCL Furniture",
    "Bajaj Electronics",
    "Godrej Interiors",
    "ITC Foods",
    "Sun Pharma Supplies",
    "Asian Paints",
];

/// The vendor onboarded in period 2 of a campaign.
pub const ONBOARDED_VENDOR: &str = "Zenith Office Mart";

pub fn approved_vendors(rules: &WorldRules) -> Vec<String> {
    let mut v: Vec<String> = BASE_APPROVED_VENDORS
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend(rules.onboarded_vendors.iter().cloned());
    v.retain(|x| !rules.suspended_vendors.contains(x));
    v
}

/// Ground truth in document order, then type order (the order every generator returns).
fn sort_ground_truth(gt: &mut [GtItem]) {
    gt.sort_by(|a, b| (&a.document_id, a.error_type).cmp(&(&b.document_id, b.error_type)));
}

/// Typed documents of one task.
#[derive(Debug, Clone, PartialEq)]
pub enum Documents {
    Expense(expense::ExpenseDocs),
    Invoice(invoice::InvoiceDocs),
    Gst(gst::GstDocs),
    Fraud(fraud::FraudDocs),
}

/// One generated task instance: documents plus hidden ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskData {
    pub task: TaskId,
    pub seed: u64,
    pub documents: Documents,
    pub ground_truth: Vec<GtItem>,
}

pub fn generate(task: TaskId, seed: u64, rules: &WorldRules) -> TaskData {
    let (documents, ground_truth) = match task {
        TaskId::ExpenseAudit => {
            let (d, g) = expense::generate(seed, rules);
            (Documents::Expense(d), g)
        }
        TaskId::InvoiceMatch => {
            let (d, g) = invoice::generate(seed, rules);
            (Documents::Invoice(d), g)
        }
        TaskId::GstReconciliation => {
            let (d, g) = gst::generate(seed, rules);
            (Documents::Gst(d), g)
        }
        TaskId::FraudDetection => {
            let (d, g) = fraud::generate(seed, rules);
            (Documents::Fraud(d), g)
        }
    };
    TaskData {
        task,
        seed,
        documents,
        ground_truth,
    }
}

impl Documents {
    /// The JSON view the agent sees, with schema renames applied at every depth.
    pub fn render(&self, renames: &BTreeMap<String, String>) -> Value {
        let v = match self {
            Documents::Expense(d) => serde_json::to_value(d),
            Documents::Invoice(d) => serde_json::to_value(d),
            Documents::Gst(d) => serde_json::to_value(d),
            Documents::Fraud(d) => serde_json::to_value(d),
        }
        .unwrap_or(Value::Null);
        rename_keys(v, renames)
    }

    /// Every document id an agent may cite.
    pub fn document_ids(&self) -> BTreeSet<String> {
        match self {
            Documents::Expense(d) => d.expenses.iter().map(|e| e.expense_id.clone()).collect(),
            Documents::Invoice(d) => d
                .invoices
                .iter()
                .map(|i| i.invoice_id.clone())
                .chain(d.purchase_orders.iter().map(|p| p.po_id.clone()))
                .chain(d.grns.iter().map(|g| g.grn_id.clone()))
                .collect(),
            Documents::Gst(d) => d
                .purchase_register
                .iter()
                .map(|b| b.invoice_no.clone())
                .chain(d.gstr2b.iter().map(|g| g.invoice_no.clone()))
                .collect(),
            Documents::Fraud(d) => d
                .transactions
                .iter()
                .map(|t| t.txn_id.clone())
                .chain(d.vendor_registry.iter().map(|v| v.vendor_id.clone()))
                .collect(),
        }
    }

    /// Amount and counterparty of a document (for escalation and memory checks).
    pub fn doc_info(&self, id: &str) -> Option<(Decimal, String)> {
        let id = id.trim().to_ascii_uppercase();
        match self {
            Documents::Expense(d) => d
                .expenses
                .iter()
                .find(|e| e.expense_id == id)
                .map(|e| (e.amount, e.vendor.clone())),
            Documents::Invoice(d) => d
                .invoices
                .iter()
                .find(|i| i.invoice_id == id)
                .map(|i| (i.total, i.vendor.clone())),
            Documents::Gst(d) => d
                .purchase_register
                .iter()
                .find(|b| b.invoice_no == id)
                .map(|b| (b.total, b.vendor_name.clone())),
            Documents::Fraud(d) => d
                .transactions
                .iter()
                .find(|t| t.txn_id == id)
                .map(|t| (t.amount, t.vendor_name.clone())),
        }
    }

    /// Every counterparty name appearing in the documents.
    pub fn counterparties(&self) -> BTreeSet<String> {
        match self {
            Documents::Expense(d) => d.expenses.iter().map(|e| e.vendor.clone()).collect(),
            Documents::Invoice(d) => d.invoices.iter().map(|i| i.vendor.clone()).collect(),
            Documents::Gst(d) => d
                .purchase_register
                .iter()
                .map(|b| b.vendor_name.clone())
                .collect(),
            Documents::Fraud(d) => d
                .transactions
                .iter()
                .map(|t| t.vendor_name.clone())
                .collect(),
        }
    }

    pub fn categories(&self) -> Vec<&'static str> {
        match self {
            Documents::Expense(_) => vec!["expenses", "policy"],
            Documents::Invoice(_) => vec!["purchase_orders", "grns", "invoices"],
            Documents::Gst(_) => vec!["purchase_register", "gstr2b", "context"],
            Documents::Fraud(_) => vec!["transactions", "vendor_registry", "audit_context"],
        }
    }
}

/// Recursively rename object keys (values untouched), in objects and arrays alike.
pub fn rename_keys(v: Value, renames: &BTreeMap<String, String>) -> Value {
    if renames.is_empty() {
        return v;
    }
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    (
                        renames.get(&k).cloned().unwrap_or(k),
                        rename_keys(v, renames),
                    )
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| rename_keys(x, renames)).collect()),
        other => other,
    }
}

/// Exact rule checker over the documents (the consistency validator): every violation the
/// documents show under the rules in force. `prior_receipts` carries cross-period memory.
pub fn detect_all(docs: &Documents, prior_receipts: &BTreeSet<String>) -> Vec<(String, ErrorType)> {
    match docs {
        Documents::Expense(d) => expense::detect(d, prior_receipts),
        Documents::Invoice(d) => invoice::detect(d),
        Documents::Gst(d) => gst::detect(d),
        Documents::Fraud(d) => fraud::detect(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TRAIN_SEEDS;

    fn gt_pairs(d: &TaskData) -> Vec<(String, ErrorType)> {
        let mut v: Vec<_> = d
            .ground_truth
            .iter()
            .map(|g| (g.document_id.clone(), g.error_type))
            .collect();
        v.sort();
        v
    }

    /// Each task's generator plants every error type of its task (`TaskId::error_types`): a
    /// type added to the table and its task's list but planted by no generator fails here. The
    /// tasks whose whole list is drawn draw it in the list's order.
    #[test]
    fn every_task_plants_each_of_its_error_types() {
        let drawn = |all: &[ErrorType]| all.to_vec();
        assert_eq!(
            drawn(&expense::ExpensePlant::ALL.map(|p| p.error_type())),
            TaskId::ExpenseAudit.error_types()
        );
        assert_eq!(
            drawn(&fraud::FraudPlant::ALL.map(|p| p.error_type())),
            TaskId::FraudDetection.error_types()
        );
        for task in TaskId::ALL {
            let mut seen = BTreeSet::new();
            for seed in 0..40 {
                let d = generate(task, seed, &WorldRules::default());
                seen.extend(d.ground_truth.iter().map(|g| g.error_type));
            }
            let listed: BTreeSet<ErrorType> = task.error_types().iter().copied().collect();
            let never: Vec<&ErrorType> = listed.difference(&seen).collect();
            assert!(never.is_empty(), "{task}: never planted: {never:?}");
            assert!(
                seen.iter().all(|t| t.family().task() == task),
                "{task}: {seen:?}"
            );
        }
    }

    #[test]
    fn sizes_counts_and_consistency_for_all_seeds() {
        let rules = WorldRules::default();
        for seed in TRAIN_SEEDS
            .chain(crate::model::HELD_OUT_SEEDS)
            .chain([0, 7, 99, 12345])
        {
            for task in TaskId::ALL {
                let d = generate(task, seed, &rules);
                assert_eq!(d.ground_truth.len(), task.gt_count(), "{task} seed {seed}");
                match &d.documents {
                    Documents::Expense(x) => assert_eq!(x.expenses.len(), 19),
                    Documents::Invoice(x) => {
                        assert_eq!(
                            (x.purchase_orders.len(), x.grns.len(), x.invoices.len()),
                            (10, 10, 12)
                        )
                    }
                    Documents::Gst(x) => {
                        assert_eq!((x.purchase_register.len(), x.gstr2b.len()), (45, 44))
                    }
                    Documents::Fraud(x) => {
                        assert_eq!((x.transactions.len(), x.vendor_registry.len()), (84, 26))
                    }
                }
                let detected = detect_all(&d.documents, &BTreeSet::new());
                assert_eq!(
                    detected,
                    gt_pairs(&d),
                    "{task} seed {seed}: checker and planted GT disagree"
                );
                let ids = d.documents.document_ids();
                for g in &d.ground_truth {
                    assert!(
                        ids.contains(&g.document_id),
                        "{task} {seed}: GT doc {} missing",
                        g.document_id
                    );
                }
            }
        }
    }

    /// Every date-like string in a rendered document tree.
    fn dates_in(v: &Value, out: &mut Vec<crate::util::Date>) {
        match v {
            Value::String(s) => out.extend(crate::util::Date::parse(s)),
            Value::Array(a) => a.iter().for_each(|x| dates_in(x, out)),
            Value::Object(m) => m.values().for_each(|x| dates_in(x, out)),
            _ => {}
        }
    }

    #[test]
    fn time_moves_forward_and_rules_still_agree_with_ground_truth() {
        use crate::util::period_reference_date;
        for task in TaskId::ALL {
            for seed in TRAIN_SEEDS.chain([100, 104, 7]) {
                let mut prev_median: Option<f64> = None;
                // Every weekday as "today" too: generators must not assume the reference Thursday.
                for k in 1..=6 {
                    let today = crate::util::REFERENCE_DATE.add_days(k);
                    let d = generate(
                        task,
                        seed,
                        &WorldRules {
                            today,
                            ..WorldRules::default()
                        },
                    );
                    assert_eq!(
                        detect_all(&d.documents, &BTreeSet::new()),
                        gt_pairs(&d),
                        "{task} seed {seed} today {today}"
                    );
                }
                for p in 1..=6u32 {
                    let today = period_reference_date(p);
                    let rules = WorldRules {
                        today,
                        ..WorldRules::default()
                    };
                    let d = generate(task, seed, &rules);
                    assert_eq!(
                        d.ground_truth.len(),
                        task.gt_count(),
                        "{task} seed {seed} period {p}"
                    );
                    let detected = detect_all(&d.documents, &BTreeSet::new());
                    assert_eq!(
                        detected,
                        gt_pairs(&d),
                        "{task} seed {seed} period {p} ({today}): checker and planted GT disagree"
                    );
                    let mut dates = vec![];
                    dates_in(&d.documents.render(&BTreeMap::new()), &mut dates);
                    assert!(!dates.is_empty());
                    assert!(
                        dates.iter().all(|x| *x <= today),
                        "{task} seed {seed} period {p}: a date after {today}"
                    );
                    dates.sort();
                    let median = dates[dates.len() / 2].0 as f64;
                    if let Some(m) = prev_median {
                        let shift = median - m;
                        assert!(
                            (15.0..=45.0).contains(&shift),
                            "{task} seed {seed} period {p}: median date moved {shift:.1} days"
                        );
                    }
                    prev_median = Some(median);
                }
            }
        }
    }

    #[test]
    fn date_relative_rules_follow_today() {
        use crate::util::{period_reference_date, REFERENCE_DATE};
        // Every campaign rule switched on, at each period's date: still consistent.
        for p in 1..=5u32 {
            let today = period_reference_date(p);
            let rules = WorldRules {
                today,
                meal_limit_inr: 2000,
                onboarded_vendors: vec![ONBOARDED_VENDOR.into()],
                suspended_vendors: vec!["Asian Paints".into()],
                it_services_rate_pct: Some(12),
                emit_it_services: true,
                schema_version: 2,
                cash_upi_threshold_inr: Some(20_000),
                emit_cash_payments: true,
                new_vendor_risk_months: Some(6),
                fraud_level: 3,
                ..WorldRules::default()
            };
            for seed in TRAIN_SEEDS {
                for task in TaskId::ALL {
                    let d = generate(task, seed, &rules);
                    assert_eq!(
                        detect_all(&d.documents, &BTreeSet::new()),
                        gt_pairs(&d),
                        "{task} seed {seed} period {p}"
                    );
                }
                if let Documents::Gst(x) =
                    generate(TaskId::GstReconciliation, seed, &rules).documents
                {
                    assert_eq!(x.context.current_date, today);
                    let eff = gst::it_effective_date(today);
                    assert!(
                        eff < today
                            && x.context
                                .rate_notices
                                .iter()
                                .all(|n| n.effective_from == eff)
                    );
                }
                if let Documents::Fraud(x) =
                    generate(TaskId::FraudDetection, seed, &rules).documents
                {
                    assert_eq!(
                        (
                            x.audit_context.audit_period_start,
                            x.audit_context.audit_period_end
                        ),
                        (today.days_before(fraud::AUDIT_WINDOW_DAYS), today)
                    );
                }
            }
        }
        // The rules really are evaluated against the shifted date: the same GST books judged on
        // the unshifted date lose late claims (ITC window) for some seeds.
        let today = period_reference_date(4);
        let mut differs = 0;
        for seed in TRAIN_SEEDS {
            if let Documents::Gst(x) = generate(
                TaskId::GstReconciliation,
                seed,
                &WorldRules {
                    today,
                    ..WorldRules::default()
                },
            )
            .documents
            {
                let mut stale = x.clone();
                stale.context.current_date = REFERENCE_DATE;
                differs += (gst::detect(&stale) != gst::detect(&x)) as usize;
            }
        }
        assert!(differs > 0, "late_claim must depend on the current date");
        // REG-001's effective date is a calendar date: fixed from the shock period on.
        let eff = gst::it_rate_change_date();
        assert_eq!(
            eff,
            period_reference_date(3).days_before(gst::IT_RATE_EFFECTIVE_DAYS_AGO)
        );
        for p in 3..=6 {
            assert_eq!(gst::it_effective_date(period_reference_date(p)), eff);
        }
        assert_eq!(
            gst::it_effective_date(REFERENCE_DATE),
            REFERENCE_DATE.days_before(gst::IT_RATE_EFFECTIVE_DAYS_AGO)
        );
    }

    #[test]
    fn fraud_levels_stay_consistent() {
        for level in 1..=5u8 {
            for p in 1..=5u32 {
                let rules = WorldRules {
                    fraud_level: level,
                    today: crate::util::period_reference_date(p),
                    ..WorldRules::default()
                };
                for seed in [42u64, 45, 100] {
                    let d = generate(TaskId::FraudDetection, seed, &rules);
                    assert_eq!(
                        detect_all(&d.documents, &BTreeSet::new()),
                        gt_pairs(&d),
                        "level {level} period {p} seed {seed}"
                    );
                }
            }
            let rules = WorldRules {
                fraud_level: level,
                ..WorldRules::default()
            };
            for seed in 0..12u64 {
                let d = generate(TaskId::FraudDetection, seed, &rules);
                assert_eq!(d.ground_truth.len(), 10);
                assert_eq!(
                    detect_all(&d.documents, &BTreeSet::new()),
                    gt_pairs(&d),
                    "level {level} seed {seed}"
                );
            }
        }
    }

    #[test]
    fn planted_errors_vary_with_seed_not_only_values() {
        for task in TaskId::ALL {
            let sets: BTreeSet<Vec<(String, ErrorType)>> = TRAIN_SEEDS
                .map(|s| gt_pairs(&generate(task, s, &WorldRules::default())))
                .collect();
            assert!(
                sets.len() >= 8,
                "{task}: only {} distinct GT sets over 10 seeds",
                sets.len()
            );
            let type_sets: BTreeSet<Vec<ErrorType>> = TRAIN_SEEDS
                .map(|s| {
                    gt_pairs(&generate(task, s, &WorldRules::default()))
                        .into_iter()
                        .map(|x| x.1)
                        .collect()
                })
                .collect();
            assert!(type_sets.len() >= 2, "{task}: type mix never changes");
        }
    }

    #[test]
    fn same_seed_same_bytes() {
        for task in TaskId::ALL {
            let a = generate(task, 42, &WorldRules::default());
            let b = generate(task, 42, &WorldRules::default());
            assert_eq!(a, b);
            let ra = serde_json::to_string(&a.documents.render(&BTreeMap::new())).unwrap();
            let rb = serde_json::to_string(&b.documents.render(&BTreeMap::new())).unwrap();
            assert_eq!(ra, rb);
            assert_ne!(a, generate(task, 43, &WorldRules::default()));
        }
    }

    #[test]
    fn gstins_are_valid_where_not_planted_invalid() {
        for seed in TRAIN_SEEDS {
            let d = generate(TaskId::InvoiceMatch, seed, &WorldRules::default());
            if let Documents::Invoice(x) = &d.documents {
                assert!(x
                    .purchase_orders
                    .iter()
                    .all(|p| crate::util::gstin_is_valid(&p.vendor_gstin)));
            }
            let d = generate(TaskId::FraudDetection, seed, &WorldRules::default());
            if let Documents::Fraud(x) = &d.documents {
                assert!(x
                    .vendor_registry
                    .iter()
                    .all(|v| crate::util::gstin_is_valid(&v.gstin)));
            }
        }
    }

    #[test]
    fn rename_keys_renames_nested() {
        let v = serde_json::json!({"a": [{"vendor_gstin": "X", "n": {"vendor_gstin": 1}}], "vendor_gstin": "vendor_gstin"});
        let m: BTreeMap<String, String> =
            [("vendor_gstin".to_string(), "supplier_gstin".to_string())].into();
        let r = rename_keys(v, &m);
        assert_eq!(r["a"][0]["supplier_gstin"], "X");
        assert_eq!(r["a"][0]["n"]["supplier_gstin"], 1);
        assert_eq!(r["supplier_gstin"], "vendor_gstin");
    }
}
