//! `ledgershield audit-llm` against a real audit server (`serve --env audit`) and a scripted
//! OpenAI-compatible endpoint: single tasks (held-out grades read with the operator key) and a
//! campaign over HTTP, the runs stored and ranked by `audit-leaderboard` beside `audit-baseline
//! --store`; a failing endpoint is an error with nothing stored, for `audit-llm` and for
//! `run --agent llm` alike.

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Server(Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const KEY: &str = "audit-llm-test-operator-key";

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ls-audit-llm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn audit_server() -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args(["serve", "--env", "audit", "--port", "0"])
        .env("ADMIN_API_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on"), "{line:?}");
    let addr = line.trim().rsplit("http://").next().unwrap().to_owned();
    (Server(child), format!("http://{addr}"))
}

/// Answers every chat request with one finding on `EXP-001` (a real expense claim id).
fn mock_endpoint() -> String {
    support::mock_chat(|_| {
        let content = r#"[{"document_id": "EXP-001", "error_type": "weekend_expense", "description": "scripted"}]"#;
        serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 20}})
        .to_string()
    })
}

fn ledgershield(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args(args)
        .env("ADMIN_API_KEY", KEY)
        .env_remove("OPENAI_API_KEY")
        .env_remove("LEDGERSHIELD_API_KEY")
        .env_remove("HF_TOKEN")
        .env_remove("API_BASE_URL")
        .env_remove("MODEL_NAME")
        .env_remove("LEDGERSHIELD_DB_PATH")
        .output()
        .unwrap()
}

fn stored(db: &std::path::Path) -> Vec<ls_store::RunRow> {
    ls_store::Store::open(db)
        .map(|s| s.list_runs(100).unwrap())
        .unwrap_or_default()
}

#[test]
fn audit_llm_plays_a_server_and_ranks_beside_the_baseline() {
    let (_server, url) = audit_server();
    let api = mock_endpoint();
    let dir = temp("ok");
    let db = dir.join("ls.db");
    let db = db.to_str().unwrap();
    let o = ledgershield(&[
        "audit-llm",
        "--api-base",
        &api,
        "--model",
        "scripted",
        "--url",
        &url,
        "--task",
        "expense_audit,invoice_match",
        "--seeds",
        "42,100",
        "--db",
        db,
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    let starts = stdout
        .lines()
        .filter(|l| l.starts_with("[START] task="))
        .count();
    let ends: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("[END] success="))
        .collect();
    assert_eq!((starts, ends.len()), (4, 4), "{stdout}");
    assert!(stdout.contains("[START] task=expense_audit env=financial_audit_env model=scripted"));
    assert!(stdout.contains("action=submit_1_findings"), "{stdout}");

    let runs = stored(std::path::Path::new(db));
    assert_eq!(runs.len(), 1);
    let r = &runs[0];
    assert_eq!(
        (r.kind.as_str(), r.agent.as_str(), r.model.as_str()),
        ("audit", "audit-llm", "scripted")
    );
    assert_eq!(r.summary["server"], url.as_str());
    assert_eq!(r.summary["model_calls"]["calls"], 4);
    assert_eq!(r.summary["model_calls"]["prompt_tokens"], 4000);
    assert_eq!(r.summary["track"], "unassisted");
    assert_eq!(
        r.summary["failed_episodes"], 0,
        "held-out grades read with the operator key"
    );

    // A campaign over HTTP.
    let o = ledgershield(&[
        "audit-llm",
        "--api-base",
        &api,
        "--model",
        "scripted",
        "--url",
        &url,
        "--campaign",
        "--periods",
        "1",
        "--seeds",
        "7",
        "--db",
        db,
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.starts_with("[START] campaign seed=7 periods=1\n[STEP] period=1 phase=start\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[STEP] period=1 role=gst_specialist findings="),
        "{stdout}"
    );
    assert!(
        stdout.trim_end().ends_with("periods=1 success=true"),
        "{stdout}"
    );

    let o = ledgershield(&[
        "audit-baseline",
        "--store",
        "--seeds",
        "42,100",
        "--task",
        "expense_audit",
        "--db",
        db,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = ledgershield(&["audit-leaderboard", "--db", db, "--json"]);
    assert!(o.status.success());
    let board: Value = serde_json::from_slice(&o.stdout).unwrap();
    let entries = board["entries"].as_array().unwrap();
    let agents: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["agent"].as_str().unwrap(), e["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        agents,
        vec![
            ("audit-baseline", "tasks"),
            ("audit-llm", "tasks"),
            ("audit-llm", "campaign")
        ],
        "{board}"
    );
    assert!(entries[0]["mean_score"].as_f64() > entries[1]["mean_score"].as_f64());
    let md = ledgershield(&["audit-leaderboard", "--db", db]);
    assert!(String::from_utf8_lossy(&md.stdout).contains("| audit-llm | scripted |"));
}

#[test]
fn a_failing_endpoint_is_an_error_and_nothing_is_stored() {
    let dir = temp("dead");
    let db = dir.join("ls.db");
    let db = db.to_str().unwrap();
    let dead = "http://127.0.0.1:9/v1";
    let o = ledgershield(&[
        "audit-llm",
        "--api-base",
        dead,
        "--model",
        "m",
        "--task",
        "expense_audit",
        "--retries",
        "0",
        "--timeout-secs",
        "1",
        "--db",
        db,
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("answered none"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = ledgershield(&[
        "run",
        "--agent",
        "llm",
        "--api-base",
        dead,
        "--model",
        "gpt-4o",
        "--cases",
        "CASE-A-001,CASE-D-001",
        "--retries",
        "0",
        "--timeout-secs",
        "1",
        "--db",
        db,
    ]);
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("answered none of 2 calls") && err.contains("not scored or stored"),
        "{err}"
    );
    assert!(stored(std::path::Path::new(db)).is_empty());
}
