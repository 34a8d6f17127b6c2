//! `ls-store`: the database behind runs, episodes, trajectories, the leaderboard, benchmark
//! reports and institutional-memory snapshots: embedded SQLite (bundled, the default) or a
//! PostgreSQL server shared by several replicas (`postgres://…`), behind one [`Store`] API with
//! the same migrations and the same tests.
//!
//! The schema is created on first open by an ordered migration list; `schema_version` records
//! every applied migration, so reopening an existing file applies only what is new. Rows keep
//! their typed columns for queries plus the full JSON record for exports.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Default database path (relative to the working directory); `LEDGERSHIELD_DB_PATH` overrides.
pub const DEFAULT_DB_PATH: &str = "data/ledgershield.db";

/// Largest JSON document stored in one row.
pub const MAX_JSON_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("sqlite: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("postgres: {0}")]
    Postgres(#[from] postgres::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

mod pg;
mod sql;
mod sqlite;

/// Ordered migrations: (version, description, SQL). Never edit an applied one; append.
pub const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "runs, episodes, leaderboard",
        "CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            agent TEXT NOT NULL,
            model TEXT NOT NULL,
            agent_type TEXT NOT NULL,
            seed INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            case_count INTEGER NOT NULL,
            mean_score REAL NOT NULL,
            summary_json TEXT NOT NULL
        );
        CREATE TABLE episodes (
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            case_id TEXT NOT NULL,
            base_case_id TEXT NOT NULL,
            task_type TEXT NOT NULL,
            final_score REAL NOT NULL,
            result_class TEXT NOT NULL,
            decision TEXT NOT NULL,
            steps INTEGER NOT NULL,
            total_reward REAL NOT NULL,
            record_json TEXT NOT NULL,
            PRIMARY KEY (run_id, idx)
        );
        CREATE INDEX episodes_case ON episodes(case_id);
        CREATE TABLE leaderboard (
            model TEXT NOT NULL,
            agent_type TEXT NOT NULL,
            temperature REAL NOT NULL,
            pass_k INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            entry_json TEXT NOT NULL,
            PRIMARY KEY (model, agent_type, temperature, pass_k)
        );",
    ),
    (
        2,
        "benchmark reports and memory snapshots",
        "CREATE TABLE reports (
            report_id TEXT PRIMARY KEY,
            generated_at TEXT NOT NULL,
            report_json TEXT NOT NULL
        );
        CREATE TABLE memory_snapshots (
            session_id TEXT NOT NULL,
            taken_at TEXT NOT NULL,
            memory_json TEXT NOT NULL,
            PRIMARY KEY (session_id, taken_at)
        );",
    ),
];

/// The database path: `configured` (the binary passes `LEDGERSHIELD_DB_PATH`) when set and not
/// blank, else the default. This crate reads no environment variables.
pub fn db_path(configured: Option<&str>) -> PathBuf {
    configured
        .filter(|p| !p.trim().is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DB_PATH))
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub run_id: String,
    pub kind: String,
    pub agent: String,
    pub model: String,
    pub agent_type: String,
    pub seed: u64,
    pub created_at: String,
    pub case_count: u32,
    pub mean_score: f64,
    pub summary: serde_json::Value,
}

/// An episode as stored (the record JSON holds the whole trajectory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRow {
    pub run_id: String,
    pub idx: u32,
    pub case_id: String,
    pub base_case_id: String,
    pub task_type: String,
    pub final_score: f64,
    pub result_class: String,
    pub decision: String,
    pub steps: u32,
    pub total_reward: f64,
    pub record: serde_json::Value,
}

/// A leaderboard entry keyed by (model, type, temperature, pass_k).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderboardRow {
    pub model: String,
    pub agent_type: String,
    pub temperature: f64,
    pub pass_k: u32,
    pub updated_at: String,
    pub entry: serde_json::Value,
}

/// Whether a `--db` value names a PostgreSQL server (`postgres://…` or `postgresql://…`)
/// rather than a SQLite file.
pub fn is_url(target: &Path) -> bool {
    target
        .to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// What a backend does; [`Store`] holds one and adds the checks common to both.
pub(crate) trait Engine: Send {
    fn schema_version(&self) -> Result<i64>;
    /// Store a run and its episodes in one transaction; `replace: false` fails when the id is
    /// already stored (checked inside the transaction, under the writer's lock).
    fn write_run(&mut self, run: &RunRow, episodes: &[EpisodeRow], replace: bool) -> Result<()>;
    fn list_runs(&self, limit: i64) -> Result<Vec<RunRow>>;
    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>>;
    fn episodes(&self, run_id: Option<&str>, limit: i64) -> Result<Vec<EpisodeRow>>;
    fn upsert_leaderboard(&mut self, row: &LeaderboardRow) -> Result<()>;
    fn leaderboard(&self) -> Result<Vec<LeaderboardRow>>;
    /// One of the keyed-document upserts (`sql::SAVE_REPORT`, `sql::SAVE_MEMORY`).
    fn put_document(
        &mut self,
        statement: &'static str,
        key: &str,
        at: &str,
        doc: String,
    ) -> Result<()>;
    /// One of the latest-document queries, with its key parameter when it takes one.
    fn get_document(&self, statement: &'static str, key: Option<&str>) -> Result<Option<String>>;
}

/// The store: SQLite (a file, or in memory) or PostgreSQL, behind one API.
pub struct Store {
    engine: Box<dyn Engine>,
    path: Option<PathBuf>,
}

pub(crate) fn to_json(v: &serde_json::Value) -> Result<String> {
    let s = serde_json::to_string(v)?;
    if s.len() > MAX_JSON_BYTES {
        return Err(StoreError::Invalid(format!(
            "document larger than {MAX_JSON_BYTES} bytes"
        )));
    }
    Ok(s)
}

pub(crate) fn parse_or_null(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

pub(crate) fn already_stored(run_id: &str) -> StoreError {
    StoreError::Invalid(format!(
        "a run with id '{run_id}' is already stored; run ids are never reused"
    ))
}

impl Store {
    /// Open `target`: a PostgreSQL URL ([`is_url`]) connects to that server; anything else is a
    /// SQLite file path (parent directories created). The schema is migrated either way.
    pub fn open(target: &Path) -> Result<Self> {
        if is_url(target) {
            return Self::connect(target.to_str().unwrap_or_default());
        }
        Ok(Self {
            engine: Box::new(sqlite::Sqlite::open(target)?),
            path: Some(target.to_owned()),
        })
    }

    /// Connect to a PostgreSQL server (`postgres://user:password@host:port/database`).
    pub fn connect(url: &str) -> Result<Self> {
        Ok(Self {
            engine: Box::new(pg::Postgres::connect(url)?),
            path: Some(PathBuf::from(url)),
        })
    }

    /// A private in-memory database (tests, `--no-store`).
    pub fn in_memory() -> Result<Self> {
        Ok(Self {
            engine: Box::new(sqlite::Sqlite::in_memory()?),
            path: None,
        })
    }

    /// The file path or database URL this store was opened on (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// `"postgres"` or `"sqlite"`.
    pub fn backend(&self) -> &'static str {
        match &self.path {
            Some(p) if is_url(p) => "postgres",
            _ => "sqlite",
        }
    }

    pub fn schema_version(&self) -> Result<i64> {
        self.engine.schema_version()
    }

    /// Insert a new run and its episodes atomically; an existing run with the same id is never
    /// replaced (the insert fails and nothing is written), also when several writers race.
    pub fn insert_run(&mut self, run: &RunRow, episodes: &[EpisodeRow]) -> Result<()> {
        self.engine.write_run(run, episodes, false)
    }

    /// Insert a run and its episodes atomically (replacing a run with the same id).
    pub fn save_run(&mut self, run: &RunRow, episodes: &[EpisodeRow]) -> Result<()> {
        self.engine.write_run(run, episodes, true)
    }

    /// Most recent runs first (at most `limit`, capped at 1000).
    pub fn list_runs(&self, limit: usize) -> Result<Vec<RunRow>> {
        self.engine.list_runs(limit.min(1000) as i64)
    }

    pub fn get_run(&self, run_id: &str) -> Result<Option<RunRow>> {
        self.engine.get_run(run_id)
    }

    /// Episodes of one run (or of every run when `run_id` is `None`), in order; at most `limit`.
    pub fn episodes(&self, run_id: Option<&str>, limit: usize) -> Result<Vec<EpisodeRow>> {
        self.engine.episodes(run_id, limit.min(1_000_000) as i64)
    }

    /// Replace the entry with the same key.
    pub fn upsert_leaderboard(&mut self, row: &LeaderboardRow) -> Result<()> {
        self.engine.upsert_leaderboard(row)
    }

    pub fn leaderboard(&self) -> Result<Vec<LeaderboardRow>> {
        self.engine.leaderboard()
    }

    pub fn save_report(
        &mut self,
        report_id: &str,
        generated_at: &str,
        report: &serde_json::Value,
    ) -> Result<()> {
        self.engine
            .put_document(sql::SAVE_REPORT, report_id, generated_at, to_json(report)?)
    }

    /// The most recently generated report.
    pub fn latest_report(&self) -> Result<Option<serde_json::Value>> {
        let s = self.engine.get_document(sql::LATEST_REPORT, None)?;
        Ok(s.map(|s| serde_json::from_str(&s)).transpose()?)
    }

    pub fn save_memory_snapshot(
        &mut self,
        session_id: &str,
        taken_at: &str,
        memory: &serde_json::Value,
    ) -> Result<()> {
        self.engine
            .put_document(sql::SAVE_MEMORY, session_id, taken_at, to_json(memory)?)
    }

    pub fn latest_memory_snapshot(&self, session_id: &str) -> Result<Option<serde_json::Value>> {
        let s = self
            .engine
            .get_document(sql::LATEST_MEMORY, Some(session_id))?;
        Ok(s.map(|s| serde_json::from_str(&s)).transpose()?)
    }
}

/// UTC timestamp `YYYY-MM-DDTHH:MM:SSZ` from the system clock (no external time crate).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    utc_from_unix(secs)
}

/// Format unix seconds as ISO-8601 UTC.
pub fn utc_from_unix(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // civil_from_days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(utc_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_from_unix(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
