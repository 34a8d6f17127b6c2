//! Institutional memory of a session: what earlier episodes in the same AP week left behind.
//!
//! This module records each graded episode's outcome and exposes the public roll-up. The full
//! ControlBench memory (capacities, vendor trust, loss surface, calibration-gated authority,
//! sleepers) builds on these records.

use ls_grading::{AuthorityGate, GradeReport};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InstitutionalMemory {
    pub case_counter: u32,
    pub queue_depth: usize,
    pub decisions: BTreeMap<String, u32>,
    pub result_classes: BTreeMap<String, u32>,
    pub unsafe_releases: u32,
    pub score_sum: f64,
}

impl InstitutionalMemory {
    pub fn new(queue_depth: usize) -> Self {
        Self { queue_depth, ..Default::default() }
    }

    /// Authority gate for the next submission (full authority until the calibration gate lands).
    pub fn authority_gate(&self) -> Option<AuthorityGate> {
        None
    }

    /// Institutional loss score in [0, 1] for grading's small adjustment, once outcomes exist.
    pub fn loss_score(&self) -> Option<f64> {
        None
    }

    pub fn record(&mut self, decision: &str, report: &GradeReport) {
        self.case_counter += 1;
        self.queue_depth = self.queue_depth.saturating_sub(1);
        *self.decisions.entry(decision.to_owned()).or_default() += 1;
        *self.result_classes.entry(report.result_class.clone()).or_default() += 1;
        if report.unsafe_outcome {
            self.unsafe_releases += 1;
        }
        self.score_sum += report.final_score;
    }

    pub fn public_view(&self) -> Map<String, Value> {
        let mut m = match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let mean = if self.case_counter == 0 { 0.0 } else { self.score_sum / f64::from(self.case_counter) };
        m.insert("mean_score".into(), Value::from(ls_core::text::round_to(mean, 4)));
        m.remove("score_sum");
        m
    }
}
