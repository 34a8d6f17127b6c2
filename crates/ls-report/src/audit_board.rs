//! The Financial Audit leaderboard: stored auditor runs (`ledgershield audit-llm`, `ledgershield
//! audit-baseline --store`) ranked side by side, the rule-based baseline beside the LLM
//! auditors.
//!
//! An entry is one auditor (agent, model, agent type) on one set of seeds in one mode (single
//! tasks, or campaigns), from its newest stored run; entries are ranked by their mean score within
//! their track and mode. Runs with any assistance are on the `assisted` track, ranked after and
//! apart from the unassisted ones (the audit auditors have none today, so every run is
//! unassisted). Figures are the stored run's: nothing is replayed.

use crate::metrics::r4;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The store kinds of audit runs.
pub const AUDIT_TASKS_KIND: &str = "audit";
pub const AUDIT_CAMPAIGN_KIND: &str = "audit-campaign";

/// A stored audit run as the board reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditRunInput {
    pub run_id: String,
    pub kind: String,
    pub agent: String,
    pub model: String,
    pub agent_type: String,
    pub created_at: String,
    pub summary: Value,
}

/// One ranked auditor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditBoardEntry {
    pub rank: usize,
    pub agent: String,
    pub model: String,
    #[serde(rename = "type")]
    pub agent_type: String,
    pub track: String,
    /// `tasks` or `campaign`.
    pub mode: String,
    pub seeds: Vec<u64>,
    /// Every seed is a held-out seed (100-104, 100000-109999).
    pub held_out: bool,
    /// Tasks: the mean grade score over every task and seed; campaigns: the mean campaign score.
    pub mean_score: f64,
    /// Tasks: the mean per task.
    pub task_means: BTreeMap<String, f64>,
    pub episodes: u64,
    pub failed_episodes: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub seconds: f64,
    /// Where it was played (`in-process`, or the server's origin).
    pub source: String,
    pub run_id: String,
    pub created_at: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditBoard {
    pub entries: Vec<AuditBoardEntry>,
    pub note: String,
}

fn seeds_of(s: &Value) -> Vec<u64> {
    let mut v: Vec<u64> = s
        .get("seeds")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn entry(r: &AuditRunInput) -> AuditBoardEntry {
    let s = &r.summary;
    let n = |k: &str| s.get(k).and_then(Value::as_u64).unwrap_or(0);
    let calls = |k: &str| {
        s.pointer(&format!("/model_calls/{k}"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let seeds = seeds_of(s);
    AuditBoardEntry {
        rank: 0,
        agent: r.agent.clone(),
        model: r.model.clone(),
        agent_type: r.agent_type.clone(),
        track: s
            .get("track")
            .and_then(Value::as_str)
            .unwrap_or(ls_agents::assist::UNASSISTED)
            .to_owned(),
        mode: if r.kind == AUDIT_CAMPAIGN_KIND {
            "campaign"
        } else {
            "tasks"
        }
        .into(),
        held_out: !seeds.is_empty() && seeds.iter().all(|x| audit_env::model::is_held_out(*x)),
        seeds,
        mean_score: r4(s.get("mean_score").and_then(Value::as_f64).unwrap_or(0.0)),
        task_means: s
            .get("task_means")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default(),
        episodes: n("episodes"),
        failed_episodes: n("failed_episodes"),
        prompt_tokens: calls("prompt_tokens"),
        completion_tokens: calls("completion_tokens"),
        seconds: s.get("seconds").and_then(Value::as_f64).unwrap_or(0.0),
        source: s
            .get("server")
            .or_else(|| s.get("source"))
            .and_then(Value::as_str)
            .unwrap_or("in-process")
            .to_owned(),
        run_id: r.run_id.clone(),
        created_at: r.created_at.clone(),
    }
}

/// Rank the stored audit runs (newest run per auditor, mode and seed set).
pub fn audit_board(runs: &[AuditRunInput]) -> AuditBoard {
    let mut latest: BTreeMap<(String, String, String, String, Vec<u64>), AuditBoardEntry> =
        BTreeMap::new();
    for r in runs
        .iter()
        .filter(|r| r.kind == AUDIT_TASKS_KIND || r.kind == AUDIT_CAMPAIGN_KIND)
    {
        let e = entry(r);
        let key = (
            e.agent.clone(),
            e.model.clone(),
            e.agent_type.clone(),
            e.mode.clone(),
            e.seeds.clone(),
        );
        match latest.get(&key) {
            Some(old) if (&old.created_at, &old.run_id) >= (&e.created_at, &e.run_id) => {}
            _ => {
                latest.insert(key, e);
            }
        }
    }
    let mut entries: Vec<AuditBoardEntry> = latest.into_values().collect();
    let assisted = |e: &AuditBoardEntry| e.track != ls_agents::assist::UNASSISTED;
    entries.sort_by(|a, b| {
        assisted(a)
            .cmp(&assisted(b))
            .then(a.mode.cmp(&b.mode).reverse())
            .then(b.mean_score.total_cmp(&a.mean_score))
            .then(a.model.cmp(&b.model))
    });
    let mut rank = 0;
    let mut group: Option<(bool, String)> = None;
    for e in &mut entries {
        let g = (assisted(e), e.mode.clone());
        if group.as_ref() != Some(&g) {
            rank = 0;
            group = Some(g);
        }
        rank += 1;
        e.rank = rank;
    }
    let note = if entries.is_empty() {
        "No stored audit runs: store one with `ledgershield audit-llm …` or `ledgershield audit-baseline --store`.".into()
    } else {
        "Ranked by mean score within each track (unassisted first) and mode (single tasks, then campaigns); compare entries on the same seeds.".into()
    };
    AuditBoard { entries, note }
}

/// The board as Markdown.
pub fn audit_board_markdown(b: &AuditBoard) -> String {
    let mut s = String::from("# Financial Audit leaderboard\n\n");
    if b.entries.is_empty() {
        let _ = writeln!(s, "{}", b.note);
        return s;
    }
    let _ = writeln!(s, "{}\n", b.note);
    let _ = writeln!(s, "| track | mode | rank | agent | model | seeds | mean | expense | invoice | gst | fraud | episodes (failed) | tokens in/out | seconds | source | run |");
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for e in &b.entries {
        let t = |k: &str| {
            e.task_means
                .get(k)
                .map(|x| format!("{x:.4}"))
                .unwrap_or_else(|| "—".into())
        };
        let seeds = match (e.seeds.first(), e.seeds.last()) {
            _ if e.seeds.len() <= 5 && !e.seeds.is_empty() => e
                .seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            (Some(a), Some(z)) => format!("{a}–{z} ({} seeds)", e.seeds.len()),
            _ => "—".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {}{} | {:.4} | {} | {} | {} | {} | {} ({}) | {}/{} | {:.1} | {} | {} |",
            e.track,
            e.mode,
            e.rank,
            e.agent,
            e.model,
            seeds,
            if e.held_out { " held-out" } else { "" },
            e.mean_score,
            t("expense_audit"),
            t("invoice_match"),
            t("gst_reconciliation"),
            t("fraud_detection"),
            e.episodes,
            e.failed_episodes,
            e.prompt_tokens,
            e.completion_tokens,
            e.seconds,
            e.source,
            e.run_id
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(id: &str, kind: &str, agent: &str, model: &str, mean: f64, at: &str) -> AuditRunInput {
        AuditRunInput {
            run_id: id.into(),
            kind: kind.into(),
            agent: agent.into(),
            model: model.into(),
            agent_type: "x".into(),
            created_at: at.into(),
            summary: json!({"seeds": [100, 101], "mean_score": mean, "track": "unassisted",
                "task_means": {"expense_audit": mean}, "episodes": 8, "model_calls": {"prompt_tokens": 5}}),
        }
    }

    #[test]
    fn the_baseline_ranks_beside_the_llm_auditors_newest_run_each() {
        let runs = vec![
            run(
                "b1",
                AUDIT_TASKS_KIND,
                "audit-baseline",
                "rule-based-baseline-v1",
                0.86,
                "2026-01-01",
            ),
            run("l1", AUDIT_TASKS_KIND, "audit-llm", "m", 0.2, "2026-01-01"),
            run("l2", AUDIT_TASKS_KIND, "audit-llm", "m", 0.3, "2026-01-02"),
            run(
                "c1",
                AUDIT_CAMPAIGN_KIND,
                "audit-llm",
                "m",
                0.1,
                "2026-01-02",
            ),
            run("r1", "run", "teacher", "t", 0.99, "2026-01-02"),
        ];
        let b = audit_board(&runs);
        let ids: Vec<&str> = b.entries.iter().map(|e| e.run_id.as_str()).collect();
        assert_eq!(
            ids,
            vec!["b1", "l2", "c1"],
            "newest llm run, campaigns after tasks, no ControlBench run"
        );
        assert_eq!(b.entries[1].rank, 2);
        assert_eq!(b.entries[2].rank, 1, "campaigns are ranked on their own");
        assert!(b.entries[0].held_out);
        assert_eq!(b.entries[0].prompt_tokens, 5);
        let md = audit_board_markdown(&b);
        assert!(
            md.contains("| unassisted | tasks | 1 | audit-baseline |"),
            "{md}"
        );
    }
}
