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

mod support;

use ls_agents::learned::{self, AttackReport, CaseRow, PolicyKind, PoolSize};
use ls_core::schema::Case;
use ls_core::FixtureSet;
use std::collections::BTreeSet;
use std::time::Instant;
use support::draw_seeds;

/// Rows of the training pools (generated kinds of the training seeds) and of the test pools
/// (the curated cases and the generated kinds of the test seeds).
fn rows(
    set: &FixtureSet,
    train_seeds: &[u64],
    test_seeds: &[u64],
    size: PoolSize,
) -> (Vec<CaseRow>, Vec<CaseRow>) {
    let train = learned::generated(set, train_seeds, size);
    let mut test = learned::curated(set);
    test.extend(learned::generated(set, test_seeds, size));
    let pool = learned::pool_over(set, &train, &test);
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
        let allowance = learned::upper_quantile(0.05) * g.gain_standard_error;
        if g.gain > 0.05 + allowance {
            failures.push(format!(
                "learner on {}: {:.4} vs best fixed {} {:.4}: gain {:+.4} > 0.05 + {allowance:.4}",
                g.pool, g.learner_mean, g.best_fixed, g.best_fixed_mean, g.gain
            ));
        }
    }
    let comparisons = report.classifier.len().max(1);
    for c in &report.classifier {
        let a = learned::sampling_allowance(
            c.n_test - c.n_test_benign,
            c.n_test_benign,
            0.05 / comparisons as f64,
        );
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

/// A diagnostic (ignored; prints, asserts the same bars): the attacker whose features are the
/// structure of the family's checks as the strategies play them (`learned::probe_checks`: the
/// teacher's tool calls, ids read from the documents) instead of the fixed probe — the issue's
/// attacker, which read rewards, components and info after the checks. Its action sequence reads
/// the documents, so a field it separates may be a lookup's answer rather than a side channel.
#[test]
#[ignore]
fn learned_attacker_after_the_checks() {
    let set = FixtureSet::embedded().expect("fixtures");
    let v = draw_seeds("LEARNED_SEEDS", 2);
    eprintln!("checks-probe seeds: LEARNED_SEEDS={},{}", v[0], v[1]);
    let size = PoolSize::default();
    let train = learned::generated(&set, &v[..1], size);
    let mut test = learned::curated(&set);
    test.extend(learned::generated(&set, &v[1..], size));
    let pool = learned::pool_over(&set, &train, &test);
    let rows = |cases: &[(String, Case)]| -> Vec<CaseRow> {
        cases
            .iter()
            .map(|(k, c)| learned::checks_row(&pool, c, k))
            .collect()
    };
    let report = learned::evaluate(&rows(&train), &rows(&test), &v[..1], &v[1..]);
    eprintln!("{}", report.table());
    let failures = check(&report);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The structural bound: a single structural field's within-kind balanced accuracy.
const STRUCTURAL_BOUND: f64 = 0.55;

/// On a pool of its own (three training seeds, six test seeds, every generated kind), no
/// structural field alone (`learned::is_structural`: document counts, pages, instruction length,
/// budget, step limit, pending events, linked-invoice count, queue pressure, the first steps'
/// budget, rewards and reward components) tells a benign case from a risky one within a pool kind
/// better than 0.55 plus the sampling allowance of its family's test size (Bonferroni over every
/// row asserted; `STRUCTURAL_SEEDS=a,…,i` replays). Budget and step limit once followed the
/// document counts, which followed the attacks (docs/generation.md §1.5).
#[test]
fn structural_fields_do_not_predict_the_label() {
    let t0 = Instant::now();
    let set = FixtureSet::embedded().expect("fixtures");
    let v = draw_seeds("STRUCTURAL_SEEDS", 9);
    eprintln!(
        "structural seeds: STRUCTURAL_SEEDS={}",
        v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
    );
    let size = PoolSize {
        variants: 4,
        quarter: 40,
    };
    let (train, test) = (
        learned::generated(&set, &v[..3], size),
        learned::generated(&set, &v[3..], size),
    );
    let pool = learned::pool_over(&set, &train, &test);
    let rows = learned::structural_scan(&pool, &train, &test);
    let families: BTreeSet<&str> = rows.iter().map(|l| l.family.as_str()).collect();
    // (A field constant over a family's training cases has no row: `max_steps` and `budget_total`
    // are the family's own limits, so they read exactly 0.5 and are not listed.)
    for f in ["task_c", "task_d", "task_e"] {
        assert!(families.contains(f), "family {f} missing from {families:?}");
    }
    let counts = |fam: &str| {
        let of: Vec<&(String, Case)> = test
            .iter()
            .filter(|(_, c)| c.task_type.as_str() == fam)
            .collect();
        let risky = of
            .iter()
            .filter(|(_, c)| c.gold.decision.is_some_and(|d| d.as_str() != "PAY"))
            .count();
        (risky, of.len() - risky)
    };
    let mut failures = Vec::new();
    for l in &rows {
        let (pos, neg) = counts(&l.family);
        let a = learned::sampling_allowance(pos, neg, 0.05 / rows.len().max(1) as f64);
        if l.balanced_accuracy > STRUCTURAL_BOUND + a {
            failures.push(format!(
                "{} {}: {:.3} > {STRUCTURAL_BOUND} + {a:.3} ({pos} risky, {neg} benign)",
                l.family, l.feature, l.balanced_accuracy
            ));
        }
    }
    for l in rows.iter().take(12) {
        eprintln!(
            "structural {:7} {:.3} {}",
            l.family, l.balanced_accuracy, l.feature
        );
    }
    eprintln!(
        "structural scan: {} rows, {} test cases, {:.1} s",
        rows.len(),
        test.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}
