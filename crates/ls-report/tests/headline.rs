//! The headline score (paired discrimination over twin pairs, `ls_report::headline`;
//! `docs/grading.md`, "The headline score") on pairs of seeds drawn at random per run and printed
//! (`HEADLINE_SEEDS=a,b,c,d,e` replays; `LEARNED_SEEDS=t` the attacker's training seed).
//!
//! Asserted: every evidence-independent policy scores at most 0.10 — constant decisions with any
//! procedure (checklist-PAY, the prior escalation and every other red-team family, naive-pay,
//! always-escalate), random decisions (`game-random-decision`, the `random` agent), and the
//! learned attacker's policies fitted on pools of another random seed (the count gates, the amount
//! gates, the per-family choice and the random-forest learner over every blind-visible field);
//! the teacher tells the pairs apart (no pair inverted) and holds a floor of 0.80, and reaches the
//! bar of 0.85 (`teacher_reaches_the_headline_bar`).

use ls_agents::learned::{self, CaseRow, PoolSize};
use ls_agents::redteam::GamingFamily;
use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::TrackMode;
use ls_report::eval::EvalConfig;
use ls_report::headline::{self, Headline, Side, TwinPair};
use ls_report::LsGen;
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `n` distinct seeds drawn at random (or read from `var`).
fn draw_seeds(var: &str, n: usize) -> Vec<u64> {
    if let Ok(v) = std::env::var(var) {
        let s: Vec<u64> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        assert_eq!(s.len(), n, "{var} needs {n} seeds");
        return s;
    }
    let mut rng = rand::rng();
    let mut s = BTreeSet::new();
    while s.len() < n {
        s.insert(rng.random_range(1..100_000u64) * 10);
    }
    let v: Vec<u64> = s.into_iter().collect();
    eprintln!(
        "{var}={}",
        v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
    );
    v
}

fn cfg() -> EvalConfig {
    EvalConfig {
        pass_k: 1,
        threshold: 0.85,
        seed: 7,
        track_mode: TrackMode::Blind,
    }
}

fn pairs(set: &FixtureSet, seeds: &[u64]) -> Vec<TwinPair> {
    let gen = LsGen { set: set.clone() };
    let p = headline::pairs(set, &gen, seeds).expect("pairs");
    let families: BTreeSet<&str> = p.iter().map(|x| x.family.as_str()).collect();
    assert!(
        p.len() >= 10 * seeds.len() && families.len() >= 4,
        "{} pairs over {families:?}",
        p.len()
    );
    p
}

fn print(name: &str, h: &Headline) {
    eprintln!(
        "headline {name:28} {:.4} (credit {:+.4}; told apart {}, inverted {}, same side {} of {}; benign {:.4} risky {:.4}; {})",
        h.headline,
        h.mean_credit,
        h.discriminated,
        h.inverted,
        h.same_side,
        h.pairs,
        h.benign_mean,
        h.risky_mean,
        h.families
            .iter()
            .map(|(f, x)| format!("{f} {:.3}", x.headline))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// Play a registered agent over the pairs.
fn played(set: &FixtureSet, pairs: &[TwinPair], seeds: &[u64], agent: &str) -> Headline {
    let master = Arc::new(set.master.clone());
    let f = || ls_agents::offline_agent(agent).expect("agent");
    let (h, _) = headline::play(&f, &master, pairs, seeds, &cfg());
    print(agent, &h);
    h
}

/// The learned attacker's policies (fitted on the generated pools of `train_seed`) on the pairs:
/// every policy's headline.
fn attacker_headlines(
    set: &FixtureSet,
    pairs: &[TwinPair],
    seeds: &[u64],
    train_seed: u64,
) -> BTreeMap<String, Headline> {
    let train: Vec<(String, Case)> = learned::generated_pools(set, train_seed, PoolSize::default());
    let test: Vec<(String, Case)> = pairs
        .iter()
        .flat_map(|p| [p.benign.clone(), p.risky.clone()])
        .map(|c| ("twins".to_owned(), c))
        .collect();
    let pool = learned::pool_over(set, &train, &test);
    let (tr, te): (Vec<CaseRow>, Vec<CaseRow>) = (
        learned::case_rows(&pool, &train),
        learned::case_rows(&pool, &test),
    );
    let report = learned::evaluate(&tr, &te, &[train_seed], seeds);
    for (fam, (cg, ag)) in &report.gates {
        eprintln!("gates {fam}: {} / {}", cg.label(), ag.label());
    }
    report
        .outcomes
        .iter()
        .filter_map(|(policy, by_case)| {
            let h = headline::headline_by(pairs, seeds, |c| {
                by_case
                    .get(&c.case_id)
                    .map(|o| Side {
                        paid: o.paid,
                        score: o.score,
                    })
                    .into_iter()
                    .collect()
            })?;
            print(policy, &h);
            Some((policy.clone(), h))
        })
        .collect()
}

#[test]
fn no_evidence_independent_policy_earns_the_headline() {
    let set = FixtureSet::embedded().expect("fixtures");
    let seeds = draw_seeds("HEADLINE_SEEDS", 5);
    let pairs = pairs(&set, &seeds);
    let train_seed = draw_seeds("LEARNED_SEEDS", 1)[0];
    let mut headlines = attacker_headlines(&set, &pairs, &seeds, train_seed);
    // The fixed arms were played on the pairs by the attacker; the rest here.
    let mut agents: Vec<String> = [
        "naive-pay",
        "always-escalate",
        "random",
        ls_agents::RANDOM_DECISION,
    ]
    .map(str::to_owned)
    .to_vec();
    agents.extend(
        GamingFamily::ALL
            .iter()
            .map(|f| f.name().to_owned())
            .filter(|n| !headlines.contains_key(n)),
    );
    for a in agents {
        let h = played(&set, &pairs, &seeds, &a);
        headlines.insert(a, h);
    }
    assert!(headlines.contains_key(ls_agents::CHECKLIST_PAY));
    assert!(headlines.contains_key(learned::LEARNER));
    assert!(headlines.contains_key(learned::COUNT_GATE));
    let over: Vec<String> = headlines
        .iter()
        .filter(|(_, h)| h.headline > 0.10)
        .map(|(n, h)| {
            format!(
                "{n}: {:.4} (told apart {} of {})",
                h.headline, h.discriminated, h.pairs
            )
        })
        .collect();
    assert!(
        over.is_empty(),
        "evidence-independent policies over 0.10 (HEADLINE_SEEDS={}, LEARNED_SEEDS={train_seed}): {over:#?}",
        seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
    );
    // The constant deciders decide every pair on one side.
    for n in [
        ls_agents::CHECKLIST_PAY,
        "naive-pay",
        "always-escalate",
        "game-prior-escalation",
    ] {
        let h = &headlines[n];
        assert_eq!((h.headline, h.same_side), (0.0, h.pairs), "{n}");
    }
}

/// The teacher tells every pair apart, pays no risky member whose benign twin it held, and holds
/// a floor of 0.80.
#[test]
fn the_teacher_tells_the_pairs_apart() {
    let set = FixtureSet::embedded().expect("fixtures");
    let seeds = draw_seeds("HEADLINE_SEEDS", 5);
    let h = played(&set, &pairs(&set, &seeds), &seeds, "teacher");
    assert_eq!(h.inverted, 0, "{h:?}");
    assert_eq!(h.risky_pay_rate, 0.0, "the teacher released a risky member");
    assert!(h.headline >= 0.80, "teacher headline {}", h.headline);
}

/// The teacher's bar: at least 0.85 on the headline (0.880–0.907 over seven random draws of five
/// seeds when this was written; it was 0.842 while the teacher called the fake-receipt
/// counterpart of CASE-B-002 a quantity mismatch: docs/grading.md).
#[test]
fn teacher_reaches_the_headline_bar() {
    let set = FixtureSet::embedded().expect("fixtures");
    let seeds = draw_seeds("HEADLINE_SEEDS", 5);
    let h = played(&set, &pairs(&set, &seeds), &seeds, "teacher");
    assert!(h.headline >= 0.85, "teacher headline {}", h.headline);
}
