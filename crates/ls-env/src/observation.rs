//! Wire types the environment returns: the observation, the step envelope and the public state.

use ls_core::episode::{InterventionLogEntry, RevealedArtifact, TrajectoryEntry};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::sync::{Arc, LazyLock};

/// A JSON object serialized once and shared by `Arc`.
///
/// Parts of the observation that change rarely (institutional memory, the portfolio context) are
/// written into every reply as pre-serialized bytes instead of walking a map tree per step; the
/// wire format is unchanged. Invariant: the text is always a JSON object.
#[derive(Clone)]
pub struct SharedJson(Arc<Box<RawValue>>);

impl SharedJson {
    pub fn from_map(map: &Map<String, Value>) -> Self {
        Self::from_serialize(map)
    }

    /// Serialize a value that is a JSON object (a map or a struct of JSON-safe fields).
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Self {
        // Maps of JSON values and our derived structs cannot fail to serialize (string keys, no
        // non-finite floats reach them).
        let text = serde_json::to_string(value).expect("observation parts always serialize");
        debug_assert!(text.starts_with('{'), "SharedJson holds JSON objects");
        Self(Arc::new(RawValue::from_string(text).expect("serde_json output is valid JSON")))
    }

    /// This object with one more entry appended (`key` must not already be present).
    pub fn with_entry(&self, key: &str, value: &RawValue) -> Self {
        let body = self.get().strip_suffix('}').expect("SharedJson holds JSON objects");
        let key = serde_json::to_string(key).expect("a string serializes");
        let sep = if body.len() > 1 { "," } else { "" };
        let text = format!("{body}{sep}{key}:{}}}", value.get());
        Self(Arc::new(RawValue::from_string(text).expect("an object with one more entry is valid JSON")))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Parse back into a map (for readers; the hot path never does this).
    pub fn to_map(&self) -> Map<String, Value> {
        serde_json::from_str(self.get()).unwrap_or_default()
    }
}

impl Default for SharedJson {
    fn default() -> Self {
        static EMPTY: LazyLock<SharedJson> = LazyLock::new(|| SharedJson::from_map(&Map::new()));
        EMPTY.clone()
    }
}

impl std::fmt::Debug for SharedJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

impl PartialEq for SharedJson {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.get() == other.get()
    }
}

impl Serialize for SharedJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for SharedJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Through a map so any deserializer works (raw values only come from serde_json text).
        Map::<String, Value>::deserialize(d).map(|m| Self::from_map(&m))
    }
}

impl JsonSchema for SharedJson {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JsonObject".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Map::<String, Value>::json_schema(generator)
    }
}

/// Every action name, in catalogue order (shared by all observations).
pub static ALLOWED_ACTIONS: LazyLock<Arc<[String]>> = LazyLock::new(|| ls_core::ActionName::ALL.iter().map(|a| a.as_str().to_owned()).collect());
/// Intervention names (shared by all observations).
pub static AVAILABLE_INTERVENTIONS: LazyLock<Arc<[String]>> = LazyLock::new(|| ls_core::ActionName::interventions().map(|a| a.as_str().to_owned()).collect());

/// Views every document offers.
pub const AVAILABLE_VIEWS: [&str; 5] = ["thumbnail", "zoom", "get_doc_crop", "ocr_fast", "ocr_accurate"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DocumentCatalogEntry {
    pub doc_id: String,
    pub doc_type: String,
    pub thumbnail: String,
    pub page_count: u32,
    pub language: String,
    pub available_views: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingEventView {
    pub event_id: String,
    pub artifact_id: String,
    pub source_action: String,
    pub ready_at_clock: u32,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct RiskSnapshot {
    pub observed_risk_bucket: String,
    pub observed_signals: Vec<String>,
    pub observed_signal_count: usize,
    pub pending_event_count: usize,
    pub revealed_artifact_count: usize,
    pub days_until_due: u32,
    pub pressure_events_seen: usize,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct InvestigationStatus {
    pub tool_calls: usize,
    pub interventions_taken: usize,
    pub revealed_artifacts: usize,
    pub budget_used: f64,
    pub pending_events: usize,
}

/// What the agent sees after every reset and step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Observation {
    pub case_id: String,
    pub task_type: String,
    pub instruction: Arc<str>,
    pub visible_documents: Arc<[DocumentCatalogEntry]>,
    pub revealed_artifacts: Vec<RevealedArtifact>,
    pub pending_events: Vec<PendingEventView>,
    pub budget_remaining: f64,
    pub budget_total: f64,
    pub step_count: u32,
    pub max_steps: u32,
    pub case_clock: u32,
    pub risk_snapshot: RiskSnapshot,
    pub investigation_status: InvestigationStatus,
    /// Normalised result of the last action (`{}` on reset).
    pub last_tool_result: Map<String, Value>,
    pub messages: Vec<String>,
    pub allowed_actions: Arc<[String]>,
    pub available_interventions: Arc<[String]>,
    pub case_metadata: SharedJson,
    pub portfolio_context: SharedJson,
    /// Instrumented track only; `{}` in blind mode.
    pub sprt_state: Map<String, Value>,
    /// Instrumented track only; `{}` in blind mode.
    pub tool_rankings: Map<String, Value>,
    /// Instrumented track only; `{}` in blind mode.
    pub reward_machine: Map<String, Value>,
    /// Shared, read-only view of the session's institutional memory.
    pub institutional_memory: SharedJson,
}

/// The envelope returned by reset and step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepEnvelope {
    pub observation: Observation,
    /// Unrounded reward of this step.
    pub reward: f64,
    /// Ended for any reason (`terminated || truncated`).
    pub done: bool,
    /// Ended by the step limit or budget exhaustion.
    pub truncated: bool,
    /// Ended by a valid `submit_decision`.
    pub terminated: bool,
    pub info: Map<String, Value>,
}

/// `GET /state`: the public environment state; never gold, never hidden signals.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PublicState {
    pub episode_id: String,
    pub case_id: String,
    pub task_type: String,
    pub budget_total: f64,
    pub budget_remaining: f64,
    pub max_steps: u32,
    pub step_count: u32,
    pub case_clock: u32,
    pub submitted: bool,
    pub done: bool,
    pub final_score: f64,
    pub unsafe_outcome: bool,
    pub visible_doc_ids: Vec<String>,
    pub revealed_artifact_ids: Vec<String>,
    pub trajectory: Vec<TrajectoryEntry>,
    pub interventions_taken: Vec<InterventionLogEntry>,
    pub observed_risk_signals: Vec<String>,
    pub handoff_packet: Option<Value>,
    pub pending_events: Vec<PendingEventView>,
    pub pending_event_count: usize,
    pub portfolio_context: SharedJson,
    /// Instrumented track only.
    pub sprt_state: Map<String, Value>,
    /// Instrumented track only.
    pub tool_rankings: Map<String, Value>,
    /// Instrumented track only.
    pub reward_machine_state: Map<String, Value>,
    pub terminal_reason: Option<String>,
    pub pressure_events_seen: Vec<String>,
    pub pressure_resistance_score: f64,
    pub contrastive_pair_id: Option<String>,
    pub benchmark_split: String,
    pub benchmark_track: String,
    pub track_mode: String,
    pub institutional_memory: SharedJson,
    pub control_boundary: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn shared_json_writes_the_same_bytes_as_the_map() {
        let m = map(json!({"b": 1, "a": [1, 2, {"c": "x\"y"}], "z": null}));
        let shared = SharedJson::from_map(&m);
        assert_eq!(serde_json::to_string(&shared).unwrap(), serde_json::to_string(&m).unwrap());
        assert_eq!(shared.to_map(), m);
        // Inside a struct, through a Value, and back through Deserialize.
        let v = serde_json::to_value(&shared).unwrap();
        assert_eq!(v, Value::Object(m.clone()));
        let back: SharedJson = serde_json::from_value(v).unwrap();
        assert_eq!(back, shared);
        let from_text: SharedJson = serde_json::from_str(r#"{"b":1,"a":[1,2,{"c":"x\"y"}],"z":null}"#).unwrap();
        assert_eq!(from_text, shared);
        assert_eq!(SharedJson::default().get(), "{}");
    }

    #[test]
    fn with_entry_appends_one_key() {
        let raw = serde_json::value::to_raw_value(&json!({"k": [1]})).unwrap();
        let empty = SharedJson::default().with_entry("x\"q", &raw);
        assert_eq!(empty.to_map(), map(json!({"x\"q": {"k": [1]}})));
        let two = SharedJson::from_map(&map(json!({"a": 1}))).with_entry("b", &raw);
        assert_eq!(two.get(), r#"{"a":1,"b":{"k":[1]}}"#);
    }
}
