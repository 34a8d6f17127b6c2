//! Discovery endpoints of the OpenEnv protocol: `GET /metadata` and `GET /schema` (JSON Schemas
//! generated from the Rust types), and the schema generators `/openapi.json` uses
//! ([`crate::openapi`]).

pub use crate::protocol::{EnvironmentMetadata, EnvironmentSchemas, OpenEnvService, ToolSpec};
use axum::extract::State;
use axum::Json;
use schemars::generate::{Contract, SchemaGenerator, SchemaSettings};
use schemars::JsonSchema;
use serde_json::Value;
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

pub async fn metadata<S: OpenEnvService>(State(svc): State<Arc<S>>) -> Json<EnvironmentMetadata> {
    Json(svc.metadata())
}

pub async fn schema<S: OpenEnvService>(State(svc): State<Arc<S>>) -> Json<EnvironmentSchemas> {
    Json(svc.schemas())
}
