//! The `submit_decision` payload, parsed into a typed submission.
//!
//! Wrong JSON types are errors naming the field (the protocol layer turns them into 4xx). A
//! well-typed but invalid decision string is not an error here: the episode loop treats it as a
//! penalised step, as an RL environment treats a bad move.

use crate::certificate::DecisionCertificate;
use crate::enums::Decision;
use crate::submitted::{Counterfactual, EvidenceEntry, FieldValue, HandoffPacket, LineEntry};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Limits on submission size (TigerBeetle-style: everything bounded).
pub const MAX_LIST_ITEMS: usize = 256;
pub const MAX_MAP_ENTRIES: usize = 256;
pub const MAX_TEXT_CHARS: usize = 8_192;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("payload.{field}: {message}")]
pub struct SubmissionError {
    pub field: String,
    pub message: String,
}

fn err(field: &str, message: impl Into<String>) -> SubmissionError {
    SubmissionError {
        field: field.to_owned(),
        message: message.into(),
    }
}

/// A typed submission. Absent lists are `None` so graders can tell "omitted" from "empty".
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Submission {
    /// The raw decision string as sent.
    pub decision_raw: String,
    /// `Some` only when `decision_raw` is exactly one of the four decisions.
    pub decision: Option<Decision>,
    pub confidence: Option<f64>,
    pub predicted_probabilities: Option<BTreeMap<String, f64>>,
    pub reason_codes: Option<Vec<String>>,
    pub fraud_flags: Option<Vec<String>>,
    pub discrepancies: Option<Vec<String>>,
    pub campaign_signals: Option<Vec<String>>,
    pub duplicate_links: Option<Vec<String>>,
    pub cross_invoice_links: Option<Vec<String>>,
    pub policy_checks: BTreeMap<String, String>,
    /// Claim → reference; references may be any JSON (graders score what they can read).
    #[schemars(with = "BTreeMap<String, Value>")]
    pub evidence_map: BTreeMap<String, EvidenceEntry>,
    #[schemars(with = "BTreeMap<String, Value>")]
    pub extracted_fields: BTreeMap<String, FieldValue>,
    #[schemars(with = "Vec<Value>")]
    pub line_items: Vec<LineEntry>,
    #[schemars(with = "Option<Value>")]
    pub counterfactual: Option<Counterfactual>,
    #[schemars(with = "Option<Value>")]
    pub decision_certificate: Option<DecisionCertificate>,
    pub notes: Option<String>,
    #[schemars(with = "Option<Value>")]
    pub handoff_packet: Option<HandoffPacket>,
    pub recommended_next_action: Option<String>,
    pub risk_score: Option<f64>,
}

/// One field of the `submit_decision` payload: its name, JSON type (`None`: any JSON value;
/// `strings`: a list of strings, or one string as a one-item list) and
/// what it is for. [`Submission::FIELDS`] lists every field [`Submission::from_payload`] reads,
/// in the order it reads them; the payload schema the tool list shows is generated from it.
#[derive(Debug, Clone, Copy)]
pub struct SubmissionField {
    pub name: &'static str,
    pub json_type: Option<&'static str>,
    pub description: &'static str,
}

const fn field(
    name: &'static str,
    json_type: Option<&'static str>,
    description: &'static str,
) -> SubmissionField {
    SubmissionField {
        name,
        json_type,
        description,
    }
}

impl Submission {
    /// Every payload field `from_payload` reads, in reading order (unit tests check each is read).
    pub const FIELDS: &'static [SubmissionField] = &[
        field(
            "decision",
            Some("string"),
            "PAY, HOLD, NEEDS_REVIEW or ESCALATE_FRAUD (exact)",
        ),
        field(
            "confidence",
            Some("number"),
            "confidence in the decision, 0..1",
        ),
        field("risk_score", Some("number"), "submitted risk score, 0..1"),
        field(
            "predicted_probabilities",
            Some("object"),
            "hypothesis -> probability",
        ),
        field(
            "reason_codes",
            Some("strings"),
            "reason codes supporting the decision",
        ),
        field("fraud_flags", Some("strings"), "fraud flags raised"),
        field(
            "discrepancies",
            Some("strings"),
            "document discrepancies found",
        ),
        field(
            "campaign_signals",
            Some("strings"),
            "campaign-level signals",
        ),
        field(
            "duplicate_links",
            Some("strings"),
            "ids of duplicate invoices",
        ),
        field(
            "cross_invoice_links",
            Some("strings"),
            "ids of linked invoices",
        ),
        field(
            "policy_checks",
            Some("object"),
            "check -> \"pass\"/\"fail\"",
        ),
        field(
            "evidence_map",
            Some("object"),
            "claim -> evidence reference (doc or token ids)",
        ),
        field(
            "extracted_fields",
            Some("object"),
            "field -> extracted value",
        ),
        field("line_items", Some("array"), "extracted invoice lines"),
        field(
            "counterfactual",
            None,
            "what would change the decision (text or object)",
        ),
        field(
            "decision_certificate",
            None,
            "the decision certificate graph",
        ),
        field("notes", Some("string"), "free-text notes"),
        field(
            "recommended_next_action",
            Some("string"),
            "what should happen next",
        ),
        field(
            "handoff_packet",
            None,
            "handoff packet for a human reviewer",
        ),
    ];

    /// Parse a payload object. Unknown keys are ignored (agents may add commentary fields).
    pub fn from_payload(payload: &Map<String, Value>) -> Result<Self, SubmissionError> {
        let mut s = Submission::default();
        match crate::json_field(payload, "decision") {
            None | Some(Value::Null) => {}
            Some(Value::String(d)) => {
                s.decision_raw = truncate(d, 64);
                s.decision = Decision::parse_exact(d);
            }
            Some(other) => s.decision_raw = truncate(&other.to_string(), 64),
        }
        s.confidence = opt_prob(payload, "confidence")?;
        s.risk_score = opt_prob(payload, "risk_score")?;
        if let Some(v) = present(payload, "predicted_probabilities") {
            let obj = v.as_object().ok_or_else(|| {
                err(
                    "predicted_probabilities",
                    "must be an object of hypothesis -> probability",
                )
            })?;
            if obj.len() > MAX_MAP_ENTRIES {
                return Err(err("predicted_probabilities", "too many entries"));
            }
            let mut m = BTreeMap::new();
            for (k, v) in obj {
                let p = v.as_f64().ok_or_else(|| {
                    err(&format!("predicted_probabilities.{k}"), "must be a number")
                })?;
                if !p.is_finite() || p < 0.0 {
                    return Err(err(
                        &format!("predicted_probabilities.{k}"),
                        "must be a finite, non-negative number",
                    ));
                }
                m.insert(k.clone(), p);
            }
            s.predicted_probabilities = Some(m);
        }
        s.reason_codes = opt_strings(payload, "reason_codes")?;
        s.fraud_flags = opt_strings(payload, "fraud_flags")?;
        s.discrepancies = opt_strings(payload, "discrepancies")?;
        s.campaign_signals = opt_strings(payload, "campaign_signals")?;
        s.duplicate_links = opt_strings(payload, "duplicate_links")?;
        s.cross_invoice_links = opt_strings(payload, "cross_invoice_links")?;
        if let Some(v) = present(payload, "policy_checks") {
            let obj = v.as_object().ok_or_else(|| {
                err(
                    "policy_checks",
                    "must be an object of check -> \"pass\"/\"fail\"",
                )
            })?;
            bounded_map(obj, "policy_checks")?;
            for (k, v) in obj {
                let status = match v {
                    Value::String(x) => truncate(x, 64),
                    Value::Bool(b) => (if *b { "pass" } else { "fail" }).to_owned(),
                    _ => return Err(err(&format!("policy_checks.{k}"), "must be a string")),
                };
                s.policy_checks.insert(k.clone(), status);
            }
        }
        if let Some(v) = present(payload, "evidence_map") {
            let obj = v
                .as_object()
                .ok_or_else(|| err("evidence_map", "must be an object of claim -> reference"))?;
            bounded_map(obj, "evidence_map")?;
            s.evidence_map = typed_entries(obj);
        }
        if let Some(v) = present(payload, "extracted_fields") {
            let obj = v
                .as_object()
                .ok_or_else(|| err("extracted_fields", "must be an object of field -> value"))?;
            bounded_map(obj, "extracted_fields")?;
            s.extracted_fields = typed_entries(obj);
        }
        if let Some(v) = present(payload, "line_items") {
            let arr = v
                .as_array()
                .ok_or_else(|| err("line_items", "must be a list"))?;
            if arr.len() > MAX_LIST_ITEMS {
                return Err(err("line_items", "too many items"));
            }
            s.line_items = arr.iter().cloned().map(LineEntry::from).collect();
        }
        s.counterfactual = present_as(payload, "counterfactual");
        s.decision_certificate = present_as(payload, "decision_certificate");
        s.notes = opt_text(payload, "notes")?;
        s.recommended_next_action = opt_text(payload, "recommended_next_action")?;
        s.handoff_packet = present_as(payload, "handoff_packet");
        Ok(s)
    }

    /// Counterfactual as text (a string, or an object's `text`/`statement`/`summary`).
    pub fn counterfactual_text(&self) -> String {
        self.counterfactual
            .as_ref()
            .map(Counterfactual::text)
            .unwrap_or_default()
    }
}

fn present<'a>(payload: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    crate::json_field(payload, key).filter(|v| !v.is_null())
}

/// A present value, typed.
fn present_as<T: From<Value>>(payload: &Map<String, Value>, key: &str) -> Option<T> {
    present(payload, key).cloned().map(T::from)
}

/// An object's entries, each value typed.
fn typed_entries<T: From<Value>>(obj: &Map<String, Value>) -> BTreeMap<String, T> {
    obj.iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect()
}

fn truncate(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

fn bounded_map(obj: &Map<String, Value>, field: &str) -> Result<(), SubmissionError> {
    if obj.len() > MAX_MAP_ENTRIES {
        return Err(err(field, format!("at most {MAX_MAP_ENTRIES} entries")));
    }
    Ok(())
}

fn opt_prob(payload: &Map<String, Value>, key: &str) -> Result<Option<f64>, SubmissionError> {
    match present(payload, key) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            let v = n.as_f64().unwrap_or(f64::NAN);
            if !(0.0..=1.0).contains(&v) {
                return Err(err(key, "must be a number between 0 and 1"));
            }
            Ok(Some(v))
        }
        Some(Value::String(s)) => match s.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(Some(v)),
            _ => Err(err(key, "must be a number between 0 and 1")),
        },
        Some(_) => Err(err(key, "must be a number between 0 and 1")),
    }
}

fn opt_strings(
    payload: &Map<String, Value>,
    key: &str,
) -> Result<Option<Vec<String>>, SubmissionError> {
    match present(payload, key) {
        None => Ok(None),
        Some(Value::Array(items)) => {
            if items.len() > MAX_LIST_ITEMS {
                return Err(err(key, format!("at most {MAX_LIST_ITEMS} items")));
            }
            items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(truncate(s, 256)),
                    _ => Err(err(&format!("{key}[{i}]"), "must be a string")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some)
        }
        // A single string is accepted as a one-item list.
        Some(Value::String(s)) => Ok(Some(vec![truncate(s, 256)])),
        Some(_) => Err(err(key, "must be a list of strings")),
    }
}

fn opt_text(payload: &Map<String, Value>, key: &str) -> Result<Option<String>, SubmissionError> {
    match present(payload, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(truncate(s, MAX_TEXT_CHARS))),
        Some(_) => Err(err(key, "must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    /// `FIELDS` is what `from_payload` reads: each listed field, sent alone with a value of its
    /// type, changes the submission (it is read), a value of another type is refused naming it
    /// (the decision, which is never refused, keeps the raw text instead), and every slot of the
    /// submission is filled from a listed field (nothing is read that the table omits).
    #[test]
    fn field_table_is_what_the_parser_reads() {
        let empty = Submission::default();
        for f in Submission::FIELDS {
            let (good, bad) = match f.json_type {
                Some("string") => (json!("PAY"), Some(json!([[1]]))),
                Some("number") => (json!(0.5), Some(json!([[1]]))),
                Some("object") if f.name == "predicted_probabilities" => {
                    (json!({"safe": 0.5}), Some(json!([[1]])))
                }
                Some("object") => (json!({"k": "pass"}), Some(json!([[1]]))),
                Some("strings") => (json!(["a"]), Some(json!(5))),
                Some("array") => (json!([{"line": 1}]), Some(json!(5))),
                None => (json!({"any": 1}), None),
                Some(other) => panic!("unknown type {other}"),
            };
            let parsed = Submission::from_payload(&obj(json!({ f.name: good }))).unwrap();
            assert_ne!(parsed, empty, "{} is listed but not read", f.name);
            if let Some(bad) = bad {
                match Submission::from_payload(&obj(json!({ f.name: bad }))) {
                    Err(e) => assert_eq!(e.field, f.name),
                    Ok(s) => assert_eq!((f.name, s.decision_raw.as_str()), ("decision", "[[1]]")),
                }
            }
        }
        let slots = serde_json::to_value(&empty).unwrap();
        let mut slots: Vec<&str> = slots
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        slots.retain(|k| *k != "decision_raw"); // the raw text of `decision`
        let mut listed: Vec<&str> = Submission::FIELDS.iter().map(|f| f.name).collect();
        slots.sort_unstable();
        listed.sort_unstable();
        assert_eq!(slots, listed);
    }

    #[test]
    fn parses_full_payload() {
        let s = Submission::from_payload(&obj(json!({
            "decision": "ESCALATE_FRAUD", "confidence": 0.9,
            "reason_codes": ["sender_domain_spoof"], "policy_checks": {"three_way_match": "PASS"},
            "evidence_map": {"x": {"doc_id": "INV-1"}}, "predicted_probabilities": {"safe": 0.1, "ceo_bec": 0.9}
        })))
        .unwrap();
        assert_eq!(s.decision, Some(Decision::EscalateFraud));
        assert_eq!(
            s.reason_codes.as_deref(),
            Some(&["sender_domain_spoof".to_owned()][..])
        );
        assert!(s.discrepancies.is_none());
        assert_eq!(s.policy_checks["three_way_match"], "PASS");
    }

    #[test]
    fn invalid_decision_is_not_a_type_error() {
        let s = Submission::from_payload(&obj(json!({"decision": "pay"}))).unwrap();
        assert_eq!(s.decision, None);
        assert_eq!(s.decision_raw, "pay");
    }

    #[test]
    fn wrong_types_name_the_field() {
        let e = Submission::from_payload(&obj(json!({"decision": "PAY", "reason_codes": 5})))
            .unwrap_err();
        assert_eq!(e.field, "reason_codes");
        let e = Submission::from_payload(&obj(json!({"decision": "PAY", "confidence": 3})))
            .unwrap_err();
        assert_eq!(e.field, "confidence");
        let e =
            Submission::from_payload(&obj(json!({"decision": "PAY", "policy_checks": {"a": 1}})))
                .unwrap_err();
        assert_eq!(e.field, "policy_checks.a");
    }
}
