//! `POST /counterfactual` (instrumented mode, operator key): counterfactual queries on the
//! causal model of the session's current case. The answer shows the case's mechanism states, so
//! a blind server refuses it and, in instrumented mode, only the operator may ask.

use crate::Product;
use axum::extract::State;
use axum::Json;
use ls_env::TrackMode;
use ls_server::body::JsonBody;
use ls_server::error::ApiError;
use ls_server::route_table::{ApiRoutes, RouteDoc};
use ls_server::security::OperatorAccess;
use ls_server::sessions::{lock_env, SessionHeader};
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::Value;
use std::collections::BTreeMap;

type Access = Option<axum::Extension<OperatorAccess>>;

/// `{"interventions": {"<mechanism>": 0 | 1, …}}` (an empty map asks for the factual world).
fn parse(body: Value) -> Result<BTreeMap<String, u8>, ApiError> {
    let obj = body
        .as_object()
        .ok_or_else(|| ApiError::Validation("body must be a JSON object".into()))?;
    let iv = match obj.get("interventions") {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(ApiError::Validation(
                "interventions must be an object of mechanism → 0 or 1".into(),
            ))
        }
    };
    iv.iter()
        .map(|(k, v)| match v.as_u64() {
            Some(x @ 0..=1) => Ok((k.clone(), x as u8)),
            _ => Err(ApiError::Validation(format!(
                "interventions.{k} must be 0 (clean) or 1 (suspicious)"
            ))),
        })
        .collect()
}

async fn post_counterfactual(
    State(s): State<Product>,
    header: SessionHeader,
    access: Access,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    if s.config.track_mode != TrackMode::Instrumented {
        return Err(ApiError::Forbidden(
            "counterfactual queries are served in instrumented mode only (the answer shows the case's mechanisms)".into(),
        ));
    }
    if !access.as_ref().is_some_and(|a| a.0 .0) {
        return Err(ApiError::Forbidden(
            "counterfactual queries need the operator key (X-API-Key)".into(),
        ));
    }
    let interventions = parse(body)?;
    let (sid, _) = header.session_id(None)?;
    let env = s
        .sessions
        .get(&sid)
        .ok_or_else(|| ApiError::UnknownSession(sid.clone()))?;
    let case = {
        let guard = lock_env(&env);
        guard
            .episode()
            .map(|e| e.case.clone())
            .ok_or(ApiError::NotReset)?
    };
    let answer =
        ls_report::causal_query::answer(&case, &interventions).map_err(ApiError::Validation)?;
    Ok(Json(serde_json::to_value(answer).unwrap_or(Value::Null)))
}

fn body_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "properties": {"interventions": {"type": "object", "description": "mechanism name (vendor_legitimacy, sender_authenticity, bank_alignment, document_integrity, approval_chain_integrity, duplicate_pattern, portfolio_linkage, callback_result) → 0 clean or 1 suspicious", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 1}}}})
}

fn reply_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "description": "case_id, mechanisms, interventions, factual, factual_decision, counterfactual, counterfactual_decision, changed, decision_flips"})
}

pub fn routes() -> ApiRoutes<Product> {
    ApiRoutes::new().post(
        "/counterfactual",
        RouteDoc::new("episode", "Counterfactual query on the current case's causal model")
            .describe("Instrumented mode and the operator key only: do(mechanism = value) by abduction, action and prediction on the case's structural causal model.")
            .session()
            .body_with(body_schema, "The interventions")
            .reply_with(reply_schema, "The factual and counterfactual worlds and decisions"),
        post_counterfactual,
    )
}
