//! The action an agent takes: an action name and its JSON payload, as the wire carries them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
