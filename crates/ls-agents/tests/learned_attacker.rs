//! The learned attacker (issue 45, item 6; `ls_agents::learned`): an open-ended strategy space
//! (mechanical checklist-PAY, the prior escalation, the blind red-team families, a count gate and
//! an amount gate per family, and a random-forest learner over every blind-visible field of a
//! fixed probe choosing among the strategies per case), trained on the pools of one random seed
//! set and tested on the pools of another, every pool kind (curated, holdout, challenge, twins,
//! quarter). Seeds are drawn at random per run and printed (`LEARNED_SEEDS=train,test` replays;
//! the ignored long variant takes `LEARNED_LOOP_N` seed pairs).
//!
//! Asserted, per pool kind:
//! * every strategy whose PAY is not made after the family's required checks (every fixed arm but
//!   checklist-PAY) keeps the pool's mean at or under 0.20;
//! * the learner over blind-visible fields gains at most 0.05 over the best fixed strategy of the
//!   same pool (fixed arms, the per-family training choice and the gates), plus a one-sided 95 %
//!   allowance on the paired per-case difference;
//! * the label classifier's within-kind balanced accuracy per family stays at 0.60 plus a sampling
//!   allowance.
//!
//! The headline bars (every evidence-independent policy, the learner and the gates included, at
//! or under 0.10) are asserted with the headline's own pairs in `ls-report/tests/headline.rs`; the
//! field-level bar in `tests/leak.rs`.

use ls_agents::learned::{self, AttackReport, CaseRow, PolicyKind, PoolSize};
use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::CasePool;
use rand::Rng;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// `n` distinct seeds drawn at random (spaced by 10, so the derived per-kind seeds of two draws
/// never collide), or read from `var` to replay a run.
fn draw_seeds(var: &str, n: usize) -> Vec<u64> {
    if let Ok(v) = std::env::var(var) {
        let s: Vec<u64> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        assert_eq!(s.len(), n, "{var} needs {n} seeds");
        return s;
    }
    let mut rng = rand::rng();
    let mut drawn = BTreeSet::new();
    while drawn.len() < n {
        drawn.insert(rng.random_range(100..90_000u64) * 10);
    }
    let mut v: Vec<u64> = drawn.into_iter().collect();
    let k = rng.random_range(0..n);
    v.rotate_left(k);
    v
}

/// The standard normal quantile for an upper-tail probability `alpha` (0 < alpha < 0.5):
/// Abramowitz & Stegun 26.2.23, absolute error under 4.5e-4.
fn upper_quantile(alpha: f64) -> f64 {
    let t = (-2.0 * alpha.ln()).sqrt();
    t - (2.515_517 + 0.802_853 * t + 0.010_328 * t * t)
        / (1.0 + 1.432_788 * t + 0.189_269 * t * t + 0.001_308 * t * t * t)
}

#[test]
fn the_quantile_matches_known_values() {
    for (alpha, z) in [(0.05, 1.6449), (0.025, 1.9600), (0.001, 3.0902)] {
        assert!((upper_quantile(alpha) - z).abs() < 1e-3, "{alpha}");
    }
}

/// Rows of the training pools (generated kinds of the training seeds) and of the test pools
/// (the curated cases and the generated kinds of the test seeds).
fn rows(
    set: &FixtureSet,
    train_seeds: &[u64],
    test_seeds: &[u64],
    size: PoolSize,
) -> (Vec<CaseRow>, Vec<CaseRow>) {
    let gen = |seeds: &[u64]| -> Vec<(String, Case)> {
        seeds
            .iter()
            .flat_map(|&s| learned::generated_pools(set, s, size))
            .collect()
    };
    let train = gen(train_seeds);
    let mut test: Vec<(String, Case)> = set
        .cases
        .iter()
        .map(|c| ("curated".to_owned(), c.clone()))
        .collect();
    test.extend(gen(test_seeds));
    let mut seen = BTreeSet::new();
    let all: Vec<Arc<Case>> = train
        .iter()
        .chain(&test)
        .filter(|(_, c)| seen.insert(c.case_id.clone()))
        .map(|(_, c)| Arc::new(c.clone()))
        .collect();
    let pool = Arc::new(CasePool::from_parts(all, Arc::new(set.master.clone())));
    (
        learned::case_rows(&pool, &train),
        learned::case_rows(&pool, &test),
    )
}

fn run(train_seeds: &[u64], test_seeds: &[u64], size: PoolSize) -> AttackReport {
    let t0 = Instant::now();
    let set = FixtureSet::embedded().expect("fixtures");
    let (train, test) = rows(&set, train_seeds, test_seeds, size);
    let report = learned::evaluate(&train, &test, train_seeds, test_seeds);
    eprintln!("{}", report.table());
    eprintln!(
        "learned attacker runtime: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    report
}

/// Every bar of the module docs on one report; the failures, named.
fn check(report: &AttackReport) -> Vec<String> {
    let mut failures = Vec::new();
    for p in &report.policies {
        let Some(bound) = p.per_case_bound else {
            continue;
        };
        for (kind, f) in &p.pools {
            if f.mean > bound {
                failures.push(format!(
                    "{} on {kind}: mean {:.4} > {bound} (benign {:?}, risky {:?})",
                    p.policy, f.mean, f.benign_mean, f.risky_mean
                ));
            }
        }
    }
    for g in &report.gains {
        let allowance = upper_quantile(0.05) * g.gain_standard_error;
        if g.gain > 0.05 + allowance {
            failures.push(format!(
                "learner on {}: {:.4} vs best fixed {} {:.4}: gain {:+.4} > 0.05 + {allowance:.4}",
                g.pool, g.learner_mean, g.best_fixed, g.best_fixed_mean, g.gain
            ));
        }
    }
    let comparisons = report.classifier.len().max(1);
    for c in &report.classifier {
        let (p, n) = (
            (c.n_test - c.n_test_benign).max(1) as f64,
            c.n_test_benign.max(1) as f64,
        );
        let a = upper_quantile(0.05 / comparisons as f64) * 0.5 * (0.25 / p + 0.25 / n).sqrt();
        if c.balanced_accuracy > 0.60 + a {
            failures.push(format!(
                "label classifier {}: balanced accuracy {:.3} > 0.60 + {a:.3}",
                c.family, c.balanced_accuracy
            ));
        }
    }
    failures
}

/// One random training seed, one random test seed, every pool kind (bounded: a few minutes in a
/// debug build).
#[test]
fn learned_attacker_gains_nothing_over_fixed_strategies() {
    let v = draw_seeds("LEARNED_SEEDS", 2);
    eprintln!("learned attacker seeds: LEARNED_SEEDS={},{}", v[0], v[1]);
    let report = run(&v[..1], &v[1..], PoolSize::default());
    let kinds: BTreeSet<&str> = report
        .policies
        .iter()
        .flat_map(|p| p.pools.keys().map(String::as_str))
        .collect();
    for k in ["curated", "holdout", "challenge", "twins", "quarter"] {
        assert!(kinds.contains(k), "pool kind {k} missing: {kinds:?}");
    }
    assert!(report
        .policies
        .iter()
        .any(|p| p.kind == PolicyKind::Learner));
    let failures = check(&report);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same over `LEARNED_LOOP_N` (default 10) random seed pairs with larger pools (ignored:
/// minutes; run with `--ignored`). Prints each pair's report and fails on any bar.
#[test]
#[ignore]
fn learned_attacker_over_many_random_seeds() {
    let n: usize = std::env::var("LEARNED_LOOP_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut failures = Vec::new();
    for _ in 0..n {
        let v = draw_seeds("LEARNED_LOOP_SEEDS", 4);
        eprintln!("learned loop seeds: {v:?}");
        let report = run(
            &v[..2],
            &v[2..],
            PoolSize {
                variants: 4,
                quarter: 40,
            },
        );
        failures.extend(check(&report).into_iter().map(|f| format!("{v:?}: {f}")));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
