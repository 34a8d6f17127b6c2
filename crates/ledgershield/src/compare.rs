//! `ledgershield compare`: live comparison of several models behind OpenAI-compatible endpoints
//! on the same cases (docs/agents.md). Writes the JSON summary, stores each model's run (so
//! `report --agents llm` puts it on the leaderboard) and the summary itself (served by
//! `/reports/comparisons`).

use crate::run::{episode_rows, llm_config, open_store, server_origin, stamped_id};
use anyhow::{bail, Context, Result};
use ls_agents::{Agent, LlmAgent, LlmConfig};
use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::TrackMode;
use ls_report::compare::{
    compare_models_with_progress, CompareSetup, CompareSummary, ModelRecords, ModelUnderTest,
};
use ls_report::eval::{pool_of, EvalConfig};
use ls_store::RunRow;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// A model to compare (repeat: at least two), e.g. `--model gpt-4o --model gpt-5.4`.
    #[arg(long = "model", required = true)]
    pub models: Vec<String>,
    /// OpenAI-compatible API base every model is called at, e.g. https://api.openai.com/v1.
    #[arg(long, env = "API_BASE_URL")]
    pub api_base: String,
    /// Case ids (comma separated); default: every curated case.
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<String>,
    /// Episode seed of the first case (case i uses seed + i).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    #[arg(long, default_value_t = 0.85)]
    pub pass_threshold: f64,
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Observation mode (blind or instrumented).
    #[arg(long, default_value = "blind")]
    pub track_mode: String,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,
    /// Retries per model call.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// Reply token cap per call, the same for every model (default 3072).
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Where the JSON summary is written.
    #[arg(long, default_value = "artifacts/live_model_comparison.json")]
    pub out: PathBuf,
    #[arg(long, env = "LEDGERSHIELD_DB_PATH", hide_env_values = true, default_value = ls_store::DEFAULT_DB_PATH)]
    pub db: PathBuf,
    /// Do not store the runs or the summary.
    #[arg(long)]
    pub no_store: bool,
    /// Seeds of the headline's twin pairs every model also plays (twelve pairs per seed, both
    /// members; each model's pairs are stored as a run of suite `pairs`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = crate::report::DEFAULT_HEADLINE_SEEDS
    )]
    pub headline_seeds: Vec<u64>,
    /// Do not play the headline's pairs (no headline in the summary).
    #[arg(long)]
    pub no_headline: bool,
}

fn cases_of(set: &FixtureSet, ids: &[String]) -> Result<Vec<Case>> {
    if ids.is_empty() {
        return Ok(set.cases.clone());
    }
    ids.iter()
        .map(|id| {
            set.cases
                .iter()
                .find(|c| c.case_id == id.trim())
                .cloned()
                .with_context(|| format!("unknown case id '{}'", id.trim()))
        })
        .collect()
}

/// The `--model` values, trimmed: at least two, none empty, none twice.
fn distinct_models(given: &[String]) -> Result<Vec<String>> {
    let mut models: Vec<String> = Vec::new();
    for m in given.iter().map(|m| m.trim()) {
        if m.is_empty() {
            bail!("--model must not be empty");
        }
        if models.iter().any(|x| x == m) {
            bail!("--model {m} is given twice");
        }
        models.push(m.to_owned());
    }
    if models.len() < 2 {
        bail!("compare needs at least two --model values");
    }
    Ok(models)
}

/// The headline's twin pairs every model plays (none with `--no-headline`).
fn headline_pairs(
    args: &CompareArgs,
    set: &FixtureSet,
) -> Result<Vec<ls_report::headline::TwinPair>> {
    if args.no_headline {
        return Ok(Vec::new());
    }
    let gen = ls_report::LsGen { set: set.clone() };
    ls_report::headline::pairs(set, &gen, &args.headline_seeds).map_err(|e| anyhow::anyhow!(e))
}

/// A progress bar of `episodes` steps and the callback that advances it, naming the model
/// whose episode starts.
fn progress_bar(episodes: usize) -> (indicatif::ProgressBar, ls_report::compare::Progress) {
    // One step per episode (models × cases), named by the model playing it.
    let bar = indicatif::ProgressBar::new(episodes as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} episodes {msg} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let ticker = bar.clone();
    let progress: ls_report::compare::Progress = Arc::new(move |model: &str| {
        ticker.set_message(model.to_owned());
        ticker.inc(1);
    });
    (bar, progress)
}

pub fn run(args: CompareArgs) -> Result<()> {
    let models = distinct_models(&args.models)?;
    let set = FixtureSet::embedded().context("embedded fixtures")?;
    let cases = cases_of(&set, &args.cases)?;
    let pool = pool_of(&Arc::new(set.master.clone()), &cases);
    let (t, secs, retries) = (args.temperature, args.timeout_secs, args.retries);
    let configs: Vec<LlmConfig> = models
        .iter()
        .map(|m| llm_config(args.api_base.clone(), m, t, secs, retries, args.max_tokens))
        .collect();
    let factories: Vec<Box<dyn Fn() -> Box<dyn Agent>>> = configs
        .iter()
        .map(|c| {
            let c = c.clone();
            Box::new(move || Box::new(LlmAgent::new(c.clone())) as Box<dyn Agent>)
                as Box<dyn Fn() -> Box<dyn Agent>>
        })
        .collect();
    let (bar, progress) = progress_bar(models.len() * cases.len());
    let under_test: Vec<ModelUnderTest<'_>> = models
        .iter()
        .zip(&factories)
        .map(|(m, f)| ModelUnderTest {
            model: m.clone(),
            factory: f.as_ref(),
        })
        .collect();
    let pairs = headline_pairs(&args, &set)?;
    let setup = CompareSetup {
        pool: &pool,
        cases: &cases,
        pairs: &pairs,
        headline_seeds: &args.headline_seeds,
        cfg: EvalConfig {
            pass_k: 1,
            threshold: args.pass_threshold,
            seed: args.seed,
            track_mode: TrackMode::parse(&args.track_mode),
        },
        api_base: server_origin(&args.api_base),
        generated_at: ls_store::utc_now(),
    };
    let (summary, records) = compare_models_with_progress(&under_test, &setup, progress);
    bar.finish_and_clear();
    let failed: Vec<&str> = summary
        .results
        .iter()
        .filter(|r| r.model_calls.endpoint_failed())
        .map(|r| r.model.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "the endpoint {} answered no call for {} (check --api-base, the model names and the key); a model whose every call failed has no score, so nothing is written",
            setup.api_base,
            failed.join(", ")
        );
    }
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&summary)?)
        .with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    if !args.no_store {
        store(&args, &summary, &records)?;
    }
    print_table(&summary);
    Ok(())
}

/// Each model's run (kind `run`, agent `llm`, suite `public`), its run of the headline's pairs
/// (suite `pairs`, when played) and the summary (kind `compare`).
fn store(args: &CompareArgs, summary: &CompareSummary, records: &[ModelRecords]) -> Result<()> {
    let mut store = open_store(&args.db)?;
    let compare_id = stamped_id("compare", &summary.generated_at_utc);
    let mut run_ids = Vec::new();
    for (result, recs) in summary.results.iter().zip(records) {
        for (suite, recs) in [("public", &recs.cases), ("pairs", &recs.pairs)] {
            if recs.is_empty() {
                continue;
            }
            let run_id = format!("{compare_id}-{}", run_ids.len() + 1);
            let rows = episode_rows(&run_id, recs.iter().map(|r| (r.case_id.clone(), r)));
            let mean = recs.iter().map(|r| r.final_score).sum::<f64>() / recs.len() as f64;
            let run = RunRow {
                run_id: run_id.clone(),
                kind: "run".into(),
                agent: "llm".into(),
                model: result.model.clone(),
                agent_type: result.agent_type.clone(),
                seed: args.seed,
                created_at: summary.generated_at_utc.clone(),
                case_count: recs.len() as u32,
                mean_score: if suite == "public" {
                    result.average_score
                } else {
                    ls_report::metrics::r4(mean)
                },
                summary: serde_json::json!({
                    "suite": suite,
                    "pass_k": 1,
                    "pass_threshold": args.pass_threshold,
                    "temperature": args.temperature,
                    "track_mode": summary.track_mode,
                    "source": "in-process",
                    "comparison": compare_id,
                    "api_calls": result.api_calls,
                    "mean_score": result.average_score,
                    "headline_seeds": summary.headline_seeds,
                    "track": result.harness.track,
                    "assistance": result.harness.assistance,
                    "max_tokens": result.harness.max_tokens,
                    "model_calls": result.model_calls,
                }),
            };
            store.insert_run(&run, &rows)?;
            run_ids.push(run_id);
        }
    }
    let row = RunRow {
        run_id: compare_id.clone(),
        kind: "compare".into(),
        agent: "compare".into(),
        model: summary.models.join(" vs "),
        agent_type: "comparison".into(),
        seed: args.seed,
        created_at: summary.generated_at_utc.clone(),
        case_count: summary.case_count as u32,
        mean_score: 0.0,
        summary: {
            let mut v = serde_json::to_value(summary)?;
            v["run_ids"] = run_ids.clone().into();
            v
        },
    };
    store.insert_run(&row, &[])?;
    eprintln!(
        "stored comparison {compare_id} and runs {} in {}",
        run_ids.join(", "),
        crate::db_target::shown(&args.db)
    );
    Ok(())
}

fn print_table(s: &CompareSummary) {
    println!(
        "{:<28} {:<9} {:>8} {:>7} {:>8} {:>7} {:>7} {:>9} {:>6}",
        "model", "tier", "headline", "mean", "success", "cert", "loss", "unsafe", "calls"
    );
    for r in &s.results {
        println!(
            "{:<28} {:<9} {:>8} {:>7.4} {:>8.4} {:>7.4} {:>7} {:>9.4} {:>6}",
            r.model,
            r.model_profile.tier,
            r.headline
                .as_ref()
                .map(|h| format!("{:.4}", h.headline))
                .unwrap_or_else(|| "n/a".into()),
            r.average_score,
            r.success_rate,
            r.certificate_validity_rate,
            r.institutional
                .institutional_loss_score
                .map(|l| format!("{l:.4}"))
                .unwrap_or_else(|| "n/a".into()),
            r.institutional.unsafe_release_rate,
            r.api_calls
        );
    }
    let o = &s.capability_order;
    println!(
        "\ncapability order {}: {}",
        o.ordered_models.join(" < "),
        if o.monotonic_by_capability {
            "monotonic".to_owned()
        } else {
            format!("violations: {}", o.violations.join("; "))
        }
    );
}
