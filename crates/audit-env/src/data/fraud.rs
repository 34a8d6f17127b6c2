//! Task 4 — forensic fraud patterns over transactions and a vendor registry.
//!
//! Every pattern is observable in the documents and defined by a rule in `audit_context`;
//! the adversarial level (1–5) changes how close to the thresholds patterns sit, which
//! subtle patterns are forced in, and how many near-miss red herrings are added.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{EMPLOYEE_NAMES, VENDOR_NAMES};
use crate::data::expense::draw_type_mix;
use crate::model::{ErrorType, GtItem, GtOrigin, WorldRules};
use crate::util::{self, money, Date, Rng8};

pub const TXN_COUNT: usize = 84;
pub const VENDOR_COUNT: usize = 26;
pub const APPROVAL_THRESHOLD_INR: i64 = 50_000;
pub const MAX_CONCENTRATION_PCT: i64 = 30;
pub const WEEKEND_THRESHOLD: usize = 2;
pub const SPIKE_WINDOW_DAYS: i32 = 15;
pub const SPIKE_MIN_TXNS: usize = 5;
pub const ROUND_MIN_TXNS: usize = 3;
pub const BENFORD_MIN_TXNS: usize = 4;
pub const AUDIT_WINDOW_DAYS: i32 = 90;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VendorRecord {
    pub vendor_id: String,
    pub name: String,
    pub gstin: String,
    pub state: String,
    pub incorporation_date: Date,
    pub bank_account: String,
    pub bank_name: String,
    pub category: String,
    pub employee_count: u32,
    pub registered_address: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transaction {
    pub txn_id: String,
    pub date: Date,
    pub vendor_id: String,
    pub vendor_name: String,
    pub vendor_gstin: String,
    pub description: String,
    #[serde(with = "money")]
    pub amount: Decimal,
    pub gst_rate: u32,
    #[serde(with = "money")]
    pub gst_amount: Decimal,
    #[serde(with = "money")]
    pub total: Decimal,
    pub payment_mode: String,
    pub approved_by: String,
    pub bank_account: String,
    /// Invoice this transaction settles or re-bills (credit notes, resale chains).
    pub reference_txn: Option<String>,
    /// Supporting document for cash/UPI payments.
    pub supporting_doc_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditContext {
    pub audit_period_start: Date,
    pub audit_period_end: Date,
    pub invoice_approval_threshold: i64,
    pub benford_expected_distribution: BTreeMap<String, f64>,
    pub max_vendor_concentration_pct: i64,
    pub weekend_invoice_threshold: usize,
    pub volume_spike_multiplier: u32,
    pub detection_rules: Vec<String>,
    pub cash_upi_threshold_inr: Option<i64>,
    pub new_vendor_risk_months: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FraudDocs {
    pub transactions: Vec<Transaction>,
    pub vendor_registry: Vec<VendorRecord>,
    pub audit_context: AuditContext,
}

pub fn detection_rules() -> Vec<String> {
    vec![
        "circular_invoicing: transactions of different vendors whose reference_txn links form a cycle".into(),
        format!("split_invoice: one vendor, same date, two or more transactions each below ₹{APPROVAL_THRESHOLD_INR} whose sum exceeds it"),
        "shell_company: a vendor sharing its PAN (GSTIN characters 3-12) with another registered vendor, with at most 2 employees and no registered address".into(),
        format!("round_number_anomaly: a vendor with {ROUND_MIN_TXNS} or more amounts that are exact multiples of ₹1,000"),
        format!("benford_violation: a vendor with {BENFORD_MIN_TXNS} or more transactions whose amounts all start with 8 or 9"),
        format!("vendor_concentration: a vendor receiving more than {MAX_CONCENTRATION_PCT}% of total spend"),
        "duplicate_bank_account: two vendors with the same bank account; report the later-incorporated vendor".into(),
        format!("sudden_volume_spike: {SPIKE_MIN_TXNS}+ transactions of a vendor in the last {SPIKE_WINDOW_DAYS} days and at least 3x its average per {SPIKE_WINDOW_DAYS} days before"),
        "invoice_before_incorporation: a transaction dated before its vendor's incorporation date".into(),
        format!("weekend_pattern: a vendor with more than {WEEKEND_THRESHOLD} weekend-dated transactions"),
        "report the earliest transaction of a multi-transaction pattern (any member is accepted)".into(),
    ]
}

struct Gen<'a> {
    r: &'a mut Rng8,
    vendors: Vec<VendorRecord>,
    txns: Vec<Transaction>,
    level: u8,
    emit_cash: bool,
    /// "Today" of the data set (the audit period ends on it).
    today: Date,
}

const BANKS: [&str; 6] = ["SBI", "HDFC", "ICICI", "Axis", "PNB", "Kotak"];
const CATS: [&str; 6] = [
    "IT Services",
    "Office Supplies",
    "Logistics",
    "Consulting",
    "Manufacturing",
    "Catering",
];

fn non_round(r: &mut Rng8, base: i64, spread: i64) -> i64 {
    loop {
        let a = base + r.random_range(-spread..=spread);
        if a % 1000 != 0 && a > 1000 {
            return a;
        }
    }
}

fn leading_digit(a: Decimal) -> u32 {
    let s = a.trunc().to_string();
    s.chars()
        .find(|c| c.is_ascii_digit() && *c != '0')
        .and_then(|c| c.to_digit(10))
        .unwrap_or(0)
}

impl Gen<'_> {
    fn account(&mut self) -> String {
        let len = *util::pick(self.r, &[11usize, 12, 14, 16]);
        (0..len)
            .map(|_| (b'0' + self.r.random_range(0..10u8)) as char)
            .collect()
    }
    fn new_vendor(&mut self, name: String, incorporated_days_ago: i32) -> usize {
        let st = util::pick(self.r, &["27", "29", "06", "33", "07", "09", "24"]).to_string();
        let gstin = util::random_gstin(self.r, &st);
        let v = VendorRecord {
            vendor_id: String::new(),
            name,
            gstin,
            state: st,
            incorporation_date: self.today.days_before(incorporated_days_ago),
            bank_account: self.account(),
            bank_name: util::pick(self.r, &BANKS).to_string(),
            category: util::pick(self.r, &CATS).to_string(),
            employee_count: self.r.random_range(12..=400),
            registered_address: Some(format!(
                "{} Industrial Estate, Unit {}",
                util::pick(
                    self.r,
                    &["Andheri", "Whitefield", "Guindy", "Sector 18", "Hinjewadi"]
                ),
                self.r.random_range(1..=300)
            )),
        };
        self.vendors.push(v);
        self.vendors.len() - 1
    }
    fn txn(&mut self, v: usize, date: Date, amount: i64, desc: Option<String>) -> usize {
        let vend = &self.vendors[v];
        let rate = *util::pick(self.r, &[5u32, 12, 18]);
        let amt = Decimal::from(amount);
        let gst = util::paise(amt * Decimal::from(rate) / Decimal::from(100));
        let mode = if self.emit_cash && amount < 60000 && self.r.random_bool(0.25) {
            util::pick(self.r, &["UPI", "Cash"]).to_string()
        } else {
            util::pick(self.r, &["NEFT", "RTGS", "Cheque"]).to_string()
        };
        let supporting = if mode == "UPI" || mode == "Cash" {
            Some(format!("SD-{}", self.r.random_range(1000..=9999)))
        } else {
            None
        };
        let t = Transaction {
            txn_id: String::new(),
            date,
            vendor_id: String::new(),
            vendor_name: vend.name.clone(),
            vendor_gstin: vend.gstin.clone(),
            description: desc.unwrap_or_else(|| format!("{} services", vend.category)),
            amount: amt,
            gst_rate: rate,
            gst_amount: gst,
            total: amt + gst,
            payment_mode: mode,
            approved_by: EMPLOYEE_NAMES[self.r.random_range(0..8)].to_string(),
            bank_account: vend.bank_account.clone(),
            reference_txn: None,
            supporting_doc_id: supporting,
        };
        self.txns.push(t);
        self.txns.len() - 1
    }
    fn distinct_day(&mut self, v: usize, lo: i32, hi: i32) -> Date {
        let name = self.vendors[v].name.clone();
        loop {
            let d = self.weekday(lo, hi);
            if !self
                .txns
                .iter()
                .any(|t| t.vendor_name == name && t.date == d)
            {
                return d;
            }
        }
    }
    fn weekday(&mut self, lo: i32, hi: i32) -> Date {
        self.today
            .days_before(self.r.random_range(lo..=hi))
            .back_to_weekday()
    }
}

/// A new vendor under the next name, incorporated `lo..=hi` days ago.
fn next_vendor(
    g: &mut Gen<'_>,
    names: &mut impl Iterator<Item = String>,
    lo: i32,
    hi: i32,
) -> usize {
    let name = names.next().unwrap_or_default();
    let days_ago = g.r.random_range(lo..=hi);
    g.new_vendor(name, days_ago)
}

/// Vendor index per transaction is kept by name during generation (ids assigned at the end).
/// The planted patterns: a draw over the task's error types (higher levels force the subtle
/// ones in), with at most one concentration vendor and one circular ring.
fn draw_mix(r: &mut Rng8, level: u8) -> Vec<FraudPlant> {
    let mut fixed = vec![];
    if level >= 4 {
        fixed.push(FraudPlant::CircularInvoicing);
        fixed.push(FraudPlant::ShellCompany);
    }
    let mut mix = draw_type_mix(r, &FraudPlant::ALL, 10, &fixed);
    // At most one concentration vendor and one circular ring.
    let mut seen_conc = false;
    let mut seen_circ = false;
    for t in mix.iter_mut() {
        let repeat = match t {
            FraudPlant::VendorConcentration => std::mem::replace(&mut seen_conc, true),
            FraudPlant::CircularInvoicing => std::mem::replace(&mut seen_circ, true),
            _ => false,
        };
        if repeat {
            *t = FraudPlant::InvoiceBeforeIncorporation;
        }
    }

    mix
}

planted_types! {
    /// The fraud patterns drawn for a period (the campaign's shocks add the two others, a
    /// high-risk new vendor and an undocumented cash payment, in `generate`).
    FraudPlant {
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
    }
}

/// Plant one pattern: its transactions and why they are a finding (`None` for the
/// concentration vendor, whose transactions are sized after the rest of the spend).
fn plant(
    g: &mut Gen<'_>,
    t: FraudPlant,
    names: &mut impl Iterator<Item = String>,
    clean: &[usize],
    conc_vendor: &mut Option<usize>,
) -> Option<(Vec<usize>, String)> {
    let (level, today) = (g.level, g.today);
    match t {
        FraudPlant::CircularInvoicing => {
            let vs: Vec<usize> = (0..3).map(|_| next_vendor(g, names, 400, 2000)).collect();
            let base = g.r.random_range(60..=90) * 1000;
            let mut ids = vec![];
            for (k, v) in vs.iter().enumerate() {
                let d = g.weekday(5 + 3 * k as i32, 30);
                let a = non_round(g.r, base, 900);
                ids.push(g.txn(*v, d, a, Some("Resale of trading goods".into())));
            }
            Some((
                ids,
                "reference chain forms a cycle across three vendors".into(),
            ))
        }
        FraudPlant::SplitInvoice => {
            let v = next_vendor(g, names, 400, 3000);
            let parts = if level >= 3 { 3 } else { 2 };
            let factor = match level {
                1 => 1.6,
                2 => 1.3,
                3 => 1.15,
                4 => 1.06,
                _ => 1.02,
            };
            let total = (APPROVAL_THRESHOLD_INR as f64 * factor) as i64;
            let d = g.weekday(5, 20);
            let mut ids = vec![];
            for p in 0..parts {
                let a = non_round(g.r, total / parts as i64, 150).min(APPROVAL_THRESHOLD_INR - 1);
                ids.push(g.txn(v, d, a, Some(format!("Installation work phase {}", p + 1))));
            }
            Some((
                ids,
                "one purchase split below the approval threshold".into(),
            ))
        }
        FraudPlant::ShellCompany => {
            let twin = *util::pick(g.r, clean);
            let v = next_vendor(g, names, 60, 150);
            let pan = util::gstin_pan(&g.vendors[twin].gstin).to_string();
            let st = g.vendors[twin].state.clone();
            let ent = if g.vendors[twin].gstin.as_bytes()[12] == b'2' {
                '3'
            } else {
                '2'
            };
            g.vendors[v].gstin = util::gstin_from(&st, &pan, ent);
            g.vendors[v].state = st;
            g.vendors[v].employee_count = g.r.random_range(0..=2);
            g.vendors[v].registered_address = None;
            let d = g.weekday(5, 30);
            let a = non_round(g.r, 180000, 40000);
            let id = g.txn(v, d, a, Some("Business advisory retainer".into()));
            Some((
                vec![id],
                "vendor shares a PAN with a registered vendor and has no substance".into(),
            ))
        }
        FraudPlant::RoundNumberAnomaly => {
            let v = next_vendor(g, names, 400, 3000);
            let mut ids = vec![];
            for _ in 0..3 {
                let a = if level <= 2 {
                    g.r.random_range(1..=4) * 10000
                } else {
                    g.r.random_range(11..=49) * 1000
                };
                let d = g.distinct_day(v, 5, 60);
                ids.push(g.txn(v, d, a, None));
            }
            Some((ids, "repeated exact round amounts".into()))
        }
        FraudPlant::BenfordViolation => {
            let v = next_vendor(g, names, 400, 3000);
            let mut ids = vec![];
            for k in 0..4 {
                let lead = if level <= 2 || k % 2 == 0 { 9 } else { 8 };
                let a = non_round(g.r, lead * 10000 + 5000, 4500);
                let d = g.distinct_day(v, 5, 60);
                ids.push(g.txn(v, d, a, None));
            }
            Some((ids, "leading digits far from Benford's distribution".into()))
        }
        FraudPlant::VendorConcentration => {
            *conc_vendor = Some(next_vendor(g, names, 400, 3000));
            None
        }
        FraudPlant::DuplicateBankAccount => {
            let twin = *util::pick(g.r, clean);
            let n = names.next().unwrap_or_default();
            let inc = (today.0 - g.vendors[twin].incorporation_date.0 - 30).clamp(200, 380);
            let v = g.new_vendor(n, inc);
            g.vendors[v].bank_account = g.vendors[twin].bank_account.clone();
            let d = g.weekday(5, 30);
            let a = non_round(g.r, 85000, 10000);
            let id = g.txn(v, d, a, None);
            Some((vec![id], "bank account shared with another vendor".into()))
        }
        FraudPlant::SuddenVolumeSpike => plant_volume_spike(g, names),
        FraudPlant::InvoiceBeforeIncorporation => {
            let v = next_vendor(g, names, 40, 80);
            let d = g.vendors[v]
                .incorporation_date
                .add_days(-g.r.random_range(10..=30))
                .back_to_weekday();
            let a = non_round(g.r, 120000, 20000);
            let id = g.txn(v, d, a, None);
            Some((
                vec![id],
                "invoice predates the vendor's incorporation".into(),
            ))
        }
        FraudPlant::WeekendPattern => plant_weekend_pattern(g, names),
    }
}

/// Plant the `SuddenVolumeSpike` pattern.
fn plant_volume_spike(
    g: &mut Gen<'_>,
    names: &mut impl Iterator<Item = String>,
) -> Option<(Vec<usize>, String)> {
    let (level, today) = (g.level, g.today);
    let age_days = |d: Date| today.0 - d.0;
    let v = next_vendor(g, names, 400, 3000);
    let d0 = g.weekday(70, 88);
    let a0 = non_round(g.r, 15000, 3000);
    g.txn(v, d0, a0, None);
    let mut ids = vec![];
    let mut days: Vec<i32> = (1..=14).collect();
    util::shuffle(g.r, &mut days);
    let k = if level >= 4 { 5 } else { 6 };
    let mut used = BTreeSet::new();
    for dd in days {
        let d = today.days_before(dd).back_to_weekday();
        if age_days(d) >= SPIKE_WINDOW_DAYS || !used.insert(d) {
            continue;
        }
        let a = non_round(g.r, 45000, 3000);
        ids.push(g.txn(v, d, a, None));
        if ids.len() == k {
            break;
        }
    }
    Some((ids, "transaction volume jumped in the last 15 days".into()))
}

/// Plant the `WeekendPattern` pattern.
fn plant_weekend_pattern(
    g: &mut Gen<'_>,
    names: &mut impl Iterator<Item = String>,
) -> Option<(Vec<usize>, String)> {
    let (level, today) = (g.level, g.today);
    let v = next_vendor(g, names, 400, 3000);
    let k = if level >= 4 { 3 } else { 4 };
    let mut ids = vec![];
    let mut j = g.r.random_range(0..3);
    while ids.len() < k {
        let mut d = today.days_before(7 * (j + 1) + g.r.random_range(0..3));
        while !d.is_weekend() {
            d = d.add_days(1);
        }
        // Depending on today's weekday two draws can land on the same weekend day
        // (two same-day invoices would also look like a split invoice): a week earlier.
        while g
            .txns
            .iter()
            .any(|t| t.vendor_name == g.vendors[v].name && t.date == d)
        {
            d = d.add_days(-7);
        }
        let a = non_round(g.r, 35000, 2000);
        ids.push(g.txn(v, d, a, None));
        j += 1 + (level as i32 >= 3) as i32;
    }
    Some((ids, "repeated weekend invoicing".into()))
}

/// The concentration vendor's transactions, sized to its share of the rest of the spend.
fn plant_concentration(g: &mut Gen<'_>, v: usize) -> Vec<usize> {
    let level = g.level;
    let others: i64 = g.txns.iter().map(|t| t.amount.to_i64().unwrap_or(0)).sum();
    let share = match level {
        1 => 0.45,
        2 => 0.40,
        3 => 0.36,
        4 => 0.33,
        _ => 0.315,
    };
    let target = (others as f64 * share / (1.0 - share)) as i64;
    let mut ids = vec![];
    for k in 0..8 {
        let d = g.weekday(16 + 9 * k, 16 + 9 * k + 4);
        let mut a = non_round(g.r, target / 8, target / 80);
        if leading_digit(Decimal::from(a)) >= 8 && k == 0 {
            a = non_round(g.r, (target / 8) * 7 / 10, 100);
        }
        ids.push(g.txn(v, d, a, None));
    }
    ids
}

/// Red herrings scale with the level: near-miss patterns that must not be flagged.
fn red_herrings(g: &mut Gen<'_>, clean: &[usize]) {
    let (level, today) = (g.level, g.today);
    if level >= 2 {
        let v = clean[0];
        for _ in 0..2 {
            let d = g.weekday(5, 80);
            let a = g.r.random_range(2..=9) * 5000;
            g.txn(v, d, a, None);
        }
    }
    if level >= 3 {
        let v = clean[1];
        for w in [0, 1] {
            let mut d = today.days_before(20 + 14 * w);
            while !d.is_weekend() {
                d = d.add_days(-1);
            }
            let a = non_round(g.r, 12000, 3000);
            g.txn(v, d, a, None);
        }
    }
    if level >= 4 {
        let v = clean[2];
        let d = g.weekday(10, 40);
        for _ in 0..2 {
            let a = non_round(g.r, 18000, 2000);
            g.txn(v, d, a, None);
        }
    }
}

/// Clean filler transactions up to `count` (room is left for the concentration vendor).
fn clean_filler(g: &mut Gen<'_>, clean: &[usize], count: usize) {
    let today = g.today;
    let age_days = |d: Date| today.0 - d.0;
    let mut guard = 0;
    while g.txns.len() < count && guard < 10_000 {
        guard += 1;
        let v = *util::pick(g.r, clean);
        let d = g.weekday(5, AUDIT_WINDOW_DAYS - 2);
        // keep clean vendors free of same-day pairs and recent bursts
        let same_day = g
            .txns
            .iter()
            .any(|t| t.vendor_name == g.vendors[v].name && t.date == d);
        let recent = g
            .txns
            .iter()
            .filter(|t| t.vendor_name == g.vendors[v].name && age_days(t.date) < SPIKE_WINDOW_DAYS)
            .count();
        if same_day || (age_days(d) < SPIKE_WINDOW_DAYS && recent >= 2) {
            continue;
        }
        let base = *util::pick(g.r, &[5000i64, 12000, 15000, 22000, 35000, 48000, 67000]);
        let a = non_round(g.r, base, 499);
        let i = g.txn(v, d, a, None);
        // occasional legitimate credit-note reference to an earlier txn of the same vendor
        if g.r.random_bool(0.1) {
            if let Some(p) = g.txns[..i].iter().position(|t| {
                t.vendor_name == g.vendors[v].name && t.date < d && t.reference_txn.is_none()
            }) {
                g.txns[i].reference_txn = Some(format!("#{p}"));
                g.txns[i].description = "Credit note adjustment".into();
            }
        }
    }
}

/// Cash/UPI payments above the REG-002 threshold, two without documentation (period 4+).
fn cash_payments(g: &mut Gen<'_>, clean: &[usize]) {
    let mut undocumented: Vec<usize> = vec![];
    {
        let cands: Vec<usize> = (0..g.txns.len())
            .filter(|&i| {
                g.txns[i].vendor_name == g.vendors[clean[3]].name
                    || g.txns[i].vendor_name == g.vendors[clean[4]].name
            })
            .collect();
        for &i in cands.iter().take(4) {
            let a = non_round(g.r, 26000, 3000);
            let t = &mut g.txns[i];
            t.amount = Decimal::from(a);
            t.gst_amount = util::paise(t.amount * Decimal::from(t.gst_rate) / Decimal::from(100));
            t.total = t.amount + t.gst_amount;
            t.payment_mode = "UPI".into();
            t.supporting_doc_id = if undocumented.len() < 2 {
                None
            } else {
                Some(format!("SD-{}", 5000 + i))
            };
            if t.supporting_doc_id.is_none() {
                undocumented.push(i);
            }
        }
    }
}

pub fn generate(seed: u64, rules: &WorldRules) -> (FraudDocs, Vec<GtItem>) {
    let level = rules.fraud_level.clamp(1, 5);
    let mut rng = util::rng_for(seed, 4 + 100 * level as u64);
    let today = rules.today;
    let mut g = Gen {
        r: &mut rng,
        vendors: vec![],
        txns: vec![],
        level,
        emit_cash: rules.emit_cash_payments,
        today,
    };
    let mut names: Vec<String> = VENDOR_NAMES.iter().map(|s| s.to_string()).collect();
    names.extend((1..=10).map(|i| format!("Enterprise Solutions {i}")));
    util::shuffle(g.r, &mut names);
    let mut next_name = names.into_iter();

    let mix = draw_mix(g.r, level);

    // Clean vendors (incorporated 400+ days ago) used by ordinary transactions.
    let clean_n = 9;
    let clean: Vec<usize> = (0..clean_n)
        .map(|_| {
            let n = next_name.next().unwrap_or_default();
            let d = g.r.random_range(400..=3650);
            g.new_vendor(n, d)
        })
        .collect();

    let mut gt: Vec<(Vec<usize>, ErrorType, String)> = vec![];
    let mut conc_vendor: Option<usize> = None;
    for t in mix.clone() {
        if let Some((ids, why)) = plant(&mut g, t, &mut next_name, &clean, &mut conc_vendor) {
            gt.push((ids, t.error_type(), why));
        }
    }
    // Circular links: a→c, b→a, c→b (ids resolved after numbering).
    let mut circ_links: Vec<(usize, usize)> = vec![];
    for (ids, t, _) in &gt {
        if *t == ErrorType::CircularInvoicing {
            circ_links.push((ids[0], ids[2]));
            circ_links.push((ids[1], ids[0]));
            circ_links.push((ids[2], ids[1]));
        }
    }
    red_herrings(&mut g, &clean);
    let conc_txns = if conc_vendor.is_some() { 8 } else { 0 };
    clean_filler(&mut g, &clean, TXN_COUNT - conc_txns);
    if rules.emit_cash_payments {
        cash_payments(&mut g, &clean);
    }

    if let Some(v) = conc_vendor {
        let ids = plant_concentration(&mut g, v);
        gt.push((
            ids,
            ErrorType::VendorConcentration,
            "vendor receives more than 30% of spend".into(),
        ));
    }
    // Fill remaining registry slots with idle (no activity) vendors.
    while g.vendors.len() < VENDOR_COUNT {
        let n = next_name
            .next()
            .unwrap_or_else(|| format!("Idle Vendor {}", g.vendors.len()));
        let d = g.r.random_range(400..=3650);
        g.new_vendor(n, d);
    }
    // Assign vendor ids (shuffled) and transaction ids (shuffled).
    let mut vorder: Vec<usize> = (0..g.vendors.len()).collect();
    util::shuffle(g.r, &mut vorder);
    let mut vid = vec![String::new(); g.vendors.len()];
    for (k, &i) in vorder.iter().enumerate() {
        vid[i] = format!("V-{:03}", k + 1);
    }
    for (i, v) in g.vendors.iter_mut().enumerate() {
        v.vendor_id = vid[i].clone();
    }
    let name_to_vid: BTreeMap<String, String> = g
        .vendors
        .iter()
        .map(|v| (v.name.clone(), v.vendor_id.clone()))
        .collect();
    let mut torder: Vec<usize> = (0..g.txns.len()).collect();
    util::shuffle(g.r, &mut torder);
    let mut tid = vec![String::new(); g.txns.len()];
    for (k, &i) in torder.iter().enumerate() {
        tid[i] = format!("TXN-{:04}", k + 1);
    }
    for (i, t) in g.txns.iter_mut().enumerate() {
        t.txn_id = tid[i].clone();
        t.vendor_id = name_to_vid.get(&t.vendor_name).cloned().unwrap_or_default();
        if let Some(r) = &t.reference_txn {
            if let Some(p) = r.strip_prefix('#').and_then(|p| p.parse::<usize>().ok()) {
                t.reference_txn = Some(tid[p].clone());
            }
        }
    }
    for (a, b) in circ_links {
        g.txns[a].reference_txn = Some(tid[b].clone());
    }
    let mut items = vec![];
    for (ids, t, why) in gt {
        let mut members: Vec<&Transaction> = ids.iter().map(|&i| &g.txns[i]).collect();
        members.sort_by(|a, b| a.date.cmp(&b.date).then(a.txn_id.cmp(&b.txn_id)));
        let rep = members[0].txn_id.clone();
        let aliases: Vec<String> = members[1..].iter().map(|m| m.txn_id.clone()).collect();
        items.push(GtItem::new(rep, t, why).with_aliases(aliases));
    }
    let mut transactions = g.txns.clone();
    util::shuffle(g.r, &mut transactions);
    let mut vendor_registry = g.vendors.clone();
    vendor_registry.sort_by(|a, b| a.vendor_id.cmp(&b.vendor_id));
    let mut benford = BTreeMap::new();
    for d in 1..=9u32 {
        benford.insert(
            d.to_string(),
            util::round_n((1.0 + 1.0 / d as f64).log10(), 3),
        );
    }
    let ctx = AuditContext {
        audit_period_start: today.days_before(AUDIT_WINDOW_DAYS),
        audit_period_end: today,
        invoice_approval_threshold: APPROVAL_THRESHOLD_INR,
        benford_expected_distribution: benford,
        max_vendor_concentration_pct: MAX_CONCENTRATION_PCT,
        weekend_invoice_threshold: WEEKEND_THRESHOLD,
        volume_spike_multiplier: 3,
        detection_rules: detection_rules(),
        cash_upi_threshold_inr: rules.cash_upi_threshold_inr,
        new_vendor_risk_months: rules.new_vendor_risk_months,
    };
    let docs = FraudDocs {
        transactions,
        vendor_registry,
        audit_context: ctx,
    };
    // Rule-change items (REG-002 / REG-003 already in force at reset).
    items.extend(shock_items(&docs));
    super::sort_ground_truth(&mut items);
    let _ = g.level;
    (docs, items)
}

/// Ground truth implied by the regulatory rules in `audit_context` (REG-002, REG-003).
pub fn shock_items(d: &FraudDocs) -> Vec<GtItem> {
    let mut out = vec![];
    if let Some(th) = d.audit_context.cash_upi_threshold_inr {
        for t in &d.transactions {
            if (t.payment_mode == "UPI" || t.payment_mode == "Cash")
                && t.amount > Decimal::from(th)
                && t.supporting_doc_id.is_none()
            {
                out.push(
                    GtItem::new(
                        t.txn_id.clone(),
                        ErrorType::UndocumentedCashPayment,
                        "cash/UPI above the threshold without documentation",
                    )
                    .with_origin(GtOrigin::RuleChange),
                );
            }
        }
    }
    if let Some(m) = d.audit_context.new_vendor_risk_months {
        let cutoff = d.audit_context.audit_period_end.add_days(-30 * m as i32);
        for v in &d.vendor_registry {
            if v.incorporation_date > cutoff {
                let mut ts: Vec<&Transaction> = d
                    .transactions
                    .iter()
                    .filter(|t| t.vendor_id == v.vendor_id)
                    .collect();
                ts.sort_by(|a, b| a.date.cmp(&b.date).then(a.txn_id.cmp(&b.txn_id)));
                if let Some(first) = ts.first() {
                    let aliases = ts[1..].iter().map(|t| t.txn_id.clone()).collect();
                    out.push(
                        GtItem::new(
                            first.txn_id.clone(),
                            ErrorType::HighRiskNewVendor,
                            format!("vendor incorporated within {m} months"),
                        )
                        .with_aliases(aliases)
                        .with_origin(GtOrigin::RuleChange),
                    );
                }
            }
        }
    }
    out
}

/// Rule checker: returns (representative txn, type) per detected pattern.
pub fn detect(d: &FraudDocs) -> Vec<(String, ErrorType)> {
    use ErrorType::*;
    let mut out: BTreeSet<(String, ErrorType)> = BTreeSet::new();
    let earliest = |ts: &[&Transaction]| -> String {
        let mut v = ts.to_vec();
        v.sort_by(|a, b| a.date.cmp(&b.date).then(a.txn_id.cmp(&b.txn_id)));
        v.first().map(|t| t.txn_id.clone()).unwrap_or_default()
    };
    let vendors: BTreeMap<&str, &VendorRecord> = d
        .vendor_registry
        .iter()
        .map(|v| (v.vendor_id.as_str(), v))
        .collect();
    let mut by_vendor: BTreeMap<&str, Vec<&Transaction>> = BTreeMap::new();
    for t in &d.transactions {
        by_vendor.entry(t.vendor_id.as_str()).or_default().push(t);
    }
    let by_id: BTreeMap<&str, &Transaction> = d
        .transactions
        .iter()
        .map(|t| (t.txn_id.as_str(), t))
        .collect();
    // circular: cycles in reference links spanning ≥ 2 vendors
    let mut in_cycle: BTreeSet<&str> = BTreeSet::new();
    for t in &d.transactions {
        let mut path = vec![t.txn_id.as_str()];
        let mut cur = t;
        while let Some(next) = cur.reference_txn.as_deref().and_then(|r| by_id.get(r)) {
            if next.txn_id == t.txn_id {
                let vs: BTreeSet<&str> = path
                    .iter()
                    .filter_map(|p| by_id.get(p))
                    .map(|x| x.vendor_id.as_str())
                    .collect();
                if vs.len() >= 2 {
                    in_cycle.extend(path.iter().copied());
                }
                break;
            }
            if path.contains(&next.txn_id.as_str()) || path.len() > 50 {
                break;
            }
            path.push(next.txn_id.as_str());
            cur = next;
        }
    }
    // group cycle members into components via links
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for &m in &in_cycle {
        if done.contains(m) {
            continue;
        }
        let mut comp = vec![];
        let mut cur = m;
        while done.insert(cur) {
            if let Some(t) = by_id.get(cur) {
                comp.push(*t);
                cur = t.reference_txn.as_deref().unwrap_or(cur);
            }
        }
        out.insert((earliest(&comp), CircularInvoicing));
    }
    let total_spend: Decimal = d.transactions.iter().map(|t| t.amount).sum();
    let th = Decimal::from(d.audit_context.invoice_approval_threshold);
    let thousand = Decimal::from(1000);
    let end = d.audit_context.audit_period_end;
    for (vid, ts) in &by_vendor {
        let mut by_date: BTreeMap<Date, Vec<&Transaction>> = BTreeMap::new();
        for t in ts {
            by_date.entry(t.date).or_default().push(t);
        }
        for day in by_date.values() {
            let s: Decimal = day.iter().map(|t| t.amount).sum();
            if day.len() >= 2 && day.iter().all(|t| t.amount < th) && s > th {
                out.insert((earliest(day), SplitInvoice));
            }
        }
        let round: Vec<&Transaction> = ts
            .iter()
            .copied()
            .filter(|t| (t.amount % thousand).is_zero())
            .collect();
        if round.len() >= ROUND_MIN_TXNS {
            out.insert((earliest(&round), RoundNumberAnomaly));
        }
        if ts.len() >= BENFORD_MIN_TXNS && ts.iter().all(|t| leading_digit(t.amount) >= 8) {
            out.insert((earliest(ts), BenfordViolation));
        }
        let vs: Decimal = ts.iter().map(|t| t.amount).sum();
        if !total_spend.is_zero()
            && vs * Decimal::from(100)
                > total_spend * Decimal::from(d.audit_context.max_vendor_concentration_pct)
        {
            out.insert((earliest(ts), VendorConcentration));
        }
        let recent: Vec<&Transaction> = ts
            .iter()
            .copied()
            .filter(|t| end.0 - t.date.0 < SPIKE_WINDOW_DAYS)
            .collect();
        let before = ts.len() - recent.len();
        let windows_before = ((AUDIT_WINDOW_DAYS - SPIKE_WINDOW_DAYS) / SPIKE_WINDOW_DAYS) as f64;
        if recent.len() >= SPIKE_MIN_TXNS
            && recent.len() as f64 >= 3.0 * (before as f64 / windows_before).max(1.0)
        {
            out.insert((earliest(&recent), SuddenVolumeSpike));
        }
        let wk: Vec<&Transaction> = ts.iter().copied().filter(|t| t.date.is_weekend()).collect();
        if wk.len() > d.audit_context.weekend_invoice_threshold {
            out.insert((earliest(&wk), WeekendPattern));
        }
        if let Some(v) = vendors.get(vid) {
            for t in ts {
                if t.date < v.incorporation_date {
                    out.insert((t.txn_id.clone(), InvoiceBeforeIncorporation));
                }
            }
            let pan = util::gstin_pan(&v.gstin);
            let shares_pan = d
                .vendor_registry
                .iter()
                .any(|o| o.vendor_id != v.vendor_id && util::gstin_pan(&o.gstin) == pan);
            if shares_pan && v.employee_count <= 2 && v.registered_address.is_none() {
                out.insert((earliest(ts), ShellCompany));
            }
            let later_dup = d.vendor_registry.iter().any(|o| {
                o.vendor_id != v.vendor_id
                    && o.bank_account == v.bank_account
                    && o.incorporation_date < v.incorporation_date
            });
            if later_dup {
                out.insert((earliest(ts), DuplicateBankAccount));
            }
        }
    }
    for it in shock_items(d) {
        out.insert((it.document_id, it.error_type));
    }
    out.into_iter().collect()
}
