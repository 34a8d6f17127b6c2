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

// ------------------------------------------------------------------------------------------
// Issue 47, item 5: the outbound calls of `POST /agent-runs` are bounded.
// ------------------------------------------------------------------------------------------

/// An endpoint that accepts connections and reads but never answers: each accepted connection is
/// reported with a flag set once the peer (the server) has closed it.
struct Silent {
    api: String,
    accepted: Arc<Mutex<Vec<Arc<std::sync::atomic::AtomicBool>>>>,
}

fn silent_endpoint() -> Silent {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let api = format!("http://{}/v1", listener.local_addr().unwrap());
    let accepted: Arc<Mutex<Vec<Arc<std::sync::atomic::AtomicBool>>>> = Arc::default();
    let list = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
            list.lock().unwrap().push(closed.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                // Read until the peer closes (0) or resets the connection.
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
                closed.store(true, std::sync::atomic::Ordering::SeqCst);
            });
        }
    });
    Silent { api, accepted }
}

fn cases(n: usize) -> Vec<&'static str> {
    [
        "CASE-A-001",
        "CASE-A-002",
        "CASE-B-001",
        "CASE-C-001",
        "CASE-D-001",
    ]
    .into_iter()
    .cycle()
    .take(n)
    .collect()
}

async fn keyed_server() -> String {
    servers::controlbench_with(TrackMode::Blind, ReportStore::disabled(), Some(KEY)).await
}

/// A run against a silent endpoint ends at its deadline (504), not after 25 cases × the call
/// timeout.
#[tokio::test]
async fn a_run_against_a_silent_endpoint_ends_at_its_deadline() {
    let silent = silent_endpoint();
    let base = keyed_server().await;
    let t = std::time::Instant::now();
    let (code, r) = post(
        &base,
        json!({"agent": "llm", "case_ids": cases(25), "deadline_secs": 2,
               "llm": {"api_base": silent.api, "model": "m"}}),
    )
    .await;
    assert_eq!(code, 504, "{r}");
    assert_eq!(r["error"]["code"], "deadline_exceeded", "{r}");
    assert!(r.to_string().contains("of 25 cases played"), "{r}");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
}

/// A client that goes away stops its run: the model call in progress is dropped (the endpoint
/// sees its connection closed) and no further call is made.
#[tokio::test]
async fn a_run_stops_when_its_client_goes_away() {
    use tokio::io::AsyncWriteExt;
    let silent = silent_endpoint();
    let base = keyed_server().await;
    let body = json!({"agent": "llm", "case_ids": cases(25),
                      "llm": {"api_base": silent.api, "model": "m"}})
    .to_string();
    let mut client = tokio::net::TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /agent-runs HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await.unwrap();
    client.write_all(body.as_bytes()).await.unwrap();
    let waited = std::time::Instant::now();
    while silent.accepted.lock().unwrap().is_empty() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(10),
            "no model call"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    drop(client);
    let gone = std::time::Instant::now();
    loop {
        let all_closed = silent
            .accepted
            .lock()
            .unwrap()
            .iter()
            .all(|c| c.load(std::sync::atomic::Ordering::SeqCst));
        if all_closed {
            break;
        }
        assert!(
            gone.elapsed() < std::time::Duration::from_secs(5),
            "the model call outlived its client"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let calls = silent.accepted.lock().unwrap().len();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(
        silent.accepted.lock().unwrap().len(),
        calls,
        "calls went on after the client left"
    );
}

/// At most four runs at once: a fifth is 503 at once, and a slot comes back when a run ends.
#[tokio::test]
async fn agent_runs_are_limited_in_number() {
    let silent = silent_endpoint();
    let base = keyed_server().await;
    let slow = json!({"agent": "llm", "case_ids": cases(1), "deadline_secs": 3,
                      "llm": {"api_base": silent.api, "model": "m"}});
    let running: Vec<_> = (0..4)
        .map(|_| {
            let (b, s) = (base.clone(), slow.clone());
            tokio::spawn(async move { post(&b, s).await })
        })
        .collect();
    let waited = std::time::Instant::now();
    while silent.accepted.lock().unwrap().len() < 4 {
        assert!(waited.elapsed() < std::time::Duration::from_secs(10));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let t = std::time::Instant::now();
    let (code, r) = post(
        &base,
        json!({"agent": "teacher", "case_ids": ["CASE-A-001"]}),
    )
    .await;
    assert_eq!(code, 503, "{r}");
    assert!(r.to_string().contains("at most 4 agent runs"), "{r}");
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    for h in running {
        assert_eq!(h.await.unwrap().0, 504);
    }
    let (code, _) = post(
        &base,
        json!({"agent": "teacher", "case_ids": ["CASE-A-001"]}),
    )
    .await;
    assert_eq!(code, 200);
}

/// An endpoint answering with `head` and then `body_bytes` of filler (written until the peer
/// closes); the bytes it managed to write, and whether it was asked at all.
fn answering_endpoint(head: String, body_bytes: usize) -> (String, Arc<Mutex<Vec<usize>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let api = format!("http://{}/v1", listener.local_addr().unwrap());
    let written: Arc<Mutex<Vec<usize>>> = Arc::default();
    let log = written.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 8192];
            let _ = stream.read(&mut buf);
            let mut sent = 0usize;
            if stream.write_all(head.as_bytes()).is_ok() {
                let chunk = vec![b'x'; 64 * 1024];
                while sent < body_bytes && stream.write_all(&chunk).is_ok() {
                    sent += chunk.len();
                }
            }
            log.lock().unwrap().push(sent);
        }
    });
    (api, written)
}

/// A huge reply is cut off while it streams (the endpoint cannot write much past the cap), a
/// redirect is not followed to its target, `?` and `#` cannot pick the path, and a closed port,
/// an HTTP error and a huge reply read alike to the caller (no reachability oracle): each is a
/// run whose endpoint answered no call, a 502 with the same message.
#[tokio::test]
async fn replies_are_capped_redirects_refused_and_failures_read_alike() {
    let base = keyed_server().await;
    let run = |api: String| {
        json!({"agent": "llm", "case_ids": ["CASE-A-001"], "deadline_secs": 60,
               "llm": {"api_base": api, "model": "m"}})
    };
    // 400 MB announced; the server reads at most 1 MiB of it.
    let (huge, written) = answering_endpoint(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: identity\r\n\r\n"
            .into(),
        400 << 20,
    );
    let (code, big) = post(&base, run(huge)).await;
    assert_eq!(code, 502, "{big}");
    let most = written.lock().unwrap().iter().copied().max().unwrap_or(0);
    assert!(
        most < 64 << 20,
        "the endpoint wrote {most} bytes before being cut off"
    );

    // A redirect to another port: that port is never asked.
    let target = silent_endpoint();
    let (redirect, _) = answering_endpoint(
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {}/chat/completions\r\nContent-Length: 0\r\n\r\n",
            target.api
        ),
        0,
    );
    let (code, r) = post(&base, run(redirect)).await;
    assert_eq!(code, 502, "{r}");
    assert!(
        target.accepted.lock().unwrap().is_empty(),
        "the redirect was followed"
    );

    // `?` and `#` would have picked the path.
    for bad in ["http://127.0.0.1:9/admin?", "http://127.0.0.1:9/admin#x"] {
        let (code, e) = post(&base, run(bad.into())).await;
        assert_eq!(code, 422, "{bad}: {e}");
    }

    // A closed port and an HTTP error answer the same run identically.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let (not_found, _) = answering_endpoint(
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".into(),
        0,
    );
    let (c1, r1) = post(&base, run(closed)).await;
    let (c2, r2) = post(&base, run(not_found)).await;
    assert_eq!((c1, c2), (502, 502));
    assert_eq!(r1, r2, "a closed port and an HTTP server read differently");
    assert_eq!(r1, big, "a huge reply reads like any other failure");
    assert!(
        r1.to_string().contains("the endpoint answered none of"),
        "{r1}"
    );
}
