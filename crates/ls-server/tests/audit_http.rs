//! End-to-end tests against the real router on an ephemeral port.

use ls_server::audit::AuditConfig;
use ls_server::{SecurityConfig, ServerConfig};
use serde_json::{json, Value};

async fn spawn(cfg: AuditConfig) -> String {
    spawn_with(cfg, ServerConfig::default()).await
}

async fn spawn_with(cfg: AuditConfig, server: ServerConfig) -> String {
    let shutdown = ls_server::Shutdown::new();
    let app = ls_server::audit::router(cfg, &server, &shutdown);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("http://{addr}")
}

async fn post(c: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let r = c.post(url).json(&body).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn get(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = c.get(url).send().await.unwrap();
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn readme_round1_quickstart_and_task_play() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let (s, ep) = post(
        &c,
        &format!("{base}/reset"),
        json!({"task_id": 1, "seed": 42}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(ep["observation"]["task_id"], "expense_audit");
    assert_eq!(
        ep["observation"]["documents"]["expenses"]
            .as_array()
            .unwrap()
            .len(),
        19
    );
    let findings =
        json!([{"document_id": "EXP-001", "error_type": "weekend_expense", "confidence": 0.9}]);
    let (s, r) = post(
        &c,
        &format!("{base}/step"),
        json!({"findings": findings, "submit_final": true}),
    )
    .await;
    assert_eq!(s, 200);
    assert!(r["grader"]["partial_credit_f1"].as_f64().unwrap() >= 0.01);
    assert!(r["reward"].as_f64().is_some());
    // finished episodes stay finished
    let (s, e) = post(&c, &format!("{base}/step"), json!({"findings": []})).await;
    assert_eq!(s, 400);
    assert_eq!(e["error"]["code"], "episode_finished");
    let (s, g) = get(&c, &format!("{base}/grader")).await;
    assert_eq!((s, g["status"].as_str()), (200, Some("completed")));
    // reference style with the action wrapper, a separate session, every task
    for task in [
        "expense_audit",
        "invoice_match",
        "gst_reconciliation",
        "fraud_detection",
    ] {
        let r = c
            .post(format!("{base}/reset"))
            .header("X-Session-Id", "s1")
            .json(&json!({"task_id": task, "seed": 43}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let (s, r) = {
            let r = c
                .post(format!("{base}/step"))
                .header("X-Session-Id", "s1")
                .json(&json!({"action": {"findings": [], "submit_final": true}}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        };
        assert_eq!(s, 200);
        assert_eq!(r["done"], true);
        assert_eq!(r["grader"]["score"], 0.01);
    }
    let (_, h) = get(&c, &format!("{base}/health")).await;
    assert_eq!(h["active_sessions"], 2);
    let (_, t) = get(&c, &format!("{base}/tasks")).await;
    assert_eq!(t["total_tasks"], 4);
}

#[tokio::test]
async fn malformed_unknown_oversized_and_chunked_inputs() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let r = c
        .post(format!("{base}/reset"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_request");
    let (s, v) = post(&c, &format!("{base}/reset"), json!({"task_id": "nope"})).await;
    assert_eq!(s, 422);
    // Both environments: `detail` is the message; the audit field is in `error.field`.
    assert_eq!(v["error"]["field"], "task_id");
    assert_eq!(v["detail"], v["error"]["message"]);
    post(&c, &format!("{base}/reset"), json!({})).await;
    let (s, v) = post(
        &c,
        &format!("{base}/step"),
        json!({"findings": [{"document_id": 5, "error_type": "x"}]}),
    )
    .await;
    assert_eq!(s, 422);
    assert!(
        v["error"]["field"]
            .as_str()
            .unwrap()
            .contains("findings[0].document_id"),
        "{v}"
    );
    let (s, v) = post(&c, &format!("{base}/step"), json!({"findings": [{"document_id": "EXP-001", "error_type": "over_limit", "confidence": 3.0}]})).await;
    assert_eq!(s, 422);
    assert!(v["error"]["field"].as_str().unwrap().contains("confidence"));
    assert!(v["detail"].as_str().unwrap().contains("confidence"), "{v}");
    let (s, _) = post(
        &c,
        &format!("{base}/campaign/task/start"),
        json!({"campaign_id": "missing", "role": "expense"}),
    )
    .await;
    assert_eq!(s, 404);
    let (s, v) = get(&c, &format!("{base}/nowhere")).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (404, Some("route_not_found"))
    );
    // oversized with Content-Length
    let big = "x".repeat(1_100_000);
    let r = c
        .post(format!("{base}/reset"))
        .header("content-type", "application/json")
        .body(format!("{{\"episode_id\": \"{big}\"}}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    // oversized chunked (no Content-Length): enforced on the stream
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..40).map(|_| Ok(vec![b' '; 40_000])).collect();
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    let r = c
        .post(format!("{base}/step"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "body_too_large");
    // no lost state: the episode is still at step 0 and playable
    let (_, st) = get(&c, &format!("{base}/state")).await;
    assert_eq!(st["step_count"], 0);
    let r = c.get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.headers()["x-frame-options"], "DENY");
}

#[tokio::test]
async fn admin_key_and_rate_limit() {
    let security = SecurityConfig {
        admin_api_key: Some("sekrit".into()),
        client_rate_per_min: 50,
        session_rate_per_min: 1000,
        rate_limit_loopback: true,
        ..Default::default()
    };
    let base = spawn_with(
        AuditConfig::default(),
        ServerConfig {
            security,
            ..Default::default()
        },
    )
    .await;
    let c = reqwest::Client::new();
    // Campaigns are agent-facing (the README's loop): no key needed.
    let (s, _) = post(&c, &format!("{base}/campaign/start"), json!({})).await;
    assert_eq!(s, 200);
    // No address, loopback included, is an operator: the adversary override needs the key.
    let (s, v) = post(
        &c,
        &format!("{base}/reset"),
        json!({"task_id": "fraud_detection", "fraud_level": 2}),
    )
    .await;
    assert_eq!((s, v["error"]["code"].as_str()), (403, Some("forbidden")));
    let r = c
        .post(format!("{base}/reset"))
        .header("X-API-Key", "sekrit")
        .json(&json!({"task_id": "fraud_detection", "fraud_level": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // loopback throttled here on request (RATE_LIMIT_LOOPBACK): 50 per minute, then 429 with Retry-After
    let mut last = 0;
    for _ in 0..60 {
        last = c
            .post(format!("{base}/reset"))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        if last == 429 {
            break;
        }
    }
    assert_eq!(last, 429);
}

async fn submit(c: &reqwest::Client, base: &str, cid: &str, role: &str, findings: Value) -> Value {
    let (s, r) = post(
        c,
        &format!("{base}/campaign/task/submit"),
        json!({"campaign_id": cid, "role": role, "findings": findings}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        r["done"], true,
        "a campaign submit is final: shocks never defer it"
    );
    assert_eq!(r["deferred"], false);
    r
}

#[tokio::test]
async fn full_campaign_mutates_world_and_ground_truth() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let (s, v) = post(
        &c,
        &format!("{base}/campaign/start"),
        json!({"seed": 42, "total_periods": 5}),
    )
    .await;
    assert_eq!(s, 200);
    let cid = v["campaign_id"].as_str().unwrap().to_string();
    let (s, e) = post(
        &c,
        &format!("{base}/campaign/task/start"),
        json!({"campaign_id": cid, "role": "invoice"}),
    )
    .await;
    assert_eq!(s, 400);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Dependency violation"));
    let mut boundary_verdicts = vec![];
    let mut saw_rename = false;
    for p in 1..=5 {
        for role in ["expense", "invoice", "gst", "fraud"] {
            let (s, st) = post(
                &c,
                &format!("{base}/campaign/task/start"),
                json!({"campaign_id": cid, "role": role}),
            )
            .await;
            assert_eq!(s, 200, "{st}");
            let docs = &st["observation"]["period_observation"]["documents"];
            if role == "gst" {
                let row = &docs["purchase_register"][0];
                if p >= 3 {
                    assert!(
                        row.get("supplier_gstin").is_some() && row.get("vendor_gstin").is_none()
                    );
                    saw_rename = true;
                } else {
                    assert!(row.get("vendor_gstin").is_some());
                }
            }
            // The same kind of claim: a Meals claim between 1,500 and 2,000, flagged over_limit.
            let mut findings = json!([]);
            if role == "expense" {
                let claim = docs["expenses"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|e| {
                        let a = e["amount"].as_f64().unwrap();
                        e["category"] == "Meals" && a > 1500.0 && a <= 2000.0
                    })
                    .expect("boundary meal claim present")
                    .clone();
                findings =
                    json!([{"document_id": claim["expense_id"], "error_type": "over_limit"}]);
            }
            let r = submit(&c, &base, &cid, role, findings).await;
            if role == "expense" {
                boundary_verdicts.push(r["grader"]["true_positives"].as_u64().unwrap());
            }
        }
        let (s, _) = post(
            &c,
            &format!("{base}/overseer/review"),
            json!({"campaign_id": cid}),
        )
        .await;
        assert_eq!(s, 200);
        let (s, a) = post(
            &c,
            &format!("{base}/campaign/period/advance"),
            json!({"campaign_id": cid}),
        )
        .await;
        assert_eq!(s, 200);
        assert_eq!(a["status"], if p == 5 { "completed" } else { "advanced" });
    }
    // correct under the ₹1,500 limit in period 1, wrong after POL-007 raised it to ₹2,000
    assert_eq!(boundary_verdicts, vec![1, 0, 0, 0, 0]);
    assert!(saw_rename);
    let (s, st) = get(&c, &format!("{base}/campaign/state/{cid}")).await;
    assert_eq!(s, 200);
    assert!(st["score"].as_f64().is_some());
    assert_eq!(st["state"]["period_scores"].as_array().unwrap().len(), 5);
    let shocks: Vec<&str> = st["state"]["regulatory_shocks_applied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(shocks, vec!["REG-001", "REG-002", "REG-003"]);
    assert_eq!(st["state"]["world_state"]["meal_limit_inr"], 2000);
    let (s, rep) = get(&c, &format!("{base}/overseer/report?campaign_id={cid}")).await;
    assert_eq!(s, 200);
    assert_eq!(rep["reviews"].as_object().unwrap().len(), 5);
    let (s, si) = post(
        &c,
        &format!("{base}/self-improve"),
        json!({"campaign_id": cid, "train_seeds": [42, 43], "held_out_seeds": [100]}),
    )
    .await;
    assert_eq!(s, 200);
    assert!(si["summary"]["accepted"].is_boolean());
    let (s, _) = post(
        &c,
        &format!("{base}/self-improve"),
        json!({"campaign_id": cid, "train_seeds": [42], "held_out_seeds": [42]}),
    )
    .await;
    assert_eq!(s, 422);
}

#[tokio::test]
async fn readme_campaign_quickstart_runs_as_written() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let cid = post(
        &c,
        &format!("{base}/campaign/start"),
        json!({"seed": 42, "total_periods": 5}),
    )
    .await
    .1["campaign_id"]
        .as_str()
        .unwrap()
        .to_string();
    for p in 1..=5 {
        let mut all_done = true;
        for role in ["expense", "invoice", "gst", "fraud"] {
            c.post(format!("{base}/campaign/task/start"))
                .json(&json!({"campaign_id": cid, "role": role}))
                .send()
                .await
                .unwrap();
            let (s, r) = post(
                &c,
                &format!("{base}/campaign/task/submit"),
                json!({"campaign_id": cid, "role": role, "findings": []}),
            )
            .await;
            all_done &= s == 200 && r["done"] == true;
        }
        // One submit per role finishes every specialist, shocks included (they fire between
        // submits and apply to the remaining work), so the review is accepted every period.
        assert!(all_done, "period {p}");
        let (s, r) = post(
            &c,
            &format!("{base}/overseer/review"),
            json!({"campaign_id": cid}),
        )
        .await;
        assert_eq!(s, 200, "period {p}: {r}");
        c.post(format!("{base}/campaign/period/advance"))
            .json(&json!({"campaign_id": cid}))
            .send()
            .await
            .unwrap();
    }
    let st = get(&c, &format!("{base}/campaign/state/{cid}")).await.1;
    // empty specialists trip the specialist floor
    assert_eq!(st["score"], 0.01);
    let (s, b) = post(&c, &format!("{base}/baseline"), json!({})).await;
    assert_eq!(s, 200);
    assert!(b["scores"]["average_score"].as_f64().unwrap() > 0.2);
    // The leaderboard takes whole runs scored by the grader, never a client's score nor a
    // single episode (tests/audit_oracle.rs plays the runs).
    post(
        &c,
        &format!("{base}/reset"),
        json!({"task_id": "expense_audit"}),
    )
    .await;
    post(
        &c,
        &format!("{base}/step"),
        json!({"findings": [], "submit_final": true}),
    )
    .await;
    let (s, l) = post(
        &c,
        &format!("{base}/leaderboard?model=m1&score=0.99"),
        json!({}),
    )
    .await;
    assert_eq!(s, 409, "{l}");
    assert!(l.get("entry").is_none(), "{l}");
    let (_, lb) = get(&c, &format!("{base}/leaderboard")).await;
    assert_eq!(lb["total_entries"], 0);
}

#[tokio::test]
async fn overseer_review_before_every_specialist_finishes_is_409() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let (s, v) = post(
        &c,
        &format!("{base}/campaign/start"),
        json!({"seed": 43, "total_periods": 2}),
    )
    .await;
    assert_eq!(s, 200);
    let cid = v["campaign_id"].as_str().unwrap().to_string();
    let review = json!({"campaign_id": cid, "action": {"decisions": []}});
    let (s, e) = post(&c, &format!("{base}/overseer/review"), review.clone()).await;
    assert_eq!(s, 409, "{e}");
    assert_eq!(e["error"]["code"], "dependency_violation");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.starts_with("Dependency violation: 'overseer' requires 'expense_specialist', 'invoice_specialist', 'gst_specialist', 'fraud_specialist' completed first"), "{msg}");
    for (k, role) in ["expense", "invoice", "gst", "fraud"]
        .into_iter()
        .enumerate()
    {
        submit(&c, &base, &cid, role, json!([])).await;
        let (s, e) = post(&c, &format!("{base}/overseer/review"), review.clone()).await;
        if k < 3 {
            assert_eq!(s, 409, "{e}");
            let msg = e["error"]["message"].as_str().unwrap();
            assert!(!msg.contains(&format!("'{role}_specialist'")), "{msg}");
            assert!(msg.contains("'fraud_specialist'"), "{msg}");
        } else {
            assert_eq!(s, 200, "{e}");
            assert_eq!(e["status"], "reviewed");
            assert_eq!(e["result"]["all_specialists_complete"], true);
        }
    }
    // Nothing was stored by the refused reviews: one review for period 1.
    let (_, rep) = get(&c, &format!("{base}/overseer/report?campaign_id={cid}")).await;
    assert_eq!(rep["reviews"].as_object().unwrap().len(), 1);
    // Period 2 starts over.
    let (s, _) = post(
        &c,
        &format!("{base}/campaign/period/advance"),
        json!({"campaign_id": cid}),
    )
    .await;
    assert_eq!(s, 200);
    let (s, e) = post(&c, &format!("{base}/overseer/review"), review).await;
    assert_eq!(s, 409, "{e}");
}

/// Two fresh servers hand out different session, campaign and episode ids, and a guessed id
/// names nothing.
#[tokio::test]
async fn ids_are_unguessable_across_servers() {
    let c = reqwest::Client::new();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let base = spawn(AuditConfig::default()).await;
        let (_, s) = post(&c, &format!("{base}/session"), json!({})).await;
        let (_, cmp) = post(&c, &format!("{base}/campaign/start"), json!({"seed": 42})).await;
        let (_, ep) = post(
            &c,
            &format!("{base}/reset"),
            json!({"task_id": "expense_audit", "seed": 42}),
        )
        .await;
        let ids = (
            s["session_id"].as_str().unwrap().to_owned(),
            cmp["campaign_id"].as_str().unwrap().to_owned(),
            ep["observation"]["metadata"]["episode_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        assert!(
            ids.0.len() >= 30 && ids.1.len() >= 20 && ids.2.len() >= 20,
            "{ids:?}"
        );
        seen.push((base, ids));
    }
    let (a, b) = (&seen[0].1, &seen[1].1);
    assert!(a.0 != b.0 && a.1 != b.1 && a.2 != b.2, "{a:?} vs {b:?}");
    // The first server's session is unknown to the second.
    let r = c
        .get(format!("{}/state", seen[1].0))
        .header("x-session-id", &a.0)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// One session store: a session reset over HTTP is the one `/mcp` `tools/call` plays; `DELETE
/// /session` closes it for both; an audit error keeps its own code over MCP.
#[tokio::test]
async fn http_and_mcp_share_sessions_and_delete_closes() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let (_, s) = post(&c, &format!("{base}/session"), json!({})).await;
    let sid = s["session_id"].as_str().unwrap().to_owned();
    let r = c
        .post(format!("{base}/reset"))
        .header("x-session-id", &sid)
        .json(&json!({"task_id": "expense_audit", "seed": 42}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let call = |final_: bool| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"session_id": sid, "name": if final_ { "submit_final" } else { "submit_findings" }, "arguments": {"findings": []}}});
    let (_, v) = post(&c, &format!("{base}/mcp"), call(true)).await;
    assert!(
        v.get("result").is_some(),
        "the HTTP session is known to /mcp: {v}"
    );
    let (_, v) = post(&c, &format!("{base}/mcp"), call(false)).await;
    assert_eq!(v["error"]["data"]["code"], "episode_finished", "{v}");
    let r = c
        .delete(format!("{base}/session"))
        .header("x-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, v) = post(&c, &format!("{base}/mcp"), call(false)).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown session_id"),
        "{v}"
    );
    let r = c
        .get(format!("{base}/state"))
        .header("x-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// `--max-sessions` applies to the audit environment: at capacity a client's own least
/// recently used session makes room for its new one (nobody is refused while the client holds
/// one), and closing a session frees its slot.
#[tokio::test]
async fn audit_honours_max_sessions() {
    let base = spawn_with(
        AuditConfig::default(),
        ServerConfig {
            max_sessions: 2,
            ..Default::default()
        },
    )
    .await;
    let c = reqwest::Client::new();
    let state_of = |sid: String| {
        let c = c.clone();
        let url = format!("{base}/state");
        async move {
            c.get(url)
                .header("x-session-id", sid)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let id = |v: &Value| v["session_id"].as_str().unwrap().to_owned();
    let (_, a) = post(&c, &format!("{base}/session"), json!({})).await;
    let (s2, b) = post(&c, &format!("{base}/session"), json!({})).await;
    let (s3, third) = post(&c, &format!("{base}/session"), json!({})).await;
    assert_eq!((s2, s3), (200, 200), "{third}");
    assert_eq!(state_of(id(&a)).await, 404, "the oldest session made room");
    assert_ne!(state_of(id(&third)).await, 404);
    let (s, _) = post(
        &c,
        &format!("{base}/reset"),
        json!({"task_id": "expense_audit"}),
    )
    .await;
    assert_eq!(
        s, 200,
        "the default session is reserved outside the capacity"
    );
    let r = c
        .delete(format!("{base}/session"))
        .header("x-session-id", id(&b))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (s4, _) = post(&c, &format!("{base}/session"), json!({})).await;
    assert_eq!(s4, 200);
    assert_ne!(
        state_of(id(&third)).await,
        404,
        "a free slot evicts nothing"
    );
}

/// A held-out episode's grade is sealed: the step replies and `/state` say nothing about which
/// findings are true, and `/grader` hands the grade to the operator (the key) only.
#[tokio::test]
async fn held_out_grade_is_sealed_except_for_the_operator() {
    let c = reqwest::Client::new();
    let security = SecurityConfig {
        admin_api_key: Some("k".into()),
        ..Default::default()
    };
    let keyed = spawn_with(
        AuditConfig::default(),
        ServerConfig {
            security,
            ..Default::default()
        },
    )
    .await;
    let seed = 100u64;
    let gt = audit_env::data::generate(
        audit_env::model::TaskId::InvoiceMatch,
        seed,
        &audit_env::model::WorldRules::default(),
    )
    .ground_truth;
    let truth: Vec<Value> = gt
        .iter()
        .map(|g| json!({"document_id": g.document_id, "error_type": g.error_type.as_str()}))
        .collect();
    let (s, _) = post(
        &c,
        &format!("{keyed}/reset"),
        json!({"task_id": "invoice_match", "seed": seed}),
    )
    .await;
    assert_eq!(s, 200);
    let (_, mid) = post(
        &c,
        &format!("{keyed}/step"),
        json!({"findings": truth[..3], "submit_final": false}),
    )
    .await;
    let rb = &mid["info"]["reward_breakdown"];
    assert_eq!(rb["outcome_hidden"], true, "{mid}");
    assert_eq!(rb["true_positive_reward"], 0.0);
    assert_eq!(mid["reward"], rb["step_penalty"]);
    assert!(!mid["observation"]["feedback"]
        .as_str()
        .unwrap()
        .contains("TP:"));
    let (_, state) = get(&c, &format!("{keyed}/state")).await;
    assert!(
        state["found_errors"].is_null() && state["cumulative_score"].is_null(),
        "{state}"
    );
    let (_, fin) = post(
        &c,
        &format!("{keyed}/step"),
        json!({"findings": truth[3..], "submit_final": true}),
    )
    .await;
    assert!(
        fin["done"].as_bool().unwrap() && fin.get("grader").is_none(),
        "{fin}"
    );
    assert_eq!(fin["info"]["grade_sealed"], true);
    let (s, sealed) = get(&c, &format!("{keyed}/grader")).await;
    assert_eq!(
        (s, sealed["status"].as_str()),
        (200, Some("sealed")),
        "{sealed}"
    );
    assert!(sealed.get("score").is_none());
    let r = c
        .get(format!("{keyed}/grader"))
        .header("X-API-Key", "k")
        .send()
        .await
        .unwrap();
    let g: Value = r.json().await.unwrap();
    assert_eq!(g["status"], "completed");
    assert!(g["score"].as_f64().unwrap() >= 0.95, "{g}");
    assert_eq!(g["feedback_detail"], "counts");
}

/// `fraud_level` on a reset overrides the adaptive adversary: it needs the operator key, from
/// loopback too (with no key configured no one may use it).
#[tokio::test]
async fn adversary_override_is_an_operator_action() {
    let c = reqwest::Client::new();
    let open = spawn(AuditConfig::default()).await;
    let (s, _) = post(
        &c,
        &format!("{open}/reset"),
        json!({"task_id": "fraud_detection", "fraud_level": 3}),
    )
    .await;
    assert_eq!(s, 403);
    let security = SecurityConfig {
        admin_api_key: Some("k".into()),
        ..Default::default()
    };
    let keyed = spawn_with(
        AuditConfig::default(),
        ServerConfig {
            security,
            ..Default::default()
        },
    )
    .await;
    let (s, v) = post(
        &c,
        &format!("{keyed}/reset"),
        json!({"task_id": "fraud_detection", "fraud_level": 3}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{v}"
    );
    let (s, _) = post(
        &c,
        &format!("{keyed}/reset"),
        json!({"task_id": "fraud_detection"}),
    )
    .await;
    assert_eq!(s, 200, "a plain reset needs no key");
    let r = c
        .post(format!("{keyed}/reset"))
        .header("x-api-key", "k")
        .json(&json!({"task_id": "fraud_detection", "fraud_level": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
