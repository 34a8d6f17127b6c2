//! Report-backed product endpoints (leaderboard, benchmark report, certify, summaries).
//!
//! They read the persistent store (`LEDGERSHIELD_DB_PATH`, default `data/ledgershield.db`) that
//! `ledgershield report` writes. Without a stored report each endpoint says so, or falls back to
//! the session's live institutional memory; nothing is fabricated, and an empty environment is
//! never certified as high trust.

use crate::body::JsonBody;
use crate::controlbench::SessionHeader;
use crate::error::ApiError;
use crate::sessions::lock_env;
use crate::Shared;
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use ls_report::{
    certify, leaderboard, leaderboard_entries, visualization, BenchmarkReport, CertifyRequest,
    LeaderboardEntry, MemorySnapshot,
};
use ls_store::Store;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Mutex;

/// Lazily opened handle on the persistent store plus the human-baseline path.
pub struct ReportStore {
    path: Option<PathBuf>,
    store: Mutex<Option<Store>>,
    pub human_baseline: Option<PathBuf>,
}

impl ReportStore {
    /// From `LEDGERSHIELD_DB_PATH` (default `data/ledgershield.db`) and `LEDGERSHIELD_HUMAN_BASELINE_PATH`.
    pub fn from_env() -> Self {
        Self {
            path: Some(ls_store::db_path_from_env()),
            store: Mutex::new(None),
            human_baseline: std::env::var_os("LEDGERSHIELD_HUMAN_BASELINE_PATH").map(PathBuf::from),
        }
    }

    /// A store at an explicit path.
    pub fn at(path: PathBuf) -> Self {
        Self {
            path: Some(path),
            store: Mutex::new(None),
            human_baseline: None,
        }
    }

    /// No persistent store (every endpoint reports that no artifact exists).
    pub fn disabled() -> Self {
        Self {
            path: None,
            store: Mutex::new(None),
            human_baseline: None,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&Store) -> Option<T>) -> Option<T> {
        let path = self.path.as_ref()?;
        let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            // Only read an existing database: serving must not create files as a side effect.
            if !path.exists() {
                return None;
            }
            match Store::open(path) {
                Ok(s) => *guard = Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "could not open the report store");
                    return None;
                }
            }
        }
        guard.as_ref().and_then(f)
    }

    pub fn latest_report_json(&self) -> Option<Value> {
        self.with(|s| s.latest_report().ok().flatten())
    }

    pub fn latest_report(&self) -> Option<BenchmarkReport> {
        self.latest_report_json()
            .and_then(|v| serde_json::from_value(v).ok())
    }

    pub fn leaderboard_entries(&self) -> Vec<LeaderboardEntry> {
        self.with(|s| s.leaderboard().ok())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| serde_json::from_value(r.entry).ok())
            .collect()
    }
}

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
