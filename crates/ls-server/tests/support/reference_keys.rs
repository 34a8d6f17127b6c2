//! Keys of the reference's ControlBench observation, shared by the whole-episode HTTP tests
//! (`http.rs`) and the compatibility replay (`compat_controlbench.rs`).

/// Every key the reference's step and reset observation carries.
pub const OBSERVATION: [&str; 23] = [
    "case_id",
    "task_type",
    "instruction",
    "visible_documents",
    "revealed_artifacts",
    "pending_events",
    "budget_remaining",
    "budget_total",
    "step_count",
    "max_steps",
    "case_clock",
    "risk_snapshot",
    "investigation_status",
    "last_tool_result",
    "messages",
    "allowed_actions",
    "available_interventions",
    "case_metadata",
    "portfolio_context",
    "sprt_state",
    "tool_rankings",
    "reward_machine",
    "institutional_memory",
];
