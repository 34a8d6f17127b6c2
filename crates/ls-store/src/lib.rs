//! `ls-store`: the embedded database (SQLite, bundled) behind runs, episodes, trajectories, the
//! leaderboard, benchmark reports and institutional-memory snapshots.
//!
//! The schema is created on first open by an ordered migration list; `schema_version` records
//! every applied migration, so reopening an existing file applies only what is new. Rows keep
//! their typed columns for queries plus the full JSON record for exports.

use rusqlite::{params, Connection, OptionalExtension};
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
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

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

pub struct Store {
    conn: Connection,
    path: Option<PathBuf>,
}

fn to_json(v: &serde_json::Value) -> Result<String> {
    let s = serde_json::to_string(v)?;
    if s.len() > MAX_JSON_BYTES {
        return Err(StoreError::Invalid(format!(
            "document larger than {MAX_JSON_BYTES} bytes"
        )));
    }
    Ok(s)
}

impl Store {
    /// Open (creating parent directories and the schema as needed).
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut s = Self {
            conn,
            path: Some(path.to_owned()),
        };
        s.migrate()?;
        Ok(s)
    }

    /// A private in-memory database (tests, `--no-store`).
    pub fn in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory()?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut s = Self { conn, path: None };
        s.migrate()?;
        Ok(s)
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Apply pending migrations. The whole check-and-apply runs in one immediate (write-locked)
    /// transaction, so two processes opening a fresh database at once do not both apply them
    /// (the second waits on the busy timeout, then finds them applied).
    fn migrate(&mut self) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));")?;
        let current: i64 = tx.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            [],
            |r| r.get(0),
        )?;
        for (v, desc, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO schema_version (version, description) VALUES (?1, ?2)",
                params![v, desc],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn schema_version(&self) -> Result<i64> {
        Ok(self.conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_version",
            [],
            |r| r.get(0),
        )?)
    }

    /// Insert a new run and its episodes atomically; an existing run with the same id is never
    /// replaced (the insert fails and nothing is written).
    pub fn insert_run(&mut self, run: &RunRow, episodes: &[EpisodeRow]) -> Result<()> {
        let exists: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM runs WHERE run_id = ?1",
            params![run.run_id],
            |r| r.get(0),
        )?;
        if exists > 0 {
            return Err(StoreError::Invalid(format!(
                "a run with id '{}' is already stored; run ids are never reused",
                run.run_id
            )));
        }
        self.save_run(run, episodes)
    }

    /// Insert a run and its episodes atomically (replacing a run with the same id).
    pub fn save_run(&mut self, run: &RunRow, episodes: &[EpisodeRow]) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "DELETE FROM episodes WHERE run_id = ?1",
            params![run.run_id],
        )?;
        tx.execute("DELETE FROM runs WHERE run_id = ?1", params![run.run_id])?;
        tx.execute(
            "INSERT INTO runs (run_id, kind, agent, model, agent_type, seed, created_at, case_count, mean_score, summary_json) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)",
            params![run.run_id, run.kind, run.agent, run.model, run.agent_type, run.seed as i64, run.created_at, run.case_count, run.mean_score, to_json(&run.summary)?],
        )?;
        {
            let mut st = tx.prepare("INSERT INTO episodes (run_id, idx, case_id, base_case_id, task_type, final_score, result_class, decision, steps, total_reward, record_json) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)")?;
            for e in episodes {
                st.execute(params![
                    run.run_id,
                    e.idx,
                    e.case_id,
                    e.base_case_id,
                    e.task_type,
                    e.final_score,
                    e.result_class,
                    e.decision,
                    e.steps,
                    e.total_reward,
                    to_json(&e.record)?
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn run_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
        let summary: String = r.get(9)?;
        Ok(RunRow {
            run_id: r.get(0)?,
            kind: r.get(1)?,
            agent: r.get(2)?,
            model: r.get(3)?,
            agent_type: r.get(4)?,
            seed: r.get::<_, i64>(5)? as u64,
            created_at: r.get(6)?,
            case_count: r.get(7)?,
            mean_score: r.get(8)?,
            summary: serde_json::from_str(&summary).unwrap_or(serde_json::Value::Null),
        })
    }

    /// Most recent runs first (at most `limit`, capped at 1000).
    pub fn list_runs(&self, limit: usize) -> Result<Vec<RunRow>> {
        let mut st = self.conn.prepare("SELECT run_id, kind, agent, model, agent_type, seed, created_at, case_count, mean_score, summary_json FROM runs ORDER BY created_at DESC, run_id DESC LIMIT ?1")?;
        let rows = st.query_map(params![limit.min(1000) as i64], Self::run_from)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub fn get_run(&self, run_id: &str) -> Result<Option<RunRow>> {
        Ok(self
            .conn
            .query_row("SELECT run_id, kind, agent, model, agent_type, seed, created_at, case_count, mean_score, summary_json FROM runs WHERE run_id = ?1", params![run_id], Self::run_from)
            .optional()?)
    }

    /// Episodes of one run (or of every run when `run_id` is `None`), in order; at most `limit`.
    pub fn episodes(&self, run_id: Option<&str>, limit: usize) -> Result<Vec<EpisodeRow>> {
        let sql = "SELECT run_id, idx, case_id, base_case_id, task_type, final_score, result_class, decision, steps, total_reward, record_json FROM episodes WHERE (?1 IS NULL OR run_id = ?1) ORDER BY run_id, idx LIMIT ?2";
        let mut st = self.conn.prepare(sql)?;
        let rows = st.query_map(params![run_id, limit.min(1_000_000) as i64], |r| {
            let rec: String = r.get(10)?;
            Ok(EpisodeRow {
                run_id: r.get(0)?,
                idx: r.get(1)?,
                case_id: r.get(2)?,
                base_case_id: r.get(3)?,
                task_type: r.get(4)?,
                final_score: r.get(5)?,
                result_class: r.get(6)?,
                decision: r.get(7)?,
                steps: r.get(8)?,
                total_reward: r.get(9)?,
                record: serde_json::from_str(&rec).unwrap_or(serde_json::Value::Null),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Replace the entry with the same key.
    pub fn upsert_leaderboard(&mut self, row: &LeaderboardRow) -> Result<()> {
        self.conn.execute(
            "INSERT INTO leaderboard (model, agent_type, temperature, pass_k, updated_at, entry_json) VALUES (?1,?2,?3,?4,?5,?6)
             ON CONFLICT(model, agent_type, temperature, pass_k) DO UPDATE SET updated_at = excluded.updated_at, entry_json = excluded.entry_json",
            params![row.model, row.agent_type, row.temperature, row.pass_k, row.updated_at, to_json(&row.entry)?],
        )?;
        Ok(())
    }

    pub fn leaderboard(&self) -> Result<Vec<LeaderboardRow>> {
        let mut st = self.conn.prepare("SELECT model, agent_type, temperature, pass_k, updated_at, entry_json FROM leaderboard ORDER BY model, agent_type, temperature, pass_k LIMIT 10000")?;
        let rows = st.query_map([], |r| {
            let e: String = r.get(5)?;
            Ok(LeaderboardRow {
                model: r.get(0)?,
                agent_type: r.get(1)?,
                temperature: r.get(2)?,
                pass_k: r.get(3)?,
                updated_at: r.get(4)?,
                entry: serde_json::from_str(&e).unwrap_or(serde_json::Value::Null),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub fn save_report(
        &mut self,
        report_id: &str,
        generated_at: &str,
        report: &serde_json::Value,
    ) -> Result<()> {
        self.conn.execute(
            "INSERT INTO reports (report_id, generated_at, report_json) VALUES (?1,?2,?3) ON CONFLICT(report_id) DO UPDATE SET generated_at = excluded.generated_at, report_json = excluded.report_json",
            params![report_id, generated_at, to_json(report)?],
        )?;
        Ok(())
    }

    /// The most recently generated report.
    pub fn latest_report(&self) -> Result<Option<serde_json::Value>> {
        let s: Option<String> = self.conn.query_row("SELECT report_json FROM reports ORDER BY generated_at DESC, report_id DESC LIMIT 1", [], |r| r.get(0)).optional()?;
        Ok(s.map(|s| serde_json::from_str(&s)).transpose()?)
    }

    pub fn save_memory_snapshot(
        &mut self,
        session_id: &str,
        taken_at: &str,
        memory: &serde_json::Value,
    ) -> Result<()> {
        self.conn.execute(
            "INSERT INTO memory_snapshots (session_id, taken_at, memory_json) VALUES (?1,?2,?3) ON CONFLICT(session_id, taken_at) DO UPDATE SET memory_json = excluded.memory_json",
            params![session_id, taken_at, to_json(memory)?],
        )?;
        Ok(())
    }

    pub fn latest_memory_snapshot(&self, session_id: &str) -> Result<Option<serde_json::Value>> {
        let s: Option<String> = self.conn.query_row("SELECT memory_json FROM memory_snapshots WHERE session_id = ?1 ORDER BY taken_at DESC LIMIT 1", params![session_id], |r| r.get(0)).optional()?;
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
