//! The README's snippets and reference-style clients, played as written against the real
//! router on an ephemeral port: only 2xx replies, guarded campaign scores, reference shapes,
//! and held-out ground truth that stays hidden.

use std::collections::BTreeMap;

use audit_env::data;
use audit_env::model::{TaskId, WorldRules, HELD_OUT_SEEDS};
use ls_server::audit::AuditConfig;
use ls_server::ServerConfig;
use serde::Deserialize;
use serde_json::{json, Value};

/// The servers have an operator key; the reference flows never need it (every audit route the
/// reference client calls is agent-facing).
async fn spawn(cfg: AuditConfig) -> String {
    let mut server = ServerConfig::default();
    server.security.admin_api_key = Some("ref-operator".into());
    let shutdown = ls_server::Shutdown::new();
    let app = ls_server::audit::router(cfg, &server, &shutdown);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("http://{addr}")
}

/// Every reply of a flow, so a test can assert that none was an error.
#[derive(Default)]
struct Log {
    statuses: Vec<(String, u16, Value)>,
}

impl Log {
    async fn post(&mut self, c: &reqwest::Client, url: &str, body: Value) -> Value {
        let r = c.post(url).json(&body).send().await.unwrap();
        let s = r.status().as_u16();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        self.statuses.push((url.to_string(), s, v.clone()));
        v
    }

    async fn get(&mut self, c: &reqwest::Client, url: &str) -> Value {
        self.get_with(c.get(url)).await
    }

    /// As [`Log::get`], as the operator (the key `spawn` configures).
    async fn get_as_operator(&mut self, c: &reqwest::Client, url: &str) -> Value {
        self.get_with(c.get(url).header("X-API-Key", "ref-operator"))
            .await
    }

    async fn get_with(&mut self, req: reqwest::RequestBuilder) -> Value {
        let r = req.send().await.unwrap();
        let url = r.url().to_string();
        let s = r.status().as_u16();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        self.statuses.push((url, s, v.clone()));
        v
    }

    fn assert_all_2xx(&self) {
        let bad: Vec<String> = self
            .statuses
            .iter()
            .filter(|(_, s, _)| !(200..300).contains(s))
            .map(|(u, s, v)| format!("{s} {u}: {v}"))
            .collect();
        assert!(
            bad.is_empty(),
            "{} of {} replies were not 2xx:\n{}",
            bad.len(),
            self.statuses.len(),
            bad.join("\n")
        );
    }
}

/// The reference's `AuditObservation` with extra fields forbidden, as its typed OpenEnv
/// client declares it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ReferenceObservation {
    done: bool,
    reward: Option<f64>,
    metadata: BTreeMap<String, Value>,
    task_id: String,
    task_description: String,
    documents: Value,
    findings_so_far: Vec<Value>,
    feedback: String,
    step_number: u32,
    max_steps: u32,
    investigation_mode: bool,
    available_categories: Vec<String>,
    data_summary: Value,
}

#[tokio::test]
async fn readme_round1_and_round2_snippets_run_as_written() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let mut log = Log::default();
    // Round 1 — single task
    let ep = log
        .post(
            &c,
            &format!("{base}/reset"),
            json!({"task_id": 1, "seed": 42}),
        )
        .await;
    assert_eq!(
        ep["observation"]["documents"]["expenses"]
            .as_array()
            .unwrap()
            .len(),
        19
    );
    let findings =
        json!([{"document_id": "EXP-001", "error_type": "weekend_expense", "confidence": 0.9}]);
    let r = log
        .post(
            &c,
            &format!("{base}/step"),
            json!({"findings": findings, "submit_final": true}),
        )
        .await;
    assert!(
        r["grader"]["partial_credit_f1"].is_f64() && r["reward"].is_f64(),
        "{r}"
    );
    // Round 2 — full 5-period campaign
    let started = log
        .post(
            &c,
            &format!("{base}/campaign/start"),
            json!({"seed": 42, "total_periods": 5}),
        )
        .await;
    let cid = started["campaign_id"].as_str().unwrap().to_string();
    assert_eq!(
        started["observation"]["period_observation"]["documents"]["expenses"]
            .as_array()
            .map(Vec::len),
        Some(19),
        "the period's documents come with /campaign/start"
    );
    for p in 1..=5 {
        for role in ["expense", "invoice", "gst", "fraud"] {
            log.post(
                &c,
                &format!("{base}/campaign/task/start"),
                json!({"campaign_id": cid, "role": role}),
            )
            .await;
            let r = log
                .post(
                    &c,
                    &format!("{base}/campaign/task/submit"),
                    json!({"campaign_id": cid, "role": role, "findings": []}),
                )
                .await;
            assert_eq!(
                (r["done"].as_bool(), r["deferred"].as_bool()),
                (Some(true), Some(false)),
                "period {p} {role}: {r}"
            );
        }
        let rv = log
            .post(
                &c,
                &format!("{base}/overseer/review"),
                json!({"campaign_id": cid}),
            )
            .await;
        assert_eq!(rv["status"], "reviewed", "period {p}");
        let adv = log
            .post(
                &c,
                &format!("{base}/campaign/period/advance"),
                json!({"campaign_id": cid}),
            )
            .await;
        assert_eq!(
            adv["period_score"]["warnings"]
                .as_array()
                .map(|w| w.iter().any(|x| x.as_str().unwrap().contains("overseer"))),
            Some(false),
            "the review counted: {adv}"
        );
        if p < 5 {
            assert!(
                adv["observation"]["period_observation"]["documents"]["expenses"].is_array(),
                "the next period's documents come with the advance"
            );
        }
    }
    let st = log.get(&c, &format!("{base}/campaign/state/{cid}")).await;
    log.assert_all_2xx();
    assert_eq!(log.statuses.len(), 2 + 1 + 5 * 10 + 1);
    // Empty specialists: the specialist floor guards the score.
    assert_eq!(st["score"], 0.01);
    let periods = st["state"]["period_scores"].as_array().unwrap();
    assert_eq!(periods.len(), 5);
    assert!(periods
        .iter()
        .all(|p| p["score"]["specialist_floor_triggered"] == true));
    // Every shock fired in its period, changed the ground truth of work not yet submitted.
    let shocks = st["state"]["regulatory_shocks_applied"].as_array().unwrap();
    let ids: Vec<&str> = shocks.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["REG-001", "REG-002", "REG-003"]);
    assert!(
        shocks
            .iter()
            .all(|s| s["ground_truth_items_added"].as_u64().unwrap() > 0),
        "{shocks:?}"
    );
}

/// A client that submits once per role, with findings, in the README order: no dependency
/// error, every shock notice reaches the task it changes, and the score is guarded.
#[tokio::test]
async fn once_per_role_client_never_hits_a_dependency_error() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let mut log = Log::default();
    let cid = log
        .post(&c, &format!("{base}/campaign/start"), json!({"seed": 44}))
        .await["campaign_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut notices: BTreeMap<(u32, String), Vec<String>> = BTreeMap::new();
    for p in 1..=5u32 {
        for role in [
            "expense_specialist",
            "invoice_specialist",
            "gst_specialist",
            "fraud_specialist",
        ] {
            let st = log
                .post(
                    &c,
                    &format!("{base}/campaign/task/start"),
                    json!({"campaign_id": cid, "role": role}),
                )
                .await;
            let obs = &st["observation"]["period_observation"];
            let typed: ReferenceObservation =
                serde_json::from_value(obs.clone()).unwrap_or_else(|e| panic!("typed client: {e}"));
            let types = typed.metadata["valid_error_types"]
                .as_array()
                .unwrap()
                .clone();
            let n: Vec<String> = typed.metadata["notices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_string())
                .collect();
            notices.insert((p, role.to_string()), n);
            // Flag the first three documents of the first list with the first type.
            let docs = typed.documents.as_object().unwrap();
            let first = docs.values().find_map(|v| v.as_array()).unwrap();
            let findings: Vec<Value> = first
                .iter()
                .take(3)
                .filter_map(|d| {
                    d.as_object()?
                        .iter()
                        .find(|(k, _)| k.ends_with("_id") || *k == "invoice_no")
                        .map(|(_, v)| v.clone())
                })
                .map(|id| json!({"document_id": id, "error_type": types[0], "confidence": 0.5}))
                .collect();
            let r = log
                .post(
                    &c,
                    &format!("{base}/campaign/task/submit"),
                    json!({"campaign_id": cid, "role": role, "action": {"findings": findings}}),
                )
                .await;
            assert_eq!(r["done"], true, "{r}");
        }
        log.post(
            &c,
            &format!("{base}/overseer/review"),
            json!({"campaign_id": cid, "action": {"decisions": []}}),
        )
        .await;
        log.post(
            &c,
            &format!("{base}/campaign/period/advance"),
            json!({"campaign_id": cid}),
        )
        .await;
    }
    log.assert_all_2xx();
    assert!(!log
        .statuses
        .iter()
        .any(|(_, _, v)| v.to_string().contains("Dependency violation")));
    let has = |p: u32, role: &str, id: &str| {
        notices[&(p, role.to_string())]
            .iter()
            .any(|n| n.contains(id))
    };
    assert!(has(3, "gst_specialist", "REG-001") && !has(3, "expense_specialist", "REG-001"));
    assert!(has(4, "fraud_specialist", "REG-002") && has(4, "fraud_specialist", "REG-003"));
    let st = log.get(&c, &format!("{base}/campaign/state/{cid}")).await;
    let score = st["score"].as_f64().unwrap();
    assert!((0.01..=0.99).contains(&score), "{score}");
}

#[tokio::test]
async fn overseer_decisions_are_judged_one_by_one() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let mut log = Log::default();
    let cid = log
        .post(
            &c,
            &format!("{base}/campaign/start"),
            json!({"seed": 42, "total_periods": 2}),
        )
        .await["campaign_id"]
        .as_str()
        .unwrap()
        .to_string();
    let gt = data::generate(TaskId::ExpenseAudit, 42, &WorldRules::default()).ground_truth;
    let real = json!({"document_id": gt[0].document_id, "error_type": gt[0].error_type.as_str()});
    for role in ["expense", "invoice", "gst", "fraud"] {
        let f = if role == "expense" {
            json!([real])
        } else {
            json!([])
        };
        log.post(
            &c,
            &format!("{base}/campaign/task/submit"),
            json!({"campaign_id": cid, "role": role, "findings": f}),
        )
        .await;
    }
    let good = format!("{}:{}", gt[0].document_id, gt[0].error_type.as_str());
    let body = json!({"campaign_id": cid, "action": {"decisions": [
        {"finding_ref": good, "verdict": "approve"},
        {"finding_ref": "EXP-999:invented_type", "verdict": "reject"},
        {"finding_ref": good, "verdict": "maybe"},
    ]}});
    let r = log.post(&c, &format!("{base}/overseer/review"), body).await;
    log.assert_all_2xx();
    let res = &r["result"];
    assert_eq!(
        (
            res["accepted"].as_u64(),
            res["rejected"].as_u64(),
            res["invalid_decisions"].as_u64()
        ),
        (Some(1), Some(0), Some(2)),
        "{res}"
    );
    let d = res["decisions"].as_array().unwrap();
    assert_eq!(d[0]["matched"], true);
    assert!(d[0]["error"].is_null());
    assert!(d[1]["error"]
        .as_str()
        .unwrap()
        .contains("EXP-999:invented_type"));
    assert!(d[2]["error"].as_str().unwrap().contains("verdict"));
}

#[tokio::test]
async fn advancing_without_an_accepted_review_says_so() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let mut log = Log::default();
    let cid = log
        .post(
            &c,
            &format!("{base}/campaign/start"),
            json!({"seed": 42, "total_periods": 2}),
        )
        .await["campaign_id"]
        .as_str()
        .unwrap()
        .to_string();
    log.post(
        &c,
        &format!("{base}/campaign/task/submit"),
        json!({"campaign_id": cid, "role": "expense", "findings": []}),
    )
    .await;
    // Refused: three specialists have not finished.
    let r = c
        .post(format!("{base}/overseer/review"))
        .json(&json!({"campaign_id": cid}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let adv = log
        .post(
            &c,
            &format!("{base}/campaign/period/advance"),
            json!({"campaign_id": cid}),
        )
        .await;
    log.assert_all_2xx();
    let w: Vec<&str> = adv["period_score"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(
        w.iter().any(|x| x.contains("no accepted overseer review")),
        "{w:?}"
    );
}

#[tokio::test]
async fn typed_reference_client_resets_and_steps_and_shapes_match() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let mut log = Log::default();
    for task in [
        "expense_audit",
        "invoice_match",
        "gst_reconciliation",
        "fraud_detection",
    ] {
        let r = log
            .post(
                &c,
                &format!("{base}/reset"),
                json!({"task_id": task, "seed": 42}),
            )
            .await;
        let obs: ReferenceObservation = serde_json::from_value(r["observation"].clone())
            .unwrap_or_else(|e| panic!("{task} reset: {e}"));
        assert!(obs.metadata["valid_error_types"]
            .as_array()
            .is_some_and(|t| !t.is_empty()));
        if task == "gst_reconciliation" {
            assert!(obs.documents["context"]["itc_blocked_categories"]
                .as_array()
                .unwrap()
                .iter()
                .all(Value::is_string));
        }
        let r = log.post(&c, &format!("{base}/step"), json!({"action": {"findings": [{"document_id": "X-1", "error_type": "nope", "description": "d"}, {"document_id": "X-2", "error_type": obs.metadata["valid_error_types"][0], "description": "d"}]}})).await;
        let obs: ReferenceObservation = serde_json::from_value(r["observation"].clone())
            .unwrap_or_else(|e| panic!("{task} step: {e}"));
        // Nulls are kept in findings_so_far.
        let f = &obs.findings_so_far[0];
        for k in [
            "field",
            "suggested_fix",
            "confidence",
            "severity",
            "rationale",
        ] {
            assert!(f.get(k).is_some_and(Value::is_null), "{k} in {f}");
        }
    }
    let st = log.get(&c, &format!("{base}/state")).await;
    assert!(st["cumulative_score"].is_f64(), "{st}");
    let tasks = log.get(&c, &format!("{base}/tasks")).await;
    assert!(tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["action_schema"]["findings"].is_array()));
    assert_eq!(
        tasks["tasks"][0]["action_schema"]["max_findings_per_step"],
        200
    );
    let cs = log
        .post(&c, &format!("{base}/campaign/start"), json!({}))
        .await;
    let rates = &cs["observation"]["world_state"]["tax_rates"];
    assert_eq!(
        (
            rates["gst_standard"].as_f64(),
            rates["gst_reduced"].as_f64(),
            rates["gst_low"].as_f64()
        ),
        (Some(0.18), Some(0.12), Some(0.05))
    );
    // Leaderboard entries (whole runs on seeds the server draws) carry a timestamp.
    let run = log
        .post(
            &c,
            &format!("{base}/leaderboard/run"),
            json!({"task_id": "expense_audit"}),
        )
        .await;
    for seed in run["seeds"].as_array().unwrap() {
        log.post(
            &c,
            &format!("{base}/reset"),
            json!({"task_id": "expense_audit", "seed": seed}),
        )
        .await;
        log.post(
            &c,
            &format!("{base}/step"),
            json!({"findings": [], "submit_final": true}),
        )
        .await;
    }
    let l = log
        .post(&c, &format!("{base}/leaderboard?model=m1"), json!({}))
        .await;
    assert!(
        l["entry"]["timestamp"].as_f64().is_some_and(|t| t > 1.0e9),
        "{l}"
    );
    log.assert_all_2xx();
}

fn ids_of(task: TaskId, seed: u64) -> Vec<String> {
    data::generate(task, seed, &WorldRules::default())
        .ground_truth
        .iter()
        .map(|g| g.document_id.clone())
        .collect()
}

#[tokio::test]
async fn held_out_replies_never_name_a_missed_document() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let mut log = Log::default();
    for task in TaskId::ALL {
        for seed in HELD_OUT_SEEDS {
            let gt = ids_of(task, seed);
            let reset = log
                .post(
                    &c,
                    &format!("{base}/reset"),
                    json!({"task_id": task.as_str(), "seed": seed}),
                )
                .await;
            let fin = log
                .post(
                    &c,
                    &format!("{base}/step"),
                    json!({"findings": [], "submit_final": true}),
                )
                .await;
            let grader = log.get_as_operator(&c, &format!("{base}/grader")).await;
            let state = log.get(&c, &format!("{base}/state")).await;
            // The step reply carries no grade on a held-out seed (sealed); the evaluator (an
            // operator: the key, from any address) reads it, in counts.
            assert!(fin.get("grader").is_none(), "{fin}");
            assert_eq!(fin["info"]["grade_sealed"], true);
            assert_eq!(fin["info"]["reward_breakdown"]["outcome_hidden"], true);
            assert!(state["found_errors"].is_null() && state["cumulative_score"].is_null());
            assert_eq!(grader["status"], "completed");
            assert_eq!(grader["feedback_detail"], "counts");
            assert_eq!(
                grader["missed_by_type"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|v| v.as_u64().unwrap())
                    .sum::<u64>(),
                gt.len() as u64
            );
            assert!(reset["observation"]["documents"].is_object());
            for reply in [&fin, &grader, &state] {
                let text = reply.to_string();
                for id in &gt {
                    assert!(
                        !text.contains(&format!("\"{id}\"")) && !text.contains(&format!(" {id}")),
                        "{task} seed {seed}: {id} named in {text}"
                    );
                }
            }
        }
    }
    // Training seeds keep the detailed feedback.
    log.post(
        &c,
        &format!("{base}/reset"),
        json!({"task_id": "expense_audit", "seed": 42}),
    )
    .await;
    let fin = log
        .post(
            &c,
            &format!("{base}/step"),
            json!({"findings": [], "submit_final": true}),
        )
        .await;
    assert_eq!(fin["grader"]["feedback_detail"], "full");
    assert_eq!(
        fin["grader"]["missed_errors"].as_array().unwrap().len(),
        ids_of(TaskId::ExpenseAudit, 42).len()
    );
    // Campaign grades carry counts only.
    let cid = log
        .post(&c, &format!("{base}/campaign/start"), json!({"seed": 42}))
        .await["campaign_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = log
        .post(
            &c,
            &format!("{base}/campaign/task/submit"),
            json!({"campaign_id": cid, "role": "expense", "findings": []}),
        )
        .await;
    assert_eq!(r["grader"]["feedback_detail"], "counts");
    assert!(r["grader"]["missed_errors"].as_array().unwrap().is_empty());
    assert!(!r["observation"]["period_observation"]["feedback"]
        .as_str()
        .unwrap()
        .contains("Missed errors in"));
    log.assert_all_2xx();
}

#[tokio::test]
async fn twenty_made_up_findings_lower_the_step_reward() {
    let base = spawn(AuditConfig::default()).await;
    let c = reqwest::Client::new();
    let mut log = Log::default();
    for task in [TaskId::GstReconciliation, TaskId::FraudDetection] {
        let gt = data::generate(task, 42, &WorldRules::default()).ground_truth;
        let perfect: Vec<Value> = gt
            .iter()
            .map(|g| json!({"document_id": g.document_id, "error_type": g.error_type.as_str()}))
            .collect();
        let mut rewards = vec![];
        for extra in [0usize, 1, 20] {
            let mut f = perfect.clone();
            f.extend((0..extra).map(|i| json!({"document_id": format!("MADE-UP-{i:03}"), "error_type": task.error_types()[0].as_str()})));
            log.post(
                &c,
                &format!("{base}/reset"),
                json!({"task_id": task.as_str(), "seed": 42}),
            )
            .await;
            let r = log
                .post(
                    &c,
                    &format!("{base}/step"),
                    json!({"findings": f, "submit_final": true}),
                )
                .await;
            rewards.push(r["reward"].as_f64().unwrap());
        }
        assert!(
            rewards[0] > rewards[1] && rewards[1] > rewards[2],
            "{task}: {rewards:?}"
        );
        assert!(
            rewards[0] - rewards[2] >= 20.0 * 0.05 - 1e-9,
            "{task}: each made-up finding costs 0.05: {rewards:?}"
        );
    }
    log.assert_all_2xx();
}
