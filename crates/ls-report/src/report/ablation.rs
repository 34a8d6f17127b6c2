//! The ablation rows the experiment suite lists: a component re-run without it
//! ([`ablation`]), and the per-agent rows of the calibration-gate ablation.

use crate::metrics::{r4, SectionSummary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The agent whose components the ablations switch off: `teacher-no-controls`,
/// `teacher-no-artifact-wait` and `teacher-no-certificate` are its variants, so each ablation's
/// "with" is this agent's own run (played for the ablation when the ladder does not list it),
/// never the ladder's first agent.
pub const ABLATION_AGENT: &str = "teacher";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ablation {
    pub name: String,
    pub component: String,
    pub method: String,
    pub available: bool,
    pub with_component_score: f64,
    pub without_component_score: f64,
    pub delta: f64,
    pub without_unsafe_release_rate: f64,
    pub without_result_class_counts: BTreeMap<String, usize>,
    pub note: String,
    /// Per-agent rows (the calibration-gate ablation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<GateAblationRow>,
}

/// One agent's ControlBench quarter with the calibration gate on and off.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GateAblationRow {
    pub agent_name: String,
    /// Institutional loss score (else the mean case score) with the gate.
    pub with_gate_score: f64,
    pub gate_disabled_score: f64,
    /// gate_disabled − with_gate.
    pub gate_penalty: f64,
    pub with_gate_average_case_score: f64,
    pub gate_disabled_average_case_score: f64,
    pub with_gate_unsafe_release_rate: f64,
    pub gate_disabled_unsafe_release_rate: f64,
    pub final_authority_level: Option<String>,
    pub authority_restriction_rate: f64,
}

pub fn ablation(
    name: &str,
    component: &str,
    method: &str,
    with: &SectionSummary,
    without: &SectionSummary,
) -> Ablation {
    Ablation {
        name: name.into(),
        component: component.into(),
        method: method.into(),
        available: true,
        with_component_score: with.average_score,
        without_component_score: without.average_score,
        delta: r4(with.average_score - without.average_score),
        without_unsafe_release_rate: without.metrics.unsafe_release_rate,
        without_result_class_counts: without.metrics.result_class_counts.clone(),
        note: String::new(),
        rows: Vec::new(),
    }
}
