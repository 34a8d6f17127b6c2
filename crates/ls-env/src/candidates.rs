//! The legal candidate actions of an observation: a finite, ordered list of complete actions
//! (action type and payload) built from what the observation shows, for agents that choose an
//! index instead of writing an action (the Python Gymnasium environments' `Discrete` action).
//!
//! Only the observation is read, never the case or its gold: the list is a function of the
//! visible document catalogue, the allowed actions and the available interventions, so it leaks
//! nothing the agent cannot see. Tools that need an id the agent must first read from a document
//! (vendor keys, PO and receipt numbers) are not enumerated; they stay reachable as typed actions.

use crate::observation::Observation;
use serde_json::{json, Map, Value};

/// The decisions a candidate `submit_decision` may carry, in this order.
pub const DECISIONS: [&str; 4] = ["PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD"];
/// The confidence a candidate submission states.
pub const CANDIDATE_CONFIDENCE: f64 = 0.8;

/// One complete action.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub action_type: &'static str,
    pub payload: Map<String, Value>,
}

impl Candidate {
    fn new(action_type: &'static str, payload: Value) -> Self {
        let payload = match payload {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Self {
            action_type,
            payload,
        }
    }

    /// `{"action_type": ..., "payload": {...}}`, the body `POST /step` accepts.
    pub fn to_json(&self) -> Value {
        json!({"action_type": self.action_type, "payload": self.payload})
    }
}

/// The candidate actions of `obs`, in a fixed order: OCR of every visible document (fast, then
/// accurate), the email threads among them, the policy lookup, every available intervention,
/// then one submission per decision. An action the observation does not allow is left out; an
/// ended episode (`done`) has none.
pub fn candidates(obs: &Observation, done: bool) -> Vec<Candidate> {
    if done {
        return Vec::new();
    }
    let allowed = |name: &str| obs.allowed_actions.iter().any(|a| a == name);
    let mut out = Vec::new();
    if allowed("ocr") {
        for doc in obs.visible_documents.iter() {
            for mode in ["fast", "accurate"] {
                out.push(Candidate::new(
                    "ocr",
                    json!({"doc_id": doc.doc_id, "mode": mode}),
                ));
            }
        }
    }
    if allowed("inspect_email_thread") {
        for doc in obs
            .visible_documents
            .iter()
            .filter(|d| d.doc_type == "email")
        {
            out.push(Candidate::new(
                "inspect_email_thread",
                json!({"thread_id": doc.doc_id}),
            ));
        }
    }
    if allowed("lookup_policy") {
        out.push(Candidate::new("lookup_policy", json!({})));
    }
    for name in obs.available_interventions.iter() {
        if let Some(action) = ls_core::ActionName::ALL
            .into_iter()
            .find(|a| a.as_str() == name && a.is_intervention())
        {
            out.push(intervention(action.as_str()));
        }
    }
    if allowed("submit_decision") {
        for decision in DECISIONS {
            out.push(Candidate::new(
                "submit_decision",
                json!({"decision": decision, "confidence": CANDIDATE_CONFIDENCE, "reason_codes": []}),
            ));
        }
    }
    out
}

fn intervention(name: &'static str) -> Candidate {
    if name == "create_human_handoff" {
        return Candidate::new(
            name,
            json!({"summary": "Escalated for human review.", "recommended_next_step": "Review the case documents."}),
        );
    }
    Candidate::new(name, json!({}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CasePool, EnvConfig, Environment, ResetRequest};
    use std::sync::Arc;

    fn env() -> Environment {
        let pool = CasePool::new(ls_core::FixtureSet::embedded().expect("fixtures"));
        Environment::new(Arc::new(pool), EnvConfig::default())
    }

    /// Every candidate of every curated case's first observation is a step the environment
    /// accepts (no payload error), and the list names only visible documents.
    #[test]
    fn every_candidate_is_a_valid_step() {
        let mut e = env();
        let ids: Vec<String> = e.pool().cases.iter().map(|c| c.case_id.clone()).collect();
        for id in ids {
            let req = ResetRequest {
                case_id: Some(id.clone()),
                ..Default::default()
            };
            let first = e.reset(&req).expect("reset");
            let list = candidates(&first.observation, first.done);
            assert!(list.len() >= 6, "{id}: {}", list.len());
            let visible: Vec<&str> = first
                .observation
                .visible_documents
                .iter()
                .map(|d| d.doc_id.as_str())
                .collect();
            for c in &list {
                if let Some(Value::String(doc)) = c.payload.get("doc_id") {
                    assert!(visible.contains(&doc.as_str()), "{id}: {doc}");
                }
                e.reset(&req).expect("reset");
                let out = e.step(c.action_type, &c.payload);
                assert!(out.is_ok(), "{id}: {:?} -> {:?}", c, out.err());
            }
            let submits = list
                .iter()
                .filter(|c| c.action_type == "submit_decision")
                .count();
            assert_eq!(submits, DECISIONS.len(), "{id}");
        }
    }

    #[test]
    fn an_ended_episode_has_no_candidates() {
        let mut e = env();
        let first = e
            .reset(&ResetRequest {
                case_id: Some("CASE-D-001".into()),
                ..Default::default()
            })
            .unwrap();
        let submit = candidates(&first.observation, false)
            .into_iter()
            .find(|c| c.action_type == "submit_decision")
            .unwrap();
        let last = e.step(submit.action_type, &submit.payload).unwrap();
        assert!(last.done);
        assert!(candidates(&last.observation, last.done).is_empty());
    }
}
