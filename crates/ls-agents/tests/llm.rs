//! The llm agent against a local OpenAI-compatible mock: canned, malformed, refusal, timeout and
//! flaky answers. Every episode completes; nothing panics; the stdout contract is well formed.

mod support;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use ls_agents::llm::ContractPrinter;
use ls_agents::{run_episode, Agent, Assistance, LlmAgent, LlmConfig, LocalEnv};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
struct Mock {
    mode: &'static str,
    calls: Arc<AtomicUsize>,
    /// `replay` mode: user prompt -> reply text.
    replies: Arc<HashMap<String, String>>,
    /// Every request body received, with its `model` removed.
    bodies: Arc<std::sync::Mutex<Vec<Value>>>,
}

/// The planner suggestion in a prompt, as the JSON the teacher would take.
fn hint_in(user: &str) -> Option<String> {
    let rest = user.split("A heuristic planner suggests: ").nth(1)?;
    Some(rest.lines().next()?.to_owned())
}

fn reply(content: &str) -> Json<Value> {
    Json(
        json!({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}),
    )
}

async fn chat(
    State(m): State<Mock>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, axum::http::StatusCode> {
    let n = m.calls.fetch_add(1, Ordering::SeqCst);
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut seen = body.clone();
    if let Some(o) = seen.as_object_mut() {
        o.remove("model");
    }
    m.bodies.lock().unwrap().push(seen);
    let doc = user
        .split("Documents: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or("INV-D-001")
        .to_owned();
    match m.mode {
        "replay" => m
            .replies
            .get(&user)
            .map(|r| reply(r))
            .ok_or(axum::http::StatusCode::NOT_FOUND),
        "canned" => {
            if n == 0 {
                Ok(reply(&format!("```json\n{{\"action_type\": \"ocr\", \"payload\": {{\"doc_id\": \"{doc}\", \"mode\": \"accurate\"}}}}\n```")))
            } else {
                Ok(reply("{\"action_type\": \"submit_decision\", \"payload\": {\"decision\": \"ESCALATE_FRAUD\", \"confidence\": 0.8, \"reason_codes\": [\"bank_override_attempt\"], \"evidence_map\": {}}}"))
            }
        }
        "malformed" => Ok(reply("{\"action_type\": \"submit_decision\", \"payload\": {\"decision\": \"HOLD\", \"confidence\": ")),
        "garbage" => Ok(reply("I think you should pay it.")),
        "refusal" => Ok(Json(json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": null, "refusal": "I can't help with payments."}}]}))),
        "timeout" => {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            Ok(reply("{}"))
        }
        // Echoes the planner's suggestion when the prompt has one; otherwise a bare NEEDS_REVIEW.
        "echo-hint" => Ok(reply(&hint_in(&user).unwrap_or_else(|| {
            "{\"action_type\": \"submit_decision\", \"payload\": {\"decision\": \"NEEDS_REVIEW\", \"confidence\": 0.5}}".into()
        }))),
        "down" => Err(axum::http::StatusCode::BAD_GATEWAY),
        "flaky" => {
            if n % 2 == 0 {
                Err(axum::http::StatusCode::SERVICE_UNAVAILABLE)
            } else {
                Ok(reply("{\"action_type\": \"submit_decision\", \"payload\": {\"decision\": \"NEEDS_REVIEW\", \"confidence\": 0.6, \"reason_codes\": [\"manual_review\"]}}"))
            }
        }
        _ => Err(axum::http::StatusCode::BAD_REQUEST),
    }
}

fn serve(mode: &'static str) -> (String, Arc<AtomicUsize>) {
    serve_with(mode, HashMap::new())
}

type Bodies = Arc<std::sync::Mutex<Vec<Value>>>;

fn serve_with(mode: &'static str, replies: HashMap<String, String>) -> (String, Arc<AtomicUsize>) {
    let (base, calls, _) = serve_recording(mode, replies);
    (base, calls)
}

fn serve_recording(
    mode: &'static str,
    replies: HashMap<String, String>,
) -> (String, Arc<AtomicUsize>, Bodies) {
    let calls = Arc::new(AtomicUsize::new(0));
    let bodies: Bodies = Arc::default();
    let m = Mock {
        mode,
        calls: calls.clone(),
        replies: Arc::new(replies),
        bodies: bodies.clone(),
    };
    let base = support::serve_app(
        Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(m),
    );
    (base, calls, bodies)
}

fn play(
    mode: &'static str,
    model: &str,
    timeout_ms: u64,
) -> (ls_agents::EpisodeRecord, usize, String) {
    play_assisted(mode, model, timeout_ms, Assistance::default())
}

fn play_assisted(
    mode: &'static str,
    model: &str,
    timeout_ms: u64,
    assistance: Assistance,
) -> (ls_agents::EpisodeRecord, usize, String) {
    let (base, calls) = serve(mode);
    let (rec, out) = play_with(&base, model, timeout_ms, "CASE-D-001", assistance);
    (rec, calls.load(Ordering::SeqCst), out)
}

fn play_case(
    base: &str,
    model: &str,
    timeout_ms: u64,
    case_id: &str,
) -> (ls_agents::EpisodeRecord, String) {
    play_with(base, model, timeout_ms, case_id, Assistance::default())
}

fn play_with(
    base: &str,
    model: &str,
    timeout_ms: u64,
    case_id: &str,
    assistance: Assistance,
) -> (ls_agents::EpisodeRecord, String) {
    let base = base.to_owned();
    let mut agent = LlmAgent::new(LlmConfig {
        api_base: base,
        model: model.into(),
        api_key: Some("test".into()),
        temperature: 0.0,
        timeout: Duration::from_millis(timeout_ms),
        max_retries: 2,
        backoff: Duration::from_millis(10),
        max_tokens: None,
    })
    .with_assistance(assistance);
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().unwrap()));
    let mut env = Environment::new(pool, EnvConfig::default());
    let mut out = Vec::new();
    let rec = {
        let mut printer = ContractPrinter::new(&mut out, &agent.model());
        run_episode(
            &mut agent,
            &mut LocalEnv::new(&mut env),
            &ResetRequest {
                case_id: Some(case_id.into()),
                ..Default::default()
            },
            1,
            &mut printer,
        )
    };
    (rec, String::from_utf8(out).unwrap())
}

fn teacher_episode(case_id: &str) -> ls_agents::EpisodeRecord {
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().unwrap()));
    let mut env = Environment::new(pool, EnvConfig::default());
    run_episode(
        &mut ls_agents::TeacherAgent::new(),
        &mut LocalEnv::new(&mut env),
        &ResetRequest {
            case_id: Some(case_id.into()),
            ..Default::default()
        },
        1,
        &mut ls_agents::Silent,
    )
}

const IMITATION_CASES: [&str; 5] = [
    "CASE-A-001",
    "CASE-B-001",
    "CASE-C-001",
    "CASE-D-001",
    "CASE-E-001",
];

#[test]
fn a_model_replaying_recorded_step_targets_scores_what_the_teacher_scores() {
    let teacher: Vec<_> = IMITATION_CASES.iter().map(|c| teacher_episode(c)).collect();
    let mut replies = HashMap::new();
    for rec in &teacher {
        for s in &rec.trajectory {
            let action = ls_agents::Action {
                action_type: s.action_type.clone(),
                payload: s.payload.clone(),
            };
            let prompt = s.prompt.clone().expect("every step records its prompt");
            replies.insert(prompt, ls_agents::llm::action_target(&action));
        }
    }
    let (base, calls) = serve_with("replay", replies);
    for t in &teacher {
        let (rec, _) = play_case(&base, "tiny-local-model", 5_000, &t.case_id);
        assert!(rec.terminated, "{}: {:?}", t.case_id, rec.errors);
        assert_eq!(rec.trajectory.len(), t.trajectory.len(), "{}", t.case_id);
        assert!(
            (rec.final_score - t.final_score).abs() < 1e-9,
            "{}: imitation {} vs teacher {}",
            t.case_id,
            rec.final_score,
            t.final_score
        );
    }
    let steps: usize = teacher.iter().map(|t| t.trajectory.len()).sum();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        steps,
        "one model call per step"
    );
}

#[test]
fn a_plan_reply_is_played_action_by_action() {
    let t = teacher_episode("CASE-D-001");
    let first = t.trajectory[0].prompt.clone().unwrap();
    let plan: Vec<Value> = t
        .trajectory
        .iter()
        .map(|s| json!({"action_type": s.action_type, "payload": s.payload}))
        .collect();
    let replies = HashMap::from([(first, json!({ "actions": plan }).to_string())]);
    let (base, calls) = serve_with("replay", replies);
    let (rec, _) = play_case(&base, "tiny-local-model", 5_000, "CASE-D-001");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the whole plan from one reply"
    );
    assert!((rec.final_score - t.final_score).abs() < 1e-9);
}

fn contract_ok(text: &str) {
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines
            .first()
            .unwrap()
            .starts_with("[START] task=CASE-D-001 env=ledgershield model="),
        "{text}"
    );
    assert!(
        lines.last().unwrap().starts_with("[END] success="),
        "{text}"
    );
    for l in &lines[1..lines.len() - 1] {
        assert!(l.starts_with("[STEP] step="), "{l}");
        assert!(
            l.contains(" reward=") && l.contains(" done=") && l.contains(" error="),
            "{l}"
        );
    }
    let end = lines.last().unwrap();
    let score: f64 = end
        .split("score=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((0.01..=0.99).contains(&score));
}

#[test]
fn canned_answers_complete_an_episode() {
    let (rec, calls, out) = play("canned", "gpt-4o-mini", 5_000);
    assert!(rec.terminated, "{:?}", rec.errors);
    assert_eq!(rec.trajectory[0].action_type, "ocr");
    assert_eq!(rec.decision, "ESCALATE_FRAUD");
    assert_eq!(calls, 2);
    contract_ok(&out);
}

#[test]
fn malformed_output_is_repaired_only_when_repair_is_on() {
    let repair = Assistance {
        repair: true,
        ..Default::default()
    };
    // With the repair option, partial JSON is repaired into the decision it names.
    let (rec, _, out) = play_assisted("malformed", "gpt-4o-mini", 5_000, repair);
    assert!(rec.terminated);
    assert_eq!(rec.decision, "HOLD");
    contract_ok(&out);
    // Without it (the default, whatever the model's name), no repair: the safe fallback.
    for model in ["gpt-5.4", "gpt-4o-mini"] {
        let (rec, _, _) = play("malformed", model, 5_000);
        assert!(rec.terminated);
        assert_eq!(rec.decision, "NEEDS_REVIEW", "{model}");
    }
    let (rec, _, _) = play_assisted("garbage", "gpt-5.4", 5_000, repair);
    assert_eq!(rec.decision, "NEEDS_REVIEW");
}

/// Every request body of one episode against `mode`, `model` removed.
fn bodies_of(mode: &'static str, model: &str, case_id: &str) -> Vec<Value> {
    let (base, _, bodies) = serve_recording(mode, HashMap::new());
    play_case(&base, model, 5_000, case_id);
    let b = bodies.lock().unwrap().clone();
    b
}

#[test]
fn every_model_name_gets_byte_identical_requests() {
    for case in ["CASE-D-001", "CASE-B-001"] {
        let a = bodies_of("canned", "gpt-4o", case);
        assert!(!a.is_empty());
        for other in [
            "local/tiny-checkpoint",
            "gpt-5.4-pro-latest",
            "gemma-3-270m",
        ] {
            let b = bodies_of("canned", other, case);
            let (ta, tb) = (
                serde_json::to_string(&a).unwrap(),
                serde_json::to_string(&b).unwrap(),
            );
            assert_eq!(ta, tb, "{case}: gpt-4o vs {other}");
        }
        assert_eq!(a[0]["max_tokens"], ls_agents::llm::DEFAULT_MAX_TOKENS);
        assert!(!a[0]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("heuristic planner"));
    }
}

#[test]
fn a_hint_echoing_endpoint_gets_no_hint_unless_the_option_is_on() {
    // The model the old tiers gave the planner's hint to: without the option it sees none, so an
    // endpoint that only echoes the hint cannot play the teacher's episode.
    let (plain, calls, _) = play("echo-hint", "gpt-4o", 5_000);
    assert_eq!(calls, 1, "no hint: the echo submits at once");
    assert_eq!(plain.decision, "NEEDS_REVIEW");
    assert!(plain.trajectory.iter().all(|s| !s
        .prompt
        .as_deref()
        .unwrap_or("")
        .contains("heuristic planner")));
    let hint = Assistance {
        teacher_hint: true,
        ..Default::default()
    };
    let (assisted, calls, _) = play_assisted("echo-hint", "some-model", 5_000, hint);
    assert!(calls > 5, "the echo follows the teacher's plan");
    assert!(
        assisted.final_score > plain.final_score + 0.3,
        "assisted {} vs plain {}",
        assisted.final_score,
        plain.final_score
    );
    let mut agent = LlmAgent::new(LlmConfig {
        api_base: "http://127.0.0.1:9/v1".into(),
        model: "gpt-4o".into(),
        api_key: None,
        temperature: 0.0,
        timeout: Duration::from_millis(100),
        max_retries: 0,
        backoff: Duration::from_millis(1),
        max_tokens: None,
    });
    assert_eq!(agent.agent_type(), "llm-agent");
    assert_eq!(agent.harness().track, "unassisted");
    agent = agent.with_assistance(hint);
    assert_eq!(agent.agent_type(), "llm-agent+teacher_hint");
    assert_eq!(agent.harness().track, "assisted");
}

#[test]
fn a_failing_endpoint_is_recorded_as_failed_not_as_a_score() {
    let (rec, calls, out) = play("down", "gpt-4o", 5_000);
    let c = rec
        .model_calls
        .expect("the episode records its model calls");
    assert_eq!((c.calls, c.answered, c.failed), (1, 0, 1));
    assert_eq!(c.requests as usize, calls, "one call, retried twice");
    assert!(rec.endpoint_failed());
    contract_ok(&out);
    // A refusal is an answer: the model, not the endpoint, decided that episode.
    let (rec, _, _) = play("refusal", "gpt-4o", 5_000);
    assert!(!rec.endpoint_failed());
    assert_eq!(rec.model_calls.unwrap().refused, 1);
}

#[test]
fn refusals_and_timeouts_do_not_crash_the_run() {
    let (rec, calls, out) = play("refusal", "gpt-4o", 5_000);
    assert!(rec.terminated && rec.decision == "NEEDS_REVIEW");
    assert_eq!(calls, 1, "a refusal is not retried");
    contract_ok(&out);
    let t = std::time::Instant::now();
    let (rec, calls, out) = play("timeout", "gpt-4o-mini", 200);
    assert!(rec.terminated && rec.decision == "NEEDS_REVIEW");
    assert_eq!(calls, 3, "one call plus two retries");
    assert!(t.elapsed() < Duration::from_secs(10));
    contract_ok(&out);
}

#[test]
fn server_errors_are_retried_with_backoff() {
    let (rec, calls, _) = play("flaky", "gpt-4o-mini", 5_000);
    assert!(rec.terminated);
    assert_eq!(rec.decision, "NEEDS_REVIEW");
    assert_eq!(calls, 2, "503 then success");
}

/// The teacher's episode replayed, its final submission rewritten sloppily: the decision in
/// lower case, the confidence as text, a stray key, and the verification records dropped from
/// the evidence.
fn sloppy_replay(case_id: &str) -> (HashMap<String, String>, f64) {
    let t = teacher_episode(case_id);
    let mut replies = HashMap::new();
    for s in &t.trajectory {
        let mut payload = s.payload.clone();
        if s.action_type == "submit_decision" {
            payload.insert("decision".into(), json!("pay"));
            payload.insert("confidence".into(), json!("0.9"));
            payload.insert("comment".into(), json!("all checks fine"));
            if let Some(Value::Object(ev)) = payload.get_mut("evidence_map") {
                ev.retain(|_, v| {
                    ["po_id", "receipt_id", "vendor_key"]
                        .iter()
                        .all(|k| v.get(*k).is_none())
                });
            }
        }
        let action = ls_agents::Action {
            action_type: s.action_type.clone(),
            payload,
        };
        replies.insert(
            s.prompt.clone().unwrap(),
            ls_agents::llm::action_target(&action),
        );
    }
    (replies, t.final_score)
}

#[test]
fn guardrails_put_a_sloppy_correct_pay_within_the_contract() {
    for case in ["CASE-B-003", "CASE-D-002"] {
        let (replies, teacher) = sloppy_replay(case);
        let (base, _) = serve_with("replay", replies.clone());
        let (plain, _) = play_case(&base, "m", 5_000, case);
        let guard = Assistance {
            guardrails: true,
            ..Default::default()
        };
        let (base, _) = serve_with("replay", replies);
        let (guarded, _) = play_with(&base, "m", 5_000, case, guard);
        assert!(
            guarded.terminated && guarded.decision == "PAY",
            "{case}: {guarded:?}"
        );
        assert!(
            (guarded.final_score - teacher).abs() < 0.1,
            "{case}: guarded {} vs teacher {teacher}",
            guarded.final_score
        );
        assert!(
            plain.final_score + 0.5 < guarded.final_score,
            "{case}: without guardrails {} ({}), with {}",
            plain.final_score,
            plain.decision,
            guarded.final_score
        );
        let sub = &guarded.trajectory.last().unwrap().payload;
        assert_eq!(sub["confidence"], 0.9);
        assert!(sub.get("comment").is_none());
    }
}
