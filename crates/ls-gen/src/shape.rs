//! Label-independent document structure.
//!
//! Attacks add mail (a spoofed sender, a bypass request) and invoices (a split bill's second
//! part, a campaign's sister bills), while most benign look-alikes on B/C put their wording in an
//! invoice note, so the number of e-mails and invoices in the reset observation (and the
//! instruction, which lists the documents) told a risky case from a benign one. Before a
//! generated case is rendered, [`pad`] tops its documents up to a [`Room`] computed from *every*
//! label plan the case could have been given: each generator realises each alternative plan
//! (benign look-alikes, the review attack, the escalation mechanism) on a clone of the clean
//! scenario with a clone of its random stream ([`room_over`]), and the case is padded to the
//! element-wise maximum. The room is a function of what was drawn before the plan was applied,
//! so benign and risky cases of one configuration end with the same counts.
//!
//! Padding is routine: invoices of the same vendor on their own orders, paying the
//! vendor-master account, dated weeks apart, with totals well away from every earlier payment
//! and every other invoice ([`routine_invoice`]); mail from the vendor's own domain (delivery
//! confirmations, statements, order acknowledgements, contact-hours notices: no bank,
//! payment-deadline, resend or bypass wording). Mail also has a per-family floor
//! ([`mail_target`]). Budget and step limit are set by the task family alone
//! (`generators::limits`).

use crate::ecosystem::{
    date_str, just_under_limit, r2, EmailSpec, InvoiceSpec, Scenario, MAX_INVOICES,
};
use ls_core::TaskType;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;

/// Seed offset of the structure stream (never shifts world or layout draws).
const SHAPE_STREAM: u64 = 0x5348_4150_455F_4D41;

/// The fewest e-mails a generated case of the family carries (the target is this or one more).
pub fn mail_floor(task: TaskType) -> usize {
    match task {
        TaskType::TaskA => 0,
        TaskType::TaskB => 1,
        TaskType::TaskC => 2,
        TaskType::TaskD | TaskType::TaskE => 3,
    }
}

/// The label-independent e-mail target of a case rendered with `seed`.
pub fn mail_target(task: TaskType, seed: u64) -> usize {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ SHAPE_STREAM);
    mail_floor(task) + usize::from(r.random_bool(0.5))
}

/// One routine e-mail of kind `k` about invoice `i` of the scenario.
fn routine_mail(s: &Scenario, k: usize, i: usize, day_offset: u32) -> EmailSpec {
    let inv = &s.invoices[i % s.invoices.len()];
    let po = inv
        .po_id
        .clone()
        .unwrap_or_else(|| "the agreed order".into());
    let name = &s.vendor.name;
    let (local, subject, body) = match k % 4 {
        0 => (
            "logistics",
            format!("Delivery confirmation for {po}"),
            format!("The goods for {po} left our warehouse on {} and were signed for by your receiving team.", date_str(inv.day.saturating_sub(2).max(1))),
        ),
        1 => (
            "statements",
            format!("Quarterly statement for {name}"),
            format!("Our quarterly statement lists invoice {} among the open items; it needs nothing beyond your usual processing.", inv.number),
        ),
        2 => (
            "orders",
            format!("Order acknowledgement {po}"),
            format!("We acknowledge {po} and confirm the quantities and prices on it; the goods ship in the usual way."),
        ),
        _ => (
            "service",
            "Office hours over the holidays".to_owned(),
            format!("Our service desk keeps its usual hours; questions about {po} can go to the contact named on the order."),
        ),
    };
    EmailSpec {
        doc_id: format!("{}-MSG{}", s.case_id, s.emails.len() + 1),
        from: format!("{local}@{}", s.vendor.domain),
        subject,
        day: (inv.day + day_offset).min(365),
        paragraphs: vec![
            "Dear colleagues,".into(),
            body,
            format!("Best regards, {name}"),
        ],
        expected_domain: s.vendor.domain.clone(),
        vendor_key: s.vendor.key.clone(),
    }
}

/// The document counts a scenario has (or is padded to).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Room {
    pub invoices: usize,
    pub emails: usize,
}

impl Room {
    /// The counts of `s`.
    pub fn of(s: &Scenario) -> Room {
        Room {
            invoices: s.invoices.len(),
            emails: s.emails.len(),
        }
    }
    /// The element-wise maximum.
    pub fn max(self, o: Room) -> Room {
        Room {
            invoices: self.invoices.max(o.invoices),
            emails: self.emails.max(o.emails),
        }
    }
}

/// One alternative realisation of a clean scenario (a label plan applied with a random stream).
pub type Realise<'a> = &'a dyn Fn(&mut Scenario, &mut ChaCha8Rng);

/// The element-wise maximum of the counts every alternative in `alts` produces on a clone of
/// `s` with a clone of `r` (neither is changed).
pub fn room_over(s: &Scenario, r: &ChaCha8Rng, alts: &[Realise<'_>]) -> Room {
    alts.iter().fold(Room::of(s), |room, alt| {
        let (mut s2, mut r2) = (s.clone(), r.clone());
        alt(&mut s2, &mut r2);
        room.max(Room::of(&s2))
    })
}

/// Most serials drawn for a routine invoice before one that collides is kept.
const SERIAL_DRAWS: usize = 64;

/// A serial for a routine invoice whose number (`INV-{serial}-{tag}-R…`) names no invoice the
/// ledger paid or the case bills: a number that contains a paid one reads as a re-billed
/// invoice, a duplicate the label of a routine bill does not have. The first draw is kept when
/// it is free, so a case without a collision is drawn as before.
fn fresh_serial(s: &Scenario, tag: &str, r: &mut ChaCha8Rng) -> u32 {
    let taken = |serial: u32| {
        let stem = format!("INV-{serial}-{tag}");
        s.ledger.iter().any(|l| l.invoice_number.contains(&stem))
            || s.invoices.iter().any(|i| i.number.contains(&stem))
    };
    let mut serial = r.random_range(1000..9999u32);
    for _ in 1..SERIAL_DRAWS {
        if !taken(serial) {
            break;
        }
        serial = r.random_range(1000..9999u32);
    }
    serial
}

/// A routine invoice of the scenario's vendor (the `k`-th padded one): its own number, order and
/// receipt, the vendor-master account, dated weeks after the first invoice, its total at least
/// 10 % away from every ledger row and every other invoice of the case.
pub fn routine_invoice(s: &Scenario, k: usize, r: &mut ChaCha8Rng) -> InvoiceSpec {
    let first = &s.invoices[0];
    let tag = s.tag();
    let idx = s.invoices.len();
    let serial = fresh_serial(s, &tag, r);
    let mut inv = InvoiceSpec {
        doc_id: format!("{}-INV{}", s.case_id, idx + 1),
        number: format!("INV-{serial}-{tag}-R{}", k + 1),
        day: (first.day + 14 * (k as u32 + 1) + r.random_range(0..6u32)).min(365),
        currency: first.currency.clone(),
        po_id: Some(format!("PO-{serial}-{tag}-R{}", k + 1)),
        receipt_id: Some(format!("GRN-{serial}-{tag}-R{}", k + 1)),
        lines: first.ordered.clone(),
        ..InvoiceSpec::billed_by(&s.vendor)
    };
    if inv.lines.is_empty() {
        inv.lines = first.lines.clone();
    }
    routine_amount(s, &mut inv, r);
    inv
}

/// Bill `inv` at the routine amount of an extra bill: the clean invoices' lines as drawn (before
/// an attack or look-alike moved the first invoice's amount) scaled by 1 ± a seeded 0.12–0.40
/// (either sign, so an extra bill is as large as a clean one on average), drawn again until the
/// total is at least 10 % away from every ledger row and every other invoice and not just under
/// an approval limit. Every bill a case carries beyond its clean ones is billed by this rule — a
/// padded routine invoice, a benign batch's monthly bill and a campaign's sister bill alike — so
/// a batch's amounts (and their sum, the at-risk amount the reset observation restates) do not
/// depend on how many of its bills an attack, a look-alike or the padding added.
pub fn routine_amount(s: &Scenario, inv: &mut InvoiceSpec, r: &mut ChaCha8Rng) {
    let base = if s.base_lines.is_empty() {
        inv.lines.clone()
    } else {
        s.base_lines.clone()
    };
    let mut price = |factor: Decimal| {
        inv.lines = base.clone();
        for l in &mut inv.lines {
            l.unit = r2(l.unit * factor).max(Decimal::new(1, 2));
        }
        let total = inv.total();
        let near = |x: Decimal| (x - total).abs() <= total * Decimal::new(10, 2);
        s.ledger.iter().any(|l| near(l.amount))
            || s.invoices.iter().any(|i| near(i.total()))
            || just_under_limit(total).is_some()
    };
    let drawn = (0..16).any(|_| {
        let delta = Decimal::new(r.random_range(12..=40i64), 2);
        let sign = if r.random_bool(0.5) {
            Decimal::ONE
        } else {
            -Decimal::ONE
        };
        !price(Decimal::ONE + sign * delta)
    });
    // Every draw clashed (a batch whose amounts already cover the range): above all of them.
    if !drawn {
        let mut factor = Decimal::new(145, 2);
        while price(factor) && factor < Decimal::from(6) {
            factor += Decimal::new(17, 2);
        }
    }
    inv.avoid_threshold_bands();
    inv.ordered = inv.lines.clone();
}

/// Top the scenario up to `room` (invoices, capped at [`MAX_INVOICES`]) and its mail to the
/// larger of `room` and [`mail_target`], with routine documents.
pub fn pad(s: &mut Scenario, room: Room, seed: u64) {
    if s.invoices.is_empty() {
        return;
    }
    pad_invoices(s, room.invoices, seed);
    pad_mail_to(s, room.emails.max(mail_target(s.task, seed)), seed);
}

/// Top the scenario's invoices up to `target` (at most [`MAX_INVOICES`]) with
/// [`routine_invoice`]s.
pub fn pad_invoices(s: &mut Scenario, target: usize, seed: u64) {
    if s.invoices.is_empty() || s.invoices.len() >= target.min(MAX_INVOICES) {
        return;
    }
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ SHAPE_STREAM ^ 0x494E_564F);
    let mut k = 0;
    while s.invoices.len() < target.min(MAX_INVOICES) {
        let inv = routine_invoice(s, k, &mut r);
        s.invoices.push(inv);
        k += 1;
    }
    s.sync_records();
}

fn pad_mail_to(s: &mut Scenario, target: usize, seed: u64) {
    if s.invoices.is_empty() {
        return;
    }
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ SHAPE_STREAM ^ 0x4B49_4E44);
    let first = r.random_range(0..4usize);
    let mut k = 0;
    while s.emails.len() < target {
        let i = r.random_range(0..s.invoices.len());
        let mail = routine_mail(s, first + k, i, r.random_range(0..4u32));
        s.emails.push(mail);
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_is_the_floor_or_one_more_and_stable() {
        for seed in 0..200u64 {
            for t in [
                TaskType::TaskB,
                TaskType::TaskC,
                TaskType::TaskD,
                TaskType::TaskE,
            ] {
                let n = mail_target(t, seed);
                assert!(
                    n == mail_floor(t) || n == mail_floor(t) + 1,
                    "{t:?} {seed} {n}"
                );
                assert_eq!(n, mail_target(t, seed));
            }
        }
    }
}
