//! Decision Certificate Graph (`ledgershield-dcg-v1`): parse, verify, synthesize.
//!
//! Grounding checks every reference against what the agent actually revealed this episode
//! (`GradingInput::revealed_refs` plus delivered artifact ids), never against the submission's own
//! evidence map. Contradictions must be answered; stability is a perturbation replay (remove each
//! evidence node and re-check the support path) instead of a comparison with the gold decision.
//!
//! The graph types and the parse are `ls_core::certificate`'s: a submitted certificate is parsed
//! once with the payload (`ls_core::DecisionCertificate`); for a legacy submission grading
//! synthesizes one directly in parsed form, and shares it with the TrustGraph.

use ls_core::Decision;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeSet;

pub use ls_core::certificate::{
    parse, Certificate, Edge, Node, Parsed, CERTIFICATE_VERSION, EDGE_TYPES, NODE_TYPES,
};
use ls_core::certificate::{MAX_EDGES, MAX_NODES};
const MAX_DEPTH: usize = 6;

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

fn is_evidence(kind: &str) -> bool {
    matches!(kind, "artifact" | "observation" | "intervention")
}
fn is_claim(kind: &str) -> bool {
    matches!(
        kind,
        "hypothesis" | "policy" | "decision" | "counterfactual"
    )
}
fn supporting(kind: &str) -> bool {
    kind == "supports" || kind == "requires"
}

/// Supporting out-edges of every node (targets in edge order), for the support-path search.
struct SupportGraph {
    succ: Vec<Vec<usize>>,
    is_decision: Vec<bool>,
}

impl SupportGraph {
    fn new(cert: &Certificate<'_>) -> Self {
        let mut succ = vec![Vec::new(); cert.nodes.len()];
        for e in cert.edges.iter().filter(|e| supporting(e.kind)) {
            succ[e.source].push(e.target);
        }
        SupportGraph {
            succ,
            is_decision: cert.nodes.iter().map(|n| n.kind == "decision").collect(),
        }
    }

    /// Is some decision node reachable from `start` along supporting edges, skipping `removed`?
    /// Depth-first with the first visit of a node final: the same walk as over the edge list.
    fn reaches_decision(
        &self,
        start: usize,
        removed: Option<usize>,
        seen: &mut [bool],
        stack: &mut Vec<(usize, usize)>,
    ) -> bool {
        seen.fill(false);
        stack.clear();
        stack.push((start, 0));
        while let Some((n, d)) = stack.pop() {
            if Some(n) == removed || std::mem::replace(&mut seen[n], true) {
                continue;
            }
            if self.is_decision[n] && n != start {
                return true;
            }
            if d >= MAX_DEPTH {
                continue;
            }
            stack.extend(self.succ[n].iter().map(|&t| (t, d + 1)));
        }
        false
    }
}

/// What the agent revealed: the episode's references plus the ids of delivered artifacts, looked
/// up in both rather than merged into one set.
#[derive(Debug, Clone, Copy)]
pub struct Revealed<'a> {
    pub refs: &'a crate::RefSet,
    pub artifacts: &'a BTreeSet<&'a str>,
}

static NO_ARTIFACTS: BTreeSet<&str> = BTreeSet::new();

impl<'a> Revealed<'a> {
    /// Just `refs` (no separately delivered artifacts).
    pub fn refs(refs: &'a crate::RefSet) -> Self {
        Revealed {
            refs,
            artifacts: &NO_ARTIFACTS,
        }
    }
    pub fn contains(&self, r: &str) -> bool {
        self.refs.contains(r) || self.artifacts.contains(r)
    }
}

pub struct VerifyContext<'a> {
    pub decision: Option<Decision>,
    pub risky: bool,
    /// Everything the agent revealed (doc ids, token ids, artifact ids, looked-up record ids).
    pub revealed: Revealed<'a>,
    pub present: bool,
    pub agent_authored: bool,
}

/// Parse and verify a certificate's JSON (the tests' entry; grading verifies the certificate
/// parsed once with the submission, [`verify_parsed`]).
#[cfg(test)]
fn verify(v: &Value, ctx: &VerifyContext<'_>) -> CertificateReport {
    verify_parsed(&parse(v), ctx)
}

pub fn verify_parsed(p: &Parsed<'_>, ctx: &VerifyContext<'_>) -> CertificateReport {
    let cert = &p.cert;
    let mut errors = p.errors.clone();
    let mut warnings = Vec::new();
    let form = check_form(p, ctx, &mut errors, &mut warnings);
    let (contradictions, unresolved) = contradictions(cert);
    if unresolved > 0 {
        warnings.push(format!("unresolved_contradictions:{unresolved}"));
    }
    let paths = support_paths(cert);
    let unsupported_rate = unsupported_claim_rate(cert);
    let grounding = Grounding::of(cert, ctx, paths.evidence == 0);
    if !grounding.ungrounded.is_empty() {
        warnings.push(format!(
            "ungrounded_references:{}",
            grounding.ungrounded.len()
        ));
    }
    if grounding.total_refs == 0 && paths.evidence > 0 {
        warnings.push("evidence_nodes_without_references".to_owned());
    }
    let has = |kind: &str| cert.nodes.iter().any(|n| n.kind == kind);
    let (has_cf, has_policy) = (has("counterfactual"), has("policy"));
    if ctx.risky && !has_cf {
        warnings.push("counterfactual_missing_on_risky_case".to_owned());
    }
    let stability = 0.40 * paths.robustness
        + 0.25 * f64::from(u8::from(has_cf || !ctx.risky))
        + 0.20 * f64::from(u8::from(has_policy || ctx.decision == Some(Decision::Pay)))
        + 0.15 * f64::from(u8::from(has("intervention") || !ctx.risky));
    let minimality = minimality(cert);
    let ungrounded_count = grounding.ungrounded.len();
    let validity = if cert.nodes.is_empty() {
        0.0
    } else {
        (1.0 - 0.12 * errors.len() as f64
            - 0.03 * p.duplicates as f64
            - 0.02 * p.invalid_edges as f64
            - (0.03 * ungrounded_count as f64).min(0.15)
            - (0.05 * unresolved as f64).min(0.15))
        .max(0.0)
    };
    let overall = (0.32 * validity + 0.30 * paths.support + 0.25 * stability + 0.13 * minimality
        - 0.18 * unsupported_rate)
        .clamp(0.0, 1.0);
    for (name, score) in [
        ("support", paths.support),
        ("robustness", paths.robustness),
        ("stability", stability),
        ("minimality", minimality),
        ("validity", validity),
        ("grounding", grounding.score),
        ("unsupported_rate", unsupported_rate),
    ] {
        debug_assert!(
            (0.0..=1.0).contains(&score),
            "{name} {score} outside [0, 1]"
        );
    }
    let r = crate::round4;
    CertificateReport {
        present: ctx.present,
        auto_generated: !ctx.agent_authored,
        agent_authored: ctx.agent_authored,
        // A certificate of another version, or one citing anything the agent did not reveal, is
        // not a proof of this episode's reasoning, however well formed.
        valid: validity >= 0.70
            && unsupported_rate <= 0.40
            && !form.mismatch
            && !form.wrong_version
            && ungrounded_count == 0,
        validity_score: r(validity),
        support_score: r(paths.support),
        stability_score: r(stability),
        robustness_score: r(paths.robustness),
        minimality_score: r(minimality),
        grounding_score: r(grounding.score),
        unsupported_claim_rate: r(unsupported_rate),
        contradiction_count: contradictions,
        unresolved_contradictions: unresolved,
        node_count: cert.nodes.len(),
        edge_count: p.raw_edge_count,
        has_counterfactual: has_cf,
        has_policy,
        overall_score: r(overall),
        ungrounded_references: grounding
            .ungrounded
            .into_iter()
            .take(20)
            .map(str::to_owned)
            .collect(),
        errors,
        warnings,
    }
}

/// What the form checks found that the verdict reads besides the error count.
struct Form {
    wrong_version: bool,
    /// No decision node names the submitted decision.
    mismatch: bool,
}

/// The certificate's form: its version, the parse counts, a decision node naming the submitted
/// decision, and no policy the certificate says is violated supporting a PAY.
fn check_form(
    p: &Parsed<'_>,
    ctx: &VerifyContext<'_>,
    errors: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Form {
    let cert = &p.cert;
    let wrong_version = match cert.version.as_deref() {
        Some(CERTIFICATE_VERSION) => false,
        Some(other) => {
            errors.push(format!(
                "certificate_version_unsupported:{}",
                other.chars().take(40).collect::<String>()
            ));
            true
        }
        None => {
            warnings.push("certificate_version_missing".to_owned());
            false
        }
    };
    for (count, what) in [
        (p.invalid_nodes, "invalid_node_types"),
        (p.duplicates, "duplicate_node_ids"),
        (p.invalid_edges, "invalid_edges"),
    ] {
        if count > 0 {
            warnings.push(format!("{what}:{count}"));
        }
    }
    let is_decision = |i: usize| cert.nodes[i].kind == "decision";
    let has_decision = cert.nodes.iter().any(|n| n.kind == "decision");
    let mut mismatch = false;
    if !cert.nodes.is_empty() && !has_decision {
        errors.push("decision_node_missing".to_owned());
    }
    if has_decision {
        let names_submitted = cert.nodes.iter().filter(|n| n.kind == "decision").any(|n| {
            let v = if n.value.is_empty() {
                &n.label
            } else {
                &n.value
            };
            Decision::parse_lenient(v).is_some_and(|d| Some(d) == ctx.decision)
        });
        if !names_submitted {
            mismatch = true;
            errors.push("decision_mismatch".to_owned());
        }
    }
    // Policy handling: a policy the certificate itself says is violated cannot support a PAY.
    let violated_policy = cert
        .edges
        .iter()
        .any(|e| e.kind == "violates" && is_decision(e.target));
    if violated_policy && ctx.decision == Some(Decision::Pay) {
        errors.push("policy_violation_supports_pay".to_owned());
    }
    Form {
        wrong_version,
        mismatch,
    }
}

/// Contradiction edges, and how many are unanswered: a contradiction is answered when the
/// contradicted node has more support than contradiction, a policy node governs it, or its
/// source is itself contradicted.
fn contradictions(cert: &Certificate<'_>) -> (usize, usize) {
    let contradictions: Vec<&Edge> = cert
        .edges
        .iter()
        .filter(|e| e.kind == "contradicts")
        .collect();
    let unresolved = contradictions
        .iter()
        .filter(|c| {
            let support = cert
                .edges
                .iter()
                .filter(|e| e.target == c.target && supporting(e.kind))
                .count();
            let against = cert
                .edges
                .iter()
                .filter(|e| e.target == c.target && e.kind == "contradicts")
                .count();
            let policy = cert
                .edges
                .iter()
                .any(|e| e.target == c.target && cert.nodes[e.source].kind == "policy");
            let rebutted = cert
                .edges
                .iter()
                .any(|e| e.target == c.source && e.kind == "contradicts");
            !(support > against || policy || rebutted)
        })
        .count();
    (contradictions.len(), unresolved)
}

/// Support paths from evidence nodes to a decision.
struct SupportPaths {
    /// Evidence nodes.
    evidence: usize,
    /// Share of evidence nodes with a path to a decision.
    support: f64,
    /// Share of evidence nodes whose removal leaves the decision supported (0 under two).
    robustness: f64,
}

fn support_paths(cert: &Certificate<'_>) -> SupportPaths {
    let graph = SupportGraph::new(cert);
    let (mut seen, mut stack) = (vec![false; cert.nodes.len()], Vec::new());
    let mut reaches = |start: usize, removed: Option<usize>| {
        graph.reaches_decision(start, removed, &mut seen, &mut stack)
    };
    let evidence: Vec<usize> = (0..cert.nodes.len())
        .filter(|&i| is_evidence(cert.nodes[i].kind))
        .collect();
    let with_path = evidence.iter().filter(|&&n| reaches(n, None)).count();
    let support = with_path as f64 / evidence.len().max(1) as f64;
    // Perturbation replay: the decision stays supported after removing any single evidence node.
    let robustness = if evidence.len() < 2 {
        0.0
    } else {
        let ok = evidence
            .iter()
            .filter(|&&removed| {
                evidence
                    .iter()
                    .any(|&n| n != removed && reaches(n, Some(removed)))
            })
            .count();
        ok as f64 / evidence.len() as f64
    };
    SupportPaths {
        evidence: evidence.len(),
        support,
        robustness,
    }
}

/// Share of claim nodes (other than decisions) without a supporting edge into them.
fn unsupported_claim_rate(cert: &Certificate<'_>) -> f64 {
    let mut supported_in = vec![false; cert.nodes.len()];
    for e in cert.edges.iter().filter(|e| supporting(e.kind)) {
        supported_in[e.target] = true;
    }
    let claims = cert.nodes.iter().filter(|n| is_claim(n.kind)).count();
    let unsupported = cert
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, n)| is_claim(n.kind) && n.kind != "decision" && !supported_in[*i])
        .count();
    unsupported as f64 / claims.max(1) as f64
}

/// The certificate's references against what the agent revealed.
struct Grounding<'c> {
    total_refs: usize,
    /// References the agent did not reveal, sorted and unique.
    ungrounded: Vec<&'c str>,
    score: f64,
}

impl<'c> Grounding<'c> {
    fn of(cert: &'c Certificate<'_>, ctx: &VerifyContext<'_>, no_evidence: bool) -> Self {
        let mut total_refs = 0usize;
        let mut ungrounded: Vec<&str> = Vec::new();
        for r in cert.nodes.iter().filter_map(|n| n.reference.as_deref()) {
            for x in ls_core::submitted::json_refs(r) {
                total_refs += 1;
                if !ctx.revealed.contains(x) {
                    ungrounded.push(x);
                }
            }
        }
        ungrounded.sort_unstable();
        ungrounded.dedup();
        let score = if total_refs == 0 {
            if no_evidence {
                1.0
            } else {
                0.0
            }
        } else {
            1.0 - ungrounded.len().min(total_refs) as f64 / total_refs as f64
        };
        Self {
            total_refs,
            ungrounded,
            score,
        }
    }
}

/// 1 for a certificate within 34 nodes and 48 edges, less for each one beyond (at least 0).
fn minimality(cert: &Certificate<'_>) -> f64 {
    let mut minimality: f64 = 1.0;
    if cert.nodes.len() > 34 {
        minimality -= (0.015 * (cert.nodes.len() - 34) as f64).min(0.35);
    }
    if cert.edges.len() > 48 {
        minimality -= (0.01 * (cert.edges.len() - 48) as f64).min(0.25);
    }
    minimality.max(0.0)
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

/// `{prefix}.{slug of name}` (the slug cut to 80 characters, `item` when empty).
fn slug_node_id(prefix: &str, name: &str) -> String {
    let sl = crate::slug(name);
    let mut id = String::with_capacity(prefix.len() + 1 + sl.len().max(4));
    id.push_str(prefix);
    id.push('.');
    if sl.is_empty() {
        id.push_str("item");
    } else {
        id.extend(sl.chars().take(80));
    }
    id
}

/// A node label: whitespace runs collapsed to single spaces, at most 160 characters.
fn label_text(label: &str) -> Cow<'_, str> {
    let b = label.as_bytes();
    let simple = b.len() <= 160
        && b.iter().enumerate().all(|(i, &c)| {
            if c == b' ' {
                i > 0 && i + 1 < b.len() && b[i - 1] != b' '
            } else {
                c.is_ascii() && !char::from(c).is_whitespace()
            }
        });
    if simple {
        Cow::Borrowed(label)
    } else {
        Cow::Owned(
            label
                .split_whitespace()
                .flat_map(|w| std::iter::once(' ').chain(w.chars()))
                .skip(1)
                .take(160)
                .collect(),
        )
    }
}

/// Inputs for the compatibility certificate of a legacy submission.
pub struct SynthesisInput<'a> {
    pub submission: &'a ls_core::Submission,
    pub trajectory: &'a [ls_core::episode::TrajectoryEntry],
    pub revealed_artifact_ids: Vec<&'a str>,
    /// `submission.counterfactual_text()`.
    pub counterfactual: &'a str,
}

/// A synthesized node as written into the certificate JSON.
struct SynthNode<'a> {
    id: String,
    kind: &'static str,
    /// Whitespace collapsed, at most 160 characters (not trimmed: parsing trims).
    label: Cow<'a, str>,
    value: Option<&'static str>,
    reference: Option<Cow<'a, Value>>,
}

/// The synthesized certificate before it is rendered as JSON or read as a parsed certificate.
struct Synthesized<'a> {
    nodes: Vec<SynthNode<'a>>,
    /// (source node, target node, type) in writing order.
    edges: Vec<(usize, usize, &'static str)>,
}

impl<'a> Synthesized<'a> {
    fn build(i: &SynthesisInput<'a>) -> Self {
        let s = i.submission;
        let decision = s.decision.map(|d| d.as_str()).unwrap_or("NEEDS_REVIEW");
        let mut out = Synthesized {
            nodes: Vec::new(),
            edges: Vec::new(),
        };
        let mut ids = BTreeSet::new();
        let mut add = |out: &mut Synthesized<'a>,
                       id: String,
                       kind: &'static str,
                       label: Cow<'a, str>,
                       reference: Option<Cow<'a, Value>>|
         -> usize {
            let mut unique = id.clone();
            let mut k = 2;
            while !ids.insert(unique.clone()) {
                unique = format!("{id}-{k}");
                k += 1;
            }
            let label = match label {
                Cow::Borrowed(l) => label_text(l),
                Cow::Owned(l) => Cow::Owned(label_text(&l).into_owned()),
            };
            out.nodes.push(SynthNode {
                id: unique,
                kind,
                label,
                value: None,
                reference,
            });
            out.nodes.len() - 1
        };
        let dec = add(
            &mut out,
            "decision.final".into(),
            "decision",
            Cow::Borrowed(decision),
            None,
        );
        out.nodes[dec].value = Some(decision);
        let mut evidence_ids = Vec::new();
        for (claim, reference) in &s.evidence_map {
            let id = add(
                &mut out,
                slug_node_id("evidence", claim),
                "observation",
                Cow::Borrowed(claim),
                Some(Cow::Borrowed(reference.as_json())),
            );
            out.edges.push((id, dec, "supports"));
            evidence_ids.push(id);
        }
        // The `idx`-th claim or check is supported by the `idx`-th evidence (the last one past
        // the end).
        let nth_evidence = |idx: usize| evidence_ids.get(idx).or(evidence_ids.last()).copied();
        let lists = [
            ("hypothesis", &s.reason_codes),
            ("fraud_flag", &s.fraud_flags),
            ("campaign_signal", &s.campaign_signals),
        ];
        for (prefix, list) in lists {
            for (idx, code) in list.iter().flatten().enumerate() {
                let id = add(
                    &mut out,
                    slug_node_id(prefix, code),
                    "hypothesis",
                    Cow::Borrowed(code),
                    None,
                );
                if let Some(e) = nth_evidence(idx) {
                    out.edges.push((e, id, "supports"));
                }
                out.edges.push((id, dec, "supports"));
            }
        }
        for (idx, (name, status)) in s.policy_checks.iter().enumerate() {
            let id = add(
                &mut out,
                slug_node_id("policy", name),
                "policy",
                Cow::Owned(format!("{name}: {status}")),
                None,
            );
            if let Some(e) = nth_evidence(idx) {
                out.edges.push((e, id, "supports"));
            }
            let st = crate::normalized(status);
            out.edges.push((
                id,
                dec,
                if st.contains("fail") || st.contains("breach") {
                    "violates"
                } else {
                    "supports"
                },
            ));
        }
        for (idx, t) in i.trajectory.iter().enumerate() {
            if t.action_type.is_intervention() {
                let id = add(
                    &mut out,
                    slug_node_id(&format!("intervention.{}", idx + 1), t.action_type.as_str()),
                    "intervention",
                    Cow::Borrowed(t.action_type.as_str()),
                    None,
                );
                out.edges.push((id, dec, "supports"));
            }
        }
        for &a in &i.revealed_artifact_ids {
            let id = add(
                &mut out,
                slug_node_id("artifact", a),
                "artifact",
                Cow::Borrowed(a),
                Some(Cow::Owned(serde_json::json!({"artifact_id": a}))),
            );
            out.edges.push((id, dec, "supports"));
        }
        if !i.counterfactual.trim().is_empty() {
            let id = add(
                &mut out,
                "counterfactual.primary".into(),
                "counterfactual",
                Cow::Borrowed(i.counterfactual),
                None,
            );
            if let Some(&first) = evidence_ids.first() {
                out.edges.push((first, id, "supports"));
            }
            out.edges.push((id, dec, "would_flip"));
        }
        out
    }

    /// The JSON an agent would have sent for this certificate: only the test that holds
    /// [`Self::into_parsed`] equal to `parse` of it needs it (grading reads the parse directly).
    #[cfg(test)]
    fn to_json(&self) -> Value {
        use serde_json::Map;
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| {
                let mut o = Map::new();
                o.insert("id".into(), Value::String(n.id.clone()));
                o.insert("type".into(), Value::String(n.kind.into()));
                o.insert("label".into(), Value::String(n.label.clone().into_owned()));
                if let Some(v) = n.value {
                    o.insert("value".into(), Value::String(v.into()));
                }
                if let Some(r) = &n.reference {
                    o.insert("ref".into(), r.clone().into_owned());
                }
                Value::Object(o)
            })
            .collect();
        let edges: Vec<Value> = self
            .edges
            .iter()
            .map(|&(s, t, k)| serde_json::json!({"source": self.nodes[s].id, "target": self.nodes[t].id, "type": k}))
            .collect();
        serde_json::json!({
            "certificate_version": CERTIFICATE_VERSION,
            // The decision node's value (the only node with one).
            "decision": self.nodes.iter().find_map(|n| n.value),
            "auto_generated": true,
            "nodes": nodes,
            "edges": edges,
            "metadata": {"source": "legacy_submission_bridge"},
        })
    }

    /// Exactly what [`parse`] reads from [`Self::to_json`], without the JSON round trip.
    fn into_parsed(self) -> Parsed<'a> {
        let mut p = Parsed {
            raw_edge_count: self.edges.len(),
            ..Default::default()
        };
        p.cert.version = Some(Cow::Borrowed(CERTIFICATE_VERSION));
        p.cert.auto_generated = true;
        if self.nodes.len() > MAX_NODES {
            p.errors.push("certificate_too_many_nodes".to_owned());
        }
        // Ids are unique slugs (no whitespace), so parsing would keep every node as written.
        p.cert.nodes = self
            .nodes
            .into_iter()
            .take(MAX_NODES)
            .map(|n| {
                let label = if n.label.trim().len() == n.label.len() {
                    n.label
                } else {
                    Cow::Owned(n.label.trim().to_owned())
                };
                Node {
                    id: Cow::Owned(n.id),
                    kind: n.kind,
                    label,
                    value: Cow::Borrowed(n.value.unwrap_or("")),
                    reference: n.reference,
                }
            })
            .collect();
        let kept = p.cert.nodes.len();
        for &(source, target, kind) in self.edges.iter().take(MAX_EDGES) {
            if source < kept && target < kept {
                p.cert.edges.push(Edge {
                    source,
                    target,
                    kind,
                });
            } else {
                p.invalid_edges += 1;
            }
        }
        p
    }
}

/// Diagnostic certificate built from the regular submission fields (10.5 of the spec), as the
/// JSON an agent would have sent: the test's side of [`synthesize_parsed`].
#[cfg(test)]
pub fn synthesize(i: &SynthesisInput<'_>) -> Value {
    Synthesized::build(i).to_json()
}

/// The diagnostic certificate built from the regular submission fields (10.5 of the spec), as
/// its parse: `parse(&synthesize(i))` without the JSON (grading verifies a legacy submission
/// this way; a test holds the two equal).
pub fn synthesize_parsed<'a>(i: &SynthesisInput<'a>) -> Parsed<'a> {
    Synthesized::build(i).into_parsed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(revealed: &crate::RefSet) -> VerifyContext<'_> {
        VerifyContext {
            decision: Some(Decision::EscalateFraud),
            risky: true,
            revealed: Revealed::refs(revealed),
            present: true,
            agent_authored: true,
        }
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
        let revealed: crate::RefSet = ["THR-1", "t1", "callback_verification_result"]
            .into_iter()
            .map(Into::into)
            .collect();
        let r = verify(&good(), &ctx(&revealed));
        assert!(r.valid, "{r:?}");
        assert!(r.overall_score >= 0.82, "{r:?}");
        assert_eq!(r.grounding_score, 1.0);
        assert_eq!(adjustment(&r), 0.01);
        // Only the document was revealed: the token and the artifact are ungrounded.
        let few = crate::RefSet::from(["THR-1".into()]);
        let r = verify(&good(), &ctx(&few));
        assert_eq!(r.ungrounded_references.len(), 2);
        assert!(r.grounding_score < 1.0);
        assert!(
            !r.valid,
            "an ungrounded reference invalidates the certificate"
        );
        assert_eq!(adjustment(&r), -0.03);
        // A wrong version is invalid however well grounded.
        let mut c = good();
        c["certificate_version"] = json!("ledgershield-dcg-v9");
        let r = verify(&c, &ctx(&revealed));
        assert!(
            !r.valid
                && r.errors
                    .iter()
                    .any(|e| e.starts_with("certificate_version_unsupported")),
            "{r:?}"
        );
        assert_eq!(adjustment(&r), -0.03);
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

    #[test]
    fn synthesized_parsed_form_is_the_parse_of_its_json() {
        use ls_core::episode::TrajectoryEntry;
        use ls_core::Submission;
        let step = |action: &str| TrajectoryEntry {
            step: 1,
            case_clock: 1,
            action_type: ls_core::ActionName::parse(action).expect("an action name"),
            payload: Default::default(),
            cost: 0.2,
            success: true,
            message: String::new(),
            is_intervention: true,
            control_boundary_phase: ls_core::BoundaryPhase::Intake,
            control_boundary_warnings: vec![],
        };
        let trajectory = vec![
            step("route_to_security"),
            step("ocr"),
            step("freeze_vendor_profile"),
            step("route_to_security"),
        ];
        let long = format!("{} tail", "word ".repeat(31) + "abcd");
        let mut many = Submission {
            reason_codes: Some((0..300).map(|i| format!("code {i}")).collect()),
            ..Default::default()
        };
        many.evidence_map
            .insert("e".into(), json!({"doc_id": "D"}).into());
        let mut full = Submission {
            decision: Some(Decision::Pay),
            ..Default::default()
        };
        full.evidence_map.insert(
            "Sender Domain!".into(),
            json!({"doc_id": "THR-1", "token_ids": ["t1"]}).into(),
        );
        full.evidence_map
            .insert("sender domain".into(), Value::Null.into());
        full.evidence_map
            .insert("   ".into(), json!("INV-1").into());
        full.reason_codes = Some(vec![
            "bank_override_attempt".into(),
            "Bank Override Attempt".into(),
            long.clone(),
        ]);
        full.fraud_flags = Some(vec!["x".into()]);
        full.campaign_signals = Some(vec![]);
        full.policy_checks
            .insert("three_way_match".into(), "FAIL".into());
        full.policy_checks
            .insert("Vendor  Check".into(), "breach noted".into());
        full.policy_checks.insert("ok".into(), "pass".into());
        let empty = Submission::default();
        let arts = vec![
            "callback_verification_result",
            "callback_verification_result",
            " odd id ",
        ];
        let cases: [(&Submission, &[TrajectoryEntry], Vec<&str>, &str); 5] = [
            (
                &full,
                &trajectory,
                arts.clone(),
                "If the bank   account had matched we would pay.",
            ),
            (&full, &[], vec![], "  "),
            (&empty, &trajectory, arts, &long),
            (&empty, &[], vec![], ""),
            (&many, &trajectory, vec!["a"], "cf"),
        ];
        for (submission, trajectory, ids, cf) in cases {
            let input = SynthesisInput {
                submission,
                trajectory,
                revealed_artifact_ids: ids,
                counterfactual: cf,
            };
            let value = synthesize(&input);
            assert_eq!(parse(&value), synthesize_parsed(&input));
        }
    }
}
