//! WebSocket load test: N concurrent OpenEnv sessions, each playing whole episodes.
//!
//! Starts the ControlBench router in-process on an ephemeral port, records the scores of each
//! session's episode sequence played alone, then opens `--sessions` WebSocket connections at
//! once; each plays `--episodes` episodes (the curated cases in turn, starting at its own offset).
//! Every episode must reproduce its solo score exactly, or it counts as interference. Prints throughput and per-message latency percentiles.
//!
//! ```text
//! cargo run --release -p ls-server --example ws_load -- --sessions 256 --episodes 4
//! ```
//!
//! Client and server share the machine (and its cores), so the figures are a lower bound.

use futures_util::{SinkExt, StreamExt};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig};
use ls_server::ws::WsConfig;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;
type BoxErr = Box<dyn std::error::Error + Send + Sync>;

const CASES: [&str; 21] = [
    "A-001", "A-002", "A-003", "A-004", "B-001", "B-002", "B-003", "B-004", "B-005", "C-001",
    "C-002", "C-003", "C-004", "D-001", "D-002", "D-003", "D-004", "D-005", "D-006", "E-001",
    "E-002",
];

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn script(obs: &Value) -> Vec<Value> {
    let doc = obs["visible_documents"][0]["doc_id"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    vec![
        json!({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "fast"}}),
        json!({"action_type": "zoom", "payload": {"doc_id": doc, "page": 1, "bbox": [0, 0, 300, 200]}}),
        json!({"action_type": "lookup_policy", "payload": {}}),
        json!({"action_type": "search_ledger", "payload": {"amount": 2478}}),
        json!({"action_type": "request_callback_verification", "payload": {}}),
        json!({"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.6, "reason_codes": [], "evidence_map": {}}}),
    ]
}

async fn ask(ws: &mut Ws, msg: &Value, lat: &mut Vec<u64>) -> Result<Value, BoxErr> {
    let t = Instant::now();
    ws.send(Message::Text(msg.to_string().into())).await?;
    loop {
        match ws.next().await.ok_or("connection closed")?? {
            Message::Text(t2) => {
                lat.push(t.elapsed().as_micros() as u64);
                let v: Value = serde_json::from_str(t2.as_str())?;
                if v["type"] == "error" {
                    return Err(format!("server error: {}", v["data"]).into());
                }
                return Ok(v);
            }
            Message::Ping(_) | Message::Pong(_) => continue,
            other => return Err(format!("unexpected frame {other:?}").into()),
        }
    }
}

async fn play(ws: &mut Ws, case_id: &str, lat: &mut Vec<u64>) -> Result<f64, BoxErr> {
    let r = ask(
        ws,
        &json!({"type": "reset", "data": {"case_id": case_id}}),
        lat,
    )
    .await?;
    if r["data"]["observation"]["case_id"] != case_id {
        return Err("reset returned another case".into());
    }
    let mut last = r.clone();
    for a in script(&r["data"]["observation"]) {
        last = ask(ws, &json!({"type": "step", "data": a}), lat).await?;
    }
    last["data"]["info"]["final_score"]
        .as_f64()
        .ok_or_else(|| "no final score".into())
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize] as f64 / 1000.0
}

#[tokio::main]
async fn main() -> Result<(), BoxErr> {
    let sessions = arg("--sessions", 256);
    let episodes = arg("--episodes", 4);
    let pool = CasePool::new(FixtureSet::embedded()?);
    let ws = WsConfig {
        max_sessions: sessions.max(1) + 8,
        // Room for every session's buffer reservation.
        max_buffered_bytes: (sessions.max(1) + 8) * WsConfig::default().hard_limit_bytes(),
        ..WsConfig::default()
    };
    let server = ls_server::ServerConfig {
        max_sessions: 64,
        session_idle: Duration::from_secs(600),
        ws,
        ..Default::default()
    };
    let shutdown = ls_server::Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig::default(), &server, &shutdown);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("ws://{}/ws", listener.local_addr()?);
    let app = ls_server::router(state);
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));

    // Solo scores. A session's institutional memory and curriculum carry over between its
    // episodes and feed the grade, so the reference for session i's e-th episode is the same
    // sequence of cases played alone in a fresh session (there are only CASES.len() sequences).
    let mut solo = BTreeMap::new();
    for start in 0..CASES.len().min(sessions) {
        let (mut ws, _) = connect_async(&url).await?;
        for e in 0..episodes {
            let id = format!("CASE-{}", CASES[(start + e) % CASES.len()]);
            solo.insert((start, e), play(&mut ws, &id, &mut Vec::new()).await?);
        }
    }
    let solo = Arc::new(solo);

    // Connect every session first so all of them are open at once, then play.
    let mut conns = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        conns.push(connect_async(&url).await?.0);
    }
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(sessions);
    for (i, mut ws) in conns.into_iter().enumerate() {
        let solo = solo.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let (mut ok, mut interference, mut errors) = (0usize, 0usize, 0usize);
            for e in 0..episodes {
                let id = format!("CASE-{}", CASES[(i + e) % CASES.len()]);
                match play(&mut ws, &id, &mut lat).await {
                    Ok(score) if Some(&score) == solo.get(&(i % CASES.len(), e)) => ok += 1,
                    Ok(_) => interference += 1,
                    Err(_) => errors += 1,
                }
            }
            let _ = ws
                .send(Message::Text(json!({"type": "close"}).to_string().into()))
                .await;
            (lat, ok, interference, errors)
        }));
    }
    let (mut lat, mut ok, mut interference, mut errors) = (Vec::new(), 0, 0, 0);
    for t in tasks {
        let (l, o, i, e) = t.await?;
        lat.extend(l);
        ok += o;
        interference += i;
        errors += e;
    }
    let wall = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let total = sessions * episodes;
    let report = json!({
        "sessions": sessions,
        "episodes": total,
        "messages": lat.len(),
        "wall_s": (wall * 1000.0).round() / 1000.0,
        "episodes_per_s": (total as f64 / wall * 10.0).round() / 10.0,
        "messages_per_s": (lat.len() as f64 / wall).round(),
        "latency_ms": {"p50": pct(&lat, 0.50), "p90": pct(&lat, 0.90), "p99": pct(&lat, 0.99), "max": pct(&lat, 1.0)},
        "matching_solo_score": ok,
        "interference": interference,
        "errors": errors,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    if interference > 0 || errors > 0 || ok != total {
        return Err(format!(
            "{interference} episode(s) diverged from their solo score, {errors} failed"
        )
        .into());
    }
    Ok(())
}
