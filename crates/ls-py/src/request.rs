//! Requests from Python text, read with the rules (and refusal messages) of the HTTP bodies:
//! a step is `{"action_type", "payload"}` or OpenEnv's `{"action": {...}}`; a reset is the
//! `ResetRequest` object; audit requests are their typed structs, a wrong field named by path.

use crate::errors::Refusal;
use serde_json::Value;

/// A ControlBench action (its shape checked as the server checks it).
pub use ls_env::step_body::StepRequest as Action;

/// Parse JSON text; blank text is `null` (an empty body).
pub fn json_text(text: &str) -> Result<Value, Refusal> {
    if text.bytes().all(|b| b.is_ascii_whitespace()) {
        return Ok(Value::Null);
    }
    serde_json::from_str(text).map_err(|e| Refusal::invalid_json(&e))
}

/// A step body's action, with the server's shape rules.
pub fn step_action(text: &str) -> Result<Action, Refusal> {
    ls_env::step_body::parse_step(json_text(text)?).map_err(Refusal::validation)
}

/// A reset body (blank or `null` means defaults).
pub fn reset_request(text: &str) -> Result<ls_env::ResetRequest, Refusal> {
    ls_env::step_body::parse_reset(json_text(text)?).map_err(Refusal::validation)
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
