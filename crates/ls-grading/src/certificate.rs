//! Decision Certificate Graph (`ledgershield-dcg-v1`): parse, verify, synthesize.
//!
//! Grounding checks every reference against what the agent actually revealed this episode
//! (`GradingInput::revealed_refs` plus delivered artifact ids), never against the submission's own
//! evidence map. Contradictions must be answered; stability is a perturbation replay (remove each
//! evidence node and re-check the support path) instead of a comparison with the gold decision.

use ls_core::Decision;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

pub const CERTIFICATE_VERSION: &str = "ledgershield-dcg-v1";
pub const NODE_TYPES: [&str; 7] = ["artifact", "observation", "hypothesis", "policy", "intervention", "decision", "counterfactual"];
pub const EDGE_TYPES: [&str; 5] = ["supports", "contradicts", "requires", "violates", "would_flip"];
const MAX_NODES: usize = 256;
const MAX_EDGES: usize = 512;
const MAX_DEPTH: usize = 6;
const REF_KEYS: [&str; 9] = ["doc_id", "artifact_id", "token_id", "thread_id", "po_id", "receipt_id", "ledger_id", "vendor_key", "receipt"];

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: String,
    pub kind: String,
    pub label: String,
    pub value: String,
    pub reference: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub source: String,
    pub target: String,
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Certificate {
    pub version: Option<String>,
    pub auto_generated: bool,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct CertificateReport {
    pub present: bool,
    pub auto_generated: bool,
    /// Authored by the agent (not synthesized, not flagged auto-generated).
    pub agent_authored: bool,
    pub valid: bool,
    pub validity_score: f64,
    pub support_score: f64,
    pub stability_score: f64,
    pub robustness_score: f64,
    pub minimality_score: f64,
    pub grounding_score: f64,
    pub unsupported_claim_rate: f64,
    pub contradiction_count: usize,
    pub unresolved_contradictions: usize,
    pub node_count: usize,
    pub edge_count: usize,
    pub has_counterfactual: bool,
    pub has_policy: bool,
    pub overall_score: f64,
    pub ungrounded_references: Vec<String>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// References inside an agent-supplied reference value.
pub fn extract_refs(v: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>, depth: usize) {
        if depth > 8 || out.len() > 256 {
            return;
        }
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    if REF_KEYS.contains(&k.as_str()) {
                        if let Some(s) = x.as_str().map(str::trim).filter(|s| !s.is_empty()) {
                            out.push(s.to_owned());
                        }
                    } else if k == "token_ids" || k == "refs" || k == "references" {
                        if let Some(a) = x.as_array() {
                            out.extend(a.iter().filter_map(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned));
                        }
                    } else if x.is_object() || x.is_array() {
                        walk(x, out, depth + 1);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out, depth + 1)),
            Value::String(s) if depth == 0 && !s.trim().is_empty() => out.push(s.trim().to_owned()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out, 0);
    out
}

/// Parse; structural problems are returned as errors, never panics.
pub fn parse(v: &Value) -> (Certificate, Vec<String>, usize, usize, usize) {
    let mut errors = Vec::new();
    let mut cert = Certificate::default();
    let (mut invalid_nodes, mut duplicates, mut invalid_edges) = (0, 0, 0);
    let Some(o) = v.as_object() else {
        errors.push("certificate_not_an_object".to_owned());
        return (cert, errors, 0, 0, 0);
    };
    cert.version = o.get("certificate_version").and_then(Value::as_str).map(str::to_owned);
    cert.auto_generated = o.get("auto_generated").and_then(Value::as_bool).unwrap_or(false);
    match o.get("nodes").and_then(Value::as_array).filter(|a| !a.is_empty()) {
        None => errors.push("certificate_nodes_missing".to_owned()),
        Some(nodes) => {
            let mut index: BTreeMap<String, usize> = BTreeMap::new();
            for (i, n) in nodes.iter().take(MAX_NODES).enumerate() {
                let Some(no) = n.as_object() else {
                    invalid_nodes += 1;
                    continue;
                };
                let kind = ls_core::text::normalize_text(&text(no.get("type")));
                if !NODE_TYPES.contains(&kind.as_str()) {
                    invalid_nodes += 1;
                    continue;
                }
                let mut id = text(no.get("id"));
                if id.is_empty() {
                    id = format!("node-{}", i + 1);
                }
                let reference = no.get("ref").cloned().or_else(|| {
                    let direct: Map<String, Value> =
                        no.iter().filter(|(k, _)| REF_KEYS.contains(&k.as_str()) || *k == "token_ids").map(|(k, v)| (k.clone(), v.clone())).collect();
                    (!direct.is_empty()).then_some(Value::Object(direct))
                });
                let node = Node { id: id.clone(), kind, label: text(no.get("label")), value: text(no.get("value")), reference };
                if let Some(&pos) = index.get(&id) {
                    duplicates += 1;
                    cert.nodes[pos] = node;
                } else {
                    index.insert(id, cert.nodes.len());
                    cert.nodes.push(node);
                }
            }
            if nodes.len() > MAX_NODES {
                errors.push("certificate_too_many_nodes".to_owned());
            }
        }
    }
    match o.get("edges") {
        Some(Value::Array(edges)) => {
            let ids: BTreeSet<&str> = cert.nodes.iter().map(|n| n.id.as_str()).collect();
            let mut kept = Vec::new();
            for e in edges.iter().take(MAX_EDGES) {
                let Some(eo) = e.as_object() else {
                    invalid_edges += 1;
                    continue;
                };
                let (s, t, k) = (text(eo.get("source")), text(eo.get("target")), ls_core::text::normalize_text(&text(eo.get("type"))));
                if !ids.contains(s.as_str()) || !ids.contains(t.as_str()) || !EDGE_TYPES.contains(&k.as_str()) {
                    invalid_edges += 1;
                    continue;
                }
                kept.push(Edge { source: s, target: t, kind: k });
            }
            cert.edges = kept;
        }
        None | Some(Value::Null) if cert.nodes.len() <= 1 => {}
        _ => errors.push("certificate_edges_malformed".to_owned()),
    }
    (cert, errors, invalid_nodes, duplicates, invalid_edges)
}

fn is_evidence(kind: &str) -> bool {
    matches!(kind, "artifact" | "observation" | "intervention")
}
fn is_claim(kind: &str) -> bool {
    matches!(kind, "hypothesis" | "policy" | "decision" | "counterfactual")
}
fn supporting(kind: &str) -> bool {
    kind == "supports" || kind == "requires"
}

/// Is some decision node reachable from `start` along supporting edges, skipping `removed`?
fn reaches_decision(cert: &Certificate, start: &str, removed: Option<&str>, decisions: &BTreeSet<&str>) -> bool {
    let mut stack = vec![(start, 0usize)];
    let mut seen = BTreeSet::new();
    while let Some((n, d)) = stack.pop() {
        if Some(n) == removed || !seen.insert(n) {
            continue;
        }
        if decisions.contains(n) && n != start {
            return true;
        }
        if d >= MAX_DEPTH {
            continue;
        }
        for e in cert.edges.iter().filter(|e| e.source == n && supporting(&e.kind)) {
            stack.push((e.target.as_str(), d + 1));
        }
    }
    false
}

pub struct VerifyContext<'a> {
    pub decision: Option<Decision>,
    pub risky: bool,
    /// Everything the agent revealed (doc ids, token ids, artifact ids, looked-up record ids).
    pub revealed: &'a BTreeSet<String>,
    pub present: bool,
    pub agent_authored: bool,
}

pub fn verify(v: &Value, ctx: &VerifyContext<'_>) -> CertificateReport {
    let (cert, mut errors, invalid_nodes, duplicates, invalid_edges) = parse(v);
    let mut warnings = Vec::new();
    match cert.version.as_deref() {
        Some(CERTIFICATE_VERSION) => {}
        Some(other) => errors.push(format!("certificate_version_unsupported:{}", other.chars().take(40).collect::<String>())),
        None => warnings.push("certificate_version_missing".to_owned()),
    }
    if invalid_nodes > 0 {
        warnings.push(format!("invalid_node_types:{invalid_nodes}"));
    }
    if duplicates > 0 {
        warnings.push(format!("duplicate_node_ids:{duplicates}"));
    }
    if invalid_edges > 0 {
        warnings.push(format!("invalid_edges:{invalid_edges}"));
    }
    let decisions: BTreeSet<&str> = cert.nodes.iter().filter(|n| n.kind == "decision").map(|n| n.id.as_str()).collect();
    let mut mismatch = false;
    if !cert.nodes.is_empty() && decisions.is_empty() {
        errors.push("decision_node_missing".to_owned());
    }
    if !decisions.is_empty() {
        let submitted = ctx.decision.map(|d| d.as_str()).unwrap_or("");
        let matches = cert.nodes.iter().filter(|n| n.kind == "decision").any(|n| {
            let v = if n.value.is_empty() { &n.label } else { &n.value };
            Decision::parse_lenient(v).map(|d| d.as_str()) == Some(submitted)
        });
        if !matches {
            mismatch = true;
            errors.push("decision_mismatch".to_owned());
        }
    }
    // Policy handling: a policy the certificate itself says is violated cannot support a PAY.
    let violated_policy = cert.edges.iter().any(|e| e.kind == "violates" && decisions.contains(e.target.as_str()));
    if violated_policy && ctx.decision == Some(Decision::Pay) {
        errors.push("policy_violation_supports_pay".to_owned());
    }
    // Contradictions: answered when the contradicted node has more support than contradiction,
    // or a policy node governs it.
    let kind_of: BTreeMap<&str, &str> = cert.nodes.iter().map(|n| (n.id.as_str(), n.kind.as_str())).collect();
    let contradictions: Vec<&Edge> = cert.edges.iter().filter(|e| e.kind == "contradicts").collect();
    let unresolved = contradictions
        .iter()
        .filter(|c| {
            let support = cert.edges.iter().filter(|e| e.target == c.target && supporting(&e.kind)).count();
            let against = cert.edges.iter().filter(|e| e.target == c.target && e.kind == "contradicts").count();
            let policy = cert.edges.iter().any(|e| e.target == c.target && kind_of.get(e.source.as_str()) == Some(&"policy"));
            let rebutted = cert.edges.iter().any(|e| e.target == c.source && e.kind == "contradicts");
            !(support > against || policy || rebutted)
        })
        .count();
    if unresolved > 0 {
        warnings.push(format!("unresolved_contradictions:{unresolved}"));
    }
    // Support paths from evidence nodes to a decision.
    let evidence: Vec<&Node> = cert.nodes.iter().filter(|n| is_evidence(&n.kind)).collect();
    let with_path = evidence.iter().filter(|n| reaches_decision(&cert, &n.id, None, &decisions)).count();
    let support = with_path as f64 / evidence.len().max(1) as f64;
    // Perturbation replay: the decision stays supported after removing any single evidence node.
    let robustness = if evidence.len() < 2 {
        0.0
    } else {
        let ok = evidence
            .iter()
            .filter(|removed| evidence.iter().any(|n| n.id != removed.id && reaches_decision(&cert, &n.id, Some(&removed.id), &decisions)))
            .count();
        ok as f64 / evidence.len() as f64
    };
    // Unsupported claims.
    let claims: Vec<&Node> = cert.nodes.iter().filter(|n| is_claim(&n.kind)).collect();
    let unsupported =
        claims.iter().filter(|n| n.kind != "decision" && !cert.edges.iter().any(|e| e.target == n.id && supporting(&e.kind))).count();
    let unsupported_rate = unsupported as f64 / claims.len().max(1) as f64;
    // Grounding against revealed references.
    let mut total_refs = 0usize;
    let mut ungrounded = Vec::new();
    for n in &cert.nodes {
        if let Some(r) = &n.reference {
            for x in extract_refs(r) {
                total_refs += 1;
                if !ctx.revealed.contains(&x) {
                    ungrounded.push(x);
                }
            }
        }
    }
    ungrounded.sort();
    ungrounded.dedup();
    let ungrounded_count = ungrounded.len();
    if ungrounded_count > 0 {
        warnings.push(format!("ungrounded_references:{ungrounded_count}"));
    }
    let grounding = if total_refs == 0 { if evidence.is_empty() { 1.0 } else { 0.0 } } else { 1.0 - ungrounded_count.min(total_refs) as f64 / total_refs as f64 };
    if total_refs == 0 && !evidence.is_empty() {
        warnings.push("evidence_nodes_without_references".to_owned());
    }
    let has_cf = cert.nodes.iter().any(|n| n.kind == "counterfactual");
    let has_policy = cert.nodes.iter().any(|n| n.kind == "policy");
    let has_intervention = cert.nodes.iter().any(|n| n.kind == "intervention");
    if ctx.risky && !has_cf {
        warnings.push("counterfactual_missing_on_risky_case".to_owned());
    }
    let stability = 0.40 * robustness
        + 0.25 * f64::from(u8::from(has_cf || !ctx.risky))
        + 0.20 * f64::from(u8::from(has_policy || ctx.decision == Some(Decision::Pay)))
        + 0.15 * f64::from(u8::from(has_intervention || !ctx.risky));
    let mut minimality: f64 = 1.0;
    if cert.nodes.len() > 34 {
        minimality -= (0.015 * (cert.nodes.len() - 34) as f64).min(0.35);
    }
    if cert.edges.len() > 48 {
        minimality -= (0.01 * (cert.edges.len() - 48) as f64).min(0.25);
    }
    let validity = if cert.nodes.is_empty() {
        0.0
    } else {
        (1.0 - 0.12 * errors.len() as f64
            - 0.03 * duplicates as f64
            - 0.02 * invalid_edges as f64
            - (0.03 * ungrounded_count as f64).min(0.15)
            - (0.05 * unresolved as f64).min(0.15))
        .max(0.0)
    };
    let overall = (0.32 * validity + 0.30 * support + 0.25 * stability + 0.13 * minimality.max(0.0) - 0.18 * unsupported_rate).clamp(0.0, 1.0);
    let r = crate::round4;
    CertificateReport {
        present: ctx.present,
        auto_generated: !ctx.agent_authored,
        agent_authored: ctx.agent_authored,
        valid: validity >= 0.70 && unsupported_rate <= 0.40 && !mismatch,
        validity_score: r(validity),
        support_score: r(support),
        stability_score: r(stability),
        robustness_score: r(robustness),
        minimality_score: r(minimality.max(0.0)),
        grounding_score: r(grounding),
        unsupported_claim_rate: r(unsupported_rate),
        contradiction_count: contradictions.len(),
        unresolved_contradictions: unresolved,
        node_count: cert.nodes.len(),
        edge_count: v.get("edges").and_then(Value::as_array).map_or(0, Vec::len),
        has_counterfactual: has_cf,
        has_policy,
        overall_score: r(overall),
        ungrounded_references: ungrounded.into_iter().take(20).collect(),
        errors,
        warnings,
    }
}

/// Adjustment for agent-authored certificates: +0.01 when strong and valid, −0.03 when weak or
/// invalid, 0 otherwise and for synthesized certificates.
pub fn adjustment(r: &CertificateReport) -> f64 {
    if !r.agent_authored {
        0.0
    } else if r.overall_score >= 0.82 && r.valid {
        0.01
    } else if r.overall_score < 0.45 || !r.valid {
        -0.03
    } else {
        0.0
    }
}

fn slug_id(s: &str) -> String {
    let sl = ls_core::text::slug(s);
    if sl.is_empty() {
        "item".to_owned()
    } else {
        sl.chars().take(80).collect()
    }
}

/// Inputs for the compatibility certificate of a legacy submission.
pub struct SynthesisInput<'a> {
    pub submission: &'a ls_core::Submission,
    pub trajectory: &'a [ls_core::episode::TrajectoryEntry],
    pub revealed_artifact_ids: Vec<String>,
}

/// Diagnostic certificate built from the regular submission fields (10.5 of the spec).
pub fn synthesize(i: &SynthesisInput<'_>) -> Value {
    let s = i.submission;
    let mut nodes: Vec<Value> = Vec::new();
    let mut edges: Vec<Value> = Vec::new();
    let mut ids = BTreeSet::new();
    let mut add = |nodes: &mut Vec<Value>, id: String, kind: &str, label: String, extra: Option<(&str, Value)>| -> String {
        let mut id2 = id.clone();
        let mut k = 2;
        while !ids.insert(id2.clone()) {
            id2 = format!("{id}-{k}");
            k += 1;
        }
        let mut o = Map::new();
        o.insert("id".into(), Value::String(id2.clone()));
        o.insert("type".into(), Value::String(kind.into()));
        o.insert("label".into(), Value::String(label.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(160).collect()));
        if let Some((k, v)) = extra {
            o.insert(k.into(), v);
        }
        nodes.push(Value::Object(o));
        id2
    };
    let edge = |edges: &mut Vec<Value>, s: &str, t: &str, k: &str| edges.push(serde_json::json!({"source": s, "target": t, "type": k}));
    let decision = s.decision.map(|d| d.as_str()).unwrap_or("NEEDS_REVIEW");
    let dec = add(&mut nodes, "decision.final".into(), "decision", decision.into(), Some(("value", Value::String(decision.into()))));
    let mut evidence_ids = Vec::new();
    for (claim, reference) in &s.evidence_map {
        let id = add(&mut nodes, format!("evidence.{}", slug_id(claim)), "observation", claim.clone(), Some(("ref", reference.clone())));
        edge(&mut edges, &id, &dec, "supports");
        evidence_ids.push(id);
    }
    let lists = [("hypothesis", &s.reason_codes), ("fraud_flag", &s.fraud_flags), ("campaign_signal", &s.campaign_signals)];
    for (prefix, list) in lists {
        for (idx, code) in list.iter().flatten().enumerate() {
            let id = add(&mut nodes, format!("{prefix}.{}", slug_id(code)), "hypothesis", code.clone(), None);
            if !evidence_ids.is_empty() {
                edge(&mut edges, &evidence_ids[idx.min(evidence_ids.len() - 1)], &id, "supports");
            }
            edge(&mut edges, &id, &dec, "supports");
        }
    }
    for (idx, (name, status)) in s.policy_checks.iter().enumerate() {
        let id = add(&mut nodes, format!("policy.{}", slug_id(name)), "policy", format!("{name}: {status}"), None);
        if !evidence_ids.is_empty() {
            edge(&mut edges, &evidence_ids[idx.min(evidence_ids.len() - 1)], &id, "supports");
        }
        let st = ls_core::text::normalize_text(status);
        edge(&mut edges, &id, &dec, if st.contains("fail") || st.contains("breach") { "violates" } else { "supports" });
    }
    for (idx, t) in i.trajectory.iter().enumerate() {
        if ls_core::ActionName::parse(&t.action_type).is_some_and(|a| a.is_intervention()) {
            let id = add(&mut nodes, format!("intervention.{}.{}", idx + 1, slug_id(&t.action_type)), "intervention", t.action_type.clone(), None);
            edge(&mut edges, &id, &dec, "supports");
        }
    }
    for a in &i.revealed_artifact_ids {
        let id = add(&mut nodes, format!("artifact.{}", slug_id(a)), "artifact", a.clone(), Some(("ref", serde_json::json!({"artifact_id": a}))));
        edge(&mut edges, &id, &dec, "supports");
    }
    let cf = s.counterfactual_text();
    if !cf.trim().is_empty() {
        let id = add(&mut nodes, "counterfactual.primary".into(), "counterfactual", cf, None);
        if let Some(first) = evidence_ids.first() {
            edge(&mut edges, first, &id, "supports");
        }
        edge(&mut edges, &id, &dec, "would_flip");
    }
    serde_json::json!({
        "certificate_version": CERTIFICATE_VERSION,
        "decision": decision,
        "auto_generated": true,
        "nodes": nodes,
        "edges": edges,
        "metadata": {"source": "legacy_submission_bridge"},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(revealed: &BTreeSet<String>) -> VerifyContext<'_> {
        VerifyContext { decision: Some(Decision::EscalateFraud), risky: true, revealed, present: true, agent_authored: true }
    }

    fn good() -> Value {
        json!({
            "certificate_version": CERTIFICATE_VERSION,
            "nodes": [
                {"id": "e1", "type": "observation", "ref": {"doc_id": "THR-1", "token_ids": ["t1"]}},
                {"id": "e2", "type": "artifact", "ref": {"artifact_id": "callback_verification_result"}},
                {"id": "h", "type": "hypothesis", "label": "sender_domain_spoof"},
                {"id": "p", "type": "policy", "label": "bank_change_verification: fail"},
                {"id": "cf", "type": "counterfactual", "label": "would pay if the domain matched"},
                {"id": "i", "type": "intervention", "label": "callback"},
                {"id": "d", "type": "decision", "value": "ESCALATE_FRAUD"}
            ],
            "edges": [
                {"source": "e1", "target": "h", "type": "supports"},
                {"source": "e2", "target": "h", "type": "supports"},
                {"source": "h", "target": "d", "type": "supports"},
                {"source": "e1", "target": "p", "type": "supports"},
                {"source": "p", "target": "d", "type": "supports"},
                {"source": "e2", "target": "cf", "type": "supports"},
                {"source": "cf", "target": "d", "type": "would_flip"},
                {"source": "i", "target": "d", "type": "supports"}
            ]
        })
    }

    #[test]
    fn grounded_certificate_is_valid_and_ungrounded_refs_count() {
        let revealed: BTreeSet<String> = ["THR-1", "t1", "callback_verification_result"].iter().map(|s| (*s).to_owned()).collect();
        let r = verify(&good(), &ctx(&revealed));
        assert!(r.valid, "{r:?}");
        assert!(r.overall_score >= 0.82, "{r:?}");
        assert_eq!(r.grounding_score, 1.0);
        assert_eq!(adjustment(&r), 0.01);
        // Only the document was revealed: the token and the artifact are ungrounded.
        let few = BTreeSet::from(["THR-1".to_owned()]);
        let r = verify(&good(), &ctx(&few));
        assert_eq!(r.ungrounded_references.len(), 2);
        assert!(r.grounding_score < 1.0);
    }

    #[test]
    fn malformed_and_mismatched_certificates() {
        let revealed = BTreeSet::new();
        let r = verify(&json!({"nodes": "x"}), &ctx(&revealed));
        assert!(!r.valid && r.errors.contains(&"certificate_nodes_missing".to_owned()));
        assert_eq!(adjustment(&r), -0.03);
        let mut c = good();
        c["nodes"][6]["value"] = json!("PAY");
        let r = verify(&c, &ctx(&revealed));
        assert!(r.errors.contains(&"decision_mismatch".to_owned()) && !r.valid);
    }

    #[test]
    fn unanswered_contradiction_is_flagged() {
        let revealed = BTreeSet::new();
        let c = json!({
            "certificate_version": CERTIFICATE_VERSION,
            "nodes": [{"id": "e", "type": "observation"}, {"id": "x", "type": "observation"}, {"id": "d", "type": "decision", "value": "ESCALATE_FRAUD"}],
            "edges": [{"source": "x", "target": "d", "type": "contradicts"}, {"source": "e", "target": "d", "type": "contradicts"}]
        });
        let r = verify(&c, &ctx(&revealed));
        assert_eq!((r.contradiction_count, r.unresolved_contradictions), (2, 2));
    }
}
