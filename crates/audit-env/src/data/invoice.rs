//! Task 2 — three-way match of purchase orders, goods receipts and invoices.

use std::collections::BTreeMap;

use rand::Rng;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::VENDOR_NAMES;
use crate::data::expense::draw_type_mix;
use crate::model::{ErrorType, GtItem, TaskId};
use crate::util::{self, money, Date, Rng8};

pub const HSN_CODES: [&str; 10] = [
    "8471", "3926", "8443", "9403", "8528", "4820", "8523", "8504", "9405", "7326",
];
const PRICES: [i64; 7] = [500, 1000, 1500, 2000, 2500, 3000, 5000];
/// POL-005: invoices whose total is above this need two distinct approvers.
pub const DUAL_APPROVAL_THRESHOLD_INR: i64 = 50_000;
/// Finance staff who approve invoices.
pub const APPROVERS: [&str; 6] = [
    "Sunita Gupta",
    "Kavita Iyer",
    "Deepa Nair",
    "Rohit Malhotra",
    "Sanjay Deshmukh",
    "Meera Pillai",
];
/// Random stream of the approval records (separate, so adding them left every other value as it was).
const APPROVAL_STREAM: u64 = 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoItem {
    pub item_name: String,
    #[serde(with = "money")]
    pub unit_price: Decimal,
    pub quantity: u32,
    pub hsn_code: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PurchaseOrder {
    pub po_id: String,
    pub vendor: String,
    pub vendor_gstin: String,
    pub date: Date,
    pub items: Vec<PoItem>,
    #[serde(with = "money")]
    pub total: Decimal,
    pub gst_rate: u32,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrnItem {
    pub item_name: String,
    pub quantity_received: u32,
    pub condition: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grn {
    pub grn_id: String,
    pub po_id: String,
    pub date: Date,
    pub items_received: Vec<GrnItem>,
    pub received_by: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvoiceLine {
    pub item_name: String,
    #[serde(with = "money")]
    pub unit_price: Decimal,
    pub quantity: u32,
    #[serde(with = "money")]
    pub amount: Decimal,
}

/// One sign-off on an invoice (our addition: the reference has no approval data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    pub approver: String,
    pub date: Date,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invoice {
    pub invoice_id: String,
    pub po_id: String,
    pub vendor: String,
    pub vendor_gstin: String,
    pub date: Date,
    pub line_items: Vec<InvoiceLine>,
    #[serde(with = "money")]
    pub subtotal: Decimal,
    pub gst_rate: u32,
    #[serde(with = "money")]
    pub gst_amount: Decimal,
    #[serde(with = "money")]
    pub total: Decimal,
    /// Sign-offs in order. POL-005: above ₹50,000 two distinct approvers are required.
    #[serde(default)]
    pub approvals: Vec<Approval>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvoiceDocs {
    pub purchase_orders: Vec<PurchaseOrder>,
    pub grns: Vec<Grn>,
    pub invoices: Vec<Invoice>,
}

fn recompute(inv: &mut Invoice, subtotal_too: bool) {
    for l in &mut inv.line_items {
        l.amount = l.unit_price * Decimal::from(l.quantity);
    }
    if subtotal_too {
        inv.subtotal = inv.line_items.iter().map(|l| l.amount).sum();
    }
    inv.gst_amount = util::paise(inv.subtotal * Decimal::from(inv.gst_rate) / Decimal::from(100));
    inv.total = inv.subtotal + inv.gst_amount;
}

/// One clean purchase chain: the `i`-th purchase order, its goods receipt and its invoice.
fn clean_chain(r: &mut Rng8, i: usize, today: Date) -> (PurchaseOrder, Grn, Invoice) {
    let n = r.random_range(1..=3);
    let mut items: Vec<PoItem> = vec![];
    while items.len() < n {
        let name = format!(
            "Item-{}{}",
            (b'A' + r.random_range(0..5u8)) as char,
            r.random_range(1..=99)
        );
        if items.iter().any(|x| x.item_name == name) {
            continue;
        }
        items.push(PoItem {
            item_name: name,
            unit_price: Decimal::from(*util::pick(r, &PRICES)),
            quantity: r.random_range(5..=50),
            hsn_code: util::pick(r, &HSN_CODES).to_string(),
        });
    }
    let vendor = VENDOR_NAMES[r.random_range(0..8)].to_string();
    let po_date = today.days_before(r.random_range(40..=90));
    let gst_rate = *util::pick(r, &[12u32, 18, 18]);
    let total = items
        .iter()
        .map(|x| x.unit_price * Decimal::from(x.quantity))
        .sum();
    let po = PurchaseOrder {
        po_id: format!("PO-{:03}", i + 1),
        vendor: vendor.clone(),
        vendor_gstin: util::random_gstin(r, "27"),
        date: po_date,
        items,
        total,
        gst_rate,
        status: "approved".into(),
    };
    let grn_date = po_date.add_days(r.random_range(3..=15));
    let grn = Grn {
        grn_id: format!("GRN-{:03}", i + 1),
        po_id: po.po_id.clone(),
        date: grn_date,
        items_received: po
            .items
            .iter()
            .map(|x| GrnItem {
                item_name: x.item_name.clone(),
                quantity_received: x.quantity,
                condition: "good".into(),
            })
            .collect(),
        received_by: util::pick(r, &super::EMPLOYEE_NAMES).to_string(),
    };
    let inv_date = grn_date.add_days(r.random_range(1..=10)).min(today);
    let mut inv = Invoice {
        invoice_id: String::new(),
        po_id: po.po_id.clone(),
        vendor: vendor.clone(),
        vendor_gstin: po.vendor_gstin.clone(),
        date: inv_date,
        line_items: po
            .items
            .iter()
            .map(|x| InvoiceLine {
                item_name: x.item_name.clone(),
                unit_price: x.unit_price,
                quantity: x.quantity,
                amount: Decimal::ZERO,
            })
            .collect(),
        subtotal: Decimal::ZERO,
        gst_rate,
        gst_amount: Decimal::ZERO,
        total: Decimal::ZERO,
        approvals: vec![],
    };
    recompute(&mut inv, true);
    (po, grn, inv)
}

planted_types! {
    /// The errors one invoice carries on its own, drawn for five invoices (the structural ones,
    /// a cascading total, a duplicate and an invoice without a PO, are planted by `generate`).
    SinglePlant {
        PriceMismatch,
        QuantityMismatch,
        TaxError,
        TotalMismatch,
        VendorMismatch,
        DateAnomaly,
    }
}

/// Plant one single (non-cascading) error of type `t` on an invoice.
fn plant_single(
    r: &mut Rng8,
    plant: SinglePlant,
    inv: &mut Invoice,
    tags: &mut Vec<(ErrorType, String)>,
    po: &PurchaseOrder,
) {
    let t = plant.error_type();
    let before = tags.len();
    match plant {
        SinglePlant::PriceMismatch => {
            let d = Decimal::from(*util::pick(r, &[100i64, 250, 500]));
            inv.line_items[0].unit_price += d;
            recompute(inv, true);
            tags.push((t, "unit price differs from the PO".into()));
        }
        SinglePlant::QuantityMismatch => {
            inv.line_items[0].quantity += r.random_range(3..=10);
            recompute(inv, true);
            tags.push((t, "billed quantity exceeds the GRN".into()));
        }
        SinglePlant::TaxError => {
            let others: Vec<u32> = [5u32, 12, 18, 28]
                .into_iter()
                .filter(|x| *x != po.gst_rate)
                .collect();
            inv.gst_rate = *util::pick(r, &others);
            recompute(inv, true);
            tags.push((
                t,
                format!(
                    "GST charged at {}% instead of {}%",
                    inv.gst_rate, po.gst_rate
                ),
            ));
        }
        SinglePlant::TotalMismatch => {
            inv.total += Decimal::from(r.random_range(10..=90) * 100);
            tags.push((t, "total is not subtotal + GST".into()));
        }
        SinglePlant::VendorMismatch => {
            let others: Vec<&str> = VENDOR_NAMES[8..12].to_vec();
            inv.vendor = util::pick(r, &others).to_string();
            tags.push((t, "invoice vendor differs from the PO vendor".into()));
        }
        SinglePlant::DateAnomaly => {
            inv.date = po.date.add_days(-r.random_range(5..=20));
            tags.push((t, "invoice dated before its purchase order".into()));
        }
    }
    debug_assert_eq!(tags.len(), before + 1, "one tag per planted error");
}

pub fn generate(seed: u64, rules: &crate::model::WorldRules) -> (InvoiceDocs, Vec<GtItem>) {
    let today = rules.today;
    let mut rng = util::rng_for(seed, 2);
    let r = &mut rng;
    let mut pos = vec![];
    let mut grns = vec![];
    let mut invs: Vec<(Invoice, Vec<(ErrorType, String)>)> = vec![];
    for i in 0..10 {
        let (po, grn, inv) = clean_chain(r, i, today);
        pos.push(po);
        grns.push(grn);
        invs.push((inv, vec![]));
    }

    // Which invoices carry errors, and which types.
    let order = util::sample_indices(r, 10, 10);
    let singles = draw_type_mix(r, &SinglePlant::ALL, 5, &[]);
    // Root + cascading pair on order[0].
    {
        let root = if r.random_bool(0.5) {
            ErrorType::PriceMismatch
        } else {
            ErrorType::QuantityMismatch
        };
        let (inv, tags) = &mut invs[order[0]];
        if root == ErrorType::PriceMismatch {
            let d = Decimal::from(*util::pick(r, &[250i64, 500, 750]));
            inv.line_items[0].unit_price += d;
            tags.push((root, format!("unit price {} above the PO price", d)));
        } else {
            let q = r.random_range(4..=10);
            inv.line_items[0].quantity += q;
            tags.push((root, format!("billed {q} more units than received")));
        }
        recompute(inv, false);
        tags.push((
            ErrorType::CascadingTotal,
            "subtotal not updated after the line change".into(),
        ));
    }
    for (k, t) in singles.iter().enumerate() {
        let idx = order[k + 1];
        let po = pos[idx].clone();
        let (inv, tags) = &mut invs[idx];
        plant_single(r, *t, inv, tags, &po);
    }
    // Red herrings on two clean invoices: rounding under ₹1 and a matched partial delivery.
    let clean: Vec<usize> = order[6..].to_vec();
    invs[clean[0]].0.total += Decimal::new(50, 2);
    {
        let idx = clean[1];
        let short = r.random_range(1..=3u32).min(pos[idx].items[0].quantity - 1);
        grns[idx].items_received[0].quantity_received -= short;
        invs[idx].0.line_items[0].quantity -= short;
        recompute(&mut invs[idx].0, true);
    }
    // Two extra invoices: duplicates of clean invoices and/or invoices without a PO.
    let mut dup_of: Vec<(usize, usize)> = vec![];
    let extra_dup_src = [clean[2], clean[3]];
    for src in extra_dup_src {
        if r.random_bool(0.5) {
            let mut c = invs[src].0.clone();
            c.date = c.date.add_days(r.random_range(2..=10)).min(today);
            invs.push((
                c,
                vec![(
                    ErrorType::DuplicateInvoice,
                    "same PO, vendor, lines and total as an earlier invoice".into(),
                )],
            ));
            dup_of.push((src, invs.len() - 1));
        } else {
            let price = Decimal::from(*util::pick(r, &[4000i64, 7500, 10000, 12500]));
            let qty = r.random_range(3..=8);
            let mut c = Invoice {
                invoice_id: String::new(),
                po_id: format!("PO-{}", r.random_range(900..=999)),
                vendor: util::pick(
                    r,
                    &["Unknown Vendor Ltd.", "Apex Trading Co.", "Nova Supplies"],
                )
                .to_string(),
                vendor_gstin: util::random_gstin(r, "27"),
                date: today.days_before(r.random_range(3..=20)),
                line_items: vec![InvoiceLine {
                    item_name: "Mystery Item".into(),
                    unit_price: price,
                    quantity: qty,
                    amount: Decimal::ZERO,
                }],
                subtotal: Decimal::ZERO,
                gst_rate: 18,
                gst_amount: Decimal::ZERO,
                total: Decimal::ZERO,
                approvals: vec![],
            };
            recompute(&mut c, true);
            invs.push((
                c,
                vec![(
                    ErrorType::UnmatchedInvoice,
                    "no purchase order exists for this invoice".into(),
                )],
            ));
        }
    }
    // Shuffle numbering; a duplicate always gets a later number than its original.
    let mut ord: Vec<usize> = (0..invs.len()).collect();
    util::shuffle(r, &mut ord);
    for (o, c) in &dup_of {
        let po_ = ord.iter().position(|x| x == o).unwrap_or(0);
        let pc = ord.iter().position(|x| x == c).unwrap_or(0);
        if pc < po_ {
            ord.swap(po_, pc);
        }
    }
    let mut invoices = vec![];
    let mut gt = vec![];
    for (i, idx) in ord.iter().enumerate() {
        let (mut inv, tags) = invs[*idx].clone();
        inv.invoice_id = format!("INV-{:03}", i + 1);
        for (t, why) in tags {
            gt.push(GtItem::new(inv.invoice_id.clone(), t, why));
        }
        invoices.push(inv);
    }
    super::sort_ground_truth(&mut gt);
    debug_assert_eq!(gt.len(), TaskId::InvoiceMatch.gt_count());
    add_approvals(seed, rules.today, &mut invoices, &gt);
    (
        InvoiceDocs {
            purchase_orders: pos,
            grns,
            invoices,
        },
        gt,
    )
}

fn needs_dual_approval(inv: &Invoice) -> bool {
    inv.total > Decimal::from(DUAL_APPROVAL_THRESHOLD_INR)
}

/// Approval records. Normally an invoice above the threshold has two distinct approvers and
/// one at or below it has one. The POL-005 violations (one approver, or the same approver twice)
/// are planted only on invoices that already carry a ground-truth error, preferring the identity
/// errors (an invoice without a PO, a duplicate, a changed vendor: invoices that went round the
/// approval workflow), so the task's ground truth and its count stay as they are and flagging
/// such an invoice is never a false positive. A seed can have no over-threshold erroneous
/// invoice, and then has no violation.
fn add_approvals(seed: u64, today: Date, invoices: &mut [Invoice], gt: &[GtItem]) {
    let mut rng = util::rng_for(seed, APPROVAL_STREAM);
    let r = &mut rng;
    for inv in invoices.iter_mut() {
        let first = r.random_range(0..APPROVERS.len());
        let mut list = vec![first];
        if needs_dual_approval(inv) {
            let second = (first + r.random_range(1..APPROVERS.len())) % APPROVERS.len();
            list.push(second);
        }
        let mut day = inv.date;
        inv.approvals = list
            .into_iter()
            .map(|a| {
                day = day.add_days(r.random_range(0..=2)).min(today);
                Approval {
                    approver: APPROVERS[a].to_string(),
                    date: day,
                }
            })
            .collect();
    }
    let erroneous = |identity: bool| -> Vec<usize> {
        invoices
            .iter()
            .enumerate()
            .filter(|(_, inv)| needs_dual_approval(inv))
            .filter(|(_, inv)| {
                gt.iter().any(|g| {
                    g.document_id == inv.invoice_id
                        && (!identity
                            || g.error_type.family() == crate::model::ErrorFamily::InvoiceIdentity)
                })
            })
            .map(|(i, _)| i)
            .collect()
    };
    let mut pool = erroneous(true);
    if pool.is_empty() {
        pool = erroneous(false);
    }
    util::shuffle(r, &mut pool);
    let n = if pool.len() >= 2 && r.random_bool(0.5) {
        2
    } else {
        1
    };
    for &i in pool.iter().take(n) {
        let inv = &mut invoices[i];
        if r.random_bool(0.5) {
            inv.approvals.truncate(1);
        } else {
            let same = inv.approvals[0].approver.clone();
            inv.approvals[1].approver = same;
        }
    }
}

/// POL-005 checker: invoices above the threshold without two distinct approvers, by id.
pub fn approval_gaps(d: &InvoiceDocs) -> Vec<String> {
    let mut out: Vec<String> = d
        .invoices
        .iter()
        .filter(|inv| needs_dual_approval(inv))
        .filter(|inv| {
            inv.approvals
                .iter()
                .map(|a| a.approver.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                < 2
        })
        .map(|inv| inv.invoice_id.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Rule checker for the three-way match.
pub fn detect(d: &InvoiceDocs) -> Vec<(String, ErrorType)> {
    use ErrorType::*;
    let one = Decimal::ONE;
    let pos: BTreeMap<&str, &PurchaseOrder> = d
        .purchase_orders
        .iter()
        .map(|p| (p.po_id.as_str(), p))
        .collect();
    let grns: BTreeMap<&str, &Grn> = d.grns.iter().map(|g| (g.po_id.as_str(), g)).collect();
    let mut out = vec![];
    let mut sorted: Vec<&Invoice> = d.invoices.iter().collect();
    sorted.sort_by(|a, b| a.invoice_id.cmp(&b.invoice_id));
    let mut seen: Vec<&Invoice> = vec![];
    for inv in sorted {
        let id = inv.invoice_id.clone();
        let Some(po) = pos.get(inv.po_id.as_str()) else {
            out.push((id, UnmatchedInvoice));
            continue;
        };
        if seen.iter().any(|s| {
            s.po_id == inv.po_id
                && s.vendor == inv.vendor
                && s.line_items == inv.line_items
                && s.total == inv.total
        }) {
            out.push((id.clone(), DuplicateInvoice));
        }
        seen.push(inv);
        if inv.vendor != po.vendor {
            out.push((id.clone(), VendorMismatch));
        }
        if inv.date < po.date {
            out.push((id.clone(), DateAnomaly));
        }
        let expected_gst = inv.subtotal * Decimal::from(inv.gst_rate) / Decimal::from(100);
        if inv.gst_rate != po.gst_rate || (inv.gst_amount - expected_gst).abs() > one {
            out.push((id.clone(), TaxError));
        }
        let grn = grns.get(inv.po_id.as_str());
        let mut price_bad = false;
        let mut qty_bad = false;
        for l in &inv.line_items {
            match po.items.iter().find(|x| x.item_name == l.item_name) {
                Some(pi) if pi.unit_price != l.unit_price => price_bad = true,
                None => price_bad = true,
                _ => {}
            }
            let rec = grn
                .and_then(|g| g.items_received.iter().find(|x| x.item_name == l.item_name))
                .map(|x| x.quantity_received)
                .unwrap_or(0);
            if rec != l.quantity {
                qty_bad = true;
            }
        }
        if price_bad {
            out.push((id.clone(), PriceMismatch));
        }
        if qty_bad {
            out.push((id.clone(), QuantityMismatch));
        }
        let sum: Decimal = inv.line_items.iter().map(|l| l.amount).sum();
        if (inv.subtotal - sum).abs() > one {
            out.push((id.clone(), CascadingTotal));
        }
        if (inv.total - inv.subtotal - inv.gst_amount).abs() > one {
            out.push((id, TotalMismatch));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{WorldRules, HELD_OUT_SEEDS, TRAIN_SEEDS};

    #[test]
    fn approvals_follow_pol005_and_gaps_sit_on_erroneous_invoices() {
        let mut with_gap = 0;
        let seeds: Vec<u64> = TRAIN_SEEDS.chain(HELD_OUT_SEEDS).chain(0..40).collect();
        for &seed in &seeds {
            for p in [1u32, 3] {
                let rules = WorldRules {
                    today: util::period_reference_date(p),
                    ..WorldRules::default()
                };
                let (d, gt) = generate(seed, &rules);
                let gaps = approval_gaps(&d);
                with_gap += (p == 1 && !gaps.is_empty()) as usize;
                assert!(gaps.len() <= 2, "seed {seed}: {gaps:?}");
                for inv in &d.invoices {
                    let distinct: std::collections::BTreeSet<&str> =
                        inv.approvals.iter().map(|a| a.approver.as_str()).collect();
                    assert!(
                        !inv.approvals.is_empty(),
                        "seed {seed} {}: no approval",
                        inv.invoice_id
                    );
                    assert!(
                        inv.approvals
                            .iter()
                            .all(|a| a.date >= inv.date && a.date <= rules.today),
                        "seed {seed} {}",
                        inv.invoice_id
                    );
                    assert!(inv.approvals.windows(2).all(|w| w[0].date <= w[1].date));
                    if gaps.contains(&inv.invoice_id) {
                        assert!(needs_dual_approval(inv) && distinct.len() == 1);
                        assert!(
                            gt.iter().any(|g| g.document_id == inv.invoice_id),
                            "seed {seed}: gap on clean invoice {}",
                            inv.invoice_id
                        );
                    } else if needs_dual_approval(inv) {
                        assert_eq!(
                            (inv.approvals.len(), distinct.len()),
                            (2, 2),
                            "seed {seed} {}",
                            inv.invoice_id
                        );
                    } else {
                        assert_eq!(inv.approvals.len(), 1, "seed {seed} {}", inv.invoice_id);
                    }
                }
            }
        }
        eprintln!(
            "POL-005 gap present for {with_gap} of {} seeds",
            seeds.len()
        );
        assert!(
            with_gap * 10 >= seeds.len() * 9,
            "gaps in only {with_gap} of {} seeds",
            seeds.len()
        );
    }

    #[test]
    fn approval_gap_checker_counts_distinct_approvers() {
        let (mut d, _) = generate(42, &WorldRules::default());
        let gaps = approval_gaps(&d);
        let big = d
            .invoices
            .iter()
            .position(|i| needs_dual_approval(i) && !gaps.contains(&i.invoice_id))
            .expect("an approved large invoice");
        let id = d.invoices[big].invoice_id.clone();
        assert!(!approval_gaps(&d).contains(&id));
        let who = d.invoices[big].approvals[0].approver.clone();
        d.invoices[big].approvals[1].approver = who;
        assert!(
            approval_gaps(&d).contains(&id),
            "the same approver twice is not dual approval"
        );
        d.invoices[big].approvals.truncate(1);
        assert!(approval_gaps(&d).contains(&id));
        d.invoices[big].approvals.clear();
        assert!(approval_gaps(&d).contains(&id));
        // At or below the threshold one approval is enough.
        d.invoices[big].total = Decimal::from(DUAL_APPROVAL_THRESHOLD_INR);
        assert!(!approval_gaps(&d).contains(&id));
    }
}
