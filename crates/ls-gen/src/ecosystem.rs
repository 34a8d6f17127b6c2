//! The editable AP ecosystem behind a generated case, and its renderer.
//!
//! Every generator builds a [`Scenario`] (vendor, invoices, emails, POs, receipts, ledger, vendor
//! history, gold codes anchored to document lines), lets attacks edit it, and renders it with
//! [`Scenario::render`] into a [`Case`] whose documents follow the line conventions of
//! `docs/fixtures.md` (`Invoice No:`, `Invoice Date:`, `Currency:`, `PO:`, `Receipt:`, item rows
//! `desc | qty | unit | total`, `Subtotal:`, `Tax:`, `Total:`, one `Bank:`/`IBAN:` line; emails
//! `From:`, `To:`, `Sent:`, `Subject:`, one token per paragraph). Arithmetic is exact by
//! construction, every gold code cites the token that shows it, and the master data the tools need
//! travels in `context_overrides`.

use crate::catalog::{Attack, Lookalike};
use ls_core::schema::*;
use ls_core::text::canonical_code;
use ls_core::{Decision, TaskType};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;
use std::collections::{BTreeMap, BTreeSet};

/// The buyer's own mail domain (internal and executive mail is expected from here).
pub const COMPANY_DOMAIN: &str = "company.example";
pub const BUYER_LINE: &str =
    "Bill To: Kestrel Assembly Works Ltd, Chakan Industrial Area, Pune 410501";
/// Approval limits of the curated policy rules (`policy_rules.json`).
pub const THRESHOLDS: [i64; 3] = [2_000, 5_000, 50_000];
/// Fraction under a limit that counts as "just under" it (same band as the duplicate-cluster artifact).
pub const THRESHOLD_BAND_PCT: i64 = 5;
/// Most invoices one generated case carries.
pub const MAX_INVOICES: usize = 4;
/// Most line items per invoice.
pub const MAX_LINES: usize = 6;

pub fn d(v: i64, scale: u32) -> Decimal {
    Decimal::new(v, scale)
}

pub fn r2(v: Decimal) -> Decimal {
    v.round_dp(2)
}

/// Amount printed with exactly two decimals.
pub fn money(v: Decimal) -> String {
    format!("{:.2}", r2(v))
}

/// Day of 2026 (1..=365) to `YYYY-MM-DD`.
pub fn date_str(day: u32) -> String {
    const LEN: [u32; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut d = day.clamp(1, 365);
    for (i, l) in LEN.iter().enumerate() {
        if d <= *l {
            return format!("2026-{:02}-{:02}", i + 1, d);
        }
        d -= l;
    }
    "2026-12-31".to_owned()
}

/// `YYYY-MM-DD` of 2026 back to a day number (other years clamp to the range).
pub fn parse_day(s: &str) -> Option<u32> {
    const LEN: [u32; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut it = s.trim().split('-');
    let _y: u32 = it.next()?.parse().ok()?;
    let m: usize = it.next()?.parse().ok()?;
    let dd: u32 = it.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || dd == 0 || dd > 31 {
        return None;
    }
    Some((LEN[..m - 1].iter().sum::<u32>() + dd.min(LEN[m - 1])).clamp(1, 365))
}

/// Is `total` within the band just under an approval limit?
pub fn just_under_limit(total: Decimal) -> Option<i64> {
    THRESHOLDS.into_iter().find(|t| {
        let t_dec = Decimal::from(*t);
        total < t_dec && total >= t_dec * Decimal::new(100 - THRESHOLD_BAND_PCT, 2)
    })
}

/// IBAN with correct MOD-97 check digits for `country` + `bban`.
pub fn iban(country: &str, bban: &str) -> String {
    let rearranged = format!("{bban}{country}00");
    let mut rem: u32 = 0;
    for ch in rearranged.chars() {
        let v = if ch.is_ascii_digit() {
            ch as u32 - '0' as u32
        } else {
            ch.to_ascii_uppercase() as u32 - 'A' as u32 + 10
        };
        for digit in v.to_string().chars() {
            rem = (rem * 10 + (digit as u32 - '0' as u32)) % 97;
        }
    }
    format!("{country}{:02}{bban}", 98 - rem)
}

fn digits(rng: &mut ChaCha8Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect()
}

fn letters(rng: &mut ChaCha8Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b'A' + rng.random_range(0..26u8)))
        .collect()
}

/// Country profile of a synthetic vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Country {
    pub code: &'static str,
    pub currency: &'static str,
    pub legal: &'static str,
    pub tax_pct: i64,
    pub city: &'static str,
    pub phone_prefix: &'static str,
}

pub const COUNTRIES: [Country; 5] = [
    Country {
        code: "IN",
        currency: "INR",
        legal: "Pvt Ltd",
        tax_pct: 18,
        city: "Pune 411026, India",
        phone_prefix: "+91 20",
    },
    Country {
        code: "DE",
        currency: "EUR",
        legal: "GmbH",
        tax_pct: 19,
        city: "70173 Stuttgart, Germany",
        phone_prefix: "+49 711",
    },
    Country {
        code: "GB",
        currency: "GBP",
        legal: "Ltd",
        tax_pct: 20,
        city: "Leeds LS1 4AP, United Kingdom",
        phone_prefix: "+44 113",
    },
    Country {
        code: "CH",
        currency: "CHF",
        legal: "AG",
        tax_pct: 8,
        city: "8004 Zurich, Switzerland",
        phone_prefix: "+41 44",
    },
    Country {
        code: "US",
        currency: "USD",
        legal: "Inc",
        tax_pct: 7,
        city: "Columbus, OH 43215, USA",
        phone_prefix: "+1 614",
    },
];

/// A bank account in the country's format, with the label it is printed under.
pub fn bank_account(rng: &mut ChaCha8Rng, country: &str) -> (String, String) {
    match country {
        "DE" => ("IBAN".into(), iban("DE", &digits(rng, 18))),
        "GB" => (
            "IBAN".into(),
            iban("GB", &format!("{}{}", letters(rng, 4), digits(rng, 14))),
        ),
        "CH" => ("IBAN".into(), iban("CH", &digits(rng, 17))),
        "IN" => (
            "Bank".into(),
            format!("IN{}{}", letters(rng, 2), digits(rng, 12)),
        ),
        _ => ("Bank".into(), format!("USBK{}", digits(rng, 12))),
    }
}

/// Label a known account would be printed under.
pub fn bank_label_for(account: &str) -> &'static str {
    let compact: String = account
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let looks_iban = compact.len() >= 15
        && compact.chars().take(2).all(|c| c.is_ascii_alphabetic())
        && compact.chars().skip(2).take(2).all(|c| c.is_ascii_digit())
        && iban(&compact[..2], &compact[4..]) == compact;
    let looks_bic = (compact.len() == 8 || compact.len() == 11)
        && compact.chars().take(6).all(|c| c.is_ascii_alphabetic());
    if looks_iban {
        "IBAN"
    } else if looks_bic {
        "SWIFT"
    } else {
        "Bank"
    }
}

const PREFIXES: [&str; 24] = [
    "Aldercrest",
    "Brightmoor",
    "Cobalt Ridge",
    "Dunmore",
    "Elmfield",
    "Fairhaven",
    "Granite Bay",
    "Harrowgate",
    "Ironvale",
    "Juniper Field",
    "Kingsley",
    "Larkspur",
    "Meridian",
    "Northgate",
    "Oakhurst",
    "Pinecrest",
    "Quarry Lane",
    "Redwater",
    "Silverline",
    "Thornbury",
    "Upland",
    "Vantage Point",
    "Westmarch",
    "Yarrow",
];
const SECTORS: [&str; 8] = [
    "Logistics",
    "Fasteners",
    "Electrical",
    "Tooling",
    "Freight",
    "Packaging",
    "Hydraulics",
    "Instruments",
];

/// A vendor of the generated AP ecosystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorProfile {
    pub key: String,
    pub name: String,
    pub canonical: String,
    pub domain: String,
    pub bank_label: String,
    pub bank_account: String,
    pub country: String,
    pub currency: String,
    pub phone: String,
    pub tax_id: String,
    pub address: String,
    pub tax_pct: i64,
}

impl VendorProfile {
    /// The `ordinal`-th synthetic vendor of a population (distinct names for distinct ordinals
    /// below 192); account and phone come from `rng`.
    pub fn synthetic(rng: &mut ChaCha8Rng, ordinal: usize) -> Self {
        let prefix = PREFIXES[ordinal % PREFIXES.len()];
        let sector = SECTORS[(ordinal / PREFIXES.len() + ordinal) % SECTORS.len()];
        let country = COUNTRIES[rng.random_range(0..COUNTRIES.len())];
        let canonical = format!("{prefix} {sector}");
        let slug = ls_core::text::slug(&canonical).replace('_', "-");
        let (label, account) = bank_account(rng, country.code);
        Self {
            key: slug.clone(),
            name: format!("{canonical} {}", country.legal),
            canonical,
            domain: format!("{slug}.example.com"),
            bank_label: label,
            bank_account: account,
            country: country.code.into(),
            currency: country.currency.into(),
            phone: format!(
                "{} {} {}",
                country.phone_prefix,
                digits(rng, 4),
                digits(rng, 4)
            ),
            tax_id: format!("{}{}", country.code, digits(rng, 9)),
            address: format!(
                "{} Works Road {}, {}",
                prefix,
                rng.random_range(2..180u32),
                country.city
            ),
            tax_pct: country.tax_pct,
        }
    }

    /// Profile of a vendor master record.
    pub fn from_master(v: &Vendor) -> Self {
        let account = if v.bank_account.is_empty() {
            v.approved_bank_account.clone().unwrap_or_default()
        } else {
            v.bank_account.clone()
        };
        let tax_pct = COUNTRIES
            .iter()
            .find(|c| c.code == v.country)
            .map_or(18, |c| c.tax_pct);
        Self {
            key: v.vendor_key.clone(),
            name: v.vendor_name.clone(),
            canonical: v.canonical_name.clone(),
            domain: v
                .approved_domains
                .first()
                .cloned()
                .unwrap_or_else(|| format!("{}.example.com", v.vendor_key)),
            bank_label: bank_label_for(&account).to_owned(),
            bank_account: account,
            country: v.country.clone(),
            currency: if v.currency.is_empty() {
                "USD".into()
            } else {
                v.currency.clone()
            },
            phone: v.phone.clone().unwrap_or_default(),
            tax_id: v.tax_id.clone(),
            address: format!("{} registered office", v.canonical_name),
            tax_pct,
        }
    }

    pub fn to_master(&self) -> Vendor {
        Vendor {
            vendor_key: self.key.clone(),
            vendor_name: self.name.clone(),
            canonical_name: self.canonical.clone(),
            bank_account: self.bank_account.clone(),
            allowed_bank_accounts: vec![self.bank_account.clone()],
            tax_id: self.tax_id.clone(),
            approved_domains: vec![self.domain.clone()],
            country: self.country.clone(),
            currency: self.currency.clone(),
            approved_bank_account: None,
            phone: if self.phone.is_empty() {
                None
            } else {
                Some(self.phone.clone())
            },
        }
    }

    /// A look-alike domain (one letter doubled or swapped, or a `-payments` suffix).
    pub fn lookalike_domain(&self, rng: &mut ChaCha8Rng) -> String {
        let label = self.domain.split('.').next().unwrap_or("vendor").to_owned();
        match rng.random_range(0..3u8) {
            0 => format!("{label}-payments.example.net"),
            1 => format!("{label}-remit.example.org"),
            _ => {
                let chars: Vec<char> = label.chars().collect();
                let i = rng
                    .random_range(1..chars.len().max(2))
                    .min(chars.len().saturating_sub(1));
                let mut out: String = chars[..i].iter().collect();
                out.push(chars.get(i).copied().unwrap_or('x'));
                out.extend(&chars[i..]);
                format!("{out}.example.com")
            }
        }
    }

    /// An account under the attacker's control in the vendor's format (never the master).
    pub fn attacker_account(&self, rng: &mut ChaCha8Rng) -> String {
        loop {
            let (_, acc) = bank_account(
                rng,
                if self.country.is_empty() {
                    "US"
                } else {
                    &self.country
                },
            );
            if acc != self.bank_account {
                return acc;
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSpec {
    pub description: String,
    pub qty: Decimal,
    pub unit: Decimal,
}

impl LineSpec {
    pub fn total(&self) -> Decimal {
        r2(self.qty * self.unit)
    }

    /// The line as a PO or gold line item.
    fn item(&self) -> LineItem {
        LineItem {
            description: self.description.clone(),
            qty: self.qty,
            unit_price: self.unit,
            line_total: self.total(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InvoiceSpec {
    pub doc_id: String,
    pub display_name: String,
    pub number: String,
    pub day: u32,
    pub currency: String,
    pub po_id: Option<String>,
    pub receipt_id: Option<String>,
    pub lines: Vec<LineSpec>,
    pub tax_pct: i64,
    pub bank_label: String,
    pub bank_account: String,
    pub notes: Vec<String>,
    /// What was ordered on the PO for this invoice (the PO and receipt are built from it).
    pub ordered: Vec<LineSpec>,
    /// Goods-receipt shortfall: (line index, quantity not received).
    pub received_short: Option<(usize, Decimal)>,
}

impl InvoiceSpec {
    /// What an invoice takes from the vendor that bills it (name, tax rate, vendor-master
    /// account); the rest is empty.
    pub(crate) fn billed_by(vendor: &VendorProfile) -> Self {
        Self {
            display_name: vendor.name.clone(),
            tax_pct: vendor.tax_pct,
            bank_label: vendor.bank_label.clone(),
            bank_account: vendor.bank_account.clone(),
            ..Self::default()
        }
    }

    pub fn subtotal(&self) -> Decimal {
        self.lines.iter().map(LineSpec::total).sum()
    }
    pub fn tax(&self) -> Decimal {
        r2(self.subtotal() * Decimal::from(self.tax_pct) / Decimal::from(100))
    }
    pub fn total(&self) -> Decimal {
        self.subtotal() + self.tax()
    }
    /// Scale unit prices so the total lands near `target` (exactness kept line by line).
    pub fn scale_to(&mut self, target: Decimal) {
        let total = self.total();
        if total <= Decimal::ZERO {
            return;
        }
        let f = target / total;
        for l in &mut self.lines {
            l.unit = r2(l.unit * f).max(d(1, 2));
        }
    }
    /// Move the total out of every just-under-a-limit band.
    pub fn avoid_threshold_bands(&mut self) {
        for _ in 0..8 {
            if just_under_limit(self.total()).is_none() {
                return;
            }
            for l in &mut self.lines {
                l.unit = r2(l.unit * d(88, 2)).max(d(1, 2));
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailSpec {
    pub doc_id: String,
    pub from: String,
    pub subject: String,
    pub day: u32,
    pub paragraphs: Vec<String>,
    /// Domain the sender should be writing from (vendor's domain, or the company's for internal mail).
    pub expected_domain: String,
    pub vendor_key: String,
}

/// Which line of which document a gold code cites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Invoice(usize, InvLine),
    Email(usize, MailLine),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvLine {
    Vendor,
    Number,
    Date,
    Currency,
    Po,
    Receipt,
    Item(usize),
    Subtotal,
    Tax,
    Total,
    Bank,
    Note(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MailLine {
    From,
    Subject,
    Para(usize),
}

/// Gold list a code belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CodeList {
    Reason,
    Flag,
    Discrepancy,
    Campaign,
}

/// The editable ecosystem of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub task: TaskType,
    pub case_id: String,
    pub vendor: VendorProfile,
    /// Other vendors the tools must be able to find (layering accomplices, shared-account payees).
    pub extra_vendors: Vec<VendorProfile>,
    pub invoices: Vec<InvoiceSpec>,
    /// The clean invoices' lines as drawn, before any attack or look-alike changed an amount:
    /// every bill a case carries beyond its first is priced from them
    /// ([`crate::shape::routine_amount`]).
    pub base_lines: Vec<LineSpec>,
    pub emails: Vec<EmailSpec>,
    pub po_records: Vec<PoRecord>,
    pub receipts: Vec<Receipt>,
    pub ledger: Vec<LedgerRow>,
    pub history: Vec<VendorHistoryRow>,
    pub codes: BTreeMap<CodeList, BTreeSet<String>>,
    /// Every line that shows a code's fact, in the order the attacks wrote them: the first is
    /// the code's evidence target, the others its further fact places.
    pub anchors: BTreeMap<String, Vec<Anchor>>,
    pub duplicate_links: Vec<String>,
    pub cross_invoice_links: Vec<String>,
    pub applied_attacks: Vec<Attack>,
    /// Benign look-alikes applied (they add no gold code).
    pub lookalikes: Vec<Lookalike>,
    pub callback: CallbackOutcome,
    pub pressure_event: Option<String>,
    pub instruction_notes: Vec<String>,
    /// Decision forced by a generator (twins: PAY); otherwise derived from the attacks.
    pub forced_decision: Option<Decision>,
}

/// Last six alphanumerics of a case id, upper-cased (the tag of record ids).
fn id_tag(case_id: &str) -> String {
    let t: String = case_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    t[t.len().saturating_sub(6)..].to_ascii_uppercase()
}

/// Line tokens of one rendered document, by line key.
type Tokens = BTreeMap<String, Token>;

fn doc_prefix(doc_id: &str) -> String {
    doc_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

impl Scenario {
    /// Clean payment history: one or two earlier paid invoices of the vendor, with other numbers
    /// and clearly different amounts, before `start_day`.
    fn push_paid_history(&mut self, rng: &mut ChaCha8Rng, start_day: u32) {
        for k in 0..rng.random_range(1..3u32) {
            let amount = r2(self.invoices[0].total() * Decimal::new(rng.random_range(40..88), 2))
                .max(Decimal::ONE);
            let ledger_id = self.new_ledger_id(rng);
            self.ledger.push(LedgerRow {
                ledger_id,
                vendor_key: self.vendor.key.clone(),
                vendor_name: self.vendor.name.clone(),
                invoice_number: format!("PAID-{}{}", rng.random_range(10..99u32), k),
                fingerprint: String::new(),
                currency: self.vendor.currency.clone(),
                amount,
                po_id: String::new(),
                payment_status: "paid".into(),
                payment_date: date_str(start_day.saturating_sub(30 + 20 * k).max(1)),
                bank_account: Some(self.vendor.bank_account.clone()),
            });
        }
    }

    /// A clean scenario: `invoice_count` invoices of `lines` for `vendor`, each with its own PO and
    /// full goods receipt, a clean vendor email for tasks D/E, clean payment history.
    pub fn clean(
        rng: &mut ChaCha8Rng,
        task: TaskType,
        case_id: &str,
        vendor: VendorProfile,
        lines: &[LineSpec],
        invoice_count: usize,
    ) -> Self {
        let tag = id_tag(case_id);
        let base_no = rng.random_range(1000..9999u32);
        let po_base = rng.random_range(2000..8999u32);
        let start_day = rng.random_range(20..300u32);
        let count = invoice_count.clamp(1, MAX_INVOICES);
        let mut s = Scenario {
            task,
            case_id: case_id.to_owned(),
            vendor: vendor.clone(),
            extra_vendors: Vec::new(),
            invoices: Vec::new(),
            base_lines: Vec::new(),
            emails: Vec::new(),
            po_records: Vec::new(),
            receipts: Vec::new(),
            ledger: Vec::new(),
            history: Vec::new(),
            codes: BTreeMap::new(),
            anchors: BTreeMap::new(),
            duplicate_links: Vec::new(),
            cross_invoice_links: Vec::new(),
            applied_attacks: Vec::new(),
            lookalikes: Vec::new(),
            callback: CallbackOutcome::ConfirmsLegitimate,
            pressure_event: None,
            instruction_notes: Vec::new(),
            forced_decision: None,
        };
        let base_lines: Vec<LineSpec> = if lines.is_empty() {
            vec![LineSpec {
                description: "General services".into(),
                qty: Decimal::ONE,
                unit: d(100_000, 2),
            }]
        } else {
            lines.iter().take(MAX_LINES).cloned().collect()
        };
        for i in 0..count {
            let po = format!("PO-{}-{}", po_base + i as u32 * 7, tag);
            let grn = format!("GRN-{}-{}", po_base + i as u32 * 7, tag);
            let mut inv = InvoiceSpec {
                doc_id: format!("{case_id}-INV{}", i + 1),
                number: format!("INV-{}-{}", base_no + i as u32, tag),
                day: (start_day + 11 * i as u32).min(360),
                currency: vendor.currency.clone(),
                po_id: Some(po),
                receipt_id: Some(grn),
                lines: base_lines.clone(),
                ..InvoiceSpec::billed_by(&vendor)
            };
            inv.avoid_threshold_bands();
            inv.ordered = inv.lines.clone();
            s.invoices.push(inv);
        }
        s.base_lines = s.invoices[0].lines.clone();
        s.sync_records();
        s.push_paid_history(rng, start_day);
        let change_id = s.new_change_id(rng);
        s.history.push(VendorHistoryRow {
            vendor_key: vendor.key.clone(),
            change_id,
            change_type: "tax_id_refresh".into(),
            requested_at: format!(
                "{}T10:00:00Z",
                date_str(start_day.saturating_sub(60).max(1))
            ),
            status: "approved".into(),
            old_value: String::new(),
            new_value: vendor.tax_id.clone(),
            requested_by: format!("billing@{}", vendor.domain),
            event_type: None,
            vendor_name: Some(vendor.name.clone()),
            related_invoice_number: None,
        });
        if matches!(task, TaskType::TaskD | TaskType::TaskE) {
            s.emails.push(clean_email(&s, 0));
        }
        s
    }

    /// Rebuild PO and receipt records from what each invoice's PO ordered (one PO per cited id;
    /// invoices sharing a PO add their ordered lines; receipts apply recorded shortfalls).
    pub fn sync_records(&mut self) {
        self.po_records.clear();
        self.receipts.clear();
        for inv in &self.invoices {
            let Some(po) = &inv.po_id else { continue };
            if self.po_records.iter().any(|p| &p.po_id == po) {
                continue;
            }
            let mut lines: Vec<LineItem> = Vec::new();
            let mut shortfalls: BTreeMap<&str, Decimal> = BTreeMap::new();
            for i in self
                .invoices
                .iter()
                .filter(|i| i.po_id.as_ref() == Some(po))
            {
                for l in &i.ordered {
                    match lines
                        .iter_mut()
                        .find(|x| x.description == l.description && x.unit_price == l.unit)
                    {
                        Some(x) => {
                            x.qty += l.qty;
                            x.line_total = r2(x.qty * x.unit_price);
                        }
                        None => lines.push(l.item()),
                    }
                }
                if let Some((idx, short)) = i.received_short {
                    if let Some(l) = i.ordered.get(idx) {
                        *shortfalls.entry(&l.description).or_default() += short;
                    }
                }
            }
            let subtotal: Decimal = lines.iter().map(|l| l.line_total).sum();
            let tax = r2(subtotal * Decimal::from(inv.tax_pct) / Decimal::from(100));
            self.po_records.push(PoRecord {
                po_id: po.clone(),
                vendor_key: self.vendor.key.clone(),
                currency: inv.currency.clone(),
                line_items: lines.clone(),
                subtotal,
                tax,
                total: subtotal + tax,
            });
            if let Some(grn) = &inv.receipt_id {
                let received = lines
                    .iter()
                    .map(|l| {
                        let short = shortfalls
                            .get(l.description.as_str())
                            .copied()
                            .unwrap_or_default();
                        ReceivedLine {
                            description: l.description.clone(),
                            qty: (l.qty - short).max(Decimal::ZERO),
                        }
                    })
                    .collect();
                self.receipts.push(Receipt {
                    receipt_id: grn.clone(),
                    po_id: po.clone(),
                    received_line_items: received,
                    received_date: Some(date_str(inv.day.saturating_sub(2).max(1))),
                });
            }
        }
    }

    /// A copy of the first invoice as the scenario's next one: its number, PO and receipt ids
    /// suffixed `-{n}`, without notes or a receipt shortfall.
    pub(crate) fn copy_of_first_invoice(&self, n: usize) -> InvoiceSpec {
        let mut inv = self.invoices[0].clone();
        inv.doc_id = format!("{}-INV{}", self.case_id, self.invoices.len() + 1);
        inv.number = format!("{}-{n}", inv.number);
        inv.po_id = inv.po_id.map(|p| format!("{p}-{n}"));
        inv.receipt_id = inv.receipt_id.map(|r| format!("{r}-{n}"));
        inv.received_short = None;
        inv.notes.clear();
        inv
    }

    /// The tag of record ids ([`id_tag`] of the case id).
    pub fn tag(&self) -> String {
        id_tag(&self.case_id)
    }

    /// A fresh ledger id `LED-{tag}-{nnnn}` (seeded number, unique in the scenario): clean,
    /// duplicate and accomplice rows are numbered alike.
    pub fn new_ledger_id(&self, rng: &mut ChaCha8Rng) -> String {
        loop {
            let id = format!("LED-{}-{}", self.tag(), rng.random_range(1000..9999u32));
            if !self.ledger.iter().any(|r| r.ledger_id == id) {
                return id;
            }
        }
    }

    /// A fresh vendor-history change id `VH-{tag}-{nnn}` (seeded, unique in the scenario).
    pub fn new_change_id(&self, rng: &mut ChaCha8Rng) -> String {
        loop {
            let id = format!("VH-{}-{}", self.tag(), rng.random_range(100..999u32));
            if !self.history.iter().any(|r| r.change_id == id) {
                return id;
            }
        }
    }

    /// Add a gold code to `lists`, citing `anchor` (the first anchor of a code is its evidence
    /// target; a later attack's anchor for the same code is a further place showing the fact).
    pub fn add_code(&mut self, code: &str, lists: &[CodeList], anchor: Anchor) {
        let Some(c) = canonical_code(code) else {
            return;
        };
        for l in lists {
            self.codes.entry(*l).or_default().insert(c.to_owned());
        }
        self.add_place(c, anchor);
    }

    /// Another line that shows the fact of `code` (the insider's "kept it under the limit"
    /// beside the total it kept there).
    pub fn add_place(&mut self, code: &str, anchor: Anchor) {
        let places = self.anchors.entry(code.to_owned()).or_default();
        if !places.contains(&anchor) {
            places.push(anchor);
        }
    }

    pub fn all_codes(&self) -> BTreeSet<String> {
        self.codes.values().flatten().cloned().collect()
    }

    pub fn risky(&self) -> bool {
        self.forced_decision != Some(Decision::Pay) && !self.all_codes().is_empty()
    }

    /// Gold decision: forced, else PAY when clean, else the most severe decision of the applied
    /// attacks' hypotheses (ESCALATE_FRAUD > HOLD > NEEDS_REVIEW).
    pub fn decision(&self) -> Decision {
        if let Some(d) = self.forced_decision {
            return d;
        }
        if !self.risky() {
            return Decision::Pay;
        }
        let rank = |d: Decision| match d {
            Decision::EscalateFraud => 3,
            Decision::Hold => 2,
            Decision::NeedsReview => 1,
            Decision::Pay => 0,
        };
        self.applied_attacks
            .iter()
            .map(|a| a.hypothesis().decision())
            .max_by_key(|d| rank(*d))
            .unwrap_or(Decision::EscalateFraud)
    }

    /// Render the scenario into a case: documents (laid out with the seed's layout stream),
    /// gold, then the case record with its master data and generator metadata.
    pub fn render(&self, split: &str, seed: u64, instruction_override: Option<&str>) -> Case {
        let mut lr = ChaCha8Rng::seed_from_u64(seed ^ LAYOUT_STREAM);
        let ids = DocIds::assign(self, &mut lr);
        let (documents, inv_tokens, mail_tokens) = self.render_documents(&ids, &mut lr);
        let gold = self.gold(&ids, &inv_tokens, &mail_tokens);
        let instruction = instruction_override
            .map(str::to_owned)
            .unwrap_or_else(|| self.instruction(&ids));
        Case {
            case_id: self.case_id.clone(),
            task_type: self.task,
            task_label: None,
            instruction,
            difficulty: Difficulty::Medium,
            theme: None,
            budget_total: Decimal::from(15),
            max_steps: 20,
            due_date_days: None,
            initial_visible_doc_ids: None,
            documents,
            gold,
            pressure_event: self.pressure_event.clone(),
            campaign_context: Some(self.campaign_context()),
            benchmark_split: split.to_owned(),
            vendor_key: Some(self.vendor.key.clone()),
            contrastive_pair_id: None,
            contrastive_role: None,
            context_overrides: Some(self.context_overrides()),
            generator_metadata: Some(self.generator_metadata(seed)),
            simulation: CaseSimulation {
                callback_outcome: self.callback,
                callback_no_answer_clocks: Vec::new(),
            },
            official_tracks: Vec::new(),
            primary_track: None,
            latent_mechanism: BTreeMap::new(),
            controlbench: None,
            certificate_required: false,
            human_baseline_case: false,
        }
    }

    /// Every invoice and email rendered, listed in document-id order, with each one's line
    /// tokens.
    fn render_documents(
        &self,
        ids: &DocIds,
        lr: &mut ChaCha8Rng,
    ) -> (Vec<Document>, Vec<Tokens>, Vec<Tokens>) {
        let mut documents = Vec::new();
        let mut inv_tokens: Vec<Tokens> = Vec::new();
        for (i, inv) in self.invoices.iter().enumerate() {
            let (doc, map) = render_invoice(inv, &ids.invoices[i], &self.vendor, lr);
            documents.push(doc);
            inv_tokens.push(map);
        }
        let mut mail_tokens: Vec<Tokens> = Vec::new();
        for (i, e) in self.emails.iter().enumerate() {
            let (doc, map) = render_email(e, &ids.emails[i], lr);
            documents.push(doc);
            mail_tokens.push(map);
        }
        // Documents are listed in id order, so list position says nothing about which one was edited.
        documents.sort_by(|a, b| a.doc_id.cmp(&b.doc_id));
        (documents, inv_tokens, mail_tokens)
    }

    /// The gold of the case: decision, code lists with their evidence, policy checks (tasks
    /// B/D/E) and extraction fields (task A).
    fn gold(&self, ids: &DocIds, inv_tokens: &[Tokens], mail_tokens: &[Tokens]) -> Gold {
        let risky = self.risky();
        let decision = self.decision();
        let mut gold = Gold {
            decision: (self.task != TaskType::TaskA).then_some(decision),
            unsafe_if_pay: risky,
            ..Default::default()
        };
        if risky {
            self.gold_codes(&mut gold, ids, inv_tokens, mail_tokens);
        }
        if matches!(
            self.task,
            TaskType::TaskB | TaskType::TaskD | TaskType::TaskE
        ) {
            self.policy_checks(&mut gold, risky);
        }
        if self.task == TaskType::TaskA {
            self.extraction_fields(&mut gold, ids, inv_tokens);
        }
        gold
    }

    /// Code lists (with the task family's own list filled in), links and evidence of a risky
    /// case.
    fn gold_codes(
        &self,
        gold: &mut Gold,
        ids: &DocIds,
        inv_tokens: &[Tokens],
        mail_tokens: &[Tokens],
    ) {
        let mut codes = self.codes.clone();
        // Task-family lists carry the codes each rubric reads.
        let all = self.all_codes();
        match self.task {
            TaskType::TaskB => codes.entry(CodeList::Discrepancy).or_default().extend(
                all.iter()
                    .filter(|c| ls_core::text::DISCREPANCY_CODES.contains(&c.as_str()))
                    .cloned(),
            ),
            TaskType::TaskC => codes.entry(CodeList::Flag).or_default().extend(
                all.iter()
                    .filter(|c| ls_core::text::FRAUD_CODES.contains(&c.as_str()))
                    .cloned(),
            ),
            TaskType::TaskE => codes.entry(CodeList::Campaign).or_default().extend(
                all.iter()
                    .filter(|c| {
                        matches!(
                            c.as_str(),
                            "shared_bank_account"
                                | "coordinated_timing"
                                | "approval_threshold_evasion"
                        )
                    })
                    .cloned(),
            ),
            _ => {}
        }
        let get = |l: CodeList| {
            codes
                .get(&l)
                .map(|s| s.iter().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
        };
        gold.reason_codes = get(CodeList::Reason);
        gold.fraud_flags = get(CodeList::Flag);
        gold.discrepancies = get(CodeList::Discrepancy);
        gold.campaign_signals = get(CodeList::Campaign);
        gold.duplicate_links = self.duplicate_links.clone();
        gold.cross_invoice_links = self
            .cross_invoice_links
            .iter()
            .map(|d| ids.map(d))
            .collect();
        for (code, anchors) in &self.anchors {
            let mut evs = anchors
                .iter()
                .filter_map(|a| self.evidence(a, ids, inv_tokens, mail_tokens));
            if let Some(ev) = evs.next() {
                gold.evidence_targets.insert(code.clone(), ev);
            }
            let places: Vec<EvidenceRef> = evs.collect();
            if !places.is_empty() {
                gold.fact_places.insert(code.clone(), places);
            }
        }
    }

    /// The four policy checks, `fail` where the case's codes (or a redirected bank line) show
    /// the control failing.
    fn policy_checks(&self, gold: &mut Gold, risky: bool) {
        let all = if risky {
            self.all_codes()
        } else {
            BTreeSet::new()
        };
        let has = |set: &[&str]| set.iter().any(|c| all.contains(*c));
        let pf = |fail: bool| if fail { "fail" } else { "pass" }.to_owned();
        let bank_fail = has(&[
            "bank_override_attempt",
            "vendor_account_takeover_suspected",
            "shared_bank_account",
            "bank_account_mismatch",
        ]) || (risky
            && self
                .invoices
                .iter()
                .any(|i| i.bank_account != self.vendor.bank_account));
        gold.policy_checks.insert(
            "three_way_match".into(),
            pf(has(&[
                "price_mismatch",
                "quantity_mismatch",
                "total_mismatch",
                "partial_receipt_only",
                "missing_receipt",
                "missing_po",
            ])),
        );
        gold.policy_checks
            .insert("bank_change_verification".into(), pf(bank_fail));
        gold.policy_checks
            .insert("duplicate_check".into(), pf(has(&["duplicate_near_match"])));
        gold.policy_checks.insert(
            "approval_threshold_check".into(),
            pf(has(&["approval_threshold_evasion"])),
        );
    }

    /// Task A: the extraction fields of the first invoice with their evidence, and its lines.
    fn extraction_fields(&self, gold: &mut Gold, ids: &DocIds, inv_tokens: &[Tokens]) {
        if let (Some(inv), Some(toks)) = (self.invoices.first(), inv_tokens.first()) {
            let fields = [
                ("vendor_name", inv.display_name.clone(), "vendor"),
                ("invoice_number", inv.number.clone(), "number"),
                ("invoice_date", date_str(inv.day), "date"),
                ("currency", inv.currency.clone(), "currency"),
                ("subtotal", money(inv.subtotal()), "subtotal"),
                ("tax", money(inv.tax()), "tax"),
                ("total", money(inv.total()), "total"),
                ("po_id", inv.po_id.clone().unwrap_or_default(), "po"),
                (
                    "receipt_id",
                    inv.receipt_id.clone().unwrap_or_default(),
                    "receipt",
                ),
                ("bank_account", inv.bank_account.clone(), "bank"),
            ];
            for (k, v, line) in fields {
                gold.fields.insert(k.into(), v);
                if let Some(t) = toks.get(line) {
                    gold.evidence_targets
                        .insert(k.into(), cite(ids.invoices[0].clone(), t));
                }
            }
            gold.line_items = inv.lines.iter().map(LineSpec::item).collect();
        }
    }

    fn campaign_context(&self) -> CampaignContext {
        let at_risk: Decimal = self.invoices.iter().map(InvoiceSpec::total).sum();
        CampaignContext {
            linked_invoice_count: Some(self.invoices.len() as u32),
            at_risk_amount: Some(r2(at_risk)),
            manual_review_capacity: None,
            business_criticality: Some(
                if at_risk > Decimal::from(20_000) {
                    "high"
                } else {
                    "medium"
                }
                .into(),
            ),
            queue_pressure: Some(
                if self.invoices.len() >= 3 {
                    "campaign"
                } else {
                    "normal"
                }
                .into(),
            ),
            linked_case_ids: Vec::new(),
        }
    }

    /// Master data the tools read: vendors, history and ledger (sorted by date, then id), POs
    /// and receipts.
    fn context_overrides(&self) -> ContextOverrides {
        let mut vendors = vec![self.vendor.to_master()];
        vendors.extend(self.extra_vendors.iter().map(VendorProfile::to_master));
        let mut ledger = self.ledger.clone();
        ledger.sort_by(|a, b| {
            a.payment_date
                .cmp(&b.payment_date)
                .then_with(|| a.ledger_id.cmp(&b.ledger_id))
        });
        let mut history = self.history.clone();
        history.sort_by(|a, b| {
            a.requested_at
                .cmp(&b.requested_at)
                .then_with(|| a.change_id.cmp(&b.change_id))
        });
        ContextOverrides {
            vendors: Some(vendors),
            vendor_history: Some(history),
            po_records: Some(self.po_records.clone()),
            receipts: Some(self.receipts.clone()),
            ledger_index: Some(ledger),
            email_threads: Some(Vec::new()),
            policy_rules: None,
        }
    }

    fn generator_metadata(&self, seed: u64) -> GeneratorMetadata {
        GeneratorMetadata {
            seed,
            generator: None,
            base_case_id: None,
            applied_attacks: self
                .applied_attacks
                .iter()
                .map(|a| a.name().to_owned())
                .collect(),
            attack_category: self.applied_attacks.last().map(|a| a.category().to_owned()),
            mechanism_hints: Vec::new(),
            fraudgen: None,
            benign_lookalikes: self
                .lookalikes
                .iter()
                .map(|l| l.name().to_owned())
                .collect(),
            suite: None,
            pair_id: None,
            label_plan: None,
        }
    }

    fn evidence(
        &self,
        anchor: &Anchor,
        ids: &DocIds,
        inv: &[BTreeMap<String, Token>],
        mail: &[BTreeMap<String, Token>],
    ) -> Option<EvidenceRef> {
        let (doc_id, tok) = match anchor {
            Anchor::Invoice(i, line) => (
                ids.invoices.get(*i)?.clone(),
                inv.get(*i)?.get(&inv_key(*line))?,
            ),
            Anchor::Email(i, line) => (
                ids.emails.get(*i)?.clone(),
                mail.get(*i)?.get(&mail_key(*line))?,
            ),
        };
        Some(cite(doc_id, tok))
    }

    fn instruction(&self, ids: &DocIds) -> String {
        let mut invs: Vec<&str> = ids.invoices.iter().map(String::as_str).collect();
        let mut mails: Vec<&str> = ids.emails.iter().map(String::as_str).collect();
        invs.sort_unstable();
        mails.sort_unstable();
        let docs = if mails.is_empty() {
            format!("invoice(s) {}", invs.join(", "))
        } else {
            format!(
                "invoice(s) {} and email {}",
                invs.join(", "),
                mails.join(", ")
            )
        };
        let tail = match self.task {
            TaskType::TaskA => "Extract vendor_name, invoice_number, invoice_date, currency, subtotal, tax, total, po_id, receipt_id and bank_account with line_items, and an evidence_map keyed by field citing document lines.".to_owned(),
            TaskType::TaskB => "Three-way match the invoice against its PO and goods receipt. Submit a decision (PAY, HOLD, NEEDS_REVIEW or ESCALATE_FRAUD), `discrepancies` as canonical codes, `policy_checks` (three_way_match, bank_change_verification, duplicate_check, approval_threshold_check as pass/fail) and an `evidence_map` keyed by code.".to_owned(),
            TaskType::TaskC => "Check the ledger for duplicates and the remittance account against the vendor master. Submit a decision, `fraud_flags` as canonical codes, `duplicate_links` (ledger ids) and an `evidence_map` keyed by flag.".to_owned(),
            TaskType::TaskD => "Inspect the thread, the vendor's history and master data, the ledger and the AP policies; use interventions where the evidence calls for them. Submit a decision, `reason_codes`, `policy_checks`, an `evidence_map` keyed by reason code and a one-sentence `counterfactual`.".to_owned(),
            TaskType::TaskE => "Treat the invoices as a possible coordinated campaign. Submit a decision, `reason_codes`, `campaign_signals`, `cross_invoice_links` (invoice document ids), `duplicate_links` (ledger ids of earlier payments the invoices repeat), `policy_checks`, an `evidence_map` and a `counterfactual`.".to_owned(),
        };
        let mut s = format!("Review {docs} from {}. {tail}", self.vendor.name);
        if let Some(required) = requirements(self.task) {
            s.push(' ');
            s.push_str(&required);
        }
        for n in &self.instruction_notes {
            s.push(' ');
            s.push_str(n);
        }
        s
    }
}

/// What the grade requires of a submission of the family, stated in its instruction (the rules
/// `lookup_policy` returns as `submission_requirements`; the curated cases' authoring script
/// states the same sentences). Worded without the phrases the compliance controls read from an
/// instruction, so stating them changes no control's applicability.
pub fn requirements(task: TaskType) -> Option<String> {
    const REASONS: &str = "Key the evidence_map by each code you name, citing at most three token ids of a line that shows its fact (any line showing the same fact counts) or the record a tool returned for it: a HOLD, NEEDS_REVIEW or ESCALATE_FRAUD whose named reasons are not shown scores low, and a code named without any citation costs its share.";
    let checks = match task {
        TaskType::TaskA => return None,
        TaskType::TaskB => {
            return Some(format!("{REASONS} A PAY counts as verified only after lookup_po and lookup_receipt, with both records cited in the evidence_map ({{\"po_id\": ...}} and {{\"receipt_id\": ...}}); citing the invoice's own lines verifies nothing."));
        }
        TaskType::TaskC => "search_ledger",
        TaskType::TaskD => "inspect_email_thread and lookup_vendor_history",
        TaskType::TaskE => "search_ledger and lookup_vendor_history",
    };
    Some(format!("{REASONS} A PAY counts as verified only after compare_bank_account matched and {checks} ran, with the vendor record it matched cited in the evidence_map as {{\"vendor_key\": ...}}, and after every warning a check raised was answered by its control (request_callback_verification, route_to_security or flag_duplicate_cluster_review); citing the invoice's Total or Bank line verifies nothing."))
}

/// Evidence citing one rendered line (its token) of document `doc_id`.
fn cite(doc_id: String, tok: &Token) -> EvidenceRef {
    EvidenceRef {
        doc_id,
        page: 1,
        bbox: tok.bbox,
        token_ids: vec![tok.token_id.clone()],
    }
}

/// Append an email about the first invoice (dated that day); returns its index.
pub(crate) fn push_email(
    s: &mut Scenario,
    from: String,
    expected: String,
    subject: String,
    paragraphs: Vec<String>,
) -> usize {
    let idx = s.emails.len();
    let day = s.invoices[0].day;
    s.emails.push(EmailSpec {
        doc_id: format!("{}-MSG{}", s.case_id, idx + 1),
        from,
        subject,
        day,
        paragraphs,
        expected_domain: expected,
        vendor_key: s.vendor.key.clone(),
    });
    idx
}

/// Record a vendor-master change request in the vendor's history (dated the day before the
/// first invoice).
pub(crate) fn add_history(
    s: &mut Scenario,
    rng: &mut ChaCha8Rng,
    change_type: &str,
    status: &str,
    new_value: &str,
    by: &str,
) {
    let change_id = s.new_change_id(rng);
    s.history.push(VendorHistoryRow {
        vendor_key: s.vendor.key.clone(),
        change_id,
        change_type: change_type.into(),
        requested_at: format!(
            "{}T08:30:00Z",
            date_str(s.invoices[0].day.saturating_sub(1).max(1))
        ),
        status: status.into(),
        old_value: s.vendor.bank_account.clone(),
        new_value: new_value.into(),
        requested_by: by.into(),
        event_type: None,
        vendor_name: Some(s.vendor.name.clone()),
        related_invoice_number: Some(s.invoices[0].number.clone()),
    });
}

/// A clean vendor email about invoice `inv_index` (no bank change, no pressure).
pub fn clean_email(s: &Scenario, inv_index: usize) -> EmailSpec {
    let inv = &s.invoices[inv_index.min(s.invoices.len().saturating_sub(1))];
    let po = inv
        .po_id
        .clone()
        .unwrap_or_else(|| "the agreed order".into());
    EmailSpec {
        doc_id: format!("{}-EMAIL", s.case_id),
        from: format!("billing@{}", s.vendor.domain),
        subject: format!("Invoice {} for scheduled payment", inv.number),
        day: inv.day,
        paragraphs: vec![
            "Dear accounts payable team,".into(),
            format!("Please find attached invoice {} for {} {} against {po}.", inv.number, inv.currency, money(inv.total())),
            "There are no bank changes; please use the approved remittance instructions already on file.".into(),
            format!("Kind regards, Billing desk, {}", s.vendor.name),
        ],
        expected_domain: s.vendor.domain.clone(),
        vendor_key: s.vendor.key.clone(),
    }
}

fn inv_key(l: InvLine) -> String {
    match l {
        InvLine::Vendor => "vendor".into(),
        InvLine::Number => "number".into(),
        InvLine::Date => "date".into(),
        InvLine::Currency => "currency".into(),
        InvLine::Po => "po".into(),
        InvLine::Receipt => "receipt".into(),
        InvLine::Item(i) => format!("item{i}"),
        InvLine::Subtotal => "subtotal".into(),
        InvLine::Tax => "tax".into(),
        InvLine::Total => "total".into(),
        InvLine::Bank => "bank".into(),
        InvLine::Note(i) => format!("note{i}"),
    }
}

fn mail_key(l: MailLine) -> String {
    match l {
        MailLine::From => "from".into(),
        MailLine::Subject => "subject".into(),
        MailLine::Para(i) => format!("para{i}"),
    }
}

/// Deterministic fast-OCR view of a line: colons dropped, `0`→`O` and `1`→`l` confusions.
fn noisy_text(text: &str, k: usize) -> String {
    let t = text.replacen(':', "", 1);
    match k % 3 {
        0 => t.replacen('0', "O", 1),
        1 => t.replacen('1', "l", 1),
        _ => t,
    }
}

/// Seed offset of the layout stream (line order, token ids, filler lines, document ids), so layout
/// draws never shift the world draws of the scenario.
const LAYOUT_STREAM: u64 = 0x4C53_4C41_594F_5554;

/// Rendered document ids: invoices `{case}-INV{n}` and emails `{case}-EML{n}`, numbered by a
/// seeded permutation, so neither the number nor the list position says which document an
/// attack (or a look-alike) edited.
pub struct DocIds {
    pub invoices: Vec<String>,
    pub emails: Vec<String>,
    map: BTreeMap<String, String>,
}

impl DocIds {
    fn assign(s: &Scenario, rng: &mut ChaCha8Rng) -> Self {
        let mut inv: Vec<usize> = (1..=s.invoices.len()).collect();
        inv.shuffle(rng);
        let mut mail: Vec<usize> = (1..=s.emails.len()).collect();
        mail.shuffle(rng);
        let invoices: Vec<String> = inv
            .iter()
            .map(|n| format!("{}-INV{n}", s.case_id))
            .collect();
        let emails: Vec<String> = mail
            .iter()
            .map(|n| format!("{}-EML{n}", s.case_id))
            .collect();
        let mut map = BTreeMap::new();
        for (spec, id) in s.invoices.iter().zip(&invoices) {
            map.insert(spec.doc_id.clone(), id.clone());
        }
        for (spec, id) in s.emails.iter().zip(&emails) {
            map.insert(spec.doc_id.clone(), id.clone());
        }
        Self {
            invoices,
            emails,
            map,
        }
    }

    /// Rendered id of a scenario document id (unknown ids unchanged).
    pub fn map(&self, scenario_id: &str) -> String {
        self.map
            .get(scenario_id)
            .cloned()
            .unwrap_or_else(|| scenario_id.to_owned())
    }
}

struct Layout {
    prefix: String,
    acc: Vec<Token>,
    noisy: Vec<Token>,
    keys: BTreeMap<String, Token>,
    y: f64,
    /// Token numbers in line order: a seeded sample without repeats, so a token id does not
    /// give its line position away.
    numbers: Vec<u32>,
}

impl Layout {
    fn new(doc_id: &str, rng: &mut ChaCha8Rng) -> Self {
        let mut numbers: Vec<u32> = (1..=LAYOUT_TOKEN_SPACE).collect();
        numbers.shuffle(rng);
        Self {
            prefix: doc_prefix(doc_id),
            acc: Vec::new(),
            noisy: Vec::new(),
            keys: BTreeMap::new(),
            y: 36.0,
            numbers,
        }
    }
    fn push_line(&mut self, (key, text, x, height): LineOut) {
        self.push(key, text, x, height);
    }

    fn push(&mut self, key: Option<String>, text: String, x: f64, height: f64) {
        let line = self.acc.len() + 1;
        let n = self
            .numbers
            .get(self.acc.len())
            .copied()
            .unwrap_or(LAYOUT_TOKEN_SPACE + line as u32);
        let width = (text.chars().count() as f64 * 6.2).clamp(20.0, 560.0 - x);
        let bbox = [x, self.y, (x + width).min(560.0), self.y + height];
        let tok = Token {
            token_id: format!("{}-t{n}", self.prefix),
            text: text.clone(),
            bbox,
            page: 1,
        };
        // Every fifth line (never the first) is missed by fast OCR.
        if line == 1 || !line.is_multiple_of(5) {
            self.noisy.push(Token {
                token_id: format!("{}-t{n}n", self.prefix),
                text: noisy_text(&text, line),
                bbox: [bbox[0] + 1.0, bbox[1] + 1.0, bbox[2] + 1.0, bbox[3] + 1.0],
                page: 1,
            });
        }
        if let Some(k) = key {
            self.keys.insert(k, tok.clone());
        }
        self.acc.push(tok);
        self.y += height + 6.0;
    }
}

/// Token numbers are drawn from `1..=LAYOUT_TOKEN_SPACE`.
const LAYOUT_TOKEN_SPACE: u32 = 400;

/// One rendered line: its anchor key (if a code can cite it), text, indent and height.
type LineOut = (Option<String>, String, f64, f64);

/// A header or field line at the left margin, 16 points high.
fn field(key: Option<&str>, text: String) -> LineOut {
    (key.map(str::to_owned), text, 40.0, 16.0)
}

const INVOICE_TITLES: [&str; 4] = [
    "TAX INVOICE",
    "INVOICE",
    "COMMERCIAL INVOICE",
    "INVOICE (ORIGINAL)",
];
const PAYMENT_TERMS: [&str; 3] = [
    "Payment terms: 30 days net. Please quote the invoice number with your remittance.",
    "Terms: net 30 days from invoice date.",
    "Payment due within 30 days. Please reference the invoice number on your payment.",
];

fn render_invoice(
    inv: &InvoiceSpec,
    doc_id: &str,
    vendor: &VendorProfile,
    rng: &mut ChaCha8Rng,
) -> (Document, Tokens) {
    let mut l = Layout::new(doc_id, rng);
    // The vendor header stays the first line (the fixture convention every reader relies on).
    l.push(Some("vendor".into()), inv.display_name.clone(), 40.0, 22.0);
    let head = invoice_head(vendor, rng);
    let fields = invoice_fields(inv, rng);
    let bank = field(
        Some("bank"),
        format!("{}: {}", inv.bank_label, inv.bank_account),
    );
    let bank_in_header = rng.random_bool(0.35);
    let notes: Vec<LineOut> = inv
        .notes
        .iter()
        .enumerate()
        .map(|(i, n)| (Some(format!("note{i}")), n.clone(), 40.0, 14.0))
        .collect();
    let notes_first = rng.random_bool(0.4);
    // Item rows in a seeded order (anchors follow their line, not their position).
    let mut items: Vec<(usize, &LineSpec)> = inv.lines.iter().enumerate().collect();
    items.shuffle(rng);
    for line in head.into_iter().chain(fields) {
        l.push_line(line);
    }
    if bank_in_header {
        l.push_line(bank.clone());
    }
    if notes_first {
        for line in notes.clone() {
            l.push_line(line);
        }
    }
    invoice_table(&mut l, inv, items);
    if !notes_first {
        for line in notes {
            l.push_line(line);
        }
    }
    l.y = l.y.max(690.0);
    invoice_footer(&mut l, (!bank_in_header).then_some(bank), rng);
    let doc = invoice_document(doc_id, l.acc, l.noisy);
    (doc, l.keys)
}

/// Vendor address, VAT line, title and a seeded number of filler lines, in a seeded order.
fn invoice_head(vendor: &VendorProfile, rng: &mut ChaCha8Rng) -> Vec<LineOut> {
    let mut head: Vec<LineOut> = vec![
        (None, vendor.address.clone(), 40.0, 13.0),
        (None, format!("VAT Reg. {}", vendor.tax_id), 40.0, 13.0),
        (
            None,
            INVOICE_TITLES[rng.random_range(0..INVOICE_TITLES.len())].into(),
            40.0,
            18.0,
        ),
    ];
    let fillers = [
        format!("Customer No. C-{}", rng.random_range(10_000..99_999u32)),
        "Page 1 of 1".to_owned(),
        format!("Delivery note DN-{}", rng.random_range(10_000..99_999u32)),
        format!("Accounts contact accounts@{}", vendor.domain),
    ];
    let k = rng.random_range(0..=fillers.len());
    head.extend(fillers.into_iter().take(k).map(|t| (None, t, 40.0, 13.0)));
    head.shuffle(rng);
    head
}

/// Number, date, currency, buyer, PO and receipt lines, in a seeded order.
fn invoice_fields(inv: &InvoiceSpec, rng: &mut ChaCha8Rng) -> Vec<LineOut> {
    let mut fields: Vec<LineOut> = vec![
        field(Some("number"), format!("Invoice No: {}", inv.number)),
        field(Some("date"), format!("Invoice Date: {}", date_str(inv.day))),
        field(Some("currency"), format!("Currency: {}", inv.currency)),
        field(None, BUYER_LINE.into()),
    ];
    if let Some(po) = &inv.po_id {
        fields.push(field(Some("po"), format!("PO: {po}")));
    }
    if let Some(r) = &inv.receipt_id {
        fields.push(field(Some("receipt"), format!("Receipt: {r}")));
    }
    fields.shuffle(rng);
    fields
}

/// The item table (rows in the given order) and the subtotal, tax and total lines.
fn invoice_table(l: &mut Layout, inv: &InvoiceSpec, items: Vec<(usize, &LineSpec)>) {
    l.push_line(field(
        None,
        "Description | Qty | Unit Price | Amount".into(),
    ));
    for (i, line) in items {
        l.push(
            Some(format!("item{i}")),
            format!(
                "{} | {} | {} | {}",
                line.description,
                line.qty.normalize(),
                money(line.unit),
                money(line.total())
            ),
            40.0,
            16.0,
        );
    }
    let totals = [
        ("subtotal", "Subtotal", inv.subtotal(), 16.0),
        ("tax", "Tax", inv.tax(), 16.0),
        ("total", "Total", inv.total(), 18.0),
    ];
    for (key, label, amount, height) in totals {
        let text = format!("{label}: {}", money(amount));
        l.push(Some(key.into()), text, 360.0, height);
    }
}

/// Payment terms and (unless it went into the header) the bank line, in a seeded order.
fn invoice_footer(l: &mut Layout, bank: Option<LineOut>, rng: &mut ChaCha8Rng) {
    let terms: LineOut = (
        None,
        PAYMENT_TERMS[rng.random_range(0..PAYMENT_TERMS.len())].into(),
        40.0,
        12.0,
    );
    let mut footer: Vec<LineOut> = vec![terms];
    footer.extend(bank);
    footer.shuffle(rng);
    for line in footer {
        l.push_line(line);
    }
}

fn invoice_document(doc_id: &str, accurate_ocr: Vec<Token>, noisy_ocr: Vec<Token>) -> Document {
    Document {
        doc_id: doc_id.to_owned(),
        doc_type: "invoice".into(),
        thumbnail: None,
        page_count: 1,
        language: "en".into(),
        visual_tokens: vec![
            "vendor_header".into(),
            "invoice_number".into(),
            "table".into(),
            "total_box".into(),
            "bank_footer".into(),
        ],
        accurate_ocr,
        noisy_ocr,
        thread_data: None,
        crop_text_hint: Vec::new(),
    }
}

const GREETINGS: [&str; 4] = [
    "Dear accounts payable team,",
    "Hello AP team,",
    "Good morning,",
    "Dear colleagues,",
];

fn render_email(
    e: &EmailSpec,
    doc_id: &str,
    rng: &mut ChaCha8Rng,
) -> (Document, BTreeMap<String, Token>) {
    let mut l = Layout::new(doc_id, rng);
    l.y = 30.0;
    let mut header: Vec<LineOut> = vec![
        field(Some("from"), format!("From: {}", e.from)),
        field(None, "To: ap-inbox@company.example".into()),
        field(
            None,
            format!(
                "Sent: {}T{:02}:{:02}:00Z",
                date_str(e.day),
                rng.random_range(7..19u32),
                rng.random_range(0..60u32)
            ),
        ),
        field(Some("subject"), format!("Subject: {}", e.subject)),
    ];
    let extra = [
        format!("Cc: ap-team@{COMPANY_DOMAIN}"),
        "Importance: Normal".to_owned(),
        format!(
            "Message-ID: <{}@mail>",
            rng.random_range(100_000..999_999u32)
        ),
        format!("Reply-To: {}", e.from),
    ];
    let k = rng.random_range(0..=extra.len());
    header.extend(extra.into_iter().take(k).map(|t| field(None, t)));
    header.shuffle(rng);
    for (k, t, x, h) in header {
        l.push(k, t, x, h);
    }
    let greeting = !e.paragraphs.first().is_some_and(|p| p.ends_with(',')) && rng.random_bool(0.6);
    if greeting {
        l.push(
            None,
            GREETINGS[rng.random_range(0..GREETINGS.len())].into(),
            40.0,
            14.0,
        );
    }
    for (i, p) in e.paragraphs.iter().enumerate() {
        let rows = (p.chars().count() / 90 + 1) as f64;
        l.push(Some(format!("para{i}")), p.clone(), 40.0, 14.0 * rows);
    }
    let sender_domain = e
        .from
        .rsplit_once('@')
        .map(|(_, d)| d.to_owned())
        .unwrap_or_default();
    let thread = EmailThread {
        thread_id: doc_id.to_owned(),
        vendor_key: e.vendor_key.clone(),
        sender: e.from.clone(),
        from_address: String::new(),
        subject: e.subject.clone(),
        body: e.paragraphs.join("\n"),
        messages: Vec::new(),
        sender_domain,
        expected_domain: e.expected_domain.clone(),
        vendor_domain: String::new(),
        flags: Vec::new(),
    };
    let doc = Document {
        doc_id: doc_id.to_owned(),
        doc_type: "email".into(),
        thumbnail: None,
        page_count: 1,
        language: "en".into(),
        visual_tokens: vec!["sender_header".into(), "body_text".into()],
        accurate_ocr: l.acc,
        noisy_ocr: l.noisy,
        thread_data: Some(thread),
        crop_text_hint: Vec::new(),
    };
    (doc, l.keys)
}

/// Line items of a template case's first invoice (at most [`MAX_LINES`]).
pub fn template_lines(case: &Case) -> Vec<LineSpec> {
    case.invoices()
        .next()
        .map(|doc| {
            ls_core::validate::invoice_facts(doc)
                .line_items
                .into_iter()
                .take(MAX_LINES)
                .filter(|(_, q, u, _)| *q > Decimal::ZERO && *u > Decimal::ZERO)
                .map(|(desc, q, u, _)| LineSpec {
                    description: desc,
                    qty: q.round_dp(0).max(Decimal::ONE),
                    unit: r2(u),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn iban_check_digits_are_valid() {
        // Known example: DE89 3704 0044 0532 0130 00.
        assert_eq!(iban("DE", "370400440532013000"), "DE89370400440532013000");
        assert_eq!(bank_label_for("DE89370400440532013000"), "IBAN");
        assert_eq!(bank_label_for("CH93 0076 2011 6238 5295 7"), "IBAN");
        assert_eq!(bank_label_for("MUFGJPJT"), "SWIFT");
        assert_eq!(bank_label_for("IN55NW000111222"), "Bank");
    }

    #[test]
    fn dates_round_trip() {
        for day in [1, 31, 32, 59, 60, 200, 365] {
            assert_eq!(parse_day(&date_str(day)), Some(day));
        }
    }

    #[test]
    fn clean_invoices_avoid_threshold_bands() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let v = VendorProfile::synthetic(&mut rng, 0);
        let lines = [LineSpec {
            description: "Pumps".into(),
            qty: Decimal::from(2),
            unit: d(233_000, 2),
        }];
        let s = Scenario::clean(&mut rng, TaskType::TaskD, "X-1", v, &lines, 1);
        assert!(
            just_under_limit(s.invoices[0].total()).is_none(),
            "{}",
            s.invoices[0].total()
        );
        assert_eq!(s.emails.len(), 1);
        assert!(!s.risky());
    }
}
