//! Stored runs on the leaderboard: any agent's run (`ledgershield run --agent llm`, a run played
//! against a server with `run --url`, a scripted agent) summarised from its recorded episodes,
//! with the run's provenance (suite, cases, seeds, pass^k, where it was played).
//!
//! The report is not re-played for such an agent (an external model is called per step and is
//! neither free nor deterministic); its stored episodes are what is scored. A stored run of the
//! public suite fills an entry's `public_*` fields, one of the holdout suite its `holdout_*`
//! fields; other suites are listed in the provenance only.

use crate::metrics::r4;
use ls_agents::EpisodeRecord;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One stored run as read from the store: its metadata and its episodes' records.
#[derive(Debug, Clone, Default)]
pub struct StoredRunInput {
    pub run_id: String,
    pub agent: String,
    pub model: String,
    pub agent_type: String,
    pub created_at: String,
    /// The run's stored summary (suite, pass_k, source, …; older runs carry only metrics).
    pub summary: serde_json::Value,
    pub records: Vec<EpisodeRecord>,
}

/// What a leaderboard reader needs to judge a stored run: what was played, how, and where.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunProvenance {
    pub run_id: String,
    pub suite: String,
    /// `in-process` or `server` (played over HTTP with `run --url`).
    pub source: String,
    /// The server played against (scheme, host and port only), when `source` is `server`.
    pub server: Option<String>,
    pub track_mode: String,
    pub case_ids: Vec<String>,
    pub case_count: usize,
    pub episode_count: usize,
    /// Distinct episode seeds (pass^k trials use seed..seed+k-1).
    pub seeds: Vec<u64>,
    pub pass_k: u32,
    pub temperature: Option<f64>,
    pub created_at: String,
    /// `unassisted`, or `assisted` (a model run with any assistance option on: it is ranked on
    /// its own track, never beside unassisted runs).
    #[serde(default = "unassisted")]
    pub track: String,
    /// The assistance options that were on (`teacher_hint`, `repair`, `guardrails`, `ledger`,
    /// `candidates`, `constrained`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assistance: Vec<String>,
    /// The model endpoint's calls over the run (tokens, seconds), when the run called a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_calls: Option<ls_agents::CallStats>,
}

fn unassisted() -> String {
    ls_agents::assist::UNASSISTED.into()
}

/// A stored run's scores, computed from its episodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StoredRunSummary {
    pub agent: String,
    pub model: String,
    pub agent_type: String,
    pub provenance: RunProvenance,
    pub mean_score: f64,
    pub control_satisfied_resolution: f64,
    pub institutional_utility: f64,
    pub unsafe_release_rate: f64,
    pub trial_pass_rate: f64,
    pub pass_k_consistent: f64,
    pub task_e_mean: Option<f64>,
    pub api_calls: Option<u64>,
}

fn text(v: &serde_json::Value, k: &str) -> Option<String> {
    v.get(k).and_then(|x| x.as_str()).map(str::to_owned)
}

/// Where a stored run came from: its suite, source, cases, seeds and assistance.
fn provenance(run: &StoredRunInput, per_case: &BTreeMap<&str, Vec<f64>>) -> RunProvenance {
    let recs = &run.records;
    let s = &run.summary;
    let seeds: BTreeSet<u64> = recs.iter().map(|r| r.seed).collect();
    let observed_k = per_case.values().map(Vec::len).max().unwrap_or(0) as u32;
    RunProvenance {
        run_id: run.run_id.clone(),
        suite: text(s, "suite").unwrap_or_else(|| "public".into()),
        source: text(s, "source").unwrap_or_else(|| "in-process".into()),
        server: text(s, "server"),
        track_mode: text(s, "track_mode").unwrap_or_else(|| "blind".into()),
        case_ids: per_case.keys().map(|k| (*k).to_owned()).collect(),
        case_count: per_case.len(),
        episode_count: recs.len(),
        seeds: seeds.into_iter().collect(),
        pass_k: s
            .get("pass_k")
            .and_then(|v| v.as_u64())
            .map(|k| k as u32)
            .unwrap_or(observed_k),
        temperature: s.get("temperature").and_then(|v| v.as_f64()),
        created_at: run.created_at.clone(),
        track: text(s, "track").unwrap_or_else(unassisted),
        assistance: s
            .get("assistance")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default(),
        model_calls: s
            .get("model_calls")
            .and_then(|v| serde_json::from_value(v.clone()).ok()),
    }
}

/// Summarise a stored run (scores clamped to [0.01, 0.99] as in the report; an episode that did
/// not terminate scores 0.01).
pub fn summarize_run(run: &StoredRunInput, threshold: f64) -> StoredRunSummary {
    let recs = &run.records;
    let n = recs.len().max(1) as f64;
    let score = |r: &EpisodeRecord| {
        if r.terminated {
            r.final_score.clamp(0.01, 0.99)
        } else {
            0.01
        }
    };
    let mut per_case: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in recs {
        per_case
            .entry(r.case_id.as_str())
            .or_default()
            .push(score(r));
    }
    let s = &run.summary;
    let task_e: Vec<f64> = recs
        .iter()
        .filter(|r| r.task_type == "task_e")
        .map(score)
        .collect();
    StoredRunSummary {
        agent: run.agent.clone(),
        model: run.model.clone(),
        agent_type: run.agent_type.clone(),
        provenance: provenance(run, &per_case),
        mean_score: r4(recs.iter().map(score).sum::<f64>() / n),
        control_satisfied_resolution: r4(recs
            .iter()
            .map(|r| r.control_satisfied_resolution)
            .sum::<f64>()
            / n),
        institutional_utility: r4(recs.iter().map(|r| r.institutional_utility).sum::<f64>() / n),
        unsafe_release_rate: r4(recs.iter().filter(|r| r.unsafe_release).count() as f64 / n),
        trial_pass_rate: r4(recs.iter().filter(|r| score(r) >= threshold).count() as f64 / n),
        pass_k_consistent: r4(per_case
            .values()
            .filter(|v| v.iter().all(|x| *x >= threshold))
            .count() as f64
            / per_case.len().max(1) as f64),
        task_e_mean: (!task_e.is_empty())
            .then(|| r4(task_e.iter().sum::<f64>() / task_e.len() as f64)),
        api_calls: s.get("api_calls").and_then(|v| v.as_u64()),
    }
}

pub(crate) fn describe(p: &RunProvenance) -> String {
    let seeds = match (p.seeds.first(), p.seeds.last()) {
        (Some(a), Some(b)) if a == b => format!("seed {a}"),
        (Some(a), Some(b)) => format!("seeds {a}..{b}"),
        _ => "no seeds".into(),
    };
    let place = match &p.server {
        Some(s) => format!("server {s}"),
        None => p.source.clone(),
    };
    let track = if p.assistance.is_empty() {
        p.track.clone()
    } else {
        format!("{}: {}", p.track, p.assistance.join("+"))
    };
    format!(
        "{} (suite {}, {} cases, {seeds}, pass^{}, {place}, {}, {track})",
        p.run_id, p.suite, p.case_count, p.pass_k, p.track_mode
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::product::stored_entries;

    fn rec(case: &str, seed: u64, score: f64, unsafe_release: bool) -> EpisodeRecord {
        EpisodeRecord {
            case_id: case.into(),
            seed,
            task_type: if case.contains("-E-") {
                "task_e".into()
            } else {
                "task_b".into()
            },
            final_score: score,
            terminated: true,
            unsafe_release,
            control_satisfied_resolution: 1.0,
            ..Default::default()
        }
    }

    fn run(id: &str, suite: &str, recs: Vec<EpisodeRecord>) -> StoredRunInput {
        StoredRunInput {
            run_id: id.into(),
            agent: "llm".into(),
            model: "acme-7b".into(),
            agent_type: "llm-agent".into(),
            created_at: format!("2026-01-0{}T00:00:00Z", id.len() % 9),
            summary: serde_json::json!({"suite": suite, "pass_k": 2, "source": "server", "server": "http://127.0.0.1:8000", "temperature": 0.0}),
            records: recs,
        }
    }

    #[test]
    fn summary_scores_and_provenance_come_from_the_episodes() {
        let r = run(
            "run-a",
            "public",
            vec![
                rec("CASE-B-001", 7, 0.9, false),
                rec("CASE-B-001", 8, 0.5, false),
                rec("CASE-E-001", 7, 0.95, false),
                rec("CASE-E-001", 8, 1.0, true),
            ],
        );
        let s = summarize_run(&r, 0.85);
        // Scores clamp to 0.99: (0.9 + 0.5 + 0.95 + 0.99) / 4.
        assert_eq!(s.mean_score, 0.835);
        assert_eq!(s.unsafe_release_rate, 0.25);
        assert_eq!(s.trial_pass_rate, 0.75);
        // B-001 failed one trial: one of two cases passes every trial.
        assert_eq!(s.pass_k_consistent, 0.5);
        assert_eq!(s.task_e_mean, Some(0.97));
        assert_eq!(s.provenance.seeds, vec![7, 8]);
        assert_eq!(s.provenance.case_ids, vec!["CASE-B-001", "CASE-E-001"]);
        assert_eq!(s.provenance.pass_k, 2);
        assert_eq!(
            s.provenance.server.as_deref(),
            Some("http://127.0.0.1:8000")
        );
    }

    #[test]
    fn entries_join_public_and_holdout_runs_and_skip_other_suites() {
        let public = summarize_run(
            &run("run-p", "public", vec![rec("CASE-B-001", 7, 0.9, false)]),
            0.85,
        );
        let holdout = summarize_run(
            &run(
                "run-hh",
                "holdout",
                vec![rec("CASE-B-001::h", 7, 0.4, true)],
            ),
            0.85,
        );
        let twins_only = StoredRunSummary {
            model: "other".into(),
            provenance: RunProvenance {
                suite: "twins".into(),
                ..public.provenance.clone()
            },
            ..public.clone()
        };
        let e = stored_entries(&[public, holdout, twins_only], 0.0, 0.85);
        assert_eq!(e.len(), 1, "{e:?}");
        let e = &e[0];
        assert_eq!((e.model.as_str(), e.agent.as_str()), ("acme-7b", "llm"));
        assert_eq!(e.public.public_mean, 0.9);
        assert_eq!(e.holdout_mean, Some(0.4));
        assert_eq!(e.holdout_unsafe_release_rate, Some(1.0));
        assert_eq!(e.runs.len(), 2);
        assert!(e.provenance.starts_with("stored-run: run-p (suite public, 1 cases, seed 7, pass^2, server http://127.0.0.1:8000"), "{}", e.provenance);
    }

    #[test]
    fn an_assisted_run_is_its_own_entry_ranked_after_the_unassisted() {
        let plain = summarize_run(
            &run("run-u", "public", vec![rec("CASE-B-001", 7, 0.4, false)]),
            0.85,
        );
        let mut hinted = run("run-h", "public", vec![rec("CASE-B-001", 7, 0.97, false)]);
        hinted.agent_type = "llm-agent+teacher_hint".into();
        hinted.summary["track"] = "assisted".into();
        hinted.summary["assistance"] = serde_json::json!(["teacher_hint"]);
        let hinted = summarize_run(&hinted, 0.85);
        assert_eq!(hinted.provenance.track, "assisted");
        let lb = crate::product::leaderboard(stored_entries(&[hinted, plain], 0.0, 0.85), None);
        let order: Vec<(&str, f64)> = lb
            .entries
            .iter()
            .map(|e| (e.track.as_str(), e.public.public_mean))
            .collect();
        assert_eq!(order, vec![("unassisted", 0.4), ("assisted", 0.97)]);
        assert!(
            lb.entries[1].provenance.contains("assisted: teacher_hint"),
            "{}",
            lb.entries[1].provenance
        );
    }
}
