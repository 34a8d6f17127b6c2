//! `ledgershield`: the command line.
//!
//! * `serve`: run an environment server (ControlBench by default, built-in fixtures, no setup).
//! * `load`: play whole episodes over HTTP at several concurrencies and report throughput,
//!   latency percentiles, server CPU per episode and RSS.
//! * `run`, `report`, `export`: agents, the benchmark report and training data (docs/agents.md,
//!   docs/reports.md).

mod cases;
mod export;
mod http1;
mod load;
mod report;
mod run;

/// mimalloc: the step loop is allocation-heavy (JSON maps); it halves allocator time vs glibc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, TrackMode};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "ledgershield", version, about = "LedgerShield: financial-control RL environments (ControlBench and Financial Audit)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum EnvKind {
    Controlbench,
    Audit,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum TrackModeArg {
    Blind,
    Instrumented,
}

#[derive(clap::Args, Debug, Clone)]
struct ServeArgs {
    /// Address to bind.
    #[arg(long, env = "HOST", default_value = "127.0.0.1")]
    host: String,
    /// Port to bind (0 picks a free port and prints it).
    #[arg(long, env = "PORT", default_value_t = 8000)]
    port: u16,
    /// Which environment to serve.
    #[arg(long = "env", value_enum, env = "LEDGERSHIELD_ENV", default_value = "controlbench")]
    env_kind: EnvKind,
    /// Load ControlBench fixtures from a directory (same layout as `fixtures/controlbench`).
    #[arg(long, env = "LEDGERSHIELD_FIXTURES")]
    fixtures: Option<PathBuf>,
    /// Blind (default) hides SPRT state, tool rankings and the reward machine.
    #[arg(long, value_enum, env = "LEDGERSHIELD_TRACK_MODE", default_value = "blind", ignore_case = true)]
    track_mode: TrackModeArg,
    /// Most concurrent sessions.
    #[arg(long, env = "LEDGERSHIELD_MAX_SESSIONS", default_value_t = 1024)]
    max_sessions: usize,
    /// Seconds after which an idle session expires.
    #[arg(long, env = "LEDGERSHIELD_SESSION_IDLE_SECS", default_value_t = 1800)]
    session_idle_secs: u64,
    /// Runtime worker threads (default: one per CPU core; 1 runs everything on one thread).
    #[arg(long, env = "LEDGERSHIELD_WORKERS", value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: Option<u16>,
}

#[derive(Subcommand)]
enum Command {
    /// Run an environment server.
    Serve(ServeArgs),
    /// Load-test a server with whole episodes over HTTP.
    Load(load::LoadArgs),
    /// List, show, generate and validate cases.
    Cases(cases::CasesArgs),
    /// Play cases with an agent (teacher, random, naive-pay, always-escalate, llm).
    Run(run::RunArgs),
    /// Build the benchmark report (every track), store it and update the leaderboard.
    Report(report::ReportArgs),
    /// Export training data (SFT prompt/completion JSONL or trajectories) from stored runs.
    Export(export::ExportArgs),
    /// Run the Financial Audit environment's rule-based baseline auditor (no LLM).
    AuditBaseline(AuditBaselineArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct AuditBaselineArgs {
    /// Seeds to score every task on (default: the train seeds 42-51).
    #[arg(long, value_delimiter = ',', default_values_t = (42u64..=51).collect::<Vec<_>>())]
    seeds: Vec<u64>,
    /// Print the baseline's findings for one task (with `--seeds` giving one seed) instead of scores.
    #[arg(long)]
    task: Option<String>,
}

fn audit_baseline(args: AuditBaselineArgs) -> Result<()> {
    let cfg = audit_env::baseline::BaselineConfig::default();
    let out = match &args.task {
        Some(t) => {
            let task: audit_env::model::TaskId = serde_json::from_value(serde_json::Value::String(t.clone())).map_err(|e| anyhow::anyhow!("--task: {e}"))?;
            let seed = *args.seeds.first().context("--seeds needs at least one seed")?;
            serde_json::to_value(audit_env::baseline::findings_for(task, seed, &cfg))?
        }
        None => serde_json::to_value(audit_env::baseline::run(&args.seeds, &cfg))?,
    };
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

fn main() -> Result<()> {
    // Piping JSON output into `head` must end quietly, not panic on a closed stdout.
    #[cfg(unix)]
    // SAFETY: restoring the default SIGPIPE disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LEDGERSHIELD_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Load(args) => load::run(args),
        Command::Cases(args) => cases::run(args, std::env::var_os("LEDGERSHIELD_FIXTURES").map(PathBuf::from).as_ref()),
        Command::Run(args) => run::run(args),
        Command::Report(args) => report::run(args),
        Command::Export(args) => export::run(args),
        Command::AuditBaseline(args) => audit_baseline(args),
    }
}

/// Load the fixture set from a directory or the embedded default.
pub fn load_fixtures(dir: Option<&PathBuf>) -> Result<FixtureSet> {
    let set = match dir {
        Some(d) => FixtureSet::load_dir(d).with_context(|| format!("loading fixtures from {}", d.display()))?,
        None => FixtureSet::embedded().context("embedded fixtures")?,
    };
    let issues = ls_core::validate::validate_set(&set);
    if !issues.is_empty() {
        for i in issues.iter().take(20) {
            tracing::warn!(case = %i.case_id, "{}", i.message);
        }
        anyhow::bail!("{} fixture validation issue(s); fix the fixture files", issues.len());
    }
    Ok(set)
}

fn serve(args: ServeArgs) -> Result<()> {
    let rt = match args.workers {
        // One worker: a single-threaded runtime has no cross-thread wake-ups at all.
        Some(1) => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        Some(n) => tokio::runtime::Builder::new_multi_thread().worker_threads(usize::from(n)).enable_all().build()?,
        None => tokio::runtime::Builder::new_multi_thread().enable_all().build()?,
    };
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port)).await.with_context(|| format!("binding {}:{}", args.host, args.port))?;
        let addr = listener.local_addr()?;
        match args.env_kind {
            EnvKind::Controlbench => {
                let set = cases::serve_pool(load_fixtures(args.fixtures.as_ref())?)?;
                let cases = set.cases.len();
                let mode = match args.track_mode {
                    TrackModeArg::Blind => TrackMode::Blind,
                    TrackModeArg::Instrumented => TrackMode::Instrumented,
                };
                let state = ls_server::app_state(CasePool::new(set), EnvConfig { track_mode: mode }, args.max_sessions, Duration::from_secs(args.session_idle_secs));
                ls_server::spawn_session_sweeper(state.clone());
                tracing::info!(cases, track_mode = mode.as_str(), "ControlBench environment ready");
                println!("LedgerShield listening on http://{addr}");
                axum::serve(listener, ls_server::make_service(ls_server::router(state))).with_graceful_shutdown(shutdown()).await?;
            }
            EnvKind::Audit => {
                let config = audit_env::http::AuditConfig::from_env().map_err(|e| anyhow::anyhow!("audit configuration: {e}"))?;
                tracing::info!("Financial Audit environment ready");
                println!("LedgerShield listening on http://{addr}");
                // Connection info feeds the audit environment's per-IP rate limiter (ControlBench
                // does not read it; recording it costs two allocations per request).
                axum::serve(listener, ls_server::audit::router(config).into_make_service_with_connect_info::<std::net::SocketAddr>()).with_graceful_shutdown(shutdown()).await?;
            }
        }
        Ok(())
    })
}

async fn shutdown() {
    let _ = tokio::signal::ctrl_c().await;
}
