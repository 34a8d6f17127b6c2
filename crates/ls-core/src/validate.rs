//! Consistency validator for curated and generated cases.
//!
//! A case passes when: ids are unique; every gold evidence reference points at a real accurate
//! token of a real document on the cited page; invoice arithmetic is consistent (line totals,
//! subtotal + tax = total); every vendor, PO, receipt and gold ledger link the scenario depends on
//! is reachable through the tools; gold labels agree with the task contract; and a case labelled
//! safe carries no risk signal in its gold.

use crate::enums::TaskType;
use crate::fixtures::{CaseWorld, FixtureSet};
use crate::schema::*;
use crate::text::{canonical_code, normalize_id, parse_decimal, vendor_alias_match};
use rust_decimal::Decimal;
use std::collections::BTreeSet;

/// One problem found in a case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ValidationIssue {
    pub case_id: String,
    pub message: String,
}

/// Validate every case of the set against its master data.
pub fn validate_set(set: &FixtureSet) -> Vec<ValidationIssue> {
    let mut issues = Vec::new();
    let mut seen = BTreeSet::new();
    for case in &set.cases {
        if !seen.insert(case.case_id.as_str()) {
            issues.push(issue(case, format!("duplicate case id {}", case.case_id)));
        }
        issues.extend(validate_case(case, &set.world(case)));
    }
    issues
}

fn issue(case: &Case, message: String) -> ValidationIssue {
    ValidationIssue {
        case_id: case.case_id.clone(),
        message,
    }
}

/// Parsed view of an invoice document's conventional lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InvoiceFacts {
    pub doc_id: String,
    pub vendor_display: String,
    pub invoice_number: Option<String>,
    pub invoice_date: Option<String>,
    pub currency: Option<String>,
    pub po_id: Option<String>,
    pub receipt_id: Option<String>,
    pub line_items: Vec<(String, Decimal, Decimal, Decimal)>,
    pub subtotal: Option<Decimal>,
    pub tax: Option<Decimal>,
    pub total: Option<Decimal>,
    pub bank_account: Option<String>,
}

/// Read an invoice's lines: first token = vendor display name, `Key: value` lines, and
/// `description | qty | unit_price | line_total` rows.
pub fn invoice_facts(doc: &Document) -> InvoiceFacts {
    // One pass over the tokens (this runs at every reset and grading): for each field, the first
    // line whose text starts with its label (ASCII case-insensitive) supplies the value after the
    // first colon, exactly as `Document::field_value` reads it.
    const LABELS: [&str; 11] = [
        "Invoice No:",
        "Invoice Date:",
        "Currency:",
        "PO:",
        "Receipt:",
        "Subtotal:",
        "Tax:",
        "Total:",
        "Bank:",
        "IBAN:",
        "SWIFT:",
    ];
    let mut found: [Option<&str>; 11] = [None; 11];
    let mut f = InvoiceFacts {
        doc_id: doc.doc_id.clone(),
        ..Default::default()
    };
    f.vendor_display = doc
        .accurate_ocr
        .first()
        .map(|t| t.text.trim().to_owned())
        .unwrap_or_default();
    for t in &doc.accurate_ocr {
        let head = t.text.trim_start().as_bytes();
        for (slot, label) in found.iter_mut().zip(LABELS) {
            if slot.is_none()
                && head
                    .get(..label.len())
                    .is_some_and(|h| h.eq_ignore_ascii_case(label.as_bytes()))
            {
                *slot = Some(t.text.split_once(':').map_or("", |(_, v)| v.trim()));
            }
        }
        if t.text.bytes().filter(|&b| b == b'|').count() == 3 {
            let parts: Vec<&str> = t.text.split('|').map(str::trim).collect();
            if let (Some(q), Some(u), Some(l)) = (
                parse_decimal(parts[1]),
                parse_decimal(parts[2]),
                parse_decimal(parts[3]),
            ) {
                f.line_items.push((parts[0].to_owned(), q, u, l));
            }
        }
    }
    let text = |i: usize| found[i].map(str::to_owned);
    let amount = |i: usize| found[i].and_then(parse_decimal);
    f.invoice_number = text(0);
    f.invoice_date = text(1);
    f.currency = text(2);
    f.po_id = text(3);
    f.receipt_id = text(4);
    f.subtotal = amount(5);
    f.tax = amount(6);
    f.total = amount(7);
    f.bank_account = text(8).or_else(|| text(9)).or_else(|| text(10));
    f
}

/// Validate one case against the master data it sees.
pub fn validate_case(case: &Case, world: &CaseWorld<'_>) -> Vec<ValidationIssue> {
    let mut msgs = Vec::new();
    check_documents(case, &mut msgs);
    check_evidence(case, &mut msgs);
    check_gold(case, world, &mut msgs);
    check_invoices(case, world, &mut msgs);
    check_emails(case, world, &mut msgs);
    check_task_a_fields(case, &mut msgs);
    msgs.into_iter().map(|m| issue(case, m)).collect()
}

/// The case has documents, a positive budget and step limit, unique document and token ids, and
/// visible ids that exist.
fn check_documents(case: &Case, out: &mut Vec<String>) {
    if case.documents.is_empty() {
        out.push("case has no documents".into());
    }
    if case.max_steps == 0 || case.budget_total <= Decimal::ZERO {
        out.push("max_steps and budget_total must be positive".into());
    }
    // Unique doc ids and token ids.
    let mut doc_ids = BTreeSet::new();
    let mut token_ids = BTreeSet::new();
    for d in &case.documents {
        if !doc_ids.insert(d.doc_id.as_str()) {
            out.push(format!("duplicate doc_id {}", d.doc_id));
        }
        if d.accurate_ocr.is_empty() {
            out.push(format!("document {} has no accurate OCR", d.doc_id));
        }
        for t in d.accurate_ocr.iter().chain(&d.noisy_ocr) {
            if !token_ids.insert(t.token_id.as_str()) {
                out.push(format!("duplicate token_id {} in {}", t.token_id, d.doc_id));
            }
            if t.page == 0 || t.page > d.page_count {
                out.push(format!(
                    "token {} on page {} outside 1..={}",
                    t.token_id, t.page, d.page_count
                ));
            }
            if !(t.bbox[0] <= t.bbox[2] && t.bbox[1] <= t.bbox[3]) {
                out.push(format!("token {} has an inverted bbox", t.token_id));
            }
        }
    }
    if let Some(vis) = &case.initial_visible_doc_ids {
        for v in vis {
            if !doc_ids.contains(v.as_str()) {
                out.push(format!(
                    "initial_visible_doc_ids names unknown document {v}"
                ));
            }
        }
    }
}

/// Gold evidence points at real accurate tokens on the cited page.
fn check_evidence(case: &Case, out: &mut Vec<String>) {
    // Gold evidence points at real accurate tokens on the cited page.
    let places = case
        .gold
        .fact_places
        .iter()
        .flat_map(|(claim, evs)| evs.iter().map(move |ev| (claim, ev)));
    for (claim, ev) in case.gold.evidence_targets.iter().chain(places) {
        match case.document(&ev.doc_id) {
            None => out.push(format!(
                "evidence {claim} cites unknown document {}",
                ev.doc_id
            )),
            Some(doc) => {
                if ev.token_ids.is_empty() {
                    out.push(format!("evidence {claim} cites no tokens"));
                }
                for tid in &ev.token_ids {
                    match doc.accurate_ocr.iter().find(|t| &t.token_id == tid) {
                        None => out.push(format!(
                            "evidence {claim} cites token {tid} not in {}",
                            ev.doc_id
                        )),
                        Some(t) => {
                            if t.page != ev.page {
                                out.push(format!(
                                    "evidence {claim} token {tid} is on page {} not {}",
                                    t.page, ev.page
                                ));
                            }
                            if crate::text::bbox_iou(&t.bbox, &ev.bbox) <= 0.0 {
                                out.push(format!(
                                    "evidence {claim} bbox does not overlap token {tid}"
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The gold block keeps its task's contract: required parts, canonical codes, a PAY only
/// on a clean case, links that name real invoices.
fn check_gold(case: &Case, world: &CaseWorld<'_>, out: &mut Vec<String>) {
    let doc_ids: BTreeSet<&str> = case.documents.iter().map(|d| d.doc_id.as_str()).collect();
    let g = &case.gold;
    match case.task_type {
        TaskType::TaskA => {
            for k in crate::contract::EXTRACTION_FIELDS {
                if !g.fields.contains_key(k) {
                    out.push(format!("task A gold lacks field {k}"));
                }
            }
            if g.line_items.is_empty() {
                out.push("task A gold lacks line items".into());
            }
        }
        _ => {
            if g.decision.is_none() {
                out.push("gold decision is required for tasks B-E".into());
            }
        }
    }
    for code in g
        .reason_codes
        .iter()
        .chain(&g.fraud_flags)
        .chain(&g.discrepancies)
        .chain(&g.campaign_signals)
    {
        if canonical_code(code).is_none() {
            out.push(format!("gold code {code} is not a canonical reason code"));
        }
    }
    let signals = g.canonical_signals();
    if g.decision == Some(crate::Decision::Pay) && (g.unsafe_if_pay || !signals.is_empty()) {
        out.push("a gold-PAY case must be safe: no unsafe_if_pay and no risk signals".into());
    }
    if g.unsafe_if_pay && g.decision == Some(crate::Decision::Pay) {
        out.push("unsafe_if_pay with gold PAY".into());
    }
    for link in &g.duplicate_links {
        if !world.ledger_index.iter().any(|l| &l.ledger_id == link) {
            out.push(format!("gold duplicate link {link} is not in the ledger"));
        }
    }
    for link in &g.cross_invoice_links {
        if !doc_ids.contains(link.as_str()) {
            out.push(format!(
                "gold cross-invoice link {link} is not a case document"
            ));
        }
    }
}

/// Invoice arithmetic, and the master data an invoice cites is reachable by the tools.
fn check_invoices(case: &Case, world: &CaseWorld<'_>, out: &mut Vec<String>) {
    let g = &case.gold;
    // Invoice arithmetic and reachability of master data.
    for doc in case.invoices() {
        let f = invoice_facts(doc);
        if f.total.is_none() {
            out.push(format!("invoice {} has no 'Total:' line", doc.doc_id));
        }
        for (desc, q, u, l) in &f.line_items {
            if (q * u).round_dp(2) != l.round_dp(2) {
                out.push(format!(
                    "invoice {} line '{desc}': {q} x {u} != {l}",
                    doc.doc_id
                ));
            }
        }
        if let (Some(s), Some(t), Some(tot)) = (f.subtotal, f.tax, f.total) {
            if (s + t).round_dp(2) != tot.round_dp(2) {
                out.push(format!(
                    "invoice {}: subtotal {s} + tax {t} != total {tot}",
                    doc.doc_id
                ));
            }
            if !f.line_items.is_empty() {
                let sum: Decimal = f.line_items.iter().map(|x| x.3).sum();
                if sum.round_dp(2) != s.round_dp(2) {
                    out.push(format!(
                        "invoice {}: line totals {sum} != subtotal {s}",
                        doc.doc_id
                    ));
                }
            }
        }
        if !f.vendor_display.is_empty() {
            let reachable = world.vendors.iter().any(|v| {
                vendor_alias_match(
                    &f.vendor_display,
                    &[
                        v.vendor_name.as_str(),
                        v.canonical_name.as_str(),
                        v.vendor_key.as_str(),
                    ],
                )
            });
            if !reachable {
                out.push(format!(
                    "invoice {} vendor '{}' is not in the vendor master",
                    doc.doc_id, f.vendor_display
                ));
            }
        }
        if let Some(po) = &f.po_id {
            if world.po(po).is_none() {
                out.push(format!(
                    "invoice {} cites PO {po} that lookup_po cannot find",
                    doc.doc_id
                ));
            }
        }
        match &f.receipt_id {
            Some(r) => {
                if world.receipt(r).is_none() {
                    out.push(format!(
                        "invoice {} cites receipt {r} that lookup_receipt cannot find",
                        doc.doc_id
                    ));
                }
            }
            None => {
                if f.po_id.is_some()
                    && !g.discrepancies.iter().any(|d| d == "missing_receipt")
                    && case.task_type == TaskType::TaskB
                {
                    out.push(format!(
                        "task B invoice {} has no receipt and gold does not say missing_receipt",
                        doc.doc_id
                    ));
                }
            }
        }
    }
}

/// Email documents are readable by `inspect_email_thread`.
fn check_emails(case: &Case, world: &CaseWorld<'_>, out: &mut Vec<String>) {
    // Email documents must be readable by inspect_email_thread.
    for doc in case.documents.iter().filter(|d| d.doc_type == "email") {
        let has_from = doc.accurate_ocr.iter().any(|t| {
            t.text
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("from:")
        });
        if doc.thread_data.is_none() && world.thread(&doc.doc_id).is_none() && !has_from {
            out.push(format!(
                "email {} has neither thread data nor a From: line",
                doc.doc_id
            ));
        }
    }
}

/// Task A gold fields agree with the document.
fn check_task_a_fields(case: &Case, out: &mut Vec<String>) {
    let g = &case.gold;
    // Task A gold fields agree with the document.
    if case.task_type == TaskType::TaskA {
        if let Some(doc) = case.invoices().next() {
            let f = invoice_facts(doc);
            let check = |key: &str, doc_value: Option<String>| -> Option<String> {
                let gold = g.fields.get(key)?;
                let dv = doc_value?;
                let same = match (parse_decimal(gold), parse_decimal(&dv)) {
                    (Some(a), Some(b))
                        if key != "invoice_number" && key != "po_id" && key != "receipt_id" =>
                    {
                        a == b
                    }
                    _ => normalize_id(gold) == normalize_id(&dv),
                };
                (!same)
                    .then(|| format!("gold field {key}={gold} disagrees with document value {dv}"))
            };
            let pairs = [
                ("invoice_number", f.invoice_number.clone()),
                ("invoice_date", f.invoice_date.clone()),
                ("currency", f.currency.clone()),
                ("po_id", f.po_id.clone()),
                ("receipt_id", f.receipt_id.clone()),
                ("subtotal", f.subtotal.map(|d| d.to_string())),
                ("tax", f.tax.map(|d| d.to_string())),
                ("total", f.total.map(|d| d.to_string())),
                ("bank_account", f.bank_account.clone()),
            ];
            for (k, v) in pairs {
                if let Some(m) = check(k, v) {
                    out.push(m);
                }
            }
        }
    }
}
