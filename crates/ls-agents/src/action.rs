//! The action an agent takes: an action name and its JSON payload, as the wire carries them, and
//! how one is read from a model's reply ([`parse_action`], [`parse_actions`], [`repair_action`]).
//! The reading lives here, below both of its users, so the prompt (which reads a reply to find the
//! candidate it chose) and the LLM agent (which reads every reply) do not depend on each other.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// One action an agent wants to take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub action_type: String,
    pub payload: Map<String, Value>,
}

impl Action {
    pub fn new(action_type: &str, payload: Value) -> Self {
        let payload = match payload {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Self {
            action_type: action_type.to_owned(),
            payload,
        }
    }
}

/// Parse one action from model text: code fences stripped, first JSON value decoded; accepts
/// `{action_type, payload}`, `{"action": {...}}` and `{"actions": [...]}` (first entry).
pub fn parse_action(text: &str) -> Option<Action> {
    parse_actions(text).and_then(|a| a.into_iter().next())
}

/// Parse every action of a reply: one action, or a plan `{"actions": [...]}` (at most
/// [`MAX_PLAN_ACTIONS`], entries that are not actions skipped). `None` when nothing parses.
pub fn parse_actions(text: &str) -> Option<Vec<Action>> {
    let t = text
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    let start = t.find('{')?;
    let mut de = serde_json::Deserializer::from_str(&t[start..]).into_iter::<Value>();
    let v = de.next()?.ok()?;
    if let Some(list) = v.get("actions").and_then(Value::as_array) {
        let acts: Vec<Action> = list
            .iter()
            .take(MAX_PLAN_ACTIONS)
            .filter_map(action_from_value)
            .collect();
        return (!acts.is_empty()).then_some(acts);
    }
    action_from_value(&v).map(|a| vec![a])
}

/// Longest plan a single reply may queue.
pub const MAX_PLAN_ACTIONS: usize = 64;

fn action_from_value(v: &Value) -> Option<Action> {
    let o = v.as_object()?;
    if let Some(a) = o.get("action").filter(|a| a.is_object()) {
        return action_from_value(a);
    }
    let at = o.get("action_type")?.as_str()?.trim();
    if at.is_empty() || at.len() > 64 {
        return None;
    }
    let payload = o
        .get("payload")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    Some(Action {
        action_type: at.to_owned(),
        payload,
    })
}

/// Partial repair: recover an action name (and decision) from broken JSON.
pub fn repair_action(text: &str) -> Option<Action> {
    let lower = text.to_ascii_lowercase();
    let i = lower.find("\"action_type\"")?;
    let rest = &text[i + 13..];
    let q1 = rest.find('"')?;
    let rest = &rest[q1 + 1..];
    let q2 = rest.find('"')?;
    let at = rest[..q2].trim();
    if at.is_empty() || at.len() > 64 || !at.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return None;
    }
    let mut payload = Map::new();
    if at == "submit_decision" {
        let d = ["ESCALATE_FRAUD", "NEEDS_REVIEW", "HOLD", "PAY"]
            .into_iter()
            .find(|d| text.contains(d))?;
        payload.insert("decision".into(), json!(d));
        payload.insert("confidence".into(), json!(0.5));
        payload.insert("reason_codes".into(), json!(["partial_json_recovery"]));
    }
    Some(Action {
        action_type: at.to_owned(),
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_and_repair() {
        let a = parse_action(
            "```json\n{\"action_type\": \"ocr\", \"payload\": {\"doc_id\": \"X\"}}\n```",
        )
        .unwrap();
        assert_eq!(a.action_type, "ocr");
        assert_eq!(a.payload["doc_id"], "X");
        assert_eq!(
            parse_action("sure! {\"actions\": [{\"action_type\": \"zoom\"}]} trailing")
                .unwrap()
                .action_type,
            "zoom"
        );
        assert!(parse_action("I cannot help with that").is_none());
        let r = repair_action(
            "{\"action_type\": \"submit_decision\", \"payload\": {\"decision\": \"HOLD\", ",
        )
        .unwrap();
        assert_eq!(r.payload["decision"], "HOLD");
        assert!(repair_action("{\"action_type\": \"bad name!\"").is_none());
    }
}
