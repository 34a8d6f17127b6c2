//! The llm agent with the evidence ledger and the candidate actions in its prompt, decoding
//! against the candidates, against a local OpenAI-compatible mock that records every prompt.

mod support;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use ls_agents::llm::PromptOptions;
use ls_agents::{run_episode, Agent, LlmAgent, LlmConfig, LocalEnv, Silent};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every user prompt the mock saw; its replies follow `script` (one per call, then the last).
#[derive(Clone)]
struct Mock {
    prompts: Arc<Mutex<Vec<String>>>,
    script: Arc<Vec<Reply>>,
}

#[derive(Clone)]
enum Reply {
    /// Name a candidate by its number.
    Number(usize),
    /// Copy candidate `n` of the prompt verbatim.
    Copy(usize),
    /// Any text.
    Text(&'static str),
}

async fn chat(State(m): State<Mock>, Json(body): Json<Value>) -> Json<Value> {
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let n = {
        let mut p = m.prompts.lock().unwrap();
        p.push(user.clone());
        p.len() - 1
    };
    let content = match &m.script[n.min(m.script.len() - 1)] {
        Reply::Number(i) => i.to_string(),
        Reply::Copy(i) => user
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{i} ")))
            .unwrap_or("")
            .to_owned(),
        Reply::Text(t) => (*t).to_owned(),
    };
    Json(
        json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}),
    )
}

fn serve(script: Vec<Reply>) -> (String, Arc<Mutex<Vec<String>>>) {
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let m = Mock {
        prompts: prompts.clone(),
        script: Arc::new(script),
    };
    let base = support::serve_app(
        Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(m),
    );
    (base, prompts)
}

fn agent(base: &str) -> LlmAgent {
    LlmAgent::new(LlmConfig {
        api_base: base.to_owned(),
        model: "local/test".into(),
        api_key: None,
        temperature: 0.0,
        timeout: Duration::from_secs(5),
        max_retries: 0,
        backoff: Duration::from_millis(1),
        max_tokens: None,
    })
}

fn play(agent: &mut LlmAgent, case_id: &str) -> ls_agents::EpisodeRecord {
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().unwrap()));
    let mut env = Environment::new(pool, EnvConfig::default());
    run_episode(
        agent,
        &mut LocalEnv::new(&mut env),
        &ResetRequest {
            case_id: Some(case_id.into()),
            ..Default::default()
        },
        1,
        &mut Silent,
    )
}

#[test]
fn constrained_decoding_takes_only_candidates_and_the_prompt_carries_the_ledger() {
    let (base, prompts) = serve(vec![
        Reply::Number(1),
        Reply::Copy(0),
        // Not a candidate (a made-up vendor): the constraint takes the NEEDS_REVIEW submission.
        Reply::Text(
            "{\"action_type\": \"lookup_vendor\", \"payload\": {\"vendor_key\": \"made-up\"}}",
        ),
    ]);
    let mut a = agent(&base).with_options(PromptOptions {
        ledger: true,
        candidates: true,
        constrain: true,
    });
    let rec = play(&mut a, "CASE-D-001");
    let steps: Vec<(String, Value)> = rec
        .trajectory
        .iter()
        .map(|s| (s.action_type.clone(), Value::Object(s.payload.clone())))
        .collect();
    assert_eq!(steps.len(), 3, "{steps:?}");
    let doc = rec.initial_observation["visible_documents"][0]["doc_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        steps[0],
        ("ocr".into(), json!({"doc_id": doc, "mode": "accurate"}))
    );
    assert_eq!(
        steps[1],
        ("ocr".into(), json!({"doc_id": doc, "mode": "fast"}))
    );
    assert_eq!(steps[2].0, "submit_decision");
    assert_eq!(steps[2].1["decision"], "NEEDS_REVIEW");
    assert!(rec.terminated);
    assert_eq!(a.failures(), 1, "the off-candidate reply is a failure");
    let p = prompts.lock().unwrap();
    assert_eq!(p.len(), 3);
    // Every prompt lists the candidates, numbered from 0, before its last line.
    for prompt in p.iter() {
        assert!(prompt
            .contains("Candidate actions (reply with one of them exactly, or its number):\n0 {"));
        assert!(prompt.ends_with("\nReturn JSON only."));
    }
    // The first prompt's ledger lists only the documents not read yet; after the OCR it shows
    // the document's lines, each with the token a submission cites, and it still does a step
    // later, when the last result is something else (the ledger is `ls_rl::Ledger::render`).
    let ledger_of = |prompt: &str| {
        prompt
            .split("Evidence so far:\n")
            .nth(1)
            .expect("a ledger")
            .split("Candidate actions")
            .next()
            .unwrap()
            .to_owned()
    };
    let first = ledger_of(&p[0]);
    assert!(
        first.contains("documents not read yet:") && first.contains(doc.as_str()),
        "{first}"
    );
    assert!(!first.contains("] line "), "nothing read yet: {first}");
    for later in &p[1..] {
        let ledger = ledger_of(later);
        assert!(
            ledger.contains(&format!("] line vendor_name ({doc} ")),
            "the read document's lines, cited by token: {ledger}"
        );
    }
}

#[test]
fn the_default_prompt_is_the_recorded_step_prompt() {
    let (base, prompts) = serve(vec![Reply::Text(
        "{\"action_type\": \"submit_decision\", \"payload\": {\"decision\": \"HOLD\", \"confidence\": 0.5}}",
    )]);
    let mut a = agent(&base);
    let rec = play(&mut a, "CASE-B-001");
    assert!(rec.terminated);
    let p = prompts.lock().unwrap();
    assert_eq!(p.len(), 1);
    // Byte for byte the prompt the runner records (and the Python reproduction rebuilds).
    assert_eq!(Some(&p[0]), rec.trajectory[0].prompt.as_ref());
    assert!(!p[0].contains("Evidence so far:") && !p[0].contains("Candidate actions"));
    assert_eq!(a.name(), "llm");
}
