//! OpenEnv protocol conformance against the real router on an ephemeral port: WebSocket
//! episodes, malformed messages, capacity, isolation, idle timeout, discovery and MCP.

use futures_util::{SinkExt, StreamExt};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig};
use ls_server::ws::WsConfig;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn spawn(cfg: WsConfig) -> String {
    let pool = CasePool::new(FixtureSet::embedded().expect("embedded fixtures"));
    let server = ls_server::ServerConfig {
        max_sessions: 64,
        session_idle: Duration::from_secs(600),
        ws: cfg,
        ..Default::default()
    };
    let shutdown = ls_server::Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig::default(), &server, &shutdown);
    let app = ls_server::router(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("127.0.0.1:{}", addr.port())
}

fn cfg() -> WsConfig {
    WsConfig {
        max_sessions: 16,
        idle_timeout: Duration::from_secs(60),
        max_message_bytes: 64 * 1024,
        max_sessions_per_client: 64,
        ..WsConfig::default()
    }
}

async fn connect(addr: &str) -> Ws {
    connect_async(format!("ws://{addr}/ws"))
        .await
        .expect("ws connect")
        .0
}

/// The next text frame as sent.
async fn recv_text(ws: &mut Ws) -> String {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("reply in time")
            .expect("stream open")
            .expect("frame")
        {
            Message::Text(t) => return t.as_str().to_owned(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

async fn recv(ws: &mut Ws) -> Value {
    serde_json::from_str(&recv_text(ws).await).expect("reply is JSON")
}

async fn send(ws: &mut Ws, v: &Value) -> Value {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
    recv(ws).await
}

async fn send_raw(ws: &mut Ws, text: &str) -> Value {
    ws.send(Message::Text(text.to_owned().into()))
        .await
        .unwrap();
    recv(ws).await
}

fn err_code(v: &Value) -> &str {
    assert_eq!(v["type"], "error", "expected an error reply, got {v}");
    v["data"]["code"].as_str().unwrap()
}

/// The scripted episode (also played over HTTP for parity).
fn script(obs: &Value) -> Vec<Value> {
    let doc = obs["visible_documents"][0]["doc_id"]
        .as_str()
        .unwrap()
        .to_owned();
    vec![
        json!({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "fast"}}),
        json!({"action_type": "lookup_policy", "payload": {}}),
        json!({"action_type": "request_callback_verification", "payload": {}}),
        json!({"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.6, "reason_codes": [], "evidence_map": {}}}),
    ]
}

async fn play_ws(ws: &mut Ws, case_id: &str) -> f64 {
    let r = send(ws, &json!({"type": "reset", "data": {"case_id": case_id}})).await;
    assert_eq!(r["type"], "observation", "{r}");
    assert_eq!(r["data"]["observation"]["case_id"], case_id);
    assert_eq!(r["data"]["done"], false);
    let mut last = r.clone();
    for (i, a) in script(&r["data"]["observation"]).iter().enumerate() {
        last = send(ws, &json!({"type": "step", "data": a})).await;
        assert_eq!(last["type"], "observation", "{last}");
        assert_eq!(last["data"]["observation"]["step_count"], json!(i + 1));
    }
    assert_eq!(last["data"]["done"], true);
    assert_eq!(last["data"]["terminated"], true);
    last["data"]["info"]["final_score"]
        .as_f64()
        .expect("final score")
}

#[tokio::test]
async fn episode_over_ws_matches_http() {
    let addr = spawn(cfg()).await;
    let mut ws = connect(&addr).await;
    let ws_score = play_ws(&mut ws, "CASE-A-001").await;
    let st = send(&mut ws, &json!({"type": "state"})).await;
    assert_eq!(st["type"], "state");
    assert_eq!(st["data"]["case_id"], "CASE-A-001");
    assert_eq!(st["data"]["step_count"], 4);
    assert_eq!(st["data"]["done"], true);
    // A step after the end is an execution error; the connection stays usable.
    let e = send(
        &mut ws,
        &json!({"type": "step", "data": {"action_type": "lookup_policy", "payload": {}}}),
    )
    .await;
    assert_eq!(err_code(&e), "EXECUTION_ERROR");
    assert_eq!(e["data"]["error"], "episode_ended");

    // The same script over HTTP gives the same grade.
    let c = reqwest::Client::new();
    let base = format!("http://{addr}");
    let r: Value = c
        .post(format!("{base}/reset"))
        .header("X-Session-Id", "parity")
        .json(&json!({"case_id": "CASE-A-001"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut last = Value::Null;
    for a in script(&r["observation"]) {
        last = c
            .post(format!("{base}/step"))
            .header("X-Session-Id", "parity")
            .json(&a)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    }
    assert_eq!(last["info"]["final_score"].as_f64().unwrap(), ws_score);

    // OpenEnv's wrapped action form and client metadata are accepted too.
    let r = send(
        &mut ws,
        &json!({"type": "reset", "data": {"seed": 7, "episode_id": "ep-1"}}),
    )
    .await;
    assert_eq!(r["type"], "observation");
    let r = send(&mut ws, &json!({"type": "step", "data": {"action_type": "lookup_policy", "payload": {}, "metadata": {"k": 1}}})).await;
    assert_eq!(r["data"]["observation"]["step_count"], 1);

    // close ends the session with a normal close frame.
    ws.send(Message::Text(json!({"type": "close"}).to_string().into()))
        .await
        .unwrap();
    match tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap()
    {
        Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Normal),
        other => panic!("expected a close frame, got {other:?}"),
    }
}

#[tokio::test]
async fn ws_observations_carry_the_http_reply_bytes() {
    // A fresh WebSocket session and a fresh HTTP session playing the same seeded case and actions
    // see byte-identical envelopes: the WebSocket `data` is the HTTP body, wrapped.
    let addr = spawn(cfg()).await;
    let mut ws = connect(&addr).await;
    let c = reqwest::Client::new();
    let base = format!("http://{addr}");
    let reset = json!({"case_id": "CASE-D-001", "seed": 11});
    ws.send(Message::Text(
        json!({"type": "reset", "data": reset}).to_string().into(),
    ))
    .await
    .unwrap();
    let ws_reset = recv_text(&mut ws).await;
    let http_reset = c
        .post(format!("{base}/reset"))
        .header("X-Session-Id", "bytes")
        .json(&reset)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        ws_reset,
        format!(r#"{{"type":"observation","data":{http_reset}}}"#)
    );
    let obs: Value = serde_json::from_str(&http_reset).unwrap();
    for a in script(&obs["observation"]) {
        ws.send(Message::Text(
            json!({"type": "step", "data": a}).to_string().into(),
        ))
        .await
        .unwrap();
        let ws_step = recv_text(&mut ws).await;
        let http_step = c
            .post(format!("{base}/step"))
            .header("X-Session-Id", "bytes")
            .json(&a)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(
            ws_step,
            format!(r#"{{"type":"observation","data":{http_step}}}"#),
            "action {a}"
        );
    }
}

#[tokio::test]
async fn malformed_messages_get_errors_and_the_connection_survives() {
    let addr = spawn(cfg()).await;
    let mut ws = connect(&addr).await;
    assert_eq!(
        err_code(&send_raw(&mut ws, "this is not json").await),
        "INVALID_JSON"
    );
    assert_eq!(
        err_code(&send_raw(&mut ws, "[1,2,3]").await),
        "VALIDATION_ERROR"
    );
    assert_eq!(
        err_code(&send(&mut ws, &json!({"type": "teleport"})).await),
        "UNKNOWN_TYPE"
    );
    assert_eq!(
        err_code(&send(&mut ws, &json!({"data": {}})).await),
        "UNKNOWN_TYPE"
    );
    assert_eq!(
        err_code(&send(&mut ws, &json!({"type": "step"})).await),
        "VALIDATION_ERROR"
    );
    assert_eq!(
        err_code(&send(&mut ws, &json!({"type": "step", "data": "ocr"})).await),
        "VALIDATION_ERROR"
    );
    assert_eq!(
        err_code(&send(&mut ws, &json!({"type": "reset", "data": {}, "extra": 1})).await),
        "VALIDATION_ERROR"
    );
    // Step before reset.
    let e = send(
        &mut ws,
        &json!({"type": "step", "data": {"action_type": "ocr", "payload": {}}}),
    )
    .await;
    assert_eq!(err_code(&e), "EXECUTION_ERROR");
    assert_eq!(e["data"]["error"], "reset_required");
    // Reset validation: unknown field, unknown case, session ids are per connection.
    assert_eq!(
        err_code(&send(&mut ws, &json!({"type": "reset", "data": {"bogus": 1}})).await),
        "VALIDATION_ERROR"
    );
    assert_eq!(
        err_code(
            &send(
                &mut ws,
                &json!({"type": "reset", "data": {"case_id": "CASE-NOPE"}})
            )
            .await
        ),
        "VALIDATION_ERROR"
    );
    assert_eq!(
        err_code(
            &send(
                &mut ws,
                &json!({"type": "reset", "data": {"session_id": "x"}})
            )
            .await
        ),
        "VALIDATION_ERROR"
    );
    // Oversized (above the 64 KiB protocol limit, below the hard cap).
    let big = json!({"type": "reset", "data": {"pad": "x".repeat(100_000)}}).to_string();
    let e = send_raw(&mut ws, &big).await;
    assert_eq!(err_code(&e), "VALIDATION_ERROR");
    assert_eq!(e["data"]["error"], "payload_too_large");
    // State before reset is the initial state.
    let st = send(&mut ws, &json!({"type": "state"})).await;
    assert_eq!(st["type"], "state");
    assert_eq!(st["data"]["step_count"], 0);
    // Still usable: a reset and a bad payload type (validation) then a good step.
    let r = send(
        &mut ws,
        &json!({"type": "reset", "data": {"case_id": "CASE-B-001"}}),
    )
    .await;
    assert_eq!(r["type"], "observation");
    let e = send(&mut ws, &json!({"type": "step", "data": {"action_type": "zoom", "payload": {"doc_id": {"nested": true}}}})).await;
    assert_eq!(err_code(&e), "VALIDATION_ERROR");
    let e = send(
        &mut ws,
        &json!({"type": "step", "data": {"action_type": "ocr", "payload": []}}),
    )
    .await;
    assert_eq!(err_code(&e), "VALIDATION_ERROR");
    // An unknown action is a penalised step (an RL move), not a protocol error.
    let r = send(
        &mut ws,
        &json!({"type": "step", "data": {"action_type": "fly_away", "payload": {}}}),
    )
    .await;
    assert_eq!(r["type"], "observation");
    assert!(r["data"]["reward"].as_f64().unwrap() < 0.0);
    // Binary frames carrying JSON are accepted.
    ws.send(Message::Binary(
        json!({"type": "state"}).to_string().into_bytes().into(),
    ))
    .await
    .unwrap();
    assert_eq!(recv(&mut ws).await["data"]["case_id"], "CASE-B-001");
}

#[tokio::test]
async fn capacity_exhaustion_is_a_protocol_error() {
    let addr = spawn(WsConfig {
        max_sessions: 2,
        ..cfg()
    })
    .await;
    let mut a = connect(&addr).await;
    let mut b = connect(&addr).await;
    // Make sure both sessions are live before the third connects.
    assert_eq!(
        send(&mut a, &json!({"type": "state"})).await["type"],
        "state"
    );
    assert_eq!(
        send(&mut b, &json!({"type": "state"})).await["type"],
        "state"
    );
    let mut c = connect(&addr).await;
    let e = recv(&mut c).await;
    assert_eq!(err_code(&e), "CAPACITY_REACHED");
    assert_eq!(e["data"]["max_sessions"], 2);
    assert_eq!(e["data"]["active_sessions"], 2);
    match tokio::time::timeout(Duration::from_secs(5), c.next())
        .await
        .unwrap()
    {
        Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Again),
        other => panic!("expected close 1013, got {other:?}"),
    }
    // Closing one frees a slot.
    a.send(Message::Text(json!({"type": "close"}).to_string().into()))
        .await
        .unwrap();
    let _ = a.next().await;
    let mut ok = false;
    for _ in 0..50 {
        let mut d = connect(&addr).await;
        let r = send(&mut d, &json!({"type": "state"})).await;
        if r["type"] == "state" {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "a slot is freed after close");
}

#[tokio::test]
async fn connections_are_isolated() {
    let addr = spawn(cfg()).await;
    let mut a = connect(&addr).await;
    let mut b = connect(&addr).await;
    let ra = send(
        &mut a,
        &json!({"type": "reset", "data": {"case_id": "CASE-C-001"}}),
    )
    .await;
    let rb = send(
        &mut b,
        &json!({"type": "reset", "data": {"case_id": "CASE-D-001"}}),
    )
    .await;
    assert_eq!(ra["data"]["observation"]["case_id"], "CASE-C-001");
    assert_eq!(rb["data"]["observation"]["case_id"], "CASE-D-001");
    for _ in 0..3 {
        send(
            &mut a,
            &json!({"type": "step", "data": {"action_type": "lookup_policy", "payload": {}}}),
        )
        .await;
    }
    let sa = send(&mut a, &json!({"type": "state"})).await;
    let sb = send(&mut b, &json!({"type": "state"})).await;
    assert_eq!(sa["data"]["step_count"], 3);
    assert_eq!(sb["data"]["step_count"], 0);
    assert_eq!(sb["data"]["case_id"], "CASE-D-001");
    // The HTTP default session is untouched by WS traffic.
    let st: Value = reqwest::get(format!("http://{addr}/state"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(st["step_count"], 0);
    assert_eq!(st["case_id"], "");
}

#[tokio::test]
async fn idle_sessions_are_closed() {
    let addr = spawn(WsConfig {
        idle_timeout: Duration::from_millis(1000),
        ..cfg()
    })
    .await;
    let mut ws = connect(&addr).await;
    let e = recv(&mut ws).await;
    assert_eq!(err_code(&e), "SESSION_ERROR");
    assert_eq!(e["data"]["error"], "idle_timeout");
    match tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap()
    {
        Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Away),
        other => panic!("expected close 1001, got {other:?}"),
    }
}

/// `/ws` and the watchdog socket run one session loop: the same size-limit error, and the same
/// idle timeout that pings do not extend (an error naming it, then close 1001).
#[tokio::test]
async fn both_sockets_share_the_session_loop() {
    let addr = spawn(WsConfig {
        idle_timeout: Duration::from_millis(1200),
        max_message_bytes: 1024,
        ..cfg()
    })
    .await;
    for path in ["/ws", "/watchdog/ws"] {
        let mut ws = connect_async(format!("ws://{addr}{path}"))
            .await
            .expect("ws connect")
            .0;
        let big = format!(r#"{{"type":"state","pad":"{}"}}"#, "x".repeat(2000));
        let e = send_raw(&mut ws, &big).await;
        assert_eq!(err_code(&e), "VALIDATION_ERROR", "{path}: {e}");
        assert_eq!(e["data"]["error"], "payload_too_large", "{path}: {e}");
        assert_eq!(e["data"]["limit_bytes"], 1024, "{path}: {e}");
        // Ping every 200 ms: were pings activity, the 1.2 s idle timeout would never pass.
        let started = tokio::time::Instant::now();
        let e = loop {
            assert!(
                started.elapsed() < Duration::from_secs(6),
                "{path}: pings kept the session open"
            );
            match tokio::time::timeout(Duration::from_millis(200), ws.next()).await {
                Err(_) => ws.send(Message::Ping(vec![1].into())).await.unwrap(),
                Ok(Some(Ok(Message::Text(t)))) => break serde_json::from_str::<Value>(&t).unwrap(),
                Ok(Some(Ok(_))) => {}
                other => panic!("{path}: socket ended early: {other:?}"),
            }
        };
        assert_eq!(e["data"]["error"], "idle_timeout", "{path}: {e}");
        match tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
        {
            Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Away, "{path}"),
            other => panic!("{path}: expected close 1001, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn discovery_endpoints_and_mcp() {
    let addr = spawn(cfg()).await;
    let base = format!("http://{addr}");
    let c = reqwest::Client::new();
    let get = |p: &str| c.get(format!("{base}{p}")).send();
    let health: Value = get("/health").await.unwrap().json().await.unwrap();
    // As the LedgerShield documentation specifies it (`{"status": "ok"}`).
    assert_eq!(health["status"], "ok");
    let meta: Value = get("/metadata").await.unwrap().json().await.unwrap();
    assert_eq!(meta["name"], "ledgershield_controlbench");
    assert!(meta["description"].as_str().unwrap().len() > 20);
    assert!(meta["readme_content"]
        .as_str()
        .unwrap()
        .contains("submit_decision"));
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    let schema: Value = get("/schema").await.unwrap().json().await.unwrap();
    let actions = schema.to_string();
    for a in ls_core::ActionName::ALL {
        assert!(actions.contains(&format!("\"{}\"", a.as_str())));
    }
    assert!(schema["observation"]["properties"]["visible_documents"].is_object());
    assert!(schema["state"]["properties"]["episode_id"].is_object());
    let api: Value = get("/openapi.json").await.unwrap().json().await.unwrap();
    assert_eq!(api["openapi"], "3.1.0");
    assert_eq!(api["info"]["version"], "1.0.0");
    for p in [
        "/reset",
        "/step",
        "/state",
        "/health",
        "/metadata",
        "/schema",
        "/ws",
        "/mcp",
    ] {
        assert!(api["paths"][p].is_object(), "openapi lacks {p}");
    }
    // Every $ref resolves inside the document.
    let text = api.to_string();
    for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &part[..part.find('"').unwrap()];
        assert!(
            api["components"]["schemas"][name].is_object(),
            "dangling $ref {name}"
        );
    }
    // /ws without an upgrade is a JSON 400.
    let r = get("/ws").await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "bad_request"
    );

    // MCP over HTTP.
    let rpc = |body: Value| c.post(format!("{base}/mcp")).json(&body).send();
    let r: Value = rpc(json!({})).await.unwrap().json().await.unwrap();
    assert_eq!(r["jsonrpc"], "2.0");
    assert_eq!(r["error"]["code"], -32600);
    let r: Value = c
        .post(format!("{base}/mcp"))
        .body("{nope")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32700);
    let r: Value = rpc(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let catalogue = ls_core::ActionName::COUNT;
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), catalogue);
    let r: Value = rpc(json!({"jsonrpc": "2.0", "id": 2, "method": "nope"}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["error"]["code"], -32601);
    let r: Value = rpc(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "lookup_policy"}})).await.unwrap().json().await.unwrap();
    assert_eq!(r["error"]["code"], -32602);
    let r: Value = rpc(json!({"jsonrpc": "2.0", "id": 4, "method": "openenv/session/create", "params": {"reset": {"case_id": "CASE-E-001"}}})).await.unwrap().json().await.unwrap();
    let sid = r["result"]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(
        r["result"]["observation"]["observation"]["case_id"],
        "CASE-E-001"
    );
    let r: Value = rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"session_id": sid, "name": "lookup_policy", "arguments": {}}})).await.unwrap().json().await.unwrap();
    assert_eq!(r["id"], 5);
    assert_eq!(
        r["result"]["structuredContent"]["observation"]["step_count"],
        1
    );
    // The MCP session is an HTTP session too.
    let st: Value = c
        .get(format!("{base}/state"))
        .header("X-Session-Id", &sid)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(st["step_count"], 1);
    let r: Value = rpc(json!({"jsonrpc": "2.0", "id": 6, "method": "openenv/session/close", "params": {"session_id": sid}})).await.unwrap().json().await.unwrap();
    assert_eq!(r["result"]["closed"], true);
    let r: Value = rpc(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"session_id": sid, "name": "lookup_policy"}})).await.unwrap().json().await.unwrap();
    assert_eq!(r["error"]["code"], -32602);

    // MCP over the WebSocket.
    let mut ws = connect(&addr).await;
    let r = send(
        &mut ws,
        &json!({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}}),
    )
    .await;
    assert_eq!(r["type"], "mcp");
    let catalogue = ls_core::ActionName::COUNT;
    assert_eq!(
        r["data"]["result"]["tools"].as_array().unwrap().len(),
        catalogue
    );
    send(
        &mut ws,
        &json!({"type": "reset", "data": {"case_id": "CASE-A-002"}}),
    )
    .await;
    let r = send(&mut ws, &json!({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "lookup_policy", "arguments": {}}}})).await;
    assert_eq!(
        r["data"]["result"]["structuredContent"]["observation"]["case_id"],
        "CASE-A-002"
    );
}

/// On shutdown an open WebSocket session is closed with 1001 (going away) and the server stops.
#[tokio::test]
async fn shutdown_closes_websockets_with_1001() {
    let pool = CasePool::new(FixtureSet::embedded().expect("embedded fixtures"));
    let server = ls_server::ServerConfig {
        ws: cfg(),
        ..Default::default()
    };
    let shutdown = ls_server::Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig::default(), &server, &shutdown);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = tokio::spawn(ls_server::serve(
        listener,
        ls_server::router(state),
        server.timeouts,
        shutdown.clone(),
    ));
    let (mut ws, _) = connect_async(format!("ws://{addr}/ws")).await.unwrap();
    ws.send(Message::Text(
        json!({"type": "reset", "data": {"case_id": "CASE-A-001"}})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    assert!(matches!(ws.next().await, Some(Ok(Message::Text(_)))));
    shutdown.trigger();
    match tokio::time::timeout(Duration::from_secs(10), ws.next())
        .await
        .unwrap()
    {
        Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Away),
        other => panic!("expected close 1001, got {other:?}"),
    }
    drop(ws);
    tokio::time::timeout(Duration::from_secs(15), served)
        .await
        .expect("serve returns after draining")
        .unwrap()
        .unwrap();
}

/// The WebSocket reset refuses `fresh_institution` (an operator action; messages carry no
/// credential) and keeps the memory; a new connection is a fresh institution.
#[tokio::test]
async fn ws_reset_with_fresh_institution_is_refused_and_a_new_connection_is_fresh() {
    let addr = spawn(cfg()).await;
    let mut ws = connect(&addr).await;
    send(
        &mut ws,
        &json!({"type": "reset", "data": {"case_id": "CASE-D-001"}}),
    )
    .await;
    let done = send(&mut ws, &json!({"type": "step", "data": {"action_type": "submit_decision", "payload": {"decision": "PAY", "confidence": 0.99}}})).await;
    assert_eq!(done["data"]["done"], true, "{done}");
    let carried = send(
        &mut ws,
        &json!({"type": "reset", "data": {"case_id": "CASE-A-001"}}),
    )
    .await;
    assert_eq!(
        carried["data"]["observation"]["institutional_memory"]["case_counter"],
        1
    );
    let bad = send(
        &mut ws,
        &json!({"type": "reset", "data": {"case_id": "CASE-A-001", "fresh_institution": 3}}),
    )
    .await;
    assert_eq!(err_code(&bad), "VALIDATION_ERROR");
    // A WebSocket message carries no operator credential: the governed agent cannot lift its
    // own governance; the refusal names the field so clients fall back to a new session.
    let refused = send(
        &mut ws,
        &json!({"type": "reset", "data": {"case_id": "CASE-A-001", "fresh_institution": true}}),
    )
    .await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert!(
        refused.to_string().contains("fresh_institution"),
        "{refused}"
    );
    let kept = send(
        &mut ws,
        &json!({"type": "reset", "data": {"case_id": "CASE-A-001"}}),
    )
    .await;
    assert_eq!(
        kept["data"]["observation"]["institutional_memory"]["case_counter"], 1,
        "memory kept"
    );
    let mut fresh_conn = connect(&addr).await;
    let fresh = send(
        &mut fresh_conn,
        &json!({"type": "reset", "data": {"case_id": "CASE-A-001"}}),
    )
    .await;
    assert_eq!(
        fresh["data"]["observation"]["institutional_memory"]["case_counter"],
        0
    );
}
