//! Delayed artifacts, computed from the case's documents and master data at reveal time — never
//! copied from gold labels (the reference leaked gold discrepancies and links into them).

use ls_core::fixtures::CaseWorld;
use ls_core::schema::{CallbackResult, Case};
use ls_core::text::{compact_account, normalize_id, normalize_text, vendor_alias_match};
use ls_core::validate::InvoiceFacts;
use ls_core::{ArtifactId, ObservedSignal, ReasonCode};
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// A computed artifact before it is stamped with its reveal clock.
#[derive(Debug, Clone)]
pub struct Computed {
    pub artifact_type: &'static str,
    pub summary: String,
    pub details: Map<String, Value>,
    /// SPRT observation key for the artifact's channel.
    pub observation: &'static str,
    pub signals: Vec<ObservedSignal>,
    pub refs: Vec<String>,
}

/// A set of signals as the JSON list of their spellings (the set is in spelling order).
fn names(set: &BTreeSet<ObservedSignal>) -> Vec<&'static str> {
    set.iter().map(|s| s.as_str()).collect()
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Intervention latency in case-clock ticks.
pub fn delay(artifact: ArtifactId) -> u32 {
    match artifact {
        // The same delay whatever the callback will say: an earlier answer for a legitimate
        // vendor made the arrival step itself the label.
        ArtifactId::CallbackVerificationResult | ArtifactId::BankChangeApprovalChain => 2,
        _ => 1,
    }
}

/// `invoices` are the case's invoice facts (`invoice_facts` of each invoice, in order), read once
/// per case by the caller.
pub fn compute(
    artifact: ArtifactId,
    case: &Case,
    world: &CaseWorld<'_>,
    invoices: &[InvoiceFacts],
    reveal_clock: u32,
) -> Computed {
    match artifact {
        ArtifactId::CallbackVerificationResult => callback(case, world, invoices, reveal_clock),
        ArtifactId::BankChangeApprovalChain => bank_chain(world, invoices),
        ArtifactId::PoReconciliationReport => po_reconciliation(world, invoices),
        ArtifactId::ReceiptReconciliationReport => receipt_reconciliation(world, invoices),
        ArtifactId::DuplicateClusterReport => duplicate_cluster(world, invoices),
    }
}

fn vendor_for<'a>(world: &CaseWorld<'a>, f: &InvoiceFacts) -> Option<&'a ls_core::Vendor> {
    world.vendor(&f.vendor_display).or_else(|| {
        world.vendors.iter().find(|v| {
            vendor_alias_match(
                &f.vendor_display,
                &[
                    v.vendor_name.as_str(),
                    v.canonical_name.as_str(),
                    v.vendor_key.as_str(),
                ],
            )
        })
    })
}

/// The SPRT observation key of a callback result ("" for no answer: recorded, but not
/// evidence) and the risk signal the agent observes, if any.
fn callback_observation(result: CallbackResult) -> (&'static str, Option<ReasonCode>) {
    let signal = match result {
        CallbackResult::NoAnswer => ("", None),
        CallbackResult::ConfirmsLegitimate => ("callback_clean", None),
        CallbackResult::AdversarialConfirm => (
            "callback_suspicious_confirm",
            Some(ReasonCode::CallbackSuspiciousConfirm),
        ),
        CallbackResult::DisputesChange => (
            "callback_dispute",
            Some(ReasonCode::CallbackDisputeConfirmed),
        ),
    };
    debug_assert!(
        signal
            .1
            .is_none_or(|code| code.as_str() == result.risk_signal()),
        "the observed signal is the one the artifact reports"
    );
    signal
}

fn callback_text(result: CallbackResult, phone: &str) -> String {
    match result {
        CallbackResult::NoAnswer => format!("Called {phone}; nobody answered. Retry later."),
        CallbackResult::ConfirmsLegitimate => format!("Called {phone} from the vendor master. The vendor confirms the invoice and that its payment details are unchanged."),
        CallbackResult::AdversarialConfirm => "The call was answered and the caller confirmed the new payment details, but the number reached does not match the vendor master and the contact could not name the account manager on file.".to_owned(),
        CallbackResult::DisputesChange => format!("Called {phone} from the vendor master. The vendor denies requesting any change to its bank details and asks that the profile be frozen."),
    }
}

fn callback(case: &Case, world: &CaseWorld<'_>, invoices: &[InvoiceFacts], clock: u32) -> Computed {
    let vendor = invoices.first().and_then(|f| vendor_for(world, f));
    let phone = vendor
        .and_then(|v| v.phone.clone())
        .unwrap_or_else(|| "the number on the vendor master".to_owned());
    let result = if case.simulation.callback_no_answer_clocks.contains(&clock) {
        CallbackResult::NoAnswer
    } else {
        CallbackResult::of(case.simulation.callback_outcome)
    };
    let (observation, signal) = callback_observation(result);
    Computed {
        artifact_type: "verification",
        summary: format!("Vendor callback outcome: {result}."),
        details: obj(
            json!({"outcome": result.as_str(), "response_text": callback_text(result, &phone), "risk_signal": result.risk_signal(), "phone_dialed": phone}),
        ),
        observation,
        signals: signal.into_iter().map(ObservedSignal::Code).collect(),
        refs: Vec::new(),
    }
}

fn bank_chain(world: &CaseWorld<'_>, invoices: &[InvoiceFacts]) -> Computed {
    let mut findings = Vec::new();
    let mut refs = Vec::new();
    let mut mismatch = false;
    for f in invoices {
        let Some(account) = f.bank_account.clone() else {
            continue;
        };
        let acc = compact_account(&account);
        match vendor_for(world, f) {
            None => {
                mismatch = true;
                findings.push(json!({"doc_id": f.doc_id, "bank_account": account, "finding": "vendor_not_in_master", "approved_change": null}));
            }
            Some(v) => {
                let on_master = compact_account(&v.bank_account) == acc
                    || v.allowed_bank_accounts
                        .iter()
                        .any(|a| compact_account(a) == acc);
                if on_master {
                    findings.push(json!({"doc_id": f.doc_id, "bank_account": account, "finding": "matches_vendor_master"}));
                    continue;
                }
                let change = world.vendor_history.iter().find(|r| {
                    normalize_id(&r.vendor_key) == normalize_id(&v.vendor_key)
                        && compact_account(&r.new_value) == acc
                });
                let approved = change.is_some_and(|r| normalize_text(&r.status) == "approved");
                if let Some(r) = change {
                    refs.push(r.change_id.clone());
                }
                if !approved {
                    mismatch = true;
                }
                findings.push(json!({
                    "doc_id": f.doc_id, "bank_account": account,
                    "finding": if approved { "approved_change_on_file" } else { "no_approved_change_for_account" },
                    "change_request": change.map(|r| json!({"change_id": r.change_id, "status": r.status, "requested_by": r.requested_by})),
                }));
            }
        }
    }
    let status = if mismatch {
        "mismatch_found"
    } else {
        "chain_clean"
    };
    Computed {
        artifact_type: "approval_chain",
        summary: format!("Bank change approval chain review: {status}."),
        details: obj(
            json!({"status": status, "requires_manual_callback": mismatch, "findings": findings}),
        ),
        observation: status,
        signals: if mismatch {
            vec![ReasonCode::PolicyBypassAttempt.into()]
        } else {
            Vec::new()
        },
        refs,
    }
}

fn same_item(a: &str, b: &str) -> bool {
    let (x, y) = (normalize_text(a), normalize_text(b));
    x == y
        || x.contains(&y)
        || y.contains(&x)
        || ls_core::text::identity_tokens(&x)
            .intersection(&ls_core::text::identity_tokens(&y))
            .next()
            .is_some()
}

/// One invoice's reference (`po_id`, `receipt_id`) and the discrepancies reconciliation found.
type Checked<'f> = (&'f Option<String>, BTreeSet<ObservedSignal>);

/// A reconciliation report over `invoices`: `check` returns an invoice's reference (reported
/// under `id_key`) and its discrepancies, recording the documents it read in `refs`.
fn reconciliation<'f>(
    report: &str,
    id_key: &str,
    clean_observation: &'static str,
    invoices: &'f [InvoiceFacts],
    mut check: impl FnMut(&'f InvoiceFacts, &mut Vec<String>) -> Checked<'f>,
) -> Computed {
    let mut found = BTreeSet::new();
    let mut per_invoice = Vec::new();
    let mut refs = Vec::new();
    for f in invoices {
        let (id, d) = check(f, &mut refs);
        found.extend(d.iter().copied());
        per_invoice.push(json!({"doc_id": f.doc_id, id_key: id, "discrepancies": names(&d)}));
    }
    let status = if found.is_empty() {
        "reconciled_clean"
    } else {
        "reconciled_with_flags"
    };
    Computed {
        artifact_type: "reconciliation",
        summary: format!("{report} reconciliation completed: {status}."),
        details: obj(
            json!({"status": status, "discrepancies": names(&found), "invoices": per_invoice}),
        ),
        observation: if found.is_empty() {
            clean_observation
        } else {
            "reconciled_with_flags"
        },
        signals: found.into_iter().collect(),
        refs,
    }
}

fn po_reconciliation(world: &CaseWorld<'_>, invoices: &[InvoiceFacts]) -> Computed {
    reconciliation("PO", "po_id", "po_clean", invoices, |f, refs| {
        let mut d: BTreeSet<ObservedSignal> = BTreeSet::new();
        match f.po_id.as_deref().and_then(|p| world.po(p)) {
            None => {
                d.insert(ReasonCode::MissingPo.into());
            }
            Some(po) => {
                refs.push(po.po_id.clone());
                for (desc, qty, unit, _) in &f.line_items {
                    match po
                        .line_items
                        .iter()
                        .find(|l| same_item(&l.description, desc))
                    {
                        None => {
                            d.insert(ReasonCode::PriceMismatch.into());
                        }
                        Some(l) => {
                            if l.unit_price != *unit {
                                d.insert(ReasonCode::PriceMismatch.into());
                            }
                            if l.qty != *qty {
                                d.insert(ReasonCode::QuantityMismatch.into());
                            }
                        }
                    }
                }
                if let Some(t) = f.total {
                    if (t - po.total).abs() > Decimal::new(1, 2) {
                        d.insert(ReasonCode::TotalMismatch.into());
                    }
                }
            }
        }
        (&f.po_id, d)
    })
}

fn receipt_reconciliation(world: &CaseWorld<'_>, facts: &[InvoiceFacts]) -> Computed {
    reconciliation(
        "Receipt",
        "receipt_id",
        "receipt_clean",
        facts,
        |f, refs| {
            let mut d: BTreeSet<ObservedSignal> = BTreeSet::new();
            let receipt = f
                .receipt_id
                .as_deref()
                .and_then(|r| world.receipt(r))
                .or_else(|| {
                    f.po_id
                        .as_deref()
                        .and_then(|p| world.receipts.iter().find(|r| r.po_id == p))
                });
            match receipt {
                None => {
                    d.insert(ReasonCode::MissingReceipt.into());
                }
                Some(r) => {
                    refs.push(r.receipt_id.clone());
                    if let Some(po) = world.po(&r.po_id) {
                        for l in &po.line_items {
                            let got = r
                                .received_line_items
                                .iter()
                                .find(|x| same_item(&x.description, &l.description))
                                .map(|x| x.qty);
                            if got.is_none_or(|q| q < l.qty) {
                                d.insert(ReasonCode::PartialReceiptOnly.into());
                            }
                        }
                    }
                    if let (Some(rd), Some(id)) = (&r.received_date, &f.invoice_date) {
                        if rd > id {
                            d.insert(ReasonCode::ReceiptDateMismatch.into());
                        }
                    }
                }
            }
            (&f.receipt_id, d)
        },
    )
}

/// Fraction under an approval threshold that counts as "just under" it.
pub const THRESHOLD_BAND: f64 = 0.05;

fn duplicate_cluster(world: &CaseWorld<'_>, invoices: &[InvoiceFacts]) -> Computed {
    let facts = invoices;
    let mut links = BTreeSet::new();
    let mut signals: BTreeSet<ObservedSignal> = BTreeSet::new();
    let mut evidence = Vec::new();
    for f in facts {
        let vendor = vendor_for(world, f)
            .map(|v| v.vendor_key.clone())
            .unwrap_or_else(|| f.vendor_display.clone());
        let amount = f.total.map(ls_core::text::decimal_to_f64);
        for row in world.ledger_index {
            if let Some(score) = crate::tools::ledger_match_score(
                row,
                Some(&vendor),
                f.invoice_number.as_deref(),
                amount,
                world,
            ) {
                links.insert(row.ledger_id.clone());
                signals.insert(ReasonCode::DuplicateNearMatch.into());
                evidence.push(json!({"doc_id": f.doc_id, "ledger_id": row.ledger_id, "kind": "prior_payment_match", "match_score": ls_core::text::round_to(score, 4)}));
            }
        }
        // The same account used by another vendor, in payments or in change requests.
        if let Some(acc) = f
            .bank_account
            .as_deref()
            .map(compact_account)
            .filter(|a| !a.is_empty())
        {
            let own = normalize_id(&vendor);
            for row in world.ledger_index.iter().filter(|r| {
                r.bank_account.as_deref().map(compact_account).as_deref() == Some(acc.as_str())
            }) {
                if normalize_id(&row.vendor_key) != own {
                    links.insert(row.ledger_id.clone());
                    signals.insert(ReasonCode::SharedBankAccount.into());
                    evidence.push(json!({"doc_id": f.doc_id, "ledger_id": row.ledger_id, "kind": "shared_bank_account"}));
                }
            }
            for h in world.vendor_history.iter().filter(|h| {
                compact_account(&h.new_value) == acc && normalize_id(&h.vendor_key) != own
            }) {
                signals.insert(ReasonCode::SharedBankAccount.into());
                let linked: Vec<String> = world
                    .ledger_index
                    .iter()
                    .filter(|r| {
                        h.related_invoice_number
                            .as_deref()
                            .is_some_and(|n| normalize_id(n) == normalize_id(&r.invoice_number))
                    })
                    .map(|r| r.ledger_id.clone())
                    .collect();
                links.extend(linked.iter().cloned());
                evidence.push(json!({"doc_id": f.doc_id, "change_id": h.change_id, "vendor_key": h.vendor_key, "kind": "shared_bank_account", "linked_ledger_ids": linked}));
            }
        }
        // Amounts just under an approval threshold.
        if let Some(total) = f.total {
            for rule in world.policy_rules.iter().filter(|r| r.threshold.is_some()) {
                let th = rule.threshold.unwrap_or_default();
                let band = th
                    * (Decimal::ONE
                        - Decimal::from_f64_retain(THRESHOLD_BAND)
                            .unwrap_or_default()
                            .round_dp(4));
                if total < th && total >= band {
                    signals.insert(ReasonCode::ApprovalThresholdEvasion.into());
                    evidence.push(json!({"doc_id": f.doc_id, "rule_id": rule.rule_id, "kind": "just_under_threshold", "threshold": th.to_string(), "amount": total.to_string()}));
                }
            }
        }
    }
    // Several invoices in one batch paying the same account within a few days.
    let mut by_account: std::collections::BTreeMap<String, Vec<&InvoiceFacts>> = Default::default();
    for f in facts {
        if let Some(a) = f
            .bank_account
            .as_deref()
            .map(compact_account)
            .filter(|a| !a.is_empty())
        {
            by_account.entry(a).or_default().push(f);
        }
    }
    for group in by_account.values().filter(|g| g.len() >= 2) {
        let mut dates: Vec<&str> = group
            .iter()
            .filter_map(|f| f.invoice_date.as_deref())
            .collect();
        dates.sort_unstable();
        let close = dates
            .windows(2)
            .all(|w| ls_core::text::days_between(w[0], w[1]).is_some_and(|g| g <= 3));
        signals.insert(ReasonCode::SharedBankAccount.into());
        if close {
            signals.insert(ReasonCode::CoordinatedTiming.into());
        }
        evidence.push(json!({"kind": "batch_same_account", "doc_ids": group.iter().map(|f| f.doc_id.clone()).collect::<Vec<_>>(), "coordinated_timing": close}));
    }
    let status = if signals.is_empty() {
        "no_cluster"
    } else {
        "cluster_detected"
    };
    Computed {
        artifact_type: "duplicate_analysis",
        summary: format!("Duplicate cluster review result: {status}."),
        details: obj(
            json!({"status": status, "linked_ledger_ids": links.iter().collect::<Vec<_>>(), "signals": names(&signals), "evidence": evidence}),
        ),
        observation: if signals.is_empty() {
            "no_cluster"
        } else {
            "cluster_detected"
        },
        signals: signals.into_iter().collect(),
        refs: links.into_iter().collect(),
    }
}
