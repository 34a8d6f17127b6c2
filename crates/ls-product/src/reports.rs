//! Report-backed product endpoints (leaderboard, benchmark report, certify, summaries).
//!
//! They read the persistent store (`LEDGERSHIELD_DB_PATH`, default `data/ledgershield.db`) that
//! `ledgershield report` writes. Without a stored report each endpoint says so, or falls back to
//! the session's live institutional memory; nothing is fabricated, and an empty environment is
//! never certified as high trust.

pub use crate::report_store::ReportStore;
use crate::Product;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::Json;
use ls_report::{
    certify, leaderboard, leaderboard_entries, visualization, CertifyRequest, MemorySnapshot,
};
use ls_server::body::JsonBody;
use ls_server::error::ApiError;
use ls_server::extract::ApiPath;
use ls_server::route_table::ApiRoutes;
use ls_server::security::OperatorAccess;
use ls_server::sessions::lock_env;
use ls_server::sessions::SessionHeader;
use ls_store::{EpisodeRow, RunRow};
use serde_json::{json, Value};

mod table;

/// Keys whose values are per-case rows or gold: the public (keyless) view of a stored report
/// drops them wherever they are nested. Per-case rows carry the case's gold decision, whether a
/// PAY is unsafe, its attack mechanism and the teacher's decision; stored records carry
/// trajectories. Cases the report covers are served for play, so only operators see them.
const WITHHELD_KEYS: [&str; 17] = [
    "results",
    "case_results",
    "cases",
    "pair_reports",
    "scenario_examples",
    "authority_timeline",
    "timeline",
    "records",
    "record",
    "trajectory",
    "trajectories",
    "gold_decision",
    "unsafe_if_pay",
    "mechanism_family",
    "attack_family",
    "latent_mechanism",
    "gold_codes",
];

/// Is this a key the public view withholds?
pub fn withheld_key(key: &str) -> bool {
    WITHHELD_KEYS.contains(&key) || key.starts_with("gold")
}

/// The public view of a report-derived value: scores and aggregates, no per-case rows or gold
/// (see [`WITHHELD_KEYS`]); a top-level object says that rows were withheld.
pub fn public_view(mut v: Value) -> Value {
    fn strip(v: &mut Value) -> bool {
        let mut any = false;
        match v {
            Value::Object(m) => {
                let before = m.len();
                m.retain(|k, _| !withheld_key(k));
                any = m.len() != before;
                for x in m.values_mut() {
                    any |= strip(x);
                }
            }
            Value::Array(a) => {
                for x in a {
                    any |= strip(x);
                }
            }
            _ => {}
        }
        any
    }
    if strip(&mut v) {
        if let Value::Object(m) = &mut v {
            m.insert(
                "per_case_withheld".into(),
                Value::String(
                    "per-case rows and gold are shown to operators only (X-API-Key)".into(),
                ),
            );
        }
    }
    v
}

/// `v` as JSON (`null` when it cannot be) as the caller may see it: whole for an operator, else
/// [`public_view`].
fn view_for(access: &Access, v: impl serde::Serialize) -> Json<Value> {
    let v = serde_json::to_value(v).unwrap_or(Value::Null);
    if access.as_ref().is_some_and(|a| a.0 .0) {
        Json(v)
    } else {
        Json(public_view(v))
    }
}

type Access = Option<axum::Extension<OperatorAccess>>;

fn live_memory(s: &Product, header: &SessionHeader) -> Result<MemorySnapshot, ApiError> {
    let (sid, _) = header.session_id(None)?;
    Ok(s.sessions
        .get(&sid)
        .map(|e| MemorySnapshot::from_public(&lock_env(&e).memory.public_view()))
        .unwrap_or_default())
}

fn no_report_note() -> String {
    "No benchmark report has been generated yet; run `ledgershield report` (it stores the report in the database at LEDGERSHIELD_DB_PATH).".into()
}

async fn get_leaderboard(State(s): State<Product>, access: Access) -> Json<Value> {
    let entries = s.reports.leaderboard_entries();
    if !entries.is_empty() {
        let latest = entries.iter().map(|e| e.updated_at.clone()).max();
        return view_for(&access, leaderboard(entries, latest));
    }
    match s.reports.latest_report() {
        Some(r) => {
            let mut lb = leaderboard(leaderboard_entries(&r), Some(r.generated_at.clone()));
            lb.note = "Leaderboard entries derived from the latest stored benchmark report.".into();
            view_for(&access, lb)
        }
        None => Json(
            json!({"benchmark": ls_report::report::BENCHMARK, "generated_at": null, "entries": [], "note": no_report_note()}),
        ),
    }
}

async fn get_benchmark_report(State(s): State<Product>, access: Access) -> Json<Value> {
    match s.reports.latest_report_json() {
        Some(r) => view_for(&access, r),
        None => Json(
            json!({"benchmark": ls_report::report::BENCHMARK, "generated_at": null, "runtime_preview": false, "note": no_report_note()}),
        ),
    }
}

async fn get_controlbench_summary(
    State(s): State<Product>,
    header: SessionHeader,
    access: Access,
) -> Result<Json<Value>, ApiError> {
    if let Some(q) = s
        .reports
        .latest_report()
        .and_then(|r| r.controlbench_quarter)
    {
        return Ok(view_for(&access, q));
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

async fn get_human_baseline(State(s): State<Product>, access: Access) -> Json<Value> {
    let summary = match s.reports.latest_report() {
        Some(r) if r.human_baseline_track.available => r.human_baseline_track,
        _ => ls_report::human::load(s.reports.human_baseline.as_deref()),
    };
    view_for(&access, summary)
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
    State(s): State<Product>,
    header: SessionHeader,
    access: Access,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let req = parse_certify(body)?;
    let live = live_memory(&s, &header)?;
    let report = s.reports.latest_report();
    Ok(view_for(&access, certify(&req, report.as_ref(), &live)))
}

async fn get_certify_summary(
    State(s): State<Product>,
    header: SessionHeader,
    access: Access,
) -> Result<Json<Value>, ApiError> {
    let live = live_memory(&s, &header)?;
    let report = s.reports.latest_report();
    Ok(view_for(
        &access,
        certify(&CertifyRequest::default(), report.as_ref(), &live),
    ))
}

async fn get_visualization(
    State(s): State<Product>,
    header: SessionHeader,
    access: Access,
) -> Result<Json<Value>, ApiError> {
    let live = live_memory(&s, &header)?;
    let report = s.reports.latest_report();
    Ok(view_for(&access, visualization(report.as_ref(), &live)))
}

/// Most runs `GET /runs` lists, and most episodes `GET /runs/{id}` lists.
pub const MAX_RUNS_LISTED: usize = 200;
pub const MAX_EPISODES_LISTED: usize = 2000;
const MAX_RUN_ID_CHARS: usize = 200;

#[derive(serde::Deserialize)]
struct RunsQuery {
    limit: Option<usize>,
}

fn run_view(r: &RunRow) -> Value {
    json!({"run_id": r.run_id, "kind": r.kind, "agent": r.agent, "model": r.model, "agent_type": r.agent_type,
        "suite": r.summary.get("suite").cloned().unwrap_or(Value::Null), "seed": r.seed, "created_at": r.created_at,
        "case_count": r.case_count, "mean_score": r.mean_score, "summary": r.summary})
}

fn episode_view(e: &EpisodeRow) -> Value {
    json!({"idx": e.idx, "case_id": e.case_id, "base_case_id": e.base_case_id, "task_type": e.task_type, "final_score": e.final_score,
        "result_class": e.result_class, "decision": e.decision, "steps": e.steps, "total_reward": e.total_reward})
}

fn checked_run_id(id: &str) -> Result<&str, ApiError> {
    if id.is_empty() || id.chars().count() > MAX_RUN_ID_CHARS {
        return Err(ApiError::Validation(format!(
            "run id must be 1-{MAX_RUN_ID_CHARS} characters"
        )));
    }
    Ok(id)
}

/// `GET /runs?limit=N`: stored runs, newest first (at most [`MAX_RUNS_LISTED`]).
async fn get_runs(
    State(s): State<Product>,
    q: Result<Query<RunsQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = q.map_err(|e| ApiError::Validation(format!("runs query: {}", e.body_text())))?;
    let limit = q.limit.unwrap_or(50).clamp(1, MAX_RUNS_LISTED);
    let runs: Vec<Value> = s.reports.runs(limit).iter().map(run_view).collect();
    let note = if s.reports.available() {
        ""
    } else {
        "No run store yet; `ledgershield run` creates it (LEDGERSHIELD_DB_PATH)."
    };
    Ok(Json(json!({"runs": runs, "note": note})))
}

/// `GET /runs/{run_id}`: one run and its episodes' summaries (no trajectories).
async fn get_run(
    State(s): State<Product>,
    ApiPath(run_id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let id = checked_run_id(&run_id)?;
    let run = s
        .reports
        .run(id)
        .ok_or_else(|| ApiError::NotFound(format!("no stored run '{id}'")))?;
    let episodes: Vec<Value> = s
        .reports
        .run_episodes(id, MAX_EPISODES_LISTED)
        .iter()
        .map(episode_view)
        .collect();
    Ok(Json(json!({"run": run_view(&run), "episodes": episodes})))
}

/// `GET /runs/{run_id}/episodes/{idx}`: one stored episode record (trajectory, terminal info).
async fn get_run_episode(
    State(s): State<Product>,
    path: Result<Path<(String, u32)>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path((run_id, idx)) =
        path.map_err(|e| ApiError::Validation(format!("episode path: {}", e.body_text())))?;
    let id = checked_run_id(&run_id)?;
    let limit = usize::try_from(idx)
        .unwrap_or(usize::MAX)
        .saturating_add(1)
        .min(MAX_EPISODES_LISTED);
    s.reports
        .run_episodes(id, limit)
        .into_iter()
        .find(|e| e.idx == idx)
        .map(|e| Json(json!({"run_id": e.run_id, "episode": episode_view(&e), "record": e.record})))
        .ok_or_else(|| ApiError::NotFound(format!("no episode {idx} in stored run '{id}'")))
}

/// Routes of the report-backed endpoints, each with its documentation.
pub fn routes() -> ApiRoutes<Product> {
    table::routes()
}
