//! The embedded SQLite backend (the default): one connection, WAL journal, a busy timeout so
//! several processes on one file wait for each other instead of failing.

use crate::sql;
use crate::{Engine, EpisodeRow, LeaderboardRow, Result, RunRow, StoreError, MIGRATIONS};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, TransactionBehavior};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long one connection waits on another's lock before an operation fails as busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long opening a file keeps retrying a step SQLite refused as busy.
const OPEN_RETRY: Duration = Duration::from_secs(30);

/// Run `step` again while it fails with SQLITE_BUSY/SQLITE_LOCKED, for at most [`OPEN_RETRY`]
/// in all, pausing a little longer after each try.
fn retry_busy<T, E: Into<StoreError>>(
    mut step: impl FnMut() -> std::result::Result<T, E>,
) -> Result<T> {
    let start = Instant::now();
    let mut pause_ms = 2u64;
    loop {
        match step().map_err(Into::into) {
            Err(StoreError::Sql(rusqlite::Error::SqliteFailure(e, _)))
                if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                    && start.elapsed() < OPEN_RETRY =>
            {
                std::thread::sleep(Duration::from_millis(pause_ms));
                pause_ms = (pause_ms * 2).min(100);
            }
            other => return other,
        }
    }
}

pub(crate) struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    pub(crate) fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Switching a fresh file to WAL, the first statements on it and the first migration can
        // answer SQLITE_BUSY at once, without consulting the busy handler (SQLite does so where
        // waiting could deadlock, and while another connection initialises the WAL). Several
        // replicas opening one fresh file together hit that: the whole opening sequence is
        // retried until OPEN_RETRY has passed.
        let mut s = Self { conn };
        retry_busy(|| {
            s.conn.pragma_update(None, "journal_mode", "WAL")?;
            s.conn.pragma_update(None, "foreign_keys", "ON")?;
            s.migrate()
        })?;
        Ok(s)
    }

    pub(crate) fn in_memory() -> Result<Self> {
        Self::ready(Connection::open_in_memory()?)
    }

    fn ready(conn: Connection) -> Result<Self> {
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut s = Self { conn };
        s.migrate()?;
        Ok(s)
    }

    /// Apply pending migrations. The whole check-and-apply runs in one immediate (write-locked)
    /// transaction, so two processes opening a fresh database at once do not both apply them
    /// (the second waits on the busy timeout, then finds them applied).
    fn migrate(&mut self) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));")?;
        let current: i64 = tx.query_row(sql::SCHEMA_VERSION, [], |r| r.get(0))?;
        for (v, desc, ddl) in MIGRATIONS.iter().filter(|m| m.0 > current) {
            tx.execute_batch(ddl)?;
            tx.execute(sql::RECORD_MIGRATION, params![v, desc])?;
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
            summary: crate::parse_or_null(&summary),
        })
    }

    fn episode_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<EpisodeRow> {
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
            record: crate::parse_or_null(&rec),
        })
    }
}

impl Engine for Sqlite {
    fn schema_version(&self) -> Result<i64> {
        Ok(self.conn.query_row(sql::SCHEMA_VERSION, [], |r| r.get(0))?)
    }

    fn write_run(&mut self, run: &RunRow, episodes: &[EpisodeRow], replace: bool) -> Result<()> {
        let summary = crate::to_json(&run.summary)?;
        let records = episodes
            .iter()
            .map(|e| crate::to_json(&e.record))
            .collect::<Result<Vec<_>>>()?;
        // Immediate: the existence check and the writes hold the write lock together, so two
        // writers of the same new id cannot both see it absent.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !replace {
            let exists: i64 = tx.query_row(sql::COUNT_RUN, params![run.run_id], |r| r.get(0))?;
            if exists > 0 {
                return Err(crate::already_stored(&run.run_id));
            }
        }
        tx.execute(sql::DELETE_EPISODES, params![run.run_id])?;
        tx.execute(sql::DELETE_RUN, params![run.run_id])?;
        tx.execute(
            sql::INSERT_RUN,
            params![
                run.run_id,
                run.kind,
                run.agent,
                run.model,
                run.agent_type,
                run.seed as i64,
                run.created_at,
                run.case_count,
                run.mean_score,
                summary
            ],
        )?;
        {
            let mut st = tx.prepare(sql::INSERT_EPISODE)?;
            for (e, record) in episodes.iter().zip(&records) {
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
                    record
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn list_runs(&self, limit: i64) -> Result<Vec<RunRow>> {
        let mut st = self.conn.prepare(sql::LIST_RUNS)?;
        let rows = st.query_map(params![limit], Self::run_from)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>> {
        Ok(self
            .conn
            .query_row(sql::GET_RUN, params![run_id], Self::run_from)
            .optional()?)
    }

    fn episodes(&self, run_id: Option<&str>, limit: i64) -> Result<Vec<EpisodeRow>> {
        let q = format!("SELECT {} FROM episodes WHERE (?1 IS NULL OR run_id = ?1) ORDER BY run_id, idx LIMIT ?2", sql::EPISODE_COLUMNS);
        let mut st = self.conn.prepare(&q)?;
        let rows = st.query_map(params![run_id, limit], Self::episode_from)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn upsert_leaderboard(&mut self, row: &LeaderboardRow) -> Result<()> {
        self.conn.execute(
            sql::UPSERT_LEADERBOARD,
            params![
                row.model,
                row.agent_type,
                row.temperature,
                row.pass_k,
                row.updated_at,
                crate::to_json(&row.entry)?
            ],
        )?;
        Ok(())
    }

    fn leaderboard(&self) -> Result<Vec<LeaderboardRow>> {
        let mut st = self.conn.prepare(sql::LEADERBOARD)?;
        let rows = st.query_map([], |r| {
            let e: String = r.get(5)?;
            Ok(LeaderboardRow {
                model: r.get(0)?,
                agent_type: r.get(1)?,
                temperature: r.get(2)?,
                pass_k: r.get(3)?,
                updated_at: r.get(4)?,
                entry: crate::parse_or_null(&e),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn put_document(
        &mut self,
        statement: &'static str,
        key: &str,
        at: &str,
        doc: String,
    ) -> Result<()> {
        self.conn.execute(statement, params![key, at, doc])?;
        Ok(())
    }

    fn get_document(&self, statement: &'static str, key: Option<&str>) -> Result<Option<String>> {
        let st = self
            .conn
            .query_row(statement, rusqlite::params_from_iter(key), |r| r.get(0));
        Ok(st.optional()?)
    }
}
