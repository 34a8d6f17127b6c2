//! The store's behaviour, run against every backend: a SQLite file always, and PostgreSQL when
//! `LS_STORE_TEST_POSTGRES_URL` names a server whose user may create databases (each test gets
//! a fresh database there). `LS_STORE_REQUIRE_POSTGRES=1` (set by CI) turns a missing URL into a
//! failure instead of a SQLite-only run.

use ls_store::*;
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};

/// Where one test's store lives.
#[derive(Clone, Debug)]
enum Target {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Target {
    fn open(&self) -> Store {
        match self {
            Target::Sqlite(p) => Store::open(p).unwrap(),
            Target::Postgres(url) => Store::open(std::path::Path::new(url)).unwrap(),
        }
    }
}

fn postgres_admin_url() -> Option<String> {
    let url = std::env::var("LS_STORE_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() && std::env::var("LS_STORE_REQUIRE_POSTGRES").as_deref() == Ok("1") {
        panic!("LS_STORE_REQUIRE_POSTGRES=1 but LS_STORE_TEST_POSTGRES_URL is not set");
    }
    url
}

/// A fresh database for `name` on every configured backend.
fn targets(name: &str) -> Vec<Target> {
    let dir = std::env::temp_dir().join(format!("ls-store-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = vec![Target::Sqlite(dir.join("nested").join("ledgershield.db"))];
    if let Some(admin) = postgres_admin_url() {
        let db = format!("ls_test_{}_{name}", std::process::id());
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {db}"))
            .unwrap();
        c.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
        out.push(Target::Postgres(with_dbname(&admin, &db)));
    }
    out
}

/// `admin` with its database path replaced by `db`.
fn with_dbname(admin: &str, db: &str) -> String {
    let (base, query) = admin.split_once('?').unwrap_or((admin, ""));
    let scheme_end = base.find("://").unwrap() + 3;
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let q = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    format!("{}/{db}{q}", &base[..host_end])
}

fn run_row(id: &str, mean: f64, cases: u32) -> RunRow {
    RunRow {
        run_id: id.into(),
        kind: "run".into(),
        agent: "teacher".into(),
        model: "m".into(),
        agent_type: "deterministic-policy".into(),
        seed: u64::MAX - 3,
        created_at: "2026-01-01T00:00:00Z".into(),
        case_count: cases,
        mean_score: mean,
        summary: json!({"mean": mean}),
    }
}

fn episode(run: &str, i: u32) -> EpisodeRow {
    EpisodeRow {
        run_id: run.into(),
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
    }
}

fn board(model: &str, mean: f64, at: &str) -> LeaderboardRow {
    LeaderboardRow {
        model: model.into(),
        agent_type: "t".into(),
        temperature: 0.7,
        pass_k: 1,
        updated_at: at.into(),
        entry: json!({"public_mean": mean}),
    }
}

#[test]
fn write_reopen_read_back() {
    for t in targets("reopen") {
        eprintln!("backend: {t:?}");
        {
            let mut s = t.open();
            assert_eq!(s.schema_version().unwrap(), MIGRATIONS.last().unwrap().0);
            let eps: Vec<EpisodeRow> = (0..2).map(|i| episode("run-1", i)).collect();
            s.save_run(&run_row("run-1", 0.9, 2), &eps).unwrap();
            s.upsert_leaderboard(&board("m", 0.5, "x")).unwrap();
            s.upsert_leaderboard(&board("m", 0.7, "y")).unwrap();
            s.save_report("r1", "2026-01-01T00:00:00Z", &json!({"benchmark": "b"}))
                .unwrap();
            s.save_report("r2", "2026-01-02T00:00:00Z", &json!({"benchmark": "c"}))
                .unwrap();
            s.save_memory_snapshot(
                "default",
                "2026-01-01T00:00:00Z",
                &json!({"case_counter": 3}),
            )
            .unwrap();
        }
        // Reopen: migrations are not re-applied and everything is still there, typed as written.
        let s = t.open();
        assert_eq!(s.schema_version().unwrap(), 2);
        let runs = s.list_runs(10).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(
            runs[0],
            run_row("run-1", 0.9, 2),
            "round trip, u64 seed included"
        );
        let eps = s.episodes(Some("run-1"), 100).unwrap();
        assert_eq!(eps.len(), 2);
        assert_eq!(eps[1], episode("run-1", 1));
        assert!(
            (eps[1].final_score - 0.9).abs() < 1e-12,
            "doubles, not floats"
        );
        assert_eq!(s.episodes(None, 100).unwrap().len(), 2);
        assert!(s.episodes(Some("other"), 100).unwrap().is_empty());
        let lb = s.leaderboard().unwrap();
        assert_eq!(lb.len(), 1, "same key upserts");
        assert_eq!(lb[0].entry["public_mean"], 0.7);
        assert_eq!(lb[0].temperature, 0.7);
        assert_eq!(s.latest_report().unwrap().unwrap()["benchmark"], "c");
        assert_eq!(
            s.latest_memory_snapshot("default").unwrap().unwrap()["case_counter"],
            3
        );
        assert!(s.latest_memory_snapshot("nobody").unwrap().is_none());
        assert!(s.get_run("missing").unwrap().is_none());
    }
}

#[test]
fn in_memory_store_is_private_and_migrated() {
    let mut s = Store::in_memory().unwrap();
    assert_eq!(s.schema_version().unwrap(), 2);
    assert!(s.path().is_none());
    s.save_run(&run_row("r", 0.1, 0), &[]).unwrap();
    assert_eq!(Store::in_memory().unwrap().list_runs(5).unwrap().len(), 0);
}

#[test]
fn replacing_a_run_replaces_its_episodes() {
    for t in targets("replace") {
        eprintln!("backend: {t:?}");
        let mut s = t.open();
        let eps: Vec<_> = (0..3).map(|i| episode("r", i)).collect();
        s.save_run(&run_row("r", 0.0, 3), &eps).unwrap();
        s.save_run(&run_row("r", 0.0, 1), &eps[..1]).unwrap();
        assert_eq!(s.episodes(None, 100).unwrap().len(), 1);
        assert_eq!(s.list_runs(5).unwrap()[0].case_count, 1);
    }
}

#[test]
fn insert_run_never_replaces_a_stored_run() {
    for t in targets("insert") {
        eprintln!("backend: {t:?}");
        let mut s = t.open();
        s.insert_run(&run_row("run-same", 0.5, 0), &[]).unwrap();
        let err = s
            .insert_run(&run_row("run-same", 0.9, 1), &[episode("run-same", 0)])
            .unwrap_err();
        assert!(err.to_string().contains("already stored"), "{err}");
        assert_eq!(
            s.list_runs(5).unwrap()[0].mean_score,
            0.5,
            "first run intact"
        );
        assert!(s.episodes(Some("run-same"), 5).unwrap().is_empty());
    }
}

#[test]
fn oversized_documents_are_refused_with_a_clear_error() {
    for t in targets("oversized") {
        let mut s = t.open();
        let big = json!({"blob": "x".repeat(MAX_JSON_BYTES + 1)});
        let err = s.save_report("big", "t", &big).unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
        assert!(s.latest_report().unwrap().is_none(), "nothing written");
    }
}

/// Several replicas open a fresh database at the same moment: each migrates or waits for the
/// one that does; all end on the last version and can write.
#[test]
fn replicas_opening_a_fresh_database_at_once_migrate_it_once() {
    for t in targets("migrate_race") {
        eprintln!("backend: {t:?}");
        let n = 6;
        let gate = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (t, gate) = (t.clone(), gate.clone());
                std::thread::spawn(move || {
                    gate.wait();
                    let mut s = t.open();
                    s.save_run(&run_row(&format!("r{i}"), 0.1, 0), &[]).unwrap();
                    s.schema_version().unwrap()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), MIGRATIONS.last().unwrap().0);
        }
        assert_eq!(t.open().list_runs(100).unwrap().len(), n);
    }
}

/// Many writers race to store the same new run id: exactly one wins, the stored run and its
/// episodes are the winner's, every loser gets the clear "already stored" error.
#[test]
fn concurrent_inserts_of_one_run_id_store_exactly_one() {
    for t in targets("insert_race") {
        eprintln!("backend: {t:?}");
        t.open();
        let n = 8u32;
        let gate = Arc::new(Barrier::new(n as usize));
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (t, gate) = (t.clone(), gate.clone());
                std::thread::spawn(move || {
                    let mut s = t.open();
                    let eps: Vec<_> = (0..=i).map(|k| episode("same", k)).collect();
                    gate.wait();
                    s.insert_run(&run_row("same", f64::from(i), i + 1), &eps)
                        .map(|()| i)
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<u32> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(r.to_string().contains("already stored"), "{r}");
        }
        let s = t.open();
        let run = s.get_run("same").unwrap().unwrap();
        assert_eq!(run.mean_score, f64::from(winners[0]));
        let eps = s.episodes(Some("same"), 100).unwrap();
        assert_eq!(
            eps.len() as u32,
            winners[0] + 1,
            "the winner's episodes only"
        );
    }
}

/// Replicas writing at once (each with its own connection): every run with all its episodes
/// is stored, and leaderboard upserts on shared keys leave one row per key.
#[test]
fn concurrent_replicas_share_runs_reports_and_leaderboard() {
    for t in targets("replicas") {
        eprintln!("backend: {t:?}");
        t.open();
        let (replicas, per) = (4, 15);
        let gate = Arc::new(Barrier::new(replicas));
        let handles: Vec<_> = (0..replicas)
            .map(|r| {
                let (t, gate) = (t.clone(), gate.clone());
                std::thread::spawn(move || {
                    let mut s = t.open();
                    gate.wait();
                    for k in 0..per {
                        let id = format!("rep{r}-run{k}");
                        let eps: Vec<_> = (0..3).map(|i| episode(&id, i)).collect();
                        s.insert_run(&run_row(&id, 0.5, 3), &eps).unwrap();
                        s.upsert_leaderboard(&board(&format!("model-{}", k % 3), k as f64, "t"))
                            .unwrap();
                        s.save_report(
                            &format!("rep{r}-{k}"),
                            &format!("2026-01-01T00:00:{k:02}Z"),
                            &json!({"replica": r}),
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let s = t.open();
        let runs = s.list_runs(1000).unwrap();
        assert_eq!(runs.len(), replicas * per);
        assert_eq!(s.episodes(None, 100_000).unwrap().len(), replicas * per * 3);
        let lb = s.leaderboard().unwrap();
        assert_eq!(
            lb.iter().map(|r| r.model.as_str()).collect::<Vec<_>>(),
            ["model-0", "model-1", "model-2"]
        );
        assert!(s.latest_report().unwrap().is_some());
    }
}

/// A database URL that cannot be reached fails to open with an error naming the backend.
#[test]
fn unreachable_postgres_fails_with_a_clear_error() {
    let err = match Store::open(std::path::Path::new(
        "postgres://nobody@127.0.0.1:1/none?connect_timeout=2",
    )) {
        Ok(_) => panic!("connected to port 1"),
        Err(e) => e.to_string(),
    };
    assert!(err.starts_with("postgres:"), "{err}");
    let err = match Store::open(std::path::Path::new("postgres://h/db?connect_timeout=soon")) {
        Ok(_) => panic!("parsed a bad URL"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("database URL"), "{err}");
    assert!(is_url(std::path::Path::new("postgresql://h/db")));
    assert!(!is_url(std::path::Path::new("data/ledgershield.db")));
}

/// The server drops the connection (a restart, an idle kill): the next call reconnects.
#[test]
fn postgres_reconnects_after_the_connection_is_dropped() {
    let Some(admin) = postgres_admin_url() else {
        eprintln!("skipped: no LS_STORE_TEST_POSTGRES_URL");
        return;
    };
    let t = targets("reconnect").pop().unwrap();
    let Target::Postgres(url) = &t else {
        unreachable!()
    };
    let mut s = t.open();
    s.save_run(&run_row("before", 0.1, 0), &[]).unwrap();
    let db = url.rsplit('/').next().unwrap().split('?').next().unwrap();
    let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    let killed = c
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            &[&db],
        )
        .unwrap();
    assert!(!killed.is_empty(), "the store's connection was found");
    std::thread::sleep(std::time::Duration::from_millis(200));
    // The first call may see the dropped connection fail; the next one has reconnected.
    let _ = s.list_runs(5);
    assert_eq!(s.list_runs(5).unwrap().len(), 1);
    s.save_run(&run_row("after", 0.2, 0), &[]).unwrap();
    assert_eq!(s.list_runs(5).unwrap().len(), 2);
}
