//! The shapes a step and a reset body may take on the wire, declared once for the HTTP server
//! and the in-process Python module (the same rules, the same refusal messages). A step is
//! `{"action_type", "payload"}` or OpenEnv's `{"action": {...}}` wrapper, whose action may carry
//! its payload fields at the top level; a reset is the [`ResetRequest`] object or nothing.
//!
//! The error is the validation message naming what is wrong; callers wrap it in their own error
//! type (the server answers 422 with it). What this module does not know: which action types
//! exist or what their payloads take ([`crate::ActionRequest::parse`] decides that next).

use crate::ResetRequest;
use serde_json::{Map, Value};

/// A step body, its shape checked.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRequest {
    pub action_type: String,
    pub payload: Map<String, Value>,
    pub session_id: Option<String>,
}

/// Keys beside OpenEnv's `action` wrapper.
const WRAPPER_KEYS: [&str; 5] = [
    "action",
    "timeout_s",
    "request_id",
    "session_id",
    "metadata",
];
/// Keys of a bare action.
const ACTION_KEYS: [&str; 4] = ["action_type", "payload", "session_id", "metadata"];
/// Longest accepted `action_type` (no action name comes close).
const MAX_ACTION_TYPE_CHARS: usize = 128;

/// A step body's shape, naming the offending field.
pub fn parse_step(body: Value) -> Result<StepRequest, String> {
    let Value::Object(mut top) = body else {
        return Err("body must be a JSON object with action_type and payload".into());
    };
    let session_id = match top.get("session_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("session_id must be a string".into()),
    };
    let mut obj = if top.contains_key("action") && !top.contains_key("action_type") {
        if let Some(k) = top.keys().find(|k| !WRAPPER_KEYS.contains(&k.as_str())) {
            return Err(format!("unexpected field '{k}' beside 'action'"));
        }
        match top.remove("action") {
            Some(Value::Object(a)) => a,
            _ => return Err("action must be an object with action_type and payload".into()),
        }
    } else {
        if let Some(k) = top.keys().find(|k| !ACTION_KEYS.contains(&k.as_str())) {
            return Err(format!(
                "unexpected field '{k}': expected action_type and payload"
            ));
        }
        top
    };
    let action_type = match obj.remove("action_type") {
        Some(Value::String(s)) => s,
        None | Some(Value::Null) => return Err("action_type is required".into()),
        Some(_) => return Err("action_type must be a string".into()),
    };
    if action_type.chars().count() > MAX_ACTION_TYPE_CHARS {
        return Err("action_type is too long".into());
    }
    // OpenEnv's generic action model may carry payload fields at the top level of the action.
    let payload = match obj.remove("payload") {
        None | Some(Value::Null) => obj
            .into_iter()
            .filter(|(k, _)| k != "metadata" && k != "session_id")
            .collect(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err("payload must be an object".into()),
    };
    Ok(StepRequest {
        action_type,
        payload,
        session_id,
    })
}

/// A reset body (absent, `null` or `{}` means defaults).
pub fn parse_reset(body: Value) -> Result<ResetRequest, String> {
    match body {
        Value::Null => Ok(ResetRequest::default()),
        Value::Object(_) => serde_json::from_value(body).map_err(|e| format!("reset body: {e}")),
        _ => Err("reset body must be a JSON object".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every accepted shape gives the action; each wrong one is refused naming what is wrong.
    #[test]
    fn step_bodies() {
        let r = parse_step(json!({"action_type": "ocr", "payload": {"doc_id": "X"}})).unwrap();
        assert_eq!((r.action_type.as_str(), r.session_id), ("ocr", None));
        let r = parse_step(
            json!({"action": {"action_type": "zoom", "payload": {"doc_id": "X"}}, "timeout_s": 5}),
        )
        .unwrap();
        assert_eq!(r.action_type, "zoom");
        let r = parse_step(
            json!({"action": {"action_type": "zoom", "doc_id": "X"}, "session_id": "s"}),
        )
        .unwrap();
        assert_eq!(
            (r.payload["doc_id"].as_str(), r.session_id.as_deref()),
            (Some("X"), Some("s"))
        );
        let refused = |body: Value| parse_step(body).unwrap_err();
        assert_eq!(refused(json!({"payload": {}})), "action_type is required");
        assert_eq!(
            refused(json!({"action_type": "ocr", "payload": [1]})),
            "payload must be an object"
        );
        assert_eq!(
            refused(json!({"action_type": 3})),
            "action_type must be a string"
        );
        assert!(refused(json!({"action_type": "ocr", "extra": 1})).contains("'extra'"));
        assert!(refused(json!({"action": 1})).starts_with("action must be an object"));
        assert!(refused(json!({"action": {}, "x": 1})).contains("'x' beside 'action'"));
        assert_eq!(
            refused(json!({"action_type": "ocr", "session_id": 1})),
            "session_id must be a string"
        );
        assert_eq!(
            refused(json!({"action_type": "x".repeat(129)})),
            "action_type is too long"
        );
        assert!(refused(json!([1, 2])).starts_with("body must be a JSON object"));
    }

    #[test]
    fn reset_bodies() {
        assert_eq!(parse_reset(Value::Null).unwrap(), ResetRequest::default());
        assert_eq!(parse_reset(json!({})).unwrap(), ResetRequest::default());
        assert_eq!(
            parse_reset(json!([1])).unwrap_err(),
            "reset body must be a JSON object"
        );
        assert!(parse_reset(json!({"seed": "x"}))
            .unwrap_err()
            .starts_with("reset body: "));
    }
}
