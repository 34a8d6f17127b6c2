//! `ledgershield export`: training data from recorded episodes.
//!
//! * `trajectories`: `openenv_trajectories.json`, one object per episode (`case_id`,
//!   `initial_observation`, `steps` with actions minus certificates, `result`).
//! * `sft`: plan prompt/completion JSONL (`sft_train.jsonl`, `sft_eval.jsonl`): the first
//!   observation and the whole episode's actions as `{"actions": [...]}`.
//! * `steps`: per-step (closed-loop) chat JSONL (`steps_train.jsonl`, `steps_eval.jsonl`): each
//!   step's protocol prompt (`ls_agents::llm::step_prompt`, recorded by the runner) and the action
//!   it answered (`ls_agents::llm::action_target`), the exact protocol the `llm` agent plays.
//!
//! `sft` and `steps` keep only submitted episodes (no reset or transport failures, no truncated
//! episodes) scoring at least `--min-score`, and split by **base case** (no variant of an
//! evaluation case is in training), stratified by task family so every family with two or more
//! base cases has some held out. `split.json` lists both sides and the held-out episodes.

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ls_agents::llm::compact_ascii_json;
use ls_agents::prompt::sorted_keys;
use ls_agents::EpisodeRecord;
use ls_core::enums::ActionName;
use ls_store::Store;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum ExportFormat {
    Sft,
    Steps,
    Trajectories,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Output directory.
    #[arg(long, default_value = "data/export")]
    pub out: PathBuf,
    /// Runs to export (default: the newest run of the teacher agent stored by `ledgershield run`,
    /// else the newest run with the most episodes; a one-episode hand play is never the default).
    #[arg(long = "run")]
    pub runs: Vec<String>,
    /// Share of base cases held out for evaluation (sft).
    #[arg(long, default_value_t = 0.3)]
    pub eval_fraction: f64,
    /// Split seed (sft).
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Keep only episodes scoring at least this (sft, steps).
    #[arg(long, default_value_t = 0.0)]
    pub min_score: f64,
    #[arg(long, env = "LEDGERSHIELD_DB_PATH", hide_env_values = true, default_value = ls_store::DEFAULT_DB_PATH)]
    pub db: PathBuf,
}

pub fn prompt(initial: &Value) -> String {
    format!(
        "You are a LedgerShield AP control agent in a partially observable environment. Return only JSON of the form {{\"actions\":[{{\"action_type\":...,\"payload\":{{...}}}}]}}.\nAllowed action types: {}.\nCase context:\n{}\nReturn JSON only. Do not explain the plan.",
        ActionName::ALL.map(ActionName::as_str).join(", "),
        serde_json::to_string_pretty(&sorted_keys(initial)).unwrap_or_default()
    )
}

fn trim(v: &Value, depth: u32) -> Value {
    match v {
        Value::String(s) => Value::String(s.chars().take(240).collect()),
        Value::Array(a) if depth < 3 => {
            Value::Array(a.iter().take(12).map(|x| trim(x, depth + 1)).collect())
        }
        Value::Object(o) if depth < 3 => Value::Object(
            o.iter()
                .take(12)
                .map(|(k, x)| (k.chars().take(80).collect(), trim(x, depth + 1)))
                .collect(),
        ),
        Value::Array(_) | Value::Object(_) => {
            Value::String(v.to_string().chars().take(120).collect())
        }
        x => x.clone(),
    }
}

/// The compact submit payload used as the SFT completion (§8.1).
pub fn compact_submit(p: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "decision".into(),
        p.get("decision")
            .cloned()
            .unwrap_or_else(|| json!("NEEDS_REVIEW")),
    );
    let c = p.get("confidence").and_then(Value::as_f64).unwrap_or(0.75);
    out.insert("confidence".into(), json!((c * 1000.0).round() / 1000.0));
    for k in [
        "reason_codes",
        "fraud_flags",
        "discrepancies",
        "campaign_signals",
        "duplicate_invoice_ids",
        "duplicate_links",
        "cross_invoice_links",
    ] {
        if let Some(a) = p.get(k).and_then(Value::as_array) {
            out.insert(
                k.into(),
                Value::Array(
                    a.iter()
                        .take(5)
                        .filter_map(Value::as_str)
                        .map(|s| json!(s.chars().take(80).collect::<String>()))
                        .collect(),
                ),
            );
        }
    }
    for k in [
        "policy_checks",
        "evidence_map",
        "extracted_fields",
        "line_items",
        "predicted_probabilities",
        "counterfactual",
    ] {
        if let Some(v) = p.get(k) {
            out.insert(k.into(), trim(v, 0));
        }
    }
    out
}

fn actions_of(rec: &EpisodeRecord, compact: bool) -> Value {
    let acts: Vec<Value> = rec
        .trajectory
        .iter()
        .map(|s| {
            let mut p = s.payload.clone();
            p.remove("decision_certificate");
            if compact && s.action_type == "submit_decision" {
                p = compact_submit(&p);
            }
            json!({"action_type": s.action_type, "payload": p})
        })
        .collect();
    json!({"actions": acts})
}

fn fnv(s: &str, seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in s.as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Split base cases: a seeded order, the first `fraction` (at least one, never all) for evaluation.
pub fn split_bases(
    bases: &BTreeSet<String>,
    fraction: f64,
    seed: u64,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut order: Vec<&String> = bases.iter().collect();
    order.sort_by_key(|b| (fnv(b, seed), (*b).clone()));
    let n = order.len();
    let k = if n < 2 {
        0
    } else {
        ((n as f64 * fraction.clamp(0.0, 1.0)).round() as usize).clamp(1, n - 1)
    };
    let eval: BTreeSet<String> = order.iter().take(k).map(|s| (*s).clone()).collect();
    let train: BTreeSet<String> = order.iter().skip(k).map(|s| (*s).clone()).collect();
    (train, eval)
}

/// [`split_bases`] within each task family: `families` maps base case to family.
pub fn split_stratified(
    families: &BTreeMap<String, String>,
    fraction: f64,
    seed: u64,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut by_family: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (base, fam) in families {
        by_family.entry(fam).or_default().insert(base.clone());
    }
    let (mut train, mut eval) = (BTreeSet::new(), BTreeSet::new());
    for bases in by_family.values() {
        let (t, e) = split_bases(bases, fraction, seed);
        train.extend(t);
        eval.extend(e);
    }
    (train, eval)
}

/// Whether an episode is training data: submitted (graded), no reset/transport failure, and
/// scoring at least `min_score`.
pub fn usable(rec: &EpisodeRecord, min_score: f64) -> bool {
    rec.terminated && !rec.trajectory.is_empty() && rec.final_score >= min_score
}

fn step_rows(rec: &EpisodeRecord, meta: &Value) -> Vec<Value> {
    rec.trajectory
        .iter()
        .filter_map(|s| {
            let prompt = s.prompt.as_ref()?;
            let action = ls_agents::Action {
                action_type: s.action_type.clone(),
                payload: s.payload.clone(),
            };
            let mut m = meta.clone();
            m["step"] = json!(s.step);
            m["action_type"] = json!(s.action_type);
            Some(json!({
                "prompt": [{"role": "system", "content": ls_agents::llm::system_prompt()}, {"role": "user", "content": prompt}],
                "completion": [{"role": "assistant", "content": ls_agents::llm::action_target(&action)}],
                "metadata": m,
            }))
        })
        .collect()
}

fn plan_row(rec: &EpisodeRecord, meta: &Value) -> Value {
    json!({
        "prompt": prompt(&rec.initial_observation),
        "completion": compact_ascii_json(&actions_of(rec, true)),
        "teacher_completion": compact_ascii_json(&actions_of(rec, false)),
        "metadata": meta,
    })
}

struct Episode {
    run_id: String,
    base: String,
    rec: EpisodeRecord,
}

fn write_training(args: &ExportArgs, runs: &[String], episodes: &[Episode]) -> Result<()> {
    let kept: Vec<&Episode> = episodes
        .iter()
        .filter(|e| usable(&e.rec, args.min_score))
        .collect();
    if kept.is_empty() {
        bail!(
            "no usable episodes ({} recorded; none submitted with score >= {})",
            episodes.len(),
            args.min_score
        );
    }
    let families: BTreeMap<String, String> = kept
        .iter()
        .map(|e| (e.base.clone(), e.rec.task_type.clone()))
        .collect();
    let (train, eval) = split_stratified(&families, args.eval_fraction, args.seed);
    let steps = args.format == ExportFormat::Steps;
    let mut files = [String::new(), String::new()];
    let mut counts = [0usize; 2];
    let mut eval_episodes = Vec::new();
    for e in &kept {
        let side = usize::from(eval.contains(&e.base));
        let rec = &e.rec;
        let meta = json!({"case_id": rec.case_id, "base_case_id": e.base, "run_id": e.run_id, "task_type": rec.task_type, "score": rec.final_score, "steps": rec.steps, "final_decision": rec.decision, "result_class": rec.result_class, "split": if side == 1 { "eval" } else { "train" }});
        if side == 1 {
            eval_episodes.push(json!({"case_id": rec.case_id, "run_id": e.run_id, "task_type": rec.task_type, "score": rec.final_score}));
        }
        let rows = if steps {
            step_rows(rec, &meta)
        } else {
            vec![plan_row(rec, &meta)]
        };
        for row in rows {
            files[side].push_str(&serde_json::to_string(&row)?);
            files[side].push('\n');
            counts[side] += 1;
        }
    }
    let stem = if steps { "steps" } else { "sft" };
    std::fs::write(args.out.join(format!("{stem}_train.jsonl")), &files[0])?;
    std::fs::write(args.out.join(format!("{stem}_eval.jsonl")), &files[1])?;
    let split = json!({"split_by": "base_case_id", "stratified_by": "task_type", "seed": args.seed, "eval_fraction": args.eval_fraction, "min_score": args.min_score, "episodes_recorded": episodes.len(), "episodes_kept": kept.len(), "train_base_cases": train, "eval_base_cases": eval, "eval_episodes": eval_episodes, "train_count": counts[0], "eval_count": counts[1], "runs": runs});
    std::fs::write(
        args.out.join("split.json"),
        serde_json::to_string_pretty(&split)?,
    )?;
    eprintln!(
        "kept {} of {} episodes; wrote {} train and {} eval {stem} rows to {}",
        kept.len(),
        episodes.len(),
        counts[0],
        counts[1],
        args.out.display()
    );
    Ok(())
}

/// The run `export` takes when none is named, and why. Training data are demonstrations, so the
/// default is the newest run of the reference agent (`teacher`) stored by `ledgershield run`;
/// without one, the run with the most episodes (the newest of those). The newest run of any
/// kind was often a one-episode hand play from the workbench (`kind` `hand`), which is never
/// the default. `runs` is newest first, as `Store::list_runs` returns them.
pub fn default_run(runs: &[ls_store::RunRow]) -> Option<(&ls_store::RunRow, &'static str)> {
    let played = || {
        runs.iter()
            .filter(|r| r.kind != ls_product::hand_runs::HAND_KIND)
    };
    if let Some(r) = played().find(|r| r.agent == "teacher") {
        return Some((
            r,
            "the newest teacher run (the reference agent's demonstrations)",
        ));
    }
    played()
        .max_by(|a, b| {
            a.case_count
                .cmp(&b.case_count)
                .then(a.created_at.cmp(&b.created_at))
        })
        .map(|r| {
            (
                r,
                "no teacher run is stored: the run with the most episodes",
            )
        })
}

pub fn run(args: ExportArgs) -> Result<()> {
    if !args.db.exists() {
        bail!(
            "no database at {}; run `ledgershield run --agent teacher` first",
            crate::db_target::shown(&args.db)
        );
    }
    let store = Store::open(&args.db)?;
    let runs: Vec<String> = if args.runs.is_empty() {
        let stored = store.list_runs(1000)?;
        match default_run(&stored) {
            Some((r, why)) => {
                eprintln!(
                    "exporting run {} ({} {}, {} episodes, {}): {why}; pass --run ID to choose",
                    r.run_id, r.agent, r.model, r.case_count, r.created_at
                );
                vec![r.run_id.clone()]
            }
            None => Vec::new(),
        }
    } else {
        args.runs.clone()
    };
    if runs.is_empty() {
        bail!("the database has no runs; run `ledgershield run --agent teacher` first");
    }
    let mut episodes = Vec::new();
    for r in &runs {
        for row in store.episodes(Some(r), 100_000)? {
            let rec: EpisodeRecord = serde_json::from_value(row.record.clone())
                .with_context(|| format!("episode {} of {r}", row.idx))?;
            episodes.push(Episode {
                run_id: r.clone(),
                base: row.base_case_id.clone(),
                rec,
            });
        }
    }
    std::fs::create_dir_all(&args.out)?;
    match args.format {
        ExportFormat::Trajectories => {
            let list: Vec<Value> = episodes
                .iter()
                .map(|Episode { rec, .. }| {
                    let steps: Vec<Value> = rec
                        .trajectory
                        .iter()
                        .map(|s| {
                            let mut p = s.payload.clone();
                            p.remove("decision_certificate");
                            json!({"step": s.step, "action": {"action_type": s.action_type, "payload": p}, "reward": s.reward, "done": s.done, "error": s.error})
                        })
                        .collect();
                    json!({
                        "case_id": rec.case_id, "initial_observation": rec.initial_observation, "steps": steps,
                        "result": {"final_score": rec.final_score, "result_class": rec.result_class, "decision": rec.decision, "steps": rec.steps, "total_reward": rec.total_reward, "agent": rec.agent, "model": rec.model},
                    })
                })
                .collect();
            let path = args.out.join("openenv_trajectories.json");
            std::fs::write(&path, serde_json::to_string_pretty(&list)?)?;
            eprintln!("wrote {} trajectories to {}", list.len(), path.display());
        }
        ExportFormat::Sft | ExportFormat::Steps => write_training(&args, &runs, &episodes)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, kind: &str, agent: &str, at: &str, cases: u32) -> ls_store::RunRow {
        ls_store::RunRow {
            run_id: id.into(),
            kind: kind.into(),
            agent: agent.into(),
            model: String::new(),
            agent_type: String::new(),
            seed: 0,
            created_at: at.into(),
            case_count: cases,
            mean_score: 0.0,
            summary: serde_json::Value::Null,
        }
    }

    #[test]
    fn default_export_is_the_newest_teacher_run_never_a_hand_play() {
        // Newest first, as the store lists them: a one-episode hand play on top.
        let runs = vec![
            row(
                "hand-1",
                ls_product::hand_runs::HAND_KIND,
                "human",
                "2026-03-03",
                1,
            ),
            row("llm-1", "run", "llm", "2026-03-02", 21),
            row("teacher-2", "run", "teacher", "2026-03-01", 21),
            row("teacher-1", "run", "teacher", "2026-02-01", 21),
        ];
        let (r, why) = default_run(&runs).unwrap();
        assert_eq!(r.run_id, "teacher-2");
        assert!(why.contains("teacher"));
        // No teacher run: the run with the most episodes, newest among equals; never the hand play.
        let runs = vec![
            row(
                "hand-1",
                ls_product::hand_runs::HAND_KIND,
                "human",
                "2026-03-03",
                1,
            ),
            row("llm-2", "run", "llm", "2026-03-02", 5),
            row("llm-1", "run", "llm", "2026-03-01", 21),
            row("rnd-1", "run", "random", "2026-02-01", 21),
        ];
        assert_eq!(default_run(&runs).unwrap().0.run_id, "llm-1");
        let only_hand = vec![row(
            "hand-1",
            ls_product::hand_runs::HAND_KIND,
            "human",
            "2026-03-03",
            1,
        )];
        assert!(default_run(&only_hand).is_none());
    }

    #[test]
    fn split_is_by_base_and_never_empty() {
        let bases: BTreeSet<String> = (0..10).map(|i| format!("CASE-{i}")).collect();
        let (train, eval) = split_bases(&bases, 0.3, 7);
        assert_eq!(eval.len(), 3);
        assert_eq!(train.len(), 7);
        assert!(train.is_disjoint(&eval));
        assert_eq!(split_bases(&bases, 0.3, 7), (train, eval), "deterministic");
        let one: BTreeSet<String> = ["X".to_owned()].into();
        assert!(split_bases(&one, 0.5, 1).1.is_empty());
    }

    #[test]
    fn stratified_split_holds_out_every_family_with_two_bases() {
        let mut fam = BTreeMap::new();
        for (f, n) in [("task_a", 6), ("task_b", 2), ("task_c", 3), ("task_e", 1)] {
            for i in 0..n {
                fam.insert(format!("{f}-{i}"), f.to_owned());
            }
        }
        let (train, eval) = split_stratified(&fam, 0.3, 7);
        assert!(train.is_disjoint(&eval));
        assert_eq!(train.len() + eval.len(), fam.len());
        for f in ["task_a", "task_b", "task_c"] {
            assert!(eval.iter().any(|b| fam[b] == f), "{f} held out");
            assert!(train.iter().any(|b| fam[b] == f), "{f} trained");
        }
        assert!(
            train.contains("task_e-0"),
            "a single base stays in training"
        );
    }

    #[test]
    fn compact_submit_limits() {
        let p = json!({"decision": "HOLD", "confidence": 0.93333, "reason_codes": ["a", "b", "c", "d", "e", "f"], "decision_certificate": {"nodes": []}});
        let c = compact_submit(p.as_object().unwrap());
        assert_eq!(c["confidence"], 0.933);
        assert_eq!(c["reason_codes"].as_array().unwrap().len(), 5);
        assert!(!c.contains_key("decision_certificate"));
    }
}
