//! `ledgershield report`: build the benchmark report, store it (and the leaderboard) in the
//! database, optionally write artifacts, and print JSON, markdown or HTML.

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ls_core::FixtureSet;
use ls_report::stored::StoredRunInput;
use ls_report::{
    build_report_with_progress, leaderboard, leaderboard_entries, render, visualization, LsGen,
    ReportConfig,
};
use ls_store::{LeaderboardRow, RunRow, Store};
use std::path::PathBuf;

/// The headline's default seeds on the command line (`ls_report::headline::DEFAULT_HEADLINE_SEEDS`).
pub const DEFAULT_HEADLINE_SEEDS: &str = "2026,2027,2028,2029,2030";

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ReportFormat {
    Json,
    Markdown,
    Html,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: ReportFormat,
    /// Write benchmark_report.json, leaderboard.json, controlbench_report.json,
    /// controlbench_visualization.json, report.md and report.html into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, default_value_t = 100)]
    pub controlbench_sequence_length: usize,
    #[arg(long, value_delimiter = ',', default_value = "2026,2027,2028")]
    pub holdout_seeds: Vec<u64>,
    #[arg(long, default_value_t = 1)]
    pub variants_per_case: usize,
    #[arg(long, default_value_t = 1)]
    pub pass_k: u32,
    #[arg(long, default_value_t = 0.85)]
    pub pass_threshold: f64,
    /// Agent seed (pass^k trials use seed..seed+k-1).
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// ControlBench sequence seed.
    #[arg(long, default_value_t = 2026)]
    pub sequence_seed: u64,
    /// Agents on the ladder (the first played agent is the protocol agent). Scripted agents
    /// (teacher, random, naive-pay, always-escalate, teacher ablations) are played by the report;
    /// any other name (`llm`, or the agent name of a `run --url` run) is read from the store:
    /// its stored runs of the public and holdout suites are scored and put on the leaderboard.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "teacher,random,naive-pay,always-escalate,game-checklist-pay"
    )]
    pub agents: Vec<String>,
    /// Seeds of the headline's twin pairs (twelve pairs per seed; every agent plays both members
    /// of each pair). Stored runs of `run --suite pairs --seed S` match the seeds S..S+4.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = DEFAULT_HEADLINE_SEEDS
    )]
    pub headline_seeds: Vec<u64>,
    /// Leave out the gaming-resistance section (the red team and the learned attacker; the
    /// slowest part of a report).
    #[arg(long)]
    pub no_gaming: bool,
    /// Stored runs to put on the leaderboard, by run id (comma separated), in addition to the
    /// stored runs of the agents named in `--agents`.
    #[arg(long, value_delimiter = ',')]
    pub runs: Vec<String>,
    /// Human-baseline summary file (absent: the report says so; no human numbers are made up).
    #[arg(long, env = "LEDGERSHIELD_HUMAN_BASELINE_PATH", default_value = ls_report::human::DEFAULT_PATH)]
    pub human_baseline: PathBuf,
    #[arg(long, env = "LEDGERSHIELD_DB_PATH", hide_env_values = true, default_value = ls_store::DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// Do not store the report or update the leaderboard.
    #[arg(long)]
    pub no_store: bool,
    /// Leave `generated_at` empty (byte-identical reports for a seed).
    #[arg(long)]
    pub no_timestamp: bool,
}

pub fn run(args: ReportArgs) -> Result<()> {
    let set = FixtureSet::embedded().context("embedded fixtures")?;
    let (agents, stored_names): (Vec<String>, Vec<String>) = args
        .agents
        .iter()
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .partition(|a| ls_agents::offline_agent(a).is_some());
    let stored_runs = if stored_names.is_empty() && args.runs.is_empty() {
        Vec::new()
    } else {
        let store = crate::run::open_store(&args.db)?;
        load_stored_runs(&store, &stored_names, &args.runs)?
    };
    let cfg = ReportConfig {
        pass_k: args.pass_k,
        pass_threshold: args.pass_threshold,
        holdout_seeds: args.holdout_seeds.iter().copied().take(16).collect(),
        variants_per_case: args.variants_per_case.clamp(1, 8),
        controlbench_sequence_length: args
            .controlbench_sequence_length
            .clamp(1, ls_report::report::MAX_SEQUENCE_LENGTH),
        sequence_seed: args.sequence_seed,
        seed: args.seed,
        primary_agent: agents.first().cloned().unwrap_or_else(|| "teacher".into()),
        agents,
        stored_runs,
        headline_seeds: args.headline_seeds.iter().copied().take(32).collect(),
        gaming: !args.no_gaming,
        human_baseline_path: Some(args.human_baseline.clone()),
        generated_at: if args.no_timestamp {
            String::new()
        } else {
            ls_store::utc_now()
        },
        ..Default::default()
    };
    let gen = LsGen { set: set.clone() };
    let bar = indicatif::ProgressBar::new(ls_report::report::STAGES.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(std::time::Duration::from_secs(1));
    let report = build_report_with_progress(&set, &gen, &cfg, &|stage| {
        bar.inc(1);
        bar.set_message(stage);
    });
    bar.finish_and_clear();
    let entries = leaderboard_entries(&report);
    let json = serde_json::to_value(&report)?;

    if !args.no_store {
        store_report(&args, cfg.sequence_seed, &report, &entries, &json)?;
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let write = |name: &str, text: String| {
            std::fs::write(dir.join(name), text).with_context(|| format!("writing {name}"))
        };
        write(
            "benchmark_report.json",
            serde_json::to_string_pretty(&json)?,
        )?;
        write(
            "leaderboard.json",
            serde_json::to_string_pretty(&leaderboard(
                entries.clone(),
                Some(report.generated_at.clone()),
            ))?,
        )?;
        write(
            "controlbench_report.json",
            serde_json::to_string_pretty(&report.controlbench_quarter)?,
        )?;
        write(
            "controlbench_visualization.json",
            serde_json::to_string_pretty(&visualization(Some(&report), &Default::default()))?,
        )?;
        write("report.md", render::markdown(&report))?;
        write("report.html", render::html(&report))?;
        eprintln!("wrote artifacts to {}", dir.display());
    }
    match args.format {
        ReportFormat::Json => println!("{}", serde_json::to_string_pretty(&json)?),
        ReportFormat::Markdown => println!("{}", render::markdown(&report)),
        ReportFormat::Html => println!("{}", render::html(&report)),
    }
    Ok(())
}

/// The report, its leaderboard entries and the quarter's final memory, in the database.
fn store_report(
    args: &ReportArgs,
    sequence_seed: u64,
    report: &ls_report::BenchmarkReport,
    entries: &[ls_report::product::LeaderboardEntry],
    json: &serde_json::Value,
) -> Result<()> {
    let mut store = crate::run::open_store(&args.db)?;
    let id = new_report_id(sequence_seed, &report.generated_at);
    store.save_report(&id, &report.generated_at, json)?;
    for e in entries {
        store.upsert_leaderboard(&LeaderboardRow {
            model: e.model.clone(),
            agent_type: e.agent_type.clone(),
            temperature: e.temperature,
            pass_k: e.pass_k,
            updated_at: e.updated_at.clone(),
            entry: serde_json::to_value(e)?,
        })?;
    }
    if let Some(q) = &report.controlbench_quarter {
        // The quarter's final institutional memory, for later inspection.
        store.save_memory_snapshot(
            &format!("{id}-controlbench"),
            &report.generated_at,
            &serde_json::to_value(&q.institutional_memory_after)?,
        )?;
    }
    eprintln!(
        "stored {id} and {} leaderboard entries in {}",
        entries.len(),
        crate::db_target::shown(&args.db)
    );
    Ok(())
}

/// Most stored runs scanned when an agent name is resolved against the store.
const RUN_SCAN_LIMIT: usize = 1000;

/// The stored runs the report includes: every stored run of each agent in `names` (newest first)
/// and each run named in `run_ids`. An agent name with no stored run, or an unknown run id, is an
/// error naming it (never silently dropped).
pub fn load_stored_runs(
    store: &Store,
    names: &[String],
    run_ids: &[String],
) -> Result<Vec<StoredRunInput>> {
    let listed = if names.is_empty() {
        Vec::new()
    } else {
        store.list_runs(RUN_SCAN_LIMIT)?
    };
    let mut rows: Vec<RunRow> = Vec::new();
    for name in names {
        let mine: Vec<&RunRow> = listed.iter().filter(|r| &r.agent == name).collect();
        if mine.is_empty() {
            let mut known: Vec<&str> = listed.iter().map(|r| r.agent.as_str()).collect();
            known.sort_unstable();
            known.dedup();
            bail!(
                "unknown agent '{name}': not a scripted agent ({}) and no stored run of it in the database{}; store one first with `ledgershield run --agent {name} …` (or `run --url …`), or name runs with --runs",
                "teacher, random, naive-pay, always-escalate, teacher-no-controls, teacher-no-certificate, teacher-no-artifact-wait, game-checklist-pay, the game-* red-team policies",
                if known.is_empty() { String::new() } else { format!(" (stored-run agents: {})", known.join(", ")) }
            );
        }
        rows.extend(mine.into_iter().cloned());
    }
    for id in run_ids.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        let row = store
            .get_run(id)?
            .with_context(|| format!("unknown run id '{id}': no such stored run"))?;
        rows.push(row);
    }
    let mut seen = std::collections::BTreeSet::new();
    rows.retain(|r| seen.insert(r.run_id.clone()));
    // Newest first (the leaderboard takes the latest run per suite).
    rows.sort_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then(b.run_id.cmp(&a.run_id))
    });
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let records = store
            .episodes(Some(&r.run_id), 1_000_000)?
            .into_iter()
            .map(|e| serde_json::from_value(e.record))
            .collect::<std::result::Result<Vec<_>, _>>()
            .with_context(|| format!("stored run {} has an unreadable episode record", r.run_id))?;
        if records.is_empty() {
            bail!("stored run {} has no episodes", r.run_id);
        }
        out.push(StoredRunInput {
            run_id: r.run_id,
            agent: r.agent,
            model: r.model,
            agent_type: r.agent_type,
            created_at: r.created_at,
            summary: r.summary,
            records,
        });
    }
    Ok(out)
}

/// A report's store id: seed, time and 64 bits from the operating system's random source, so two
/// reports made in the same second never share an id (one would silently replace the other).
pub fn new_report_id(seed: u64, generated_at: &str) -> String {
    crate::run::stamped_id(&format!("report-{seed}"), generated_at)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_headline_seeds_are_the_reports() {
        let parsed: Vec<u64> = super::DEFAULT_HEADLINE_SEEDS
            .split(',')
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(parsed, ls_report::headline::DEFAULT_HEADLINE_SEEDS.to_vec());
    }

    #[test]
    fn report_ids_differ_within_one_second() {
        let a = super::new_report_id(7, "2026-01-01T00:00:00Z");
        let b = super::new_report_id(7, "2026-01-01T00:00:00Z");
        assert_ne!(a, b);
        assert!(a.starts_with("report-7-20260101T000000Z-"), "{a}");
    }
}
