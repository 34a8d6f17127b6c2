//! The product's operator routes on the application as shipped: stored runs and agent runs need
//! the operator key from loopback too, a HEAD is guarded as its GET, and the protocol layer's
//! operator route (`POST /institutional-reset`) stays guarded beside them.

#[path = "support/servers.rs"]
mod servers;

use ls_env::TrackMode;
use ls_product::ReportStore;

const KEY: &str = "test-operator-key";

async fn status(req: reqwest::RequestBuilder, key: bool) -> u16 {
    let req = if key {
        req.header("x-api-key", KEY)
    } else {
        req
    };
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn product_operator_routes_need_the_key_from_every_address_and_method() {
    let base =
        servers::controlbench_with(TrackMode::Blind, ReportStore::disabled(), Some(KEY)).await;
    let c = reqwest::Client::new();
    let runs = format!("{base}/runs");
    assert_eq!(
        status(c.get(&runs), false).await,
        403,
        "loopback has no exemption"
    );
    assert_eq!(
        status(c.head(&runs), false).await,
        403,
        "HEAD is guarded as its GET"
    );
    assert_eq!(status(c.get(&runs), true).await, 200);
    assert_eq!(status(c.head(&runs), true).await, 200);
    assert_eq!(status(c.get(format!("{base}/runs/r-1")), false).await, 403);
    let agent_run = || {
        c.post(format!("{base}/agent-runs"))
            .json(&serde_json::json!({"agent": "teacher", "case_ids": ["NOT-A-CASE"]}))
    };
    assert_eq!(status(agent_run(), false).await, 403);
    // With the key the request reaches the handler, which names the unknown case.
    assert_eq!(status(agent_run(), true).await, 404);
    let reset = || c.post(format!("{base}/institutional-reset")).body("{}");
    assert_eq!(status(reset(), false).await, 403);
    assert_eq!(status(reset(), true).await, 200);
    // Agent-facing product reads need nothing.
    assert_eq!(
        status(c.get(format!("{base}/leaderboard")), false).await,
        200
    );
}
