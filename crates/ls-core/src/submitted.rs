//! The typed values inside a `submit_decision` payload: extracted fields, line items, evidence
//! entries, the counterfactual and the handoff packet, each read once when the payload is parsed
//! ([`crate::Submission::from_payload`]) so the graders compute on types, not JSON.
//!
//! Agents send these leniently (an amount as a number or a string, an evidence reference as an
//! object, a bare id or a list), and every shape the graders accepted before is still accepted
//! and read the same way: what a grader cannot read is kept as "present but unreadable" rather
//! than refused. Each value serializes back to exactly the JSON that was sent (stored runs and
//! replays echo the submission byte for byte).

use crate::text::{json_decimal, parse_decimal};
use indexmap::IndexMap;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

/// Serde for a type read from JSON that keeps the JSON it was read from (in a `json` field):
/// it serializes to exactly that JSON and deserializes through its `From<Value>`, so stored runs
/// and replays echo a submission byte for byte.
macro_rules! json_as_sent {
    ($ty:ty) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&self.json, s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <serde_json::Value as serde::Deserialize>::deserialize(d).map(Self::from)
            }
        }
    };
}
pub(crate) use json_as_sent;

/// One value of `extracted_fields` (or one cell of a line item).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldValue {
    Text(String),
    Number(serde_json::Number),
    Bool(bool),
    /// `null`, a list or an object: present, but neither text nor an amount.
    Other(Value),
}

impl From<Value> for FieldValue {
    fn from(v: Value) -> Self {
        match v {
            Value::String(s) => FieldValue::Text(s),
            Value::Number(n) => FieldValue::Number(n),
            Value::Bool(b) => FieldValue::Bool(b),
            other => FieldValue::Other(other),
        }
    }
}

impl FieldValue {
    /// Text form: strings as sent, numbers and booleans printed, anything else empty.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            FieldValue::Text(s) => Cow::Borrowed(s),
            FieldValue::Number(n) => Cow::Owned(n.to_string()),
            FieldValue::Bool(b) => Cow::Owned(b.to_string()),
            FieldValue::Other(_) => Cow::Borrowed(""),
        }
    }

    /// The amount it states: a number, or a string that parses as one ([`json_decimal`]).
    pub fn decimal(&self) -> Option<Decimal> {
        match self {
            FieldValue::Text(s) => parse_decimal(s),
            FieldValue::Number(n) => json_decimal(&Value::Number(n.clone())),
            FieldValue::Bool(_) | FieldValue::Other(_) => None,
        }
    }
}

/// One submitted line item: an object of column → value (`description`, `qty`, `unit_price`,
/// `line_total`, and whatever else was sent, in the order sent), or something that is not an
/// object (kept, read as a line with no columns).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LineEntry {
    Row(IndexMap<String, FieldValue>),
    Other(Value),
}

impl From<Value> for LineEntry {
    fn from(v: Value) -> Self {
        match v {
            Value::Object(o) => LineEntry::Row(o.into_iter().map(|(k, v)| (k, v.into())).collect()),
            other => LineEntry::Other(other),
        }
    }
}

impl LineEntry {
    /// The value of one column (`None` when absent or when the line is not an object).
    pub fn get(&self, column: &str) -> Option<&FieldValue> {
        match self {
            LineEntry::Row(r) => r.get(column),
            LineEntry::Other(_) => None,
        }
    }
}

/// The keys of a reference object that name one record or document by id.
pub const REF_KEYS: [&str; 9] = [
    "doc_id",
    "artifact_id",
    "token_id",
    "thread_id",
    "po_id",
    "receipt_id",
    "ledger_id",
    "vendor_key",
    "receipt",
];

/// Every id an agent-supplied reference names: a bare string, the [`REF_KEYS`] and the
/// `token_ids`/`refs`/`references` lists of an object, looked for through nested objects and
/// lists (at most 8 levels, about 256 ids); trimmed, empty ones dropped.
pub fn json_refs(v: &Value) -> Vec<&str> {
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a str>, depth: usize) {
        if depth > 8 || out.len() > 256 {
            return;
        }
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    if REF_KEYS.contains(&k.as_str()) {
                        if let Some(s) = x.as_str().map(str::trim).filter(|s| !s.is_empty()) {
                            out.push(s);
                        }
                    } else if k == "token_ids" || k == "refs" || k == "references" {
                        if let Some(a) = x.as_array() {
                            out.extend(
                                a.iter()
                                    .filter_map(Value::as_str)
                                    .map(str::trim)
                                    .filter(|s| !s.is_empty()),
                            );
                        }
                    } else if x.is_object() || x.is_array() {
                        walk(x, out, depth + 1);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out, depth + 1)),
            Value::String(s) if depth == 0 && !s.trim().is_empty() => out.push(s.trim()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out, 0);
    out
}

/// The place an evidence object cites (`{doc_id, page, bbox, token_ids}`), read leniently: the
/// document id may be any scalar (printed), the page a number or a numeric string (absent or
/// `null`: page 1; anything else: no page), and the box and tokens keep only their numbers and
/// strings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CitedPlace {
    pub doc_id: String,
    pub page: Option<u32>,
    pub bbox: Vec<f64>,
    pub token_ids: Vec<String>,
}

impl CitedPlace {
    fn read(o: &serde_json::Map<String, Value>) -> Self {
        let scalar = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => String::new(),
        };
        let page = match o.get("page") {
            None | Some(Value::Null) => Some(1),
            Some(Value::Number(n)) => n.as_u64().and_then(|p| u32::try_from(p).ok()),
            Some(Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        };
        CitedPlace {
            doc_id: o.get("doc_id").map(scalar).unwrap_or_default(),
            page,
            bbox: o
                .get("bbox")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default(),
            token_ids: o
                .get("token_ids")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// One `evidence_map` entry: what the graders read from it, taken once from the JSON sent, and
/// that JSON itself (the entry serializes as sent, and the synthesized certificate quotes it).
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceEntry {
    place: Option<CitedPlace>,
    records: Vec<(&'static str, String)>,
    refs: Vec<String>,
    json: Value,
}

impl From<Value> for EvidenceEntry {
    fn from(json: Value) -> Self {
        let (place, records) = match &json {
            Value::Object(o) => (
                Some(CitedPlace::read(o)),
                REF_KEYS
                    .iter()
                    .filter_map(|k| Some((*k, o.get(*k)?.as_str()?.to_owned())))
                    .collect(),
            ),
            _ => (None, Vec::new()),
        };
        let refs = json_refs(&json).into_iter().map(str::to_owned).collect();
        EvidenceEntry {
            place,
            records,
            refs,
            json,
        }
    }
}

impl EvidenceEntry {
    /// The cited place; `None` when the entry is not an object (a bare id, a list).
    pub fn place(&self) -> Option<&CitedPlace> {
        self.place.as_ref()
    }

    /// The record id under one of [`REF_KEYS`] at the top of an object entry, as sent
    /// (untrimmed; `None` when absent or not a string).
    pub fn record(&self, key: &str) -> Option<&str> {
        self.records
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, id)| id.as_str())
    }

    /// Every id the entry names ([`json_refs`]).
    pub fn refs(&self) -> &[String] {
        &self.refs
    }

    /// The entry as sent.
    pub fn as_json(&self) -> &Value {
        &self.json
    }
}

json_as_sent!(EvidenceEntry);

/// The counterfactual: free text, or anything else (an object carrying its text under `text`,
/// `statement`, `summary` or `counterfactual`, or other JSON, read as its JSON text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Counterfactual {
    Text(String),
    Other(Value),
}

impl From<Value> for Counterfactual {
    fn from(v: Value) -> Self {
        match v {
            Value::String(s) => Counterfactual::Text(s),
            other => Counterfactual::Other(other),
        }
    }
}

impl Counterfactual {
    /// The counterfactual as text.
    pub fn text(&self) -> String {
        match self {
            Counterfactual::Text(s) => s.clone(),
            Counterfactual::Other(Value::Object(o)) => {
                ["text", "statement", "summary", "counterfactual"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(Value::as_str))
                    .map(str::to_owned)
                    .unwrap_or_else(|| Value::Object(o.clone()).to_string())
            }
            Counterfactual::Other(other) => other.to_string(),
        }
    }
}

/// What one section of a handoff packet holds.
#[derive(Debug, Clone, PartialEq)]
pub enum HandoffSection {
    /// Absent, `null`, blank text, or an empty list or object.
    Empty,
    /// Text with something besides whitespace (as sent).
    Text(String),
    /// A non-empty list or object, a number or a boolean.
    Filled,
}

impl HandoffSection {
    fn read(v: Option<&Value>) -> Self {
        match v {
            Some(Value::String(s)) if !s.trim().is_empty() => HandoffSection::Text(s.clone()),
            Some(Value::Array(a)) if !a.is_empty() => HandoffSection::Filled,
            Some(Value::Object(m)) if !m.is_empty() => HandoffSection::Filled,
            Some(Value::Number(_) | Value::Bool(_)) => HandoffSection::Filled,
            _ => HandoffSection::Empty,
        }
    }

    /// It holds something.
    pub fn filled(&self) -> bool {
        !matches!(self, HandoffSection::Empty)
    }
}

/// A packet handed to a human reviewer (submitted as `handoff_packet`, or built by the
/// environment's `create_human_handoff`): the three sections the grade reads, taken once from
/// the JSON (anything but an object has none), and that JSON itself (serialized as sent).
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffPacket {
    pub summary: HandoffSection,
    pub recommended_next_step: HandoffSection,
    pub observed_risk_signals: HandoffSection,
    json: Value,
}

impl From<Value> for HandoffPacket {
    fn from(json: Value) -> Self {
        let section = |k: &str| HandoffSection::read(json.as_object().and_then(|o| o.get(k)));
        HandoffPacket {
            summary: section("summary"),
            recommended_next_step: section("recommended_next_step"),
            observed_risk_signals: section("observed_risk_signals"),
            json,
        }
    }
}

impl HandoffPacket {
    /// How many of the three sections hold something.
    pub fn sections_filled(&self) -> usize {
        [
            &self.summary,
            &self.recommended_next_step,
            &self.observed_risk_signals,
        ]
        .into_iter()
        .filter(|s| s.filled())
        .count()
    }

    /// The packet as sent.
    pub fn as_json(&self) -> &Value {
        &self.json
    }
}

json_as_sent!(HandoffPacket);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every typed value serializes back to the JSON it was read from, and deserializing that JSON
    /// gives the same typed value.
    #[test]
    fn values_round_trip_as_sent() {
        let samples = [
            json!("1,200.00"),
            json!(42),
            json!(1.5),
            json!(-3),
            json!(true),
            json!(null),
            json!([1, "a"]),
            json!({"z": 1, "a": [2]}),
        ];
        for v in &samples {
            let f = FieldValue::from(v.clone());
            assert_eq!(serde_json::to_value(&f).unwrap(), *v);
            assert_eq!(serde_json::from_value::<FieldValue>(v.clone()).unwrap(), f);
            let c = Counterfactual::from(v.clone());
            assert_eq!(serde_json::to_value(&c).unwrap(), *v);
            assert_eq!(
                serde_json::from_value::<Counterfactual>(v.clone()).unwrap(),
                c
            );
            let e = EvidenceEntry::from(v.clone());
            assert_eq!(serde_json::to_string(&e).unwrap(), v.to_string());
        }
        let line = json!({"qty": "10", "description": "Bolts", "zeta": {"b": 1, "a": 2}, "line_total": 15});
        for v in [line, json!("junk"), json!([1])] {
            let l = LineEntry::from(v.clone());
            assert_eq!(serde_json::to_string(&l).unwrap(), v.to_string());
            assert_eq!(serde_json::from_value::<LineEntry>(v).unwrap(), l);
        }
    }

    #[test]
    fn evidence_entries_are_read_leniently() {
        let e = EvidenceEntry::from(json!({
            "doc_id": 7, "page": "2", "bbox": [0, "x", 1.5], "token_ids": ["t1", 3, " t2 "],
            "po_id": " PO-1 ", "receipt": 4, "nested": [{"ledger_id": "LED-1"}]
        }));
        let p = e.place().unwrap();
        assert_eq!(
            (p.doc_id.as_str(), p.page, p.bbox.as_slice()),
            ("7", Some(2), &[0.0, 1.5][..])
        );
        assert_eq!(p.token_ids, ["t1", " t2 "]);
        assert_eq!(e.record("po_id"), Some(" PO-1 "));
        assert_eq!(e.record("receipt"), None);
        assert_eq!(e.refs(), ["t1", "t2", "PO-1", "LED-1"]);
        assert_eq!(
            EvidenceEntry::from(json!({})).place().unwrap().page,
            Some(1)
        );
        assert_eq!(
            EvidenceEntry::from(json!({"page": -1}))
                .place()
                .unwrap()
                .page,
            None
        );
        let bare = EvidenceEntry::from(json!(" INV-1 "));
        assert!(bare.place().is_none());
        assert_eq!(bare.refs(), ["INV-1"]);
    }

    #[test]
    fn handoff_sections_are_read_once() {
        let p = HandoffPacket::from(json!({
            "summary": "  ", "recommended_next_step": 3, "observed_risk_signals": ["x"], "z": 1
        }));
        assert_eq!(p.summary, HandoffSection::Empty);
        assert_eq!(p.sections_filled(), 2);
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"summary":"  ","recommended_next_step":3,"observed_risk_signals":["x"],"z":1}"#
        );
        let p = HandoffPacket::from(json!({"summary": "Escalated", "observed_risk_signals": {}}));
        assert_eq!(p.summary, HandoffSection::Text("Escalated".into()));
        assert_eq!(p.sections_filled(), 1);
        assert_eq!(HandoffPacket::from(json!(["summary"])).sections_filled(), 0);
    }

    #[test]
    fn counterfactual_text_reads_objects() {
        let t = |v| Counterfactual::from(v).text();
        assert_eq!(t(json!("x")), "x");
        assert_eq!(t(json!({"summary": "s", "statement": "t"})), "t");
        assert_eq!(t(json!({"n": 1})), "{\"n\":1}");
        assert_eq!(t(json!(3)), "3");
    }

    #[test]
    fn field_values_read_as_text_and_amounts() {
        let f = |v| FieldValue::from(v);
        assert_eq!(
            f(json!("1,200.00")).decimal(),
            Some(Decimal::new(120000, 2))
        );
        assert_eq!(f(json!(1201.9)).decimal(), Some(Decimal::new(12019, 1)));
        assert_eq!(f(json!(42)).text(), "42");
        assert_eq!(f(json!(true)).decimal(), None);
        assert_eq!(f(json!(null)).text(), "");
    }
}
