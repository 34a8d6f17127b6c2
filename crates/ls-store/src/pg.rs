//! The PostgreSQL backend (`postgres://…`): several server replicas share one database.
//!
//! The `postgres` client drives its connection on a runtime of its own and must not be called
//! from inside an async task, while the server calls the store from its handlers; so the client
//! lives on a dedicated thread and every call is a job sent to it (one connection per `Store`,
//! calls answered in order). A lost connection is reopened at the next call.
//!
//! Concurrency between replicas: migrations run under a transaction-scoped advisory lock (two
//! replicas starting on a fresh database apply them once); a run's writes take an advisory lock
//! on its id inside the transaction, so `insert_run` of one id from many writers stores exactly
//! one; upserts are single `INSERT … ON CONFLICT` statements.

use crate::sql::{self, postgres_dialect as pg};
use crate::{Engine, EpisodeRow, LeaderboardRow, Result, RunRow, StoreError, MIGRATIONS};
use postgres::{Client, NoTls, Row};
use std::sync::mpsc;

/// Key of the advisory lock held while migrating (any constant unique to this schema).
const MIGRATION_LOCK: i64 = 0x4c53_5354_4f52_4531;

type Job = Box<dyn FnOnce(&mut Conn) + Send>;

struct Conn {
    config: postgres::Config,
    client: Option<Client>,
}

impl Conn {
    fn client(&mut self) -> Result<&mut Client> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.client = Some(self.config.connect(NoTls)?);
        }
        Ok(self.client.as_mut().expect("connected above"))
    }
}

pub(crate) struct Postgres {
    jobs: mpsc::Sender<Job>,
}

impl Postgres {
    /// Connect to `url` and apply pending migrations.
    pub(crate) fn connect(url: &str) -> Result<Self> {
        let config: postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Invalid(format!("database URL: {e}")))?;
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("ls-store-postgres".into())
            .spawn(move || {
                let mut conn = Conn {
                    config,
                    client: None,
                };
                for job in rx {
                    job(&mut conn);
                }
            })?;
        let s = Self { jobs };
        s.call(|c| migrate(c.client()?))?;
        Ok(s)
    }

    /// Run `f` on the connection thread and wait for its answer.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |c| {
            let _ = tx.send(f(c));
        });
        let gone = || StoreError::Invalid("the database connection thread has stopped".into());
        self.jobs.send(job).map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())?
    }
}

fn migrate(c: &mut Client) -> Result<()> {
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'))")?;
    let current: i64 = tx.query_one(sql::SCHEMA_VERSION, &[])?.get(0);
    for (v, desc, ddl) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        tx.batch_execute(&sql::postgres_ddl(ddl))?;
        tx.execute(&pg(sql::RECORD_MIGRATION), &[v, desc])?;
    }
    tx.commit()?;
    Ok(())
}

fn u32_of(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn run_from(r: &Row) -> RunRow {
    RunRow {
        run_id: r.get(0),
        kind: r.get(1),
        agent: r.get(2),
        model: r.get(3),
        agent_type: r.get(4),
        seed: r.get::<_, i64>(5) as u64,
        created_at: r.get(6),
        case_count: u32_of(r.get(7)),
        mean_score: r.get(8),
        summary: crate::parse_or_null(r.get(9)),
    }
}

fn episode_from(r: &Row) -> EpisodeRow {
    EpisodeRow {
        run_id: r.get(0),
        idx: u32_of(r.get(1)),
        case_id: r.get(2),
        base_case_id: r.get(3),
        task_type: r.get(4),
        final_score: r.get(5),
        result_class: r.get(6),
        decision: r.get(7),
        steps: u32_of(r.get(8)),
        total_reward: r.get(9),
        record: crate::parse_or_null(r.get(10)),
    }
}

fn write_run(
    c: &mut Client,
    run: &RunRow,
    summary: &str,
    episodes: &[(EpisodeRow, String)],
    replace: bool,
) -> Result<()> {
    let mut tx = c.transaction()?;
    // Serialises writers of this run id across connections (released at commit/rollback).
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&run.run_id],
    )?;
    if !replace {
        let n: i64 = tx.query_one(&pg(sql::COUNT_RUN), &[&run.run_id])?.get(0);
        if n > 0 {
            return Err(crate::already_stored(&run.run_id));
        }
    }
    tx.execute(&pg(sql::DELETE_EPISODES), &[&run.run_id])?;
    tx.execute(&pg(sql::DELETE_RUN), &[&run.run_id])?;
    tx.execute(
        &pg(sql::INSERT_RUN),
        &[
            &run.run_id,
            &run.kind,
            &run.agent,
            &run.model,
            &run.agent_type,
            &(run.seed as i64),
            &run.created_at,
            &i64::from(run.case_count),
            &run.mean_score,
            &summary,
        ],
    )?;
    let st = tx.prepare(&pg(sql::INSERT_EPISODE))?;
    for (e, record) in episodes {
        tx.execute(
            &st,
            &[
                &run.run_id,
                &i64::from(e.idx),
                &e.case_id,
                &e.base_case_id,
                &e.task_type,
                &e.final_score,
                &e.result_class,
                &e.decision,
                &i64::from(e.steps),
                &e.total_reward,
                record,
            ],
        )?;
    }
    tx.commit()?;
    Ok(())
}

impl Engine for Postgres {
    fn schema_version(&self) -> Result<i64> {
        self.call(|c| Ok(c.client()?.query_one(sql::SCHEMA_VERSION, &[])?.get(0)))
    }

    fn write_run(&mut self, run: &RunRow, episodes: &[EpisodeRow], replace: bool) -> Result<()> {
        let summary = crate::to_json(&run.summary)?;
        let episodes = episodes
            .iter()
            .map(|e| Ok((e.clone(), crate::to_json(&e.record)?)))
            .collect::<Result<Vec<_>>>()?;
        let run = run.clone();
        self.call(move |c| write_run(c.client()?, &run, &summary, &episodes, replace))
    }

    fn list_runs(&self, limit: i64) -> Result<Vec<RunRow>> {
        self.call(move |c| {
            let rows = c.client()?.query(&pg(sql::LIST_RUNS), &[&limit])?;
            Ok(rows.iter().map(run_from).collect())
        })
    }

    fn get_run(&self, run_id: &str) -> Result<Option<RunRow>> {
        let id = run_id.to_owned();
        self.call(move |c| {
            let row = c.client()?.query_opt(&pg(sql::GET_RUN), &[&id])?;
            Ok(row.as_ref().map(run_from))
        })
    }

    fn episodes(&self, run_id: Option<&str>, limit: i64) -> Result<Vec<EpisodeRow>> {
        let id = run_id.map(str::to_owned);
        self.call(move |c| {
            let q = format!("SELECT {} FROM episodes WHERE ($1::TEXT IS NULL OR run_id = $1::TEXT) ORDER BY run_id, idx LIMIT $2", sql::EPISODE_COLUMNS);
            let rows = c.client()?.query(&q, &[&id, &limit])?;
            Ok(rows.iter().map(episode_from).collect())
        })
    }

    fn upsert_leaderboard(&mut self, row: &LeaderboardRow) -> Result<()> {
        let entry = crate::to_json(&row.entry)?;
        let row = row.clone();
        self.call(move |c| {
            c.client()?.execute(
                &pg(sql::UPSERT_LEADERBOARD),
                &[
                    &row.model,
                    &row.agent_type,
                    &row.temperature,
                    &i64::from(row.pass_k),
                    &row.updated_at,
                    &entry,
                ],
            )?;
            Ok(())
        })
    }

    fn leaderboard(&self) -> Result<Vec<LeaderboardRow>> {
        self.call(|c| {
            let rows = c.client()?.query(&pg(sql::LEADERBOARD), &[])?;
            Ok(rows
                .iter()
                .map(|r| LeaderboardRow {
                    model: r.get(0),
                    agent_type: r.get(1),
                    temperature: r.get(2),
                    pass_k: u32_of(r.get(3)),
                    updated_at: r.get(4),
                    entry: crate::parse_or_null(r.get(5)),
                })
                .collect())
        })
    }

    fn put_document(
        &mut self,
        statement: &'static str,
        key: &str,
        at: &str,
        doc: String,
    ) -> Result<()> {
        let (key, at) = (key.to_owned(), at.to_owned());
        self.call(move |c| {
            c.client()?.execute(&pg(statement), &[&key, &at, &doc])?;
            Ok(())
        })
    }

    fn get_document(&self, statement: &'static str, key: Option<&str>) -> Result<Option<String>> {
        let key = key.map(str::to_owned);
        self.call(move |c| {
            let client = c.client()?;
            let row = match &key {
                Some(k) => client.query_opt(&pg(statement), &[k])?,
                None => client.query_opt(&pg(statement), &[])?,
            };
            Ok(row.map(|r| r.get(0)))
        })
    }
}
