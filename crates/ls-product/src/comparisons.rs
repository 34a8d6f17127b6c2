//! Stored live model comparisons (`ledgershield compare`), for the workbench.
//!
//! `GET /comparisons` lists the newest comparisons and `GET /comparisons/{id}` serves one. A
//! keyless caller gets the public aggregate (per model and per task family; no case list, case
//! scores, failed cases or traces, which would tell an agent under evaluation how each served
//! case was answered); the operator key (`X-API-Key`) gets the whole summary.

use crate::Product;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;
use ls_report::compare::CompareSummary;
use ls_server::error::ApiError;
use ls_server::extract::ApiPath;
use ls_server::route_table::{ApiRoutes, RouteDoc};
use ls_server::security::OperatorAccess;
use ls_store::RunRow;
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Value};

/// The run kind a comparison is stored under.
pub const COMPARE_KIND: &str = "compare";
/// Most comparisons listed, and most stored runs scanned for them.
pub const MAX_COMPARISONS_LISTED: usize = 50;
const RUN_SCAN: usize = 1000;
const MAX_ID_CHARS: usize = 200;

type Access = Option<axum::Extension<OperatorAccess>>;

fn is_operator(access: &Access) -> bool {
    access.as_ref().is_some_and(|a| a.0 .0)
}

/// One stored comparison as the caller may see it, with its id and run ids.
fn view(row: &RunRow, operator: bool) -> Result<Value, ApiError> {
    let summary: CompareSummary = serde_json::from_value(row.summary.clone()).map_err(|e| {
        ApiError::Internal(format!(
            "stored comparison {} is unreadable: {e}",
            row.run_id
        ))
    })?;
    let shown = if operator {
        summary
    } else {
        summary.public_aggregate()
    };
    let mut v = serde_json::to_value(shown).unwrap_or(Value::Null);
    v["comparison_id"] = row.run_id.clone().into();
    v["run_ids"] = row.summary.get("run_ids").cloned().unwrap_or(json!([]));
    if !operator {
        v["per_case_withheld"] =
            "case ids, case scores, failed cases and traces are shown to operators only (X-API-Key)"
                .into();
    }
    Ok(v)
}

#[derive(serde::Deserialize)]
struct ListQuery {
    limit: Option<usize>,
}

async fn get_comparisons(
    State(s): State<Product>,
    access: Access,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) =
        q.map_err(|e| ApiError::Validation(format!("comparisons query: {}", e.body_text())))?;
    let limit = q.limit.unwrap_or(10).clamp(1, MAX_COMPARISONS_LISTED);
    let operator = is_operator(&access);
    let rows: Vec<RunRow> = s
        .reports
        .runs(RUN_SCAN)
        .into_iter()
        .filter(|r| r.kind == COMPARE_KIND)
        .take(limit)
        .collect();
    let list = rows
        .iter()
        .map(|r| view(r, operator))
        .collect::<Result<Vec<_>, _>>()?;
    let note = if list.is_empty() {
        "No comparison stored yet; run `ledgershield compare --model A --model B --api-base URL` (it stores the summary in the database at LEDGERSHIELD_DB_PATH)."
    } else {
        ""
    };
    Ok(Json(json!({"comparisons": list, "note": note})))
}

async fn get_comparison(
    State(s): State<Product>,
    access: Access,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
        return Err(ApiError::Validation(format!(
            "comparison id must be 1-{MAX_ID_CHARS} characters"
        )));
    }
    let row = s
        .reports
        .run(&id)
        .filter(|r| r.kind == COMPARE_KIND)
        .ok_or_else(|| ApiError::NotFound(format!("no stored comparison '{id}'")))?;
    Ok(Json(view(&row, is_operator(&access))?))
}

fn list_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["comparisons", "note"], "properties": {
        "comparisons": {"type": "array", "items": {"type": "object", "description": "a comparison summary (public aggregate without the operator key)"}},
        "note": {"type": "string"}}})
}

fn one_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "description": "comparison_id, run_ids, version, generated_at_utc, models, cases, case_count, pass_threshold, seed, track_mode, api_base, capability_order {ordered_models, monotonic_by_capability, pairwise, violations}, results [{model, agent_type, model_profile, average_score, success_rate, min_score, max_score, api_calls, average_certificate_score, certificate_validity_rate, certificate_agent_authored_rate, institutional, task_families, failed_cases, case_scores, traces}]"})
}

/// The comparison routes, each with its documentation.
pub fn routes() -> ApiRoutes<Product> {
    let r = |summary| RouteDoc::new("reports", summary);
    ApiRoutes::new()
        .get(
            "/comparisons",
            r("Stored live model comparisons, newest first")
                .describe("Without the operator key, public aggregates only (no per-case rows).")
                .query("limit", json!({"type": "integer", "minimum": 1, "maximum": MAX_COMPARISONS_LISTED, "default": 10}), false, "How many comparisons to list")
                .reply_with(list_reply, "The comparisons and a note"),
            get_comparisons,
        )
        .get(
            "/comparisons/{comparison_id}",
            r("One stored live model comparison")
                .describe("Without the operator key, the public aggregate (no per-case rows).")
                .path_param("comparison_id", json!({"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS}), "A comparison id (`compare-…`)", json!("compare-x"))
                .reply_with(one_reply, "The comparison summary"),
            get_comparison,
        )
}
