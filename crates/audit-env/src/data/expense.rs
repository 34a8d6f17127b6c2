//! Task 1 — expense claims against a policy document.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{approved_vendors, EMPLOYEE_NAMES};
pub use crate::model::ExpenseClaim;
use crate::model::{ErrorType, GtItem, GtOrigin, WorldRules};
use crate::util::{self, Date, Rng8};

pub const CLAIM_COUNT: usize = 19;
pub const CUMULATIVE_MONTHLY_LIMIT_INR: i64 = 50_000;
/// Headroom kept for every employee-month except the planted breach.
const SAFE_MONTH_TOTAL_INR: i64 = 40_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryRule {
    pub daily_limit: i64,
    pub receipt_required_above: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub company: String,
    pub effective_date: String,
    pub policy_version: u32,
    pub rules: BTreeMap<String, CategoryRule>,
    pub general_rules: Vec<String>,
    pub approved_vendors: Vec<String>,
    pub cumulative_monthly_limit: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpenseDocs {
    pub expenses: Vec<ExpenseClaim>,
    pub policy: Policy,
}

pub const CATEGORIES: [(&str, i64, i64); 10] = [
    ("Travel", 5000, 500),
    ("Meals", 1500, 500),
    ("Office Supplies", 10000, 500),
    ("Software", 50000, 0),
    ("Equipment", 100000, 0),
    ("Training", 25000, 500),
    ("Communication", 2000, 500),
    ("Accommodation", 8000, 0),
    ("Transport", 3000, 500),
    ("Miscellaneous", 2000, 500),
];

const UNAPPROVED_VENDORS: [&str; 4] = [
    "QuickPrint Unofficial Store",
    "Metro Gadget Bazaar",
    "Corner Cafe Express",
    "Sunrise Travels (unregistered)",
];
const PERSONAL_ITEMS: [&str; 4] = [
    "personal wireless earbuds",
    "personal gym membership",
    "personal smartwatch",
    "personal home furniture",
];

pub fn policy_for(rules: &WorldRules) -> Policy {
    let mut map = BTreeMap::new();
    for (c, lim, rec) in CATEGORIES {
        let lim = if c == "Meals" {
            rules.meal_limit_inr
        } else {
            lim
        };
        map.insert(
            c.to_string(),
            CategoryRule {
                daily_limit: lim,
                receipt_required_above: rec,
            },
        );
    }
    Policy {
        company: "Acme Financial Services Pvt. Ltd.".into(),
        effective_date: "2025-01-01".into(),
        policy_version: rules.fiscal_period,
        rules: map,
        general_rules: vec![
            "Weekend expenses require prior written manager approval and are flagged for review.".into(),
            "One claim per receipt: a receipt already reimbursed (in this or an earlier period) may not be claimed again.".into(),
            "Vendors must be on the approved vendor list in force on the claim date.".into(),
            "Personal expenses are not reimbursable under any business category.".into(),
            format!("Cumulative claims per employee per calendar month must not exceed ₹{CUMULATIVE_MONTHLY_LIMIT_INR}."),
        ],
        approved_vendors: approved_vendors(rules),
        cumulative_monthly_limit: CUMULATIVE_MONTHLY_LIMIT_INR,
    }
}

fn limit_of(policy: &Policy, cat: &str) -> (i64, i64) {
    policy
        .rules
        .get(cat)
        .map(|r| (r.daily_limit, r.receipt_required_above))
        .unwrap_or((0, 0))
}

/// A planted error: its type, where its ground truth comes from, and the reason shown.
type Planted = (ErrorType, GtOrigin, String);

struct Builder<'a> {
    rng: &'a mut Rng8,
    rows: Vec<(ExpenseClaim, Option<Planted>)>,
    month_totals: BTreeMap<(String, (i32, u32)), i64>,
    used_receipts: BTreeSet<String>,
    reserved: BTreeSet<String>,
    approved: Vec<String>,
    /// "Today" of the data set (moves forward one month per campaign period).
    today: Date,
}

impl Builder<'_> {
    fn receipt(&mut self) -> String {
        loop {
            let r = format!("RCP-{}", self.rng.random_range(10000..=99999));
            if self.used_receipts.insert(r.clone()) {
                return r;
            }
        }
    }
    fn weekday_date(&mut self, lo: i32, hi: i32) -> Date {
        self.today
            .days_before(self.rng.random_range(lo..=hi))
            .back_to_weekday()
    }
    /// An employee whose month total stays within the safe headroom after `amount`.
    fn employee_for(&mut self, date: Date, amount: i64) -> String {
        for _ in 0..200 {
            let e = util::pick(self.rng, &EMPLOYEE_NAMES).to_string();
            if self.reserved.contains(&e) {
                continue;
            }
            let t = self
                .month_totals
                .get(&(e.clone(), date.month_key()))
                .copied()
                .unwrap_or(0);
            if t + amount <= SAFE_MONTH_TOTAL_INR {
                return e;
            }
        }
        // Fall back to the least-loaded unreserved employee (always fits: 19 claims × ≤ 10k).
        EMPLOYEE_NAMES
            .iter()
            .filter(|e| !self.reserved.contains(**e))
            .min_by_key(|e| {
                self.month_totals
                    .get(&(e.to_string(), date.month_key()))
                    .copied()
                    .unwrap_or(0)
            })
            .map(|e| e.to_string())
            .unwrap_or_else(|| EMPLOYEE_NAMES[0].to_string())
    }
    fn push(&mut self, c: ExpenseClaim, tag: Option<(ErrorType, GtOrigin, String)>) {
        let amt = util::dec_f64(c.amount) as i64;
        *self
            .month_totals
            .entry((c.employee.clone(), c.date.month_key()))
            .or_default() += amt;
        if !c.receipt_id.is_empty() {
            self.used_receipts.insert(c.receipt_id.clone());
        }
        self.rows.push((c, tag));
    }
    #[allow(clippy::too_many_arguments)] // one argument per claim column
    fn claim(
        &mut self,
        date: Date,
        employee: String,
        cat: &str,
        amount: i64,
        desc: String,
        receipt: String,
        vendor: String,
    ) -> ExpenseClaim {
        ExpenseClaim {
            expense_id: String::new(),
            date,
            employee,
            category: cat.into(),
            amount: Decimal::from(amount),
            description: desc,
            receipt_id: receipt,
            vendor,
        }
    }
    fn approved_vendor(&mut self) -> String {
        util::pick(self.rng, &self.approved).clone()
    }
    /// Push a claim dated `date` by an employee whose month stays within the headroom, with a
    /// fresh receipt, from `vendor` (`None`: an approved vendor drawn after the receipt).
    fn push_claim(
        &mut self,
        date: Date,
        cat: &str,
        amount: i64,
        desc: String,
        vendor: Option<&str>,
        tag: Option<Planted>,
    ) -> ExpenseClaim {
        let employee = self.employee_for(date, amount);
        let receipt = self.receipt();
        let vendor = match vendor {
            Some(v) => v.to_owned(),
            None => self.approved_vendor(),
        };
        let c = self.claim(date, employee, cat, amount, desc, receipt, vendor);
        self.push(c.clone(), tag);
        c
    }
}

/// Choose the multiset of planted types: every seed differs in which types and how many of each.
pub(crate) fn draw_type_mix<T: Copy>(
    rng: &mut Rng8,
    base: &[T],
    slots: usize,
    fixed: &[T],
) -> Vec<T> {
    let mut out: Vec<T> = fixed.to_vec();
    let free = slots.saturating_sub(out.len());
    let mut pool: Vec<T> = base.to_vec();
    util::shuffle(rng, &mut pool);
    let min_distinct = free.saturating_sub(2).max(1).min(pool.len());
    let distinct = rng.random_range(min_distinct..=free.min(pool.len()).max(min_distinct));
    let chosen: Vec<T> = pool.into_iter().take(distinct).collect();
    out.extend(chosen.iter().copied());
    while out.len() < slots {
        out.push(*util::pick(rng, &chosen));
    }
    out
}

/// The boundary meal: compliant or over the limit depending on the meal limit in force.
fn boundary_meal(b: &mut Builder<'_>, rules: &WorldRules, amount: i64, is_error: bool) {
    let (boundary_amount, boundary_is_error, meal_limit) = (amount, is_error, rules.meal_limit_inr);
    let d = b.weekday_date(5, 40);
    let tag = boundary_is_error.then(|| {
        let origin = if rules.fiscal_period > 1 || meal_limit != 1500 {
            GtOrigin::RuleChange
        } else {
            GtOrigin::Planted
        };
        (
            ErrorType::OverLimit,
            origin,
            format!("Meals claim {boundary_amount} exceeds the ₹{meal_limit} limit"),
        )
    });
    let desc = "Team dinner with client".into();
    b.push_claim(d, "Meals", boundary_amount, desc, Some("ITC Foods"), tag);
}

/// A claim from a suspended vendor (vendor under investigation).
fn suspended_vendor_claim(b: &mut Builder<'_>, v: &str) {
    let d = b.weekday_date(5, 40);
    let amt = b.rng.random_range(800..=4000);
    let tag = (
        ErrorType::UnapprovedVendor,
        GtOrigin::RuleChange,
        format!("vendor {v} is suspended (under investigation)"),
    );
    let desc = "Printer cartridges".into();
    b.push_claim(d, "Office Supplies", amt, desc, Some(v), Some(tag));
}

/// Red herrings: a meal exactly at the limit and a Friday meal just under it.
fn red_herrings(b: &mut Builder<'_>, meal_limit: i64) {
    let d = b
        .today
        .days_before(b.rng.random_range(5..=30))
        .back_to_weekday();
    let desc = "Client lunch (exactly at the limit)".into();
    b.push_claim(d, "Meals", meal_limit, desc, Some("ITC Foods"), None);
    let mut d = b.today.days_before(b.rng.random_range(7..=30));
    while d.weekday() != 4 {
        d = d.add_days(-1);
    }
    let amt = meal_limit - 100;
    b.push_claim(
        d,
        "Meals",
        amt,
        "Friday team meal".into(),
        Some("ITC Foods"),
        None,
    );
}

pub fn generate(seed: u64, rules: &WorldRules) -> (ExpenseDocs, Vec<GtItem>) {
    let mut rng = util::rng_for(seed, 1);
    let policy = policy_for(rules);
    let approved = policy.approved_vendors.clone();
    let meal_limit = rules.meal_limit_inr;
    let mut b = Builder {
        rng: &mut rng,
        rows: vec![],
        month_totals: BTreeMap::new(),
        used_receipts: BTreeSet::new(),
        reserved: BTreeSet::new(),
        approved,
        today: rules.today,
    };

    // Rule-dependent rows decide part of the type mix.
    let mut fixed: Vec<ExpensePlant> = vec![];
    let boundary_amount = b.rng.random_range(1510..=2000i64);
    let boundary_is_error = boundary_amount > meal_limit;
    if boundary_is_error {
        fixed.push(ExpensePlant::OverLimit);
    }
    let suspended: Vec<String> = rules.suspended_vendors.clone();
    if !suspended.is_empty() {
        fixed.push(ExpensePlant::UnapprovedVendor);
    }
    if rules.carry_over_claim.is_some() {
        fixed.push(ExpensePlant::DuplicateClaim);
    }
    let mix = draw_type_mix(b.rng, &ExpensePlant::ALL, 7, &fixed);

    // Memory: a claim reimbursed last period, submitted again.
    if let Some(prev) = &rules.carry_over_claim {
        let mut c = prev.clone();
        c.expense_id.clear();
        b.used_receipts.insert(c.receipt_id.clone());
        b.reserved.insert(c.employee.clone());
        b.push(
            c,
            Some((
                ErrorType::DuplicateClaim,
                GtOrigin::Memory,
                "receipt already reimbursed in the previous period".into(),
            )),
        );
    }

    boundary_meal(&mut b, rules, boundary_amount, boundary_is_error);

    if let Some(v) = suspended.first() {
        suspended_vendor_claim(&mut b, v);
    }

    // Remaining planted types.
    let mut rest = mix.clone();
    for t in &fixed {
        remove_one(&mut rest, *t);
    }
    let mut dup_pairs: Vec<(usize, usize)> = vec![];
    for t in rest {
        plant(&mut b, t, &mut dup_pairs);
    }

    red_herrings(&mut b, meal_limit);
    for v in rules.onboarded_vendors.clone() {
        let d = b.weekday_date(5, 30);
        let amt = b.rng.random_range(900..=6000);
        let desc = "Stationery from newly onboarded vendor".into();
        b.push_claim(d, "Office Supplies", amt, desc, Some(&v), None);
    }

    // Clean filler; one clean row gets a same-amount twin with a different receipt (red herring).
    let mut twin_done = false;
    while b.rows.len() < CLAIM_COUNT {
        let (cat, lim, _) = *util::pick(b.rng, &CATEGORIES[..8]);
        let lim = if cat == "Meals" { meal_limit } else { lim };
        let hi = ((lim as f64 * 0.8) as i64).clamp(300, 9000);
        let amt = b.rng.random_range(200..=hi);
        let d = b.weekday_date(5, 60);
        let c = b.push_claim(
            d,
            cat,
            amt,
            format!("{cat} expense for project work"),
            None,
            None,
        );
        if !twin_done && b.rows.len() < CLAIM_COUNT {
            let t = *b
                .month_totals
                .get(&(c.employee.clone(), d.month_key()))
                .unwrap_or(&0);
            if t + amt <= SAFE_MONTH_TOTAL_INR {
                let mut twin = c;
                twin.receipt_id = b.receipt();
                b.push(twin, None);
                twin_done = true;
            }
        }
    }

    // Shuffle, keep duplicate copies after their originals, then number the claims.
    let n = b.rows.len();
    let mut order: Vec<usize> = (0..n).collect();
    util::shuffle(b.rng, &mut order);
    for (orig, copy) in &dup_pairs {
        let po = order.iter().position(|x| x == orig).unwrap_or(0);
        let pc = order.iter().position(|x| x == copy).unwrap_or(0);
        if pc < po {
            order.swap(po, pc);
        }
    }
    let mut expenses = Vec::with_capacity(n);
    let mut gt = vec![];
    for (i, idx) in order.iter().enumerate() {
        let (mut c, tag) = b.rows[*idx].clone();
        c.expense_id = format!("EXP-{:03}", i + 1);
        if let Some((t, origin, reason)) = tag {
            gt.push(GtItem::new(c.expense_id.clone(), t, reason).with_origin(origin));
        }
        expenses.push(c);
    }
    super::sort_ground_truth(&mut gt);
    (ExpenseDocs { expenses, policy }, gt)
}

fn remove_one<T: PartialEq>(v: &mut Vec<T>, t: T) {
    if let Some(p) = v.iter().position(|x| *x == t) {
        v.remove(p);
    }
}

/// Plant a `OverLimit` error.
fn plant_over_limit(b: &mut Builder<'_>) {
    use ErrorType::*;
    let (cat, lim) = *util::pick(
        b.rng,
        &[
            ("Travel", 5000i64),
            ("Communication", 2000),
            ("Transport", 3000),
            ("Accommodation", 8000),
        ],
    );
    let amt = lim + b.rng.random_range(500..=lim.min(4000));
    let d = b.weekday_date(5, 40);
    let tag = (
        OverLimit,
        GtOrigin::Planted,
        format!("{cat} claim {amt} exceeds the {lim} limit"),
    );
    let desc = format!("{cat} expense for client visit");
    b.push_claim(d, cat, amt, desc, None, Some(tag));
}

/// Plant a `WrongCategory` error.
fn plant_wrong_category(b: &mut Builder<'_>) {
    use ErrorType::*;
    let policy_limit = |cat: &str, meal: i64| -> i64 {
        CATEGORIES
            .iter()
            .find(|c| c.0 == cat)
            .map(|c| if cat == "Meals" { meal } else { c.1 })
            .unwrap_or(0)
    };
    let cat = *util::pick(b.rng, &["Office Supplies", "Equipment", "Miscellaneous"]);
    let lim = policy_limit(cat, 0);
    let amt = b.rng.random_range(800..=(lim * 8 / 10).min(9000));
    let d = b.weekday_date(5, 40);
    let e = b.employee_for(d, amt);
    let r = b.receipt();
    let v = b.approved_vendor();
    let item = util::pick(b.rng, &PERSONAL_ITEMS).to_string();
    let c = b.claim(d, e, cat, amt, item.clone(), r, v);
    b.push(
        c,
        Some((
            WrongCategory,
            GtOrigin::Planted,
            format!("'{item}' is a personal expense booked as {cat}"),
        )),
    );
}

/// Plant a `DuplicateClaim` error.
fn plant_duplicate_claim(b: &mut Builder<'_>, dup_pairs: &mut Vec<(usize, usize)>) {
    use ErrorType::*;
    // Copy a clean planted-free row; create one first if none exists.
    let candidates: Vec<usize> = b
        .rows
        .iter()
        .enumerate()
        .filter(|(_, (c, t))| t.is_none() && !c.receipt_id.is_empty() && !c.date.is_weekend())
        .map(|(i, _)| i)
        .collect();
    let orig = if let Some(&i) = candidates.iter().find(|&&i| {
        let c = &b.rows[i].0;
        let amt = util::dec_f64(c.amount) as i64;
        b.month_totals
            .get(&(c.employee.clone(), c.date.month_key()))
            .copied()
            .unwrap_or(0)
            + amt
            <= SAFE_MONTH_TOTAL_INR
    }) {
        i
    } else {
        let amt = b.rng.random_range(600..=4000);
        let d = b.weekday_date(5, 50);
        let e = b.employee_for(d, amt * 2);
        let r = b.receipt();
        let v = b.approved_vendor();
        let c = b.claim(
            d,
            e,
            "Travel",
            amt,
            "Travel expense for project work".into(),
            r,
            v,
        );
        b.push(c, None);
        b.rows.len() - 1
    };
    let copy = b.rows[orig].0.clone();
    b.push(
        copy,
        Some((
            DuplicateClaim,
            GtOrigin::Planted,
            "same receipt claimed twice".into(),
        )),
    );
    dup_pairs.push((orig, b.rows.len() - 1));
}

/// Plant a `WeekendExpense` error.
fn plant_weekend_expense(b: &mut Builder<'_>) {
    use ErrorType::*;
    let mut d = b.today.days_before(b.rng.random_range(7..=40));
    while !d.is_weekend() {
        d = d.add_days(-1);
    }
    let amt = b.rng.random_range(400..=1200);
    let tag = (
        WeekendExpense,
        GtOrigin::Planted,
        format!("claim dated on a weekend ({d})"),
    );
    let desc = "Weekend working lunch".into();
    b.push_claim(d, "Meals", amt, desc, Some("ITC Foods"), Some(tag));
}

/// Plant a `MissingReceipt` error.
fn plant_missing_receipt(b: &mut Builder<'_>) {
    use ErrorType::*;
    let (cat, lim) = *util::pick(
        b.rng,
        &[
            ("Travel", 5000i64),
            ("Transport", 3000),
            ("Office Supplies", 10000),
        ],
    );
    let amt = b.rng.random_range(800..=(lim * 9 / 10).min(4500));
    let d = b.weekday_date(5, 40);
    let e = b.employee_for(d, amt);
    let v = b.approved_vendor();
    let c = b.claim(
        d,
        e,
        cat,
        amt,
        format!("{cat} expense for project work"),
        String::new(),
        v,
    );
    b.push(
        c,
        Some((
            MissingReceipt,
            GtOrigin::Planted,
            format!("{amt} claimed without a receipt"),
        )),
    );
}

/// Plant a `UnapprovedVendor` error.
fn plant_unapproved_vendor(b: &mut Builder<'_>) {
    use ErrorType::*;
    let amt = b.rng.random_range(700..=4500);
    let d = b.weekday_date(5, 40);
    let e = b.employee_for(d, amt);
    let r = b.receipt();
    let v = util::pick(b.rng, &UNAPPROVED_VENDORS).to_string();
    let c = b.claim(
        d,
        e,
        "Office Supplies",
        amt,
        "Printing and binding".into(),
        r,
        v.clone(),
    );
    b.push(
        c,
        Some((
            UnapprovedVendor,
            GtOrigin::Planted,
            format!("{v} is not an approved vendor"),
        )),
    );
}

/// Plant a `CumulativeBreach` error.
fn plant_cumulative_breach(b: &mut Builder<'_>) {
    use ErrorType::*;
    // A reserved employee: one companion claim, then the claim that crosses ₹50,000.
    let free: Vec<&str> = EMPLOYEE_NAMES
        .iter()
        .copied()
        .filter(|e| !b.reserved.contains(*e) && !b.rows.iter().any(|(c, _)| c.employee == *e))
        .collect();
    let emp = if free.is_empty() {
        EMPLOYEE_NAMES[14]
    } else {
        *util::pick(b.rng, &free)
    }
    .to_string();
    b.reserved.insert(emp.clone());
    let (mut d_cross, mut d_first) = (b.today.days_before(10), b.today.days_before(15));
    for _ in 0..100 {
        let c = b.weekday_date(5, 45);
        let f = c.add_days(-b.rng.random_range(2..=10)).back_to_weekday();
        if c.month_key() == f.month_key() && f < c {
            d_cross = c;
            d_first = f;
            break;
        }
    }
    let first_amt = b.rng.random_range(12000..=30000);
    let cross_amt = CUMULATIVE_MONTHLY_LIMIT_INR - first_amt + b.rng.random_range(1000..=9000);
    let r1 = b.receipt();
    let v1 = b.approved_vendor();
    let c1 = b.claim(
        d_first,
        emp.clone(),
        "Training",
        first_amt.min(20000),
        "Certification course fees".into(),
        r1,
        v1,
    );
    let first_amt = first_amt.min(20000);
    let cross_amt = cross_amt.max(CUMULATIVE_MONTHLY_LIMIT_INR - first_amt + 1000);
    b.push(c1, None);
    let r2 = b.receipt();
    let v2 = "HCL Furniture".to_string();
    let c2 = b.claim(
        d_cross,
        emp.clone(),
        "Equipment",
        cross_amt,
        "Workstation and monitor".into(),
        r2,
        v2,
    );
    b.push(
        c2,
        Some((
            CumulativeBreach,
            GtOrigin::Planted,
            format!("{emp}'s monthly total exceeds ₹{CUMULATIVE_MONTHLY_LIMIT_INR}"),
        )),
    );
}

planted_types! {
    /// The expense task's error types: all of them are drawn.
    ExpensePlant {
        OverLimit,
        WrongCategory,
        DuplicateClaim,
        WeekendExpense,
        MissingReceipt,
        UnapprovedVendor,
        CumulativeBreach,
    }
}

/// Plant one error of type `t` (one function per type).
fn plant(b: &mut Builder<'_>, t: ExpensePlant, dup_pairs: &mut Vec<(usize, usize)>) {
    use ExpensePlant::*;
    let before = b.rows.len();
    match t {
        OverLimit => plant_over_limit(b),
        WrongCategory => plant_wrong_category(b),
        DuplicateClaim => plant_duplicate_claim(b, dup_pairs),
        WeekendExpense => plant_weekend_expense(b),
        MissingReceipt => plant_missing_receipt(b),
        UnapprovedVendor => plant_unapproved_vendor(b),
        CumulativeBreach => plant_cumulative_breach(b),
    }
    debug_assert!(
        b.rows[before..]
            .iter()
            .any(|(_, tag)| tag.as_ref().is_some_and(|p| p.0 == t.error_type())),
        "planting {t:?} tagged no claim with it"
    );
}

/// Rule checker: every violation visible in the documents under the policy in force.
/// `prior_receipts` are receipts reimbursed in earlier periods (cross-period memory).
pub fn detect(docs: &ExpenseDocs, prior_receipts: &BTreeSet<String>) -> Vec<(String, ErrorType)> {
    use ErrorType::*;
    let p = &docs.policy;
    let approved: BTreeSet<&str> = p.approved_vendors.iter().map(String::as_str).collect();
    let mut out = vec![];
    let mut seen: BTreeSet<(&str, &str, Decimal)> = BTreeSet::new();
    let mut sorted: Vec<&ExpenseClaim> = docs.expenses.iter().collect();
    sorted.sort_by(|a, b| a.expense_id.cmp(&b.expense_id));
    for c in &sorted {
        let (lim, rec) = limit_of(p, &c.category);
        let amt = c.amount;
        if amt > Decimal::from(lim) {
            out.push((c.expense_id.clone(), OverLimit));
        }
        if c.description.to_ascii_lowercase().contains("personal") {
            out.push((c.expense_id.clone(), WrongCategory));
        }
        if !c.receipt_id.is_empty() {
            let k = (c.receipt_id.as_str(), c.employee.as_str(), amt);
            if !seen.insert(k) || prior_receipts.contains(&c.receipt_id) {
                out.push((c.expense_id.clone(), DuplicateClaim));
            }
        }
        if c.date.is_weekend() {
            out.push((c.expense_id.clone(), WeekendExpense));
        }
        if c.receipt_id.is_empty() && amt > Decimal::from(rec) {
            out.push((c.expense_id.clone(), MissingReceipt));
        }
        if !approved.contains(c.vendor.as_str()) {
            out.push((c.expense_id.clone(), UnapprovedVendor));
        }
    }
    // Cumulative: the claim whose inclusion first takes an employee-month above the limit.
    let mut by_emp: BTreeMap<(&str, (i32, u32)), Vec<&ExpenseClaim>> = BTreeMap::new();
    for c in &docs.expenses {
        by_emp
            .entry((c.employee.as_str(), c.date.month_key()))
            .or_default()
            .push(c);
    }
    for (_, mut v) in by_emp {
        v.sort_by(|a, b| a.date.cmp(&b.date).then(a.expense_id.cmp(&b.expense_id)));
        let mut sum = Decimal::ZERO;
        for c in v {
            let before = sum;
            sum += c.amount;
            if before <= Decimal::from(p.cumulative_monthly_limit)
                && sum > Decimal::from(p.cumulative_monthly_limit)
            {
                out.push((c.expense_id.clone(), CumulativeBreach));
            }
        }
    }
    out.sort();
    out
}
