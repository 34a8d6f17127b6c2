//! TrustGraph: a compact typed projection of the terminal decision (case, invoice, vendor, bank,
//! documents, evidence, risk flags, policies, artifacts, certificate, authority, control boundary,
//! pending artifacts, counterfactual) and its evaluation.

use serde::Serialize;
use std::collections::BTreeMap;

pub const GRAPH_VERSION: &str = "ledgershield-trustgraph-v1";

/// A node attribute with its JSON type: text, a number, an amount (a JSON number with its exact
/// decimal text) or a flag.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Text(String),
    Number(f64),
    Money(rust_decimal::Decimal),
    Flag(bool),
}

impl AttrValue {
    /// The text of a text attribute.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(t) => Some(t),
            _ => None,
        }
    }
}

impl From<String> for AttrValue {
    fn from(v: String) -> Self {
        Self::Text(v)
    }
}

impl From<bool> for AttrValue {
    fn from(v: bool) -> Self {
        Self::Flag(v)
    }
}

impl From<f64> for AttrValue {
    fn from(v: f64) -> Self {
        Self::Number(v)
    }
}

impl Serialize for AttrValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Text(t) => s.serialize_str(t),
            Self::Number(v) => s.serialize_f64(*v),
            Self::Money(d) => ls_core::schema::money_number::serialize(d, s),
            Self::Flag(b) => s.serialize_bool(*b),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TgNode {
    pub id: String,
    /// One of the graph's fixed node types (`Decision`, `Vendor`, `Policy`, ...).
    pub node_type: &'static str,
    pub attributes: BTreeMap<&'static str, AttrValue>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TgEdge {
    pub source: String,
    pub target: String,
    /// One of the graph's fixed relations (`supports`, `governs`, ...).
    pub relation: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct TrustGraphEvaluation {
    pub score: f64,
    pub supported: bool,
    pub required_threshold: f64,
    pub reasons: Vec<String>,
    pub evidence_path_count: usize,
    pub policy_path_count: usize,
    pub certificate_linked: bool,
    pub certificate_claim_count: usize,
    pub authority_path_count: usize,
    pub pending_requirement_count: usize,
    pub counterfactual_present: bool,
    pub risk_flag_count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrustGraphReport {
    pub graph_version: String,
    pub case_id: String,
    pub node_count: usize,
    pub edge_count: usize,
    pub nodes: Vec<TgNode>,
    pub edges: Vec<TgEdge>,
    pub evaluation: TrustGraphEvaluation,
}

impl TrustGraphReport {
    /// Cap when unsupported with reasons.
    pub fn cap(&self, strict: bool) -> Option<f64> {
        let e = &self.evaluation;
        if e.supported || e.reasons.is_empty() {
            return None;
        }
        let mut cap: f64 = if strict { 0.72 } else { 0.84 };
        if e.score < 0.45 {
            cap = cap.min(if strict { 0.68 } else { 0.78 });
        }
        if e.reasons.iter().any(|r| {
            r == "trust_graph_missing_certificate_claims"
                || r == "trust_graph_missing_counterfactual"
        }) {
            cap = cap.min(if strict { 0.64 } else { 0.76 });
        }
        Some(cap)
    }
}

/// Handle of a node added to a [`Builder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRef(usize);

/// Builds the graph: nodes are deduplicated by id (the first one added keeps its type and
/// attributes), edges refer to nodes by handle until [`Builder::finish`] writes them out.
#[derive(Default)]
pub struct Builder {
    nodes: Vec<TgNode>,
    /// Indices into `nodes` sorted by id.
    by_id: Vec<usize>,
    edges: Vec<(usize, usize, &'static str)>,
}

impl Builder {
    pub fn node<V: Into<AttrValue>, const N: usize>(
        &mut self,
        id: impl Into<String>,
        kind: &'static str,
        attrs: [(&'static str, V); N],
    ) -> NodeRef {
        let id = id.into();
        match self.by_id.binary_search_by(|&j| self.nodes[j].id.cmp(&id)) {
            Ok(pos) => NodeRef(self.by_id[pos]),
            Err(pos) => {
                let i = self.nodes.len();
                // Inserted one by one: for one to three attributes this is cheaper than
                // `collect` (which buffers and sorts first); a repeated key keeps the last value
                // either way.
                let mut attributes = BTreeMap::new();
                for (k, v) in attrs {
                    attributes.insert(k, v.into());
                }
                self.nodes.push(TgNode {
                    id,
                    node_type: kind,
                    attributes,
                });
                self.by_id.insert(pos, i);
                NodeRef(i)
            }
        }
    }
    pub fn edge(&mut self, s: NodeRef, t: NodeRef, rel: &'static str) {
        self.edges.push((s.0, t.0, rel));
    }

    pub fn finish(self, case_id: &str, ctx: &EvalContext) -> TrustGraphReport {
        let evaluation = evaluate(&self, ctx);
        let edges = self
            .edges
            .iter()
            .map(|&(s, t, rel)| TgEdge {
                source: self.nodes[s].id.clone(),
                target: self.nodes[t].id.clone(),
                relation: rel,
            })
            .collect();
        TrustGraphReport {
            graph_version: GRAPH_VERSION.to_owned(),
            case_id: case_id.to_owned(),
            node_count: self.nodes.len(),
            edge_count: self.edges.len(),
            nodes: self.nodes,
            edges,
            evaluation,
        }
    }
}

pub struct EvalContext {
    pub risky: bool,
    pub pay: bool,
    pub certificate_required: bool,
    pub authority_gate_present: bool,
}

fn evaluate(g: &Builder, c: &EvalContext) -> TrustGraphEvaluation {
    let kind = |i: usize| g.nodes[i].node_type;
    let to_decision: Vec<(&str, &str)> = g
        .edges
        .iter()
        .filter(|e| kind(e.1) == "Decision")
        .map(|&(s, _, rel)| (kind(s), rel))
        .collect();
    let evidence = to_decision
        .iter()
        .filter(|(_, rel)| matches!(*rel, "supports" | "resolved_by" | "flag_supports_decision"))
        .count();
    let policy = to_decision
        .iter()
        .filter(|(src, _)| *src == "Policy")
        .count();
    let linked = to_decision
        .iter()
        .any(|(_, rel)| *rel == "decision_supported_by_certificate");
    let claims = to_decision
        .iter()
        .filter(|(src, _)| {
            matches!(
                *src,
                "CertificateClaim" | "CertificatePolicy" | "CertificateCounterfactual"
            )
        })
        .count();
    let authority = to_decision
        .iter()
        .filter(|(src, rel)| {
            matches!(*src, "Authority" | "AuthorityGate" | "ControlBoundary")
                || matches!(
                    *rel,
                    "governs" | "blocked_by" | "governed_by" | "reviewed_by"
                )
        })
        .count();
    let pending = to_decision
        .iter()
        .filter(|(src, rel)| *src == "PendingArtifact" || *rel == "requires")
        .count();
    let cf = g
        .nodes
        .iter()
        .any(|n| n.node_type == "Counterfactual" || n.node_type == "CertificateCounterfactual");
    let flags = g.nodes.iter().filter(|n| n.node_type == "RiskFlag").count();
    let strict = c.risky || c.certificate_required;
    let mut reasons = Vec::new();
    if g.nodes.len() < 5 {
        reasons.push("trust_graph_too_shallow");
    }
    if evidence == 0 && (c.risky || !c.pay) {
        reasons.push("trust_graph_missing_evidence_path");
    }
    if c.risky && flags == 0 {
        reasons.push("trust_graph_missing_risk_flag");
    }
    if c.certificate_required && !linked {
        reasons.push("trust_graph_missing_certificate_link");
    }
    if strict && claims == 0 {
        reasons.push("trust_graph_missing_certificate_claims");
    }
    if c.authority_gate_present && authority == 0 {
        reasons.push("trust_graph_missing_authority_path");
    }
    let injection = g.nodes.iter().any(|n| {
        n.attributes
            .get("code")
            .and_then(AttrValue::as_text)
            .is_some_and(|c| {
                ls_core::enums::ReasonCode::from_wire(c)
                    == Some(ls_core::enums::ReasonCode::PromptInjectionAttempt)
            })
    });
    if injection && !g.nodes.iter().any(|n| n.node_type == "ControlBoundary") {
        reasons.push("trust_graph_missing_control_boundary_path");
    }
    if c.pay && pending > 0 {
        reasons.push("trust_graph_ignores_pending_artifacts");
    }
    if c.risky && !cf {
        reasons.push("trust_graph_missing_counterfactual");
    }
    let b = |x: bool| f64::from(u8::from(x));
    let mut score = 0.20
        + 0.30 * (evidence as f64 / 3.0).min(1.0)
        + 0.15 * (policy as f64 / 2.0).min(1.0)
        + 0.10 * b(linked)
        + 0.10 * b(flags > 0 || !c.risky)
        + 0.05 * b(cf || !c.risky)
        + 0.10 * b(authority > 0 || !c.authority_gate_present)
        + 0.03
        + 0.02 * b(claims > 0 || !strict);
    let has = |r: &str| reasons.contains(&r);
    score -= 0.20 * b(has("trust_graph_too_shallow"))
        + 0.20 * b(has("trust_graph_missing_evidence_path"));
    score -= 0.10 * b(has("trust_graph_ignores_pending_artifacts"))
        + 0.08 * b(has("trust_graph_missing_certificate_claims"));
    score -= 0.05 * b(has("trust_graph_missing_counterfactual"));
    let score = crate::round4(score.clamp(0.0, 1.0));
    let threshold = if strict || c.authority_gate_present {
        0.6
    } else {
        0.45
    };
    TrustGraphEvaluation {
        score,
        supported: score >= threshold && reasons.is_empty(),
        required_threshold: threshold,
        reasons: reasons.into_iter().map(str::to_owned).collect(),
        evidence_path_count: evidence,
        policy_path_count: policy,
        certificate_linked: linked,
        certificate_claim_count: claims,
        authority_path_count: authority,
        pending_requirement_count: pending,
        counterfactual_present: cf,
        risk_flag_count: flags,
    }
}
