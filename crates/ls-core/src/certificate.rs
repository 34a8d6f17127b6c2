//! The Decision Certificate Graph (`ledgershield-dcg-v1`) as an agent submits it, parsed once
//! when the payload is ([`crate::Submission::from_payload`]): node and edge types are the
//! canonical static names and edges refer to nodes by index. What parsing found wrong is kept in
//! [`Parsed`], never refused. Verifying the graph against an episode is grading's.

use crate::submitted::REF_KEYS;
use crate::text::normalize_text;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;

pub const CERTIFICATE_VERSION: &str = "ledgershield-dcg-v1";
wire_enum! {
    /// The kind of a certificate node.
    pub enum NodeKind {
        Artifact = "artifact",
        Observation = "observation",
        Hypothesis = "hypothesis",
        Policy = "policy",
        Intervention = "intervention",
        Decision = "decision",
        Counterfactual = "counterfactual",
    }
}

wire_enum! {
    /// The kind of a certificate edge.
    pub enum EdgeKind {
        Supports = "supports",
        Contradicts = "contradicts",
        Requires = "requires",
        Violates = "violates",
        WouldFlip = "would_flip",
    }
}

/// The wire spellings of a `wire_enum!`'s variants, in table order (for the parser's lists).
macro_rules! spellings {
    ($enum:ident, $n:literal) => {{
        let mut out = [""; $n];
        let mut i = 0;
        while i < $n {
            out[i] = $enum::ALL[i].as_str();
            i += 1;
        }
        out
    }};
}
/// The node kinds as spelled on the wire, in [`NodeKind`]'s order (what the parser accepts).
pub const NODE_TYPES: [&str; 7] = spellings!(NodeKind, 7);
/// The edge kinds as spelled on the wire, in [`EdgeKind`]'s order.
pub const EDGE_TYPES: [&str; 5] = spellings!(EdgeKind, 5);

/// Most nodes read (more is an error, the rest ignored).
pub const MAX_NODES: usize = 256;
/// Most edges read.
pub const MAX_EDGES: usize = 512;

#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    pub id: Cow<'a, str>,
    /// One of [`NODE_TYPES`].
    pub kind: &'static str,
    pub label: Cow<'a, str>,
    pub value: Cow<'a, str>,
    pub reference: Option<Cow<'a, Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// Index of the source node in [`Certificate::nodes`].
    pub source: usize,
    /// Index of the target node.
    pub target: usize,
    /// One of [`EDGE_TYPES`].
    pub kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Certificate<'a> {
    pub version: Option<Cow<'a, str>>,
    pub auto_generated: bool,
    /// Node ids are unique (a repeated id replaces the earlier node in place).
    pub nodes: Vec<Node<'a>>,
    pub edges: Vec<Edge>,
}

/// A parsed certificate and what parsing found wrong with it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed<'a> {
    pub cert: Certificate<'a>,
    pub errors: Vec<String>,
    pub invalid_nodes: usize,
    pub duplicates: usize,
    pub invalid_edges: usize,
    /// Length of the `edges` list as submitted (0 when it is not a list).
    pub raw_edge_count: usize,
}

impl Parsed<'_> {
    /// The same parse, owning its text.
    pub fn into_owned(self) -> Parsed<'static> {
        fn own(c: Cow<'_, str>) -> Cow<'static, str> {
            Cow::Owned(c.into_owned())
        }
        let nodes = self.cert.nodes.into_iter().map(|n| Node {
            id: own(n.id),
            kind: n.kind,
            label: own(n.label),
            value: own(n.value),
            reference: n.reference.map(|r| Cow::Owned(r.into_owned())),
        });
        Parsed {
            cert: Certificate {
                version: self.cert.version.map(own),
                auto_generated: self.cert.auto_generated,
                nodes: nodes.collect(),
                edges: self.cert.edges,
            },
            errors: self.errors,
            invalid_nodes: self.invalid_nodes,
            duplicates: self.duplicates,
            invalid_edges: self.invalid_edges,
            raw_edge_count: self.raw_edge_count,
        }
    }
}

fn text(v: Option<&Value>) -> Cow<'_, str> {
    match v {
        Some(Value::String(s)) => Cow::Borrowed(s.trim()),
        Some(Value::Number(n)) => Cow::Owned(n.to_string()),
        _ => Cow::Borrowed(""),
    }
}

/// The name in `names` equal to `normalize_text(raw)`, if any.
fn canonical_name(raw: &str, names: &[&'static str]) -> Option<&'static str> {
    // The names are normalised already, so an exact match is its own normal form.
    if let Some(&k) = names.iter().find(|k| **k == raw) {
        return Some(k);
    }
    let n = normalize_text(raw);
    names.iter().copied().find(|k| *k == n)
}

/// Parse; structural problems are reported in [`Parsed`], never panics.
pub fn parse(v: &Value) -> Parsed<'_> {
    let mut p = Parsed::default();
    let Some(o) = v.as_object() else {
        p.errors.push("certificate_not_an_object".to_owned());
        return p;
    };
    p.raw_edge_count = o.get("edges").and_then(Value::as_array).map_or(0, Vec::len);
    p.cert.version = o
        .get("certificate_version")
        .and_then(Value::as_str)
        .map(Cow::Borrowed);
    p.cert.auto_generated = o
        .get("auto_generated")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let by_id = parse_nodes(o, &mut p);
    parse_edges(o, &by_id, &mut p);
    p
}

/// The slot of `id` in `by_id` (indices into `nodes` sorted by id).
fn find(nodes: &[Node<'_>], by_id: &[usize], id: &str) -> Result<usize, usize> {
    by_id.binary_search_by(|&j| (*nodes[j].id).cmp(id))
}

/// The nodes into `p`; returns indices into `p.cert.nodes` sorted by id (finds repeated ids,
/// which keep their first slot, and resolves edge endpoints).
fn parse_nodes<'a>(o: &'a Map<String, Value>, p: &mut Parsed<'a>) -> Vec<usize> {
    let mut by_id: Vec<usize> = Vec::new();
    let Some(nodes) = o
        .get("nodes")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    else {
        p.errors.push("certificate_nodes_missing".to_owned());
        return by_id;
    };
    for (i, n) in nodes.iter().take(MAX_NODES).enumerate() {
        let Some(no) = n.as_object() else {
            p.invalid_nodes += 1;
            continue;
        };
        let [ty, id, label, value, reference] =
            ["type", "id", "label", "value", "ref"].map(|k| no.get(k));
        let Some(kind) = canonical_name(&text(ty), &NODE_TYPES) else {
            p.invalid_nodes += 1;
            continue;
        };
        let mut id = text(id);
        if id.is_empty() {
            id = Cow::Owned(format!("node-{}", i + 1));
        }
        let has_direct = |k: &String| REF_KEYS.contains(&k.as_str()) || k == "token_ids";
        let reference = reference.map(Cow::Borrowed).or_else(|| {
            // Most nodes without `ref` carry no reference keys either: no map to build.
            if !no.keys().any(has_direct) {
                return None;
            }
            let direct: Map<String, Value> = no
                .iter()
                .filter(|(k, _)| has_direct(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (!direct.is_empty()).then_some(Cow::Owned(Value::Object(direct)))
        });
        let found = find(&p.cert.nodes, &by_id, &id);
        let node = Node {
            id,
            kind,
            label: text(label),
            value: text(value),
            reference,
        };
        match found {
            Ok(pos) => {
                p.duplicates += 1;
                p.cert.nodes[by_id[pos]] = node;
            }
            Err(pos) => {
                by_id.insert(pos, p.cert.nodes.len());
                p.cert.nodes.push(node);
            }
        }
    }
    if nodes.len() > MAX_NODES {
        p.errors.push("certificate_too_many_nodes".to_owned());
    }
    by_id
}

/// The edges into `p`, each endpoint resolved to a node index.
fn parse_edges(o: &Map<String, Value>, by_id: &[usize], p: &mut Parsed<'_>) {
    match o.get("edges") {
        Some(Value::Array(edges)) => {
            let mut kept = Vec::new();
            for e in edges.iter().take(MAX_EDGES) {
                let Some(eo) = e.as_object() else {
                    p.invalid_edges += 1;
                    continue;
                };
                let [source, target, ty] = ["source", "target", "type"].map(|k| eo.get(k));
                let node_at = |r: Option<&Value>| {
                    find(&p.cert.nodes, by_id, &text(r))
                        .ok()
                        .map(|pos| by_id[pos])
                };
                match (
                    node_at(source),
                    node_at(target),
                    canonical_name(&text(ty), &EDGE_TYPES),
                ) {
                    (Some(source), Some(target), Some(kind)) => kept.push(Edge {
                        source,
                        target,
                        kind,
                    }),
                    _ => p.invalid_edges += 1,
                }
            }
            p.cert.edges = kept;
        }
        None | Some(Value::Null) if p.cert.nodes.len() <= 1 => {}
        _ => p.errors.push("certificate_edges_malformed".to_owned()),
    }
}

/// A submitted `decision_certificate`: its parse, done once, and the JSON as sent (which it
/// serializes to).
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionCertificate {
    parsed: Parsed<'static>,
    json: Value,
}

impl From<Value> for DecisionCertificate {
    fn from(json: Value) -> Self {
        DecisionCertificate {
            parsed: parse(&json).into_owned(),
            json,
        }
    }
}

impl DecisionCertificate {
    /// The parsed graph.
    pub fn parsed(&self) -> &Parsed<'static> {
        &self.parsed
    }

    /// The certificate as sent.
    pub fn as_json(&self) -> &Value {
        &self.json
    }
}

crate::submitted::json_as_sent!(DecisionCertificate);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_is_spelled_as_the_protocol_documents_it() {
        assert_eq!(
            NODE_TYPES,
            [
                "artifact",
                "observation",
                "hypothesis",
                "policy",
                "intervention",
                "decision",
                "counterfactual"
            ]
        );
        assert_eq!(
            EDGE_TYPES,
            [
                "supports",
                "contradicts",
                "requires",
                "violates",
                "would_flip"
            ]
        );
    }
    use serde_json::json;

    #[test]
    fn parsed_once_and_serialized_as_sent() {
        let v = json!({
            "certificate_version": "v0", "auto_generated": true,
            "nodes": [
                {"id": "d", "type": "Decision", "label": "pay"},
                {"id": "e", "type": "observation", "doc_id": "D", "token_ids": ["a"]},
                {"id": "e", "type": "observation", "ref": "x"},
                "junk"
            ],
            "edges": [{"source": "e", "target": "d", "type": "supports"}, 7]
        });
        let c = DecisionCertificate::from(v.clone());
        assert_eq!(serde_json::to_string(&c).unwrap(), v.to_string());
        assert_eq!(c.parsed(), &parse(&v));
        let p = c.parsed();
        assert!(p.cert.auto_generated);
        assert_eq!(
            (p.cert.nodes.len(), p.duplicates, p.invalid_nodes),
            (2, 1, 1)
        );
        assert_eq!(
            (p.cert.edges.len(), p.invalid_edges, p.raw_edge_count),
            (1, 1, 2)
        );
        assert_eq!(p.cert.nodes[1].reference.as_deref(), Some(&json!("x")));
        let bad = DecisionCertificate::from(json!([1]));
        assert_eq!(bad.parsed().errors, ["certificate_not_an_object"]);
    }
}
