//! The persistent report store behind the ControlBench product endpoints: opened lazily, so a
//! server without a database still serves (every report route then answers honestly that no
//! artifact exists).

use ls_report::{BenchmarkReport, LeaderboardEntry};
use ls_store::{EpisodeRow, RunRow, Store};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Mutex;

/// Lazily opened handle on the persistent store plus the human-baseline path.
pub struct ReportStore {
    path: Option<PathBuf>,
    store: Mutex<Option<Store>>,
    pub human_baseline: Option<PathBuf>,
}

impl ReportStore {
    /// A store at `path` with an optional human-baseline file (the binary reads
    /// `LEDGERSHIELD_DB_PATH` and `LEDGERSHIELD_HUMAN_BASELINE_PATH`).
    pub fn with_baseline(path: PathBuf, human_baseline: Option<PathBuf>) -> Self {
        Self {
            path: Some(path),
            store: Mutex::new(None),
            human_baseline,
        }
    }

    /// A store at an explicit path.
    pub fn at(path: PathBuf) -> Self {
        Self {
            path: Some(path),
            store: Mutex::new(None),
            human_baseline: None,
        }
    }

    /// No persistent store (every endpoint reports that no artifact exists).
    pub fn disabled() -> Self {
        Self {
            path: None,
            store: Mutex::new(None),
            human_baseline: None,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&Store) -> Option<T>) -> Option<T> {
        let path = self.path.as_ref()?;
        let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            // Only read an existing database: serving must not create files as a side effect
            // (a PostgreSQL URL names a server, which is connected to and migrated).
            if !ls_store::is_url(path) && !path.exists() {
                return None;
            }
            match Store::open(path) {
                Ok(s) => *guard = Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "could not open the report store");
                    return None;
                }
            }
        }
        guard.as_ref().and_then(f)
    }

    pub fn latest_report_json(&self) -> Option<Value> {
        self.with(|s| s.latest_report().ok().flatten())
    }

    pub fn latest_report(&self) -> Option<BenchmarkReport> {
        self.latest_report_json()
            .and_then(|v| serde_json::from_value(v).ok())
    }

    /// The configured store (file path or database URL), if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// Whether a store file exists to read (serving never creates one).
    pub fn available(&self) -> bool {
        self.path
            .as_ref()
            .is_some_and(|p| ls_store::is_url(p) || p.exists())
    }

    /// Most recent runs first, at most `limit`.
    pub fn runs(&self, limit: usize) -> Vec<RunRow> {
        self.with(|s| s.list_runs(limit).ok()).unwrap_or_default()
    }

    pub fn run(&self, run_id: &str) -> Option<RunRow> {
        self.with(|s| s.get_run(run_id).ok().flatten())
    }

    /// Episodes of one run in order (at most `limit`), records included.
    pub fn run_episodes(&self, run_id: &str, limit: usize) -> Vec<EpisodeRow> {
        self.with(|s| s.episodes(Some(run_id), limit).ok())
            .unwrap_or_default()
    }

    pub fn leaderboard_entries(&self) -> Vec<LeaderboardEntry> {
        self.with(|s| s.leaderboard().ok())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| serde_json::from_value(r.entry).ok())
            .collect()
    }
}
