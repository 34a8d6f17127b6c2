//! `POST /hand-runs` on the real server: a hand-played episode (over HTTP, as the workbench plays)
//! is stored as a run the server scored itself, listed by `GET /runs` and readable as any run's
//! episode; failure paths are 4xx with the reason.

#[path = "support/servers.rs"]
mod servers;

use ls_env::TrackMode;
use ls_product::ReportStore;
use serde_json::{json, Value};

const KEY: &str = "hand-runs-operator-key-0123456789";

struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    async fn call(
        &self,
        path: &str,
        session: &str,
        key: bool,
        body: Option<Value>,
    ) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let mut r = match body {
            Some(b) => self.http.post(url).json(&b),
            None => self.http.get(url),
        };
        if !session.is_empty() {
            r = r.header("x-session-id", session);
        }
        if key {
            r = r.header("x-api-key", KEY);
        }
        let resp = r.send().await.unwrap();
        (
            resp.status().as_u16(),
            resp.json().await.unwrap_or(Value::Null),
        )
    }
}

fn pick_case() -> &'static str {
    const CASES: [&str; 5] = [
        "CASE-A-001",
        "CASE-B-001",
        "CASE-C-001",
        "CASE-D-001",
        "CASE-E-001",
    ];
    let n = uuid::Uuid::new_v4().as_u128() as usize % CASES.len();
    println!("hand-run case: {}", CASES[n]);
    CASES[n]
}

#[tokio::test]
async fn a_hand_played_episode_is_stored_as_a_run() {
    let dir = std::env::temp_dir().join(format!("ls-hand-runs-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("runs.db");
    drop(ls_store::Store::open(&db).unwrap());
    let base =
        servers::controlbench_with(TrackMode::Blind, ReportStore::at(db.clone()), Some(KEY)).await;
    let c = Client {
        base,
        http: reqwest::Client::new(),
    };
    let case = pick_case();
    let s = "hand-player";
    let (code, reset) = c
        .call("/reset", s, false, Some(json!({"case_id": case})))
        .await;
    assert_eq!(code, 200, "{reset}");
    let doc = reset["observation"]["visible_documents"][0]["doc_id"].clone();

    // Not finished yet; no key; an unknown session.
    let (code, e) = c.call("/hand-runs", s, true, Some(json!({}))).await;
    assert_eq!(code, 400, "{e}");
    assert!(e.to_string().contains("submit a decision first"), "{e}");
    let (code, e) = c.call("/hand-runs", s, false, Some(json!({}))).await;
    assert_eq!(code, 403, "{e}");
    let (code, _) = c.call("/hand-runs", "nobody", true, Some(json!({}))).await;
    assert_eq!(code, 404);

    let actions = [
        json!({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "fast"}}),
        json!({"action_type": "lookup_policy", "payload": {}}),
        json!({"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.6}}),
    ];
    let mut last = Value::Null;
    for a in &actions {
        let (code, r) = c.call("/step", s, false, Some(a.clone())).await;
        assert_eq!(code, 200, "{r}");
        last = r;
    }
    assert_eq!(last["done"], true);

    let (code, stored) = c.call("/hand-runs", s, true, Some(json!({}))).await;
    assert_eq!(code, 200, "{stored}");
    let run_id = stored["run_id"].as_str().unwrap().to_owned();
    assert!(run_id.starts_with("hand-"), "{run_id}");
    assert_eq!(stored["kind"], "hand");
    assert_eq!(stored["case_id"], case);
    // A first episode in a fresh session: the replay in a fresh environment scores the same.
    assert_eq!(stored["final_score"], stored["session_score"], "{stored}");
    assert_eq!(stored["replay"], format!("#replay/{run_id}/0"));

    let (code, runs) = c.call("/runs", "", true, None).await;
    assert_eq!(code, 200);
    let row = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == run_id.as_str())
        .unwrap_or_else(|| panic!("the hand run is listed: {runs}"))
        .clone();
    assert_eq!(
        (row["agent"].clone(), row["kind"].clone()),
        (json!("human"), json!("hand"))
    );
    let (code, ep) = c
        .call(&format!("/runs/{run_id}/episodes/0"), "", true, None)
        .await;
    assert_eq!(code, 200, "{ep}");
    let traj = ep["record"]["trajectory"].as_array().unwrap();
    assert_eq!(traj.len(), actions.len());
    for (t, a) in traj.iter().zip(&actions) {
        assert_eq!(t["action_type"], a["action_type"]);
    }
    assert_eq!(ep["record"]["final_score"], stored["final_score"]);
    assert_eq!(ep["record"]["decision"], "NEEDS_REVIEW");

    // Without a run store the route says so.
    let base =
        servers::controlbench_with(TrackMode::Blind, ReportStore::disabled(), Some(KEY)).await;
    let c2 = Client {
        base,
        http: reqwest::Client::new(),
    };
    c2.call("/reset", s, false, Some(json!({"case_id": case})))
        .await;
    c2.call("/step", s, false, Some(actions[2].clone())).await;
    let (code, e) = c2.call("/hand-runs", s, true, Some(json!({}))).await;
    assert_eq!(code, 400, "{e}");
    assert!(e.to_string().contains("no run store"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}
