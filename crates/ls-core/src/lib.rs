//! `ls-core` owns the LedgerShield ControlBench domain vocabulary that every other crate shares:
//!
//! * [`enums`]: task types, decisions, the 12 latent hypotheses, and the action table (each
//!   action's cost, SPRT/VoI channel, artifact, statechart phase and watchdog weight in one row).
//! * [`text`]: the normalisation rules every matcher goes through (`normalize_text`,
//!   `normalize_id`, reason-code canonicalisation, vendor alias matching, bbox IoU).
//! * [`schema`]: the fixture schema (cases, documents, tokens, gold, vendors, POs, receipts,
//!   ledger, email threads, policies) exactly as the JSON files spell it.
//! * [`fixtures`]: the curated fixture set embedded at build time, loading the same schema from a
//!   directory, and lookup indexes.
//! * [`validate`]: the consistency validator every curated or generated case must pass.
//! * [`world`]: the hidden world derived from a case (signals, required actions and artifacts,
//!   latent hypothesis).
//! * [`episode`]: public episode records (trajectory, artifacts, events) that grading reads.
//! * [`submission`]: the typed `submit_decision` payload.
//! * [`submitted`]: the typed values inside it (fields, line items, evidence, counterfactual, handoff packet).
//! * [`certificate`]: the submitted decision certificate graph, parsed.
//! * [`contract`]: each task family's output contract (the payload fields its grade reads).
//! * [`replies`]: what each investigation tool replies with, as types a client reads once.
//! * [`draft`]: what an agent writes (citations, certificates, submissions), as types.
//!
//! Invariant: nothing in this crate performs I/O except [`fixtures::FixtureSet::load_dir`], and
//! nothing here knows about episodes, rewards or HTTP.

#[macro_use]
mod wire;

pub mod certificate;
pub mod contract;
pub mod draft;
pub mod enums;
pub mod episode;
pub mod fixtures;
pub mod replies;
pub mod schema;
pub mod submission;
pub mod submitted;
pub mod text;
pub mod validate;
pub mod world;

pub use certificate::DecisionCertificate;
pub use enums::{
    ActionKind, ActionName, ActionPhase, ActionSpec, ArtifactId, BenchmarkTrack, BoundaryPhase,
    BoundaryWarning, Channel, CodeKind, Decision, Hypothesis, ObservedSignal, PolicyCheck,
    ReasonCode, RiskLevel, Signal, TaskType, WatchdogAudit,
};
pub use fixtures::FixtureSet;
pub use schema::*;
pub use submission::Submission;
pub use submitted::{Counterfactual, EvidenceEntry, FieldValue, HandoffPacket, LineEntry};
pub use world::HiddenWorld;

/// The value of `key` in a JSON object (`map.get`; kept as the name the environment's readers
/// use).
pub fn json_field<'a>(
    map: &'a serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'a serde_json::Value> {
    map.get(key)
}
