//! The terminal step's `info`, read back as typed fields.
//!
//! The episode writes the terminal info (the grade, the control boundary and authority gate, the
//! certificate, falsifier and TrustGraph reports, …) once, in its wire order; consumers that need
//! figures from it (the episode runner's records, the benchmark report's per-case rows) read them
//! through [`TerminalInfo`] instead of walking JSON keys by name. Every field is lenient: a
//! missing or mistyped value reads as its default (0, "", false, `None`), as the readers did
//! before, so a record from another server never fails to load. The test at the bottom plays a
//! real episode and checks each field against the map the episode wrote.

use serde::de::{DeserializeOwned, Deserializer};
use serde::Deserialize;
use serde_json::{Map, Value};

/// A value of the wrong type reads as the field's default.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// The figures consumers read from a terminal step's `info`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TerminalInfo {
    #[serde(deserialize_with = "lenient")]
    pub final_score: f64,
    #[serde(deserialize_with = "lenient")]
    pub result_class: String,
    #[serde(deserialize_with = "lenient")]
    pub decision: String,
    #[serde(deserialize_with = "lenient")]
    pub effective_decision: String,
    #[serde(deserialize_with = "lenient")]
    pub control_satisfied_resolution: f64,
    #[serde(deserialize_with = "lenient")]
    pub institutional_utility: f64,
    #[serde(deserialize_with = "lenient")]
    pub pressure_resistance_score: f64,
    #[serde(deserialize_with = "lenient")]
    pub benchmark_track: String,
    #[serde(deserialize_with = "lenient")]
    pub score_breakdown: BreakdownFlags,
    #[serde(deserialize_with = "lenient")]
    pub decision_certificate_report: Option<CertificateSummary>,
    #[serde(deserialize_with = "lenient")]
    pub trust_graph: Option<TrustGraphSummary>,
    #[serde(deserialize_with = "lenient")]
    pub authority_gate: Option<Blocking>,
    #[serde(deserialize_with = "lenient")]
    pub adversarial_falsifier: Option<Blocking>,
}

impl TerminalInfo {
    pub fn from_map(info: &Map<String, Value>) -> Self {
        Self::deserialize(Value::Object(info.clone())).unwrap_or_default()
    }

    /// The TrustGraph's verdict (`trust_graph.evaluation.supported`), else the breakdown's flag,
    /// else supported.
    pub fn trust_graph_supported(&self) -> bool {
        self.trust_graph
            .as_ref()
            .and_then(|t| t.evaluation.as_ref())
            .and_then(|e| e.supported)
            .or_else(|| self.score_breakdown.trust_graph_supported.map(Flag::on))
            .unwrap_or(true)
    }

    /// Whether the authority gate blocked the decision (`authority_gate.blocking`), else the
    /// breakdown's flag, else not.
    pub fn authority_gate_blocking(&self) -> bool {
        self.authority_gate
            .as_ref()
            .and_then(|g| g.blocking)
            .or_else(|| self.score_breakdown.authority_gate_blocking.map(Flag::on))
            .unwrap_or(false)
    }

    /// Whether the adversarial falsifier blocked the decision, else the breakdown's flag, else not.
    pub fn falsifier_blocking(&self) -> bool {
        self.adversarial_falsifier
            .as_ref()
            .and_then(|g| g.blocking)
            .or_else(|| {
                self.score_breakdown
                    .adversarial_falsifier_blocking
                    .map(Flag::on)
            })
            .unwrap_or(false)
    }
}

/// A breakdown flag: a boolean, or a number read as set above 0.5.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Flag {
    Bool(bool),
    Number(f64),
}

impl Flag {
    pub fn on(self) -> bool {
        match self {
            Flag::Bool(b) => b,
            Flag::Number(x) => x > 0.5,
        }
    }
}

/// The `score_breakdown` flags read as fallbacks when the report object is absent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct BreakdownFlags {
    #[serde(deserialize_with = "lenient")]
    pub trust_graph_supported: Option<Flag>,
    #[serde(deserialize_with = "lenient")]
    pub authority_gate_blocking: Option<Flag>,
    #[serde(deserialize_with = "lenient")]
    pub adversarial_falsifier_blocking: Option<Flag>,
}

/// `decision_certificate_report`: the certificate's score and verdict.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CertificateSummary {
    #[serde(deserialize_with = "lenient")]
    pub overall_score: f64,
    #[serde(deserialize_with = "lenient")]
    pub valid: bool,
    #[serde(deserialize_with = "lenient")]
    pub agent_authored: bool,
}

/// `trust_graph`: its evaluation.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TrustGraphSummary {
    #[serde(deserialize_with = "lenient")]
    pub evaluation: Option<TrustGraphEvaluation>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TrustGraphEvaluation {
    #[serde(deserialize_with = "lenient")]
    pub supported: Option<bool>,
}

/// A report that may block the decision (`authority_gate`, `adversarial_falsifier`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Blocking {
    #[serde(deserialize_with = "lenient")]
    pub blocking: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CasePool, EnvConfig, Environment, ResetRequest};
    use ls_core::FixtureSet;
    use serde_json::json;
    use std::sync::Arc;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    /// Every curated case played to a decision: each typed field equals what the episode wrote.
    #[test]
    fn typed_fields_match_the_terminal_info_the_episode_writes() {
        let set = FixtureSet::embedded().unwrap();
        let pool = Arc::new(CasePool::new(set.clone()));
        for (i, case) in set.cases.iter().enumerate() {
            let mut env = Environment::new(pool.clone(), EnvConfig::default());
            env.reset(&ResetRequest {
                case_id: Some(case.case_id.clone()),
                ..Default::default()
            })
            .unwrap();
            let decision = ["PAY", "HOLD", "ESCALATE_FRAUD"][i % 3];
            let e = env
                .step("submit_decision", &obj(json!({"decision": decision})))
                .unwrap();
            assert!(e.terminated, "{}", case.case_id);
            let m = e.info.to_map();
            let t = TerminalInfo::from_map(&m);
            let id = &case.case_id;
            assert_eq!(Some(t.final_score), m["final_score"].as_f64(), "{id}");
            assert_eq!(Some(t.result_class.as_str()), m["result_class"].as_str());
            assert_eq!(t.decision, decision, "{id}");
            assert_eq!(Some(t.decision.as_str()), m["decision"].as_str());
            let eff = m["effective_decision"].as_str();
            assert_eq!(Some(t.effective_decision.as_str()), eff, "{id}");
            let csr = m["control_satisfied_resolution"].as_f64();
            assert_eq!(Some(t.control_satisfied_resolution), csr, "{id}");
            let utility = m["institutional_utility"].as_f64();
            assert_eq!(Some(t.institutional_utility), utility, "{id}");
            let pressure = m["pressure_resistance_score"].as_f64();
            assert_eq!(Some(t.pressure_resistance_score), pressure, "{id}");
            let track = m["benchmark_track"].as_str();
            assert_eq!(Some(t.benchmark_track.as_str()), track, "{id}");
            let cert = t.decision_certificate_report.as_ref().unwrap();
            let c = &m["decision_certificate_report"];
            assert_eq!(
                Some(cert.overall_score),
                c["overall_score"].as_f64(),
                "{id}"
            );
            assert_eq!(Some(cert.valid), c["valid"].as_bool(), "{id}");
            assert_eq!(Some(cert.agent_authored), c["agent_authored"].as_bool());
            let supported = m["trust_graph"]["evaluation"]["supported"].as_bool();
            assert!(supported.is_some(), "{id}: the TrustGraph always judges");
            assert_eq!(Some(t.trust_graph_supported()), supported, "{id}");
            let gate = m["authority_gate"]["blocking"].as_bool().unwrap_or(false);
            assert_eq!(t.authority_gate_blocking(), gate, "{id}");
            let falsifier = m["adversarial_falsifier"]["blocking"].as_bool();
            assert_eq!(t.falsifier_blocking(), falsifier.unwrap_or(false), "{id}");
        }
    }

    /// Missing or mistyped values read as defaults (never an error), and the breakdown's flags
    /// stand in for absent report objects.
    #[test]
    fn mistyped_or_missing_values_read_as_defaults() {
        let t = TerminalInfo::from_map(&obj(json!({
            "final_score": "high", "result_class": 3, "decision": null,
            "decision_certificate_report": {"overall_score": "x", "valid": true},
            "trust_graph": "not an object",
            "authority_gate": {"blocking": "yes"},
            "score_breakdown": {"trust_graph_supported": 0.2, "authority_gate_blocking": true,
                                "adversarial_falsifier_blocking": 0.9},
        })));
        assert_eq!(t.final_score, 0.0);
        assert_eq!(t.result_class, "");
        assert_eq!(t.decision, "");
        let cert = t.decision_certificate_report.clone().unwrap();
        assert_eq!(
            (cert.overall_score, cert.valid, cert.agent_authored),
            (0.0, true, false)
        );
        assert!(t.trust_graph.is_none());
        assert!(
            !t.trust_graph_supported(),
            "breakdown 0.2 reads as not supported"
        );
        assert!(
            t.authority_gate_blocking(),
            "mistyped gate: the breakdown's flag"
        );
        assert!(t.falsifier_blocking(), "breakdown 0.9 reads as blocking");
        let empty = TerminalInfo::from_map(&Map::new());
        assert_eq!(empty, TerminalInfo::default());
        assert!(empty.trust_graph_supported() && !empty.authority_gate_blocking());
    }
}
