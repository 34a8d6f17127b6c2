//! The reference answer: the submission a careful, correct analyst would make on a case, built
//! from the case's gold labels. It exists to test and calibrate the grader (and the episode loop
//! around it): agents never see gold and must not use this.

use ls_core::{Case, Decision, HiddenWorld, Hypothesis};
use serde_json::{json, Map, Value};

/// The decision gold asks for (Task A has none: the latent hypothesis decides).
pub fn expected_decision(case: &Case, hidden: &HiddenWorld) -> Decision {
    case.gold
        .decision
        .unwrap_or_else(|| hidden.latent_hypothesis.decision())
}

/// A careful, correct, well-evidenced submission for `case`, written from its gold labels.
pub fn reference_submission(
    case: &Case,
    hidden: &HiddenWorld,
    revealed_artifact_ids: &[ls_core::ArtifactId],
    interventions: &[ls_core::ActionName],
) -> Map<String, Value> {
    let g = &case.gold;
    let decision = expected_decision(case, hidden);
    let latent = hidden.latent_hypothesis;
    let other = if latent == Hypothesis::Safe {
        Hypothesis::BankFraud
    } else {
        Hypothesis::Safe
    };
    let mut evidence = Map::new();
    for (k, r) in &g.evidence_targets {
        evidence.insert(k.clone(), serde_json::to_value(r).unwrap());
    }
    if evidence.is_empty() {
        // A clean case: cite what was verified (the Total, bank and PO lines a PAY must cite).
        if let Some(d) = case.invoices().next() {
            for t in &d.accurate_ocr {
                let text = ls_core::text::normalize_text(&t.text);
                let key = if text.starts_with("total") {
                    "invoice_total"
                } else if text.starts_with("bank") || text.starts_with("iban") {
                    "bank_account_verified"
                } else if text.starts_with("po:") || text.starts_with("po ") {
                    "po_reference"
                } else {
                    continue;
                };
                evidence.entry(key).or_insert_with(|| json!({"doc_id": d.doc_id, "page": t.page, "bbox": t.bbox, "token_ids": [t.token_id]}));
            }
        }
    }
    if decision == Decision::Pay {
        // A PAY cites the results of the verifications its task's policy requires: the PO and
        // goods receipt of the three-way match (B), the vendor master record the bank account
        // was compared with (C–E).
        let facts = case.invoices().next().map(ls_core::validate::invoice_facts);
        match case.task_type {
            ls_core::TaskType::TaskA => {}
            ls_core::TaskType::TaskB => {
                if let Some(f) = &facts {
                    if let Some(po) = &f.po_id {
                        evidence.insert("three_way_match_po".into(), json!({"po_id": po}));
                    }
                    if let Some(r) = &f.receipt_id {
                        evidence.insert("three_way_match_receipt".into(), json!({"receipt_id": r}));
                    }
                }
            }
            _ => {
                if let Some(v) = &case.vendor_key {
                    evidence.insert("vendor_master_bank_check".into(), json!({"vendor_key": v}));
                }
            }
        }
    }
    if evidence.is_empty() {
        if let Some(d) = case.invoices().next().or(case.documents.first()) {
            let t = &d.accurate_ocr[0];
            evidence.insert("invoice_reviewed".into(), json!({"doc_id": d.doc_id, "page": t.page, "bbox": t.bbox, "token_ids": [t.token_id]}));
        }
    }
    let mut codes: Vec<String> = g
        .reason_codes
        .iter()
        .chain(&g.fraud_flags)
        .chain(&g.campaign_signals)
        .cloned()
        .collect();
    codes.sort();
    codes.dedup();
    let links = if g.cross_invoice_links.is_empty() {
        g.duplicate_links.clone()
    } else {
        g.cross_invoice_links.clone()
    };
    let mut totals = Vec::new();
    for l in &links {
        if let Some(d) = case.document(l) {
            if let Some(t) = ls_core::validate::invoice_facts(d).total {
                totals.push(format!("{l} ({:.2})", t));
                continue;
            }
        }
        totals.push(l.clone());
    }
    let cf = if decision == Decision::Pay {
        "If the bank account had not matched the vendor master or the sender domain had been spoofed, we would hold the invoice instead of paying it.".to_owned()
    } else {
        format!(
            "If the sender domain had matched the approved vendor domain, the bank account had matched the vendor master, the callback had verified the request, no duplicate invoice existed in the ledger, the approval threshold was respected, the receipt and PO reconciled, and no coordinated campaign linked {}, we would pay the invoice instead.",
            if totals.is_empty() { "other invoices".to_owned() } else { totals.join(", ") }
        )
    };
    // Agent-authored certificate grounded in revealed references.
    let mut nodes =
        vec![json!({"id": "decision.final", "type": "decision", "value": decision.as_str()})];
    let mut edges = vec![];
    let ev_ids: Vec<String> = evidence.keys().map(|k| format!("evidence.{k}")).collect();
    for (k, v) in &evidence {
        nodes.push(json!({"id": format!("evidence.{k}"), "type": "observation", "ref": v}));
        edges.push(json!({"source": format!("evidence.{k}"), "target": "decision.final", "type": "supports"}));
    }
    for a in revealed_artifact_ids {
        nodes.push(
            json!({"id": format!("artifact.{a}"), "type": "artifact", "ref": {"artifact_id": a}}),
        );
        edges.push(json!({"source": format!("artifact.{a}"), "target": "decision.final", "type": "supports"}));
    }
    for (i, c) in codes.iter().enumerate() {
        nodes.push(json!({"id": format!("hypothesis.{c}"), "type": "hypothesis", "label": c}));
        edges.push(json!({"source": ev_ids[i % ev_ids.len()], "target": format!("hypothesis.{c}"), "type": "supports"}));
        edges.push(json!({"source": format!("hypothesis.{c}"), "target": "decision.final", "type": "supports"}));
    }
    for (k, v) in &g.policy_checks {
        nodes.push(
            json!({"id": format!("policy.{k}"), "type": "policy", "label": format!("{k}: {v}")}),
        );
        edges.push(
            json!({"source": ev_ids[0], "target": format!("policy.{k}"), "type": "supports"}),
        );
        edges.push(json!({"source": format!("policy.{k}"), "target": "decision.final", "type": "supports"}));
    }
    for a in interventions {
        nodes.push(json!({"id": format!("intervention.{a}"), "type": "intervention", "label": a}));
        edges.push(json!({"source": format!("intervention.{a}"), "target": "decision.final", "type": "supports"}));
    }
    nodes.push(json!({"id": "counterfactual.primary", "type": "counterfactual", "label": cf}));
    edges
        .push(json!({"source": ev_ids[0], "target": "counterfactual.primary", "type": "supports"}));
    edges.push(json!({"source": "counterfactual.primary", "target": "decision.final", "type": "would_flip"}));
    let line_items: Vec<Value> = g
        .line_items
        .iter()
        .map(|l| serde_json::to_value(l).unwrap())
        .collect();
    json!({
        "decision": decision.as_str(),
        "confidence": 0.95,
        "predicted_probabilities": {latent.as_str(): 0.9, other.as_str(): 0.1},
        "reason_codes": codes,
        "fraud_flags": g.fraud_flags,
        "discrepancies": g.discrepancies,
        "campaign_signals": g.campaign_signals,
        "duplicate_links": g.duplicate_links,
        "cross_invoice_links": g.cross_invoice_links,
        "policy_checks": g.policy_checks,
        "evidence_map": evidence,
        "extracted_fields": g.fields,
        "line_items": line_items,
        "counterfactual": cf,
        "decision_certificate": {"certificate_version": "ledgershield-dcg-v1", "nodes": nodes, "edges": edges},
    })
    .as_object()
    .cloned()
    .unwrap()
}
