//! Requests from Python text, read with the rules (and refusal messages) of the HTTP bodies:
//! a step is `{"action_type", "payload"}` or OpenEnv's `{"action": {...}}`; a reset is the
//! `ResetRequest` object; audit requests are their typed structs, a wrong field named by path.

use crate::errors::Refusal;
use serde_json::{Map, Value};

/// A ControlBench action.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub action_type: String,
    pub payload: Map<String, Value>,
}

const WRAPPER_KEYS: [&str; 5] = [
    "action",
    "timeout_s",
    "request_id",
    "session_id",
    "metadata",
];
const ACTION_KEYS: [&str; 4] = ["action_type", "payload", "session_id", "metadata"];
const MAX_ACTION_TYPE_CHARS: usize = 128;

/// Parse JSON text; blank text is `null` (an empty body).
pub fn json_text(text: &str) -> Result<Value, Refusal> {
    if text.bytes().all(|b| b.is_ascii_whitespace()) {
        return Ok(Value::Null);
    }
    serde_json::from_str(text).map_err(|e| Refusal::invalid_json(&e))
}

/// A step body's action, with the server's shape rules.
pub fn step_action(text: &str) -> Result<Action, Refusal> {
    let Value::Object(mut top) = json_text(text)? else {
        return Err(Refusal::validation(
            "body must be a JSON object with action_type and payload",
        ));
    };
    match top.get("session_id") {
        None | Some(Value::Null) | Some(Value::String(_)) => {}
        Some(_) => return Err(Refusal::validation("session_id must be a string")),
    }
    let mut obj = if top.contains_key("action") && !top.contains_key("action_type") {
        if let Some(k) = top.keys().find(|k| !WRAPPER_KEYS.contains(&k.as_str())) {
            return Err(Refusal::validation(format!(
                "unexpected field '{k}' beside 'action'"
            )));
        }
        match top.remove("action") {
            Some(Value::Object(a)) => a,
            _ => {
                return Err(Refusal::validation(
                    "action must be an object with action_type and payload",
                ))
            }
        }
    } else {
        if let Some(k) = top.keys().find(|k| !ACTION_KEYS.contains(&k.as_str())) {
            return Err(Refusal::validation(format!(
                "unexpected field '{k}': expected action_type and payload"
            )));
        }
        top
    };
    let action_type = match obj.remove("action_type") {
        Some(Value::String(s)) => s,
        None | Some(Value::Null) => return Err(Refusal::validation("action_type is required")),
        Some(_) => return Err(Refusal::validation("action_type must be a string")),
    };
    if action_type.chars().count() > MAX_ACTION_TYPE_CHARS {
        return Err(Refusal::validation("action_type is too long"));
    }
    let payload = match obj.remove("payload") {
        None | Some(Value::Null) => obj
            .into_iter()
            .filter(|(k, _)| k != "metadata" && k != "session_id")
            .collect(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(Refusal::validation("payload must be an object")),
    };
    Ok(Action {
        action_type,
        payload,
    })
}

/// A reset body (blank or `null` means defaults).
pub fn reset_request(text: &str) -> Result<ls_env::ResetRequest, Refusal> {
    match json_text(text)? {
        Value::Null => Ok(ls_env::ResetRequest::default()),
        body @ Value::Object(_) => serde_json::from_value(body)
            .map_err(|e| Refusal::validation(format!("reset body: {e}"))),
        _ => Err(Refusal::validation("reset body must be a JSON object")),
    }
}

/// An audit body into `T`, naming the offending field; blank text is `{}`.
pub fn audit_typed<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, Refusal> {
    let text = if text.bytes().all(|b| b.is_ascii_whitespace()) {
        "{}"
    } else {
        text
    };
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if path == "." || path.is_empty() {
            missing_field(&inner.to_string()).unwrap_or_else(|| "body".into())
        } else {
            quote(&path)
        };
        audit_env::AuditError::invalid(field, format!("{inner}")).into()
    })
}

fn missing_field(msg: &str) -> Option<String> {
    let i = msg.find("missing field `")?;
    let rest = &msg[i + 15..];
    Some(quote(&rest[..rest.find('`')?]))
}

/// At most 64 characters of client input, marked when cut.
fn quote(s: &str) -> String {
    match s.char_indices().nth(64) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_shapes() {
        let a = step_action(r#"{"action_type": "ocr", "payload": {"doc_id": "X"}}"#).unwrap();
        assert_eq!(a.action_type, "ocr");
        let a = step_action(r#"{"action": {"action_type": "zoom", "doc_id": "X"}}"#).unwrap();
        assert_eq!(a.payload["doc_id"], "X");
        let e = step_action(r#"{"payload": {}}"#).unwrap_err();
        assert_eq!(
            (e.status, e.code, e.message.as_str()),
            (422, "validation_error", "action_type is required")
        );
        assert_eq!(step_action("{").unwrap_err().code, "invalid_json");
        assert!(step_action(r#"{"action_type": "ocr", "x": 1}"#)
            .unwrap_err()
            .message
            .contains("'x'"));
    }

    #[test]
    fn reset_and_audit_bodies() {
        assert_eq!(reset_request("").unwrap(), ls_env::ResetRequest::default());
        let e = reset_request(r#"{"seed": "x"}"#).unwrap_err();
        assert!(e.message.starts_with("reset body: "), "{}", e.message);
        let e = audit_typed::<audit_env::episode::AuditStepRequest>(
            r#"{"findings": [{"document_id": 3}]}"#,
        )
        .unwrap_err();
        assert_eq!((e.status, e.code), (422, "invalid_request"));
        // As the server answers: `detail` is the message (the server adds the field name as
        // `error.field`).
        assert_eq!(e.detail, e.message);
        assert!(e.message.starts_with("invalid request"), "{}", e.message);
    }
}
