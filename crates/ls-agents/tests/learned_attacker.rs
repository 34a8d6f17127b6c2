//! The learned attacker (issue 27, item 5): a random forest per task family trained on the blind
//! features of generated pools with their own seeds, scored on separate pools whose seeds the
//! test draws at random (printed; `LEARNED_SEEDS=a,b,c,d` replays: two training seeds, then two
//! test seeds). Asserted per family and feature set: within-suite balanced accuracy ≤ 0.60 (plus
//! a one-sided 95 % sampling allowance for the family's test size), and the policy acting on its
//! prediction (label-cited PAY if benign, the best red-team strategy if risky) no better than
//! ignoring the prediction; the absolute bound (≤ 0.20 mean, ≤ 0.25 benign) on the grading in
//! the tree is an ignored test until the evidence-support grading lands.

use ls_agents::learned::{self, FeatureSet};
use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::CasePool;
use rand::Rng;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

/// Holdouts, challenge variants, twins and a 40-case ControlBench quarter from one seed.
fn pools(set: &FixtureSet, seed: u64) -> Vec<Case> {
    let mut cases = ls_gen::holdout(set, 4, seed);
    cases.extend(ls_gen::challenge(set, 4, seed.wrapping_add(1)));
    cases.extend(ls_gen::twins(set, seed.wrapping_add(2)));
    cases.extend(ls_gen::controlbench(
        set,
        &ls_gen::QuarterConfig {
            length: 40,
            seed: seed.wrapping_add(3),
            ..Default::default()
        },
    ));
    cases
}

fn seeds() -> (Vec<u64>, Vec<u64>) {
    if let Ok(v) = std::env::var("LEARNED_SEEDS") {
        let s: Vec<u64> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        assert_eq!(s.len(), 4, "LEARNED_SEEDS needs four seeds");
        return (s[..2].to_vec(), s[2..].to_vec());
    }
    let mut rng = rand::rng();
    let mut drawn = BTreeSet::new();
    while drawn.len() < 4 {
        // Spaced by 10 so the derived per-generator seeds of two draws never collide.
        drawn.insert(rng.random_range(100..9_000u64) * 10);
    }
    let mut v: Vec<u64> = drawn.into_iter().collect();
    let k = rng.random_range(0..4);
    v.rotate_left(k);
    (v[..2].to_vec(), v[2..].to_vec())
}

/// One-sided 95 % sampling allowance of a balanced accuracy measured on `pos` risky and `neg`
/// benign cases when nothing predicts the label (the test pools of a family are small, and the
/// figure is the maximum over feature sets).
fn allowance(pos: usize, neg: usize) -> f64 {
    let (p, n) = (pos.max(1) as f64, neg.max(1) as f64);
    1.64 * 0.5 * (0.25 / p + 0.25 / n).sqrt()
}

struct Run {
    report: learned::LearnedAttackReport,
}

fn run() -> Run {
    let t0 = Instant::now();
    let set = FixtureSet::embedded().expect("fixtures");
    let (train_seeds, test_seeds) = seeds();
    eprintln!(
        "learned attacker seeds: LEARNED_SEEDS={},{},{},{}",
        train_seeds[0], train_seeds[1], test_seeds[0], test_seeds[1]
    );
    let train: Vec<Case> = train_seeds.iter().flat_map(|&s| pools(&set, s)).collect();
    let test: Vec<Case> = test_seeds.iter().flat_map(|&s| pools(&set, s)).collect();
    let mut all = train.clone();
    all.extend(test.iter().cloned());
    let mut seen = BTreeSet::new();
    all.retain(|c| seen.insert(c.case_id.clone()));
    let pool = Arc::new(CasePool::from_parts(
        all.into_iter().map(Arc::new).collect(),
        Arc::new(set.master.clone()),
    ));
    let report = learned::evaluate(&pool, &train, &test, &train_seeds, &test_seeds);
    eprintln!("{}", report.table());
    for l in &report.structural {
        eprintln!(
            "structural {:7} {:.3} {}",
            l.family, l.balanced_accuracy, l.feature
        );
    }
    eprintln!(
        "learned attacker runtime: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Run { report }
}

/// Per family and feature set the classifier's within-suite balanced accuracy stays at 0.60
/// (plus the sampling allowance of the family's test size); no structural field alone passes it;
/// and acting on the prediction buys nothing over ignoring it (the policy's mean is no better
/// than always paying or always taking the risky strategy, within 0.03 plus a one-sided 95 %
/// allowance on the paired per-case gain).
#[test]
fn learned_attacker_cannot_tell_benign_from_risky() {
    let Run { report } = run();
    assert!(report.n_test >= 150, "test pool of {}", report.n_test);
    let families: BTreeSet<&str> = report
        .classifier
        .iter()
        .map(|c| c.family.as_str())
        .collect();
    for f in ["task_c", "task_d", "task_e"] {
        assert!(families.contains(f), "family {f} missing from {families:?}");
    }
    for c in &report.classifier {
        let a = allowance(c.n_test - c.n_test_benign, c.n_test_benign);
        assert!(
            c.balanced_accuracy <= 0.60 + a,
            "{} {}: balanced accuracy {:.3} > 0.60 + {a:.3}",
            c.family,
            c.feature_set.name(),
            c.balanced_accuracy
        );
    }
    for l in &report.structural {
        let c = report
            .classifier
            .iter()
            .find(|c| c.family == l.family)
            .expect("family row");
        let a = allowance(c.n_test - c.n_test_benign, c.n_test_benign);
        assert!(
            l.balanced_accuracy <= 0.60 + a,
            "{} {}: single-field balanced accuracy {:.3}",
            l.family,
            l.feature,
            l.balanced_accuracy
        );
    }
    for p in &report.policy {
        let best_constant = p.always_pay_mean.max(p.always_risky_mean);
        let margin = 0.03 + 1.64 * p.gain_standard_error;
        assert!(
            p.mean <= best_constant + margin,
            "{} {}: acting on the prediction scores {:.3}, the best constant policy {:.3} (+{margin:.3})",
            p.family,
            p.feature_set.name(),
            p.mean,
            best_constant
        );
    }
    let _ = FeatureSet::ALL;
}

/// The absolute bound of issue 27 item 5: the policy acting on the prediction scores ≤ 0.20 mean
/// and ≤ 0.25 on the benign cases of every family. It depends on the evidence-support grading
/// (items 1–3): on the grading before it a label-cited PAY alone earns about 0.5 on benign
/// cases, whatever the classifier says. Run with `--ignored` once that grading is in the tree.
#[test]
#[ignore = "needs the evidence-support grading of issue 27 items 1-3 (label-cited PAY still earns ~0.5 on benign cases)"]
fn learned_attacker_policy_scores_low_on_the_grading() {
    let Run { report } = run();
    for p in &report.policy {
        assert!(
            p.mean <= 0.20 && p.benign_mean <= 0.25,
            "{} {}: mean {:.3}, benign {:.3}",
            p.family,
            p.feature_set.name(),
            p.mean,
            p.benign_mean
        );
    }
}
