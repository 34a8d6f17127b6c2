//! Report-backed endpoints on the real router: honest fallbacks without a report, and the
//! leaderboard and report surviving a server restart on the same database file.

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig};
use ls_product::ReportStore;
use ls_report::{build_report, leaderboard_entries, LsGen, ReportConfig};
use ls_store::{LeaderboardRow, Store};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

async fn spawn(db: PathBuf) -> (String, tokio::task::JoinHandle<()>) {
    let pool = CasePool::new(FixtureSet::embedded().expect("embedded fixtures"));
    let mut server = ls_server::ServerConfig {
        max_sessions: 64,
        session_idle: Duration::from_secs(600),
        ..Default::default()
    };
    server.security.admin_api_key = Some(OP_KEY.into());
    let shutdown = ls_server::Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig::default(), &server, &shutdown);
    let app = ls_product::app(state, ReportStore::at(db));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let h = tokio::spawn(async move {
        ls_server::serve(listener, app, server.timeouts, shutdown)
            .await
            .unwrap();
    });
    (format!("http://{addr}"), h)
}

const OP_KEY: &str = "op-key";

/// A GET with the operator key.
async fn get_op(base: &str, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .header("x-api-key", OP_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn get(base: &str, path: &str) -> Value {
    reqwest::get(format!("{base}{path}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn temp_db(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ls-server-reports-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("ledgershield.db")
}

#[tokio::test]
async fn without_a_report_endpoints_say_so() {
    let db = temp_db("empty");
    let (base, h) = spawn(db.clone()).await;
    let lb = get(&base, "/leaderboard").await;
    assert_eq!(lb["entries"], json!([]));
    assert!(lb["note"].as_str().unwrap().contains("ledgershield report"));
    let br = get(&base, "/benchmark-report").await;
    assert_eq!(br["generated_at"], Value::Null);
    assert_eq!(br["runtime_preview"], false);
    // An empty environment is never certified as high trust.
    let c = get(&base, "/certify-summary").await;
    assert_eq!(c["deployability_rating"], "advisory");
    assert_eq!(c["certification_status"], "conditional_fail");
    assert_eq!(c["product"], "LedgerShield Certify");
    let hb = get(&base, "/human-baseline-summary").await;
    assert_eq!(hb["available"], false);
    assert_eq!(hb["participants"], json!([]));
    let cs = get(&base, "/controlbench-summary").await;
    assert!(cs["note"]
        .as_str()
        .unwrap()
        .contains("live institutional memory"));
    let v = get(&base, "/controlbench-visualization").await;
    assert_eq!(v["sequence"]["deployability_rating"], "live_memory");
    // A wrong-typed certify body is a 4xx naming the field.
    let r = reqwest::Client::new()
        .post(format!("{base}/certify"))
        .json(&json!({"case_count": "many"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error());
    // Serving never created the database file.
    assert!(!db.exists());
    h.abort();
}

#[tokio::test]
async fn leaderboard_and_report_survive_a_restart() {
    let db = temp_db("restart");
    let set = FixtureSet::embedded().unwrap();
    let cfg = ReportConfig {
        holdout_seeds: vec![2026],
        controlbench_sequence_length: 12,
        agents: vec!["teacher".into(), "naive-pay".into()],
        generated_at: "2026-01-02T03:04:05Z".into(),
        headline_seeds: vec![2026],
        gaming: false,
        ..Default::default()
    };
    let report =
        tokio::task::spawn_blocking(move || build_report(&set, &LsGen { set: set.clone() }, &cfg))
            .await
            .unwrap();
    {
        let mut store = Store::open(&db).unwrap();
        store
            .save_report(
                "r1",
                &report.generated_at,
                &serde_json::to_value(&report).unwrap(),
            )
            .unwrap();
        for e in leaderboard_entries(&report) {
            store
                .upsert_leaderboard(&LeaderboardRow {
                    model: e.model.clone(),
                    agent_type: e.agent_type.clone(),
                    temperature: e.temperature,
                    pass_k: e.pass_k,
                    updated_at: e.updated_at.clone(),
                    entry: serde_json::to_value(&e).unwrap(),
                })
                .unwrap();
        }
    }
    let (base, h) = spawn(db.clone()).await;
    let first = get(&base, "/leaderboard").await;
    assert_eq!(first["entries"].as_array().unwrap().len(), 2);
    assert_eq!(
        first["entries"][0]["model"],
        "ledgershield/deterministic-baseline"
    );
    let c = reqwest::Client::new()
        .post(format!("{base}/certify"))
        .json(&json!({"agent_name": "my-agent", "workflow_name": "ap-eu"}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(c["agent_name"], "my-agent");
    assert_eq!(c["source"], "benchmark_report.controlbench_quarter");
    assert_eq!(c["red_team_plan"]["workflow_name"], "ap-eu");
    h.abort();
    let _ = h.await;

    // A fresh server process on the same file.
    let (base2, h2) = spawn(db).await;
    let second = get(&base2, "/leaderboard").await;
    assert_eq!(first["entries"], second["entries"]);
    let br = get(&base2, "/benchmark-report").await;
    assert_eq!(br["benchmark"], "ledgershield-controlbench-v1");
    assert_eq!(br["generated_at"], "2026-01-02T03:04:05Z");
    let q = get(&base2, "/controlbench-summary").await;
    assert_eq!(q["sequence_length"], 12);
    let v = get_op(&base2, "/controlbench-visualization").await;
    assert_eq!(v["source"], "benchmark_report");
    assert!(!v["charts"]["score_ladder"].as_array().unwrap().is_empty());
    assert!(!v["charts"]["authority_timeline"]
        .as_array()
        .unwrap()
        .is_empty());
    // Without the key the per-case timeline (decisions per case) is withheld.
    let public = get(&base2, "/controlbench-visualization").await;
    assert!(public["charts"].get("authority_timeline").is_none());
    assert!(public["per_case_withheld"].is_string());
    h2.abort();
}

#[tokio::test]
async fn teacher_plays_over_http_like_in_process() {
    let (base, h) = spawn(temp_db("http")).await;
    let (http_score, local_score) = tokio::task::spawn_blocking(move || {
        use ls_agents::{run_episode, HttpEnv, LocalEnv, Silent, TeacherAgent};
        let req = ls_env::ResetRequest {
            case_id: Some("CASE-D-001".into()),
            ..Default::default()
        };
        let mut client = HttpEnv::new(&base, "teacher-http", Duration::from_secs(30)).unwrap();
        let remote = run_episode(&mut TeacherAgent::new(), &mut client, &req, 1, &mut Silent);
        let pool = std::sync::Arc::new(CasePool::new(FixtureSet::embedded().unwrap()));
        let mut env = ls_env::Environment::new(pool, EnvConfig::default());
        let local = run_episode(
            &mut TeacherAgent::new(),
            &mut LocalEnv::new(&mut env),
            &req,
            1,
            &mut Silent,
        );
        assert!(remote.terminated, "{:?}", remote.errors);
        assert_eq!(remote.decision, "ESCALATE_FRAUD");
        (remote.final_score, local.final_score)
    })
    .await
    .unwrap();
    assert_eq!(http_score, local_score);
    assert!(http_score >= 0.85);
    h.abort();
}

fn stored_run(db: &std::path::Path) -> String {
    let mut store = Store::open(db).unwrap();
    let run_id = "run-teacher-7-test".to_owned();
    let record = json!({"case_id": "CASE-D-001", "agent": "teacher", "trajectory": [
        {"step": 1, "action_type": "ocr", "payload": {"doc_id": "INV-D-001"}, "reward": -0.01, "done": false, "success": true, "error": null}],
        "terminal_info": {"final_score": 0.9}});
    let run = ls_store::RunRow {
        run_id: run_id.clone(),
        kind: "run".into(),
        agent: "teacher".into(),
        model: "ledgershield/deterministic-baseline".into(),
        agent_type: "deterministic-policy".into(),
        seed: 7,
        created_at: "2026-01-01T00:00:00Z".into(),
        case_count: 1,
        mean_score: 0.9,
        summary: json!({"suite": "public", "mean_score": 0.9}),
    };
    let episode = ls_store::EpisodeRow {
        run_id: run_id.clone(),
        idx: 0,
        case_id: "CASE-D-001".into(),
        base_case_id: "CASE-D-001".into(),
        task_type: "task_d".into(),
        final_score: 0.9,
        result_class: "valid_success".into(),
        decision: "ESCALATE_FRAUD".into(),
        steps: 1,
        total_reward: -0.01,
        record,
    };
    store.save_run(&run, &[episode]).unwrap();
    run_id
}

#[tokio::test]
async fn stored_runs_are_listed_and_their_episodes_read() {
    let db = temp_db("runs");
    let (base, h) = spawn(db.clone()).await;
    // No store yet: an empty list that says why, and no file created.
    let empty = get_op(&base, "/runs").await;
    assert_eq!(empty["runs"], json!([]));
    assert!(empty["note"].as_str().unwrap().contains("ledgershield run"));
    assert!(!db.exists());
    h.abort();

    let run_id = stored_run(&db);
    let (base, h) = spawn(db).await;
    let runs = get_op(&base, "/runs?limit=5").await;
    assert_eq!(runs["runs"][0]["run_id"], run_id);
    assert_eq!(runs["runs"][0]["suite"], "public");
    assert_eq!(runs["runs"][0]["agent"], "teacher");
    let run = get_op(&base, &format!("/runs/{run_id}")).await;
    assert_eq!(run["episodes"][0]["case_id"], "CASE-D-001");
    assert!(
        run["episodes"][0].get("record").is_none(),
        "the episode list carries no trajectories"
    );
    let ep = get_op(&base, &format!("/runs/{run_id}/episodes/0")).await;
    // Without the key: 403, nothing of the run.
    let r = reqwest::get(format!("{base}/runs/{run_id}/episodes/0"))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert_eq!(ep["record"]["trajectory"][0]["action_type"], "ocr");
    assert_eq!(ep["episode"]["result_class"], "valid_success");
    // Failure paths: JSON errors naming the problem.
    for (path, status) in [
        ("/runs/nope".to_owned(), 404),
        (format!("/runs/{run_id}/episodes/9"), 404),
        (format!("/runs/{run_id}/episodes/x"), 422),
        ("/runs?limit=lots".to_owned(), 422),
    ] {
        let r = reqwest::Client::new()
            .get(format!("{base}{path}"))
            .header("x-api-key", OP_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        let body: Value = r.json().await.unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{path}"
        );
    }
    h.abort();
}

/// A report with holdouts and the quarter, and one stored run with a trajectory, in `db`.
fn store_report_and_run(db: &std::path::Path) {
    let set = FixtureSet::embedded().unwrap();
    let cfg = ReportConfig {
        holdout_seeds: vec![2026],
        controlbench_sequence_length: 12,
        agents: vec!["teacher".into(), "naive-pay".into()],
        generated_at: "2026-01-02T03:04:05Z".into(),
        headline_seeds: vec![2026],
        gaming: false,
        ..Default::default()
    };
    let report = build_report(&set, &LsGen { set: set.clone() }, &cfg);
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let mut store = Store::open(db).unwrap();
    store
        .save_report(
            "r-gold",
            &report.generated_at,
            &serde_json::to_value(&report).unwrap(),
        )
        .unwrap();
    drop(store);
    stored_run(db);
}

/// Every key of `v`, recursively.
fn keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                keys(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

const GOLD_KEYS: [&str; 9] = [
    "gold_decision",
    "unsafe_if_pay",
    "mechanism_family",
    "attack_family",
    "latent_mechanism",
    "gold_codes",
    "trajectory",
    "trajectories",
    "record",
];

/// Issue 27 item 6: no keyless GET route of the API reference reveals gold decisions, gold
/// codes, attack mechanisms or stored trajectories, with a stored report and run in the
/// database; with the operator key the per-case rows are there (so the walk checks real data).
#[tokio::test]
async fn no_keyless_get_route_reveals_gold() {
    let db = temp_db("gold");
    let path = db.clone();
    tokio::task::spawn_blocking(move || store_report_and_run(&path))
        .await
        .unwrap();
    let pool = CasePool::new(FixtureSet::embedded().expect("embedded fixtures"));
    let mut server = ls_server::ServerConfig::default();
    server.security.admin_api_key = Some("op-key".into());
    let shutdown = ls_server::Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig::default(), &server, &shutdown);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(ls_server::serve(
        listener,
        ls_product::app(state, ReportStore::at(db)),
        server.timeouts,
        shutdown,
    ));
    let http = reqwest::Client::new();
    // A session that has played an episode, so session-backed views have content.
    http.post(format!("{base}/reset"))
        .header("x-session-id", "walker")
        .json(&json!({"case_id": "CASE-D-001"}))
        .send()
        .await
        .unwrap();
    let doc = get(&base, "/openapi.json").await;
    let mut walked = 0;
    for (route, ops) in doc["paths"].as_object().unwrap() {
        let Some(op) = ops.get("get") else { continue };
        let mut url = route.clone();
        for p in op["parameters"].as_array().into_iter().flatten() {
            if p["in"] == "path" {
                let example = match &p["example"] {
                    Value::String(s) => s.clone(),
                    Value::Null => "x".into(),
                    other => other.to_string(),
                };
                url = url.replace(&format!("{{{}}}", p["name"].as_str().unwrap()), &example);
            }
        }
        // The WebSocket endpoint, and the documents that describe shapes (field names of types,
        // no data): the API reference and the OpenEnv schema.
        if matches!(url.as_str(), "/ws" | "/openapi.json" | "/schema") {
            continue;
        }
        let r = http
            .get(format!("{base}{url}"))
            .header("x-session-id", "walker")
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            // HTML pages (the workbench, /docs) embed no stored data.
            continue;
        };
        let mut found = vec![];
        keys(&v, &mut found);
        // `/state` is the caller's own live episode: its trajectory is the caller's own actions
        // (none yet after the reset), not a stored one.
        let own = |k: &str| url == "/state" && k == "trajectory" && v["trajectory"] == json!([]);
        let leaked: Vec<&String> = found
            .iter()
            .filter(|k| GOLD_KEYS.contains(&k.as_str()) || k.starts_with("gold"))
            .filter(|k| !own(k))
            .collect();
        assert!(
            leaked.is_empty(),
            "GET {url} without the key shows {leaked:?}"
        );
        walked += 1;
    }
    assert!(walked >= 12, "walked {walked} GET routes");
    // The operator sees the per-case rows (the data the public view withholds exists).
    let full: Value = http
        .get(format!("{base}/benchmark-report"))
        .header("x-api-key", "op-key")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut found = vec![];
    keys(&full, &mut found);
    assert!(found.iter().any(|k| k == "gold_decision"));
    let public = get(&base, "/benchmark-report").await;
    assert!(public["per_case_withheld"].is_string());
    assert!(
        public["generated_at"].is_string(),
        "aggregates remain public"
    );
}
