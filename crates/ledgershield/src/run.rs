//! `ledgershield run`: play cases with an agent (in-process or over HTTP), print per-case results,
//! store the run (episodes and trajectories) in the database.

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use ls_agents::llm::{ContractPrinter, PromptOptions};
use ls_agents::{
    offline_agent, run_episode, Agent, Assistance, CallStats, EpisodeRecord, HttpEnv, LlmAgent,
    LlmConfig, LocalEnv, StepObserver,
};
use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, TrackMode};
use ls_report::gen::{CaseSource, LsGen};
use ls_report::metrics::r4;
use ls_store::{EpisodeRow, RunRow, Store};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Json,
    /// The `[START]`/`[STEP]`/`[END]` stdout contract.
    Contract,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Suite {
    Public,
    Holdout,
    Twins,
    Certificate,
    Quarter,
    /// The headline's twin pairs of seeds `--seed`..`--seed`+4 (both members of each).
    Pairs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Agent: teacher, random, naive-pay, always-escalate, llm (and teacher ablations
    /// teacher-no-controls, teacher-no-certificate, teacher-no-artifact-wait).
    #[arg(long, default_value = "teacher")]
    pub agent: String,
    /// Case ids (comma separated); default: every case of the suite.
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Which cases to play in-process (generated suites use `--seed`).
    #[arg(long, value_enum, default_value = "public")]
    pub suite: Suite,
    /// Play against a running server instead of in-process.
    #[arg(long)]
    pub url: Option<String>,
    /// Output format (the llm agent defaults to the stdout contract).
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,
    /// Seed for agents' randomness and for generated suites.
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// Trials per case (pass^k).
    #[arg(long, default_value_t = 1)]
    pub pass_k: u32,
    /// Pass threshold for pass^k.
    #[arg(long, default_value_t = 0.85)]
    pub pass_threshold: f64,
    /// Observation mode for in-process runs.
    #[arg(long, default_value = "blind")]
    pub track_mode: String,
    /// OpenAI-compatible API base (llm agent), e.g. https://api.openai.com/v1.
    #[arg(long, env = "API_BASE_URL")]
    pub api_base: Option<String>,
    /// Model name (llm agent).
    #[arg(long, env = "MODEL_NAME", default_value = "gpt-4o-mini")]
    pub model: String,
    /// Sampling temperature (llm agent).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Per-request timeout in seconds (llm and HTTP).
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,
    /// Retries per model call.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// Reply token cap per model call (llm agent; default 3072 for every model).
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// llm agent, assistance (an assisted run, ranked on its own track): show the teacher's
    /// suggested next action in every step prompt.
    #[arg(long)]
    pub llm_teacher_hint: bool,
    /// llm agent, assistance: repair broken JSON replies (recover the action name and decision).
    #[arg(long)]
    pub llm_repair: bool,
    /// llm agent, assistance: agent-side guardrails (sanitise each submission to the contract,
    /// attach the verification records the episode revealed).
    #[arg(long)]
    pub llm_guardrails: bool,
    /// llm agent: show the evidence ledger (what the episode revealed so far) in each step prompt.
    #[arg(long)]
    pub llm_ledger: bool,
    /// llm agent: show the observation's legal candidate actions, numbered, in each step prompt.
    #[arg(long)]
    pub llm_candidates: bool,
    /// llm agent: decode against the candidate actions (the action taken is always one of them;
    /// implies --llm-candidates).
    #[arg(long)]
    pub llm_constrain: bool,
    /// Database path.
    #[arg(long, env = "LEDGERSHIELD_DB_PATH", hide_env_values = true, default_value = ls_store::DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// Do not store the run.
    #[arg(long)]
    pub no_store: bool,
}

#[derive(Debug, Clone, Serialize)]
struct EpisodeOut {
    case_id: String,
    trial: u32,
    final_score: f64,
    result_class: String,
    decision: String,
    steps: u32,
    reward: f64,
    unsafe_release: bool,
    errors: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
struct Metrics {
    episode_count: usize,
    case_count: usize,
    mean_score: f64,
    min_score: f64,
    unsafe_release_rate: f64,
    control_satisfied_resolution_rate: f64,
    pass_rate: f64,
    pass_k_consistent_rate: f64,
    mean_steps: f64,
    mean_reward: f64,
    result_class_counts: BTreeMap<String, usize>,
    api_calls: u64,
}

#[derive(Debug, Clone, Serialize)]
struct RunOut {
    run_id: String,
    agent: String,
    model: String,
    agent_type: String,
    suite: String,
    seed: u64,
    pass_k: u32,
    episodes: Vec<EpisodeOut>,
    metrics: Metrics,
    /// How a model agent played (track, assistance, reply cap); absent for scripted agents.
    #[serde(skip_serializing_if = "Option::is_none")]
    harness: Option<ls_agents::Harness>,
    /// The model endpoint's calls over the run (tokens and seconds included).
    #[serde(skip_serializing_if = "Option::is_none")]
    model_calls: Option<CallStats>,
}

/// The llm agent's key: `OPENAI_API_KEY`, else `LEDGERSHIELD_API_KEY` (read here, in the binary).
pub(crate) fn llm_key_from_env() -> Option<String> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    var("OPENAI_API_KEY").or_else(|| var("LEDGERSHIELD_API_KEY"))
}

/// A stored id that is never reused: `{prefix}-{stamp}-{random}`, the UTC stamp without `:` and
/// `-` (`unstamped` when empty) and 64 bits from the OS random source (two ids made in the same
/// second differ). Runs, comparisons and reports are stored under such ids.
pub(crate) fn stamped_id(prefix: &str, stamp: &str) -> String {
    let stamp = if stamp.is_empty() {
        "unstamped".to_owned()
    } else {
        stamp.replace([':', '-'], "")
    };
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{stamp}-{}", &random[..16])
}

/// A run id: agent, seed, UTC second and 64 random bits.
fn new_run_id(agent: &str, seed: u64) -> String {
    stamped_id(&format!("run-{agent}-{seed}"), &ls_store::utc_now())
}

/// Set by SIGINT/SIGTERM during `run --url`: the episode in progress ends at its next request,
/// its session is closed and the run stops (a second signal exits at once with status 130).
static INTERRUPTED: std::sync::LazyLock<Arc<AtomicBool>> =
    std::sync::LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Route SIGINT and SIGTERM to [`INTERRUPTED`] so sessions are closed before the run stops
/// (`signal-hook`: the handler only sets the flag, or exits when it is already set).
fn catch_interrupts() {
    #[cfg(unix)]
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The conditional exit first, so the first signal only sets the flag.
        let registered =
            signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&INTERRUPTED))
                .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&INTERRUPTED)));
        if let Err(e) = registered {
            eprintln!(
                "warning: cannot catch signal {signal} ({e}); an interrupt stops the run at once"
            );
        }
    }
}

fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Closes one server session (`DELETE /session`) when dropped: after the episode, after an
/// error, and after an interrupt, so a run leaves no session behind.
struct SessionCloser<'a> {
    http: &'a reqwest::blocking::Client,
    url: String,
    session: String,
}

impl Drop for SessionCloser<'_> {
    fn drop(&mut self) {
        let r = self
            .http
            .delete(format!("{}/session", self.url.trim_end_matches('/')))
            .header("x-session-id", &self.session)
            .send();
        match r {
            // 404: the server never created it (the reset was refused) or it already expired.
            Ok(resp) if resp.status().is_success() || resp.status().as_u16() == 404 => {}
            Ok(resp) => {
                tracing::warn!(session = %self.session, status = %resp.status(), "closing the session failed")
            }
            Err(e) => {
                tracing::warn!(session = %self.session, error = %e, "closing the session failed")
            }
        }
    }
}

/// An HTTP client that remembers an infrastructure failure (the reset refused, the transport
/// broken), which ends the run instead of counting as the agent's episode.
struct Watched<'a> {
    inner: &'a mut dyn ls_agents::EnvClient,
    failure: Option<String>,
}

impl ls_agents::EnvClient for Watched<'_> {
    fn reset(
        &mut self,
        req: &ResetRequest,
    ) -> std::result::Result<ls_env::StepEnvelope, ls_agents::ClientError> {
        if interrupted() {
            self.failure = Some("interrupted".into());
            return Err(ls_agents::ClientError::Reset("interrupted".into()));
        }
        self.inner
            .reset(req)
            .inspect_err(|e| self.failure = Some(e.to_string()))
    }

    fn step(
        &mut self,
        action_type: &str,
        payload: &serde_json::Map<String, serde_json::Value>,
    ) -> std::result::Result<ls_env::StepEnvelope, ls_agents::ClientError> {
        if interrupted() {
            self.failure = Some("interrupted".into());
            return Err(ls_agents::ClientError::Transport("interrupted".into()));
        }
        self.inner.step(action_type, payload).inspect_err(|e| {
            if matches!(e, ls_agents::ClientError::Transport(_)) {
                self.failure = Some(e.to_string());
            }
        })
    }

    fn institutional_memory(&mut self) -> Option<serde_json::Map<String, serde_json::Value>> {
        self.inner.institutional_memory()
    }
}

/// A server URL reduced to scheme, host and port (no credentials, path or query), as stored in a
/// run's provenance.
pub fn server_origin(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{}://{h}:{p}", u.scheme()),
            (Some(h), None) => format!("{}://{h}", u.scheme()),
            _ => u.scheme().to_owned(),
        },
        Err(_) => "unparsed".into(),
    }
}

/// The llm agent's configuration (key from the environment, timeout 1..=600 s, at most 8
/// retries, a token cap in 1..=32768); `run` and `compare` build theirs here.
pub(crate) fn llm_config(
    api_base: String,
    model: &str,
    temperature: f64,
    timeout_secs: u64,
    retries: u32,
    max_tokens: Option<u32>,
) -> LlmConfig {
    LlmConfig {
        api_base,
        model: model.to_owned(),
        api_key: llm_key_from_env(),
        temperature,
        timeout: Duration::from_secs(timeout_secs.clamp(1, 600)),
        max_retries: retries.min(8),
        backoff: Duration::from_millis(500),
        max_tokens: max_tokens.map(|t| t.clamp(1, 32_768)),
    }
}

/// The database at `db`, opened (with the target in the error, its password masked).
pub(crate) fn open_store(db: &std::path::Path) -> Result<Store> {
    Store::open(db).with_context(|| format!("opening {}", crate::db_target::shown(db)))
}

/// A run's episode rows, in order: each record with the base case it was derived from.
pub(crate) fn episode_rows<'a>(
    run_id: &str,
    records: impl IntoIterator<Item = (String, &'a EpisodeRecord)>,
) -> Vec<EpisodeRow> {
    records
        .into_iter()
        .enumerate()
        .map(|(i, (base_case_id, r))| EpisodeRow {
            run_id: run_id.to_owned(),
            idx: i as u32,
            case_id: r.case_id.clone(),
            base_case_id,
            task_type: r.task_type.clone(),
            final_score: r.final_score,
            result_class: r.result_class.clone(),
            decision: r.decision.clone(),
            steps: r.steps,
            total_reward: r.total_reward,
            record: serde_json::to_value(r).unwrap_or_default(),
        })
        .collect()
}

pub fn make_agent(args: &RunArgs) -> Result<Box<dyn Agent>> {
    if args.agent == "llm" {
        let base = args
            .api_base
            .clone()
            .context("--api-base (or API_BASE_URL) is required for the llm agent")?;
        return Ok(Box::new(
            LlmAgent::new(llm_config(
                base,
                &args.model,
                args.temperature,
                args.timeout_secs,
                args.retries,
                args.max_tokens,
            ))
            .with_options(PromptOptions {
                ledger: args.llm_ledger,
                candidates: args.llm_candidates || args.llm_constrain,
                constrain: args.llm_constrain,
            })
            .with_assistance(Assistance {
                teacher_hint: args.llm_teacher_hint,
                repair: args.llm_repair,
                guardrails: args.llm_guardrails,
            }),
        ));
    }
    offline_agent(&args.agent).with_context(|| {
        format!(
            "unknown agent '{}'; use teacher, random, naive-pay, always-escalate or llm",
            args.agent
        )
    })
}

fn suite_cases(set: &FixtureSet, suite: Suite, seed: u64) -> Result<Vec<Case>> {
    let gen = LsGen { set: set.clone() };
    let r = match suite {
        Suite::Public => Ok(set.cases.clone()),
        Suite::Holdout => gen.holdout(seed, 1),
        Suite::Twins => Ok(set
            .cases
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                matches!(
                    c.task_type,
                    ls_core::TaskType::TaskD | ls_core::TaskType::TaskE
                ) && c.gold.unsafe_if_pay
            })
            .filter_map(|(i, c)| gen.twin(c, seed.wrapping_add(i as u64)).ok().flatten())
            .collect()),
        Suite::Certificate => gen.certificate_required(),
        Suite::Quarter => gen.quarter(100, seed),
        Suite::Pairs => {
            ls_report::headline::pairs(set, &gen, &ls_report::headline::seeds_from(seed))
                .map(|p| p.into_iter().flat_map(|p| [p.benign, p.risky]).collect())
        }
    };
    r.map_err(|e| anyhow::anyhow!(e))
}

fn base_case(case: Option<&Case>, case_id: &str) -> String {
    case.and_then(|c| c.generator_metadata.as_ref())
        .and_then(|g| g.base_case_id.clone())
        .unwrap_or_else(|| case_id.split("::").next().unwrap_or(case_id).to_owned())
}

struct Tee<'a> {
    contract: Option<ContractPrinter<std::io::Stdout>>,
    bar: &'a ProgressBar,
}

impl StepObserver for Tee<'_> {
    fn on_start(&mut self, case_id: &str, model: &str) {
        self.bar.set_message(case_id.to_owned());
        if let Some(c) = &mut self.contract {
            c.on_start(case_id, model);
        }
    }
    fn on_step(&mut self, rec: &ls_agents::StepRecord) {
        if let Some(c) = &mut self.contract {
            c.on_step(rec);
        }
    }
    fn on_end(&mut self, rec: &EpisodeRecord) {
        if let Some(c) = &mut self.contract {
            c.on_end(rec);
        }
    }
}

pub fn run(args: RunArgs) -> Result<()> {
    let set = FixtureSet::embedded().context("embedded fixtures")?;
    let format = args.format.unwrap_or(if args.agent == "llm" {
        OutputFormat::Contract
    } else {
        OutputFormat::Table
    });
    let mut agent = make_agent(&args)?;
    let cases = select_cases(&args, &set)?;
    let pass_k = args.pass_k.clamp(1, 16);
    let run_id = new_run_id(&args.agent, args.seed);
    let records = play_all(&args, &set, &cases, agent.as_mut(), format, &run_id)?;
    endpoint_answered(records.iter().map(|p| &p.2), &args.model)?;
    let out = RunOut {
        run_id: run_id.clone(),
        agent: agent.name(),
        model: agent.model(),
        agent_type: agent.agent_type(),
        suite: format!("{:?}", args.suite).to_lowercase(),
        seed: args.seed,
        pass_k,
        episodes: records.iter().map(|(_, t, r)| episode_out(*t, r)).collect(),
        metrics: metrics(&records, args.pass_threshold, agent.api_calls()),
        harness: agent.harness(),
        model_calls: agent.call_stats(),
    };
    if !args.no_store {
        store_run(&args, &out, &records)?;
    }
    print_run(format, &out)
}

/// A model run whose endpoint answered no call is an error, not a score of the model: nothing is
/// stored and the command fails (`compare` and `POST /agent-runs` refuse the same way).
pub(crate) fn endpoint_answered<'a>(
    records: impl IntoIterator<Item = &'a EpisodeRecord>,
    model: &str,
) -> Result<()> {
    let calls: Vec<CallStats> = records.into_iter().filter_map(|r| r.model_calls).collect();
    let total = CallStats::total(&calls);
    if total.endpoint_failed() {
        bail!(
            "the model endpoint answered none of {} calls for model '{model}' (every call failed: check --api-base, the model name and the key); the run is not scored or stored",
            total.calls
        );
    }
    Ok(())
}

/// The cases to play: the suite's (generated ones from `--seed`), or the `--cases` named in it
/// (over `--url`, the server's own cases: an id the suite lacks is sent as it is).
fn select_cases(args: &RunArgs, set: &FixtureSet) -> Result<Vec<Case>> {
    let suite_cases = if args.url.is_some() && args.suite != Suite::Public {
        bail!("--url plays the server's own cases; use --suite public with --url")
    } else {
        suite_cases(set, args.suite, args.seed)?
    };
    let cases: Vec<Case> = if args.cases.is_empty() {
        suite_cases
    } else {
        let mut out = Vec::new();
        for id in &args.cases {
            match suite_cases.iter().find(|c| c.case_id == id.trim()) {
                Some(c) => out.push(c.clone()),
                None if args.url.is_some() => {
                    let mut c = suite_cases.first().cloned().context("no cases")?;
                    c.case_id = id.trim().to_owned();
                    out.push(c);
                }
                None => bail!("unknown case id '{}' in suite {:?}", id, args.suite),
            }
        }
        out
    };
    if cases.len() > 10_000 {
        bail!("too many cases ({})", cases.len());
    }
    Ok(cases)
}

/// One recorded episode: the case it played (when known), its trial and its record.
type Played<'a> = (Option<&'a Case>, u32, EpisodeRecord);

/// Every case `pass_k` times, in-process or over `--url` (a session per episode, closed after).
fn play_all<'a>(
    args: &RunArgs,
    set: &FixtureSet,
    cases: &'a [Case],
    agent: &mut dyn Agent,
    format: OutputFormat,
    run_id: &str,
) -> Result<Vec<Played<'a>>> {
    let pool = Arc::new(CasePool::from_parts(
        cases.iter().cloned().map(Arc::new).collect(),
        Arc::new(set.master.clone()),
    ));
    let mode = TrackMode::parse(&args.track_mode);
    let pass_k = args.pass_k.clamp(1, 16);
    let debug = std::env::var("LEDGERSHIELD_DEBUG").is_ok_and(|v| v == "1");
    let bar = if format == OutputFormat::Contract && !debug {
        ProgressBar::hidden()
    } else {
        ProgressBar::new((cases.len() as u64) * u64::from(pass_k))
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut tee = Tee {
        contract: (format == OutputFormat::Contract)
            .then(|| ContractPrinter::new(std::io::stdout(), &agent.model())),
        bar: &bar,
    };
    let mut records: Vec<Played<'a>> = Vec::new();
    let closer_http = match &args.url {
        Some(_) => {
            catch_interrupts();
            Some(
                reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()?,
            )
        }
        None => None,
    };
    for case in cases {
        for t in 0..pass_k {
            let req = ResetRequest {
                case_id: Some(case.case_id.clone()),
                ..Default::default()
            };
            let seed = args.seed.wrapping_add(u64::from(t));
            let rec = match &args.url {
                Some(url) => {
                    let session = format!("{run_id}-{}-{t}", records.len());
                    let _close = closer_http.as_ref().map(|http| SessionCloser {
                        http,
                        url: url.clone(),
                        session: session.clone(),
                    });
                    let mut http = HttpEnv::new(
                        url,
                        &session,
                        Duration::from_secs(args.timeout_secs.clamp(1, 600)),
                    )?;
                    let mut client = Watched {
                        inner: &mut http,
                        failure: None,
                    };
                    let rec = run_episode(agent, &mut client, &req, seed, &mut tee);
                    if let Some(why) = client.failure {
                        // The server is unreachable or refused the reset: not an agent failure.
                        bar.finish_and_clear();
                        bail!(
                            "{why} (case {}, trial {t}); the run is not stored",
                            case.case_id
                        );
                    }
                    rec
                }
                None => {
                    let mut env = Environment::new(pool.clone(), EnvConfig { track_mode: mode });
                    run_episode(agent, &mut LocalEnv::new(&mut env), &req, seed, &mut tee)
                }
            };
            bar.inc(1);
            records.push((Some(case), t, rec));
        }
    }
    bar.finish_and_clear();
    Ok(records)
}

fn episode_out(trial: u32, r: &EpisodeRecord) -> EpisodeOut {
    EpisodeOut {
        case_id: r.case_id.clone(),
        trial,
        final_score: r.final_score,
        result_class: r.result_class.clone(),
        decision: r.decision.clone(),
        steps: r.steps,
        reward: r.total_reward,
        unsafe_release: r.unsafe_release,
        errors: r.errors.clone(),
    }
}

/// The run's figures over its episodes (pass rates against `pass_threshold`).
fn metrics(records: &[Played], pass_threshold: f64, api_calls: u64) -> Metrics {
    let episodes: Vec<&EpisodeRecord> = records.iter().map(|p| &p.2).collect();
    let n = episodes.len().max(1) as f64;
    let mut classes = BTreeMap::new();
    for e in &episodes {
        *classes.entry(e.result_class.clone()).or_insert(0) += 1;
    }
    let mut per_case: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for e in &episodes {
        per_case
            .entry(e.case_id.as_str())
            .or_default()
            .push(e.final_score);
    }
    Metrics {
        episode_count: episodes.len(),
        case_count: per_case.len(),
        mean_score: r4(episodes.iter().map(|e| e.final_score).sum::<f64>() / n),
        min_score: r4(episodes
            .iter()
            .map(|e| e.final_score)
            .fold(f64::INFINITY, f64::min)
            .min(1.0)),
        unsafe_release_rate: r4(episodes.iter().filter(|e| e.unsafe_release).count() as f64 / n),
        control_satisfied_resolution_rate: r4(episodes
            .iter()
            .map(|r| r.control_satisfied_resolution)
            .sum::<f64>()
            / n),
        pass_rate: r4(episodes
            .iter()
            .filter(|e| e.final_score >= pass_threshold)
            .count() as f64
            / n),
        pass_k_consistent_rate: r4(per_case
            .values()
            .filter(|v| v.iter().all(|s| *s >= pass_threshold))
            .count() as f64
            / per_case.len().max(1) as f64),
        mean_steps: r4(episodes.iter().map(|e| f64::from(e.steps)).sum::<f64>() / n),
        mean_reward: r4(episodes.iter().map(|e| e.total_reward).sum::<f64>() / n),
        result_class_counts: classes,
        api_calls,
    }
}

/// Store the run and its episodes, with the provenance `report` reads in the run's summary.
fn store_run(args: &RunArgs, out: &RunOut, records: &[Played]) -> Result<()> {
    let run_id = &out.run_id;
    let mut store = open_store(&args.db)?;
    let rows = episode_rows(
        run_id,
        records
            .iter()
            .map(|(case, _, r)| (base_case(*case, &r.case_id), r)),
    );
    let row = RunRow {
        run_id: run_id.clone(),
        kind: "run".into(),
        agent: out.agent.clone(),
        model: out.model.clone(),
        agent_type: out.agent_type.clone(),
        seed: args.seed,
        created_at: ls_store::utc_now(),
        case_count: out.metrics.case_count as u32,
        mean_score: out.metrics.mean_score,
        summary: run_summary(args, out)?,
    };
    store.insert_run(&row, &rows)?;
    eprintln!(
        "stored run {run_id} in {}",
        crate::db_target::shown(&args.db)
    );
    Ok(())
}

/// The metrics plus the suite (the workbench's run list shows it) and the provenance read by
/// `report` when the run is put on the leaderboard.
fn run_summary(args: &RunArgs, out: &RunOut) -> Result<serde_json::Value> {
    let mut s = serde_json::to_value(&out.metrics)?;
    s["suite"] = out.suite.clone().into();
    s["pass_k"] = out.pass_k.into();
    s["pass_threshold"] = args.pass_threshold.into();
    s["track_mode"] = if args.url.is_some() {
        "server-configured".into()
    } else {
        TrackMode::parse(&args.track_mode).as_str().into()
    };
    s["source"] = if args.url.is_some() {
        "server"
    } else {
        "in-process"
    }
    .into();
    if let Some(url) = &args.url {
        s["server"] = server_origin(url).into();
    }
    if let Some(h) = &out.harness {
        s["temperature"] = args.temperature.into();
        s["track"] = h.track.clone().into();
        s["assistance"] = serde_json::to_value(&h.assistance)?;
        s["max_tokens"] = h.max_tokens.into();
    }
    if let Some(c) = &out.model_calls {
        s["model_calls"] = serde_json::to_value(c)?;
    }
    Ok(s)
}

fn print_run(format: OutputFormat, out: &RunOut) -> Result<()> {
    match format {
        OutputFormat::Contract => {}
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(out)?),
        OutputFormat::Table => {
            println!(
                "{:<34} {:>6} {:<30} {:<15} {:>5} {:>8}",
                "case", "score", "result_class", "decision", "steps", "reward"
            );
            for e in &out.episodes {
                println!(
                    "{:<34} {:>6.4} {:<30} {:<15} {:>5} {:>8.4}",
                    e.case_id, e.final_score, e.result_class, e.decision, e.steps, e.reward
                );
            }
            let m = &out.metrics;
            println!("\nagent {} ({}): mean {:.4}, min {:.4}, unsafe release rate {:.4}, CSR {:.4}, pass rate {:.4}, pass^{} consistent {:.4}", out.agent, out.model, m.mean_score, m.min_score, m.unsafe_release_rate, m.control_satisfied_resolution_rate, m.pass_rate, out.pass_k, m.pass_k_consistent_rate);
        }
    }
    Ok(())
}
