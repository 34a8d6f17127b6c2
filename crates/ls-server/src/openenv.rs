//! OpenEnv protocol surface, generic over the environment served.
//!
//! An environment plugs in by implementing two traits ([`crate::protocol`]):
//! * [`OpenEnvBackend`] for the per-session environment (reset / step / state / tool calls);
//! * [`OpenEnvService`] for the shared server state (backend factory, limits, discovery data).
//!
//! [`protocol_routes`] then provides, for any service:
//! * `GET /ws`: WebSocket sessions speaking openenv-core 0.3's message protocol ([`crate::ws`]);
//! * `POST /mcp`: MCP JSON-RPC 2.0 (`tools/list`, `tools/call`, `openenv/session/*`) ([`crate::ws_mcp`]);
//! * `GET /metadata`, `GET /schema`, `GET /openapi.json` ([`crate::discovery`]).
//!
//! This module knows no environment: ControlBench's adapter is `controlbench_openenv`, the
//! audit environment's is `audit`.

pub use crate::protocol::{to_json, OpenEnvBackend, OpenEnvService};
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

/// The OpenEnv protocol routes for any service.
pub fn protocol_routes<S: OpenEnvService>() -> Router<Arc<S>> {
    Router::new()
        .route("/ws", get(crate::ws::ws_handler::<S>))
        .route("/mcp", post(crate::ws_mcp::http_mcp::<S>))
        .route("/metadata", get(crate::discovery::metadata::<S>))
        .route("/schema", get(crate::discovery::schema::<S>))
        .route("/openapi.json", get(crate::discovery::openapi::<S>))
}
