//! The submission's TrustGraph: case, invoice, vendor, decision, certificate, evidence, codes,
//! policies, artifacts and gates as nodes and edges, evaluated once.

use crate::certificate::{self, CertificateReport};
use crate::trust_graph::{AttrValue, Builder, EvalContext, NodeRef};
use crate::{normalized, GradingInput};
use ls_core::text::normalize_id;
use ls_core::validate::InvoiceFacts;
use ls_core::{Decision, ReasonCode};
use std::collections::BTreeSet;

/// What the TrustGraph reads besides the grading input.
pub(super) struct TrustGraphParts<'a> {
    /// Facts of the case's first invoice.
    pub(super) invoice: Option<&'a InvoiceFacts>,
    pub(super) certificate: &'a certificate::Certificate<'a>,
    pub(super) report: &'a CertificateReport,
    pub(super) revealed_ids: &'a BTreeSet<&'a str>,
    /// The agent's canonical reason codes.
    pub(super) codes: &'a [ReasonCode],
    pub(super) counterfactual: &'a str,
    pub(super) cert_required: bool,
}

/// A TrustGraph node id: `prefix` (which ends in `:`) then `rest` (as `format!`, without its
/// formatting machinery).
fn tg_id(prefix: &str, rest: &str) -> String {
    let mut id = String::with_capacity(prefix.len() + rest.len());
    id.push_str(prefix);
    id.push_str(rest);
    id
}

/// The first `n` characters of `s` (`s.chars().take(n).collect()`, copied as one slice).
fn first_chars(s: &str, n: usize) -> String {
    // A string of at most `n` bytes has at most `n` characters.
    let end = if s.len() <= n {
        s.len()
    } else {
        s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
    };
    s[..end].to_owned()
}

/// The nodes every graph starts from.
#[derive(Clone, Copy)]
struct Anchors {
    case: NodeRef,
    decision: NodeRef,
    certificate: NodeRef,
}

pub(super) fn build_trust_graph(
    input: &GradingInput<'_>,
    p: &TrustGraphParts<'_>,
) -> crate::trust_graph::TrustGraphReport {
    let mut g = Builder::default();
    let anchors = core_nodes(&mut g, input, p);
    document_nodes(&mut g, input, anchors);
    claim_nodes(&mut g, input, p, anchors.decision);
    gate_nodes(&mut g, input, anchors.decision);
    project_certificate(&mut g, p, anchors);
    g.finish(
        &input.case.case_id,
        &EvalContext {
            risky: input.hidden.risky,
            pay: input.submission.decision == Some(Decision::Pay),
            certificate_required: p.cert_required,
            authority_gate_present: input.authority_gate.is_some(),
        },
    )
}

/// The case, its first invoice, the vendor and its bank account, the decision and the
/// certificate.
fn core_nodes(g: &mut Builder, input: &GradingInput<'_>, p: &TrustGraphParts<'_>) -> Anchors {
    let case = input.case;
    let sub = input.submission;
    let cert = p.report;
    let facts = p.invoice;
    let case_n = g.node(
        tg_id("case:", &case.case_id),
        "Case",
        [("task_type", case.task_type.as_str().to_owned())],
    );
    let inv_no = facts
        .and_then(|f| f.invoice_number.as_deref())
        .unwrap_or(&case.case_id);
    let invoice = g.node(
        tg_id("invoice:", &normalize_id(inv_no)),
        "Invoice",
        [
            (
                "total",
                facts
                    .and_then(|f| f.total)
                    .map_or(AttrValue::Text(String::new()), AttrValue::Money),
            ),
            (
                "currency",
                facts
                    .and_then(|f| f.currency.clone())
                    .unwrap_or_default()
                    .into(),
            ),
        ],
    );
    g.edge(case_n, invoice, "contains");
    let vname = facts
        .map(|f| f.vendor_display.as_str())
        .filter(|v| !v.is_empty())
        .unwrap_or("unknown");
    let vendor = g.node(
        tg_id("vendor:", &normalize_id(vname)),
        "Vendor",
        [("name", vname.to_owned())],
    );
    g.edge(invoice, vendor, "invoice_issued_by_vendor");
    let decision = g.node(
        "decision:final",
        "Decision",
        [
            (
                "value",
                sub.decision
                    .map(|d| d.as_str().to_owned())
                    .unwrap_or_default()
                    .into(),
            ),
            (
                "confidence",
                sub.confidence
                    .filter(|c| c.is_finite())
                    .map_or(AttrValue::Text(String::new()), AttrValue::Number),
            ),
        ],
    );
    let cert_n = g.node(
        "certificate:decision",
        "Certificate",
        [
            ("valid", AttrValue::Flag(cert.valid)),
            ("score", AttrValue::Number(cert.overall_score)),
            ("auto_generated", AttrValue::Flag(cert.auto_generated)),
        ],
    );
    g.edge(cert_n, decision, "decision_supported_by_certificate");
    if let Some(bank) = facts.and_then(|f| f.bank_account.as_deref()) {
        let bn = g.node(
            tg_id("bank:", &normalize_id(bank)),
            "BankAccount",
            [("account", bank.to_owned())],
        );
        g.edge(vendor, bn, "vendor_uses_bank_account");
        g.edge(invoice, bn, "invoice_requests_payment_to");
    }
    Anchors {
        case: case_n,
        decision,
        certificate: cert_n,
    }
}

/// The case's documents; purchase orders, receipts and emails support the decision.
fn document_nodes(g: &mut Builder, input: &GradingInput<'_>, anchors: Anchors) {
    let Anchors {
        case: case_n,
        decision,
        ..
    } = anchors;
    let case = input.case;
    for d in &case.documents {
        let kind = match d.doc_type.as_str() {
            "invoice" => "InvoiceDocument",
            "purchase_order" | "po" => "PurchaseOrder",
            "receipt" => "Receipt",
            "email" => "Email",
            _ => "Document",
        };
        let dn = g.node(
            tg_id("document:", &d.doc_id),
            kind,
            [
                ("doc_id", d.doc_id.clone()),
                ("doc_type", d.doc_type.clone()),
            ],
        );
        g.edge(case_n, dn, "contains");
        if matches!(kind, "PurchaseOrder" | "Receipt" | "Email") {
            g.edge(dn, decision, "supports");
        }
    }
}

/// What the agent claims and revealed: evidence, risk codes, policy checks, artifacts, the
/// counterfactual; and the artifacts still pending.
fn claim_nodes(
    g: &mut Builder,
    input: &GradingInput<'_>,
    p: &TrustGraphParts<'_>,
    decision: NodeRef,
) {
    let sub = input.submission;
    for claim in sub.evidence_map.keys() {
        let en = g.node(
            tg_id("evidence:", &crate::slug(claim)),
            "Evidence",
            [("claim", claim.clone())],
        );
        g.edge(en, decision, "supports");
    }
    // One node per code, in spelling order (the node list's order reaches the report).
    let codes: BTreeSet<&'static str> = p.codes.iter().map(|c| c.as_str()).collect();
    for c in codes {
        let rn = g.node(tg_id("risk:", c), "RiskFlag", [("code", c.to_owned())]);
        g.edge(rn, decision, "flag_supports_decision");
    }
    for (name, status) in &sub.policy_checks {
        let pn = g.node(
            tg_id("policy:", &crate::slug(name)),
            "Policy",
            [("status", status.clone())],
        );
        g.edge(
            pn,
            decision,
            if normalized(status).contains("fail") {
                "violates"
            } else {
                "supports"
            },
        );
    }
    for a in p.revealed_ids {
        let an = g.node(
            tg_id("artifact:", &crate::slug(a)),
            "Evidence",
            [("artifact_id", (*a).to_owned())],
        );
        g.edge(an, decision, "supports");
    }
    let cf = p.counterfactual;
    if !cf.trim().is_empty() {
        let cn = g.node(
            "counterfactual:decision_flip",
            "Counterfactual",
            [("description", first_chars(cf, 200))],
        );
        g.edge(cn, decision, "would_flip");
    }
    for pending in input.pending_artifact_ids {
        let pn = g.node(
            tg_id("pending:", &crate::slug(pending.as_str())),
            "PendingArtifact",
            [("artifact_id", pending.as_str().to_owned())],
        );
        g.edge(pn, decision, "requires");
    }
}

/// The authority gate (where one governs) and the control boundary.
fn gate_nodes(g: &mut Builder, input: &GradingInput<'_>, decision: NodeRef) {
    if let Some(gate) = input.authority_gate {
        let lvl = if gate.authority_level.is_empty() {
            "active"
        } else {
            gate.authority_level.as_str()
        };
        let an = g.node(
            tg_id("authority_gate:", lvl),
            "AuthorityGate",
            [("blocking", gate.blocking)],
        );
        g.edge(
            an,
            decision,
            if gate.blocking {
                "blocked_by"
            } else {
                "governed_by"
            },
        );
    }
    let cb = &input.control_boundary;
    let bn = g.node(
        tg_id("control_boundary:", cb.phase.as_str()),
        "ControlBoundary",
        [
            ("blocking", AttrValue::Flag(cb.blocking)),
            ("reasons", AttrValue::Text(cb.reasons.join(","))),
        ],
    );
    g.edge(
        bn,
        decision,
        if cb.blocking {
            "blocked_by"
        } else {
            "reviewed_by"
        },
    );
}

/// The certificate's own nodes (claims support the decision) and edges, projected.
fn project_certificate(g: &mut Builder, p: &TrustGraphParts<'_>, anchors: Anchors) {
    let Anchors {
        decision,
        certificate: cert_n,
        ..
    } = anchors;
    let mut projected = Vec::new();
    for n in p.certificate.nodes.iter().take(64) {
        let kind = match n.kind {
            "artifact" => "CertificateArtifact",
            "observation" => "CertificateObservation",
            "hypothesis" => "CertificateClaim",
            "policy" => "CertificatePolicy",
            "intervention" => "CertificateIntervention",
            "decision" => "CertificateDecision",
            "counterfactual" => "CertificateCounterfactual",
            _ => "CertificateNode",
        };
        let id = g.node(
            tg_id("certificate_node:", &n.id),
            kind,
            [
                ("label", first_chars(&n.label, 160)),
                ("raw_type", n.kind.to_owned()),
            ],
        );
        g.edge(cert_n, id, "contains");
        if matches!(
            kind,
            "CertificateClaim" | "CertificatePolicy" | "CertificateCounterfactual"
        ) {
            g.edge(id, decision, "supports");
        }
        projected.push(id);
    }
    for e in p.certificate.edges.iter().take(128) {
        if let (Some(&s), Some(&t)) = (projected.get(e.source), projected.get(e.target)) {
            g.edge(s, t, e.kind);
        }
    }
}
