//! The offline agents (`ls_agents::offline_agent`: the teacher, its ablations, `random`,
//! `naive-pay`, `always-escalate`, the red-team policies) for Python, so a training script plays
//! them in process on any reset, task draws included, and records what they did. They read the
//! replies only (JSON text, as an HTTP client would), never the case.

use crate::errors::{panic_error, Refusal};
use crate::ledger::envelope;
use pyo3::prelude::*;
use serde_json::{json, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One offline agent. Not shared between threads (the agents keep per-episode state); its calls
/// are short and keep the GIL.
#[pyclass(module = "ledgershield._native", name = "OfflineAgent", unsendable)]
pub struct OfflineAgent {
    agent: Box<dyn ls_agents::Agent>,
    name: String,
    seed: u64,
}

fn guarded<T>(py: Python<'_>, f: impl FnOnce() -> Result<T, Refusal>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(e.into_py(py)),
        Err(p) => Err(panic_error(p)),
    }
}

#[pymethods]
impl OfflineAgent {
    /// `name` as `ledgershield run --agent` takes it; `seed` drives a random agent's choices.
    #[new]
    #[pyo3(signature = (name, seed = 0))]
    fn new(py: Python<'_>, name: &str, seed: u64) -> PyResult<Self> {
        let agent = ls_agents::offline_agent(name).ok_or_else(|| {
            Refusal::validation(format!(
                "unknown offline agent '{}'; use one of {}",
                name.chars().take(64).collect::<String>(),
                ls_agents::OFFLINE_AGENTS.join(", ")
            ))
            .into_py(py)
        })?;
        Ok(Self {
            agent,
            name: name.to_owned(),
            seed,
        })
    }

    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// Start an episode from the reset reply (JSON text).
    fn begin(&mut self, py: Python<'_>, reset: &str) -> PyResult<()> {
        let seed = self.seed;
        guarded(py, || {
            self.agent.begin(&envelope(reset)?, seed);
            Ok(())
        })
    }

    /// The next action given the latest reply (JSON text; after `begin`, the reset reply), as
    /// JSON text `{"action_type", "payload"}`.
    fn act(&mut self, py: Python<'_>, reply: &str) -> PyResult<String> {
        guarded(py, || {
            let a = self.agent.next_action(&envelope(reply)?);
            Ok(
                json!({"action_type": a.action_type, "payload": Value::Object(a.payload)})
                    .to_string(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::controlbench::{embedded_pool, reply_text};
    use ls_agents::offline_agent;
    use ls_env::{EnvConfig, Environment, ResetRequest};

    /// The teacher fed reply texts plays the episode it plays on the replies themselves.
    #[test]
    fn the_teacher_on_reply_texts_plays_its_own_episode() {
        let play = |through_text: bool| {
            let mut env = Environment::new(embedded_pool().unwrap(), EnvConfig::default());
            let mut last = env
                .reset(&ResetRequest {
                    case_id: Some("CASE-B-001".into()),
                    ..Default::default()
                })
                .unwrap();
            let mut t = offline_agent("teacher").unwrap();
            let read = |e: &ls_env::StepEnvelope| {
                if through_text {
                    super::envelope(&reply_text(e).unwrap()).unwrap()
                } else {
                    e.clone()
                }
            };
            t.begin(&read(&last), 0);
            let mut actions = Vec::new();
            while !last.done && actions.len() < 80 {
                let a = t.next_action(&read(&last));
                actions.push(a.action_type.clone());
                last = env.step(&a.action_type, &a.payload).unwrap();
            }
            (actions, last.info.terminal().map(|x| x.final_score))
        };
        let (direct, text) = (play(false), play(true));
        assert_eq!(direct, text);
        assert!(direct.1.unwrap() > 0.8, "{direct:?}");
    }
}
