//! `ledgershield audit-llm`: the LLM auditor on the Financial Audit environment (single tasks or
//! whole campaigns, in process or against `serve --env audit`), with the seed's stdout contract;
//! `audit-baseline --store` plays the rule-based baseline the same way; both store their runs,
//! which `audit-leaderboard` ranks side by side (docs/agents.md, docs/audit.md).

use crate::run::{llm_key_from_env, open_store, server_origin, stamped_id};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ls_agents::audit::baseline::BaselineAuditor;
use ls_agents::audit::client::{AuditClient, HttpAudit, LocalAudit};
use ls_agents::audit::contract::ContractLines;
use ls_agents::audit::llm::{LlmAuditor, DEFAULT_AUDIT_MAX_TOKENS, DEFAULT_PROMPT_CHARS};
use ls_agents::audit::{
    run_campaign, run_task, AuditCampaignRecord, AuditObserver, AuditPolicy, AuditTaskRecord,
    Quiet, TASKS,
};
use ls_agents::chat::Endpoint;
use ls_report::audit_board::{
    audit_board, audit_board_markdown, AuditRunInput, AUDIT_CAMPAIGN_KIND, AUDIT_TASKS_KIND,
};
use ls_store::{EpisodeRow, RunRow};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum AuditFormat {
    /// The `[START]`/`[STEP]`/`[END]` lines (a JSON summary goes to stderr).
    Contract,
    /// The run as one JSON document.
    Json,
}

/// How and where an auditor plays (shared by `audit-llm` and `audit-baseline --store`).
#[derive(clap::Args, Debug, Clone)]
pub struct AuditPlayArgs {
    /// Tasks to play (comma separated; default all four).
    #[arg(long = "task", value_delimiter = ',')]
    pub tasks: Vec<String>,
    /// Seeds (comma separated): every task on every seed, or one campaign per seed.
    #[arg(long, value_delimiter = ',', default_value = "42")]
    pub seeds: Vec<u64>,
    /// Play whole campaigns (four specialists and the overseer per period) instead of tasks.
    #[arg(long)]
    pub campaign: bool,
    /// Periods per campaign.
    #[arg(long, default_value_t = 5)]
    pub periods: u32,
    /// Play against a running audit server (`ledgershield serve --env audit`) instead of in
    /// process. Sealed held-out grades are read with the operator key (`ADMIN_API_KEY`, or the
    /// operator key file).
    #[arg(long)]
    pub url: Option<String>,
    /// The operator key file of the server (`--url`), when `ADMIN_API_KEY` is not set.
    #[arg(long, env = crate::operator_key::ENV_KEY_FILE)]
    pub operator_key_file: Option<PathBuf>,
    /// Per-request timeout of environment calls in seconds.
    #[arg(long, default_value_t = 60)]
    pub env_timeout_secs: u64,
    #[arg(long, value_enum, default_value = "contract")]
    pub format: AuditFormat,
    #[arg(long, env = "LEDGERSHIELD_DB_PATH", default_value = ls_store::DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// Do not store the run.
    #[arg(long)]
    pub no_store: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct AuditLlmArgs {
    /// OpenAI-compatible API base, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, env = "API_BASE_URL")]
    pub api_base: String,
    /// Model name sent with every call.
    #[arg(long, env = "MODEL_NAME")]
    pub model: String,
    #[arg(long, default_value_t = 0.1)]
    pub temperature: f64,
    /// Reply token cap per call (the same for every model).
    #[arg(long, default_value_t = DEFAULT_AUDIT_MAX_TOKENS)]
    pub max_tokens: u32,
    /// Prompt budget in characters (document rows past it are left out, evenly, and counted).
    #[arg(long, default_value_t = DEFAULT_PROMPT_CHARS)]
    pub prompt_chars: usize,
    /// Per-call deadline in seconds (each retry has its own; all of a call's at most
    /// (retries + 1) times this).
    #[arg(long, default_value_t = 120)]
    pub timeout_secs: u64,
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    #[command(flatten)]
    pub play: AuditPlayArgs,
}

/// The key for the endpoint: `OPENAI_API_KEY`, `LEDGERSHIELD_API_KEY`, else `HF_TOKEN` (the
/// seed's variable).
fn endpoint_key() -> Option<String> {
    llm_key_from_env().or_else(|| {
        std::env::var("HF_TOKEN")
            .ok()
            .filter(|k| !k.trim().is_empty())
    })
}

/// The operator key: `ADMIN_API_KEY`, else the key file (`--operator-key-file`, else the default
/// file of the server on `url`'s port).
fn operator_key(file: Option<&PathBuf>, url: &str) -> Option<String> {
    if let Some(k) = std::env::var("ADMIN_API_KEY")
        .ok()
        .filter(|k| !k.is_empty())
    {
        return Some(k);
    }
    let path = file.cloned().unwrap_or_else(|| {
        crate::operator_key::default_path(|k| std::env::var(k).ok(), url_port(url))
    });
    std::fs::read_to_string(path)
        .ok()
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty())
}

/// The port of `url` (`http://host:port/...`), else 8000 (the server's default).
fn url_port(url: &str) -> u16 {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split('/').next().unwrap_or_default();
    host.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(8000)
}

pub fn audit_llm(args: AuditLlmArgs) -> Result<()> {
    let base = args.api_base.trim();
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        bail!("--api-base: an http:// or https:// URL, e.g. http://127.0.0.1:8080/v1");
    }
    if args.model.trim().is_empty() {
        bail!("--model must not be empty");
    }
    let mut auditor = LlmAuditor::new(
        Endpoint {
            api_base: base.trim_end_matches('/').to_owned(),
            model: args.model.trim().to_owned(),
            api_key: endpoint_key(),
            temperature: args.temperature,
            max_tokens: args.max_tokens.clamp(1, 32_768),
            timeout: Duration::from_secs(args.timeout_secs.clamp(1, 600)),
            max_retries: args.retries.min(8),
            backoff: Duration::from_millis(500),
        },
        args.prompt_chars,
    );
    let mut extra = json!({"api_base": server_origin(base)});
    play_and_store(&mut auditor, &args.play, &mut extra)
}

/// `audit-baseline --store`: the rule-based baseline played, stored and printed like an auditor.
pub fn audit_baseline_stored(play: &AuditPlayArgs) -> Result<()> {
    play_and_store(&mut BaselineAuditor::default(), play, &mut json!({}))
}

fn tasks_of(play: &AuditPlayArgs) -> Result<Vec<String>> {
    if play.tasks.is_empty() {
        return Ok(TASKS.iter().map(|t| (*t).to_owned()).collect());
    }
    play.tasks
        .iter()
        .map(|t| {
            audit_env::model::TaskId::parse(t.trim())
                .map(|id| id.as_str().to_owned())
                .with_context(|| format!("--task: unknown task '{t}' (use {})", TASKS.join(", ")))
        })
        .collect()
}

/// What was played.
enum Played {
    Tasks(Vec<AuditTaskRecord>),
    Campaigns(Vec<AuditCampaignRecord>),
}

fn play_and_store(
    policy: &mut dyn AuditPolicy,
    play: &AuditPlayArgs,
    extra: &mut Value,
) -> Result<()> {
    if play.seeds.is_empty() || play.seeds.len() > 64 {
        bail!("--seeds: give 1 to 64 seeds");
    }
    let tasks = tasks_of(play)?;
    let mut env: Box<dyn AuditClient> = match &play.url {
        Some(url) => Box::new(
            HttpAudit::new(
                url,
                Duration::from_secs(play.env_timeout_secs.clamp(1, 600)),
                operator_key(play.operator_key_file.as_ref(), url),
            )
            .map_err(anyhow::Error::msg)?,
        ),
        None => Box::new(LocalAudit::default()),
    };
    let mut lines = ContractLines {
        out: std::io::stdout(),
    };
    let obs: &mut dyn AuditObserver = match play.format {
        AuditFormat::Contract => &mut lines,
        AuditFormat::Json => &mut Quiet,
    };
    let played = if play.campaign {
        Played::Campaigns(
            play.seeds
                .iter()
                .map(|s| run_campaign(policy, env.as_mut(), *s, play.periods, obs))
                .collect(),
        )
    } else {
        let mut out = Vec::new();
        for s in &play.seeds {
            for t in &tasks {
                out.push(run_task(policy, env.as_mut(), t, *s, obs));
            }
        }
        Played::Tasks(out)
    };
    let calls = policy.call_stats();
    if calls.is_some_and(|c| c.endpoint_failed()) {
        bail!(
            "the model endpoint answered none of {} calls (every call failed: check --api-base, the model name and the key); the run is not scored or stored",
            calls.map(|c| c.calls).unwrap_or(0)
        );
    }
    extra["source"] = json!(env.source());
    if play.url.is_some() {
        extra["server"] = json!(env.source());
    }
    let summary = summary(policy, play, &tasks, &played, extra);
    if !play.no_store {
        store(policy, play, &played, &summary)?;
    }
    let doc = json!({"summary": summary, "records": match &played {
        Played::Tasks(t) => serde_json::to_value(t)?,
        Played::Campaigns(c) => serde_json::to_value(c)?,
    }});
    match play.format {
        AuditFormat::Json => println!("{}", serde_json::to_string_pretty(&doc)?),
        AuditFormat::Contract => eprintln!("{}", serde_json::to_string_pretty(&summary)?),
    }
    let failed = match &played {
        Played::Tasks(t) => t.iter().filter(|r| r.failed).count(),
        Played::Campaigns(c) => c.iter().filter(|r| !r.completed).count(),
    };
    if failed > 0 {
        bail!("{failed} episode(s) failed (see the records' errors)");
    }
    Ok(())
}

/// The run's summary: what was played, how, where, and the scores (the leaderboard reads it).
fn summary(
    policy: &dyn AuditPolicy,
    play: &AuditPlayArgs,
    tasks: &[String],
    played: &Played,
    extra: &Value,
) -> Value {
    let harness = policy.harness();
    let mut s = json!({
        "mode": if play.campaign { "campaign" } else { "tasks" },
        "seeds": play.seeds,
        "track": harness.as_ref().map_or(ls_agents::assist::UNASSISTED, |h| h.harness.track.as_str()),
        "assistance": harness.as_ref().map(|h| h.harness.assistance.clone()).unwrap_or_default(),
        "harness": harness,
        "model_calls": policy.call_stats(),
    });
    let (scores, seconds, episodes, failed): (Vec<f64>, f64, usize, usize) = match played {
        Played::Tasks(recs) => {
            let mut per: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
            for r in recs {
                per.entry(r.task_id.as_str())
                    .or_default()
                    .push(r.score.unwrap_or(0.0));
            }
            let means: BTreeMap<&str, f64> = per
                .iter()
                .map(|(k, v)| {
                    (
                        *k,
                        ls_report::metrics::r4(v.iter().sum::<f64>() / v.len() as f64),
                    )
                })
                .collect();
            s["tasks"] = json!(tasks);
            s["task_means"] = json!(means);
            (
                recs.iter().map(|r| r.score.unwrap_or(0.0)).collect(),
                recs.iter().map(|r| r.seconds).sum(),
                recs.len(),
                recs.iter().filter(|r| r.failed).count(),
            )
        }
        Played::Campaigns(recs) => {
            s["periods"] = json!(play.periods);
            s["campaign_scores"] = json!(recs.iter().map(|r| r.score).collect::<Vec<_>>());
            (
                recs.iter().map(|r| r.score.unwrap_or(0.0)).collect(),
                recs.iter().map(|r| r.seconds).sum(),
                recs.len(),
                recs.iter().filter(|r| !r.completed).count(),
            )
        }
    };
    s["mean_score"] = json!(ls_report::metrics::r4(
        scores.iter().sum::<f64>() / scores.len().max(1) as f64
    ));
    s["episodes"] = json!(episodes);
    s["failed_episodes"] = json!(failed);
    s["seconds"] = json!(ls_core::text::round_dp(seconds, 3));
    if let (Value::Object(o), Value::Object(x)) = (&mut s, extra) {
        for (k, v) in x {
            o.insert(k.clone(), v.clone());
        }
    }
    s
}

fn task_row(run_id: &str, idx: usize, case_id: String, r: &AuditTaskRecord) -> Result<EpisodeRow> {
    Ok(EpisodeRow {
        run_id: run_id.to_owned(),
        idx: idx as u32,
        case_id,
        base_case_id: r.task_id.clone(),
        task_type: r.task_id.clone(),
        final_score: r.score.unwrap_or(0.0),
        result_class: if r.failed { "failed" } else { "graded" }.into(),
        decision: String::new(),
        steps: r.steps,
        total_reward: r.rewards.iter().sum(),
        record: serde_json::to_value(r)?,
    })
}

fn store(
    policy: &dyn AuditPolicy,
    play: &AuditPlayArgs,
    played: &Played,
    summary: &Value,
) -> Result<()> {
    let mut store = open_store(&play.db)?;
    let kind = if play.campaign {
        AUDIT_CAMPAIGN_KIND
    } else {
        AUDIT_TASKS_KIND
    };
    let created_at = ls_store::utc_now();
    let run_id = stamped_id(&format!("{}-{}", policy.name(), play.seeds[0]), &created_at);
    let mut rows = Vec::new();
    match played {
        Played::Tasks(recs) => {
            for (i, r) in recs.iter().enumerate() {
                rows.push(task_row(
                    &run_id,
                    i,
                    format!("{}@{}", r.task_id, r.seed),
                    r,
                )?);
            }
        }
        Played::Campaigns(recs) => {
            for c in recs {
                for r in &c.tasks {
                    let id = format!(
                        "campaign@{}/p{}/{}",
                        c.seed,
                        r.period.unwrap_or(0),
                        r.role.as_deref().unwrap_or("")
                    );
                    rows.push(task_row(&run_id, rows.len(), id, r)?);
                }
            }
        }
    }
    let run = RunRow {
        run_id: run_id.clone(),
        kind: kind.into(),
        agent: policy.name(),
        model: policy.model(),
        agent_type: policy.agent_type(),
        seed: play.seeds[0],
        created_at,
        case_count: rows.len() as u32,
        mean_score: summary["mean_score"].as_f64().unwrap_or(0.0),
        summary: {
            let mut s = summary.clone();
            if let Played::Campaigns(c) = played {
                s["campaigns"] = serde_json::to_value(
                    c.iter()
                        .map(|r| json!({"campaign_id": r.campaign_id, "seed": r.seed, "score": r.score, "completed": r.completed, "reviews": r.reviews, "error": r.error}))
                        .collect::<Vec<_>>(),
                )?;
            }
            s
        },
    };
    store.insert_run(&run, &rows)?;
    eprintln!("stored audit run {run_id} in {}", play.db.display());
    Ok(())
}

#[derive(clap::Args, Debug, Clone)]
pub struct AuditBoardArgs {
    #[arg(long, env = "LEDGERSHIELD_DB_PATH", default_value = ls_store::DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// Print JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
}

/// `audit-leaderboard`: the stored audit runs, ranked.
pub fn audit_leaderboard(args: AuditBoardArgs) -> Result<()> {
    let store = open_store(&args.db)?;
    let runs: Vec<AuditRunInput> = store
        .list_runs(10_000)?
        .into_iter()
        .map(|r| AuditRunInput {
            run_id: r.run_id,
            kind: r.kind,
            agent: r.agent,
            model: r.model,
            agent_type: r.agent_type,
            created_at: r.created_at,
            summary: r.summary,
        })
        .collect();
    let board = audit_board(&runs);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&board)?);
    } else {
        print!("{}", audit_board_markdown(&board));
    }
    Ok(())
}
