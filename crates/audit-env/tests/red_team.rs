//! Red team: farming policies on held-out seeds. Every policy sees only what an agent sees
//! (reset and step replies, `state()`, the agent's grade, the adaptive-difficulty and
//! adversary readouts) and is scored by the environment's internal grade. Seeds are drawn at
//! random from the held-out pool's range of thousands and printed, so a failure reproduces.

use std::collections::BTreeSet;

use audit_env::data;
use audit_env::episode::{AuditEnv, AuditResetRequest, AuditStepRequest, EnvConfig};
use audit_env::grading::{self, FeedbackDetail};
use audit_env::model::{self, Finding, TaskId, WorldRules};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

/// Every score a farming policy may reach on a held-out seed (mean per task).
const CEILING: f64 = 0.20;

/// The baseline's mean score on held-out seeds 100-104 before the farming fixes.
const BASELINE_HELD_OUT_BEFORE: f64 = 0.865;

fn draw_seeds(n: usize) -> Vec<u64> {
    let mut r = rand::rng();
    let range = model::HELD_OUT_RANGE;
    (0..n)
        .map(|_| r.random_range(range.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The documents a finding names (the task descriptions say which: expense_id, invoice_id,
/// invoice_no, txn_id) and the task's error types.
fn candidates(task: TaskId, seed: u64) -> (Vec<String>, Vec<&'static str>) {
    let d = data::generate(task, seed, &WorldRules::default());
    let ids: Vec<String> = d
        .documents
        .document_ids()
        .into_iter()
        .filter(|id| task != TaskId::InvoiceMatch || id.starts_with("INV"))
        .collect();
    let types = task.error_types().iter().map(|t| t.as_str()).collect();
    (ids, types)
}

fn reset(env: &mut AuditEnv, task: TaskId, seed: u64) -> Value {
    let r = env
        .reset(AuditResetRequest {
            task_id: Some(task),
            seed: Some(seed),
            ..Default::default()
        })
        .unwrap();
    serde_json::to_value(r).unwrap()
}

fn step(env: &mut AuditEnv, findings: Vec<Finding>, final_step: bool) -> Value {
    let r = env
        .step(AuditStepRequest {
            findings: Some(findings),
            submit_final: Some(final_step),
            ..Default::default()
        })
        .unwrap();
    serde_json::to_value(r).unwrap()
}

/// Everything an agent can read besides the step replies.
fn readouts(env: &AuditEnv) -> Value {
    json!({
        "state": serde_json::to_value(env.state()).unwrap(),
        "grade": serde_json::to_value(env.agent_grade()).unwrap(),
        "adaptive": serde_json::to_value(env.adaptive_difficulty()).unwrap(),
        "adversary": serde_json::to_value(env.adversarial.arms_race()).unwrap(),
    })
}

/// A reply with the agent's own echo and the random episode id removed.
fn normalised(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("findings_so_far");
                m.remove("episode_id");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// The internal (true) score of the environment's last finished episode.
fn true_score(env: &AuditEnv) -> f64 {
    env.episode
        .as_ref()
        .and_then(|e| e.full_grade.as_ref())
        .map(|g| g.score)
        .expect("episode graded")
}

/// Submit `findings` over as many steps as the per-step cap needs; the last one is final.
fn play(env: &mut AuditEnv, task: TaskId, seed: u64, findings: Vec<Finding>) -> f64 {
    reset(env, task, seed);
    let cap = env.config.max_findings_per_step;
    let chunks: Vec<Vec<Finding>> = findings.chunks(cap).map(|c| c.to_vec()).collect();
    assert!(
        chunks.len() as u32 <= task.max_steps(),
        "{task}: too many findings"
    );
    if chunks.is_empty() {
        step(env, vec![], true);
    }
    for (i, c) in chunks.iter().enumerate() {
        step(env, c.clone(), i + 1 == chunks.len());
    }
    true_score(env)
}

fn near_miss_farm(task: TaskId, seed: u64) -> Vec<Finding> {
    let (ids, _) = candidates(task, seed);
    let mut reps: Vec<&str> = vec![];
    let mut seen = BTreeSet::new();
    for t in task.error_types() {
        if seen.insert(t.family()) {
            reps.push(t.as_str());
        }
    }
    ids.iter()
        .flat_map(|d| reps.iter().map(move |t| Finding::new(d, t)))
        .collect()
}

fn all_docs_all_types(task: TaskId, seed: u64) -> Vec<Finding> {
    let (ids, types) = candidates(task, seed);
    ids.iter()
        .flat_map(|d| types.iter().map(move |t| Finding::new(d, t)))
        .collect()
}

fn random_findings(task: TaskId, seed: u64, n: usize, salt: u64) -> Vec<Finding> {
    let (ids, types) = candidates(task, seed);
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ (salt << 32));
    (0..n)
        .map(|_| {
            Finding::new(
                &ids[r.random_range(0..ids.len())],
                types[r.random_range(0..types.len())],
            )
        })
        .collect()
}

/// Each random finding spelled several ways (case, padding): one claim, many keys.
fn alias_spray(task: TaskId, seed: u64, salt: u64) -> Vec<Finding> {
    random_findings(task, seed, task.gt_count(), salt)
        .into_iter()
        .flat_map(|f| {
            let d = f.document_id.clone();
            let t = f.error_type.clone();
            [
                Finding::new(&d, &t),
                Finding::new(&d.to_ascii_lowercase(), &t.to_ascii_uppercase()),
                Finding::new(&format!("  {d} "), &format!(" {t}")),
                Finding::new(
                    &format!("\t{d}"),
                    &format!("{}{}", t[..1].to_uppercase(), &t[1..]),
                ),
            ]
        })
        .collect()
}

/// What an attacker reads from one reply: the reward net of the published step penalty and
/// final bonus, plus every count that could name true findings.
fn signal(reply: &Value, read: &Value) -> f64 {
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let rb = &reply["info"]["reward_breakdown"];
    let mut s = num(&reply["reward"]) - num(&rb["step_penalty"]) - num(&rb["final_bonus"]);
    for g in [&reply["grader"], &read["grade"]] {
        s += 10.0 * num(&g["true_positives"]) + 4.0 * num(&g["partial_matches"]);
        s -= num(&g["false_positives"]);
    }
    s + 10.0 * num(&read["state"]["found_errors"]) - num(&read["state"]["false_positives"])
}

/// Probe one candidate (document, type) per step, across as many resets of the same held-out
/// seed as it takes, rank candidates by what came back, then replay the best `gt_count`.
/// Candidates are shuffled first, so ties (no signal) are broken at random.
/// Returns the mean replay score and the number of distinct signal values the probes saw.
fn probe_and_replay(env: &mut AuditEnv, task: TaskId, seed: u64) -> (f64, usize) {
    let mut cands = all_docs_all_types(task, seed);
    cands.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    // One probe per non-final step; the final step of each episode is also read (its grade).
    let per_episode = task.max_steps() as usize - 1;
    let mut scored: Vec<(f64, usize)> = vec![];
    for (e, batch) in cands.chunks(per_episode).enumerate() {
        reset(env, task, seed);
        let mut episode_signal = 0.0;
        for (i, c) in batch.iter().enumerate() {
            let before = signal(&Value::Null, &readouts(env));
            let reply = step(env, vec![c.clone()], false);
            let s = signal(&reply, &readouts(env)) - before;
            episode_signal += s;
            scored.push((s, e * per_episode + i));
        }
        // The final grade of a one-probe episode is a probe of its own: an attacker that sees
        // counts learns whether the episode held a true finding.
        let fin = step(env, vec![], true);
        let fin_signal = signal(&fin, &readouts(env)) - episode_signal;
        for x in scored.iter_mut().skip(e * per_episode) {
            x.0 += 1e-3 * fin_signal;
        }
    }
    // Replay the best `gt_count` distinct claims. Ties (no signal) are broken by a fresh
    // shuffle per replay, and the replays are averaged, so a channel-free probe scores what a
    // random guess scores on average, while a leaking channel ranks the same claims first
    // whatever the tie-break.
    let distinct: BTreeSet<u64> = scored.iter().map(|x| x.0.to_bits()).collect();
    let replays = 10;
    let mut total = 0.0;
    for r in 0..replays {
        let mut order: Vec<(f64, u64, usize)> = {
            let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(31).wrapping_add(r));
            scored
                .iter()
                .map(|&(s, i)| (s, rng.random::<u64>(), i))
                .collect()
        };
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut seen = BTreeSet::new();
        let best: Vec<Finding> = order
            .iter()
            .map(|&(_, _, i)| cands[i].clone())
            .filter(|f| seen.insert(f.key()))
            .take(task.gt_count())
            .collect();
        total += play(env, task, seed, best);
    }
    (total / replays as f64, distinct.len())
}

fn report(name: &str, task: TaskId, scores: &[f64]) -> f64 {
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    let max = scores.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "red team {name:<22} {task:<20} mean {mean:.3} max {max:.2} n {}",
        scores.len()
    );
    mean
}

#[test]
fn farming_policies_score_at_most_the_ceiling_on_held_out_seeds() {
    // Deterministic policies on 16 seeds, the random ones on 6 seeds x 10 salts.
    let seeds = draw_seeds(16);
    eprintln!("held-out seeds: {seeds:?}");
    let mut env = AuditEnv::new(EnvConfig::default());
    let mut failures = vec![];
    for task in TaskId::ALL {
        let mut by_policy: Vec<(&str, Vec<f64>)> = vec![
            ("near_miss_farm", vec![]),
            ("all_docs_all_types", vec![]),
            ("random_gt_count", vec![]),
            ("random_3x_gt_count", vec![]),
            ("alias_spray", vec![]),
        ];
        for (n, &seed) in seeds.iter().enumerate() {
            let mut runs: Vec<(usize, Vec<Finding>)> = vec![
                (0, near_miss_farm(task, seed)),
                (1, all_docs_all_types(task, seed)),
            ];
            for salt in (0..10u64).filter(|_| n < 6) {
                runs.push((2, random_findings(task, seed, task.gt_count(), salt)));
                runs.push((
                    3,
                    random_findings(task, seed, 3 * task.gt_count(), 100 + salt),
                ));
                runs.push((4, alias_spray(task, seed, 200 + salt)));
            }
            for (k, f) in runs {
                let score = play(&mut env, task, seed, f);
                by_policy[k].1.push(score);
            }
        }
        for (name, scores) in &by_policy {
            let mean = report(name, task, scores);
            if mean > CEILING {
                failures.push(format!("{name} on {task}: {mean:.3}"));
            }
        }
    }
    assert!(failures.is_empty(), "seeds {seeds:?}: {failures:?}");
}

#[test]
fn probe_and_replay_across_resets_recovers_nothing() {
    let seeds = draw_seeds(3);
    eprintln!("held-out seeds: {seeds:?}");
    let mut env = AuditEnv::new(EnvConfig::default());
    let mut failures = vec![];
    for task in TaskId::ALL {
        let mut scores = vec![];
        for &s in &seeds {
            let (score, distinct) = probe_and_replay(&mut env, task, s);
            if distinct != 1 {
                failures.push(format!(
                    "{task} seed {s}: probes saw {distinct} distinct signals"
                ));
            }
            scores.push(score);
        }
        let mean = report("probe_and_replay", task, &scores);
        if mean > CEILING {
            failures.push(format!("{task}: {mean:.3}"));
        }
    }
    assert!(failures.is_empty(), "seeds {seeds:?}: {failures:?}");
}

/// The channel test behind the scores: on a held-out seed, the true findings and the same
/// number of wrong ones produce byte-identical replies and readouts at every step (once the
/// agent's own echo and the random episode id are removed), in the same episode and after a
/// reset of the same seed.
#[test]
fn held_out_replies_are_identical_for_true_and_wrong_findings() {
    let seeds = draw_seeds(3);
    eprintln!("held-out seeds: {seeds:?}");
    for task in TaskId::ALL {
        for &seed in &seeds {
            let gt = data::generate(task, seed, &WorldRules::default()).ground_truth;
            let truth = grading::perfect_findings(&gt);
            let (ids, types) = candidates(task, seed);
            let gt_keys: BTreeSet<(String, String)> = truth.iter().map(|f| f.key()).collect();
            let wrong: Vec<Finding> = ids
                .iter()
                .flat_map(|d| types.iter().map(move |t| Finding::new(d, t)))
                .filter(|f| !gt_keys.contains(&f.key()))
                .take(truth.len())
                .collect();
            let transcript = |findings: &[Finding]| {
                let mut env = AuditEnv::new(EnvConfig::default());
                let mut out = vec![normalised(reset(&mut env, task, seed))];
                let half = findings.len() / 2;
                out.push(normalised(step(&mut env, findings[..half].to_vec(), false)));
                out.push(normalised(readouts(&env)));
                out.push(normalised(step(&mut env, findings[half..].to_vec(), true)));
                out.push(normalised(readouts(&env)));
                out.push(normalised(reset(&mut env, task, seed)));
                out.push(normalised(readouts(&env)));
                out
            };
            let a = transcript(&truth);
            let b = transcript(&wrong);
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x, y, "{task} seed {seed}: reply {i} differs");
            }
        }
    }
}

/// Training seeds keep their shaping signal and full feedback (documented), so the sealing is
/// what makes held-out seeds different, not a broken reward.
#[test]
fn training_seeds_keep_shaping_and_full_feedback() {
    let mut r = rand::rng();
    let seed = r.random_range(1_000..9_000u64);
    eprintln!("training seed: {seed}");
    let mut env = AuditEnv::new(EnvConfig::default());
    let task = TaskId::InvoiceMatch;
    let gt = data::generate(task, seed, &WorldRules::default()).ground_truth;
    reset(&mut env, task, seed);
    let reply = step(
        &mut env,
        grading::perfect_findings(&gt)[..1].to_vec(),
        false,
    );
    assert!(
        reply["info"]["reward_breakdown"]["true_positive_reward"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let fin = step(&mut env, vec![], true);
    assert_eq!(
        fin["grader"]["feedback_detail"],
        json!(FeedbackDetail::Full)
    );
}

/// The honest rule-based baseline, on the default held-out list and on seeds drawn from the
/// held-out range: what the farming fixes must not take away.
#[test]
fn honest_baseline_keeps_its_score() {
    use audit_env::baseline::{self, BaselineConfig};
    let fixed: Vec<u64> = model::HELD_OUT_SEEDS.collect();
    let r = baseline::run(&fixed, &BaselineConfig::default());
    for (t, b) in &r.tasks {
        eprintln!("baseline {t:<20} held-out 100-104 mean {:.4}", b.mean_score);
    }
    eprintln!("baseline average (100-104) {:.4}", r.average_score);
    let drawn = draw_seeds(10);
    let d = baseline::run(&drawn, &BaselineConfig::default());
    eprintln!("baseline average over {drawn:?}: {:.4}", d.average_score);
    assert!(
        r.average_score >= BASELINE_HELD_OUT_BEFORE,
        "{}",
        r.average_score
    );
}

/// One error type (or a pair) claimed on every document. The attacker picks the choice with the
/// best mean on training seeds (held-out grades are sealed, so that is all it can learn from)
/// and plays it on held-out seeds.
#[test]
fn every_document_with_the_best_one_or_two_types_stays_at_the_ceiling() {
    let mut r = rand::rng();
    let train: Vec<u64> = (0..6).map(|_| r.random_range(1_000..10_000u64)).collect();
    // 40 held-out seeds: with 10, the pool mean of a pair near 0.18 went over 0.20 by sampling
    // noise alone (0.203 once; 0.145–0.181 over four 40-seed runs).
    let seeds = draw_seeds(40);
    eprintln!("training seeds: {train:?}, held-out seeds: {seeds:?}");
    let mut env = AuditEnv::new(EnvConfig::default());
    let mut failures = vec![];
    let mut mean_on = |task: TaskId, choice: &[&str], seeds: &[u64]| {
        let scores: Vec<f64> = seeds
            .iter()
            .map(|&seed| {
                let (ids, _) = candidates(task, seed);
                let f = ids
                    .iter()
                    .flat_map(|d| choice.iter().map(move |t| Finding::new(d, t)))
                    .collect();
                play(&mut env, task, seed, f)
            })
            .collect();
        scores.iter().sum::<f64>() / scores.len() as f64
    };
    for task in TaskId::ALL {
        let types: Vec<&str> = task.error_types().iter().map(|t| t.as_str()).collect();
        let mut choices: Vec<Vec<&str>> = types.iter().map(|t| vec![*t]).collect();
        for (i, a) in types.iter().enumerate() {
            for b in &types[i + 1..] {
                choices.push(vec![*a, *b]);
            }
        }
        let mut best = (f64::MIN, vec![]);
        for choice in &choices {
            let m = mean_on(task, choice, &train);
            if m > best.0 {
                best = (m, choice.clone());
            }
        }
        let held = mean_on(task, &best.1, &seeds);
        eprintln!(
            "red team best_types_everywhere   {task:<20} train {:.3} held-out mean {held:.3} types {:?}",
            best.0, best.1
        );
        if held > CEILING {
            failures.push(format!("{task}: {:?} {held:.3}", best.1));
        }
    }
    assert!(failures.is_empty(), "seeds {seeds:?}: {failures:?}");
}
