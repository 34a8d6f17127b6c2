//! OpenEnv protocol surface, generic over the environment served.
//!
//! An environment plugs in by implementing two traits ([`crate::protocol`]):
//! * [`OpenEnvBackend`] for the per-session environment (reset / step / state / tool calls);
//! * [`OpenEnvService`] for the shared server state (backend factory, limits, discovery data).
//!
//! [`protocol_routes`] then provides, for any service, documented in the route table:
//! * `GET /ws`: WebSocket sessions speaking openenv-core 0.3's message protocol ([`crate::ws`]);
//! * `POST /mcp`: MCP JSON-RPC 2.0 (`tools/list`, `tools/call`, `openenv/session/*`) ([`crate::ws_mcp`]);
//! * `GET /metadata`, `GET /schema` ([`crate::discovery`]). `GET /openapi.json` and `GET /docs`
//!   are added over the whole application by [`crate::openapi::with_reference`].
//!
//! This module knows no environment: ControlBench's adapter is `controlbench_openenv`, the
//! audit environment's is `audit`.

use crate::protocol::EnvironmentMetadata;
pub use crate::protocol::{to_json, EnvironmentSchemas, OpenEnvBackend, OpenEnvService};
use crate::route_table::{ApiRoutes, RouteDoc};
use schemars::{json_schema, Schema, SchemaGenerator};
use std::sync::Arc;

fn rpc_request(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object", "title": "JsonRpcRequest", "required": ["jsonrpc", "method"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "method": {"type": "string", "description": "tools/list, tools/call, openenv/session/create or openenv/session/close"},
            "params": {"type": "object", "description": "tools/call: {name, arguments, session_id}; session/close: {session_id}"},
            "id": {"type": ["string", "integer", "null"]}},
    })
}

fn rpc_response(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object", "title": "JsonRpcResponse", "required": ["jsonrpc"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "result": {"description": "the method's result (tools/call: MCP content with the step reply)"},
            "error": {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}},
            "id": {"type": ["string", "integer", "null"]}},
    })
}

/// The OpenEnv protocol routes for any service, documented.
pub fn protocol_routes<S: OpenEnvService>() -> ApiRoutes<Arc<S>> {
    ApiRoutes::new()
        .get(
            "/ws",
            RouteDoc::new("openenv", "OpenEnv WebSocket session")
                .describe("Upgrade to a WebSocket. Messages `reset`, `step`, `state`, `close` and `mcp` (JSON `{type, data}`); replies `observation`, `state`, `error` and `mcp`. Each connection is its own isolated environment; limits `LEDGERSHIELD_WS_*`.")
                .status(101, "application/json", None, "Switching protocols to a WebSocket session"),
            crate::ws::ws_handler::<S>,
        )
        .post(
            "/mcp",
            RouteDoc::new("openenv", "MCP JSON-RPC 2.0")
                .describe("`tools/list`, `tools/call` (one step in the session named by `params.session_id`), `openenv/session/create`, `openenv/session/close`. JSON-RPC errors come back as 200 with `error`.")
                .body_with(rpc_request, "A JSON-RPC 2.0 request")
                .reply_with(rpc_response, "A JSON-RPC 2.0 response"),
            crate::ws_mcp::http_mcp::<S>,
        )
        .get(
            "/metadata",
            RouteDoc::new("openenv", "Environment metadata (name, description, version, README)")
                .reply::<EnvironmentMetadata>("openenv-core's EnvironmentMetadata"),
            crate::discovery::metadata::<S>,
        )
        .get(
            "/schema",
            RouteDoc::new("openenv", "JSON Schemas of action, observation and state")
                .reply::<EnvironmentSchemas>("openenv-core's SchemaResponse"),
            crate::discovery::schema::<S>,
        )
}
