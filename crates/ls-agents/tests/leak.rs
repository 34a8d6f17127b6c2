//! Leak test: over a generated pool of 200+ cases, no single field of a blind-mode reply before
//! the terminal step predicts the gold decision better than a balanced accuracy of 0.60.
//!
//! The episode is a fixed, evidence-free procedure: the reset, `GET /state`, then every
//! intervention, then waits (`lookup_policy`). Nothing in it reads a document, so whatever
//! predicts the label here is a side channel: ids, instructions, metadata, reward components,
//! the presence and timing of events, the state. Every scalar of every reply is a feature
//! (keyed by its path and the step), and so is every word of every string (so a suite marker
//! inside an id or a cue inside an instruction counts). Each feature's predictor is fitted on
//! half the cases (value → majority gold decision) and scored on the other half. The pool's seeds
//! are drawn at random per run and printed (`LEAK_SEED=n` replays one).

use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, TrackMode};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const INTERVENTIONS: [&str; 8] = [
    "request_callback_verification",
    "request_bank_change_approval_chain",
    "request_po_reconciliation",
    "request_additional_receipt_evidence",
    "flag_duplicate_cluster_review",
    "freeze_vendor_profile",
    "route_to_procurement",
    "route_to_security",
];

/// Evidence by design (what a tool or a delivered artifact says), not a side channel;
/// `observed_risk_signals` is `GET /state`'s name for the observation's `observed_signals`.
const EVIDENCE_KEYS: [&str; 5] = [
    "async_artifacts",
    "revealed_artifacts",
    "artifact",
    "observed_signals",
    "observed_risk_signals",
];

/// Views of delivered evidence in the observation and info, dropped once an artifact has arrived (before
/// that they are side channels and stay).
const EVIDENCE_VIEWS: [&str; 3] = ["messages", "risk_snapshot", "control_boundary"];

fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                if EVIDENCE_KEYS.contains(&k.as_str()) {
                    continue;
                }
                flatten(&format!("{prefix}.{k}"), x, out);
            }
        }
        Value::Array(a) => {
            out.insert(format!("{prefix}#len"), a.len().to_string());
            for (i, x) in a.iter().enumerate().take(16) {
                flatten(&format!("{prefix}[{i}]"), x, out);
            }
        }
        Value::String(s) => {
            out.insert(prefix.to_owned(), s.clone());
            for w in s
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| w.len() >= 3)
            {
                out.insert(format!("{prefix}~{}", w.to_ascii_lowercase()), "1".into());
            }
        }
        Value::Number(n) => {
            out.insert(
                prefix.to_owned(),
                format!("{:.3}", n.as_f64().unwrap_or(0.0)),
            );
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

/// Every feature of one case's pre-terminal replies.
fn features(pool: &Arc<CasePool>, case: &Case) -> BTreeMap<String, String> {
    let mut env = Environment::new(
        pool.clone(),
        EnvConfig {
            track_mode: TrackMode::Blind,
        },
    );
    let mut out = BTreeMap::new();
    let reset = env
        .reset(&ResetRequest {
            case_id: Some(case.case_id.clone()),
            ..Default::default()
        })
        .expect("reset");
    flatten("reset", &serde_json::to_value(&reset).unwrap(), &mut out);
    flatten(
        "state",
        &serde_json::to_value(env.state()).unwrap(),
        &mut out,
    );
    let mut actions: Vec<&str> = INTERVENTIONS.to_vec();
    actions.extend(["lookup_policy"; 6]);
    let mut evidence_seen = false;
    for (i, a) in actions.iter().enumerate() {
        let r = env.step(a, &Map::new()).expect("step");
        if r.done {
            break;
        }
        let mut v = serde_json::to_value(&r).unwrap();
        // Once a requested artifact is delivered, the belief (and the rewards shaped by it) has
        // learned from evidence: from then on only the timing channels are features.
        evidence_seen |= !r.observation.revealed_artifacts.is_empty();
        if evidence_seen {
            for path in ["/info", "/observation/last_tool_result"] {
                if let Some(o) = v.pointer_mut(path).and_then(Value::as_object_mut) {
                    o.remove("reward_model");
                }
            }
            if let Some(o) = v.as_object_mut() {
                o.remove("reward");
            }
            // What the delivered artifact says, restated: the inbox message announcing it, the
            // risk picture and the follow-ups the control boundary derives from it.
            for path in ["/observation", "/info"] {
                if let Some(o) = v.pointer_mut(path).and_then(Value::as_object_mut) {
                    for k in EVIDENCE_VIEWS {
                        o.remove(k);
                    }
                }
            }
        }
        // The reply's own tool result is the intervention's or lookup's answer (evidence), but
        // its reward model and any pressure event are side channels and stay.
        if let Some(o) = v
            .pointer_mut("/observation/last_tool_result")
            .and_then(Value::as_object_mut)
        {
            o.retain(|k, _| {
                matches!(
                    k.as_str(),
                    "reward_model" | "pressure_event" | "success" | "cost" | "scheduled_event"
                )
            });
        }
        flatten(&format!("step{i}"), &v, &mut out);
    }
    flatten(
        "state_end",
        &serde_json::to_value(env.state()).unwrap(),
        &mut out,
    );
    out
}

/// Balanced accuracy of predicting `labels[test]` from `values` with a value → majority-label
/// map fitted on `train` (unseen values: the train majority).
fn balanced_accuracy(
    values: &[Option<&String>],
    labels: &[&str],
    train: &[usize],
    test: &[usize],
) -> f64 {
    let mut counts: BTreeMap<Option<&String>, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut overall: BTreeMap<&str, usize> = BTreeMap::new();
    for &i in train {
        *counts
            .entry(values[i])
            .or_default()
            .entry(labels[i])
            .or_default() += 1;
        *overall.entry(labels[i]).or_default() += 1;
    }
    fn majority<'l>(m: &BTreeMap<&'l str, usize>) -> &'l str {
        m.iter()
            .max_by_key(|(l, n)| (**n, std::cmp::Reverse(**l)))
            .map(|(l, _)| *l)
            .unwrap_or("")
    }
    let fallback = majority(&overall);
    let classes: BTreeSet<&str> = test.iter().map(|&i| labels[i]).collect();
    let mut recall = 0.0;
    for c in &classes {
        let of_class: Vec<usize> = test.iter().copied().filter(|&i| labels[i] == *c).collect();
        let hit = of_class
            .iter()
            .filter(|&&i| counts.get(&values[i]).map_or(fallback, majority) == *c)
            .count();
        recall += hit as f64 / of_class.len() as f64;
    }
    recall / classes.len() as f64
}

/// The pool's base seed: drawn at random (printed), or `LEAK_SEED=n` to replay.
fn base_seed() -> u64 {
    if let Ok(v) = std::env::var("LEAK_SEED") {
        return v.trim().parse().expect("LEAK_SEED is a number");
    }
    use rand::Rng;
    rand::rng().random_range(1..9_000u64) * 10
}

fn generated_cases(set: &FixtureSet, seed: u64) -> Vec<Case> {
    let mut cases = ls_gen::holdout(set, 9, seed + 1);
    cases.extend(ls_gen::challenge(set, 9, seed + 2));
    for s in 0..6 {
        cases.extend(ls_gen::generators::twins(set, seed * 10 + 100 + s));
    }
    let mut seen = BTreeSet::new();
    cases.retain(|c| seen.insert(c.case_id.clone()));
    cases
}

/// The features that predict the gold decision best, with their balanced accuracy.
fn leaks(cases: &[Case], pool: &Arc<CasePool>) -> Vec<(f64, String)> {
    let feats: Vec<BTreeMap<String, String>> = cases.iter().map(|c| features(pool, c)).collect();
    let labels: Vec<&str> = cases
        .iter()
        .map(|c| c.gold.decision.map_or("PAY", |d| d.as_str()))
        .collect();
    let keys: BTreeSet<&String> = feats.iter().flat_map(|f| f.keys()).collect();
    let train: Vec<usize> = (0..cases.len()).filter(|i| i % 2 == 0).collect();
    let test: Vec<usize> = (0..cases.len()).filter(|i| i % 2 == 1).collect();
    let mut out: Vec<(f64, String)> = keys
        .into_iter()
        .map(|k| {
            let values: Vec<Option<&String>> = feats.iter().map(|f| f.get(k)).collect();
            (
                balanced_accuracy(&values, &labels, &train, &test),
                k.clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    out
}

/// The probe takes every intervention but the hand-off (which needs a packet it does not write),
/// in its own fixed order: a new intervention joins the list.
#[test]
fn the_probe_takes_every_intervention() {
    let listed: BTreeSet<&str> = INTERVENTIONS.into_iter().collect();
    let catalogue: BTreeSet<&str> = ls_core::ActionName::interventions()
        .filter(|&a| a != ls_core::ActionName::CreateHumanHandoff)
        .map(ls_core::ActionName::as_str)
        .collect();
    assert_eq!(listed, catalogue);
}

#[test]
fn balanced_accuracy_of_known_predictors() {
    let (a, b) = ("a".to_owned(), "b".to_owned());
    let labels = ["PAY", "HOLD", "PAY", "HOLD"];
    let perfect = [Some(&a), Some(&b), Some(&a), Some(&b)];
    assert_eq!(balanced_accuracy(&perfect, &labels, &[0, 1], &[2, 3]), 1.0);
    let constant = [Some(&a); 4];
    assert_eq!(balanced_accuracy(&constant, &labels, &[0, 1], &[2, 3]), 0.5);
    let _ = json!(null);
}

/// Over 200+ generated cases, no single side-channel feature's balanced accuracy exceeds 0.60
/// (the top ones are printed).
#[test]
fn no_blind_reply_field_predicts_the_gold_decision() {
    let set = FixtureSet::embedded().expect("fixtures");
    let seed = base_seed();
    eprintln!("leak pool seed: LEAK_SEED={seed}");
    let cases = generated_cases(&set, seed);
    assert!(cases.len() >= 200, "pool of {} cases", cases.len());
    let mix: BTreeMap<&str, usize> = cases.iter().fold(BTreeMap::new(), |mut m, c| {
        *m.entry(c.gold.decision.map_or("PAY", |d| d.as_str()))
            .or_default() += 1;
        m
    });
    eprintln!("leak pool: {} cases, label mix {mix:?}", cases.len());
    let pool = Arc::new(CasePool::from_parts(
        cases.iter().cloned().map(Arc::new).collect(),
        Arc::new(set.master.clone()),
    ));
    let found = leaks(&cases, &pool);
    for (ba, k) in found.iter().take(15) {
        eprintln!("leak {ba:.3} {k}");
    }
    let over: Vec<&(f64, String)> = found.iter().filter(|(ba, _)| *ba > 0.60).collect();
    assert!(
        over.is_empty(),
        "{} fields predict the gold decision: {:?}",
        over.len(),
        over.iter().take(10).collect::<Vec<_>>()
    );
}

/// The same measurement over the curated cases, whose side channels this branch closes (ids and
/// instructions of curated cases are fixture data; they are reported, not asserted, here).
#[test]
fn curated_reward_and_event_channels_do_not_predict_the_gold_decision() {
    let set = FixtureSet::embedded().expect("fixtures");
    let pool = Arc::new(CasePool::new(set.clone()));
    let cases: Vec<Case> = set.cases.clone();
    let found = leaks(&cases, &pool);
    let channel = |k: &str| {
        k.contains("reward")
            || k.contains("pressure")
            || k.contains("benchmark_split")
            || k.contains("contrastive")
            || k.contains("milestone")
    };
    let top: Vec<&(f64, String)> = found.iter().filter(|(_, k)| channel(k)).take(10).collect();
    for (ba, k) in &top {
        eprintln!("curated channel {ba:.3} {k}");
    }
    let over: Vec<&&(f64, String)> = top.iter().filter(|(ba, _)| *ba > 0.60).collect();
    assert!(
        over.is_empty(),
        "reward/event channels predict the gold decision on curated cases: {over:?}"
    );
}
