//! Wire types the environment returns: the observation, the step envelope and the public state.

use ls_core::episode::{EventStatus, InterventionLogEntry, RevealedArtifact, TrajectoryEntry};
use ls_core::{ActionName, ArtifactId};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

/// The raw-JSON object types (and the step info) document themselves as a plain JSON object.
macro_rules! json_object_schema {
    ($t:ty) => {
        impl JsonSchema for $t {
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
    };
}
pub(crate) use json_object_schema;

/// A JSON object serialized once and shared by `Arc`.
///
/// Parts of the observation that change rarely (institutional memory, the portfolio context) are
/// written into every reply as pre-serialized bytes instead of walking a map tree per step; the
/// wire format is unchanged. Invariant: the text is always a JSON object.
#[derive(Clone)]
pub struct SharedJson(RawJson);

impl SharedJson {
    /// Serialize a value that is a JSON object (a map or a struct of JSON-safe fields).
    pub fn from_serialize<T: Serialize + ?Sized>(value: &T) -> Self {
        // Maps of JSON values and our derived structs cannot fail to serialize (string keys).
        // Serializer output is valid JSON: no re-parse to validate it.
        let raw = RawJson::from_serialize(value);
        debug_assert!(raw.get().starts_with('{'), "SharedJson holds JSON objects");
        Self(raw)
    }

    /// Wrap JSON text that is an object.
    pub fn from_raw(raw: RawJson) -> Self {
        debug_assert!(raw.get().starts_with('{'), "SharedJson holds JSON objects");
        Self(raw)
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
        static EMPTY: LazyLock<SharedJson> =
            LazyLock::new(|| SharedJson::from_serialize(&Map::new()));
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
        self.0 == other.0
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
        Map::<String, Value>::deserialize(d).map(|m| Self::from_serialize(&m))
    }
}

json_object_schema!(SharedJson);

/// Pre-serialized JSON text of any kind, shared by `Arc` (a report written once into `info` and
/// into `last_tool_result`). See `ls_json` for how it is written.
pub use ls_json::RawJson;

/// Serialize any value to shared raw JSON text (`null` if it cannot be serialized, which our
/// report types never do: string keys).
pub fn raw_json<T: Serialize + ?Sized>(value: &T) -> RawJson {
    RawJson::from_serialize(value)
}

/// One value of an [`InfoMap`]: a JSON tree, pre-serialized text, or a scalar kept unboxed (most
/// entries of a step's `info` and tool record are flags, counts, rounded scores and static
/// names; storing them as `Value`s cost an allocation each, and one more for every key).
#[derive(Clone)]
enum Entry {
    Tree(Value),
    Raw(RawJson),
    Str(Cow<'static, str>),
    F64(f64),
    U64(u64),
    Bool(bool),
}

impl Entry {
    fn to_value(&self) -> Value {
        match self {
            Entry::Tree(v) => v.clone(),
            Entry::Raw(r) => serde_json::from_str(r.get()).unwrap_or(Value::Null),
            Entry::Str(s) => Value::String(s.to_string()),
            // `json!(f64)` semantics: a non-finite float is `null`.
            Entry::F64(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Entry::U64(n) => Value::from(*n),
            Entry::Bool(b) => Value::Bool(*b),
        }
    }
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Entry::Tree(v) => v.serialize(s),
            Entry::Raw(r) => r.serialize(s),
            Entry::Str(v) => s.serialize_str(v),
            // As `serde_json` writes a `Value` made by `json!(f)`: non-finite floats are `null`.
            Entry::F64(f) if f.is_finite() => s.serialize_f64(*f),
            Entry::F64(_) => s.serialize_unit(),
            Entry::U64(n) => s.serialize_u64(*n),
            Entry::Bool(b) => s.serialize_bool(*b),
        }
    }
}

/// A value for [`InfoMap::insert`]: any JSON tree, or a scalar stored without a tree.
pub struct InfoValue(Entry);

impl From<Value> for InfoValue {
    fn from(v: Value) -> Self {
        Self(Entry::Tree(v))
    }
}

impl From<&'static str> for InfoValue {
    fn from(v: &'static str) -> Self {
        Self(Entry::Str(Cow::Borrowed(v)))
    }
}

impl From<String> for InfoValue {
    fn from(v: String) -> Self {
        Self(Entry::Str(Cow::Owned(v)))
    }
}

impl From<f64> for InfoValue {
    fn from(v: f64) -> Self {
        Self(Entry::F64(v))
    }
}

impl From<bool> for InfoValue {
    fn from(v: bool) -> Self {
        Self(Entry::Bool(v))
    }
}

impl From<usize> for InfoValue {
    fn from(v: usize) -> Self {
        Self(Entry::U64(v as u64))
    }
}

impl From<u32> for InfoValue {
    fn from(v: u32) -> Self {
        Self(Entry::U64(u64::from(v)))
    }
}

/// A key of an [`InfoMap`]: almost always a static name, so no allocation.
pub type InfoKey = Cow<'static, str>;

/// An insertion-ordered JSON object whose values are JSON trees, pre-serialized text or scalars:
/// the observation's `last_tool_result` (a tool's own payload, open-ended by nature) and a step
/// `info` read back from a reply (`StepInfo::Read`); the episode writes its `info` from typed
/// structs (`crate::terminal_info`).
///
/// Grading reports and the control boundary are pre-serialized entries, not `Value` trees walked
/// again to write the reply; the wire format is that of a JSON object with the same keys in the
/// same order. `insert` keeps a
/// replaced key in its place (as `serde_json::Map` with `preserve_order` does). Readers take
/// values with `get`/`value`, which parse raw entries on demand.
#[derive(Clone, Default)]
pub struct InfoMap {
    entries: Vec<(InfoKey, Entry)>,
}

impl InfoMap {
    /// An empty map with room for a tool record's first entries (a record holds up to ~30),
    /// so the common maps grow at most once. `default()` allocates nothing.
    pub fn new() -> Self {
        Self {
            entries: Vec::with_capacity(8),
        }
    }

    /// An empty map with room for `entry_count` entries (a tool record, a terminal `info`).
    pub fn with_capacity(entry_count: usize) -> Self {
        Self {
            entries: Vec::with_capacity(entry_count),
        }
    }

    fn put(&mut self, key: InfoKey, e: Entry) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = e,
            None => self.entries.push((key, e)),
        }
    }

    /// Insert or replace a value (a JSON tree or a scalar).
    pub fn insert(&mut self, key: impl Into<InfoKey>, value: impl Into<InfoValue>) {
        self.put(key.into(), value.into().0);
    }

    /// Insert or replace pre-serialized JSON.
    pub fn insert_raw(&mut self, key: impl Into<InfoKey>, raw: RawJson) {
        self.put(key.into(), Entry::Raw(raw));
    }

    /// Insert or replace a value serialized straight from its `Serialize` impl.
    pub fn insert_serialized<T: Serialize + ?Sized>(&mut self, key: impl Into<InfoKey>, value: &T) {
        self.put(key.into(), Entry::Raw(raw_json(value)));
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k == key)
    }

    /// The value under `key`, parsed if it was stored pre-serialized.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, e)| e.to_value())
    }

    /// The value under `key`, `null` when absent (like indexing a `Value`).
    pub fn value(&self, key: &str) -> Value {
        self.get(key).unwrap_or(Value::Null)
    }

    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| k != key);
        self.entries.len() != before
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_ref())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Move every entry of `other` in, in order (replacing equal keys in place).
    pub fn extend(&mut self, other: InfoMap) {
        for (k, e) in other.entries {
            self.put(k, e);
        }
    }

    /// The whole object as a `serde_json::Map` (parses raw entries; for readers, not the hot path).
    pub fn to_map(&self) -> Map<String, Value> {
        self.entries
            .iter()
            .map(|(k, e)| (k.to_string(), e.to_value()))
            .collect()
    }
}

impl From<Map<String, Value>> for InfoMap {
    fn from(map: Map<String, Value>) -> Self {
        Self {
            entries: map
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k), Entry::Tree(v)))
                .collect(),
        }
    }
}

impl PartialEq for InfoMap {
    fn eq(&self, other: &Self) -> bool {
        self.to_map() == other.to_map()
    }
}

impl std::fmt::Debug for InfoMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self).unwrap_or_default())
    }
}

impl Serialize for InfoMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.entries.len()))?;
        for (k, e) in &self.entries {
            m.serialize_entry(k.as_ref(), e)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for InfoMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::<String, Value>::deserialize(d).map(Self::from)
    }
}

json_object_schema!(InfoMap);

/// A read-only value shared by `Arc` together with its JSON text, serialized once.
///
/// The observation repeats some parts on every step (instruction, document catalogue, action
/// lists); they are written as pre-serialized bytes rather than re-escaped per reply, and read as
/// the typed value through `Deref`. Invariant: `json` is the serialization of `value`.
pub struct Shared<T: ?Sized> {
    value: Arc<T>,
    json: RawJson,
}

impl<T: Serialize + ?Sized> Shared<T> {
    pub fn new(value: Arc<T>) -> Self {
        let json = raw_json(&*value);
        Self { value, json }
    }
}

impl<T: ?Sized> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self {
            value: self.value.clone(),
            json: self.json.clone(),
        }
    }
}

impl<T: ?Sized> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: ?Sized + PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: ?Sized> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl<'de, T: Serialize + ?Sized> Deserialize<'de> for Shared<T>
where
    Arc<T>: Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Arc::<T>::deserialize(d).map(Self::new)
    }
}

impl<T: ?Sized> JsonSchema for Shared<T>
where
    Arc<T>: JsonSchema,
{
    fn schema_name() -> std::borrow::Cow<'static, str> {
        <Arc<T>>::schema_name()
    }
    fn inline_schema() -> bool {
        <Arc<T>>::inline_schema()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        <Arc<T>>::json_schema(generator)
    }
}

impl<T: ?Sized + std::fmt::Display> std::fmt::Display for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

impl From<&str> for Shared<str> {
    fn from(s: &str) -> Self {
        Self::new(Arc::from(s))
    }
}

/// Every action name, in catalogue order (shared by all observations).
pub static ALLOWED_ACTIONS: LazyLock<Shared<[String]>> = LazyLock::new(|| {
    Shared::new(
        ls_core::ActionName::ALL
            .iter()
            .map(|a| a.as_str().to_owned())
            .collect(),
    )
});
/// Intervention names (shared by all observations).
pub static AVAILABLE_INTERVENTIONS: LazyLock<Shared<[String]>> = LazyLock::new(|| {
    Shared::new(
        ls_core::ActionName::interventions()
            .map(|a| a.as_str().to_owned())
            .collect(),
    )
});

/// Views every document offers.
pub const AVAILABLE_VIEWS: [&str; 5] = [
    "thumbnail",
    "zoom",
    "get_doc_crop",
    "ocr_fast",
    "ocr_accurate",
];

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
    pub artifact_id: ArtifactId,
    pub source_action: ActionName,
    pub ready_at_clock: u32,
    pub status: EventStatus,
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
    pub instruction: Shared<str>,
    pub visible_documents: Shared<[DocumentCatalogEntry]>,
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
    pub last_tool_result: InfoMap,
    pub messages: Vec<String>,
    pub allowed_actions: Shared<[String]>,
    pub available_interventions: Shared<[String]>,
    pub case_metadata: SharedJson,
    pub portfolio_context: SharedJson,
    /// Instrumented track only; `{}` in blind mode.
    pub sprt_state: SharedJson,
    /// Instrumented track only; `{}` in blind mode.
    pub tool_rankings: SharedJson,
    /// Instrumented track only; `{}` in blind mode.
    pub reward_machine: SharedJson,
    /// Shared, read-only view of the session's institutional memory.
    pub institutional_memory: SharedJson,
}

/// Blind (default) or instrumented track.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrackMode {
    #[default]
    Blind,
    Instrumented,
}

impl TrackMode {
    pub fn parse(value: &str) -> Self {
        match ls_core::text::normalize_text(value).as_str() {
            "" | "blind" => Self::Blind,
            _ => Self::Instrumented,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blind => "blind",
            Self::Instrumented => "instrumented",
        }
    }
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
    pub revealed_artifact_ids: Vec<ArtifactId>,
    pub trajectory: Vec<TrajectoryEntry>,
    pub interventions_taken: Vec<InterventionLogEntry>,
    pub observed_risk_signals: Vec<String>,
    pub handoff_packet: Option<Value>,
    pub pending_events: Vec<PendingEventView>,
    pub pending_event_count: usize,
    pub portfolio_context: SharedJson,
    /// What the institution knows going into the case (the reference's `/state` field; the same
    /// object as `portfolio_context.institutional_context`; `{}` without institutional memory).
    pub institutional_context: SharedJson,
    /// Instrumented track only.
    pub sprt_state: SharedJson,
    /// Instrumented track only.
    pub tool_rankings: SharedJson,
    /// Instrumented track only.
    pub reward_machine_state: SharedJson,
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
/// Read back by the tests of this module and of the tools.
impl InfoMap {
    /// The raw JSON text under `key`, whichever way it was stored.
    pub(crate) fn get_text(&self, key: &str) -> Option<String> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, e)| match e {
                Entry::Raw(r) => r.get().to_owned(),
                other => other.to_value().to_string(),
            })
    }
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
        let shared = SharedJson::from_serialize(&m);
        assert_eq!(
            serde_json::to_string(&shared).unwrap(),
            serde_json::to_string(&m).unwrap()
        );
        assert_eq!(shared.to_map(), m);
        // Inside a struct, through a Value, and back through Deserialize.
        let v = serde_json::to_value(&shared).unwrap();
        assert_eq!(v, Value::Object(m.clone()));
        let back: SharedJson = serde_json::from_value(v).unwrap();
        assert_eq!(back, shared);
        let from_text: SharedJson =
            serde_json::from_str(r#"{"b":1,"a":[1,2,{"c":"x\"y"}],"z":null}"#).unwrap();
        assert_eq!(from_text, shared);
        assert_eq!(SharedJson::default().get(), "{}");
    }

    #[test]
    fn info_map_writes_one_json_object_in_insertion_order() {
        #[derive(Serialize)]
        struct Report {
            z: u32,
            a: &'static str,
        }
        let mut m = InfoMap::new();
        m.insert("final_score", json!(0.5));
        m.insert_serialized("report", &Report { z: 1, a: "q\"x" });
        m.insert(String::from("tail"), json!([1, 2]));
        // Replacing keeps the key's place (whatever the stored form).
        m.insert("final_score", 0.75);
        m.insert("new", true);
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(
            text,
            r#"{"final_score":0.75,"report":{"z":1,"a":"q\"x"},"tail":[1,2],"new":true}"#
        );
        assert_eq!(m.get("report").unwrap(), json!({"z": 1, "a": "q\"x"}));
        assert_eq!(m.get_text("report").unwrap(), r#"{"z":1,"a":"q\"x"}"#);
        assert_eq!(m.get("missing"), None);
        assert_eq!(
            m.keys().collect::<Vec<_>>(),
            ["final_score", "report", "tail", "new"]
        );
        // Round trip through text and through a Value tree.
        let back: InfoMap = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(serde_json::to_value(&m).unwrap(), Value::Object(m.to_map()));
        // Scalars write and read back exactly as the `Value`s they replace.
        let mut scalars = InfoMap::new();
        let mut tree = Map::new();
        for (k, v, as_value) in [
            (
                "name",
                InfoValue::from("tool \"x\"\n"),
                json!("tool \"x\"\n"),
            ),
            ("owned", InfoValue::from(String::from("é")), json!("é")),
            ("score", InfoValue::from(0.1234), json!(0.1234)),
            ("third", InfoValue::from(1.0 / 3.0), json!(1.0 / 3.0)),
            ("nan", InfoValue::from(f64::NAN), json!(f64::NAN)),
            ("inf", InfoValue::from(f64::INFINITY), json!(f64::INFINITY)),
            ("count", InfoValue::from(7usize), json!(7usize)),
            ("step", InfoValue::from(3u32), json!(3u32)),
            ("flag", InfoValue::from(false), json!(false)),
        ] {
            scalars.insert(k, v);
            assert_eq!(scalars.get(k).unwrap(), as_value, "{k}");
            tree.insert(k.to_owned(), as_value);
        }
        assert_eq!(
            serde_json::to_string(&scalars).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
        assert_eq!(
            ls_json::to_string(&scalars).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
        assert_eq!(scalars.get_text("nan").unwrap(), "null");
        assert_eq!(scalars.to_map(), tree);
        assert!(m.remove("tail") && !m.remove("tail") && !m.contains_key("tail"));
    }

    #[test]
    fn shared_values_write_their_own_serialization() {
        let docs: Shared<[DocumentCatalogEntry]> =
            Shared::new(Arc::from(vec![DocumentCatalogEntry {
                doc_id: "INV-1".into(),
                doc_type: "invoice".into(),
                thumbnail: "t \"q\"".into(),
                page_count: 1,
                language: "en".into(),
                available_views: vec!["zoom".into()],
            }]));
        assert_eq!(
            serde_json::to_string(&docs).unwrap(),
            serde_json::to_string(&*docs).unwrap()
        );
        assert_eq!(docs[0].doc_id, "INV-1");
        let back: Shared<[DocumentCatalogEntry]> =
            serde_json::from_str(&serde_json::to_string(&docs).unwrap()).unwrap();
        assert_eq!(back, docs);
        let text = Shared::from("Review the invoice\n\"now\"");
        assert_eq!(
            serde_json::to_value(&text).unwrap(),
            json!("Review the invoice\n\"now\"")
        );
        assert_eq!(text.to_string(), "Review the invoice\n\"now\"");
        assert_eq!(
            serde_json::to_value(&*ALLOWED_ACTIONS)
                .unwrap()
                .as_array()
                .unwrap()
                .len(),
            ls_core::ActionName::ALL.len()
        );
    }
}
