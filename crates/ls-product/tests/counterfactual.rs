//! `POST /counterfactual` on the real server: refused on a blind server and without the operator
//! key, answered in instrumented mode on the session's case, bad interventions are 4xx.

#[path = "support/servers.rs"]
mod servers;

use ls_env::TrackMode;
use ls_product::ReportStore;
use serde_json::{json, Value};

const OP_KEY: &str = "op-key";

async fn spawn(mode: TrackMode) -> String {
    servers::controlbench_with(mode, ReportStore::disabled(), Some(OP_KEY)).await
}

async fn post(base: &str, path: &str, body: Value, key: bool) -> (u16, Value) {
    let mut r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("x-session-id", "cf-session")
        .json(&body);
    if key {
        r = r.header("x-api-key", OP_KEY);
    }
    let resp = r.send().await.unwrap();
    (
        resp.status().as_u16(),
        resp.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn counterfactuals_are_instrumented_operator_reads() {
    let blind = spawn(TrackMode::Blind).await;
    let (code, e) = post(&blind, "/counterfactual", json!({}), true).await;
    assert_eq!(code, 403, "{e}");
    assert!(e.to_string().contains("instrumented mode only"));

    let base = spawn(TrackMode::Instrumented).await;
    let (code, e) = post(&base, "/counterfactual", json!({}), false).await;
    assert_eq!(code, 403, "{e}");
    assert!(e.to_string().contains("operator key"));
    // Before a reset there is no case to ask about.
    let (code, _) = post(&base, "/counterfactual", json!({}), true).await;
    assert!(code == 404 || code == 409 || code == 400, "{code}");

    let (code, _) = post(&base, "/reset", json!({"case_id": "CASE-D-001"}), false).await;
    assert_eq!(code, 200);
    let (code, factual) = post(&base, "/counterfactual", json!({}), true).await;
    assert_eq!(code, 200, "{factual}");
    assert_eq!(factual["case_id"], "CASE-D-001");
    assert_eq!(factual["factual_decision"], "ESCALATE_FRAUD");
    let clean: serde_json::Map<String, Value> = factual["factual"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| (k.clone(), json!(0)))
        .collect();
    let (code, cf) = post(
        &base,
        "/counterfactual",
        json!({"interventions": clean}),
        true,
    )
    .await;
    assert_eq!(code, 200, "{cf}");
    assert_eq!(cf["counterfactual_decision"], "PAY");
    assert_eq!(cf["decision_flips"], true);

    let (code, e) = post(
        &base,
        "/counterfactual",
        json!({"interventions": {"nope": 1}}),
        true,
    )
    .await;
    assert_eq!(code, 422, "{e}");
    assert!(e.to_string().contains("unknown mechanism 'nope'"));
    let (code, e) = post(
        &base,
        "/counterfactual",
        json!({"interventions": {"bank_alignment": 5}}),
        true,
    )
    .await;
    assert_eq!(code, 422, "{e}");
    let (code, _) = post(&base, "/counterfactual", json!([1, 2]), true).await;
    assert_eq!(code, 422);
}
