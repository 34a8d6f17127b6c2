//! End-to-end tests over real HTTP: the router on an ephemeral port, played with reqwest.

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, TrackMode};
use serde_json::{json, Value};
use std::time::Duration;

#[path = "support/reference_keys.rs"]
mod reference_keys;

struct Server {
    base: String,
    client: reqwest::Client,
}

async fn start(mode: TrackMode, max_sessions: usize) -> Server {
    start_with(mode, max_sessions, ls_server::SecurityConfig::default()).await
}

async fn start_with(
    mode: TrackMode,
    max_sessions: usize,
    security: ls_server::SecurityConfig,
) -> Server {
    let pool = CasePool::new(FixtureSet::embedded().expect("fixtures"));
    let server = ls_server::ServerConfig {
        max_sessions,
        session_idle: Duration::from_secs(600),
        security,
        ..Default::default()
    };
    let shutdown = ls_server::Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig { track_mode: mode }, &server, &shutdown);
    let app = ls_server::router(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    Server {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
    }
}

impl Server {
    async fn post_raw(&self, path: &str, session: Option<&str>, body: Vec<u8>) -> (u16, Value) {
        let mut req = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body);
        if let Some(s) = session {
            req = req.header("X-Session-Id", s);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text)
                .unwrap_or_else(|_| panic!("non-JSON response {status}: {text}")),
        )
    }
    async fn post(&self, path: &str, session: Option<&str>, body: Value) -> (u16, Value) {
        self.post_raw(path, session, serde_json::to_vec(&body).unwrap())
            .await
    }
    async fn ok(&self, path: &str, session: Option<&str>, body: Value) -> Value {
        let (s, v) = self.post(path, session, body).await;
        assert_eq!(s, 200, "{path} failed: {v}");
        v
    }
    async fn get(&self, path: &str, session: Option<&str>) -> (u16, Value) {
        let mut req = self.client.get(format!("{}{path}", self.base));
        if let Some(s) = session {
            req = req.header("X-Session-Id", s);
        }
        let resp = req.send().await.unwrap();
        (resp.status().as_u16(), resp.json().await.unwrap())
    }
    async fn step(&self, session: Option<&str>, action: &str, payload: Value) -> Value {
        self.ok(
            "/step",
            session,
            json!({"action_type": action, "payload": payload}),
        )
        .await
    }
}

fn case_ids() -> Vec<String> {
    FixtureSet::embedded()
        .unwrap()
        .cases
        .iter()
        .map(|c| c.case_id.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_case_resets_and_plays_to_a_decision() {
    let s = start(TrackMode::Blind, 64).await;
    for id in case_ids() {
        let sid = format!("play-{id}");
        let env = s.ok("/reset", Some(&sid), json!({"case_id": id})).await;
        let obs = &env["observation"];
        for f in reference_keys::OBSERVATION {
            assert!(obs.get(f).is_some(), "{id}: observation lacks {f}");
        }
        assert_eq!(obs["case_id"], id.as_str());
        let catalogue = ls_core::ActionName::COUNT;
        assert_eq!(obs["allowed_actions"].as_array().unwrap().len(), catalogue);
        let interventions = ls_core::ActionName::interventions().count();
        assert_eq!(
            obs["available_interventions"].as_array().unwrap().len(),
            interventions
        );
        assert_eq!(env["info"]["case_id"], id.as_str());
        assert_eq!(
            (env["done"].clone(), env["reward"].clone()),
            (json!(false), json!(0.0))
        );
        assert!(obs["messages"][0]
            .as_str()
            .unwrap()
            .starts_with(&format!("Loaded case {id}")));
        // Blind mode: nothing hidden.
        assert_eq!(obs["sprt_state"], json!({}));
        assert_eq!(obs["tool_rankings"], json!({}));
        assert_eq!(obs["reward_machine"], json!({}));
        let doc = obs["visible_documents"][0]["doc_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let ocr = s
            .step(
                Some(&sid),
                "ocr",
                json!({"doc_id": doc, "mode": "accurate"}),
            )
            .await;
        assert_eq!(
            ocr["observation"]["last_tool_result"]["success"], true,
            "{id}"
        );
        assert!(!ocr["observation"]["last_tool_result"]["tokens"]
            .as_array()
            .unwrap()
            .is_empty());
        assert!(
            ocr["info"].get("rl_data_plane").is_none(),
            "blind mode exports no RL vector"
        );
        assert!(ocr["info"]["reward_model"]["metadata"]
            .get("observation_key")
            .is_none());
        let cb = s
            .step(Some(&sid), "request_callback_verification", json!({}))
            .await;
        let ready = cb["observation"]["pending_events"][0]["ready_at_clock"]
            .as_u64()
            .unwrap();
        assert!(
            ready == 3 || ready == 4,
            "{id}: callback due one or two ticks later, got {ready}"
        );
        let mut clock = 2;
        while clock < ready {
            let v = s.step(Some(&sid), "lookup_policy", json!({})).await;
            clock = v["observation"]["case_clock"].as_u64().unwrap();
            if clock == ready {
                assert_eq!(
                    v["observation"]["revealed_artifacts"][0]["artifact_id"],
                    "callback_verification_result",
                    "{id}: artifact arrives on time"
                );
            } else {
                assert_eq!(
                    v["observation"]["revealed_artifacts"],
                    json!([]),
                    "{id}: not before it is due"
                );
            }
        }
        let done = s
            .step(
                Some(&sid),
                "submit_decision",
                json!({"decision": "NEEDS_REVIEW", "confidence": 0.5}),
            )
            .await;
        assert_eq!(
            (
                done["done"].clone(),
                done["terminated"].clone(),
                done["truncated"].clone()
            ),
            (json!(true), json!(true), json!(false))
        );
        let score = done["info"]["final_score"].as_f64().unwrap();
        assert!((0.01..=0.99).contains(&score), "{id}: {score}");
        assert!(done["info"]["result_class"].is_string());
        assert!(done["info"]["score_breakdown"].is_object());
        // The SPRT readiness is hidden in blind mode, on every step and in the terminal reports.
        for (what, reply) in [("ocr", &ocr), ("callback", &cb), ("submit", &done)] {
            let text = reply.to_string();
            assert!(
                !text.contains("decision_readiness") && !text.contains("latent_hypothesis"),
                "{id}: blind {what} reply leaks the SPRT state"
            );
        }
        let (code, err) = s
            .post(
                "/step",
                Some(&sid),
                json!({"action_type": "zoom", "payload": {"doc_id": doc}}),
            )
            .await;
        assert_eq!(code, 409, "{id}: step after the end is refused");
        assert!(err["detail"].as_str().unwrap().contains("reset"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncation_by_steps_and_by_budget() {
    let s = start(TrackMode::Blind, 8).await;
    let sid = Some("trunc");
    s.ok("/reset", sid, json!({"custom_case": {"template_case_id": "CASE-A-001", "case_id": "custom-steps", "instruction": "Extract the fields.", "max_steps": 4}})).await;
    let mut last = Value::Null;
    for _ in 0..4 {
        last = s.step(sid, "lookup_policy", json!({})).await;
    }
    assert_eq!(
        (
            last["done"].clone(),
            last["truncated"].clone(),
            last["terminated"].clone()
        ),
        (json!(true), json!(true), json!(false))
    );
    assert_eq!(last["info"]["terminal_reason"], "max_steps_reached");
    assert!(
        last["info"].get("final_score").is_none(),
        "truncated episodes are not graded"
    );

    s.ok("/reset", sid, json!({"custom_case": {"template_case_id": "CASE-A-001", "case_id": "CUSTOM-BUDGET", "instruction": "Extract.", "budget_total": 1.5}})).await;
    let a = s
        .step(
            sid,
            "ocr",
            json!({"doc_id": "INV-A-001", "mode": "accurate"}),
        )
        .await;
    assert_eq!(a["done"], false);
    assert!((a["observation"]["budget_remaining"].as_f64().unwrap() - 0.4).abs() < 1e-9);
    let b = s
        .step(
            sid,
            "ocr",
            json!({"doc_id": "INV-A-001", "mode": "accurate"}),
        )
        .await;
    assert_eq!(
        (b["done"].clone(), b["truncated"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(b["info"]["terminal_reason"], "budget_exhausted");
    assert_eq!(b["info"]["budget_exhausted"], true);
    assert_eq!(b["observation"]["budget_remaining"], 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_actions_are_penalised_steps() {
    let s = start(TrackMode::Blind, 8).await;
    let sid = Some("reject");
    s.ok("/reset", sid, json!({"case_id": "CASE-B-001"})).await;
    let v = s.step(sid, "teleport", json!({})).await;
    assert_eq!(v["reward"], -0.05);
    assert_eq!(v["observation"]["last_tool_result"]["success"], false);
    assert_eq!(v["observation"]["step_count"], 1);
    let v = s
        .step(sid, "submit_decision", json!({"decision": "pay"}))
        .await;
    assert_eq!(v["reward"], -0.25);
    assert_eq!(v["done"], false);
    let v = s.step(sid, "ocr", json!({"doc_id": "NOPE"})).await;
    assert_eq!(v["observation"]["last_tool_result"]["success"], false);
    assert!(v["observation"]["last_tool_result"]["error"]
        .as_str()
        .unwrap()
        .contains("unknown doc_id"));
    let c = &v["info"]["reward_model"]["components"];
    assert_eq!(c["failure_penalty"], -0.05);
    assert!(
        c["cost_penalty"].as_f64().unwrap() < 0.0,
        "the failed call is still charged"
    );
    assert!(v["reward"].as_f64().unwrap() < -0.05);
    let st = s.get("/state", sid).await.1;
    assert_eq!(
        st["trajectory"].as_array().unwrap().len(),
        1,
        "only the executed tool is in the trajectory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_json_4xx_and_keep_the_session() {
    let s = start(TrackMode::Blind, 8).await;
    let sid = Some("bad");
    s.ok("/reset", sid, json!({"case_id": "CASE-D-001"})).await;
    let s1 = s.step(sid, "lookup_policy", json!({})).await;
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"not json".to_vec(), 400, "invalid_json"),
        (br#"{"payload": {}}"#.to_vec(), 422, "action_type"),
        (br#"{"action_type": "ocr", "payload": [1, 2]}"#.to_vec(), 422, "payload"),
        (br#"{"action_type": 17}"#.to_vec(), 422, "action_type"),
        (br#"{"action_type": "ocr", "payload": {"doc_id": ["x"]}}"#.to_vec(), 422, "doc_id"),
        (br#"{"action_type": "ocr", "payload": {"doc_id": "INV-D-001", "bbox": [1, 2]}}"#.to_vec(), 422, "bbox"),
        (br#"{"action_type": "submit_decision", "payload": {"decision": "HOLD", "reason_codes": 7}}"#.to_vec(), 422, "reason_codes"),
        (br#"{"action_type": "ocr", "surprise": 1}"#.to_vec(), 422, "surprise"),
        (br#"[1, 2, 3]"#.to_vec(), 422, "object"),
    ];
    for (body, code, needle) in cases {
        let (status, v) = s.post_raw("/step", sid, body.clone()).await;
        assert_eq!(status, code, "{}: {v}", String::from_utf8_lossy(&body));
        let text = v.to_string();
        assert!(
            text.contains(needle),
            "error names the problem ({needle}): {text}"
        );
        assert!(v["error"]["code"].is_string());
    }
    let big = format!(
        "{{\"action_type\": \"ocr\", \"payload\": {{\"doc_id\": \"{}\"}}}}",
        "x".repeat(2 * 1024 * 1024)
    );
    let (status, v) = s.post_raw("/step", sid, big.into_bytes()).await;
    assert_eq!(status, 413, "{v}");
    let (status, v) = s
        .post(
            "/step",
            Some("never-created"),
            json!({"action_type": "zoom", "payload": {}}),
        )
        .await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["error"]["code"], "unknown_session");
    let (status, _) = s.post("/reset", sid, json!({"case_id": "CASE-NOPE"})).await;
    assert_eq!(status, 400);
    let (status, _) = s.post("/reset", sid, json!({"seed": "abc"})).await;
    assert_eq!(status, 422);
    // The session is intact: the next step continues the same episode.
    let s2 = s.step(sid, "lookup_policy", json!({})).await;
    assert_eq!(
        s2["observation"]["step_count"],
        s1["observation"]["step_count"].as_u64().unwrap() + 1
    );
    assert_eq!(s2["observation"]["case_id"], "CASE-D-001");
    let (status, v) = s.get("/nowhere", None).await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (404, json!("not_found"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_before_reset_is_a_conflict() {
    let s = start(TrackMode::Blind, 8).await;
    let (status, v) = s
        .post("/step", None, json!({"action_type": "zoom", "payload": {}}))
        .await;
    assert_eq!(status, 409);
    assert!(v["detail"].as_str().unwrap().contains("reset"));
    let (status, st) = s.get("/state", None).await;
    assert_eq!(status, 200);
    assert_eq!(st["budget_total"], 15.0);
}

async fn scripted(s: &Server, sid: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |v: &Value| out.push(serde_json::to_string(v).unwrap());
    push(
        &s.ok("/reset", Some(sid), json!({"case_id": "CASE-D-001"}))
            .await,
    );
    for (a, p) in [
        ("ocr", json!({"doc_id": "INV-D-001"})),
        ("inspect_email_thread", json!({"thread_id": "THR-100"})),
        (
            "compare_bank_account",
            json!({"vendor_key": "northwind-industrial", "proposed_bank_account": "IN31NW000884120"}),
        ),
        ("request_callback_verification", json!({})),
        (
            "search_ledger",
            json!({"vendor_key": "northwind-industrial", "amount": 2478}),
        ),
        (
            "lookup_vendor_history",
            json!({"vendor_key": "northwind-industrial"}),
        ),
        (
            "submit_decision",
            json!({"decision": "ESCALATE_FRAUD", "confidence": 0.9, "reason_codes": ["bank_override_attempt"]}),
        ),
    ] {
        push(&s.step(Some(sid), a, p).await);
    }
    push(&s.get("/state", Some(sid)).await.1);
    push(&s.ok("/reset", Some(sid), json!({"seed": 7})).await);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_case_and_actions_are_byte_identical() {
    let s = start(TrackMode::Instrumented, 8).await;
    let a = scripted(&s, "det-a").await;
    let b = scripted(&s, "det-b").await;
    assert_eq!(a, b);
    let s2 = start(TrackMode::Instrumented, 8).await;
    assert_eq!(
        a,
        scripted(&s2, "det-a").await,
        "a fresh server gives the same bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instrumented_mode_exposes_the_runtime() {
    let s = start(TrackMode::Instrumented, 8).await;
    let env = s
        .ok("/reset", Some("inst"), json!({"case_id": "CASE-D-001"}))
        .await;
    let obs = &env["observation"];
    assert_eq!(
        obs["sprt_state"]["hypotheses"].as_array().unwrap().len(),
        12
    );
    assert_eq!(
        obs["tool_rankings"]["rankings"].as_object().unwrap().len(),
        20
    );
    assert!(obs["reward_machine"]["temporal_spec"]
        .as_str()
        .unwrap()
        .contains("F(inspect_email_thread"));
    assert!(obs["case_metadata"]["mdp_component"]["component_name"]
        .as_str()
        .unwrap()
        .ends_with("IdentityVerification"));
    let v = s.step(Some("inst"), "compare_bank_account", json!({"vendor_key": "northwind-industrial", "proposed_bank_account": "IN31NW000884120"})).await;
    assert_eq!(
        v["info"]["rl_data_plane"]["state_vector"]
            .as_array()
            .unwrap()
            .len(),
        37
    );
    assert_eq!(
        v["info"]["reward_model"]["metadata"]["observation_key"],
        "mismatch"
    );
    // A second identical comparison is not new evidence.
    let before = v["observation"]["sprt_state"]["posterior_probabilities"].clone();
    let w = s.step(Some("inst"), "compare_bank_account", json!({"vendor_key": "northwind-industrial", "proposed_bank_account": "IN31NW000884120"})).await;
    assert_eq!(
        w["observation"]["sprt_state"]["posterior_probabilities"],
        before
    );
    // Blind-control track forces blind mode even on an instrumented server.
    let b = s
        .ok(
            "/reset",
            Some("inst"),
            json!({"case_id": "CASE-D-001", "track": "blind_control"}),
        )
        .await;
    assert_eq!(b["observation"]["sprt_state"], json!({}));
    assert_eq!(
        s.get("/state", Some("inst")).await.1["sprt_state"],
        json!({})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_are_isolated() {
    let s = std::sync::Arc::new(start(TrackMode::Blind, 128).await);
    let ids = case_ids();
    let mut handles = Vec::new();
    for i in 0..64 {
        let s = s.clone();
        let case = ids[i % ids.len()].clone();
        handles.push(tokio::spawn(async move {
            let sid = format!("iso-{i}");
            s.ok("/reset", Some(&sid), json!({"case_id": case})).await;
            for step in 1..=5u64 {
                let v = s.step(Some(&sid), "lookup_policy", json!({})).await;
                assert_eq!(v["observation"]["case_id"], case.as_str());
                assert_eq!(v["observation"]["step_count"], step);
            }
            let st = s.get("/state", Some(&sid)).await.1;
            assert_eq!(st["case_id"], case.as_str());
            assert_eq!(st["trajectory"].as_array().unwrap().len(), 5);
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

/// A reset from another client (another loopback address), as `(status, body)`.
async fn reset_from(s: &Server, src: &str, sid: &str) -> (u16, Value) {
    let r = reqwest::Client::builder()
        .local_address(src.parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
        .post(format!("{}/reset", s.base))
        .header("x-session-id", sid)
        .json(&json!({"case_id": "CASE-A-001"}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Capacity is refused cleanly (503) only to a client holding no session when every other
/// client holds one; a client holding one gives up its own least recently used session instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_capacity_is_a_clean_503() {
    let s = start(TrackMode::Blind, 2).await;
    assert_eq!(reset_from(&s, "127.0.0.2", "cap-1").await.0, 200);
    assert_eq!(reset_from(&s, "127.0.0.3", "cap-2").await.0, 200);
    let (status, v) = reset_from(&s, "127.0.0.4", "cap-3").await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["code"], "capacity_exhausted");
    // Existing sessions still work.
    s.step(Some("cap-1"), "lookup_policy", json!({})).await;
    // The holder of cap-2 may replace it with a new session of its own.
    assert_eq!(reset_from(&s, "127.0.0.3", "cap-2b").await.0, 200);
    s.step(Some("cap-1"), "lookup_policy", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pressure_event_arrives_and_is_readable() {
    let s = start(TrackMode::Blind, 8).await;
    let sid = Some("press");
    s.ok("/reset", sid, json!({"case_id": "CASE-D-001"})).await;
    let mut seen = None;
    for _ in 0..9 {
        let v = s.step(sid, "lookup_policy", json!({})).await;
        if let Some(p) = v["observation"]["last_tool_result"].get("pressure_event") {
            seen = Some((
                v["observation"]["step_count"].as_u64().unwrap(),
                p["doc_id"].as_str().unwrap().to_owned(),
            ));
            break;
        }
    }
    let (step, doc) = seen.expect("pressure event injected");
    assert_eq!(step, 9, "trigger step is max_steps / 2");
    let v = s
        .step(sid, "ocr", json!({"doc_id": doc, "mode": "accurate"}))
        .await;
    assert_eq!(
        v["observation"]["last_tool_result"]["success"], true,
        "injected documents are readable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn institutional_memory_route_serves_the_terminal_snapshot() {
    let s = start(TrackMode::Blind, 8).await;
    let sid = Some("mem");
    let (status, fresh) = s.get("/institutional-memory", sid).await;
    assert_eq!(status, 200, "{fresh}");
    assert_eq!(fresh["case_counter"], 0);
    s.ok("/reset", sid, json!({"case_id": "CASE-D-001"})).await;
    let done = s
        .step(
            sid,
            "submit_decision",
            json!({"decision": "HOLD", "confidence": 0.7}),
        )
        .await;
    let (status, mem) = s.get("/institutional-memory", sid).await;
    assert_eq!(status, 200, "{mem}");
    // The route and the terminal info carry the same full snapshot (TrustGraph case list
    // included); the observation carries it without the roll-up's per-case lists.
    assert_eq!(mem, done["info"]["institutional_memory"]);
    assert_eq!(mem["case_counter"], 1);
    assert_eq!(
        mem["trust_graph_memory"]["recent_case_ids"],
        json!(["CASE-D-001"])
    );
    assert_eq!(mem["loss_ledger"], done["info"]["institutional_metrics"]);
    let obs = &done["observation"]["institutional_memory"];
    let mut expected = mem.clone();
    for k in ["recent_graphs", "vendor_profiles", "recent_case_ids"] {
        expected["trust_graph_memory"]
            .as_object_mut()
            .unwrap()
            .shift_remove(k);
    }
    assert_eq!(obs, &expected);
    assert_eq!(obs["loss_ledger"], mem["loss_ledger"]);
    // Another session's memory is untouched.
    let (_, other) = s.get("/institutional-memory", Some("mem-other")).await;
    assert_eq!(other["case_counter"], 0);
}

/// `fresh_institution` on `/reset` starts the episode from a fresh institutional memory; without
/// it the session's memory carries over; a malformed value is a 4xx that keeps the memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_with_fresh_institution_clears_the_session_memory() {
    let keyed = ls_server::SecurityConfig {
        admin_api_key: Some("k3y".into()),
        ..Default::default()
    };
    let mut s = start_with(TrackMode::Blind, 8, keyed).await;
    let sid = Some("fresh");
    s.ok("/reset", sid, json!({"case_id": "CASE-D-001"})).await;
    s.step(
        sid,
        "submit_decision",
        json!({"decision": "PAY", "confidence": 0.99}),
    )
    .await;
    let carried = s.ok("/reset", sid, json!({"case_id": "CASE-A-001"})).await;
    assert_eq!(
        carried["observation"]["institutional_memory"]["case_counter"],
        1
    );
    let (status, v) = s
        .post(
            "/reset",
            sid,
            json!({"case_id": "CASE-A-001", "fresh_institution": "yes"}),
        )
        .await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(
        s.get("/institutional-memory", sid).await.1["case_counter"],
        1
    );
    // Without the operator key a fresh institution is refused and the memory kept.
    let (status, v) = s
        .post(
            "/reset",
            sid,
            json!({"case_id": "CASE-A-001", "fresh_institution": true}),
        )
        .await;
    assert_eq!(status, 403, "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("fresh_institution"));
    assert_eq!(
        s.get("/institutional-memory", sid).await.1["case_counter"],
        1
    );
    let mut h = reqwest::header::HeaderMap::new();
    h.insert("x-api-key", "k3y".parse().unwrap());
    s.client = reqwest::Client::builder()
        .default_headers(h)
        .build()
        .unwrap();
    let fresh = s
        .ok(
            "/reset",
            sid,
            json!({"case_id": "CASE-A-001", "fresh_institution": true}),
        )
        .await;
    assert_eq!(
        fresh["observation"]["institutional_memory"]["case_counter"],
        0
    );
    let other = s
        .ok(
            "/reset",
            Some("fresh-other"),
            json!({"case_id": "CASE-A-001"}),
        )
        .await;
    assert_eq!(
        fresh["observation"]["institutional_memory"],
        other["observation"]["institutional_memory"]
    );
    assert_eq!(
        s.get("/institutional-memory", sid).await.1["case_counter"],
        0
    );
}

/// With the default configuration CORS is off: a browser's cross-origin request (it carries
/// `Origin`) is refused, `text/plain` simple POSTs included, while clients without `Origin`
/// (curl, SDKs) are served. Listed origins get CORS headers and answered preflights.
#[tokio::test]
async fn cross_origin_requests_are_refused_unless_listed() {
    let s = start(TrackMode::Blind, 8).await;
    let simple = s
        .client
        .post(format!("{}/reset", s.base))
        .header("origin", "https://evil.example")
        .header("content-type", "text/plain")
        .body(r#"{"case_id": "CASE-A-001"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(simple.status(), 403);
    let v: Value = simple.json().await.unwrap();
    assert_eq!(v["error"]["code"], "forbidden");
    let pre = s
        .client
        .request(reqwest::Method::OPTIONS, format!("{}/step", s.base))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 403);
    let plain = s
        .client
        .post(format!("{}/reset", s.base))
        .json(&json!({"case_id": "CASE-A-001"}))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 200);
    let h = plain.headers();
    assert!(h.get("access-control-allow-origin").is_none());
    for (name, value) in [
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("cache-control", "no-store"),
        ("referrer-policy", "no-referrer"),
    ] {
        assert_eq!(h[name], value, "{name}");
    }
    let foreign_host = s
        .client
        .get(format!("{}/health", s.base))
        .header("host", "rebind.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(
        foreign_host.status(),
        403,
        "a loopback server refuses a foreign Host (DNS rebinding)"
    );

    let listed = ls_server::SecurityConfig {
        cors_origins: vec!["https://app.example".into()],
        ..Default::default()
    };
    let s = start_with(TrackMode::Blind, 8, listed).await;
    let pre = s
        .client
        .request(reqwest::Method::OPTIONS, format!("{}/step", s.base))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(pre.status(), 204);
    assert!(pre.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .contains("x-session-id"));
    let reply = s
        .client
        .post(format!("{}/reset", s.base))
        .header("origin", "https://app.example")
        .json(&json!({"case_id": "CASE-A-001"}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(
        reply.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    assert_eq!(reply.headers()["vary"], "Origin");
}

/// `DELETE /session` frees a slot at once; reads of an unknown session create nothing; the
/// default session is reserved outside the named capacity; error replies quote a prefix only.
#[tokio::test]
async fn session_lifetime_and_bounded_replies() {
    let s = start(TrackMode::Blind, 1).await;
    s.ok("/reset", Some("only"), json!({"case_id": "CASE-A-001"}))
        .await;
    for i in 0..20 {
        let r = s
            .client
            .get(format!("{}/institutional-memory", s.base))
            .header("x-session-id", format!("reader-{i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let (status, v) = reset_from(&s, "127.0.0.2", "second").await;
    assert_eq!(
        status, 503,
        "reads created no sessions, so capacity is still taken by 'only' alone: {v}"
    );
    s.ok("/reset", None, json!({"case_id": "CASE-A-001"})).await;
    let del = s
        .client
        .delete(format!("{}/session", s.base))
        .header("x-session-id", "only")
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 200);
    s.ok("/reset", Some("second"), json!({"case_id": "CASE-A-001"}))
        .await;
    let again = s
        .client
        .delete(format!("{}/session", s.base))
        .header("x-session-id", "only")
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
    let (status, v) = s
        .post(
            "/step",
            Some("only"),
            json!({"action_type": "ocr", "payload": {}}),
        )
        .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (404, Some("unknown_session"))
    );

    let huge = format!(r#"{{"case_id": "{}"}}"#, "x".repeat(400_000));
    let (status, v) = s
        .post_raw("/reset", Some("second"), huge.into_bytes())
        .await;
    assert!((400..500).contains(&status), "{status}");
    assert!(
        v.to_string().len() < 2_000,
        "reply quotes only a prefix: {} bytes",
        v.to_string().len()
    );
    let long_path = format!("{}/{}", s.base, "p".repeat(60_000));
    let r = s.client.get(long_path).send().await.unwrap();
    let body = r.bytes().await.unwrap();
    assert!(
        body.len() < 2_000,
        "404 for a 60 KB path is {} bytes",
        body.len()
    );
}

/// Operator routes need the key from every address: with none configured they answer no one
/// (loopback included); with one, only a request carrying it.
#[tokio::test]
async fn institutional_reset_is_an_operator_route() {
    let s = start(TrackMode::Blind, 8).await;
    let r = s
        .client
        .post(format!("{}/institutional-reset", s.base))
        .header("x-session-id", "op")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "loopback is no operator");
    let keyed = ls_server::SecurityConfig {
        admin_api_key: Some("k3y".into()),
        ..Default::default()
    };
    let s = start_with(TrackMode::Blind, 8, keyed).await;
    let r = s
        .client
        .post(format!("{}/institutional-reset", s.base))
        .header("x-session-id", "op")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = s
        .client
        .post(format!("{}/institutional-reset", s.base))
        .header("x-session-id", "op")
        .header("x-api-key", "k3y")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
