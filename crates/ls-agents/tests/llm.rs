//! The llm agent against a local OpenAI-compatible mock: canned, malformed, refusal, timeout and
//! flaky answers. Every episode completes; nothing panics; the stdout contract is well formed.

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use ls_agents::llm::ContractPrinter;
use ls_agents::{run_episode, Agent, LlmAgent, LlmConfig, LocalEnv};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
struct Mock {
    mode: &'static str,
    calls: Arc<AtomicUsize>,
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
    let doc = user
        .split("Documents: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or("INV-D-001")
        .to_owned();
    match m.mode {
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
    let calls = Arc::new(AtomicUsize::new(0));
    let m = Mock {
        mode,
        calls: calls.clone(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new()
                .route("/v1/chat/completions", post(chat))
                .with_state(m);
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            axum::serve(l, app).await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    (format!("http://{addr}/v1"), calls)
}

fn play(
    mode: &'static str,
    model: &str,
    timeout_ms: u64,
) -> (ls_agents::EpisodeRecord, usize, String) {
    let (base, calls) = serve(mode);
    let mut agent = LlmAgent::new(LlmConfig {
        api_base: base,
        model: model.into(),
        api_key: Some("test".into()),
        temperature: 0.0,
        timeout: Duration::from_millis(timeout_ms),
        max_retries: 2,
        backoff: Duration::from_millis(10),
    });
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().unwrap()));
    let mut env = Environment::new(pool, EnvConfig::default());
    let mut out = Vec::new();
    let rec = {
        let mut printer = ContractPrinter::new(&mut out, &agent.model());
        run_episode(
            &mut agent,
            &mut LocalEnv::new(&mut env),
            &ResetRequest {
                case_id: Some("CASE-D-001".into()),
                ..Default::default()
            },
            1,
            &mut printer,
        )
    };
    (
        rec,
        calls.load(Ordering::SeqCst),
        String::from_utf8(out).unwrap(),
    )
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
fn malformed_output_is_repaired_or_falls_back() {
    // Elite tier repairs partial JSON into the decision it names.
    let (rec, _, out) = play("malformed", "gpt-5.4", 5_000);
    assert!(rec.terminated);
    assert_eq!(rec.decision, "HOLD");
    contract_ok(&out);
    // Standard tier does not repair: safe fallback.
    let (rec, _, _) = play("malformed", "gpt-4o-mini", 5_000);
    assert!(rec.terminated);
    assert_eq!(rec.decision, "NEEDS_REVIEW");
    let (rec, _, _) = play("garbage", "gpt-5.4", 5_000);
    assert_eq!(rec.decision, "NEEDS_REVIEW");
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
