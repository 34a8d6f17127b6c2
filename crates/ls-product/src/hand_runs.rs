//! `POST /hand-runs`: store the episode a person played by hand (the workbench's Play page) as a
//! run, so it appears in `GET /runs` and replays like any run.
//!
//! The client sends nothing but its session (`X-Session-Id`): the server takes the session's
//! finished episode (case, track, each action and payload), plays those actions again in a fresh
//! environment of the served pool (as `POST /agent-runs` plays a scripted agent) and stores that
//! record, so every stored score is one the server computed, never one a client claims. The
//! session's own score is kept next to it (`summary.session_score`): it differs only when the
//! session's earlier episodes changed its institution (authority, trust, losses). Operator route
//! (`X-API-Key`), like every write to the run store; it answers 409 when no store exists (serving
//! never creates one).

use crate::Product;
use axum::extract::State;
use axum::Json;
use ls_agents::{run_episode, Action, Agent, EpisodeRecord, LocalEnv, Silent};
use ls_env::ResetRequest;
use ls_env::StepEnvelope;
use ls_report::metrics::r4;
use ls_server::error::ApiError;
use ls_server::route_table::{ApiRoutes, RouteDoc};
use ls_server::sessions::{lock_env, SessionHeader, SessionManager};
use ls_store::{EpisodeRow, RunRow, Store};
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

/// The run kind hand-played episodes are stored under (not `run`: the leaderboard's stored runs
/// are agents' runs).
pub const HAND_KIND: &str = "hand";
/// The route (an operator route: it writes to the run store).
pub const ROUTE: &str = "/hand-runs";

/// What the session played.
struct Played {
    case_id: String,
    track: String,
    actions: Vec<(String, Map<String, Value>)>,
    session_score: f64,
}

/// Plays the recorded actions again, in order.
struct HandReplay {
    actions: std::vec::IntoIter<(String, Map<String, Value>)>,
}

impl Agent for HandReplay {
    fn name(&self) -> String {
        "human".into()
    }
    fn model(&self) -> String {
        "workbench".into()
    }
    fn agent_type(&self) -> String {
        "human".into()
    }
    fn begin(&mut self, _: &StepEnvelope, _: u64) {}
    fn next_action(&mut self, _: &StepEnvelope) -> Action {
        match self.actions.next() {
            Some((t, p)) => Action {
                action_type: t,
                payload: p,
            },
            // Never reached when the replay ends where the session did (checked after).
            None => Action::new("submit_decision", json!({})),
        }
    }
}

fn played(s: &Product, sid: &str) -> Result<Played, ApiError> {
    let env = s
        .sessions
        .get(sid)
        .ok_or_else(|| ApiError::UnknownSession(sid.to_owned()))?;
    let mut guard = lock_env(&env);
    let ep = guard.episode_mut().ok_or(ApiError::NotReset)?;
    let grade = ep
        .grade
        .as_ref()
        .filter(|_| ep.lifecycle().is_done())
        .ok_or_else(|| {
            ApiError::BadRequest(
                "the session's episode is not finished: submit a decision first, then store it"
                    .into(),
            )
        })?;
    if !s.pool.cases.iter().any(|c| c.case_id == ep.case.case_id) {
        return Err(ApiError::Validation(format!(
            "case {} is not in the served pool (a custom case cannot be replayed, so it is not stored)",
            ls_server::error::prefix(&ep.case.case_id)
        )));
    }
    Ok(Played {
        case_id: ep.case.case_id.clone(),
        track: ep.track.as_str().to_owned(),
        actions: ep
            .trajectory
            .iter()
            .map(|t| {
                (
                    t.action_type.as_str().to_owned(),
                    t.payload.as_map().clone(),
                )
            })
            .collect(),
        session_score: grade.final_score,
    })
}

/// Replay in a fresh environment; `Err` when the replay did not end where the session did.
fn replay(
    state: &ls_server::controlbench::AppState,
    p: &Played,
) -> Result<EpisodeRecord, ApiError> {
    let mut env = state.new_env();
    let mut client = LocalEnv::new(&mut env);
    let reset = ResetRequest {
        case_id: Some(p.case_id.clone()),
        track: Some(p.track.clone()),
        ..Default::default()
    };
    let mut agent = HandReplay {
        actions: p.actions.clone().into_iter(),
    };
    let rec = run_episode(&mut agent, &mut client, &reset, 0, &mut Silent);
    if !rec.done || rec.trajectory.len() != p.actions.len() {
        return Err(ApiError::BadRequest(format!(
            "replaying the session's {} actions in a fresh environment ended after {} (errors: {}); not stored",
            p.actions.len(),
            rec.trajectory.len(),
            rec.errors.join("; ")
        )));
    }
    Ok(rec)
}

fn rows(rec: &EpisodeRecord, p: &Played) -> (RunRow, EpisodeRow) {
    let run_id = SessionManager::<()>::new_id("hand");
    let run = RunRow {
        run_id: run_id.clone(),
        kind: HAND_KIND.into(),
        agent: rec.agent.clone(),
        model: rec.model.clone(),
        agent_type: "human".into(),
        seed: 0,
        created_at: ls_store::utc_now(),
        case_count: 1,
        mean_score: rec.final_score,
        summary: json!({"source": "workbench", "suite": "hand-played", "case_ids": [p.case_id],
            "track": p.track, "session_score": r4(p.session_score),
            "replayed_score": r4(rec.final_score)}),
    };
    let episode = EpisodeRow {
        run_id,
        idx: 0,
        case_id: rec.case_id.clone(),
        base_case_id: rec.case_id.clone(),
        task_type: rec.task_type.clone(),
        final_score: rec.final_score,
        result_class: rec.result_class.clone(),
        decision: rec.decision.clone(),
        steps: rec.steps,
        total_reward: rec.total_reward,
        record: serde_json::to_value(rec).unwrap_or_default(),
    };
    (run, episode)
}

fn store(s: &crate::ProductState, run: &RunRow, episode: &EpisodeRow) -> Result<(), ApiError> {
    let path = s.reports.path().filter(|_| s.reports.available()).ok_or_else(|| {
        ApiError::BadRequest(
            "no run store on this server: start it with LEDGERSHIELD_DB_PATH naming a database (`ledgershield report` or `run` creates one)".into(),
        )
    })?;
    let mut db =
        Store::open(path).map_err(|e| ApiError::Internal(format!("opening the run store: {e}")))?;
    db.insert_run(run, std::slice::from_ref(episode))
        .map_err(|e| ApiError::Internal(format!("storing the run: {e}")))
}

async fn post_hand_run(
    State(s): State<Product>,
    header: SessionHeader,
) -> Result<Json<Value>, ApiError> {
    let (sid, _) = header.session_id(None)?;
    let p = played(&s, &sid)?;
    let out = tokio::task::spawn_blocking(move || -> Result<Value, ApiError> {
        let rec = replay(&s, &p)?;
        let (run, episode) = rows(&rec, &p);
        store(&s, &run, &episode)?;
        Ok(json!({"run_id": run.run_id, "kind": HAND_KIND, "case_id": rec.case_id,
            "final_score": rec.final_score, "result_class": rec.result_class,
            "session_score": run.summary["session_score"], "replay": format!("#replay/{}/0", run.run_id)}))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("hand run: {e}")))??;
    Ok(Json(out))
}

fn reply_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["run_id", "kind", "case_id", "final_score"], "properties": {
        "run_id": {"type": "string"}, "kind": {"const": "hand"}, "case_id": {"type": "string"},
        "final_score": {"type": "number", "description": "the score of the actions replayed in a fresh environment (the stored score)"},
        "session_score": {"type": "number", "description": "the score the session's episode got"},
        "result_class": {"type": "string"}, "replay": {"type": "string", "description": "the workbench link to the stored episode"}}})
}

/// The route, with its documentation.
pub fn routes() -> ApiRoutes<Product> {
    ApiRoutes::new().post(
        ROUTE,
        RouteDoc::new("reports", "Store the session's hand-played episode as a run")
            .describe("Operator route (`X-API-Key`). Takes the finished episode of the session named by `X-Session-Id`, plays its actions again in a fresh environment and stores that record as a one-episode run of kind `hand` (agent `human`, model `workbench`), listed by `GET /runs` and replayable like any run. 400 before the submission or without a run store; 422 for a custom case.")
            .reply_with(reply_schema, "The stored run"),
        post_hand_run,
    )
}
