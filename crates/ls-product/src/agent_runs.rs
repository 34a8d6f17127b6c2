//! `POST /agent-runs`: play a scripted agent (the teacher, a baseline, a red-team policy) on
//! chosen cases of the served pool, in-process, and return what it did and how it scored.
//!
//! The workbench's agent-runner page calls it. It is an operator route: a scripted agent's
//! submissions on a served case are a worked answer, which an agent under evaluation must not read.
//! The handler validates the request and calls `ls_agents::run_episode` on a fresh environment of
//! the server's pool and configuration (one institution across the chosen cases, as a run has);
//! the episodes run on a blocking thread.
//!
//! Bounded: at most [`MAX_CONCURRENT_AGENT_RUNS`] runs at once (503 past it), each within its
//! deadline (`deadline_secs`, at most [`MAX_AGENT_RUN_SECS`]; 504 when it passes), and stopped
//! when its client goes away (the model call in progress is dropped, no further case is played).

use crate::Product;
use axum::extract::State;
use axum::Json;
use ls_agents::outbound::Cancel;
use ls_agents::EpisodeRecord;
use ls_report::eval::play_case;
use ls_server::body::JsonBody;
use ls_server::error::ApiError;
use ls_server::route_table::{ApiRoutes, RouteDoc};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Most cases one request plays.
pub const MAX_AGENT_RUN_CASES: usize = 25;
/// Most agent runs at once (each holds a blocking thread while it plays).
pub const MAX_CONCURRENT_AGENT_RUNS: usize = 4;
/// The longest (and default) deadline of one run, in seconds.
pub const MAX_AGENT_RUN_SECS: u64 = 300;

/// What to run.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "AgentRunRequest")]
pub struct AgentRunRequest {
    /// `teacher`, `random`, `naive-pay`, `always-escalate` (or a teacher ablation / red-team
    /// policy), or `llm` with `llm` naming the endpoint.
    pub agent: String,
    /// Case ids of the served pool, played in this order (1 to 25).
    pub case_ids: Vec<String>,
    /// Seed of the agent's own randomness (the random baseline); default 0.
    #[serde(default)]
    pub seed: u64,
    /// For `agent: "llm"`: the OpenAI-compatible endpoint the server plays the LLM agent against.
    #[serde(default)]
    pub llm: Option<crate::llm_runs::LlmEndpoint>,
    /// The run must end within this many seconds (1 to 300, default 300); past it the reply is
    /// 504 and no further case is played.
    #[serde(default)]
    pub deadline_secs: Option<u64>,
}

fn reply_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["agent", "model", "episodes", "mean_score"], "properties": {
        "agent": {"type": "string"}, "model": {"type": "string"},
        "mean_score": {"type": "number"},
        "harness": {"type": "object", "description": "llm runs: track (unassisted or assisted), assistance (the options on), max_tokens, temperature"},
        "model_calls": {"type": "object", "description": "llm runs: the endpoint's calls (calls, answered, refused, failed, requests, prompt_tokens, completion_tokens, seconds)"},
        "episodes": {"type": "array", "items": {"type": "object", "description": "the episode record: case_id, final_score, result_class, decision, trajectory (each action, payload and reward), terminal_info"}}}})
}

/// Parse and check a request against the served pool.
pub fn parse_request(
    body: Value,
    served: &dyn Fn(&str) -> bool,
) -> Result<AgentRunRequest, ApiError> {
    let req: AgentRunRequest = serde_json::from_value(body)
        .map_err(|e| ApiError::Validation(format!("agent run: {e}")))?;
    crate::llm_runs::check(&req.agent, req.llm.as_ref())?;
    if req.case_ids.is_empty() || req.case_ids.len() > MAX_AGENT_RUN_CASES {
        return Err(ApiError::Validation(format!(
            "case_ids: give 1 to {MAX_AGENT_RUN_CASES} case ids"
        )));
    }
    if req
        .deadline_secs
        .is_some_and(|d| d == 0 || d > MAX_AGENT_RUN_SECS)
    {
        return Err(ApiError::Validation(format!(
            "deadline_secs: 1 to {MAX_AGENT_RUN_SECS}"
        )));
    }
    if let Some(bad) = req.case_ids.iter().find(|c| !served(c)) {
        return Err(ApiError::NotFound(format!(
            "case_ids: unknown case_id '{}' (not in the served pool)",
            ls_server::error::prefix(bad)
        )));
    }
    Ok(req)
}

/// Why a run ended without its reply.
enum RunEnd {
    /// The deadline passed or the client went away after this many cases.
    Stopped(usize),
    /// The `llm` run's endpoint answered no call (502).
    Refused(ApiError),
}

/// Play the request's cases in one fresh environment, until they are all played, the deadline
/// passes or the run is cancelled; an `llm` run whose endpoint answered no call is refused.
fn play(
    state: &ls_server::AppState,
    req: &AgentRunRequest,
    deadline: Instant,
    cancel: &Cancel,
) -> Result<Value, RunEnd> {
    let transport = crate::llm_runs::transport(deadline, cancel.clone());
    let mut env = state.new_env();
    let mut episodes: Vec<EpisodeRecord> = Vec::with_capacity(req.case_ids.len());
    for case_id in &req.case_ids {
        if cancel.is_cancelled() || Instant::now() >= deadline {
            return Err(RunEnd::Stopped(episodes.len()));
        }
        let Some(mut agent) = crate::llm_runs::agent(&req.agent, req.llm.as_ref(), &transport)
        else {
            break;
        };
        episodes.push(play_case(agent.as_mut(), &mut env, case_id, None, req.seed));
    }
    if cancel.is_cancelled() || Instant::now() >= deadline {
        return Err(RunEnd::Stopped(episodes.len()));
    }
    let mean = episodes.iter().map(|e| e.final_score).sum::<f64>() / episodes.len().max(1) as f64;
    let (agent, model) = episodes
        .first()
        .map(|e| (e.agent.clone(), e.model.clone()))
        .unwrap_or_default();
    let provenance = crate::llm_runs::provenance(&req.agent, req.llm.as_ref(), &episodes)
        .map_err(RunEnd::Refused)?;
    let mut reply = json!({"agent": agent, "model": model, "mean_score": ls_report::metrics::r4(mean), "episodes": episodes});
    if let Some(Value::Object(p)) = provenance {
        for (k, v) in p {
            reply[k] = v;
        }
    }
    Ok(reply)
}

async fn post_agent_run(
    State(s): State<Product>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let pool = s.pool.clone();
    let req = parse_request(body, &|id| pool.cases.iter().any(|c| c.case_id == id))?;
    let permit = s.agent_runs.clone().try_acquire_owned().map_err(|_| {
        ApiError::Capacity(format!(
            "at most {MAX_CONCURRENT_AGENT_RUNS} agent runs at once"
        ))
    })?;
    let secs = req.deadline_secs.unwrap_or(MAX_AGENT_RUN_SECS);
    let deadline = Instant::now() + Duration::from_secs(secs);
    // Dropped with this future when the client goes away: the run stops.
    let cancel = Cancel::default();
    let _stop_when_gone = cancel.on_drop();
    let played = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        play(&s, &req, deadline, &cancel).map_err(|e| (e, req.case_ids.len()))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("agent run: {e}")))?;
    played.map(Json).map_err(|(end, of)| match end {
        RunEnd::Refused(e) => e,
        RunEnd::Stopped(n) => ApiError::DeadlineExceeded(format!(
            "the agent run did not finish within its {secs} s deadline ({n} of {of} cases played)"
        )),
    })
}

/// The route, with its documentation.
pub fn routes() -> ApiRoutes<Product> {
    ApiRoutes::new().post(
        "/agent-runs",
        RouteDoc::new("reports", "Run a scripted agent on chosen cases")
            .describe("Operator route (`X-API-Key`). Plays the named offline agent (teacher, random, naive-pay, always-escalate), or the `llm` agent against the OpenAI-compatible endpoint `llm: {api_base, model, assistance?}`, on each case id of the served pool, in order, in one fresh institution, and returns each episode's record (actions, payloads, rewards, terminal grade), and for `llm` the harness (track and assistance) and the endpoint's calls. An `llm` run whose endpoint answered no call is a 502 `upstream_failed`, not a score. Nothing is stored. At most 4 runs at once (503 past it); a run ends within `deadline_secs` (default and most 300; 504 past it) and stops when its client disconnects. Model calls: `api_base` is http(s) with a host and a plain path (no query, fragment, user info or %-escapes), requests go to `<api_base>/chat/completions`, redirects are not followed, a reply is read up to 1 MiB, and every failed call reads the same (`the model endpoint gave no usable reply`).")
            .body::<AgentRunRequest>("The agent and the cases")
            .reply_with(reply_schema, "Each episode's record and the mean score"),
        post_agent_run,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(id: &str) -> bool {
        id.starts_with("CASE-")
    }

    #[test]
    fn bad_requests_name_the_problem() {
        let e = parse_request(
            json!({"agent": "oracle", "case_ids": ["CASE-A-001"]}),
            &served,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown agent 'oracle'"), "{e}");
        let e = parse_request(json!({"agent": "teacher", "case_ids": []}), &served).unwrap_err();
        assert!(e.to_string().contains("case_ids"), "{e}");
        let many: Vec<String> = (0..26).map(|i| format!("CASE-A-{i:03}")).collect();
        assert!(parse_request(json!({"agent": "teacher", "case_ids": many}), &served).is_err());
        let e =
            parse_request(json!({"agent": "teacher", "case_ids": ["X-1"]}), &served).unwrap_err();
        assert!(
            matches!(e, ApiError::NotFound(_)) && e.to_string().contains("X-1"),
            "{e}"
        );
        let e = parse_request(
            json!({"agent": "teacher", "case_ids": ["CASE-A-001"], "oops": 1}),
            &served,
        )
        .unwrap_err();
        assert!(e.to_string().contains("oops"), "{e}");
        for d in [0, 301] {
            let e = parse_request(
                json!({"agent": "teacher", "case_ids": ["CASE-A-001"], "deadline_secs": d}),
                &served,
            )
            .unwrap_err();
            assert!(e.to_string().contains("deadline_secs"), "{e}");
        }
        let ok = parse_request(
            json!({"agent": "teacher", "case_ids": ["CASE-A-001"]}),
            &served,
        )
        .unwrap();
        assert_eq!(ok.case_ids, vec!["CASE-A-001"]);
    }
}
