//! `ls-core` owns the LedgerShield ControlBench domain vocabulary that every other crate shares:
//!
//! * [`enums`]: task types, decisions, the 12 latent hypotheses, the 21 actions with their costs
//!   and SPRT/VoI channels.
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
//! * [`contract`]: each task family's output contract (the payload fields its grade reads).
//!
//! Invariant: nothing in this crate performs I/O except [`fixtures::FixtureSet::load_dir`], and
//! nothing here knows about episodes, rewards or HTTP.

pub mod contract;
pub mod enums;
pub mod episode;
pub mod fixtures;
pub mod schema;
pub mod submission;
pub mod text;
pub mod validate;
pub mod world;

pub use enums::{ActionKind, ActionName, ArtifactId, Channel, Decision, Hypothesis, TaskType};
pub use fixtures::FixtureSet;
pub use schema::*;
pub use submission::Submission;
pub use world::HiddenWorld;

/// Largest JSON object read by [`json_field`]'s linear scan.
const JSON_FIELD_SCAN_MAX_KEYS: usize = 16;

/// `map.get(key)` for payload-sized JSON objects. The map (an `IndexMap`) hashes the key with
/// SipHash first; scanning a handful of keys compares a few bytes each and finds the same entry,
/// since keys are unique.
pub fn json_field<'a>(
    map: &'a serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'a serde_json::Value> {
    if map.len() <= JSON_FIELD_SCAN_MAX_KEYS {
        map.iter().find(|(k, _)| k.as_str() == key).map(|(_, v)| v)
    } else {
        map.get(key)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value};

    #[test]
    fn json_field_finds_what_get_finds() {
        for n in [0usize, 1, 5, 16, 17, 40] {
            let map: Map<String, Value> =
                (0..n).map(|i| (format!("k{i}"), Value::from(i))).collect();
            for i in 0..n + 3 {
                let key = format!("k{i}");
                assert_eq!(
                    super::json_field(&map, &key),
                    map.get(&key),
                    "{n} keys, {key}"
                );
            }
            assert_eq!(super::json_field(&map, ""), None);
        }
    }
}
