//! The evidence ledger (`ls_rl::Ledger`) for Python: one ledger folds the replies for the Rust
//! agents' prompts, the structured observation and the Python training code. Replies arrive as
//! the JSON text the environments write (`ControlBenchEnv.step_text`, a server's reply body);
//! the ledger leaves as its rendered text and as a JSON view of its rows.

use crate::bridge::call;
use crate::errors::Refusal;
use crate::vector::Poison;
use ls_env::StepEnvelope;
use ls_rl::ledger::{Flag, LineClass, Row, RowKind};
use ls_rl::Ledger;
use pyo3::prelude::*;
use serde_json::{json, Value};
use std::sync::Mutex;

/// Read one reply (a reset or a step envelope) from JSON text.
pub fn envelope(reply: &str) -> Result<StepEnvelope, Refusal> {
    let v: Value = serde_json::from_str(reply).map_err(|e| Refusal::invalid_json(&e))?;
    serde_path_to_error::deserialize(v).map_err(|e| {
        Refusal::validation(format!(
            "not a ControlBench reply envelope: {} at '{}'",
            e.inner(),
            e.path()
        ))
    })
}

fn row_json(r: &Row, docs: &[ls_rl::ledger::DocEntry]) -> Value {
    json!({
        "kind": r.kind.as_str(),
        "doc": r.doc,
        "doc_id": r.doc.and_then(|d| docs.get(d)).map(|d| d.doc_id.as_str()),
        "class": r.class.as_str(),
        "text": r.text,
        "value": r.value,
        "amount": r.amount.map(|a| a.to_string()),
        "reference": r.reference,
        "flags": r.flags.iter().map(Flag::as_str).collect::<Vec<_>>(),
        "missing": r.missing,
        "cited_ids": r.cited_ids().collect::<Vec<_>>(),
    })
}

/// The ledger as one JSON value: its rows (kind, document, class, text, value, amount, the
/// reference a submission cites, flags), the catalogue, the observed signals and the episode's
/// counters, and every id a submission may cite.
pub fn view(l: &Ledger) -> Value {
    let names = |it: &mut dyn Iterator<Item = &'static str>| it.collect::<Vec<_>>();
    json!({
        "task": l.task.map(|t| t.as_str()),
        "docs": l.docs.iter().map(|d| json!({"doc_id": d.doc_id, "doc_type": d.doc_type, "read": d.read})).collect::<Vec<_>>(),
        "rows": l.rows.iter().map(|r| row_json(r, &l.docs)).collect::<Vec<_>>(),
        "dropped_rows": l.dropped_rows,
        "signals": names(&mut l.signals.iter().map(|s| s.as_str())),
        "succeeded": names(&mut l.succeeded.iter().map(|a| a.as_str())),
        "failed": names(&mut l.failed.iter().map(|a| a.as_str())),
        "interventions": names(&mut l.interventions.iter().map(|a| a.as_str())),
        "artifacts": names(&mut l.artifacts.iter().map(|a| a.as_str())),
        "pending_events": l.pending_events,
        "steps_left": l.steps_left,
        "done": l.done,
        "vendor_key": l.vendor_key(),
        "cited_ids": l.cited_ids(),
    })
}

struct LedgerSlot(Ledger);

impl Poison for LedgerSlot {
    fn poison(&mut self) {
        self.0 = Ledger::new();
    }
}

/// What an episode revealed so far (`ls_rl::Ledger`), fed the episode's replies in order.
#[pyclass(module = "ledgershield._native", name = "EvidenceLedger")]
pub struct EvidenceLedger {
    slot: Mutex<LedgerSlot>,
}

#[pymethods]
impl EvidenceLedger {
    #[new]
    fn new() -> Self {
        Self {
            slot: Mutex::new(LedgerSlot(Ledger::new())),
        }
    }

    /// Fold one reply (the reset's, then every step's) given as its JSON text. A text that is
    /// not a reply envelope raises `EnvError` and leaves the ledger as it was.
    fn absorb(&self, py: Python<'_>, reply: &str) -> PyResult<()> {
        call(py, &self.slot, |s| {
            let env = envelope(reply)?;
            s.0.absorb(&env);
            Ok(())
        })
    }

    /// The ledger as text for a language model (`Ledger::render`: one line per row, its flags
    /// and its citation).
    fn render(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, |s| Ok(s.0.render()))
    }

    /// The ledger's rows, catalogue, signals and counters as JSON text (see [`view`]).
    fn view(&self, py: Python<'_>) -> PyResult<String> {
        call(py, &self.slot, |s| Ok(view(&s.0).to_string()))
    }

    /// Every id a submission may cite from what was revealed, in order of appearance.
    fn cited_ids(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        call(py, &self.slot, |s| {
            Ok(s.0.cited_ids().into_iter().map(str::to_owned).collect())
        })
    }
}

/// Register the class and the ledger's vocabularies (row kinds, line classes, flags) on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EvidenceLedger>()?;
    let kinds: Vec<&str> = RowKind::ALL.iter().map(|k| k.as_str()).collect();
    m.add("LEDGER_ROW_KINDS", kinds)?;
    let classes: Vec<&str> = LineClass::ALL.iter().map(|c| c.as_str()).collect();
    m.add("LEDGER_LINE_CLASSES", classes)?;
    let flags: Vec<&str> = Flag::ALL.iter().map(|f| f.as_str()).collect();
    m.add("LEDGER_FLAGS", flags)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlbench::{embedded_pool, reply_text};
    use ls_env::{EnvConfig, Environment, ResetRequest};
    use serde_json::Map;

    /// A reply read back from its JSON text folds into the same ledger as the reply itself, and
    /// the view carries every row with its citation.
    #[test]
    fn text_replies_fold_like_the_replies_and_the_view_lists_the_rows() {
        let mut env = Environment::new(embedded_pool().unwrap(), EnvConfig::default());
        let reset = env
            .reset(&ResetRequest {
                case_id: Some("CASE-D-001".into()),
                ..Default::default()
            })
            .unwrap();
        let doc = reset.observation.visible_documents[0].doc_id.clone();
        let mut payload = Map::new();
        payload.insert("doc_id".into(), json!(doc));
        payload.insert("mode".into(), json!("accurate"));
        let step = env.step("ocr", &payload).unwrap();
        let (mut direct, mut read) = (Ledger::new(), Ledger::new());
        for e in [&reset, &step] {
            direct.absorb(e);
            read.absorb(&envelope(&reply_text(e).unwrap()).unwrap());
        }
        assert_eq!(direct.render(), read.render());
        let v = view(&read);
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), read.rows.len());
        assert!(rows
            .iter()
            .any(|r| r["kind"] == "line" && r["doc_id"] == doc.as_str()));
        let cited: Vec<&str> = v["cited_ids"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(cited.contains(&doc.as_str()));
        assert!(v["task"] == "task_d" && v["steps_left"].as_u64().unwrap() > 0);
    }

    #[test]
    fn text_that_is_not_a_reply_is_refused() {
        assert_eq!(envelope("{").unwrap_err().status, 400);
        let e = envelope(r#"{"observation": {}}"#).unwrap_err();
        assert_eq!(e.status, 422);
        assert!(
            e.message.contains("not a ControlBench reply"),
            "{}",
            e.message
        );
    }
}
