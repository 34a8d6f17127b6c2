use ls_store::*;
use serde_json::json;

fn temp_db(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ls-store-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("nested").join("ledgershield.db")
}

#[test]
fn write_reopen_read_back() {
    let path = temp_db("reopen");
    {
        let mut s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), MIGRATIONS.last().unwrap().0);
        let run = RunRow {
            run_id: "run-1".into(),
            kind: "run".into(),
            agent: "teacher".into(),
            model: "m".into(),
            agent_type: "deterministic-policy".into(),
            seed: 7,
            created_at: "2026-01-01T00:00:00Z".into(),
            case_count: 2,
            mean_score: 0.9,
            summary: json!({"mean": 0.9}),
        };
        let eps: Vec<EpisodeRow> = (0..2)
            .map(|i| EpisodeRow {
                run_id: "run-1".into(),
                idx: i,
                case_id: format!("CASE-{i}"),
                base_case_id: format!("CASE-{i}"),
                task_type: "task_b".into(),
                final_score: 0.8 + f64::from(i) / 10.0,
                result_class: "valid_success".into(),
                decision: "HOLD".into(),
                steps: 5,
                total_reward: 1.5,
                record: json!({"trajectory": [{"step": 1}]}),
            })
            .collect();
        s.save_run(&run, &eps).unwrap();
        s.upsert_leaderboard(&LeaderboardRow {
            model: "m".into(),
            agent_type: "t".into(),
            temperature: 0.0,
            pass_k: 1,
            updated_at: "x".into(),
            entry: json!({"public_mean": 0.5}),
        })
        .unwrap();
        s.upsert_leaderboard(&LeaderboardRow {
            model: "m".into(),
            agent_type: "t".into(),
            temperature: 0.0,
            pass_k: 1,
            updated_at: "y".into(),
            entry: json!({"public_mean": 0.7}),
        })
        .unwrap();
        s.save_report("r1", "2026-01-01T00:00:00Z", &json!({"benchmark": "b"}))
            .unwrap();
        s.save_memory_snapshot(
            "default",
            "2026-01-01T00:00:00Z",
            &json!({"case_counter": 3}),
        )
        .unwrap();
    }
    // Reopen the file: migrations are not re-applied and everything is still there.
    let s = Store::open(&path).unwrap();
    assert_eq!(s.schema_version().unwrap(), 2);
    let runs = s.list_runs(10).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].seed, 7);
    assert_eq!(runs[0].summary["mean"], 0.9);
    let eps = s.episodes(Some("run-1"), 100).unwrap();
    assert_eq!(eps.len(), 2);
    assert_eq!(eps[1].case_id, "CASE-1");
    assert!((eps[1].final_score - 0.9).abs() < 1e-12);
    assert_eq!(eps[0].record["trajectory"][0]["step"], 1);
    let lb = s.leaderboard().unwrap();
    assert_eq!(lb.len(), 1, "same key upserts");
    assert_eq!(lb[0].entry["public_mean"], 0.7);
    assert_eq!(s.latest_report().unwrap().unwrap()["benchmark"], "b");
    assert_eq!(
        s.latest_memory_snapshot("default").unwrap().unwrap()["case_counter"],
        3
    );
    assert!(s.get_run("missing").unwrap().is_none());
}

#[test]
fn replacing_a_run_replaces_its_episodes() {
    let mut s = Store::in_memory().unwrap();
    let mk = |n: u32| RunRow {
        run_id: "r".into(),
        kind: "run".into(),
        agent: "a".into(),
        model: "m".into(),
        agent_type: "t".into(),
        seed: 0,
        created_at: "t".into(),
        case_count: n,
        mean_score: 0.0,
        summary: json!({}),
    };
    let ep = |i: u32| EpisodeRow {
        run_id: "r".into(),
        idx: i,
        case_id: "C".into(),
        base_case_id: "C".into(),
        task_type: "task_a".into(),
        final_score: 0.1,
        result_class: "x".into(),
        decision: "PAY".into(),
        steps: 1,
        total_reward: 0.0,
        record: json!({}),
    };
    s.save_run(&mk(3), &[ep(0), ep(1), ep(2)]).unwrap();
    s.save_run(&mk(1), &[ep(0)]).unwrap();
    assert_eq!(s.episodes(None, 100).unwrap().len(), 1);
    assert_eq!(s.list_runs(5).unwrap()[0].case_count, 1);
}

#[test]
fn insert_run_never_replaces_a_stored_run() {
    let dir = std::env::temp_dir().join(format!("ls-store-insert-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut s = Store::open(&dir.join("db.sqlite")).unwrap();
    let run = |mean: f64| RunRow {
        run_id: "run-same".into(),
        kind: "run".into(),
        agent: "a".into(),
        model: "m".into(),
        agent_type: "offline".into(),
        seed: 1,
        created_at: "2026-01-01T00:00:00Z".into(),
        case_count: 0,
        mean_score: mean,
        summary: json!({}),
    };
    s.insert_run(&run(0.5), &[]).unwrap();
    let err = s.insert_run(&run(0.9), &[]).unwrap_err();
    assert!(err.to_string().contains("already stored"), "{err}");
    assert_eq!(
        s.list_runs(5).unwrap()[0].mean_score,
        0.5,
        "the first run is intact"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
