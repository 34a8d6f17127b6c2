//! Discovery endpoints of the OpenEnv protocol: `GET /metadata`, `GET /schema` and
//! `GET /openapi.json` (an OpenAPI 3.1 document built in code from the service's route list and
//! the JSON Schemas of its Rust types).

pub use crate::protocol::{
    EnvironmentMetadata, EnvironmentSchemas, OpenEnvService, RouteDoc, ToolSpec,
};
use axum::extract::State;
use axum::Json;
use schemars::generate::{Contract, SchemaGenerator, SchemaSettings};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub fn input_schema<T: JsonSchema>() -> Value {
    Value::from(
        SchemaSettings::draft2020_12()
            .into_generator()
            .into_root_schema_for::<T>(),
    )
}

/// JSON Schema (2020-12) of a type as the server emits it.
pub fn output_schema<T: JsonSchema>() -> Value {
    Value::from(
        SchemaSettings::draft2020_12()
            .with(|s| s.contract = Contract::Serialize)
            .into_generator()
            .into_root_schema_for::<T>(),
    )
}

/// A generator whose definitions live under `#/components/schemas/` (request types).
pub fn component_generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator()
}

/// As [`component_generator`], for response types.
pub fn component_generator_serialize() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.contract = Contract::Serialize;
        })
        .into_generator()
}

/// The OpenAPI `info.version`: the OpenEnv HTTP API profile implemented (`openenv-http/1.x`).
pub const OPENAPI_API_VERSION: &str = "1.0.0";

fn error_schema() -> Value {
    json!({
        "type": "object",
        "required": ["error", "detail"],
        "properties": {
            "error": {"type": "object", "required": ["code", "message"], "properties": {"code": {"type": "string"}, "message": {"type": "string"}}},
            "detail": {"type": "string"},
        },
    })
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// Build the OpenAPI 3.1 document of a service.
pub fn openapi_document<S: OpenEnvService>(svc: &S) -> Value {
    let meta = svc.metadata();
    let mut routes = svc.route_docs();
    routes.extend([
        RouteDoc::get("/metadata", "Environment metadata (name, description, version, README)", Some("EnvironmentMetadata")),
        RouteDoc::get("/schema", "JSON Schemas of action, observation and state", Some("SchemaResponse")),
        RouteDoc::get("/openapi.json", "This document", None),
        RouteDoc::post("/mcp", "MCP JSON-RPC 2.0: tools/list, tools/call, openenv/session/create, openenv/session/close", Some("JsonRpcRequest"), Some("JsonRpcResponse")),
    ]);
    let mut paths = Map::new();
    for r in &routes {
        let mut op = Map::new();
        op.insert("summary".into(), json!(r.summary));
        op.insert(
            "operationId".into(),
            json!(format!(
                "{}_{}",
                r.method,
                r.path.trim_matches('/').replace(['/', '-', '.'], "_")
            )
            .trim_end_matches('_')
            .to_owned()),
        );
        if let Some(req) = r.request {
            op.insert("requestBody".into(), json!({"required": false, "content": {"application/json": {"schema": schema_ref(req)}}}));
        }
        let ok = match r.response {
            Some(name) => {
                json!({"description": "OK", "content": {"application/json": {"schema": schema_ref(name)}}})
            }
            None => {
                json!({"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}})
            }
        };
        let mut responses = Map::new();
        responses.insert("200".into(), ok);
        if r.method == "post" && r.path != "/mcp" {
            responses.insert("4XX".into(), json!({"description": "Protocol error", "content": {"application/json": {"schema": schema_ref("ApiError")}}}));
        }
        op.insert("responses".into(), Value::Object(responses));
        let entry = paths.entry(r.path.to_owned()).or_insert_with(|| json!({}));
        if let Value::Object(m) = entry {
            m.insert(r.method.to_owned(), Value::Object(op));
        }
    }
    paths.insert(
        "/ws".into(),
        json!({"get": {
            "summary": "OpenEnv WebSocket session: messages reset / step / state / close / mcp; replies observation / state / error / mcp",
            "operationId": "get_ws",
            "responses": {"101": {"description": "Switching protocols to a WebSocket session"}, "400": {"description": "Not a WebSocket upgrade request", "content": {"application/json": {"schema": schema_ref("ApiError")}}}},
        }}),
    );
    let mut schemas = svc.component_schemas();
    schemas.insert("ApiError".into(), error_schema());
    schemas.insert(
        "EnvironmentMetadata".into(),
        json!({"type": "object", "required": ["name", "description"], "properties": {
            "name": {"type": "string"}, "description": {"type": "string"}, "readme_content": {"type": ["string", "null"]},
            "version": {"type": ["string", "null"]}, "author": {"type": ["string", "null"]}, "documentation_url": {"type": ["string", "null"]}}}),
    );
    schemas.insert(
        "SchemaResponse".into(),
        json!({"type": "object", "required": ["action", "observation", "state"], "properties": {"action": {"type": "object"}, "observation": {"type": "object"}, "state": {"type": "object"}}}),
    );
    schemas.insert(
        "JsonRpcRequest".into(),
        json!({"type": "object", "required": ["jsonrpc", "method"], "properties": {"jsonrpc": {"const": "2.0"}, "method": {"type": "string"}, "params": {"type": "object"}, "id": {"type": ["string", "integer", "null"]}}}),
    );
    schemas.insert(
        "JsonRpcResponse".into(),
        json!({"type": "object", "required": ["jsonrpc"], "properties": {"jsonrpc": {"const": "2.0"}, "result": {}, "error": {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}}}, "id": {"type": ["string", "integer", "null"]}}}),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": format!("{} (OpenEnv)", meta.name),
            "description": meta.description,
            "version": OPENAPI_API_VERSION,
            "x-environment-version": meta.version,
        },
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

pub async fn metadata<S: OpenEnvService>(State(svc): State<Arc<S>>) -> Json<EnvironmentMetadata> {
    Json(svc.metadata())
}

pub async fn schema<S: OpenEnvService>(State(svc): State<Arc<S>>) -> Json<EnvironmentSchemas> {
    Json(svc.schemas())
}

pub async fn openapi<S: OpenEnvService>(State(svc): State<Arc<S>>) -> Json<Value> {
    Json(openapi_document(&*svc))
}
