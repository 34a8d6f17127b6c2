//! `ledgershield`: the command line.
//!
//! * `serve`: run an environment server (ControlBench by default, built-in fixtures, no setup).
//! * `load`: play whole episodes over HTTP at several concurrencies and report throughput,
//!   latency percentiles, server CPU per episode and RSS.
//! * `run`, `report`, `compare`, `export`: agents, the benchmark report, live model comparison
//!   and training data (docs/agents.md, docs/report.md).

mod aging;
mod audit_llm;
mod cases;
mod compare;
mod db_target;
mod export;
mod http1;
mod load;
mod operator_key;
mod reply_fields;
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
#[command(
    name = "ledgershield",
    version,
    about = "LedgerShield: financial-control RL environments (ControlBench and Financial Audit)"
)]
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
    #[arg(
        long = "env",
        value_enum,
        env = "LEDGERSHIELD_ENV",
        default_value = "controlbench"
    )]
    env_kind: EnvKind,
    /// Load ControlBench fixtures from a directory (same layout as `fixtures/controlbench`).
    #[arg(long, env = "LEDGERSHIELD_FIXTURES")]
    fixtures: Option<PathBuf>,
    /// The store behind the report routes: a SQLite file, or a `postgres://…` URL shared by
    /// every replica (default `data/ledgershield.db`).
    #[arg(long, env = "LEDGERSHIELD_DB_PATH", hide_env_values = true)]
    db: Option<String>,
    /// Blind (default) hides SPRT state, tool rankings and the reward machine.
    #[arg(
        long,
        value_enum,
        env = "LEDGERSHIELD_TRACK_MODE",
        default_value = "blind",
        ignore_case = true
    )]
    track_mode: TrackModeArg,
    /// Most concurrent sessions.
    #[arg(long, env = "LEDGERSHIELD_MAX_SESSIONS", default_value_t = 1024)]
    max_sessions: usize,
    /// Named sessions one client (an IPv4 address, an IPv6 /64) may hold; past it its least
    /// recently used session is closed for the new one (default: a quarter of --max-sessions).
    #[arg(long, env = "LEDGERSHIELD_MAX_SESSIONS_PER_CLIENT", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_sessions_per_client: Option<u32>,
    /// Seconds after which an idle session expires.
    #[arg(long, env = "LEDGERSHIELD_SESSION_IDLE_SECS", default_value_t = 1800)]
    session_idle_secs: u64,
    /// Runtime worker threads (default: one per CPU core; 1 runs everything on one thread).
    #[arg(long, env = "LEDGERSHIELD_WORKERS", value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: Option<u16>,
    /// Origins allowed to call the server from a browser, comma-separated (`*` for any). Unset:
    /// CORS is off and requests carrying a foreign `Origin` are refused.
    #[arg(long, env = "CORS_ORIGINS", default_value = "")]
    cors_origins: String,
    /// `Host` names served, comma-separated (DNS-rebinding guard): on a loopback bind in
    /// addition to loopback names; on another bind, when set, the only names served.
    #[arg(long, env = "ALLOWED_HOSTS", default_value = "")]
    allowed_hosts: String,
    /// Operator key (`X-API-Key`). Unset: the server generates one at start and writes it to
    /// the operator key file.
    #[arg(long, env = "ADMIN_API_KEY", hide_env_values = true)]
    admin_api_key: Option<String>,
    /// Where a generated operator key is written (mode 0600; default: `operator-key-<port>` in
    /// the state directory, one file per server); CLI commands read it from there.
    #[arg(long, env = operator_key::ENV_KEY_FILE)]
    operator_key_file: Option<PathBuf>,
    /// Take the client address from `X-Forwarded-For` / `X-Real-IP` on connections from
    /// `--trusted-proxies` (1/0, true/false, yes/no, on/off).
    #[arg(long, env = "TRUST_PROXY_HEADERS", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool_arg)]
    trust_proxy_headers: bool,
    /// Reverse proxies whose forwarding headers are read (addresses or CIDR ranges,
    /// comma-separated; default with --trust-proxy-headers: loopback peers).
    #[arg(long, env = "TRUSTED_PROXIES", default_value = "")]
    trusted_proxies: String,
    /// Requests per minute per client address (loopback is not throttled unless --rate-limit-loopback).
    #[arg(long, env = "RATE_LIMIT_PER_MIN", default_value_t = 6000, value_parser = clap::value_parser!(u32).range(1..))]
    rate_limit_per_min: u32,
    /// Requests per minute per session id (`X-Session-Id`).
    #[arg(long, env = "RATE_LIMIT_SESSION_PER_MIN", default_value_t = 1200, value_parser = clap::value_parser!(u32).range(1..))]
    rate_limit_session_per_min: u32,
    /// Throttle loopback clients too (1/0, true/false, yes/no, on/off).
    #[arg(long, env = "RATE_LIMIT_LOOPBACK", default_value = "false", num_args = 0..=1, default_missing_value = "true", value_parser = parse_bool_arg)]
    rate_limit_loopback: bool,
    /// Most client addresses the rate limiter remembers (least recently seen forgotten first).
    #[arg(long, env = "RATE_LIMIT_CLIENTS", default_value_t = ls_server::config::DEFAULT_RATE_LIMIT_CLIENTS as u32, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    rate_limit_clients: u32,
    /// Seconds a connection may take to send a request head; also the keep-alive idle timeout.
    #[arg(long, env = "LEDGERSHIELD_HEADER_TIMEOUT_SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout_secs: u64,
    /// Seconds a request body may take to arrive (408 after).
    #[arg(long, env = "LEDGERSHIELD_BODY_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    body_timeout_secs: u64,
    /// Most HTTP connections open at once; past it, new connections wait until one closes.
    #[arg(long, env = "LEDGERSHIELD_MAX_CONNECTIONS", default_value_t = ls_server::config::DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_connections: u32,
    /// Most HTTP connections open at once from one client address; past it a new connection
    /// from that address is answered 503 and closed.
    #[arg(long, env = "LEDGERSHIELD_MAX_CONNECTIONS_PER_CLIENT", default_value_t = ls_server::config::DEFAULT_MAX_CONNECTIONS_PER_CLIENT, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    max_connections_per_client: u32,
    /// Seconds in-flight requests get to finish after SIGTERM/SIGINT.
    #[arg(long, env = "LEDGERSHIELD_SHUTDOWN_GRACE_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=600))]
    shutdown_grace_secs: u64,
}

/// A boolean flag or variable: 1/0, true/false, yes/no, on/off, any case.
fn parse_bool_arg(v: &str) -> Result<bool, String> {
    ls_server::config::parse_bool(v)
}

/// The process environment as a variable lookup (the only place the server's settings are read).
fn env_lookup(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

impl ServeArgs {
    /// The server configuration, parsed once here and passed down.
    fn server_config(&self, loopback_bind: bool) -> Result<ls_server::ServerConfig> {
        let security = ls_server::SecurityConfig {
            cors_origins: ls_server::config::split_list(&self.cors_origins),
            allowed_hosts: ls_server::config::split_list(&self.allowed_hosts),
            loopback_bind,
            admin_api_key: self.admin_api_key.clone().filter(|k| !k.is_empty()),
            trust_proxy_headers: self.trust_proxy_headers,
            trusted_proxies: ls_server::config::parse_proxies(&self.trusted_proxies)
                .map_err(anyhow::Error::msg)?,
            client_rate_per_min: self.rate_limit_per_min,
            session_rate_per_min: self.rate_limit_session_per_min,
            rate_limit_loopback: self.rate_limit_loopback,
            rate_limit_clients: self.rate_limit_clients as usize,
        };
        security.validate().map_err(anyhow::Error::msg)?;
        let max_sessions = self.max_sessions.max(1);
        Ok(ls_server::ServerConfig {
            max_sessions,
            max_sessions_per_client: self.max_sessions_per_client.map_or_else(
                || ls_server::sessions::default_per_client(max_sessions),
                |n| n as usize,
            ),
            session_idle: Duration::from_secs(self.session_idle_secs.max(1)),
            ws: ls_server::ws::WsConfig::from_lookup(env_lookup),
            security,
            timeouts: ls_server::Timeouts {
                header_read: Duration::from_secs(self.header_timeout_secs),
                body_read: Duration::from_secs(self.body_timeout_secs),
                shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
                max_connections: self.max_connections as usize,
                max_connections_per_client: self.max_connections_per_client as usize,
            },
        })
    }
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
    /// Compare several models (OpenAI-compatible endpoints) live on the same cases.
    Compare(compare::CompareArgs),
    /// Multi-currency aging report (0-30/31-60/61-90/90+) of the open AP items.
    Aging(aging::AgingArgs),
    /// Export training data (SFT prompt/completion JSONL or trajectories) from stored runs.
    Export(export::ExportArgs),
    /// Run the Financial Audit environment's rule-based baseline auditor (no LLM).
    AuditBaseline(AuditBaselineArgs),
    /// Audit with an LLM (any OpenAI-compatible endpoint): single tasks or whole campaigns, in
    /// process or against `serve --env audit`, with the seed's stdout contract; the run is stored.
    AuditLlm(audit_llm::AuditLlmArgs),
    /// The Financial Audit leaderboard: stored auditor runs (LLM and baseline) ranked.
    AuditLeaderboard(audit_llm::AuditBoardArgs),
}

#[derive(clap::Args, Debug, Clone)]
struct AuditBaselineArgs {
    /// Seeds to score every task on (default: the train seeds 42-51).
    #[arg(long, value_delimiter = ',', default_values_t = (42u64..=51).collect::<Vec<_>>())]
    seeds: Vec<u64>,
    /// Print the baseline's findings for one task (with `--seeds` giving one seed) instead of scores;
    /// with `--store`, play only this task.
    #[arg(long)]
    task: Option<String>,
    /// Play the baseline through the auditor driver (every task on every seed, or campaigns),
    /// store the run for `audit-leaderboard` and print the stdout contract and its summary.
    #[arg(long)]
    store: bool,
    /// With `--store`: play whole campaigns (one per seed).
    #[arg(long)]
    campaign: bool,
    /// With `--store --campaign`: periods per campaign.
    #[arg(long, default_value_t = 5)]
    periods: u32,
    #[arg(long, env = "LEDGERSHIELD_DB_PATH", default_value = ls_store::DEFAULT_DB_PATH)]
    db: PathBuf,
}

fn audit_baseline(args: AuditBaselineArgs) -> Result<()> {
    if args.store {
        return audit_llm::audit_baseline_stored(&audit_llm::AuditPlayArgs {
            tasks: args
                .task
                .map(|t| t.split(',').map(str::to_owned).collect())
                .unwrap_or_default(),
            seeds: args.seeds,
            campaign: args.campaign,
            periods: args.periods,
            url: None,
            operator_key_file: None,
            env_timeout_secs: 60,
            format: audit_llm::AuditFormat::Contract,
            db: args.db,
            no_store: false,
        });
    }
    let cfg = audit_env::baseline::BaselineConfig::default();
    let out = match &args.task {
        Some(t) => {
            let task: audit_env::model::TaskId =
                serde_json::from_value(serde_json::Value::String(t.clone()))
                    .map_err(|e| anyhow::anyhow!("--task: {e}"))?;
            let seed = *args
                .seeds
                .first()
                .context("--seeds needs at least one seed")?;
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
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LEDGERSHIELD_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: log files and container logs get plain text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Load(args) => load::run(args),
        Command::Cases(args) => cases::run(
            args,
            std::env::var_os("LEDGERSHIELD_FIXTURES")
                .map(PathBuf::from)
                .as_ref(),
        ),
        Command::Run(args) => run::run(args),
        Command::Report(args) => report::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Aging(args) => aging::run(
            args,
            &load_fixtures(
                std::env::var_os("LEDGERSHIELD_FIXTURES")
                    .map(PathBuf::from)
                    .as_ref(),
            )?,
        ),
        Command::Export(args) => export::run(args),
        Command::AuditBaseline(args) => audit_baseline(args),
        Command::AuditLlm(args) => audit_llm::audit_llm(args),
        Command::AuditLeaderboard(args) => audit_llm::audit_leaderboard(args),
    }
}

/// Load the fixture set from a directory or the embedded default.
pub fn load_fixtures(dir: Option<&PathBuf>) -> Result<FixtureSet> {
    let set = match dir {
        Some(d) => FixtureSet::load_dir(d)
            .with_context(|| format!("loading fixtures from {}", d.display()))?,
        None => FixtureSet::embedded().context("embedded fixtures")?,
    };
    let issues = ls_core::validate::validate_set(&set);
    if !issues.is_empty() {
        for i in issues.iter().take(20) {
            tracing::warn!(case = %i.case_id, "{}", i.message);
        }
        anyhow::bail!(
            "{} fixture validation issue(s); fix the fixture files",
            issues.len()
        );
    }
    Ok(set)
}

fn serve(args: ServeArgs) -> Result<()> {
    let rt = match args.workers {
        // One worker: a single-threaded runtime has no cross-thread wake-ups at all.
        Some(1) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        Some(n) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(usize::from(n))
            .enable_all()
            .build()?,
        None => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
    };
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
            .await
            .with_context(|| format!("binding {}:{}", args.host, args.port))?;
        let addr = listener.local_addr()?;
        let mut server = args.server_config(addr.ip().is_loopback())?;
        operator_key::ensure(&mut server.security, args.operator_key_file.clone(), addr)?;
        let shutdown = ls_server::Shutdown::new();
        tokio::spawn(ls_server::serve::on_signal(shutdown.clone()));
        let app = match args.env_kind {
            EnvKind::Controlbench => {
                let set = cases::serve_pool(load_fixtures(args.fixtures.as_ref())?)?;
                let cases = set.cases.len();
                let mode = match args.track_mode {
                    TrackModeArg::Blind => TrackMode::Blind,
                    TrackModeArg::Instrumented => TrackMode::Instrumented,
                };
                let db = ls_store::db_path(args.db.as_deref());
                let reports = ls_product::ReportStore::with_baseline(
                    db,
                    Some(
                        std::env::var_os("LEDGERSHIELD_HUMAN_BASELINE_PATH")
                            .map(PathBuf::from)
                            .unwrap_or_else(|| ls_report::human::DEFAULT_PATH.into()),
                    ),
                );
                let state = ls_server::app_state(
                    CasePool::new(set),
                    EnvConfig { track_mode: mode },
                    &server,
                    &shutdown,
                );
                ls_server::spawn_session_sweeper(state.clone());
                tracing::info!(
                    cases,
                    track_mode = mode.as_str(),
                    "ControlBench environment ready"
                );
                // The protocol router with the product routes (reports, runs, agent runs).
                ls_product::app(state, reports)
            }
            EnvKind::Audit => {
                let config = ls_server::audit::AuditConfig::from_lookup(env_lookup)
                    .map_err(|e| anyhow::anyhow!("audit configuration: {e}"))?;
                tracing::info!("Financial Audit environment ready");
                ls_product::audit_app(config, &server, &shutdown)
            }
        };
        // One write for both lines: the first stays exactly the one scripts read for the
        // address, and no later write can meet a pipe its reader closed after that line (SIGPIPE
        // is at its default, so it would end the server).
        // (Formatted first: `println!` with arguments writes piece by piece, the first line alone.)
        let banner = format!("LedgerShield listening on http://{addr}\nWorkbench: http://{addr}/ui/ · API reference: http://{addr}/docs\n");
        print!("{banner}");
        ls_server::serve(listener, app, server.timeouts, shutdown).await?;
        tracing::info!("server stopped");
        Ok(())
    })
}
