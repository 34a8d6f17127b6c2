//! ControlBench's route table: every route with its documentation (tag, summary, parameters,
//! typed request and reply schemas). `/openapi.json` and `/docs` are built from it.

use super::{
    close_session, health, institutional_memory, institutional_reset, reset, root, state, step,
    Shared,
};
use crate::route_table::{ApiRoutes, RouteDoc};
use ls_env::{ResetRequest, StateView, StepEnvelope};
use schemars::{json_schema, Schema, SchemaGenerator};

fn banner(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["status", "service", "environment"], "properties": {
        "status": {"const": "ok"}, "service": {"type": "string"}, "environment": {"const": "controlbench"},
        "workbench": {"type": "string", "description": "the browser workbench"}, "docs": {"type": "string", "description": "this API reference as a page"},
        "openapi": {"type": "string", "description": "the OpenAPI document"}}})
}

fn health_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["status", "cases_loaded", "sessions"], "properties": {
        "status": {"const": "ok"}, "service": {"type": "string"},
        "cases_loaded": {"type": "integer", "minimum": 0}, "sessions": {"type": "integer", "minimum": 0}}})
}

fn closed_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["session_id", "status"], "properties": {
        "session_id": {"type": "string"}, "status": {"const": "closed"}}})
}

fn step_body(g: &mut SchemaGenerator) -> Schema {
    let action = g.subschema_for::<super::ControlBenchAction>();
    json_schema!({"anyOf": [action, {"type": "object", "title": "OpenEnvStepRequest", "required": ["action"], "properties": {
        "action": action, "timeout_s": {"type": "number"}, "request_id": {"type": "string"},
        "session_id": {"type": "string"}, "metadata": {"type": "object"}}}]})
}

/// The ControlBench routes, each with its documentation.
pub fn routes() -> ApiRoutes<Shared> {
    ApiRoutes::new()
        .get("/", RouteDoc::new("service", "Service banner").reply_with(banner, "Which environment this server runs"), root)
        .get("/health", RouteDoc::new("service", "Health check").reply_with(health_reply, "`status: ok` (as the LedgerShield documentation specifies) with the cases loaded and live sessions"), health)
        .post(
            "/reset",
            RouteDoc::new("episode", "Start an episode in a session")
                .describe("The session is the `X-Session-Id` header, else `session_id` in the body, else the default session. An empty body draws a case from the pool. `fresh_institution: true` is an operator action (the governed agent cannot lift its own governance): it needs the operator key as `X-API-Key` (403 without it); a new session is a fresh institution.")
                .session()
                .body::<ResetRequest>("Which case or seed to play; every field is optional")
                .reply::<StepEnvelope>("The first observation (reward 0, done false)"),
            reset,
        )
        .post(
            "/step",
            RouteDoc::new("episode", "Take one action")
                .describe("`{action_type, payload}` or OpenEnv's `{action: {action_type, payload}}`. A well-formed action the environment rejects (unknown tool or document, invalid decision) is a penalised step with `success: false`, not an HTTP error.")
                .session()
                .body_with(step_body, "One of the 21 actions with its payload")
                .reply::<StepEnvelope>("The observation, reward, done flag and info"),
            step,
        )
        .get(
            "/state",
            RouteDoc::new("episode", "Public state of the session's episode")
                .describe("Trajectory, artifacts and signals; never gold. Before any reset, the initial state. Once an episode of a sealed run is over, its sealed state (`sealed: true`): no score, unsafe flag, split or pairing until the run is scored.")
                .session()
                .reply::<StateView>("The public state, or a finished sealed episode's sealed state"),
            state,
        )
        .get(
            "/institutional-memory",
            RouteDoc::new("session", "The session's institutional memory")
                .describe("The AP-week memory (loss ledger, calibration gate, vendor history) of the session; an unknown session reads a fresh institution's memory and creates nothing.")
                .session(),
            institutional_memory,
        )
        .post(
            "/institutional-reset",
            RouteDoc::new("session", "Clear the session's institutional memory").session(),
            institutional_reset,
        )
        .delete(
            "/session",
            RouteDoc::new("session", "Close the session named by `X-Session-Id` now")
                .describe("Frees the session's slot. The header is required; an unknown session is 404.")
                .session()
                .reply_with(closed_reply, "The session was closed"),
            close_session,
        )
}
