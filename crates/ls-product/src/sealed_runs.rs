//! Sealed runs: the one keyless way to have held-out ControlBench cases graded, with no oracle
//! per episode (the ControlBench counterpart of the audit environment's `POST /leaderboard/run`).
//!
//! `POST /sealed-runs {suite, count, model}` draws the run's cases on the server (generated
//! holdout or challenge cases from seeds drawn from the OS random source, or certificate-required
//! clones; [`run::draw`]) and opens a session for them. The client plays each case once:
//! `POST /sealed-runs/{run_id}/reset {case_id}` starts it as a sealed episode in the run's
//! session, then ordinary `/step`s with that `X-Session-Id`. A sealed episode answers no grade
//! (`ls_env::seal`): the client learns the run's aggregate score once, when every case's episode
//! has ended (`GET /sealed-runs/{run_id}` scores it) or when it asks (`POST
//! /sealed-runs/{run_id}/score`, unplayed cases at the floor); the run is then closed. The
//! per-case grades are operator data (`GET /sealed-runs/{run_id}/episodes`, the operator key);
//! a scored run is stored (kind `sealed`, track `sealed`) when the server has a run store.
//! Starts are rate-limited per client and server-wide and the runs kept are bounded
//! ([`registry`]).

pub mod registry;
pub mod run;

use crate::Product;
use axum::extract::State;
use axum::Json;
use ls_core::FixtureSet;
use ls_server::body::{EnvelopeReply, JsonBody, JsonReply};
use ls_server::error::ApiError;
use ls_server::extract::ApiPath;
use ls_server::route_table::{ApiRoutes, RouteDoc};
use ls_server::security::{client_key, ClientAddr};
use ls_server::sessions::{lock_env, SessionManager};
use ls_store::{EpisodeRow, RunRow, Store};
use registry::{lock, RunHandle};
use run::{CaseGrade, RunScore, RunStatus, SealedRun, Suite};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

/// The run kind and leaderboard track sealed runs are stored under.
pub const SEALED_KIND: &str = "sealed";
/// The route prefix.
pub const ROUTE: &str = "/sealed-runs";

/// `POST /sealed-runs`: which held-out suite, how many cases, under what name.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "SealedRunRequest")]
pub struct StartRequest {
    /// The held-out suite (`holdout`, `challenge` or `certificate`; default `holdout`).
    #[serde(default)]
    pub suite: Suite,
    /// Cases in the run: 5 to 24 (default 12).
    #[serde(default)]
    pub count: Option<usize>,
    /// The agent or model the run evaluates (1-64 printable characters; default `anonymous`):
    /// the stored run's name.
    #[serde(default)]
    pub model: Option<String>,
}

/// `POST /sealed-runs/{run_id}/reset`: the case to start.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "SealedResetRequest")]
pub struct CaseRequest {
    /// One of the run's case ids.
    pub case_id: String,
}

/// The reply to a start: the run, and how to play it.
#[derive(Debug, Serialize, JsonSchema)]
struct Started {
    #[serde(flatten)]
    run: RunStatus,
    message: &'static str,
}

/// The reply to scoring: the run's score, and whether it was stored.
#[derive(Debug, Serialize, JsonSchema)]
struct Scored {
    score: RunScore,
    /// The stored run's id (the same as the run's), when the server has a run store.
    stored_run_id: Option<String>,
    message: &'static str,
}

const HOW: &str = "Play each case once: POST /sealed-runs/{run_id}/reset {case_id} starts it in the run's session, then POST /step with X-Session-Id: <session_id>. Episodes are sealed: no score, class or grading report until the run is scored (GET /sealed-runs/{run_id} once every case's episode has ended, or POST /sealed-runs/{run_id}/score).";
const SCORED: &str = "The mean of the server's grades of each case's first episode (a case without a graded ending scores 0.01); the run is closed.";

fn parse_start(body: Value) -> Result<(Suite, usize, String), ApiError> {
    let req: StartRequest = match body {
        Value::Null => StartRequest::default(),
        Value::Object(_) => serde_json::from_value(body)
            .map_err(|e| ApiError::Validation(format!("sealed run: {e}")))?,
        _ => {
            return Err(ApiError::Validation(
                "the sealed run body must be a JSON object".into(),
            ))
        }
    };
    let count = req.count.unwrap_or(run::DEFAULT_CASES);
    let model = req
        .model
        .map_or_else(|| "anonymous".to_owned(), |m| m.trim().to_owned());
    if model.is_empty() || model.chars().count() > 64 || model.chars().any(char::is_control) {
        return Err(ApiError::Validation(
            "model: 1-64 printable characters".into(),
        ));
    }
    Ok((req.suite, count, model))
}

/// The served fixtures as a set for the generators (built once per server).
fn fixtures(s: &Product) -> Arc<FixtureSet> {
    s.sealed_fixtures
        .get_or_init(|| {
            Arc::new(FixtureSet {
                cases: s.pool.cases.iter().map(|c| (**c).clone()).collect(),
                master: (*s.pool.master).clone(),
            })
        })
        .clone()
}

/// `POST /sealed-runs`.
async fn start(
    State(s): State<Product>,
    client: Option<axum::Extension<ClientAddr>>,
    JsonBody(body): JsonBody,
) -> Result<Json<Started>, ApiError> {
    let (suite, count, model) = parse_start(body)?;
    run::check_count(suite, count, s.pool.cases.len())?;
    let owner = client_key(client.as_ref());
    s.sealed.admit(owner, std::time::Instant::now())?;
    let set = fixtures(&s);
    let cases =
        tokio::task::spawn_blocking(move || run::draw(&set, suite, count, &mut run::os_random))
            .await
            .map_err(|e| ApiError::Internal(format!("drawing the sealed run: {e}")))??;
    let session_id = SessionManager::<()>::new_id("sealed");
    s.sessions
        .get_or_create(&session_id, owner, || s.new_env())?;
    let run_id = SessionManager::<()>::new_id("sealed-run");
    let run = SealedRun::new(run_id, suite, model, session_id, cases);
    let status = run.status();
    s.sealed.insert(run, owner)?;
    Ok(Json(Started {
        run: status,
        message: HOW,
    }))
}

/// `POST /sealed-runs/{run_id}/reset`: start one of the run's cases, sealed, in its session.
async fn reset(
    State(s): State<Product>,
    ApiPath(run_id): ApiPath<String>,
    client: Option<axum::Extension<ClientAddr>>,
    JsonBody(body): JsonBody,
) -> Result<EnvelopeReply, ApiError> {
    let req: CaseRequest = serde_json::from_value(body).map_err(|e| {
        ApiError::Validation(format!(
            "sealed reset: the body is {{\"case_id\": <a case of the run>}} ({e})"
        ))
    })?;
    let handle = s.sealed.get(&run_id)?;
    let mut run = lock(&handle);
    let (case, seal) = run.case_to_start(req.case_id.trim())?;
    let env = s
        .sessions
        .get_or_create(&run.session_id, client_key(client.as_ref()), || s.new_env())?;
    let reply = lock_env(&env).reset_sealed(case, seal)?;
    run.mark_started(req.case_id.trim());
    Ok(EnvelopeReply(reply))
}

/// Score `handle` now and store it; the score and the stored run's id.
async fn score_and_store(s: &Product, handle: &RunHandle) -> Result<Scored, ApiError> {
    let (score, rows) = {
        let mut run = lock(handle);
        let score = run.score()?;
        let rows = stored_rows(&run, &score, s.config.track_mode.as_str());
        (score, rows)
    };
    let stored_run_id = store(s, rows).await;
    Ok(Scored {
        score,
        stored_run_id,
        message: SCORED,
    })
}

/// `GET /sealed-runs/{run_id}`: the cases and where each stands; a run whose every case's
/// episode has ended is scored by this read (once).
async fn status(
    State(s): State<Product>,
    ApiPath(run_id): ApiPath<String>,
) -> Result<JsonReply<RunStatus>, ApiError> {
    let handle = s.sealed.get(&run_id)?;
    let ready = {
        let run = lock(&handle);
        run.complete() && !run.is_scored()
    };
    if ready {
        // Scored by this read or, racing it, by another request: either way once.
        let _ = score_and_store(&s, &handle).await;
    }
    let status = lock(&handle).status();
    Ok(JsonReply(status))
}

/// `POST /sealed-runs/{run_id}/score`: score the run now (once).
async fn score(
    State(s): State<Product>,
    ApiPath(run_id): ApiPath<String>,
) -> Result<Json<Scored>, ApiError> {
    let handle = s.sealed.get(&run_id)?;
    Ok(Json(score_and_store(&s, &handle).await?))
}

/// `GET /sealed-runs/{run_id}/episodes` (operator): every case's grade.
async fn episodes(
    State(s): State<Product>,
    ApiPath(run_id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let handle = s.sealed.get(&run_id)?;
    let run = lock(&handle);
    Ok(Json(json!({"run": run.status(), "episodes": run.grades()})))
}

/// The stored run and its episodes (kind and track `sealed`).
fn stored_rows(run: &SealedRun, score: &RunScore, track_mode: &str) -> (RunRow, Vec<EpisodeRow>) {
    let grades: Vec<CaseGrade> = run.grades();
    let row = RunRow {
        run_id: run.run_id.clone(),
        kind: SEALED_KIND.into(),
        agent: run.model.clone(),
        model: run.model.clone(),
        agent_type: "sealed-run".into(),
        seed: 0,
        created_at: run.created_at.clone(),
        case_count: grades.len() as u32,
        mean_score: score.mean_score,
        summary: json!({"suite": run.suite.as_str(), "sealed": true, "track": SEALED_KIND,
            "source": "server", "track_mode": track_mode, "pass_k": 1,
            "case_ids": run.case_ids(), "graded_count": score.graded_count,
            "truncated_count": score.truncated_count, "unplayed_count": score.unplayed_count,
            "scored_at": score.scored_at}),
    };
    let episodes = grades
        .iter()
        .map(|g| {
            let rec = run::episode_record(g, &run.model);
            EpisodeRow {
                run_id: run.run_id.clone(),
                idx: g.idx as u32,
                case_id: g.case_id.clone(),
                base_case_id: g.base_case_id.clone(),
                task_type: g.task_type.clone(),
                final_score: rec.final_score,
                result_class: rec.result_class.clone(),
                decision: rec.decision.clone(),
                steps: rec.steps,
                total_reward: rec.total_reward,
                record: serde_json::to_value(&rec).unwrap_or_default(),
            }
        })
        .collect();
    (row, episodes)
}

/// Store a scored run when the server has a run store; its id, or `None` (no store, or the
/// write failed: the score stands and is logged).
async fn store(s: &Product, (run, episodes): (RunRow, Vec<EpisodeRow>)) -> Option<String> {
    let path = s
        .reports
        .path()
        .filter(|_| s.reports.available())?
        .to_path_buf();
    let id = run.run_id.clone();
    let written = tokio::task::spawn_blocking(move || {
        Store::open(&path)
            .and_then(|mut db| db.insert_run(&run, &episodes))
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r);
    match written {
        Ok(()) => Some(id),
        Err(e) => {
            tracing::warn!(run_id = %id, error = %e, "could not store the sealed run");
            None
        }
    }
}

fn run_id_param(doc: RouteDoc) -> RouteDoc {
    doc.path_param(
        "run_id",
        json!({"type": "string", "minLength": 1}),
        "The sealed run's id (answered by POST /sealed-runs)",
        json!("sealed-run-0123456789abcdef0123456789abcdef"),
    )
}

fn episodes_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["run", "episodes"], "properties": {
        "run": {"type": "object", "description": "the run's status"},
        "episodes": {"type": "array", "items": {"type": "object", "description": "idx, case_id, base_case_id, task_type, status, score, result_class, unsafe_outcome, decision, terminal_reason, steps, total_reward, paid, terminal_info, trajectory"}}}})
}

/// The sealed-run routes, each with its documentation.
pub fn routes() -> ApiRoutes<Product> {
    let r = |summary| RouteDoc::new("reports", summary);
    ApiRoutes::new()
        .post(
            ROUTE,
            r("Start a sealed run: the server draws held-out cases")
                .describe("Draws `count` cases of the held-out `suite` (generated holdout or challenge cases from seeds drawn from the OS random source, or certificate-required clones) and opens the run's session. Play each case once (`POST /sealed-runs/{run_id}/reset`, then `/step`); episodes are sealed, and the run's aggregate score comes once. Each client starts at most 4 runs a minute and the server 30 (429 past either, loopback included).")
                .body::<StartRequest>("The suite, the case count and the name (every field optional)")
                .reply::<Started>("The run: its cases, its session and how to play it"),
            start,
        )
        .get(
            "/sealed-runs/{run_id}",
            run_id_param(r("A sealed run's cases and score"))
                .describe("Each case's status (`unplayed`, `started`, `ended`; nothing graded) and the score once the run is scored. A run whose every case's episode has ended is scored by this read.")
                .reply::<RunStatus>("The run"),
            status,
        )
        .post(
            "/sealed-runs/{run_id}/reset",
            run_id_param(r("Start one of a sealed run's cases"))
                .describe("Resets the run's session (its `session_id`) into the case as a sealed episode, in a new session's state; step it with `X-Session-Id: <session_id>`. 404 for a case outside the run, 409 for a case already started or a run already scored, 400 when the session is inside a ControlBench sequence.")
                .body::<CaseRequest>("The case")
                .reply::<ls_env::StepEnvelope>("The first observation (reward 0, done false)"),
            reset,
        )
        .post(
            "/sealed-runs/{run_id}/score",
            run_id_param(r("Score a sealed run now (once)"))
                .describe("The mean of the grades of each case's first episode; a case without a graded ending (never played, abandoned, step limit or budget) scores 0.01. 409 when the run is already scored.")
                .reply::<Scored>("The run's score"),
            score,
        )
        .get(
            "/sealed-runs/{run_id}/episodes",
            run_id_param(r("A sealed run's per-case grades (operator)"))
                .describe("Operator route (`X-API-Key`): each case's grade, terminal info and trajectory.")
                .reply_with(episodes_reply, "The run and its cases' grades"),
            episodes,
        )
}

/// Is this a sealed-run operator route (the per-case grades)?
pub fn is_operator_route(method: &axum::http::Method, path: &str) -> bool {
    *method == axum::http::Method::GET
        && path
            .strip_prefix("/sealed-runs/")
            .is_some_and(|rest| rest.ends_with("/episodes"))
}
