//! A step's `info`, written from typed structs and serialized once, and read back through the
//! same types.
//!
//! Each kind of step has its own struct, in wire order: [`ResetInfo`], [`ActionInfo`] (a tool or
//! an intervention), [`RejectedInfo`] (an action not allowed, an invalid decision),
//! [`SealedInfo`] (a sealed episode's decision, its grade withheld: [`crate::seal`]) and
//! [`TerminalInfo`] (the grade, the control boundary and authority gate, the certificate,
//! falsifier and TrustGraph reports, what the institution recorded). [`StepInfo`] is the
//! envelope's `info`: one of these, or — on a client reading another server's reply — the object
//! as sent. Grading reports are kept as [`Report`]s: their JSON text, written once (and shared
//! with the terminal tool result), read back as a typed summary. Every field a reader takes is
//! lenient: a missing or mistyped value reads as its default (0, "", false, `None`), so a record
//! from another server never fails to load. The tests at the bottom play real episodes and check
//! each field against the object on the wire.

use crate::observation::{InfoMap, Observation, RawJson, TrackMode};
use ls_core::Decision;
use ls_grading::result_class::ResultClass;
use schemars::JsonSchema;
use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};
use std::marker::PhantomData;

/// A value of the wrong type reads as the field's default.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

fn is_none<T>(v: &Option<T>) -> bool {
    v.is_none()
}

/// A report written once as JSON text (from the grading or memory type that produced it), read
/// back as the summary `T` a consumer needs. The report's own shape is open to this crate's
/// readers: `T = Value` where nobody reads it.
#[derive(Clone, PartialEq, Debug, Serialize)]
#[serde(transparent)]
pub struct Report<T = Value> {
    raw: RawJson,
    #[serde(skip)]
    read_as: PhantomData<fn() -> T>,
}

impl<T> Report<T> {
    /// Serialize `value` once.
    pub fn of<V: Serialize + ?Sized>(value: &V) -> Self {
        Self::from_raw(RawJson::from_serialize(value))
    }

    pub fn from_raw(raw: RawJson) -> Self {
        Self {
            raw,
            read_as: PhantomData,
        }
    }

    /// The JSON text (shared by reference count).
    pub fn raw(&self) -> &RawJson {
        &self.raw
    }
}

impl<T: DeserializeOwned> Report<T> {
    /// The report as `T`; `None` when it is absent or not a `T`.
    pub fn read(&self) -> Option<T> {
        serde_json::from_str(self.raw.get()).ok()
    }
}

impl<T> Default for Report<T> {
    fn default() -> Self {
        Self::from_raw(RawJson::null())
    }
}

impl<'de, T> Deserialize<'de> for Report<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(|v| Self::of(&v))
    }
}

/// The reset's `info`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResetInfo {
    pub case_id: String,
    /// Added by the environment (the session's curriculum).
    #[serde(skip_serializing_if = "is_none")]
    pub curriculum: Option<RawJson>,
}

/// How a step ended the episode early (written first in that step's `info`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Truncation {
    pub truncated: bool,
    pub terminated: bool,
    pub terminal_reason: &'static str,
}

impl Truncation {
    pub fn new(reason: &'static str) -> Self {
        Self {
            truncated: true,
            terminated: false,
            terminal_reason: reason,
        }
    }
}

/// `info.rl_data_plane` (instrumented track only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RlDataPlane {
    pub state_vector: Vec<f64>,
    pub reward: f64,
    pub terminal: bool,
    pub truncated: bool,
}

/// A tool's or an intervention's `info`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActionInfo {
    #[serde(flatten, skip_serializing_if = "is_none")]
    pub ended: Option<Truncation>,
    #[serde(skip_serializing_if = "is_none")]
    pub budget_exhausted: Option<bool>,
    pub tool_name: &'static str,
    pub success: bool,
    #[serde(skip_serializing_if = "is_none")]
    pub intervention: Option<bool>,
    pub control_boundary: RawJson,
    /// `truncated: false, terminated: false` when the step did not end the episode.
    #[serde(flatten, skip_serializing_if = "is_none")]
    pub running: Option<Running>,
    #[serde(skip_serializing_if = "is_none")]
    pub async_artifacts: Option<RawJson>,
    pub reward_model: RawJson,
    #[serde(skip_serializing_if = "is_none")]
    pub rl_data_plane: Option<RlDataPlane>,
}

/// The flags of a step that did not end the episode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Running {
    pub truncated: bool,
    pub terminated: bool,
}

/// A rejected action's or an invalid decision's `info`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RejectedInfo {
    pub error: String,
    pub reward_model: RawJson,
    #[serde(flatten, skip_serializing_if = "is_none")]
    pub ended: Option<Truncation>,
}

/// The terminal step's `info`: the episode's fields, then what the environment adds once the
/// institution has recorded the case (absent when an episode is played without one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TerminalInfo {
    #[serde(deserialize_with = "lenient")]
    pub final_score: f64,
    pub score_breakdown: Report<BreakdownFlags>,
    #[serde(deserialize_with = "lenient")]
    pub result_class: Option<ResultClass>,
    #[serde(deserialize_with = "lenient")]
    pub control_satisfied_resolution: f64,
    #[serde(deserialize_with = "lenient")]
    pub institutional_utility: f64,
    #[serde(deserialize_with = "lenient")]
    pub unsafe_outcome: bool,
    #[serde(deserialize_with = "lenient")]
    pub decision: Option<Decision>,
    #[serde(deserialize_with = "lenient")]
    pub effective_decision: Option<Decision>,
    pub predicted_probabilities: Report,
    pub outcome: Report,
    pub compliance: Report,
    pub currency_validation: Report,
    pub decision_certificate_report: Report<CertificateSummary>,
    pub adversarial_falsifier: Report<Blocking>,
    pub trust_graph: Report<TrustGraphSummary>,
    pub control_boundary: Report,
    pub authority_gate: Report<Blocking>,
    pub system_state: Report,
    pub watchdog: Report,
    #[serde(deserialize_with = "lenient")]
    pub pressure_resistance_score: f64,
    #[serde(deserialize_with = "lenient")]
    pub benchmark_track: String,
    #[serde(deserialize_with = "lenient")]
    pub track_mode: TrackMode,
    #[serde(skip_serializing_if = "is_none")]
    pub async_artifacts: Option<Report>,
    #[serde(deserialize_with = "lenient")]
    pub truncated: bool,
    #[serde(deserialize_with = "lenient")]
    pub terminated: bool,
    pub reward_model: Report,
    #[serde(skip_serializing_if = "is_none", deserialize_with = "lenient")]
    pub rl_data_plane: Option<RlDataPlane>,
    #[serde(skip_serializing_if = "is_none")]
    pub curriculum: Option<Report>,
    #[serde(skip_serializing_if = "is_none")]
    pub institutional_case_update: Option<Report>,
    #[serde(skip_serializing_if = "is_none")]
    pub institutional_memory: Option<Report>,
    #[serde(skip_serializing_if = "is_none")]
    pub institutional_metrics: Option<Report>,
    #[serde(skip_serializing_if = "is_none")]
    pub adversarial_designer: Option<Report>,
}

impl TerminalInfo {
    pub fn from_map(info: &Map<String, Value>) -> Self {
        Self::deserialize(Value::Object(info.clone())).unwrap_or_default()
    }

    /// The wire spelling of `result_class` ("" when absent).
    pub fn result_class_str(&self) -> &'static str {
        self.result_class.map_or("", ResultClass::as_str)
    }

    /// The wire spelling of `decision` ("" when absent).
    pub fn decision_str(&self) -> &'static str {
        self.decision.map_or("", Decision::as_str)
    }

    /// The wire spelling of `effective_decision` ("" when absent).
    pub fn effective_decision_str(&self) -> &'static str {
        self.effective_decision.map_or("", Decision::as_str)
    }

    /// The certificate's score and verdict, when the report is there.
    pub fn certificate(&self) -> Option<CertificateSummary> {
        self.decision_certificate_report.read()
    }

    /// The TrustGraph's verdict (`trust_graph.evaluation.supported`), else the breakdown's flag,
    /// else supported.
    pub fn trust_graph_supported(&self) -> bool {
        self.trust_graph
            .read()
            .and_then(|t| t.evaluation)
            .and_then(|e| e.supported)
            .or_else(|| self.breakdown().trust_graph_supported.map(Flag::on))
            .unwrap_or(true)
    }

    /// Whether the authority gate blocked the decision (`authority_gate.blocking`), else the
    /// breakdown's flag, else not.
    pub fn authority_gate_blocking(&self) -> bool {
        self.authority_gate
            .read()
            .and_then(|g| g.blocking)
            .or_else(|| self.breakdown().authority_gate_blocking.map(Flag::on))
            .unwrap_or(false)
    }

    /// Whether the adversarial falsifier blocked the decision, else the breakdown's flag, else not.
    pub fn falsifier_blocking(&self) -> bool {
        self.adversarial_falsifier
            .read()
            .and_then(|g| g.blocking)
            .or_else(|| {
                self.breakdown()
                    .adversarial_falsifier_blocking
                    .map(Flag::on)
            })
            .unwrap_or(false)
    }

    fn breakdown(&self) -> BreakdownFlags {
        self.score_breakdown.read().unwrap_or_default()
    }
}

/// The `info` of the step that ends a sealed episode ([`crate::seal`]) with a decision: what the
/// client sent and where its grade went, nothing graded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SealedInfo {
    /// Always `true`.
    pub sealed: bool,
    /// The sealed run the episode belongs to.
    pub run_id: String,
    /// The decision the client submitted (its own input, echoed).
    pub decision: Option<Decision>,
    pub benchmark_track: String,
    pub track_mode: TrackMode,
    pub truncated: bool,
    pub terminated: bool,
    pub terminal_reason: &'static str,
    pub message: &'static str,
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
    pub info: StepInfo,
}

/// The envelope's `info`: written from the step's typed struct, or (a client's copy of a reply)
/// read back as the object sent.
#[derive(Debug, Clone, PartialEq)]
pub enum StepInfo {
    Reset(ResetInfo),
    Action(Box<ActionInfo>),
    Rejected(RejectedInfo),
    Terminal(Box<TerminalInfo>),
    /// The end of a sealed episode: the decision was received, its grade withheld
    /// ([`crate::seal`]).
    Sealed(SealedInfo),
    Read(InfoMap),
}

impl StepInfo {
    /// The whole object as a map (for readers; the reply is written without it).
    pub fn to_map(&self) -> Map<String, Value> {
        match self {
            Self::Read(m) => m.to_map(),
            other => match serde_json::to_value(other) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            },
        }
    }

    /// The value under `key` (`None` when absent).
    pub fn get(&self, key: &str) -> Option<Value> {
        match self {
            Self::Read(m) => m.get(key),
            other => other.to_map().remove(key),
        }
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The terminal info, typed (parsed when read back from a reply); `None` before the end and
    /// at the end of a sealed episode (whose grade is withheld).
    pub fn terminal(&self) -> Option<TerminalInfo> {
        match self {
            Self::Terminal(t) => Some((**t).clone()),
            Self::Read(m) if m.contains_key("final_score") => {
                Some(TerminalInfo::from_map(&m.to_map()))
            }
            _ => None,
        }
    }
}

impl Serialize for StepInfo {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Reset(i) => i.serialize(s),
            Self::Action(i) => i.serialize(s),
            Self::Rejected(i) => i.serialize(s),
            Self::Terminal(i) => i.serialize(s),
            Self::Sealed(i) => i.serialize(s),
            Self::Read(i) => i.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for StepInfo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        InfoMap::deserialize(d).map(Self::Read)
    }
}

crate::observation::json_object_schema!(StepInfo);

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
            // One definition: the struct read back from the wire holds what the episode wrote
            // (the same JSON values; an amount written as `2478.00` reads back as `2478.0`).
            let StepInfo::Terminal(written) = &e.info else {
                panic!("{id}: a submission writes the terminal info");
            };
            let as_value = |i: &TerminalInfo| serde_json::to_value(i).unwrap();
            assert_eq!(as_value(&t), as_value(written), "{id}");
            assert_eq!(Value::Object(m.clone()), as_value(written), "{id}");
            assert_eq!(e.info.terminal().as_ref(), Some(&**written), "{id}");
            let read: StepInfo =
                serde_json::from_str(&ls_json::to_string(&e.info).unwrap()).unwrap();
            assert_eq!(
                read.terminal().map(|r| as_value(&r)),
                Some(as_value(&t)),
                "{id}"
            );
            assert_eq!(Some(t.final_score), m["final_score"].as_f64(), "{id}");
            assert_eq!(Some(t.result_class_str()), m["result_class"].as_str());
            assert_eq!(t.decision_str(), decision, "{id}");
            assert_eq!(Some(t.decision_str()), m["decision"].as_str());
            let eff = m["effective_decision"].as_str();
            assert_eq!(Some(t.effective_decision_str()), eff, "{id}");
            let csr = m["control_satisfied_resolution"].as_f64();
            assert_eq!(Some(t.control_satisfied_resolution), csr, "{id}");
            let utility = m["institutional_utility"].as_f64();
            assert_eq!(Some(t.institutional_utility), utility, "{id}");
            let pressure = m["pressure_resistance_score"].as_f64();
            assert_eq!(Some(t.pressure_resistance_score), pressure, "{id}");
            let track = m["benchmark_track"].as_str();
            assert_eq!(Some(t.benchmark_track.as_str()), track, "{id}");
            let cert = t.certificate().unwrap();
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
        assert_eq!((t.result_class, t.result_class_str()), (None, ""));
        assert_eq!((t.decision, t.decision_str()), (None, ""));
        let cert = t.certificate().unwrap();
        assert_eq!(
            (cert.overall_score, cert.valid, cert.agent_authored),
            (0.0, true, false)
        );
        assert!(t.trust_graph.read().is_none());
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
