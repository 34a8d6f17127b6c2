//! `ledgershield run`: unique run ids, and infrastructure failures are errors, not agent scores.

use std::process::Command;

fn db(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ls-run-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("runs.db")
}

fn run(db: &std::path::Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args([
            "run",
            "--agent",
            "naive-pay",
            "--cases",
            "CASE-A-001",
            "--format",
            "json",
            "--db",
        ])
        .arg(db)
        .args(extra)
        .output()
        .expect("running ledgershield run")
}

#[test]
fn two_runs_in_the_same_second_store_two_runs() {
    let path = db("twice");
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run(&path, &[]));
        let b = s.spawn(|| run(&path, &[]));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert!(
        a.status.success() && b.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    let runs = ls_store::Store::open(&path).unwrap().list_runs(10).unwrap();
    assert_eq!(
        runs.len(),
        2,
        "{:?}",
        runs.iter().map(|r| &r.run_id).collect::<Vec<_>>()
    );
    assert_ne!(runs[0].run_id, runs[1].run_id);
}

#[test]
fn a_dead_server_is_an_error_and_nothing_is_stored() {
    let path = db("dead");
    // Port 9 on loopback: nothing listens there.
    let out = run(&path, &["--url", "http://127.0.0.1:9"]);
    assert!(
        !out.status.success(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not stored"), "{stderr}");
    let stored = ls_store::Store::open(&path)
        .map(|s| s.list_runs(10).unwrap().len())
        .unwrap_or(0);
    assert_eq!(stored, 0);
}
