//! `ledgershield._native`: ControlBench and the Financial Audit environment in process, for
//! Python (PyO3; built by maturin from `python/pyproject.toml`).
//!
//! Code map:
//! * [`controlbench`], [`audit`]: one environment and what its last reply showed (candidate
//!   actions, fixed-size features); replies serialized exactly as the HTTP server writes them.
//! * [`campaign`]: a Financial Audit multi-period campaign, as the audit server's campaign
//!   routes serve it.
//! * [`request`]: requests read from JSON text with the HTTP bodies' rules and messages.
//! * [`errors`]: refusals with the server's status, code and message, raised as `EnvError`.
//! * [`vector`]: N environments stepped in Rust worker threads in one call.
//! * [`structured`]: ControlBench through `ls-rl`: the structured observation and the factored
//!   action space.
//! * [`ledger`]: the evidence ledger (`ls_rl::Ledger`) fed reply texts: its text and its rows.
//! * [`agent`]: the offline agents (teacher, scripted baselines) playing on reply texts.
//! * [`bridge`]: the call every class makes (the GIL released, panics caught) and NumPy bytes.
//! * [`py`]: the Python classes. Every call releases the GIL while Rust works and turns a Rust
//!   panic into a Python `RuntimeError`.

pub mod agent;
pub mod audit;
pub mod bridge;
pub mod campaign;
pub mod controlbench;
pub mod errors;
pub mod ledger;
pub mod py;
pub mod request;
pub mod structured;
pub mod vector;

use pyo3::prelude::*;

/// mimalloc for the extension's own (Rust) allocations, as the server binary uses: the step loop
/// is allocation-heavy (JSON maps, observations) and glibc's allocator took about a quarter of
/// a vector step's CPU time. Python's objects keep Python's allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<py::ControlBench>()?;
    m.add_class::<py::Audit>()?;
    m.add_class::<py::AuditCampaign>()?;
    m.add_class::<py::ControlBenchVector>()?;
    m.add_class::<py::AuditVector>()?;
    m.add("EnvError", m.py().get_type::<errors::EnvError>())?;
    m.add("RL_VECTOR_LEN", controlbench::RL_VECTOR_LEN)?;
    m.add("CONTROLBENCH_FEATURES", controlbench::FEATURES)?;
    m.add("CONTROLBENCH_MAX_CANDIDATES", controlbench::MAX_CANDIDATES)?;
    m.add("AUDIT_FEATURES", audit::FEATURES)?;
    m.add("AUDIT_MAX_CANDIDATES", audit::MAX_CANDIDATES)?;
    m.add("INVALID_INDEX_ACTION", controlbench::INVALID_INDEX_ACTION)?;
    m.add("MAX_VECTOR_ENVS", vector::MAX_NUM_ENVS)?;
    m.add_class::<py::StructuredControlBenchVector>()?;
    structured::register(m)?;
    ledger::register(m)?;
    m.add_class::<agent::OfflineAgent>()?;
    m.add("OFFLINE_AGENTS", ls_agents::OFFLINE_AGENTS.to_vec())?;
    // The task distribution's fixed splits (`ls_gen::tasks`): (template, split) and (generator, split).
    let templates: Vec<(&str, &str)> = ls_gen::tasks::TEMPLATE_SPLITS
        .iter()
        .map(|(id, s)| (*id, s.as_str()))
        .collect();
    m.add("TEMPLATE_SPLITS", templates)?;
    let generators: Vec<(&str, &str)> = ls_gen::tasks::Generator::ALL
        .iter()
        .map(|g| (g.as_str(), g.split().as_str()))
        .collect();
    m.add("GENERATOR_SPLITS", generators)?;
    let error_types: Vec<&str> = audit_env::model::ErrorType::ALL
        .iter()
        .map(|t| t.as_str())
        .collect();
    m.add("AUDIT_ERROR_TYPES", error_types)?;
    let codes: Vec<&str> = ls_core::ReasonCode::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    m.add("REASON_CODES", codes)?;
    let actions: Vec<&str> = ls_core::ActionName::ALL
        .iter()
        .map(|a| a.as_str())
        .collect();
    m.add("ACTION_NAMES", actions)?;
    Ok(())
}
