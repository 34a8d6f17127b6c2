//! Label-independent document structure.
//!
//! Attacks add mail (a spoofed sender, a bypass request) while most benign look-alikes on B/C
//! put their wording in an invoice note, so the number of e-mails in the reset observation told
//! a risky case from a benign one (balanced accuracy 0.74–0.87 per task family). Before a
//! generated case is rendered, [`pad_mail`] tops its mail up with routine correspondence from
//! the vendor's own domain (delivery confirmations, statements, order acknowledgements,
//! contact-hours notices: no bank, payment-deadline, resend or bypass wording) to a target drawn
//! per task family from a fixed distribution whose smallest value is at least the most mail an
//! attack mix produces. The target never depends on the label, so neither does the count (nor
//! the budget and step limit, which follow the documents).

use crate::ecosystem::{date_str, EmailSpec, Scenario};
use ls_core::TaskType;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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

/// Top the scenario's mail up to [`mail_target`] with routine correspondence.
pub fn pad_mail(s: &mut Scenario, seed: u64) {
    let target = mail_target(s.task, seed);
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
