//! Public records of an episode that the loop writes and grading reads: trajectory entries,
//! revealed artifacts, pending events and the intervention log.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One executed (not rejected) action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrajectoryEntry {
    pub step: u32,
    pub case_clock: u32,
    pub action_type: String,
    pub payload: Map<String, Value>,
    /// Budget units charged (4 dp).
    pub cost: f64,
    pub success: bool,
    pub message: String,
    pub is_intervention: bool,
    pub control_boundary_phase: String,
    pub control_boundary_warnings: Vec<String>,
}

/// An artifact delivered to the agent by a delayed event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RevealedArtifact {
    pub artifact_id: String,
    pub artifact_type: String,
    pub summary: String,
    /// Computed from fixture data; never gold labels.
    pub details: Map<String, Value>,
    pub revealed_at_clock: u32,
    pub source_action: String,
}

/// A scheduled delayed artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingEvent {
    pub event_id: String,
    pub artifact_id: String,
    pub source_action: String,
    pub scheduled_at_clock: u32,
    pub ready_at_clock: u32,
    pub status: String,
}

/// Intervention log entry (`interventions_taken`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InterventionLogEntry {
    pub action_type: String,
    pub status: String,
    pub payload: Map<String, Value>,
    pub artifact_id: Option<String>,
    pub case_clock: u32,
}
