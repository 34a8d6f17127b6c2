//! `ledgershield load` end to end: it starts its own server, plays whole episodes over HTTP with
//! its keep-alive client, checks every episode against its solo reference and reports figures.

use std::process::Command;

#[test]
fn load_plays_episodes_and_reports_without_interference() {
    let out = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args([
            "load",
            "--concurrency",
            "1,3",
            "--episodes",
            "6",
            "--transport-floor",
            "--rounds",
            "2",
            "--json",
        ])
        .output()
        .expect("running ledgershield load");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "load failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    let runs = report["runs"].as_array().expect("runs");
    let kinds: Vec<(u64, &str, u64)> = runs
        .iter()
        .map(|r| {
            (
                r["round"].as_u64().unwrap(),
                r["kind"].as_str().unwrap(),
                r["concurrency"].as_u64().unwrap(),
            )
        })
        .collect();
    // Rounds alternate over the runs; each round's sessions are fresh, so it is checked against
    // the same solo reference.
    let one_round = [
        ("episodes", 1),
        ("transport_floor", 1),
        ("episodes", 3),
        ("transport_floor", 3),
    ];
    let expected: Vec<(u64, &str, u64)> = (1..=2)
        .flat_map(|round| one_round.iter().map(move |&(k, c)| (round, k, c)))
        .collect();
    assert_eq!(kinds, expected);
    for r in runs {
        assert_eq!(r["interference_errors"], 0, "{r}");
        assert!(r["episodes"].as_u64().unwrap() >= 6, "{r}");
        // Seven requests per episode: a reset and six steps (or seven health checks).
        assert_eq!(
            r["requests"].as_u64().unwrap(),
            7 * r["episodes"].as_u64().unwrap(),
            "{r}"
        );
        assert!(
            r["server_cpu_ms_per_episode"]
                .as_f64()
                .is_some_and(|v| v >= 0.0),
            "{r}"
        );
        assert!(
            r["latency_ms_p99"].as_f64().unwrap() >= r["latency_ms_p50"].as_f64().unwrap(),
            "{r}"
        );
    }
    assert!(report["idle_rss_mb"].as_f64().is_some_and(|v| v > 0.0));
    // One median row per (kind, concurrency), each the median of its two rounds.
    let medians = report["medians"].as_array().expect("medians");
    assert_eq!(medians.len(), 4);
    for m in medians {
        let of_runs: Vec<f64> = runs
            .iter()
            .filter(|r| r["kind"] == m["kind"] && r["concurrency"] == m["concurrency"])
            .map(|r| r["episodes_per_s"].as_f64().unwrap())
            .collect();
        assert_eq!(of_runs.len(), 2);
        let expected = ((of_runs[0] + of_runs[1]) / 2.0 * 1000.0).round() / 1000.0;
        assert_eq!(m["episodes_per_s"].as_f64().unwrap(), expected, "{m}");
        assert_eq!(
            (m["rounds"].as_u64(), m["interference_errors"].as_u64()),
            (Some(2), Some(0))
        );
    }
}

#[test]
fn load_refuses_urls_it_cannot_speak() {
    let out = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args(["load", "--url", "https://127.0.0.1:1", "--episodes", "1"])
        .output()
        .expect("running ledgershield load");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only http:// URLs are supported"));
}
