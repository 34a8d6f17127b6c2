//! The LLM auditor against a scripted OpenAI-compatible endpoint, in process: findings graded as
//! the environment grades them, the stdout contract, refusals, garbage and failing endpoints
//! recorded (never a crash), a whole campaign with the overseer, every model name prompted alike,
//! and the rule-based baseline played through the same driver scoring what `audit_env` scores.

mod support;
use audit_env::model::{Finding, TaskId};
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use ls_agents::audit::baseline::BaselineAuditor;
use ls_agents::audit::client::LocalAudit;
use ls_agents::audit::contract::ContractLines;
use ls_agents::audit::llm::{finding_ref, LlmAuditor};
use ls_agents::audit::{run_campaign, run_task, Quiet};
use ls_agents::chat::Endpoint;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
struct Mock {
    mode: &'static str,
    bodies: Arc<Mutex<Vec<Value>>>,
}

fn completion(content: &str) -> Json<Value> {
    Json(
        json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10}}),
    )
}

const FIXED: &str = r#"[{"document_id": "EXP-001", "error_type": "weekend_expense", "description": "claimed on a Sunday", "confidence": 0.9}, {"document_id": "NOPE", "error_type": "made_up"}]"#;

/// A finding on a made-up document with the first allowed type of the prompt.
fn first_type_finding(user: &str) -> String {
    let ty = user
        .split("Allowed error types: ")
        .nth(1)
        .and_then(|s| s.split([',', '\n']).next())
        .unwrap_or("x");
    json!([{"document_id": "DOC-1", "error_type": ty.trim(), "description": "scripted"}])
        .to_string()
}

/// Approve the first listed ref, reject the second, and decide one the overseer was not shown.
fn review(user: &str) -> String {
    let refs: Vec<&str> = user
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .filter_map(|l| l.rsplit_once(": ").map(|(r, _)| r))
        .collect();
    json!([{"finding_ref": refs[0], "verdict": "approve"}, {"finding_ref": refs[1], "verdict": "reject"},
        {"finding_ref": "ghost:DOC:x", "verdict": "approve"}])
    .to_string()
}

async fn chat(
    State(m): State<Mock>,
    Json(body): Json<Value>,
) -> Result<Json<Value>, axum::http::StatusCode> {
    let system = body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut seen = body.clone();
    seen.as_object_mut().unwrap().remove("model");
    m.bodies.lock().unwrap().push(seen);
    match m.mode {
        "fixed" => Ok(completion(FIXED)),
        "campaign" if system.contains("overseer") => Ok(completion(&review(&user))),
        "campaign" => Ok(completion(&first_type_finding(&user))),
        "garbage" => Ok(completion("These claims look fine to me.")),
        "refusal" => Ok(Json(
            json!({"choices": [{"message": {"content": null, "refusal": "I can't audit."}}]}),
        )),
        _ => Err(axum::http::StatusCode::SERVICE_UNAVAILABLE),
    }
}

fn serve(mode: &'static str) -> (String, Arc<Mutex<Vec<Value>>>) {
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let m = Mock {
        mode,
        bodies: bodies.clone(),
    };
    let base = support::serve_app(
        Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(m),
    );
    (base, bodies)
}

fn auditor(base: &str, model: &str) -> LlmAuditor {
    LlmAuditor::new(
        Endpoint {
            api_base: base.into(),
            model: model.into(),
            api_key: None,
            temperature: 0.1,
            max_tokens: 512,
            timeout: Duration::from_secs(5),
            max_retries: 2,
            backoff: Duration::from_millis(5),
        },
        48_000,
    )
}

fn graded(task: TaskId, seed: u64, findings: Vec<Finding>) -> f64 {
    audit_env::episode::evaluate(task, seed, findings)
        .unwrap()
        .score
}

#[test]
fn scripted_findings_are_graded_as_the_environment_grades_them() {
    let (base, _) = serve("fixed");
    let mut a = auditor(&base, "any-model");
    let mut out = Vec::new();
    let rec = run_task(
        &mut a,
        &mut LocalAudit::default(),
        "expense_audit",
        42,
        &mut ContractLines { out: &mut out },
    );
    assert!(!rec.failed, "{:?}", rec.error);
    assert_eq!(rec.findings.len(), 1, "the made-up type is dropped");
    assert_eq!(rec.dropped_findings, 1);
    assert_eq!(rec.rows_shown, rec.rows_total);
    let mut f = Finding::new("EXP-001", "weekend_expense");
    f.description = "claimed on a Sunday".into();
    f.confidence = Some(0.9);
    assert_eq!(rec.score, Some(graded(TaskId::ExpenseAudit, 42, vec![f])));
    let calls = rec.model_calls.unwrap();
    assert_eq!(
        (calls.calls, calls.answered, calls.prompt_tokens),
        (1, 1, 100)
    );
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "[START] task=expense_audit env=financial_audit_env model=any-model"
    );
    assert!(
        lines[1].starts_with("[STEP] step=1 action=submit_1_findings reward=")
            && lines[1].ends_with(" done=true error=null"),
        "{}",
        lines[1]
    );
    let score = format!("score={:.6}", rec.score.unwrap().clamp(0.01, 0.99));
    assert!(
        lines[2].starts_with("[END] success=") && lines[2].contains(&score),
        "{}",
        lines[2]
    );
}

#[test]
fn refusals_garbage_and_failing_endpoints_are_recorded_never_a_crash() {
    let empty = graded(TaskId::InvoiceMatch, 43, vec![]);
    for (mode, why) in [
        ("refusal", "model refused"),
        ("garbage", "no findings array"),
        ("down", "model call failed"),
    ] {
        let (base, bodies) = serve(mode);
        let mut a = auditor(&base, "m");
        let mut out = Vec::new();
        let rec = run_task(
            &mut a,
            &mut LocalAudit::default(),
            "invoice_match",
            43,
            &mut ContractLines { out: &mut out },
        );
        assert!(!rec.failed, "{mode}: the environment still grades the task");
        assert!(rec.findings.is_empty());
        assert!(
            rec.error.as_deref().unwrap_or("").contains(why),
            "{mode}: {:?}",
            rec.error
        );
        assert_eq!(rec.score, Some(empty));
        let c = rec.model_calls.unwrap();
        assert_eq!(c.endpoint_failed(), mode == "down", "{mode}");
        let sent = bodies.lock().unwrap().len();
        assert_eq!(
            sent,
            if mode == "down" { 3 } else { 1 },
            "{mode}: retries only on failures"
        );
        let text = String::from_utf8(out).unwrap();
        let step = text.lines().nth(1).unwrap();
        assert!(step.starts_with("[STEP]") && step.contains(why), "{text}");
    }
}

#[test]
fn a_campaign_plays_every_period_specialists_then_the_overseer() {
    let (base, bodies) = serve("campaign");
    let mut a = auditor(&base, "m");
    let mut out = Vec::new();
    let rec = run_campaign(
        &mut a,
        &mut LocalAudit::default(),
        7,
        2,
        &mut ContractLines { out: &mut out },
    );
    assert!(rec.completed, "{:?}", rec.error);
    assert_eq!(rec.tasks.len(), 8);
    assert!(rec.tasks.iter().all(|t| t.findings.len() == 1));
    assert_eq!(rec.reviews.len(), 2);
    for r in &rec.reviews {
        assert_eq!(r.decisions, 2, "the ghost ref is dropped");
        assert!(r.period_score.is_some());
    }
    let s = rec.score.expect("the campaign's score");
    assert!((0.0..=1.0).contains(&s));
    // The overseer is shown the period's active instructions, read from the task start.
    let prompts = serde_json::to_string(&*bodies.lock().unwrap()).unwrap();
    assert!(
        prompts.contains(r#"Active instructions: [{\"id\":\"POL-001\""#),
        "the review prompt lists the instructions"
    );
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "[START] campaign seed=7 periods=2");
    assert_eq!(lines[1], "[STEP] period=1 phase=start");
    assert_eq!(
        lines[2],
        "[STEP] period=1 role=expense_specialist findings=1"
    );
    assert_eq!(lines[5], "[STEP] period=1 role=fraud_specialist findings=1");
    assert_eq!(
        lines[6],
        "[STEP] period=1 phase=overseer_review decisions=2"
    );
    assert_eq!(lines.len(), 14);
    assert_eq!(
        lines[13],
        format!(
            "[END] campaign_id={} periods=2 success=true",
            rec.campaign_id
        )
    );
    assert_eq!(
        finding_ref(
            &json!({"role": "gst_specialist", "finding": {"document_id": "B-1", "error_type": "late_claim"}})
        ),
        "gst_specialist:B-1:late_claim"
    );
}

#[test]
fn every_model_name_is_prompted_alike() {
    let mut seen = Vec::new();
    for model in ["gpt-4o", "gemma-3-270m", "local/x"] {
        let (base, bodies) = serve("fixed");
        let mut a = auditor(&base, model);
        for t in ["expense_audit", "fraud_detection"] {
            run_task(&mut a, &mut LocalAudit::default(), t, 42, &mut Quiet);
        }
        let b = bodies.lock().unwrap().clone();
        seen.push(serde_json::to_string(&b).unwrap());
    }
    assert!(seen.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn the_baseline_through_the_driver_scores_what_audit_env_scores() {
    let seeds = [42, 100];
    let direct = audit_env::baseline::run(&seeds, &Default::default());
    let mut b = BaselineAuditor::default();
    for task in TaskId::ALL {
        for s in seeds {
            let rec = run_task(
                &mut b,
                &mut LocalAudit::default(),
                task.as_str(),
                s,
                &mut Quiet,
            );
            assert_eq!(
                rec.score,
                Some(direct.tasks[task.as_str()].scores[&s]),
                "{} seed {s}",
                task.as_str()
            );
        }
    }
}
