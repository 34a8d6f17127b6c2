//! Generator self-checks beyond `ls_core::validate`: labels agree with what the documents and
//! master data let an investigator observe, twins are really benign, and generated metadata is
//! complete.

use crate::ecosystem::just_under_limit;
use ls_core::fixtures::CaseWorld;
use ls_core::schema::{Case, EmailThread};
use ls_core::text::{compact_account, normalize_id, normalize_text, vendor_alias_match};
use ls_core::validate::{invoice_facts, validate_case};
use ls_core::{Decision, HiddenWorld};
use rust_decimal::prelude::ToPrimitive;
use std::collections::BTreeSet;

/// Phrases no benign thread contains (pressure, bypass, injection and bank-change language).
/// Deadline wording: a surface signal (the thread detectors raise `urgent_payment_pressure` on
/// it) that a legitimate vendor reminder may carry, so benign look-alikes may use it.
pub const URGENCY_PHRASES: [&str; 4] = ["urgent", "immediately", "today", "asap"];

/// Wording that is risk evidence in itself (bypass, override, unverified detail changes): never
/// in a benign case.
pub const RISK_PHRASES: [&str; 18] = [
    "do not call",
    "don't call",
    "no need to call",
    "do not verify",
    "skip",
    "ignore",
    "override",
    "bypass",
    "source of truth",
    "portal is offline",
    "personally approved",
    "new banking partner",
    "bank details have changed",
    "account details have been updated",
    "update the beneficiary",
    "update the bank",
    "update the remittance",
    "under the",
];

fn thread_of(case: &Case, world: &CaseWorld<'_>, doc_id: &str) -> Option<EmailThread> {
    let doc = case.document(doc_id)?;
    if let Some(t) = &doc.thread_data {
        return Some(t.clone());
    }
    world.thread(doc_id).cloned()
}

/// What an investigator can observe from the documents and master data alone: bank lines that
/// differ from the vendor master, ledger payments of the same bill or to the same account by
/// another vendor, invoices that disagree with their PO or receipt, totals just under an approval
/// limit, threads from an unexpected domain or with pressure/bypass/bank-change language, and
/// open or rejected bank changes in the vendor history. Empty means nothing suspicious.
pub fn observable_risk(case: &Case, world: &CaseWorld<'_>) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    for doc in case.invoices() {
        let f = invoice_facts(doc);
        let vendor = world.vendors.iter().find(|v| {
            vendor_alias_match(
                &f.vendor_display,
                &[
                    v.vendor_name.as_str(),
                    v.canonical_name.as_str(),
                    v.vendor_key.as_str(),
                ],
            )
        });
        let Some(v) = vendor else {
            out.insert("unknown_vendor");
            continue;
        };
        if normalize_text(&f.vendor_display) != normalize_text(&v.vendor_name) {
            out.insert("vendor_name_variant");
        }
        if let Some(acc) = f.bank_account.as_deref().map(compact_account) {
            if acc != compact_account(&v.bank_account)
                && !v
                    .allowed_bank_accounts
                    .iter()
                    .any(|a| compact_account(a) == acc)
            {
                out.insert("bank_account_mismatch");
            }
            if world.ledger_index.iter().any(|r| {
                r.bank_account.as_deref().map(compact_account).as_deref() == Some(acc.as_str())
                    && normalize_id(&r.vendor_key) != normalize_id(&v.vendor_key)
            }) {
                out.insert("shared_bank_account");
            }
        }
        let total = f.total.and_then(|t| t.to_f64());
        let inv = f
            .invoice_number
            .as_deref()
            .map(normalize_id)
            .unwrap_or_default();
        for r in world
            .ledger_index
            .iter()
            .filter(|r| normalize_id(&r.vendor_key) == normalize_id(&v.vendor_key))
        {
            let rn = normalize_id(&r.invoice_number);
            let same_no =
                !inv.is_empty() && !rn.is_empty() && (rn.contains(&inv) || inv.contains(&rn));
            let amt = r.amount.to_f64().unwrap_or(0.0);
            let same_amount =
                total.is_some_and(|t| (t - amt).abs() / t.abs().max(amt.abs()).max(1.0) <= 0.02);
            // A same-amount payment is the same bill only on the same order or within a week (a
            // recurring bill of the same amount, on its own order weeks earlier, is not).
            let same_po = f
                .po_id
                .as_deref()
                .is_some_and(|p| !r.po_id.is_empty() && normalize_id(p) == normalize_id(&r.po_id));
            let within_week = f
                .invoice_date
                .as_deref()
                .and_then(|d| ls_core::text::days_between(d, &r.payment_date))
                .is_some_and(|g| g <= 7);
            if same_no || (same_amount && (same_po || within_week)) {
                out.insert("duplicate_near_match");
            }
        }
        if let Some(t) = f.total {
            if just_under_limit(t).is_some() {
                out.insert("approval_threshold_evasion");
            }
        }
        if let Some(po) = f.po_id.as_deref().and_then(|p| world.po(p)) {
            for (desc, q, u, _) in &f.line_items {
                match po.line_items.iter().find(|l| &l.description == desc) {
                    Some(l) if l.unit_price != *u || *q > l.qty => {
                        out.insert("po_mismatch");
                    }
                    None => {
                        out.insert("po_mismatch");
                    }
                    _ => {}
                }
                if let Some(rc) = f.receipt_id.as_deref().and_then(|r| world.receipt(r)) {
                    let got: rust_decimal::Decimal = rc
                        .received_line_items
                        .iter()
                        .filter(|l| &l.description == desc)
                        .map(|l| l.qty)
                        .sum();
                    if got < *q {
                        out.insert("receipt_shortfall");
                    }
                }
            }
        } else if f.po_id.is_some() {
            out.insert("po_not_found");
        }
    }
    for doc in case.documents.iter().filter(|d| d.doc_type == "email") {
        let Some(t) = thread_of(case, world, &doc.doc_id) else {
            continue;
        };
        let sender = normalize_text(&t.sender);
        let domain = sender
            .rsplit_once('@')
            .map(|(_, d)| d.to_owned())
            .unwrap_or_default();
        if !t.expected_domain.is_empty() && domain != normalize_text(&t.expected_domain) {
            out.insert("sender_domain_mismatch");
        }
        let text = normalize_text(&format!("{} {}", t.subject, t.body));
        if RISK_PHRASES.iter().any(|p| text.contains(p)) {
            out.insert("email_risk_language");
        }
    }
    // A pending change, or a rejected one to an account an invoice pays, is risk; a rejected
    // attempt to an account nobody pays (caught months ago) is history.
    let paid: Vec<String> = case
        .invoices()
        .filter_map(|d| {
            invoice_facts(d)
                .bank_account
                .as_deref()
                .map(compact_account)
        })
        .collect();
    for h in world.vendor_history {
        let st = normalize_text(&h.status);
        let refused = st.contains("rejected") || st.contains("failed");
        if h.change_type.contains("bank")
            && (st.contains("pending")
                || (refused && paid.contains(&compact_account(&h.new_value))))
        {
            out.insert("vendor_history_flag");
        }
    }
    out
}

/// Every problem with one generated case: validator issues plus generator checks.
pub fn check_generated(case: &Case, world: &CaseWorld<'_>) -> Vec<String> {
    let mut out: Vec<String> = validate_case(case, world)
        .into_iter()
        .map(|i| i.message)
        .collect();
    let curated_clone = case.benchmark_split == "certificate_required";
    if curated_clone {
        if !case.certificate_required {
            out.push("certificate-required clone without certificate_required".into());
        }
        return out;
    }
    let risk = observable_risk(case, world);
    if case.gold.unsafe_if_pay && risk.is_empty() {
        out.push("risky label but nothing in the documents or master data is suspicious".into());
    }
    if !case.gold.unsafe_if_pay && !risk.is_empty() {
        out.push(format!("clean label but the documents show {risk:?}"));
    }
    let hidden = HiddenWorld::derive(case);
    if let Some(d) = case.gold.decision {
        if d != hidden.latent_hypothesis.decision() {
            out.push(format!(
                "gold decision {} disagrees with latent hypothesis {}",
                d.as_str(),
                hidden.latent_hypothesis.as_str()
            ));
        }
    }
    if case.contrastive_role.as_deref() == Some("twin") {
        if case.gold.decision != Some(Decision::Pay)
            || case.gold.unsafe_if_pay
            || !case.gold.canonical_signals().is_empty()
        {
            out.push("twin is not labelled benign".into());
        }
        for doc in case.invoices() {
            let f = invoice_facts(doc);
            let master = world.vendors.iter().find(|v| {
                vendor_alias_match(
                    &f.vendor_display,
                    &[v.vendor_name.as_str(), v.canonical_name.as_str()],
                )
            });
            match (master, f.bank_account) {
                (Some(v), Some(acc))
                    if compact_account(&acc) == compact_account(&v.bank_account) => {}
                _ => out.push(format!(
                    "twin invoice {} does not pay the vendor-master account",
                    doc.doc_id
                )),
            }
        }
    }
    if case.contrastive_role.as_deref() == Some("counterpart") && !case.gold.unsafe_if_pay {
        out.push("twin counterpart is not labelled risky".into());
    }
    out.extend(check_lookalikes(case, world));
    if case.benchmark_split == "controlbench" {
        match &case.controlbench {
            None => out.push("controlbench case without its controlbench metadata".into()),
            Some(cb) if cb.sequence_id.is_empty() || cb.vendor_key.is_empty() => {
                out.push("controlbench metadata without its sequence or vendor".into());
            }
            Some(_) => {}
        }
        if case.vendor_key.is_none() {
            out.push("controlbench case without vendor_key".into());
        }
    }
    out
}

/// A benign look-alike must really be benign: labelled PAY without codes, every bank line pays an
/// account the vendor master approves, every email comes from its expected domain without risk
/// language, and a verified bank change is backed by an approved change to that account in the
/// vendor history.
pub fn check_lookalikes(case: &Case, world: &CaseWorld<'_>) -> Vec<String> {
    let Some(names) = case
        .generator_metadata
        .as_ref()
        .map(|g| &g.benign_lookalikes)
        .filter(|n| !n.is_empty())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if case.gold.unsafe_if_pay
        || case.gold.decision.is_some_and(|d| d != Decision::Pay)
        || !case.gold.canonical_signals().is_empty()
    {
        out.push(format!(
            "benign look-alike case ({names:?}) is not labelled benign"
        ));
    }
    for doc in case.invoices() {
        let f = invoice_facts(doc);
        let Some(v) = world.vendors.iter().find(|v| {
            vendor_alias_match(
                &f.vendor_display,
                &[v.vendor_name.as_str(), v.canonical_name.as_str()],
            )
        }) else {
            out.push(format!(
                "look-alike invoice {} names no master vendor",
                doc.doc_id
            ));
            continue;
        };
        let acc = f
            .bank_account
            .as_deref()
            .map(compact_account)
            .unwrap_or_default();
        let approved = compact_account(&v.bank_account) == acc
            || v.allowed_bank_accounts
                .iter()
                .any(|a| compact_account(a) == acc);
        if !approved {
            out.push(format!(
                "look-alike invoice {} pays an account the vendor master does not approve",
                doc.doc_id
            ));
        }
        if names.iter().any(|n| n == "verified_bank_change") {
            let verified = world.vendor_history.iter().any(|h| {
                h.change_type.contains("bank")
                    && normalize_text(&h.status).starts_with("approved")
                    && compact_account(&h.new_value) == acc
            });
            if !verified {
                out.push(format!(
                    "verified bank change on {} without an approved change to that account",
                    doc.doc_id
                ));
            }
        }
        if f.total.and_then(just_under_limit).is_some() {
            out.push(format!(
                "look-alike invoice {} sits just under an approval limit",
                doc.doc_id
            ));
        }
    }
    for doc in case.documents.iter().filter(|d| d.doc_type == "email") {
        let Some(t) = thread_of(case, world, &doc.doc_id) else {
            continue;
        };
        let domain = normalize_text(&t.sender)
            .rsplit_once('@')
            .map(|(_, d)| d.to_owned())
            .unwrap_or_default();
        if domain != normalize_text(&t.expected_domain) {
            out.push(format!(
                "look-alike email {} is not from its expected domain",
                doc.doc_id
            ));
        }
        let text = normalize_text(&format!("{} {}", t.subject, t.body));
        if let Some(p) = RISK_PHRASES.iter().find(|p| text.contains(*p)) {
            out.push(format!(
                "look-alike email {} uses risk language {p:?}",
                doc.doc_id
            ));
        }
    }
    out
}
