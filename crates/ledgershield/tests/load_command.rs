//! `ledgershield load` end to end: it starts its own server, plays whole episodes over HTTP with
//! its keep-alive client, checks every episode against its solo reference and reports figures.

use std::process::Command;

#[test]
fn load_plays_episodes_and_reports_without_interference() {
    let out = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args(["load", "--concurrency", "1,3", "--episodes", "6", "--transport-floor", "--json"])
        .output()
        .expect("running ledgershield load");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "load failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let runs = report["runs"].as_array().expect("runs");
    let kinds: Vec<(&str, u64)> = runs.iter().map(|r| (r["kind"].as_str().unwrap(), r["concurrency"].as_u64().unwrap())).collect();
    assert_eq!(kinds, [("episodes", 1), ("transport_floor", 1), ("episodes", 3), ("transport_floor", 3)]);
    for r in runs {
        assert_eq!(r["interference_errors"], 0, "{r}");
        assert!(r["episodes"].as_u64().unwrap() >= 6, "{r}");
        // Seven requests per episode: a reset and six steps (or seven health checks).
        assert_eq!(r["requests"].as_u64().unwrap(), 7 * r["episodes"].as_u64().unwrap(), "{r}");
        assert!(r["server_cpu_ms_per_episode"].as_f64().is_some_and(|v| v >= 0.0), "{r}");
        assert!(r["latency_ms_p99"].as_f64().unwrap() >= r["latency_ms_p50"].as_f64().unwrap(), "{r}");
    }
    assert!(report["idle_rss_mb"].as_f64().is_some_and(|v| v > 0.0));
}

#[test]
fn load_refuses_urls_it_cannot_speak() {
    let out = Command::new(env!("CARGO_BIN_EXE_ledgershield")).args(["load", "--url", "https://127.0.0.1:1", "--episodes", "1"]).output().expect("running ledgershield load");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only http:// URLs are supported"));
}
