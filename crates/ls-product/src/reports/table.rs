//! The report endpoints' route table: every route with its documentation.

use super::{
    get_benchmark_report, get_certify_summary, get_controlbench_summary, get_human_baseline,
    get_leaderboard, get_run, get_run_episode, get_runs, get_visualization, post_certify,
    MAX_RUNS_LISTED, MAX_RUN_ID_CHARS,
};
use crate::Product;
use ls_server::route_table::{ApiRoutes, RouteDoc};
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::json;

fn runs_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["runs", "note"], "properties": {
        "runs": {"type": "array", "items": {"type": "object", "description": "run_id, kind, agent, model, agent_type, suite, seed, created_at, case_count, mean_score, summary"}},
        "note": {"type": "string", "description": "empty, or why there is no store yet"}}})
}

fn run_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["run", "episodes"], "properties": {
        "run": {"type": "object"},
        "episodes": {"type": "array", "items": {"type": "object", "description": "idx, case_id, base_case_id, task_type, final_score, result_class, decision, steps, total_reward"}}}})
}

fn episode_reply(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "required": ["run_id", "episode", "record"], "properties": {
        "run_id": {"type": "string"}, "episode": {"type": "object"},
        "record": {"type": "object", "description": "the stored episode record: trajectory and terminal info"}}})
}

fn certify_body(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "title": "CertifyRequest", "description": "Every field is optional; an empty body certifies with the defaults.", "properties": {
        "agent_name": {"type": "string"}, "workflow_name": {"type": "string"}, "workflow_profile": {"type": "object"},
        "uploaded_case_count": {"type": "integer", "minimum": 0}, "sequence_seed": {"type": "integer", "minimum": 0},
        "attack_families": {"type": "array", "items": {"type": "string"}}, "case_count": {"type": "integer", "minimum": 0},
        "deployability_rating": {"type": "string"}}})
}

const RUN_ID: &str = "A stored run's id (1-200 characters)";

/// Routes of the report-backed endpoints, each with its documentation.
pub fn routes() -> ApiRoutes<Product> {
    let r = |summary| RouteDoc::new("reports", summary);
    let run_id = || json!({"type": "string", "minLength": 1, "maxLength": MAX_RUN_ID_CHARS});
    ApiRoutes::new()
        .get("/leaderboard", r("Leaderboard from stored benchmark reports").describe("Without a stored report, an honest fallback that says so (nothing fabricated)."), get_leaderboard)
        .get("/benchmark-report", r("Latest stored benchmark report").describe("Without one, `generated_at: null` and a note on how to create it."), get_benchmark_report)
        .get("/controlbench-summary", r("Latest ControlBench quarter summary, else the session's live institutional memory").session(), get_controlbench_summary)
        .get("/human-baseline-summary", r("Human-baseline summary when a baseline file is supplied"), get_human_baseline)
        .post("/certify", r("LedgerShield Certify report for an agent or workflow").session().body_with(certify_body, "What to certify"), post_certify)
        .get("/certify-summary", r("Certify report from the latest artifact or the session's live memory").session(), get_certify_summary)
        .get("/controlbench-visualization", r("Graph-ready visualization data").session(), get_visualization)
        .get(
            "/runs",
            r("Stored runs, newest first")
                .query("limit", json!({"type": "integer", "minimum": 1, "maximum": MAX_RUNS_LISTED, "default": 50}), false, "How many runs to list")
                .reply_with(runs_reply, "The runs and a note"),
            get_runs,
        )
        .get(
            "/runs/{run_id}",
            r("One stored run and its episodes' summaries (no trajectories)")
                .path_param("run_id", run_id(), RUN_ID, json!("run-x"))
                .reply_with(run_reply, "The run and its episodes"),
            get_run,
        )
        .get(
            "/runs/{run_id}/episodes/{idx}",
            r("One stored episode record (trajectory, terminal info)")
                .path_param("run_id", run_id(), RUN_ID, json!("run-x"))
                .path_param("idx", json!({"type": "integer", "minimum": 0}), "The episode's index in the run", json!(0))
                .reply_with(episode_reply, "The episode and its record"),
            get_run_episode,
        )
}
