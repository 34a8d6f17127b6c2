//! The two channels of a reply.
//!
//! * **Content** is what the agent's own actions revealed: the tool's payload in
//!   `last_tool_result`, delivered artifacts' summaries and details, the step's messages (a tool's
//!   or an artifact's words), and the environment's *detector readings* of that content — the
//!   observed risk signals and their bucket and count (`risk_snapshot`, `/state`'s
//!   `observed_risk_signals`), and the control boundary's owed follow-ups and prompt-injection
//!   flag. Content may differ between a benign case and its risky twin: that is the evidence.
//! * **Structure** is everything else: the reward and every reward component and metadata entry,
//!   `info`, budget, step and clock counts, the boundary's phase and warnings, pending events and
//!   their timing, the document catalogue, the instruction, ids, metadata, memory. On the blind
//!   track (`reward_mode: score`) structure is a function of the action sequence and the case's
//!   public structure only (standing decision 14): a benign case and its risky twin played with the
//!   same actions give byte-identical structure up to the submission, ids renamed
//!   (`tests/reward.rs`). A policy that reads structure alone reads no evidence.
//!
//! [`structure`] returns a reply with its content removed; the twin property test, the leak test
//! and the learned attacker (`ls-agents`) all read replies through it, so the line between the
//! channels is drawn once. It works on the wire form (a reply as JSON), the form every client sees.

use serde_json::{Map, Value};

/// `last_tool_result` keys that are structure; every other key is the tool's own payload.
pub const RESULT_STRUCTURE_KEYS: [&str; 10] = [
    "tool_name",
    "success",
    "cost",
    "error",
    "intervention",
    "scheduled_event",
    "revealed_artifact_ids",
    "pressure_event",
    "control_boundary",
    "reward_model",
];

/// Artifact keys that are structure (the rest, summary and details, is what the artifact says).
pub const ARTIFACT_STRUCTURE_KEYS: [&str; 4] = [
    "artifact_id",
    "artifact_type",
    "revealed_at_clock",
    "source_action",
];

/// Control-boundary keys that read the observed signals (detector readings: content).
pub const BOUNDARY_CONTENT_KEYS: [&str; 2] = ["required_followups", "prompt_injection_detected"];

/// `risk_snapshot` keys that read the observed signals.
pub const RISK_CONTENT_KEYS: [&str; 3] = [
    "observed_risk_bucket",
    "observed_signals",
    "observed_signal_count",
];

/// The structure of a step or reset envelope (`{observation, reward, done, ..., info}`) or of a
/// `GET /state` reply: the same JSON with every content field removed.
pub fn structure(reply: &Value) -> Value {
    let mut v = reply.clone();
    if let Some(o) = v.as_object_mut() {
        if let Some(obs) = o.get_mut("observation").and_then(Value::as_object_mut) {
            strip_observation(obs);
        }
        if let Some(info) = o.get_mut("info").and_then(Value::as_object_mut) {
            strip_info(info);
        }
        strip_state(o);
    }
    v
}

fn strip_observation(obs: &mut Map<String, Value>) {
    obs.remove("messages");
    if let Some(r) = obs
        .get_mut("last_tool_result")
        .and_then(Value::as_object_mut)
    {
        r.retain(|k, _| RESULT_STRUCTURE_KEYS.contains(&k.as_str()));
        strip_boundary(r.get_mut("control_boundary"));
    }
    strip_artifacts(obs.get_mut("revealed_artifacts"));
    if let Some(r) = obs.get_mut("risk_snapshot").and_then(Value::as_object_mut) {
        r.retain(|k, _| !RISK_CONTENT_KEYS.contains(&k.as_str()));
    }
}

fn strip_info(info: &mut Map<String, Value>) {
    strip_artifacts(info.get_mut("async_artifacts"));
    strip_boundary(info.get_mut("control_boundary"));
}

/// `GET /state`: the trajectory's messages, the observed signals, the hand-off's copy of them
/// and the boundary's readings are content.
fn strip_state(state: &mut Map<String, Value>) {
    state.remove("observed_risk_signals");
    if let Some(t) = state.get_mut("trajectory").and_then(Value::as_array_mut) {
        for e in t.iter_mut().filter_map(Value::as_object_mut) {
            e.remove("message");
        }
    }
    if let Some(h) = state
        .get_mut("handoff_packet")
        .and_then(Value::as_object_mut)
    {
        h.remove("observed_risk_signals");
    }
    if state.contains_key("trajectory") {
        strip_boundary(state.get_mut("control_boundary"));
        strip_artifacts(state.get_mut("revealed_artifacts"));
    }
}

fn strip_boundary(b: Option<&mut Value>) {
    if let Some(b) = b.and_then(Value::as_object_mut) {
        b.retain(|k, _| !BOUNDARY_CONTENT_KEYS.contains(&k.as_str()));
    }
}

fn strip_artifacts(a: Option<&mut Value>) {
    if let Some(list) = a.and_then(Value::as_array_mut) {
        for art in list.iter_mut().filter_map(Value::as_object_mut) {
            art.retain(|k, _| ARTIFACT_STRUCTURE_KEYS.contains(&k.as_str()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn content_goes_and_structure_stays() {
        let reply = json!({
            "observation": {
                "case_id": "C", "messages": ["Bank account does not match"],
                "last_tool_result": {"tool_name": "compare_bank_account", "success": true,
                    "matched": false, "cost": 0.2,
                    "control_boundary": {"phase": "corroboration", "required_followups": ["x"]},
                    "reward_model": {"value": -0.01}},
                "revealed_artifacts": [{"artifact_id": "a", "summary": "s", "details": {}}],
                "risk_snapshot": {"observed_signals": ["bank_account_mismatch"],
                    "observed_signal_count": 1, "pending_event_count": 0},
            },
            "reward": -0.01,
            "info": {"control_boundary": {"phase": "corroboration", "prompt_injection_detected": true},
                "async_artifacts": [{"artifact_id": "a", "details": {"k": 1}}]},
        });
        let s = structure(&reply);
        assert_eq!(
            s,
            json!({
                "observation": {
                    "case_id": "C",
                    "last_tool_result": {"tool_name": "compare_bank_account", "success": true,
                        "cost": 0.2, "control_boundary": {"phase": "corroboration"},
                        "reward_model": {"value": -0.01}},
                    "revealed_artifacts": [{"artifact_id": "a"}],
                    "risk_snapshot": {"pending_event_count": 0},
                },
                "reward": -0.01,
                "info": {"control_boundary": {"phase": "corroboration"},
                    "async_artifacts": [{"artifact_id": "a"}]},
            })
        );
    }
}
