//! `ledgershield cases`: list, show, generate and validate cases.
//!
//! * `cases list`: the curated cases (id, task, difficulty, gold decision, theme).
//! * `cases show CASE-ID`: one case as JSON (curated, or any generated id of the default pool).
//! * `cases generate --kind K --seed S --count N`: generated cases as a JSON array on stdout.
//! * `cases validate`: the validator over the curated set and a sample of every generator;
//!   exits non-zero on any issue.

use anyhow::{bail, Result};
use ls_core::FixtureSet;
use ls_gen::checks::check_generated;
use ls_gen::pool::{generate, GenKind};
use std::io::Write;

#[derive(clap::Args, Debug, Clone)]
pub struct CasesArgs {
    #[command(subcommand)]
    pub command: CasesCommand,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum CasesCommand {
    /// List the curated cases.
    List,
    /// Print one case as JSON.
    Show { case_id: String },
    /// Generate cases and print them as a JSON array.
    Generate {
        /// challenge | holdout | twins | controlbench | certificate-required | fraudgen
        #[arg(long)]
        kind: String,
        #[arg(long, default_value_t = 2026)]
        seed: u64,
        #[arg(long, default_value_t = 10)]
        count: usize,
    },
    /// Validate the curated set and a sample of every generator.
    Validate {
        /// Seeds per generator.
        #[arg(long, default_value_t = 3)]
        seeds: u64,
    },
}

pub fn run(args: CasesArgs, fixtures: Option<&std::path::PathBuf>) -> Result<()> {
    let set = crate::load_fixtures(fixtures)?;
    let mut out = std::io::stdout().lock();
    match args.command {
        CasesCommand::List => {
            writeln!(
                out,
                "{:<14} {:<7} {:<8} {:<15} theme",
                "case_id", "task", "level", "gold"
            )?;
            for c in &set.cases {
                let gold = c.gold.decision.map(|d| d.as_str()).unwrap_or("-");
                writeln!(
                    out,
                    "{:<14} {:<7} {:<8} {:<15} {}",
                    c.case_id,
                    c.task_type.as_str(),
                    c.difficulty.as_str(),
                    gold,
                    c.theme.as_deref().unwrap_or("")
                )?;
            }
        }
        CasesCommand::Show { case_id } => {
            let pool = ls_gen::build_pool(&set, &ls_gen::PoolConfig::default())?;
            match set.case(&case_id).or_else(|| pool.case(&case_id)) {
                Some(c) => writeln!(out, "{}", serde_json::to_string_pretty(c)?)?,
                None => bail!(
                    "unknown case id {}",
                    case_id.chars().take(80).collect::<String>()
                ),
            }
        }
        CasesCommand::Generate { kind, seed, count } => {
            let Some(k) = GenKind::parse(&kind) else {
                bail!("unknown --kind {kind}; use challenge, holdout, twins, controlbench, certificate-required or fraudgen");
            };
            let cases = generate(&set, k, seed, count.min(ls_gen::generators::MAX_GENERATED));
            serde_json::to_writer_pretty(&mut out, &cases)?;
            writeln!(out)?;
        }
        CasesCommand::Validate { seeds } => {
            let mut failures = 0usize;
            let curated = ls_core::validate::validate_set(&set);
            for i in &curated {
                writeln!(out, "FAIL {}: {}", i.case_id, i.message)?;
            }
            failures += curated.len();
            writeln!(
                out,
                "curated: {} cases, {} issue(s)",
                set.cases.len(),
                curated.len()
            )?;
            for kind in GenKind::ALL {
                let mut n = 0;
                let mut bad = 0;
                for s in 0..seeds.clamp(1, 100) {
                    for c in generate(&set, kind, 2026 + s, 100) {
                        n += 1;
                        let issues = check_generated(&c, &set.world(&c));
                        if !issues.is_empty() {
                            bad += 1;
                            writeln!(out, "FAIL {}: {:?}", c.case_id, issues)?;
                        }
                    }
                }
                writeln!(out, "{}: {n} cases, {bad} failing", kind.as_str())?;
                failures += bad;
            }
            if failures > 0 {
                bail!("{failures} case(s) failed validation");
            }
            writeln!(out, "all cases valid")?;
        }
    }
    Ok(())
}

/// The case pool for `serve`: the fixture set plus the generators enabled by the documented
/// `LEDGERSHIELD_*` variables.
pub fn serve_pool(set: FixtureSet) -> Result<FixtureSet> {
    let cfg = ls_gen::PoolConfig::from_lookup(|k| std::env::var(k).ok());
    Ok(ls_gen::build_pool(&set, &cfg)?)
}
