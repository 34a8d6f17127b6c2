//! The Financial Audit environment over the OpenEnv protocol: a whole graded episode over
//! WebSocket, discovery endpoints, and malformed messages.

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Message;

async fn spawn() -> String {
    let server = ls_server::ServerConfig::default();
    let shutdown = ls_server::Shutdown::new();
    let app =
        ls_server::audit::router(ls_server::audit::AuditConfig::default(), &server, &shutdown);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("127.0.0.1:{}", addr.port())
}

#[tokio::test]
async fn audit_episode_over_websocket() {
    let addr = spawn().await;
    let (mut ws, _) = connect_async(format!("ws://{addr}/ws")).await.unwrap();
    let mut send = async |v: Value| -> Value {
        ws.send(Message::Text(v.to_string().into())).await.unwrap();
        loop {
            let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if let Message::Text(t) = m {
                return serde_json::from_str(t.as_str()).unwrap();
            }
        }
    };
    // The adversary override is an operator action: never over a socket.
    let refused =
        send(json!({"type": "reset", "data": {"task_id": "fraud_detection", "fraud_level": 3}}))
            .await;
    assert_eq!(refused["type"], "error", "{refused}");
    let r = send(json!({"type": "reset", "data": {"task_id": "expense_audit", "seed": 42}})).await;
    assert_eq!(r["type"], "observation", "{r}");
    assert_eq!(r["data"]["done"], false);
    let bad = send(json!({"type": "step", "data": {"findings": "nope"}})).await;
    assert_eq!(bad["type"], "error", "{bad}");
    let e = send(json!({"type": "step", "data": {"findings": [{"document_id": "EXP-001", "error_type": "over_limit", "confidence": 0.7}], "submit_final": true}})).await;
    assert_eq!(e["type"], "observation", "{e}");
    assert_eq!(e["data"]["done"], true);
    let score = e["data"]["grader"]["score"].as_f64().unwrap();
    assert!((0.01..=0.99).contains(&score));
    let st = send(json!({"type": "state"})).await;
    assert_eq!(st["type"], "state");
    assert_eq!(st["data"]["done"], true);

    let client = reqwest::Client::new();
    let meta: Value = client
        .get(format!("http://{addr}/metadata"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["name"], "financial_audit_env");
    let schema: Value = client
        .get(format!("http://{addr}/schema"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(schema["action"]["properties"]["findings"].is_object());
    let health: Value = client
        .get(format!("http://{addr}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "healthy");
}
