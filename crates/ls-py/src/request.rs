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

/// A reset of the Python environments: the server's reset, or a draw of the task distribution
/// (`ls_gen::tasks`) when the body names `template_split` or `generator_split`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reset {
    Server(ls_env::ResetRequest),
    Task(TaskReset),
}

impl Default for Reset {
    fn default() -> Self {
        Reset::Server(ls_env::ResetRequest::default())
    }
}

/// A reset drawn from the task distribution: always a new session (so it is a pure function of
/// the selection and the seed), on the case's own track unless one is named.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskReset {
    pub selection: ls_gen::Selection,
    /// The draw seed (`None`: the next seed of the environment's own stream).
    pub seed: Option<u64>,
    pub track: Option<String>,
    pub reward_mode: Option<ls_env::reward::RewardMode>,
}

/// The reset fields a task draw takes besides the two splits (others name a case and are
/// refused with the splits).
const TASK_RESET_FIELDS: [&str; 6] = [
    "seed",
    "track",
    "reward_mode",
    "fresh_institution",
    "episode_id",
    "session_id",
];

fn split_field(
    o: &mut serde_json::Map<String, Value>,
    key: &str,
) -> Result<ls_gen::Split, Refusal> {
    match o.remove(key) {
        None | Some(Value::Null) => Ok(ls_gen::Split::All),
        Some(Value::String(s)) => ls_gen::Split::parse(&s).ok_or_else(|| {
            Refusal::validation(format!(
                "{key} must be one of train, validation, test, all; got '{}'",
                quote(&s)
            ))
        }),
        Some(_) => Err(Refusal::validation(format!("{key} must be a string"))),
    }
}

/// A Python reset body: with `template_split` or `generator_split` (either, each `train`,
/// `validation`, `test` or `all`) a task draw, else the server's reset body.
pub fn reset(text: &str) -> Result<Reset, Refusal> {
    let mut body = json_text(text)?;
    let Some(o) = body.as_object_mut() else {
        return ls_env::step_body::parse_reset(body)
            .map(Reset::Server)
            .map_err(Refusal::validation);
    };
    if !o.contains_key("template_split") && !o.contains_key("generator_split") {
        return ls_env::step_body::parse_reset(body)
            .map(Reset::Server)
            .map_err(Refusal::validation);
    }
    let selection = ls_gen::Selection {
        templates: split_field(o, "template_split")?,
        generators: split_field(o, "generator_split")?,
    };
    if let Some(k) = o.keys().find(|k| !TASK_RESET_FIELDS.contains(&k.as_str())) {
        return Err(Refusal::validation(format!(
            "'{}' cannot be combined with template_split / generator_split (a task draw picks the case; it takes {})",
            quote(k),
            TASK_RESET_FIELDS.join(", ")
        )));
    }
    let req = ls_env::step_body::parse_reset(body).map_err(Refusal::validation)?;
    Ok(Reset::Task(TaskReset {
        selection,
        seed: req.seed,
        track: req.track,
        reward_mode: req.reward_mode,
    }))
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
    fn task_resets() {
        let r = reset(r#"{"template_split": "validation", "seed": 4}"#).unwrap();
        let Reset::Task(t) = r else {
            panic!("a task reset")
        };
        assert_eq!(
            (t.selection.templates, t.selection.generators, t.seed),
            (ls_gen::Split::Validation, ls_gen::Split::All, Some(4))
        );
        assert_eq!(
            reset(r#"{"seed": 4}"#).unwrap(),
            Reset::Server(ls_env::ResetRequest {
                seed: Some(4),
                ..Default::default()
            })
        );
        assert_eq!(reset("").unwrap(), Reset::default());
        let e = reset(r#"{"generator_split": "dev"}"#).unwrap_err();
        assert!(
            e.message.contains("generator_split must be one of"),
            "{}",
            e.message
        );
        let e = reset(r#"{"generator_split": "test", "case_id": "CASE-A-001"}"#).unwrap_err();
        assert!(
            e.message.contains("'case_id' cannot be combined"),
            "{}",
            e.message
        );
        let e = reset(r#"{"template_split": 3}"#).unwrap_err();
        assert_eq!(e.status, 422);
        let e = reset(r#"{"template_split": "all", "seed": "x"}"#).unwrap_err();
        assert!(e.message.starts_with("reset body: "), "{}", e.message);
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
