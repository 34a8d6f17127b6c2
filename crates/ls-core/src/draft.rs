//! What an agent writes, as types: an evidence citation, a decision certificate and a
//! `submit_decision` payload, serialized to exactly the JSON the environment reads.
//!
//! The reading side is lenient and lives with the parsers ([`crate::submitted`],
//! [`crate::certificate`], [`crate::Submission::from_payload`]): an agent may send anything, and
//! what was wrong is kept, not refused. The writing side is strict: a draft can only say what the
//! contract means, in the vocabulary the parser reads ([`NodeKind`], [`EdgeKind`], declared with
//! the certificate). The tests write every kind of draft and read it back through the parsers.
//!
//! Field order is the wire order (the payload's JSON keeps insertion order), so an agent that
//! builds a draft sends the same bytes an agent that wrote the JSON by hand in that order did.

use crate::certificate::{EdgeKind, NodeKind, CERTIFICATE_VERSION};
use crate::enums::Decision;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

wire_enum! {
    /// A record an evidence entry may cite by id instead of by tokens.
    pub enum RecordKey {
        PoId = "po_id",
        ReceiptId = "receipt_id",
        VendorKey = "vendor_key",
        LedgerId = "ledger_id",
        ArtifactId = "artifact_id",
    }
}

/// Where a claim rests: a line the agent read, or a record a tool returned.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Cite {
    Place(PlaceCite),
    Record(RecordCite),
}

/// A line of a document: its page, box and token ids (the grade reads at most three).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlaceCite {
    pub doc_id: String,
    pub page: u32,
    pub bbox: [f64; 4],
    pub token_ids: Vec<String>,
}

/// A record by id, written `{"<key>": "<id>"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordCite {
    pub key: RecordKey,
    pub id: String,
}

impl Serialize for RecordCite {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(self.key.as_str(), &self.id)?;
        m.end()
    }
}

impl Cite {
    /// The record `key` with id `id`.
    pub fn record(key: RecordKey, id: impl Into<String>) -> Self {
        Self::Record(RecordCite { key, id: id.into() })
    }
}

/// Pairs written as a JSON object in the order given (a draft's maps keep the order the agent
/// chose, as a hand-written payload did).
#[derive(Debug, Clone, PartialEq)]
pub struct Ordered<K, V>(pub Vec<(K, V)>);

impl<K, V> Default for Ordered<K, V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: AsRef<str>, V: Serialize> Serialize for Ordered<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k.as_ref(), v)?;
        }
        m.end()
    }
}

impl<K, V> FromIterator<(K, V)> for Ordered<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// A decision certificate (`ledgershield-dcg-v1`) as an agent writes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CertificateDraft {
    pub certificate_version: &'static str,
    pub nodes: Vec<NodeDraft>,
    pub edges: Vec<EdgeDraft>,
}

impl Default for CertificateDraft {
    fn default() -> Self {
        Self {
            certificate_version: CERTIFICATE_VERSION,
            nodes: Vec::new(),
            edges: Vec::new(),
        }
    }
}

impl CertificateDraft {
    /// Add a node.
    pub fn node(&mut self, node: NodeDraft) {
        self.nodes.push(node);
    }
    /// Add an edge `source -kind-> target` (node ids).
    pub fn edge(&mut self, source: impl Into<String>, kind: EdgeKind, target: impl Into<String>) {
        self.edges.push(EdgeDraft {
            source: source.into(),
            target: target.into(),
            kind,
        });
    }
}

/// A certificate node: its id and kind, and what it says (a decision's value, a citation, a
/// label), each written only when set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeDraft {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: NodeKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Decision>,
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<Cite>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl NodeDraft {
    /// A node with nothing said yet.
    pub fn new(id: impl Into<String>, kind: NodeKind) -> Self {
        Self {
            id: id.into(),
            kind,
            value: None,
            reference: None,
            label: None,
        }
    }
    pub fn value(mut self, decision: Decision) -> Self {
        self.value = Some(decision);
        self
    }
    pub fn cite(mut self, cite: Cite) -> Self {
        self.reference = Some(cite);
        self
    }
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
}

/// A certificate edge between two node ids.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EdgeDraft {
    pub source: String,
    pub target: String,
    #[serde(rename = "type")]
    pub kind: EdgeKind,
}

/// A line item as written (amounts as their decimal text).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineItemDraft {
    pub description: String,
    pub qty: String,
    pub unit_price: String,
    pub line_total: String,
}

/// A `submit_decision` payload as an agent writes it: each field written only when set, in
/// this order. Every field is one [`crate::Submission::FIELDS`] declares (a test holds it).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SubmissionDraft {
    /// Always written (`null` when the agent has none).
    pub decision: Option<Decision>,
    pub confidence: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extracted_fields: Option<Ordered<&'static str, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_items: Option<Vec<LineItemDraft>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_codes: Option<Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_checks: Option<Ordered<&'static str, &'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterfactual: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraud_flags: Option<Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub campaign_signals: Option<Vec<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_invoice_links: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate_links: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discrepancies: Option<Vec<&'static str>>,
    pub evidence_map: Ordered<String, Cite>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_certificate: Option<CertificateDraft>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificate::parse;
    use crate::Submission;
    use serde_json::{json, Value};

    fn place() -> Cite {
        Cite::Place(PlaceCite {
            doc_id: "INV-1".into(),
            page: 1,
            bbox: [1.0, 2.0, 3.0, 4.0],
            token_ids: vec!["t1".into()],
        })
    }

    #[test]
    fn citations_are_written_as_the_parser_reads_them() {
        assert_eq!(
            serde_json::to_value(place()).unwrap(),
            json!({"doc_id": "INV-1", "page": 1, "bbox": [1.0, 2.0, 3.0, 4.0], "token_ids": ["t1"]})
        );
        assert_eq!(
            serde_json::to_value(Cite::record(RecordKey::PoId, "PO-9")).unwrap(),
            json!({"po_id": "PO-9"})
        );
        let read = crate::EvidenceEntry::from(serde_json::to_value(place()).unwrap());
        assert_eq!(read.refs(), ["INV-1", "t1"]);
    }

    #[test]
    fn a_drafted_certificate_parses_back_without_errors() {
        let mut c = CertificateDraft::default();
        c.node(NodeDraft::new("decision.final", NodeKind::Decision).value(Decision::Hold));
        c.node(
            NodeDraft::new("evidence.x", NodeKind::Observation)
                .cite(place())
                .label("x"),
        );
        c.edge("evidence.x", EdgeKind::Supports, "decision.final");
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v["nodes"][0],
            json!({"id": "decision.final", "type": "decision", "value": "HOLD"})
        );
        let parsed = parse(&v);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        assert_eq!(parsed.cert.nodes.len(), 2);
        assert_eq!(parsed.cert.edges.len(), 1);
        assert_eq!(parsed.cert.edges[0].kind, "supports");
        assert_eq!(parsed.cert.nodes[1].kind, "observation");
    }

    #[test]
    fn a_drafted_submission_is_a_valid_payload_of_declared_fields_only() {
        let draft = SubmissionDraft {
            decision: Some(Decision::Hold),
            confidence: 0.8,
            reason_codes: Some(vec!["bank_account_mismatch"]),
            policy_checks: Some(Ordered(vec![("bank_change_verification", "fail")])),
            duplicate_links: Some(vec!["LED-1".into()]),
            evidence_map: Ordered(vec![("bank_account_mismatch".into(), place())]),
            decision_certificate: Some(CertificateDraft::default()),
            ..Default::default()
        };
        let Value::Object(payload) = serde_json::to_value(&draft).unwrap() else {
            panic!("a draft is an object")
        };
        let declared: Vec<&str> = Submission::FIELDS.iter().map(|f| f.name).collect();
        for key in payload.keys() {
            assert!(
                declared.contains(&key.as_str()),
                "{key} is not a declared field"
            );
        }
        let sub = Submission::from_payload(&payload).expect("a draft parses");
        assert_eq!(sub.decision, Some(Decision::Hold));
        assert_eq!(
            sub.reason_codes.as_deref(),
            Some(&["bank_account_mismatch".to_owned()][..])
        );
        assert_eq!(sub.policy_checks["bank_change_verification"], "fail");
        assert!(sub.evidence_map.contains_key("bank_account_mismatch"));
        assert!(sub.decision_certificate.is_some());
        // Unset fields are not written at all (a grader tells "omitted" from "empty").
        assert!(!payload.contains_key("fraud_flags"));
        assert_eq!(sub.fraud_flags, None);
    }
}
