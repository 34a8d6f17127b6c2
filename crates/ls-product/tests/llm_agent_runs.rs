//! `POST /agent-runs` with `agent: "llm"`: the server plays the LLM agent against an
//! OpenAI-compatible endpoint (here a mock on an ephemeral port that submits a fixed decision),
//! and bad endpoints are 422 with the field named.

#[path = "support/servers.rs"]
mod servers;

use ls_env::TrackMode;
use ls_product::ReportStore;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const KEY: &str = "llm-runs-operator-key-0123456789";

/// A chat-completions mock: each request's model is logged; the reply submits HOLD.
fn mock_endpoint(seen: Arc<Mutex<Vec<String>>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut len, mut path) = (0usize, String::new());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if path.is_empty() {
                    path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            seen.lock()
                .unwrap()
                .push(format!("{path} {}", v["model"].as_str().unwrap_or("")));
            let action = json!({"action_type": "submit_decision", "payload": {"decision": "HOLD", "confidence": 0.7}});
            let out = json!({"choices": [{"message": {"role": "assistant", "content": action.to_string()}, "finish_reason": "stop"}]}).to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
                out.len()
            );
        }
    });
    format!("http://{addr}/v1")
}

async fn post(base: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/agent-runs"))
        .header("x-api-key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_server_plays_the_llm_agent_against_an_endpoint() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api = mock_endpoint(seen.clone());
    let base =
        servers::controlbench_with(TrackMode::Blind, ReportStore::disabled(), Some(KEY)).await;
    let (code, r) = post(
        &base,
        json!({"agent": "llm", "case_ids": ["CASE-B-001", "CASE-D-001"], "llm": {"api_base": api, "model": "mock-analyst-1"}}),
    )
    .await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["agent"], "llm");
    assert_eq!(r["model"], "mock-analyst-1");
    let eps = r["episodes"].as_array().unwrap();
    assert_eq!(eps.len(), 2);
    for (ep, case) in eps.iter().zip(["CASE-B-001", "CASE-D-001"]) {
        assert_eq!(ep["case_id"], case);
        assert_eq!(ep["decision"], "HOLD", "{ep}");
        let last = ep["trajectory"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["action_type"], "submit_decision");
    }
    // Provenance: the unassisted harness and the endpoint's calls.
    assert_eq!(r["harness"]["track"], "unassisted", "{r}");
    assert_eq!(r["harness"]["assistance"], json!([]));
    assert!(r["model_calls"]["answered"].as_u64().unwrap() >= 2, "{r}");
    let mean =
        (eps[0]["final_score"].as_f64().unwrap() + eps[1]["final_score"].as_f64().unwrap()) / 2.0;
    assert!((r["mean_score"].as_f64().unwrap() - mean).abs() < 1e-4);
    let calls = seen.lock().unwrap().clone();
    assert!(calls.len() >= 2, "{calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c == "/v1/chat/completions mock-analyst-1"),
        "{calls:?}"
    );

    // Bad requests name the field.
    let (code, e) = post(&base, json!({"agent": "llm", "case_ids": ["CASE-B-001"]})).await;
    assert_eq!(code, 422);
    assert!(e.to_string().contains("needs llm"), "{e}");
    let (code, e) = post(&base, json!({"agent": "llm", "case_ids": ["CASE-B-001"], "llm": {"api_base": "ftp://x", "model": "m"}})).await;
    assert_eq!(code, 422);
    assert!(e.to_string().contains("llm.api_base"), "{e}");
    let (code, e) = post(&base, json!({"agent": "teacher", "case_ids": ["CASE-B-001"], "llm": {"api_base": api, "model": "m"}})).await;
    assert_eq!(code, 422);
    assert!(e.to_string().contains("only agent 'llm'"), "{e}");
    let (code, e) = post(&base, json!({"agent": "llm", "case_ids": ["CASE-B-001"], "llm": {"api_base": api, "model": "m", "temperature": 2}})).await;
    assert_eq!(code, 422);
    assert!(e.to_string().contains("temperature"), "{e}");

    // Assistance is explicit and recorded.
    let (code, r) = post(&base, json!({"agent": "llm", "case_ids": ["CASE-B-001"], "llm": {"api_base": api, "model": "m", "assistance": {"repair": true}}})).await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["harness"]["track"], "assisted");
    assert_eq!(r["harness"]["assistance"], json!(["repair"]));
    // An endpoint that answers no call is an error, not a score.
    let (code, e) = post(&base, json!({"agent": "llm", "case_ids": ["CASE-B-001"], "llm": {"api_base": "http://127.0.0.1:9/v1", "model": "m"}})).await;
    assert_eq!(code, 502, "{e}");
    assert_eq!(e["error"]["code"], "upstream_failed");
    assert!(e.to_string().contains("answered none"), "{e}");
}
