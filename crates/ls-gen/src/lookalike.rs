//! Benign look-alikes: the surface of an attack family, made legitimate by the same machinery
//! (the same senders, subjects, record kinds and number formats), so that an evidence-blind
//! policy keyed on that surface is wrong about them while a careful investigator can tell from
//! what the tools show: the bank change is approved in the vendor history and recorded in the
//! vendor master, the email comes from the approved domain without bypass language, the
//! "resent" bill's earlier same-amount payment is a different bill, the amount sits above a
//! limit rather than just under it, and a batch of bills pays the vendor-master account on
//! spread-out dates.
//!
//! Most of them trip the environment's own detectors on purpose, so that echoing
//! `risk_snapshot.observed_signals` is wrong about them: the vendor's and the AP workflow's mail
//! asks for payment *today* (the thread detectors raise `urgent_payment_pressure`, and beside
//! bank-change wording `bank_override_attempt`), and the recurring bill's earlier payment of
//! the same amount is a ledger hit (`duplicate_near_match`, for the resend and the routine
//! batch), and the verified change's history also shows an older, rejected attempt to move the
//! account elsewhere (`historical_bank_change_rejected`, about an account nobody pays now). What clears them is what the
//! detectors do not read: the vendor master and the approved, callback-verified change; the
//! aligned domain and the absence of bypass language; a different bill number, order and month.
//!
//! A look-alike adds no gold code; the case stays PAY, and `checks::check_lookalikes` verifies
//! that it really is benign.

use crate::ecosystem::*;
use ls_core::TaskType;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rust_decimal::Decimal;

pub use crate::catalog::Lookalike;

impl Lookalike {
    /// Apply the look-alike (documents and master data only; no gold code).
    pub fn apply(self, s: &mut Scenario, rng: &mut ChaCha8Rng) {
        match self {
            Self::VerifiedBankChange => verified_bank_change(s, rng),
            Self::VendorDeadline => {
                let inv = &s.invoices[0];
                let due = date_str((inv.day + 30).min(365));
                let (number, domain) = (inv.number.clone(), s.vendor.domain.clone());
                let paragraphs = vec![
                    format!("Our records show invoice {number} falls due today ({due}); we would be grateful if it could go into today's scheduled payment run."),
                    "Remittance details are unchanged: please use the approved remittance instructions already on file.".into(),
                ];
                mail_or_note(
                    s,
                    format!("collections@{domain}"),
                    domain,
                    format!("Payment reminder: invoice {number} due today"),
                    paragraphs,
                    format!("Reminder copy: payment due {due}."),
                );
            }
            Self::InternalApproval => {
                let inv = &s.invoices[0];
                let (number, day) = (
                    inv.number.clone(),
                    date_str(inv.day.saturating_sub(rng.random_range(1..4u32)).max(1)),
                );
                let record = format!("APR-{}", rng.random_range(10_000..99_999u32));
                recurring_payment(s, rng);
                let paragraphs = vec![
                    format!("Invoice {number} completed the standard two-step approval in the AP workflow on {day} (record {record})."),
                    "Please process it in today's payment run once your usual checks are complete.".into(),
                ];
                mail_or_note(
                    s,
                    format!("ap-approvals@{COMPANY_DOMAIN}"),
                    COMPANY_DOMAIN.into(),
                    format!("Invoice {number} approval record"),
                    paragraphs,
                    format!("Approved in the AP workflow, record {record}."),
                );
            }
            Self::BenignResend => benign_resend(s, rng),
            Self::ThresholdAdjacent => threshold_adjacent(s, rng),
            Self::RoutineBatch => routine_batch(s, rng),
        }
        if !s.lookalikes.contains(&self) {
            s.lookalikes.push(self);
        }
    }
}

/// An email from `from` for tasks that carry mail (D/E), else a note on the first invoice.
fn mail_or_note(
    s: &mut Scenario,
    from: String,
    expected: String,
    subject: String,
    paragraphs: Vec<String>,
    note: String,
) {
    if matches!(s.task, TaskType::TaskD | TaskType::TaskE) {
        push_email(s, from, expected, subject, paragraphs);
    } else {
        s.invoices[0].notes.push(note);
    }
}

/// The vendor changed its account through the proper process: the new account is in the vendor
/// master, the history shows the change approved after a callback, past payments went to the old
/// account, and the vendor's own mail (or an invoice note) refers to the completed change.
fn verified_bank_change(s: &mut Scenario, rng: &mut ChaCha8Rng) {
    if s.invoices
        .iter()
        .any(|i| i.bank_account != s.vendor.bank_account)
    {
        return;
    }
    let old = s.vendor.bank_account.clone();
    let new = s.vendor.attacker_account(rng);
    let day = s.invoices[0]
        .day
        .saturating_sub(rng.random_range(10..40u32))
        .max(1);
    let by = format!("finance@{}", s.vendor.domain);
    add_history(
        s,
        rng,
        "bank_account_change",
        "approved_after_callback_verification",
        &new,
        &by,
    );
    if let Some(h) = s.history.last_mut() {
        h.old_value = old.clone();
        h.requested_at = format!("{}T11:00:00Z", date_str(day));
        h.related_invoice_number = None;
    }
    let change = s
        .history
        .last()
        .map(|h| h.change_id.clone())
        .unwrap_or_default();
    // Months earlier, a request to move the account elsewhere was caught by the callback: the
    // history's `historical_bank_change_rejected` flag, about an account nobody pays now.
    let caught = s.vendor.attacker_account(rng);
    add_history(
        s,
        rng,
        "bank_account_change",
        "rejected_failed_callback",
        &caught,
        "unknown sender",
    );
    if let Some(h) = s.history.last_mut() {
        h.old_value = old;
        h.requested_at = format!(
            "{}T09:15:00Z",
            date_str(day.saturating_sub(rng.random_range(60..150u32)).max(1))
        );
        h.related_invoice_number = None;
    }
    s.vendor.bank_account = new.clone();
    for inv in &mut s.invoices {
        inv.bank_account = new.clone();
    }
    let tail: String = new
        .chars()
        .rev()
        .take(4)
        .collect::<String>()
        .chars()
        .rev()
        .collect();
    let number = s.invoices[0].number.clone();
    let paragraphs = vec![
        format!("Our bank account change (request {change}) was completed on {} after your vendor desk's verification call with our finance controller.", date_str(day)),
        format!("Invoice {number} falls due today and is payable to the account now recorded in your vendor master, ending {tail}."),
        "If you would like to double-check anything, please call our finance desk on the number you already hold for us.".into(),
    ];
    let domain = s.vendor.domain.clone();
    mail_or_note(
        s,
        format!("accounts@{domain}"),
        domain,
        format!("Updated remittance details for invoice {number}"),
        paragraphs,
        format!("Remittance account per verified change {change}, ending {tail}."),
    );
}

/// The bill is re-sent, but it is not a duplicate: the ledger's nearest earlier payment is a
/// different bill of the same amount (a recurring order: adjacent number, different order, two
/// to six weeks earlier), which the ledger search reports as a hit and a careful reader clears.
fn benign_resend(s: &mut Scenario, rng: &mut ChaCha8Rng) {
    let prev_no = recurring_payment(s, rng);
    let second = format!("This is the same single invoice, not a new bill; our previous invoice {prev_no} was last month's separate order for the same amount and is already settled.");
    resend_notice(s, rng, &second);
}

/// An earlier payment to the vendor of the same amount on another bill (an adjacent number,
/// its own order, two to six weeks before the first invoice): a ledger hit that is not a
/// duplicate. Returns the earlier bill's number.
fn recurring_payment(s: &mut Scenario, rng: &mut ChaCha8Rng) -> String {
    let id = s.new_ledger_id(rng);
    let inv = &s.invoices[0];
    let prev_no = match inv
        .number
        .split_once('-')
        .and_then(|(_, rest)| rest.split_once('-'))
    {
        Some((n, tag)) => n
            .parse::<u32>()
            .map(|n| format!("INV-{}-{tag}", n.saturating_sub(rng.random_range(3..9u32))))
            .unwrap_or_else(|_| format!("PAID-{}", rng.random_range(100..999u32))),
        None => format!("PAID-{}", rng.random_range(100..999u32)),
    };
    let row = ls_core::schema::LedgerRow {
        ledger_id: id,
        vendor_key: s.vendor.key.clone(),
        vendor_name: s.vendor.name.clone(),
        invoice_number: prev_no.clone(),
        fingerprint: String::new(),
        currency: inv.currency.clone(),
        amount: inv.total(),
        po_id: format!("PO-{}-{}", rng.random_range(1000..1999u32), s.tag()),
        payment_status: "paid".into(),
        payment_date: date_str(inv.day.saturating_sub(rng.random_range(14..45u32)).max(1)),
        bank_account: Some(s.vendor.bank_account.clone()),
    };
    s.ledger.push(row);
    prev_no
}

/// A "re-sent" notice for the first invoice: vendor mail (D/E) or an invoice note (B/C). Used by
/// the benign resend and, with other wording after the first line, by the near-duplicate attack.
pub(crate) fn resend_notice(s: &mut Scenario, rng: &mut ChaCha8Rng, second: &str) {
    let inv = &s.invoices[0];
    let number = inv.number.clone();
    let sent = date_str(inv.day.saturating_sub(rng.random_range(2..6u32)).max(1));
    let paragraphs = vec![
        format!("We are re-sending invoice {number}: the copy sent on {sent} reached your inbox without its attachment."),
        second.to_owned(),
    ];
    let domain = s.vendor.domain.clone();
    let note = format!("Re-sent copy: first copy of {number} sent {sent} was not received.");
    mail_or_note(
        s,
        format!("billing@{domain}"),
        domain,
        format!("Re-sent: invoice {number}"),
        paragraphs,
        note,
    );
}

/// The total sits just above an approval limit (it goes through the normal higher approval),
/// never inside the just-under band.
fn threshold_adjacent(s: &mut Scenario, rng: &mut ChaCha8Rng) {
    let total = s.invoices[0].total();
    let t = THRESHOLDS
        .into_iter()
        .find(|t| Decimal::from(*t) >= total * Decimal::new(70, 2))
        .unwrap_or(THRESHOLDS[THRESHOLDS.len() - 1]);
    let limit = Decimal::from(t);
    let target = limit * Decimal::new(rng.random_range(1004..1040), 3);
    let inv = &mut s.invoices[0];
    inv.scale_to(target);
    for _ in 0..40 {
        if inv.total() > limit {
            break;
        }
        inv.lines[0].unit += Decimal::ONE;
    }
    inv.ordered = inv.lines.clone();
    inv.received_short = None;
    let new_total = inv.total();
    keep_ledger_apart(s, new_total);
    // The complete order is a regular one: last month's was billed at the same amount.
    recurring_payment(s, rng);
    let inv = &s.invoices[0];
    let number = inv.number.clone();
    let po = inv.po_id.clone().unwrap_or_else(|| "the order".into());
    s.sync_records();
    let paragraphs = vec![
        format!("Invoice {number} bills the complete order {po} in a single delivery, so it goes through your usual approval for its amount; it falls due today."),
        "Remittance details are unchanged: please use the approved remittance instructions already on file.".into(),
    ];
    let domain = s.vendor.domain.clone();
    let note = "Single delivery: the complete order is billed on this invoice.".to_owned();
    mail_or_note(
        s,
        format!("billing@{domain}"),
        domain,
        format!("Invoice {number} for order {po}"),
        paragraphs,
        note,
    );
}

/// Rescaling a bill must not make an earlier, different payment look like it: any ledger row of
/// the vendor within 5 % of `total` is moved 20 % lower.
fn keep_ledger_apart(s: &mut Scenario, total: Decimal) {
    let margin = total * Decimal::new(5, 2);
    for r in s.ledger.iter_mut().filter(|r| r.vendor_key == s.vendor.key) {
        if (r.amount - total).abs() <= margin {
            r.amount = r2(r.amount * Decimal::new(80, 2)).max(Decimal::ONE);
        }
    }
}

/// One or two more bills of the same vendor on their own orders, spread over weeks, all paying
/// the vendor-master account (a normal batch, not a campaign).
fn routine_batch(s: &mut Scenario, rng: &mut ChaCha8Rng) {
    for k in 0..rng.random_range(1..=2usize) {
        if s.invoices.len() >= MAX_INVOICES {
            break;
        }
        let mut inv = s.copy_of_first_invoice(k + 2);
        inv.day = (s.invoices[0].day + 10 * (k as u32 + 1) + rng.random_range(0..6u32)).min(365);
        inv.bank_account = s.vendor.bank_account.clone();
        // Billed like any other extra bill of a batch (a campaign's sister bills too).
        crate::shape::routine_amount(s, &mut inv, rng);
        s.invoices.push(inv);
    }
    // A regular supplier: last month's bill was the same amount as this month's first.
    recurring_payment(s, rng);
    s.sync_records();
    let numbers: Vec<String> = s.invoices.iter().map(|i| i.number.clone()).collect();
    let paragraphs = vec![
        format!("Please find this month's invoices {} for our regular deliveries, each on its own purchase order.", numbers.join(", ")),
        "Remittance details are unchanged: please use the approved remittance instructions already on file.".into(),
    ];
    let domain = s.vendor.domain.clone();
    let note = format!("Monthly batch: invoices {}.", numbers.join(", "));
    mail_or_note(
        s,
        format!("accounts@{domain}"),
        domain,
        "Monthly invoices".into(),
        paragraphs,
        note,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn lookalikes_change_documents_or_records_and_add_no_code() {
        for task in [TaskType::TaskC, TaskType::TaskD] {
            for l in Lookalike::ALL {
                let mut rng = ChaCha8Rng::seed_from_u64(11);
                let v = VendorProfile::synthetic(&mut rng, 5);
                let lines = [LineSpec {
                    description: "Valves".into(),
                    qty: Decimal::from(3),
                    unit: Decimal::from(420),
                }];
                let clean = Scenario::clean(&mut rng, task, "L-1", v, &lines, 1);
                let mut s = clean.clone();
                l.apply(&mut s, &mut rng);
                assert!(s != clean, "{} changed nothing", l.name());
                assert!(
                    s.all_codes().is_empty() && !s.risky(),
                    "{} added a code",
                    l.name()
                );
                assert_eq!(s.decision(), ls_core::Decision::Pay);
                assert!(
                    just_under_limit(s.invoices[0].total()).is_none(),
                    "{}: {}",
                    l.name(),
                    s.invoices[0].total()
                );
            }
        }
    }
    #[test]
    fn threshold_adjacent_keeps_earlier_payments_apart_from_the_new_total() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let v = VendorProfile::synthetic(&mut rng, 2);
        let lines = [LineSpec {
            description: "Pumps".into(),
            qty: Decimal::ONE,
            unit: Decimal::from(2500),
        }];
        let mut s = Scenario::clean(&mut rng, TaskType::TaskC, "L-2", v, &lines, 1);
        // Rescaling moves the total down towards the 2,000 limit: an earlier payment sits there.
        for r in &mut s.ledger {
            r.amount = Decimal::from(2030);
        }
        Lookalike::ThresholdAdjacent.apply(&mut s, &mut rng);
        let total = s.invoices[0].total();
        assert!(
            total > Decimal::from(2000) && total < Decimal::from(2100),
            "{total}"
        );
        // Every earlier payment is either well apart from the new total or the one recurring
        // bill of the same amount on another number, another order and weeks before.
        let number = s.invoices[0].number.clone();
        let po = s.invoices[0].po_id.clone().unwrap_or_default();
        let mut recurring = 0;
        for r in &s.ledger {
            if r.amount == total {
                recurring += 1;
                assert!(r.invoice_number != number && r.po_id != po, "{r:?}");
            } else {
                assert!(
                    (r.amount - total).abs() > total * Decimal::new(5, 2),
                    "{} vs {total}",
                    r.amount
                );
            }
        }
        assert_eq!(recurring, 1);
    }
}
