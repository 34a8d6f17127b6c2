//! Task 3 — purchase register (books) against GSTR-2B.

use std::collections::{BTreeMap, BTreeSet};

use rand::Rng;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::VENDOR_NAMES;
use crate::data::expense::draw_type_mix;
use crate::model::{ErrorType, GtItem, GtOrigin, WorldRules};
use crate::util::{self, money, Date, Rng8};

pub const OUR_STATE: &str = "27";
pub const IT_SERVICES_HSN: &str = "998314";
pub const ITC_TIME_LIMIT_DAYS: i32 = 180;
pub const DATE_TOLERANCE_DAYS: i32 = 30;
pub const AMOUNT_TOLERANCE_INR: i64 = 10;
/// REG-001 takes effect from this many days before the reference date.
pub const IT_RATE_EFFECTIVE_DAYS_AGO: i32 = 20;

const CLEAN_HSN: [(&str, &str); 8] = [
    ("8471", "Computers and peripherals"),
    ("3926", "Plastic office articles"),
    ("8443", "Printers and copiers"),
    ("9403", "Office furniture"),
    ("8528", "Monitors and projectors"),
    ("4820", "Registers and stationery"),
    ("8504", "Power supplies and UPS"),
    ("9405", "Lighting fittings"),
];
const BLOCKED: [(&str, &str, &str); 3] = [
    (
        "2106",
        "Catering services for office party",
        "Food and beverages (outdoor catering, except when provided as an output service)",
    ),
    (
        "8703",
        "Passenger car for director's personal use",
        "Motor vehicles for personal transport",
    ),
    (
        "9997",
        "Club and gym membership for staff",
        "Membership of a club, health or fitness centre",
    ),
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BookRow {
    pub invoice_no: String,
    pub vendor_name: String,
    pub vendor_gstin: String,
    pub date: Date,
    #[serde(with = "money")]
    pub taxable_value: Decimal,
    pub gst_rate: u32,
    #[serde(with = "money")]
    pub cgst: Decimal,
    #[serde(with = "money")]
    pub sgst: Decimal,
    #[serde(with = "money")]
    pub igst: Decimal,
    #[serde(with = "money")]
    pub total: Decimal,
    pub hsn_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsn_description: Option<String>,
    pub description: String,
    pub place_of_supply: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gstr2bRow {
    pub supplier_gstin: String,
    pub invoice_no: String,
    pub date: Date,
    #[serde(with = "money")]
    pub taxable_value: Decimal,
    #[serde(with = "money")]
    pub cgst: Decimal,
    #[serde(with = "money")]
    pub sgst: Decimal,
    #[serde(with = "money")]
    pub igst: Decimal,
    #[serde(with = "money")]
    pub total: Decimal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateNotice {
    pub hsn_code: String,
    pub gst_rate: u32,
    pub effective_from: Date,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GstContext {
    pub our_state_code: String,
    pub our_gstin: String,
    pub current_date: Date,
    /// Category descriptions, as strings (the reference's shape); each names its HSN code.
    pub itc_blocked_categories: Vec<String>,
    /// HSN codes of the blocked categories (ours: what the rule checker and agents match on).
    pub itc_blocked_hsn_codes: Vec<String>,
    pub itc_time_limit_days: i32,
    pub date_tolerance_days: i32,
    pub amount_tolerance_inr: i64,
    pub gstin_format: String,
    /// Rate changes in force (REG-001 from period 3 once delivered).
    pub rate_notices: Vec<RateNotice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GstDocs {
    pub purchase_register: Vec<BookRow>,
    pub gstr2b: Vec<Gstr2bRow>,
    pub context: GstContext,
}

struct Vendor {
    name: String,
    gstin: String,
    state: String,
}

fn taxes(tv: Decimal, rate: u32, intra: bool) -> (Decimal, Decimal, Decimal) {
    let hundred = Decimal::from(100);
    if intra {
        let half = util::paise(tv * Decimal::from(rate) / Decimal::from(200));
        (half, half, Decimal::ZERO)
    } else {
        (
            Decimal::ZERO,
            Decimal::ZERO,
            util::paise(tv * Decimal::from(rate) / hundred),
        )
    }
}

fn book_row(
    v: &Vendor,
    inv: &str,
    date: Date,
    tv: i64,
    rate: u32,
    hsn: (&str, &str),
    with_hsn_desc: bool,
) -> BookRow {
    let tv = Decimal::from(tv);
    let (c, s, i) = taxes(tv, rate, v.state == OUR_STATE);
    BookRow {
        invoice_no: inv.into(),
        vendor_name: v.name.clone(),
        vendor_gstin: v.gstin.clone(),
        date,
        taxable_value: tv,
        gst_rate: rate,
        cgst: c,
        sgst: s,
        igst: i,
        total: tv + c + s + i,
        hsn_code: hsn.0.into(),
        hsn_description: with_hsn_desc.then(|| hsn.1.to_string()),
        description: hsn.1.to_string(),
        place_of_supply: v.state.clone(),
    }
}

fn to_2b(b: &BookRow) -> Gstr2bRow {
    Gstr2bRow {
        supplier_gstin: b.vendor_gstin.clone(),
        invoice_no: b.invoice_no.clone(),
        date: b.date,
        taxable_value: b.taxable_value,
        cgst: b.cgst,
        sgst: b.sgst,
        igst: b.igst,
        total: b.total,
    }
}

fn retotal_b(b: &mut BookRow) {
    b.total = b.taxable_value + b.cgst + b.sgst + b.igst;
}
fn retotal_2(g: &mut Gstr2bRow) {
    g.total = g.taxable_value + g.cgst + g.sgst + g.igst;
}

/// The campaign period in which REG-001 (the IT-services rate cut) takes effect.
pub const IT_RATE_CHANGE_PERIOD: u32 = 3;

/// REG-001's effective date as a calendar date: [`IT_RATE_EFFECTIVE_DAYS_AGO`] days before the
/// start ("today") of period [`IT_RATE_CHANGE_PERIOD`]. It does not move in later periods.
pub fn it_rate_change_date() -> Date {
    util::period_reference_date(IT_RATE_CHANGE_PERIOD).days_before(IT_RATE_EFFECTIVE_DAYS_AGO)
}

/// The effective date in force for a data set dated `today`: the calendar date above, or
/// [`IT_RATE_EFFECTIVE_DAYS_AGO`] days before `today` for a data set dated earlier (never in the
/// future).
pub fn it_effective_date(today: Date) -> Date {
    it_rate_change_date().min(today.days_before(IT_RATE_EFFECTIVE_DAYS_AGO))
}

/// A planted error: its type, origin and why it is one.
type Planted = (ErrorType, GtOrigin, String);

/// IT-service rows from period 3: some before and some after the REG-001 effective date (rows
/// replaced in place; returns their indices).
fn it_service_rows(
    r: &mut Rng8,
    rules: &WorldRules,
    vendors: &[Vendor],
    books: &mut [(BookRow, Vec<Planted>)],
    g2b: &mut [Gstr2bRow],
) -> Vec<usize> {
    let today = rules.today;
    let hsn_desc = rules.schema_version >= 2;
    let mut it_rows: Vec<usize> = vec![];
    if rules.emit_it_services {
        let eff = it_effective_date(today);
        let picks = util::sample_indices(r, 43, 3);
        for (j, &k) in picks.iter().enumerate() {
            let v = util::pick(r, vendors);
            let date = if j == 0 {
                eff.add_days(-r.random_range(5..=40))
            } else {
                eff.add_days(r.random_range(1..=12))
            };
            let in_force = rules.it_services_rate_pct.filter(|_| date >= eff);
            // In later periods one post-change row is still booked at the old 18%.
            let rate = match in_force {
                Some(p) if j == 1 => p,
                _ => 18,
            };
            let b = book_row(
                v,
                &books[k].0.invoice_no,
                date,
                *util::pick(r, &[40000i64, 60000, 80000]),
                rate,
                (IT_SERVICES_HSN, "IT consulting services"),
                hsn_desc,
            );
            g2b[k] = to_2b(&b);
            books[k].0 = b;
            it_rows.push(k);
        }
    }
    it_rows
}

/// Red herrings: a 3-day date difference and a ₹1 taxable difference (neither is an error).
fn red_herrings(
    books: &[(BookRow, Vec<Planted>)],
    g2b: &mut [Gstr2bRow],
    rows: &[usize],
    today: Date,
) {
    let k = rows[0];
    g2b[k].date = books[k].0.date.add_days(3).min(today);
    let k = rows[1];
    g2b[k].taxable_value += Decimal::ONE;
    retotal_2(&mut g2b[k]);
}

planted_types! {
    /// The GST errors drawn for nine rows (a row missing on either side and a duplicated row
    /// are planted by `generate`).
    GstPlant {
        AmountMismatch,
        TaxRateMismatch,
        GstinMismatch,
        DateMismatch,
        InvalidGstin,
        WrongTaxType,
        ItcIneligible,
        LateClaim,
        ExcessClaim,
    }
}

/// Plant one error of type `t` into a books row and its GSTR-2B counterpart; returns why it is
/// an error.
fn plant_error(
    r: &mut Rng8,
    t: GstPlant,
    b: &mut BookRow,
    g: &mut Gstr2bRow,
    today: Date,
) -> String {
    let intra = b.place_of_supply == OUR_STATE;
    match t {
        GstPlant::AmountMismatch => {
            g.taxable_value += Decimal::from(r.random_range(5..=50) * 100);
            retotal_2(g);
            "taxable value differs between books and GSTR-2B".into()
        }
        GstPlant::TaxRateMismatch => {
            let others: Vec<u32> = [5u32, 12, 18, 28]
                .into_iter()
                .filter(|x| *x != b.gst_rate)
                .collect();
            let nr = *util::pick(r, &others);
            let (c, s, i) = taxes(b.taxable_value, nr, intra);
            b.gst_rate = nr;
            b.cgst = c;
            b.sgst = s;
            b.igst = i;
            retotal_b(b);
            "books use a different GST rate than the supplier filed".into()
        }
        GstPlant::ExcessClaim => {
            let extra = Decimal::from(r.random_range(3..=20) * 100);
            if intra {
                b.cgst += extra;
                b.sgst += extra;
            } else {
                b.igst += extra + extra;
            }
            retotal_b(b);
            "input tax claimed exceeds the tax on the invoice".into()
        }
        GstPlant::GstinMismatch => {
            g.supplier_gstin = util::random_gstin(r, &b.place_of_supply);
            "supplier GSTIN in GSTR-2B differs from the books".into()
        }
        GstPlant::DateMismatch => {
            let d = r.random_range(35..=60);
            g.date = b
                .date
                .add_days(if b.date.add_days(d) <= today { d } else { -d });
            "invoice dates differ by more than 30 days".into()
        }
        GstPlant::InvalidGstin => {
            let bad = util::invalid_gstin(r, &b.place_of_supply);
            b.vendor_gstin = bad.clone();
            g.supplier_gstin = bad;
            "GSTIN fails format or checksum validation".into()
        }
        GstPlant::WrongTaxType => {
            let tax = b.cgst + b.sgst + b.igst;
            if intra {
                b.igst = tax;
                b.cgst = Decimal::ZERO;
                b.sgst = Decimal::ZERO;
            } else {
                let half = tax / Decimal::from(2);
                b.cgst = half;
                b.sgst = half;
                b.igst = Decimal::ZERO;
            }
            "IGST/CGST+SGST split does not match the place of supply".into()
        }
        GstPlant::ItcIneligible => {
            let (h, d, _) = *util::pick(r, &BLOCKED);
            b.hsn_code = h.into();
            b.description = d.into();
            if b.hsn_description.is_some() {
                b.hsn_description = Some(d.into());
            }
            "input tax credit is blocked for this category".into()
        }
        GstPlant::LateClaim => {
            let d = today.days_before(r.random_range(200..=365));
            b.date = d;
            g.date = d;
            "invoice older than the 180-day ITC window".into()
        }
    }
}

pub fn generate(seed: u64, rules: &WorldRules) -> (GstDocs, Vec<GtItem>) {
    let today = rules.today;
    let mut rng = util::rng_for(seed, 3);
    let r: &mut Rng8 = &mut rng;
    let hsn_desc = rules.schema_version >= 2;
    let states = ["27", "29", "06", "33", "07"];
    let vendors: Vec<Vendor> = (0..20)
        .map(|i| {
            let st = util::pick(r, &states).to_string();
            Vendor {
                name: VENDOR_NAMES[i].into(),
                gstin: util::random_gstin(r, &st),
                state: st,
            }
        })
        .collect();
    // 45 invoice numbers in random order: 43 common, 1 books-only, 1 GSTR-2B-only.
    let mut numbers: Vec<usize> = (1..=45).collect();
    util::shuffle(r, &mut numbers);
    let inv_no = |k: usize| format!("VINV-{:04}", numbers[k]);
    let mut books: Vec<(BookRow, Vec<Planted>)> = vec![];
    let mut g2b: Vec<Gstr2bRow> = vec![];
    let mut used_dates_per_inv = BTreeMap::new();
    for k in 0..43 {
        let v = util::pick(r, &vendors);
        let tv = *util::pick(r, &[5000i64, 10000, 15000, 20000, 25000, 30000, 50000]);
        let rate = *util::pick(r, &[5u32, 12, 18, 28]);
        let date = today.days_before(r.random_range(10..=90));
        let hsn = *util::pick(r, &CLEAN_HSN);
        let b = book_row(v, &inv_no(k), date, tv, rate, hsn, hsn_desc);
        used_dates_per_inv.insert(k, date);
        g2b.push(to_2b(&b));
        books.push((b, vec![]));
    }
    let it_rows = it_service_rows(r, rules, &vendors, &mut books, &mut g2b);
    let candidates: Vec<usize> = (0..43).filter(|k| !it_rows.contains(k)).collect();
    let chosen = {
        let idx = util::sample_indices(r, candidates.len(), 13);
        idx.into_iter().map(|i| candidates[i]).collect::<Vec<_>>()
    };
    // chosen[0..9]: mixed errors, chosen[9]: duplicated row, chosen[10..12]: red herrings.
    let mix = draw_type_mix(r, &GstPlant::ALL, 9, &[]);
    for (slot, t) in mix.iter().enumerate() {
        let k = chosen[slot];
        let (b, tags) = &mut books[k];
        let g = &mut g2b[k];
        let why = plant_error(r, *t, b, g, today);
        tags.push((t.error_type(), GtOrigin::Planted, why));
    }
    red_herrings(&books, &mut g2b, &chosen[10..12], today);
    // Books-only and GSTR-2B-only invoices.
    {
        let v = util::pick(r, &vendors);
        let b = book_row(
            v,
            &inv_no(43),
            today.days_before(r.random_range(10..=60)),
            25000,
            18,
            CLEAN_HSN[0],
            hsn_desc,
        );
        books.push((
            b,
            vec![(
                ErrorType::MissingInGstr2b,
                GtOrigin::Planted,
                "booked but not reported by the supplier".into(),
            )],
        ));
        let v = util::pick(r, &vendors);
        let b = book_row(
            v,
            &inv_no(44),
            today.days_before(r.random_range(10..=60)),
            18000,
            18,
            CLEAN_HSN[1],
            false,
        );
        g2b.push(to_2b(&b));
    }
    // Duplicate books row.
    let dup_src = chosen[9];
    let dup = books[dup_src].0.clone();
    books[dup_src].1.push((
        ErrorType::DuplicateEntry,
        GtOrigin::Planted,
        "invoice booked twice".into(),
    ));
    books.push((dup, vec![]));

    let mut gt = vec![];
    for (b, tags) in &books {
        for (t, o, why) in tags {
            gt.push(GtItem::new(b.invoice_no.clone(), *t, why.clone()).with_origin(*o));
        }
    }
    gt.push(GtItem::new(
        inv_no(44),
        ErrorType::MissingInBooks,
        "reported by the supplier but not booked",
    ));
    // IT rows booked at the old rate while a rate change is in force.
    let ctx_rules = rate_notices(rules);
    for (inv, _) in detect_rate_notices(
        &books.iter().map(|x| x.0.clone()).collect::<Vec<_>>(),
        &ctx_rules,
    ) {
        gt.push(
            GtItem::new(
                inv,
                ErrorType::TaxRateMismatch,
                "IT services booked at 18% after the rate change",
            )
            .with_origin(GtOrigin::RuleChange),
        );
    }
    let mut purchase_register: Vec<BookRow> = books.into_iter().map(|x| x.0).collect();
    util::shuffle(r, &mut purchase_register);
    let context = GstContext {
        our_state_code: OUR_STATE.into(),
        our_gstin: util::random_gstin(r, OUR_STATE),
        current_date: today,
        itc_blocked_categories: BLOCKED.iter().map(|(h, _, c)| format!("{c} (HSN {h})")).collect(),
        itc_blocked_hsn_codes: BLOCKED.iter().map(|(h, _, _)| h.to_string()).collect(),
        itc_time_limit_days: ITC_TIME_LIMIT_DAYS,
        date_tolerance_days: DATE_TOLERANCE_DAYS,
        amount_tolerance_inr: AMOUNT_TOLERANCE_INR,
        gstin_format: "15 characters: 2-digit state code + 10-character PAN + entity code + 'Z' + check character (GSTN mod-36 checksum)".into(),
        rate_notices: ctx_rules,
    };
    super::sort_ground_truth(&mut gt);
    let _ = used_dates_per_inv;
    (
        GstDocs {
            purchase_register,
            gstr2b: g2b,
            context,
        },
        gt,
    )
}

pub fn rate_notices(rules: &WorldRules) -> Vec<RateNotice> {
    rules
        .it_services_rate_pct
        .map(|p| {
            vec![RateNotice {
                hsn_code: IT_SERVICES_HSN.into(),
                gst_rate: p,
                effective_from: it_effective_date(rules.today),
            }]
        })
        .unwrap_or_default()
}

/// Rows booked at a rate other than the one in force for their HSN and date.
pub fn detect_rate_notices(books: &[BookRow], notices: &[RateNotice]) -> Vec<(String, ErrorType)> {
    let mut out = BTreeSet::new();
    for b in books {
        for n in notices {
            if b.hsn_code == n.hsn_code && b.date >= n.effective_from && b.gst_rate != n.gst_rate {
                out.insert((b.invoice_no.clone(), ErrorType::TaxRateMismatch));
            }
        }
    }
    out.into_iter().collect()
}

/// Rule checker for the reconciliation.
pub fn detect(d: &GstDocs) -> Vec<(String, ErrorType)> {
    use ErrorType::*;
    let ctx = &d.context;
    let tol = Decimal::from(ctx.amount_tolerance_inr);
    let one = Decimal::ONE;
    let mut out: BTreeSet<(String, ErrorType)> = BTreeSet::new();
    let g: BTreeMap<&str, &Gstr2bRow> = d
        .gstr2b
        .iter()
        .map(|x| (x.invoice_no.as_str(), x))
        .collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for b in &d.purchase_register {
        *counts.entry(b.invoice_no.as_str()).or_default() += 1;
    }
    let blocked: BTreeSet<&str> = ctx
        .itc_blocked_hsn_codes
        .iter()
        .map(String::as_str)
        .collect();
    for b in &d.purchase_register {
        let id = b.invoice_no.clone();
        if counts[b.invoice_no.as_str()] > 1 {
            out.insert((id.clone(), DuplicateEntry));
        }
        if !util::gstin_is_valid(&b.vendor_gstin) {
            out.insert((id.clone(), InvalidGstin));
        }
        if blocked.contains(b.hsn_code.as_str()) {
            out.insert((id.clone(), ItcIneligible));
        }
        if ctx.current_date.0 - b.date.0 > ctx.itc_time_limit_days {
            out.insert((id.clone(), LateClaim));
        }
        let intra = b.place_of_supply == ctx.our_state_code;
        if (intra && !b.igst.is_zero()) || (!intra && !(b.cgst + b.sgst).is_zero()) {
            out.insert((id.clone(), WrongTaxType));
        }
        let book_tax = b.cgst + b.sgst + b.igst;
        let own = b.taxable_value * Decimal::from(b.gst_rate) / Decimal::from(100);
        if book_tax > own + one {
            out.insert((id.clone(), ExcessClaim));
        }
        let Some(r2) = g.get(b.invoice_no.as_str()) else {
            out.insert((id, MissingInGstr2b));
            continue;
        };
        if (b.taxable_value - r2.taxable_value).abs() > tol {
            out.insert((id.clone(), AmountMismatch));
        }
        let tax2 = r2.cgst + r2.sgst + r2.igst;
        if (book_tax - own).abs() <= one && (book_tax - tax2).abs() > one {
            out.insert((id.clone(), TaxRateMismatch));
        }
        if util::gstin_is_valid(&b.vendor_gstin) && b.vendor_gstin != r2.supplier_gstin {
            out.insert((id.clone(), GstinMismatch));
        }
        if (b.date.0 - r2.date.0).abs() >= ctx.date_tolerance_days {
            out.insert((id, DateMismatch));
        }
    }
    let books: BTreeSet<&str> = d
        .purchase_register
        .iter()
        .map(|b| b.invoice_no.as_str())
        .collect();
    for r2 in &d.gstr2b {
        if !books.contains(r2.invoice_no.as_str()) {
            out.insert((r2.invoice_no.clone(), MissingInBooks));
        }
    }
    out.extend(detect_rate_notices(&d.purchase_register, &ctx.rate_notices));
    out.into_iter().collect()
}
