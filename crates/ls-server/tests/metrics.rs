//! `GET /metrics`: the Prometheus exposition on both environments, counting what a load
//! balancer, an autoscaler and a dashboard read (requests, latency, errors, sessions, episodes
//! over HTTP and `/ws`). The registry is process-wide, so assertions compare before and after.

#[path = "support/servers.rs"]
mod servers;

use futures_util::{SinkExt, StreamExt};
use servers::{audit, controlbench};
use tokio_tungstenite::tungstenite::Message;

/// The value of the sample whose line starts with `series` (name and labels), 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

async fn scrape(base: &str) -> String {
    let res = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(res.status(), 200);
    let ct = res.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    res.text().await.unwrap()
}

const HTTP_EPISODES: &str = "ledgershield_episodes_started_total{transport=\"http\"}";
const WS_EPISODES: &str = "ledgershield_episodes_started_total{transport=\"ws\"}";
const RESETS_OK: &str =
    "ledgershield_http_requests_total{method=\"POST\",route=\"reset\",status=\"200\"}";
const ERRORS_4XX: &str = "ledgershield_http_errors_total{class=\"4xx\"}";

#[tokio::test]
async fn controlbench_exposes_requests_episodes_sessions_and_errors() {
    let base = controlbench().await;
    let before = scrape(&base).await;
    let client = reqwest::Client::new();
    let session = format!("metrics-{}", std::process::id());
    for _ in 0..3 {
        let r = client
            .post(format!("{base}/reset"))
            .header("X-Session-Id", &session)
            .body(r#"{"case_id": "CASE-D-001"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // A failed reset starts no episode but counts as a 4xx.
    let bad = client
        .post(format!("{base}/reset"))
        .body(r#"{"case_id": "NO-SUCH-CASE"}"#)
        .send()
        .await
        .unwrap();
    assert!(bad.status().is_client_error(), "{}", bad.status());
    let addr = base.trim_start_matches("http://");
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/ws"))
        .await
        .unwrap();
    ws.send(Message::text(r#"{"type":"reset","data":{}}"#))
        .await
        .unwrap();
    let reply = ws.next().await.unwrap().unwrap();
    assert!(reply.to_text().unwrap().contains("observation"), "{reply}");
    ws.close(None).await.unwrap();

    let after = scrape(&base).await;
    assert!(sample(&after, HTTP_EPISODES) - sample(&before, HTTP_EPISODES) >= 3.0);
    assert!(sample(&after, WS_EPISODES) - sample(&before, WS_EPISODES) >= 1.0);
    assert!(sample(&after, RESETS_OK) - sample(&before, RESETS_OK) >= 3.0);
    assert!(sample(&after, ERRORS_4XX) - sample(&before, ERRORS_4XX) >= 1.0);
    assert!(sample(&after, "ledgershield_sessions_active") >= 1.0);
    assert!(
        sample(
            &after,
            "ledgershield_http_request_duration_seconds_count{route=\"reset\"}"
        ) >= 4.0
    );
    assert!(after.contains("# TYPE ledgershield_http_requests_in_flight gauge"));
}

#[tokio::test]
async fn audit_keeps_its_json_counters_and_serves_the_exposition_to_scrapers() {
    let base = audit().await;
    let client = reqwest::Client::new();
    // A plain client gets the reference's JSON counters.
    let json: serde_json::Value = client
        .get(format!("{base}/metrics"))
        .header("Accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(json.get("total_resets").is_some(), "{json}");
    // Prometheus's own Accept header, and the explicit query, get the exposition.
    let prom = client
        .get(format!("{base}/metrics"))
        .header(
            "Accept",
            "application/openmetrics-text;version=1.0.0;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(prom.status(), 200);
    // Prometheus lists OpenMetrics first: it gets OpenMetrics, labelled as such.
    assert_eq!(
        prom.headers()["content-type"].to_str().unwrap(),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = prom.text().await.unwrap();
    assert!(
        text.contains("# TYPE ledgershield_http_requests counter"),
        "{text}"
    );
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    // A 0.0.4 scraper gets 0.0.4: counters typed by their `_total` samples, no `# EOF`.
    let old = client
        .get(format!("{base}/metrics"))
        .header("Accept", "text/plain;version=0.0.4")
        .send()
        .await
        .unwrap();
    assert!(old.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    let text = old.text().await.unwrap();
    assert!(
        text.contains("# TYPE ledgershield_http_requests_total counter"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    let q = client
        .get(format!("{base}/metrics?format=prometheus"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(q.contains("ledgershield_build_info{version="), "{q}");
}

/// Item 4: labels come from closed sets. Thousands of distinct methods (each answered) add no
/// series: they are all `method="other"`; the exposition stays small.
#[tokio::test]
async fn client_chosen_methods_create_no_series() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let base = controlbench().await;
    let addr = base.trim_start_matches("http://").to_owned();
    let methods = |text: &str| -> std::collections::BTreeSet<String> {
        text.lines()
            .filter(|l| l.starts_with("ledgershield_http_requests_total{"))
            .filter_map(|l| {
                l.split("method=\"")
                    .nth(1)?
                    .split('"')
                    .next()
                    .map(str::to_owned)
            })
            .collect()
    };
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    for i in 0..3000u32 {
        let req = format!("M{i:05}XYZ /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        // One reply per request (every reply has a body and a content-length).
        let mut got = String::new();
        loop {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed at request {i}");
            got.push_str(&String::from_utf8_lossy(&buf[..n]));
            if let Some((head, body)) = got.split_once("\r\n\r\n") {
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if body.len() >= len {
                    break;
                }
            }
        }
    }
    let text = scrape(&base).await;
    let seen = methods(&text);
    let standard = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "other",
    ];
    assert!(seen.contains("other"), "{seen:?}");
    assert!(
        seen.iter().all(|m| standard.contains(&m.as_str())),
        "{seen:?}"
    );
    assert!(
        text.len() < 256 * 1024,
        "exposition of {} bytes",
        text.len()
    );
}
