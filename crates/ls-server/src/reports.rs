//! Report-backed product endpoints (leaderboard, benchmark report, certify, summaries).
//!
//! They read the persistent store (`LEDGERSHIELD_DB_PATH`, default `data/ledgershield.db`) that
//! `ledgershield report` writes. Without a stored report each endpoint says so, or falls back to
//! the session's live institutional memory; nothing is fabricated, and an empty environment is
//! never certified as high trust.

use crate::body::JsonBody;
pub use crate::report_store::ReportStore;
use crate::sessions::SessionHeader;
use crate::error::ApiError;
use crate::sessions::lock_env;
use crate::Shared;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use ls_report::{
    certify, leaderboard, leaderboard_entries, visualization, CertifyRequest,
    MemorySnapshot,
};
use serde_json::{json, Value};


fn live_memory(s: &Shared, header: &SessionHeader) -> Result<MemorySnapshot, ApiError> {
    let (sid, _) = header.session_id(None)?;
    Ok(s.sessions
        .get(&sid)
        .map(|e| MemorySnapshot::from_public(&lock_env(&e).memory.public_view()))
        .unwrap_or_default())
}

fn no_report_note() -> String {
    "No benchmark report has been generated yet; run `ledgershield report` (it stores the report in the database at LEDGERSHIELD_DB_PATH).".into()
}

async fn get_leaderboard(State(s): State<Shared>) -> Json<Value> {
    let entries = s.reports.leaderboard_entries();
    if !entries.is_empty() {
        let latest = entries.iter().map(|e| e.updated_at.clone()).max();
        return Json(serde_json::to_value(leaderboard(entries, latest)).unwrap_or(Value::Null));
    }
    match s.reports.latest_report() {
        Some(r) => {
            let mut lb = leaderboard(leaderboard_entries(&r), Some(r.generated_at.clone()));
            lb.note = "Leaderboard entries derived from the latest stored benchmark report.".into();
            Json(serde_json::to_value(lb).unwrap_or(Value::Null))
        }
        None => Json(
            json!({"benchmark": ls_report::report::BENCHMARK, "generated_at": null, "entries": [], "note": no_report_note()}),
        ),
    }
}

async fn get_benchmark_report(State(s): State<Shared>) -> Json<Value> {
    match s.reports.latest_report_json() {
        Some(r) => Json(r),
        None => Json(
            json!({"benchmark": ls_report::report::BENCHMARK, "generated_at": null, "runtime_preview": false, "note": no_report_note()}),
        ),
    }
}

async fn get_controlbench_summary(
    State(s): State<Shared>,
    header: SessionHeader,
) -> Result<Json<Value>, ApiError> {
    if let Some(q) = s
        .reports
        .latest_report()
        .and_then(|r| r.controlbench_quarter)
    {
        return Ok(Json(serde_json::to_value(q).unwrap_or(Value::Null)));
    }
    let (sid, _) = header.session_id(None)?;
    let raw = s
        .sessions
        .get(&sid)
        .map(|e| lock_env(&e).memory.public_view())
        .unwrap_or_else(|| s.new_env().memory.public_view());
    Ok(Json(json!({
        "benchmark": ls_report::report::BENCHMARK,
        "note": "No ControlBench artifact has been generated; this is the live institutional memory of the session.",
        "controlbench_summary": raw.get("controlbench_summary").cloned().unwrap_or(Value::Null),
        "loss_surface": raw.get("loss_ledger").and_then(|l| l.get("loss_surface")).cloned().unwrap_or(Value::Null),
        "calibration_gate": raw.get("calibration_gate").cloned().unwrap_or(Value::Null),
    })))
}

async fn get_human_baseline(State(s): State<Shared>) -> Json<Value> {
    let summary = match s.reports.latest_report() {
        Some(r) if r.human_baseline_track.available => r.human_baseline_track,
        _ => ls_report::human::load(s.reports.human_baseline.as_deref()),
    };
    Json(serde_json::to_value(summary).unwrap_or(Value::Null))
}

fn parse_certify(body: Value) -> Result<CertifyRequest, ApiError> {
    match body {
        Value::Null => Ok(CertifyRequest::default()),
        Value::Object(_) => serde_json::from_value(body)
            .map_err(|e| ApiError::Validation(format!("certify body: {e}"))),
        _ => Err(ApiError::Validation(
            "certify body must be a JSON object".into(),
        )),
    }
}

async fn post_certify(
    State(s): State<Shared>,
    header: SessionHeader,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let req = parse_certify(body)?;
    let live = live_memory(&s, &header)?;
    let report = s.reports.latest_report();
    Ok(Json(
        serde_json::to_value(certify(&req, report.as_ref(), &live)).unwrap_or(Value::Null),
    ))
}

async fn get_certify_summary(
    State(s): State<Shared>,
    header: SessionHeader,
) -> Result<Json<Value>, ApiError> {
    let live = live_memory(&s, &header)?;
    let report = s.reports.latest_report();
    Ok(Json(
        serde_json::to_value(certify(&CertifyRequest::default(), report.as_ref(), &live))
            .unwrap_or(Value::Null),
    ))
}

async fn get_visualization(
    State(s): State<Shared>,
    header: SessionHeader,
) -> Result<Json<Value>, ApiError> {
    let live = live_memory(&s, &header)?;
    let report = s.reports.latest_report();
    Ok(Json(
        serde_json::to_value(visualization(report.as_ref(), &live)).unwrap_or(Value::Null),
    ))
}

/// Routes of the report-backed endpoints.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/leaderboard", get(get_leaderboard))
        .route("/benchmark-report", get(get_benchmark_report))
        .route("/controlbench-summary", get(get_controlbench_summary))
        .route("/human-baseline-summary", get(get_human_baseline))
        .route("/certify", post(post_certify))
        .route("/certify-summary", get(get_certify_summary))
        .route("/controlbench-visualization", get(get_visualization))
}
