//! Public records of an episode that the loop writes and grading reads: trajectory entries,
//! revealed artifacts, pending events and the intervention log.

use crate::enums::{ActionName, ArtifactId, BoundaryPhase, BoundaryWarning};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An action's payload as the agent sent it, kept only to be shown back (the trajectory, the
/// intervention log, replays and exports): nothing computes on it, and it serializes to exactly
/// what was kept. Long strings, long lists and objects, and deep nesting are cut
/// ([`SentPayload::bounded`]) so an episode's state stays bounded whatever an agent sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct SentPayload(Map<String, Value>);

impl SentPayload {
    /// Most characters of a string kept.
    pub const MAX_STRING_CHARS: usize = 2_000;
    /// Most entries of a list or object kept.
    pub const MAX_ENTRIES: usize = 256;
    /// Deepest nesting kept (a list or object below it becomes `null`).
    pub const MAX_DEPTH: u32 = 8;

    /// The payload with every string, list and object cut to the limits above.
    pub fn bounded(payload: &Map<String, Value>) -> Self {
        fn cut(v: &Value, depth: u32) -> Value {
            match v {
                Value::String(s) if s.chars().count() > SentPayload::MAX_STRING_CHARS => {
                    Value::String(s.chars().take(SentPayload::MAX_STRING_CHARS).collect())
                }
                Value::Array(a) if depth < SentPayload::MAX_DEPTH => Value::Array(
                    a.iter()
                        .take(SentPayload::MAX_ENTRIES)
                        .map(|x| cut(x, depth + 1))
                        .collect(),
                ),
                Value::Object(o) if depth < SentPayload::MAX_DEPTH => Value::Object(
                    o.iter()
                        .take(SentPayload::MAX_ENTRIES)
                        .map(|(k, x)| (k.clone(), cut(x, depth + 1)))
                        .collect(),
                ),
                Value::Array(_) | Value::Object(_) => Value::Null,
                other => other.clone(),
            }
        }
        let kept: Map<String, Value> = payload
            .iter()
            .take(Self::MAX_ENTRIES)
            .map(|(k, v)| (k.clone(), cut(v, 0)))
            .collect();
        debug_assert!(kept.len() <= Self::MAX_ENTRIES);
        Self(kept)
    }

    /// The kept payload, to show back.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }

    /// The kept payload without the fields named in `hidden` (what a second agent may see).
    pub fn without(&self, hidden: &[&str]) -> Self {
        let mut shown = self.0.clone();
        for k in hidden {
            shown.remove(*k);
        }
        Self(shown)
    }
}

impl From<Map<String, Value>> for SentPayload {
    /// The payload, bounded as [`SentPayload::bounded`] bounds it.
    fn from(payload: Map<String, Value>) -> Self {
        Self::bounded(&payload)
    }
}

wire_enum! {
    /// Whether a scheduled artifact has arrived.
    pub enum EventStatus {
        Pending = "pending",
        Completed = "completed",
    }
}

/// One executed (not rejected) action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrajectoryEntry {
    pub step: u32,
    pub case_clock: u32,
    pub action_type: ActionName,
    pub payload: SentPayload,
    /// Budget units charged (4 dp).
    pub cost: f64,
    pub success: bool,
    pub message: String,
    pub is_intervention: bool,
    pub control_boundary_phase: BoundaryPhase,
    pub control_boundary_warnings: Vec<BoundaryWarning>,
}

/// An artifact delivered to the agent by a delayed event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RevealedArtifact {
    pub artifact_id: ArtifactId,
    pub artifact_type: String,
    pub summary: String,
    /// Computed from fixture data; never gold labels.
    pub details: Map<String, Value>,
    pub revealed_at_clock: u32,
    pub source_action: ActionName,
}

/// A scheduled delayed artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingEvent {
    pub event_id: String,
    pub artifact_id: ArtifactId,
    pub source_action: ActionName,
    pub scheduled_at_clock: u32,
    pub ready_at_clock: u32,
    pub status: EventStatus,
}

/// Intervention log entry (`interventions_taken`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InterventionLogEntry {
    pub action_type: ActionName,
    pub status: EventStatus,
    pub payload: SentPayload,
    pub artifact_id: Option<ArtifactId>,
    pub case_clock: u32,
}
