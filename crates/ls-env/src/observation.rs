//! Wire types the environment returns: the observation, the step envelope and the public state.

use ls_core::episode::{InterventionLogEntry, RevealedArtifact, TrajectoryEntry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
    pub instruction: String,
    pub visible_documents: Vec<DocumentCatalogEntry>,
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
    pub allowed_actions: Vec<String>,
    pub available_interventions: Vec<String>,
    pub case_metadata: Map<String, Value>,
    pub portfolio_context: Map<String, Value>,
    /// Instrumented track only; `{}` in blind mode.
    pub sprt_state: Map<String, Value>,
    /// Instrumented track only; `{}` in blind mode.
    pub tool_rankings: Map<String, Value>,
    /// Instrumented track only; `{}` in blind mode.
    pub reward_machine: Map<String, Value>,
    /// Shared, read-only view of the session's institutional memory.
    pub institutional_memory: std::sync::Arc<Map<String, Value>>,
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
    pub portfolio_context: Map<String, Value>,
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
    pub institutional_memory: std::sync::Arc<Map<String, Value>>,
    pub control_boundary: Map<String, Value>,
}
