//! Label balance, opaque ids and evidence layout of the generated pools (issue: the grade must be
//! earned by reasoning). The documented label mix per generator is in `docs/generation.md`.

use ls_core::{Case, Decision, FixtureSet};
use ls_gen::QuarterConfig;
use std::collections::{BTreeMap, BTreeSet};

fn set() -> FixtureSet {
    FixtureSet::embedded().unwrap()
}

/// (benign share, review share (HOLD/NEEDS_REVIEW), share an "always ESCALATE_FRAUD" policy gets right).
fn mix(cases: &[Case]) -> (f64, f64, f64) {
    let n = cases.len().max(1) as f64;
    let benign = cases.iter().filter(|c| !c.gold.unsafe_if_pay).count() as f64 / n;
    let review = cases
        .iter()
        .filter(|c| {
            matches!(
                c.gold.decision,
                Some(Decision::Hold | Decision::NeedsReview)
            )
        })
        .count() as f64
        / n;
    let escalate = cases
        .iter()
        .filter(|c| c.gold.decision == Some(Decision::EscalateFraud))
        .count() as f64
        / n;
    (benign, review, escalate)
}

#[test]
fn every_generator_pool_has_the_documented_label_mix() {
    let set = set();
    let mut pools: Vec<(String, Vec<Case>)> = Vec::new();
    for seed in [31415u64, 1, 2, 3, 4] {
        pools.push((format!("holdout/{seed}"), ls_gen::holdout(&set, 1, seed)));
    }
    pools.push(("holdout/3-variants".into(), ls_gen::holdout(&set, 3, 9)));
    for seed in [2026u64, 7] {
        pools.push((
            format!("challenge/{seed}"),
            ls_gen::challenge(&set, 2, seed),
        ));
    }
    pools.push(("twins".into(), ls_gen::twins(&set, 31415)));
    for seed in [2026u64, 99] {
        pools.push((
            format!("controlbench/{seed}"),
            ls_gen::controlbench(
                &set,
                &QuarterConfig {
                    seed,
                    ..QuarterConfig::default()
                },
            ),
        ));
    }
    for (count, seed) in [(9usize, 1u64), (60, 5), (200, 8)] {
        pools.push((
            format!("fraudgen/{count}/{seed}"),
            ls_gen::fraudgen(count, seed),
        ));
    }
    pools.push((
        "certificate-required".into(),
        ls_gen::certificate_required(&set),
    ));
    for (name, cases) in &pools {
        let (benign, review, escalate) = mix(cases);
        eprintln!(
            "{name:24} n={:3} benign={benign:.2} review={review:.2} always_escalate={escalate:.2}",
            cases.len()
        );
        assert!(benign >= 1.0 / 3.0, "{name}: benign share {benign:.2}");
        assert!(
            escalate <= 0.60,
            "{name}: always-escalate would be right {escalate:.2} of the time"
        );
    }
    // Planned pools: exactly the documented shares (ceil 40 % benign, floor 20 % review plans).
    for (name, cases) in pools
        .iter()
        .filter(|(n, _)| n.starts_with("holdout") || n.starts_with("challenge"))
    {
        let n = cases.len();
        let plan = |p: &str| {
            cases
                .iter()
                .filter(|c| {
                    c.generator_metadata
                        .as_ref()
                        .and_then(|g| g.label_plan.as_deref())
                        == Some(p)
                })
                .count()
        };
        assert_eq!(plan("benign"), (n as f64 * 0.4).ceil() as usize, "{name}");
        assert_eq!(plan("review"), (n as f64 * 0.2).floor() as usize, "{name}");
        let (benign, review, _) = mix(cases);
        assert!(
            benign >= 0.40 - 1e-9 && review >= 0.15,
            "{name}: benign {benign:.2} review {review:.2}"
        );
    }
    // HOLD / NEEDS_REVIEW appear where the family has them.
    let all: Vec<&Case> = pools.iter().flat_map(|(_, c)| c.iter()).collect();
    for d in [Decision::Hold, Decision::NeedsReview] {
        assert!(
            all.iter().any(|c| c.gold.decision == Some(d)
                && c.generator_metadata
                    .as_ref()
                    .is_some_and(|g| g.suite.as_deref() == Some("holdout"))),
            "{d:?} in holdouts"
        );
    }
}

fn generated_pool(set: &FixtureSet) -> Vec<Case> {
    let mut v = ls_gen::challenge(set, 2, 2026);
    v.extend(ls_gen::holdout(set, 2, 31415));
    v.extend(ls_gen::twins(set, 31415));
    v.extend(ls_gen::fraudgen(60, 5));
    v
}

#[test]
fn generated_ids_are_opaque_and_stable() {
    let set = set();
    let pool = generated_pool(&set);
    let curated: BTreeSet<&str> = set.cases.iter().map(|c| c.case_id.as_str()).collect();
    let mut seen = BTreeSet::new();
    for c in &pool {
        let id = c.case_id.to_ascii_lowercase();
        for cue in [
            "::",
            "twin",
            "holdout",
            "variant",
            "challenge",
            "counterpart",
            "fraudgen",
            "case-",
            "legit",
            "ceo",
        ] {
            assert!(!id.contains(cue), "{} carries {cue:?}", c.case_id);
        }
        assert!(
            c.case_id.starts_with("LS-") && c.case_id.len() == 13,
            "{}",
            c.case_id
        );
        assert!(seen.insert(c.case_id.clone()), "duplicate id {}", c.case_id);
        for d in &c.documents {
            let lower = d.doc_id.to_ascii_lowercase();
            assert!(
                d.doc_id.starts_with(&c.case_id),
                "{} of {}",
                d.doc_id,
                c.case_id
            );
            assert!(
                !curated.iter().any(|k| d.doc_id.contains(k)),
                "{}",
                d.doc_id
            );
            assert!(
                !lower.contains("msg") && !lower.contains("email"),
                "{}: the id tells clean from attack mail",
                d.doc_id
            );
            for t in d.accurate_ocr.iter().chain(&d.noisy_ocr) {
                assert!(
                    !t.token_id.to_ascii_lowercase().contains("twin"),
                    "{}",
                    t.token_id
                );
            }
        }
        for r in c
            .context_overrides
            .as_ref()
            .and_then(|o| o.ledger_index.as_ref())
            .into_iter()
            .flatten()
        {
            let tail = r.ledger_id.rsplit('-').next().unwrap_or("");
            assert!(
                tail.chars().all(|ch| ch.is_ascii_digit()),
                "{}: ledger ids are numbered alike",
                r.ledger_id
            );
        }
    }
    // Same seed, byte-identical cases (ids included); another seed, other ids.
    let again = generated_pool(&set);
    assert_eq!(
        serde_json::to_string(&pool).unwrap(),
        serde_json::to_string(&again).unwrap()
    );
    let other: BTreeSet<String> = ls_gen::holdout(&set, 2, 27182)
        .into_iter()
        .map(|c| c.case_id)
        .collect();
    assert!(other.is_disjoint(&seen));
}

/// Line index (position in the document's accurate OCR) of every gold evidence token, per code.
fn positions(pool: &[Case]) -> BTreeMap<String, Vec<(String, usize, String)>> {
    let mut out: BTreeMap<String, Vec<(String, usize, String)>> = BTreeMap::new();
    for c in pool {
        for (code, ev) in &c.gold.evidence_targets {
            let Some(doc) = c.document(&ev.doc_id) else {
                continue;
            };
            let Some(tok) = ev.token_ids.first() else {
                continue;
            };
            if let Some(i) = doc.accurate_ocr.iter().position(|t| &t.token_id == tok) {
                let suffix = tok.rsplit('-').next().unwrap_or("").to_owned();
                out.entry(code.clone())
                    .or_default()
                    .push((doc.doc_type.clone(), i, suffix));
            }
        }
    }
    out
}

#[test]
fn gold_evidence_positions_are_spread_and_a_positional_template_misses() {
    let set = set();
    let mut train = ls_gen::challenge(&set, 4, 11);
    train.extend(ls_gen::holdout(&set, 4, 12));
    train.extend(ls_gen::fraudgen(120, 13));
    let mut test = ls_gen::challenge(&set, 4, 21);
    test.extend(ls_gen::holdout(&set, 4, 22));
    test.extend(ls_gen::fraudgen(120, 23));
    let tr = positions(&train);
    let te = positions(&test);
    // The template: for each code, the line position (and token id) seen most often in training.
    let mode = |v: &[(String, usize, String)]| {
        let mut m: BTreeMap<(String, usize), usize> = BTreeMap::new();
        for (d, i, _) in v {
            *m.entry((d.clone(), *i)).or_default() += 1;
        }
        m.into_iter().max_by_key(|(_, n)| *n).map(|(k, _)| k)
    };
    let (mut hits, mut total, mut id_hits) = (0usize, 0usize, 0usize);
    for (code, v) in &te {
        // The vendor header is the first line by the fixture convention (every reader relies on
        // it); only codes cited there are exempt.
        if code == "vendor_name_spoof" || v.len() < 12 {
            continue;
        }
        let distinct: BTreeSet<usize> = v.iter().map(|x| x.1).collect();
        let top = v
            .iter()
            .filter(|x| Some((x.0.clone(), x.1)) == tr.get(code).and_then(|t| mode(t)))
            .count();
        let share = top as f64 / v.len() as f64;
        eprintln!(
            "{code:36} n={:4} distinct positions={:2} template hit share={share:.2}",
            v.len(),
            distinct.len()
        );
        assert!(distinct.len() >= 4, "{code}: evidence at only {distinct:?}");
        assert!(
            share <= 0.40,
            "{code}: the most common training position finds {share:.2} of its evidence"
        );
        let common_id = tr.get(code).and_then(|t| {
            let mut m: BTreeMap<&str, usize> = BTreeMap::new();
            for x in t {
                *m.entry(x.2.as_str()).or_default() += 1;
            }
            m.into_iter()
                .max_by_key(|(_, n)| *n)
                .map(|(k, _)| k.to_owned())
        });
        id_hits += v
            .iter()
            .filter(|x| Some(&x.2) == common_id.as_ref())
            .count();
        hits += top;
        total += v.len();
    }
    assert!(total >= 300, "{total} evidence refs measured");
    let overall = hits as f64 / total as f64;
    let by_id = id_hits as f64 / total as f64;
    eprintln!("positional template: {overall:.3} of gold evidence by line position, {by_id:.3} by token id ({total} refs)");
    assert!(
        overall <= 0.30 && by_id <= 0.05,
        "template finds {overall:.3} by position, {by_id:.3} by id"
    );
}

#[test]
fn sleeper_activation_slots_vary_with_the_seed() {
    let mut schedules = BTreeSet::new();
    for seed in 1..=8u64 {
        let (act, forced) = ls_gen::generators::sleeper_schedule(100, 3, 3, seed);
        assert_eq!(act.len(), 3);
        assert!(act.windows(2).all(|w| w[0] < w[1]), "{act:?}");
        assert!(
            act.iter()
                .zip([25usize, 50, 75])
                .all(|(a, b)| a.abs_diff(b) <= 6),
            "{act:?}"
        );
        assert_eq!(forced.len(), 9, "three warm-ups per activation");
        schedules.insert(act);
    }
    assert!(schedules.len() >= 6, "{schedules:?}");
}

/// Best balanced accuracy of one threshold on `x` for predicting `y` (either direction).
fn best_balanced_accuracy(x: &[f64], y: &[bool]) -> f64 {
    let pos = y.iter().filter(|b| **b).count().max(1) as f64;
    let neg = y.iter().filter(|b| !**b).count().max(1) as f64;
    let mut cuts: Vec<f64> = x.to_vec();
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let mut best: f64 = 0.5;
    for c in cuts {
        let tp = x.iter().zip(y).filter(|(v, b)| **v >= c && **b).count() as f64;
        let tn = x.iter().zip(y).filter(|(v, b)| **v < c && !**b).count() as f64;
        let ba = 0.5 * (tp / pos + tn / neg);
        best = best.max(ba).max(1.0 - ba);
    }
    best
}

/// A named scalar of a case.
type Feature = (&'static str, fn(&Case) -> f64);

fn difficulty_rank(c: &Case) -> f64 {
    match c.difficulty {
        ls_core::Difficulty::Easy => 0.0,
        ls_core::Difficulty::Medium => 1.0,
        ls_core::Difficulty::Hard => 2.0,
        ls_core::Difficulty::Expert => 3.0,
    }
}

/// The shape of a generated case an agent sees before reading a line (document, email and
/// invoice counts, OCR length, budget, step limit, difficulty) does not predict its label.
#[test]
fn case_shape_does_not_predict_the_label() {
    let set = set();
    let mut pool = ls_gen::challenge(&set, 4, 31);
    pool.extend(ls_gen::holdout(&set, 4, 32));
    pool.extend(ls_gen::twins(&set, 33));
    pool.extend(ls_gen::fraudgen(120, 34));
    assert!(pool.len() >= 200);
    let y: Vec<bool> = pool.iter().map(|c| c.gold.unsafe_if_pay).collect();
    let features: [Feature; 7] = [
        ("documents", |c| c.documents.len() as f64),
        ("emails", |c| {
            c.documents.iter().filter(|d| d.doc_type == "email").count() as f64
        }),
        ("invoices", |c| c.invoices().count() as f64),
        ("ocr_lines", |c| {
            c.documents
                .iter()
                .map(|d| d.accurate_ocr.len())
                .sum::<usize>() as f64
        }),
        ("budget", |c| {
            rust_decimal::prelude::ToPrimitive::to_f64(&c.budget_total).unwrap_or(0.0)
        }),
        ("max_steps", |c| f64::from(c.max_steps)),
        ("difficulty", difficulty_rank),
    ];
    for (name, f) in features {
        let x: Vec<f64> = pool.iter().map(f).collect();
        let ba = best_balanced_accuracy(&x, &y);
        eprintln!("{name:12} best balanced accuracy {ba:.3}");
        assert!(
            ba <= 0.60,
            "{name} predicts the label with balanced accuracy {ba:.3}"
        );
    }
}

/// The surface words of the attack families (bank/remittance change, re-sent bills, approvals,
/// several invoices) occur on benign look-alikes too: none of them, as "contains the word"
/// over all document text, separates benign from risky cases well.
#[test]
fn attack_surface_words_do_not_separate_the_labels() {
    let set = set();
    let mut pool = ls_gen::challenge(&set, 4, 41);
    pool.extend(ls_gen::holdout(&set, 4, 42));
    pool.extend(ls_gen::twins(&set, 43));
    let y: Vec<bool> = pool.iter().map(|c| c.gold.unsafe_if_pay).collect();
    let text: Vec<String> = pool
        .iter()
        .map(|c| {
            c.documents
                .iter()
                .flat_map(|d| d.accurate_ocr.iter().map(|t| t.text.to_lowercase()))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    for word in [
        "bank",
        "remittance",
        "account",
        "re-sent",
        "approv",
        "invoices",
        "payment",
    ] {
        let x: Vec<f64> = text
            .iter()
            .map(|t| f64::from(u8::from(t.contains(word))))
            .collect();
        let ba = best_balanced_accuracy(&x, &y);
        eprintln!("{word:12} balanced accuracy {ba:.3}");
        assert!(ba <= 0.60, "{word:?} separates the labels at {ba:.3}");
    }
}

/// The amounts the reset observation restates from a case's `Total:` lines
/// (`portfolio_context.at_risk_amount`, `current_invoice_total`) of every Task E case of `pool`,
/// with the case's label (risky = not PAY).
fn restated_amounts(pool: Vec<Case>) -> Vec<(f64, f64, bool)> {
    let set = set();
    let e: Vec<Case> = pool
        .into_iter()
        .filter(|c| c.task_type == ls_core::TaskType::TaskE)
        .collect();
    let pool = std::sync::Arc::new(ls_env::CasePool::from_parts(
        e.iter().cloned().map(std::sync::Arc::new).collect(),
        std::sync::Arc::new(set.master.clone()),
    ));
    let mut env = ls_env::Environment::new(
        pool,
        ls_env::EnvConfig {
            track_mode: ls_env::TrackMode::Blind,
        },
    );
    e.iter()
        .map(|c| {
            let r = env
                .reset(&ls_env::ResetRequest {
                    case_id: Some(c.case_id.clone()),
                    track: Some("case".into()),
                    fresh_institution: true,
                    ..Default::default()
                })
                .expect("reset");
            let ctx = r.observation.portfolio_context.to_map();
            let num = |k: &str| {
                ctx.get(k)
                    .or_else(|| ctx.get("institutional_context").and_then(|i| i.get(k)))
                    .and_then(serde_json::Value::as_f64)
                    .unwrap_or(0.0)
            };
            (
                num("at_risk_amount"),
                num("current_invoice_total"),
                c.gold.decision != Some(Decision::Pay),
            )
        })
        .collect()
}

/// Balanced accuracy of `pred` against `truth`.
fn balanced(truth: &[bool], pred: &[bool]) -> f64 {
    let recall = |class: bool| {
        let n = truth.iter().filter(|t| **t == class).count().max(1) as f64;
        truth
            .iter()
            .zip(pred)
            .filter(|(t, p)| **t == class && **p == class)
            .count() as f64
            / n
    };
    0.5 * (recall(true) + recall(false))
}

/// Balanced accuracy on `test` of the best single threshold on `train` (either direction).
fn threshold_balanced_accuracy(train: &[(f64, bool)], test: &[(f64, bool)]) -> f64 {
    let (x, y): (Vec<f64>, Vec<bool>) = train.iter().copied().unzip();
    let mut cuts = x.clone();
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let (mut best, mut rule) = (0.0, (f64::INFINITY, true));
    for c in cuts {
        for above in [true, false] {
            let pred: Vec<bool> = x.iter().map(|v| (*v >= c) == above).collect();
            let ba = balanced(&y, &pred);
            if ba > best {
                (best, rule) = (ba, (c, above));
            }
        }
    }
    let truth: Vec<bool> = test.iter().map(|p| p.1).collect();
    let pred: Vec<bool> = test.iter().map(|p| (p.0 >= rule.0) == rule.1).collect();
    balanced(&truth, &pred)
}

/// Balanced accuracy on `test` of quartile bins of `train` (each bin -> its balanced majority).
fn binned_balanced_accuracy(train: &[(f64, bool)], test: &[(f64, bool)]) -> f64 {
    let mut v: Vec<f64> = train.iter().map(|p| p.0).collect();
    v.sort_by(f64::total_cmp);
    let edges: Vec<f64> = (1..4)
        .map(|q| v[(v.len() * q / 4).min(v.len() - 1)])
        .collect();
    let bin = |x: f64| edges.iter().filter(|e| x >= **e).count();
    let pos = train.iter().filter(|p| p.1).count().max(1) as f64;
    let neg = train.iter().filter(|p| !p.1).count().max(1) as f64;
    let mut score = [0.0f64; 4];
    for (x, risky) in train {
        score[bin(*x)] += if *risky { 1.0 / pos } else { -1.0 / neg };
    }
    let truth: Vec<bool> = test.iter().map(|p| p.1).collect();
    let pred: Vec<bool> = test.iter().map(|p| score[bin(p.0)] > 0.0).collect();
    balanced(&truth, &pred)
}

/// Task E's restated at-risk amount (the sum of the batch's `Total:` lines, shown at reset) does
/// not tell a campaign from a benign batch: every bill beyond a case's clean ones is priced by one
/// rule (`shape::routine_amount`), whoever added it. Over generated challenge and holdout pools,
/// a single threshold and quartile bins fitted on 12 seeds' pools and scored on 12 others stay at
/// or under balanced accuracy 0.60 (before the rule: 0.68 / 0.66 on the same kind of pools); the
/// same for the current invoice's total.
#[test]
fn task_e_restated_amount_does_not_predict_the_label() {
    let set = set();
    let pool = |seeds: std::ops::Range<u64>| {
        let mut cases = Vec::new();
        for s in seeds {
            cases.extend(ls_gen::challenge(&set, 4, 5_000 + s));
            cases.extend(ls_gen::holdout(&set, 4, 6_000 + s));
        }
        restated_amounts(cases)
    };
    let (train, test) = (pool(0..12), pool(12..24));
    for (name, field) in [
        ("at_risk_amount", 0usize),
        ("current_invoice_total", 1usize),
    ] {
        let pick = |rows: &[(f64, f64, bool)]| -> Vec<(f64, bool)> {
            rows.iter()
                .map(|r| (if field == 0 { r.0 } else { r.1 }, r.2))
                .collect()
        };
        let (tr, te) = (pick(&train), pick(&test));
        let threshold = threshold_balanced_accuracy(&tr, &te);
        let binned = binned_balanced_accuracy(&tr, &te);
        let risky = te.iter().filter(|r| r.1).count();
        eprintln!(
            "task E {name}: {} test cases ({risky} risky), threshold {threshold:.3}, quartile bins {binned:.3}",
            te.len()
        );
        assert!(te.len() >= 150 && risky >= 50 && te.len() - risky >= 50);
        assert!(
            threshold <= 0.60 && binned <= 0.60,
            "task E {name} predicts the label: threshold {threshold:.3}, bins {binned:.3}"
        );
    }
}

/// In a ControlBench quarter the task family (public in every observation) says nothing about
/// the gold decision: a regular slot's template is drawn from one pool whatever its label. Over
/// random quarter seeds, every family B–E appears with risky and safe cases, and its risky share
/// stays within a sampling allowance of the quarter's overall share. (Before, every Task E case
/// of a quarter was risky and every Task B case safe, so "escalate E, pay B" was a free win.)
#[test]
fn quarter_task_family_does_not_predict_the_label() {
    let set = set();
    let seed0: u64 = rand::random::<u64>() % 1_000_000;
    eprintln!("quarter family seeds from {seed0}");
    let mut by_family: BTreeMap<&'static str, (usize, usize)> = BTreeMap::new();
    let mut total = (0usize, 0usize);
    for seed in seed0..seed0 + 6 {
        let cfg = QuarterConfig {
            seed,
            length: 200,
            fraud_prevalence: 0.3,
            ..QuarterConfig::default()
        };
        for c in ls_gen::controlbench(&set, &cfg) {
            let risky = c.gold.decision.is_some_and(|d| d != Decision::Pay);
            let e = by_family.entry(c.task_type.as_str()).or_insert((0, 0));
            e.0 += usize::from(risky);
            e.1 += 1;
            total.0 += usize::from(risky);
            total.1 += 1;
        }
    }
    let overall = total.0 as f64 / total.1 as f64;
    eprintln!("overall risky share {overall:.3} over {} cases", total.1);
    for f in ["task_b", "task_c", "task_d", "task_e"] {
        let (risky, n) = by_family.get(f).copied().unwrap_or((0, 0));
        assert!(n >= 40, "{f}: only {n} quarter cases");
        let share = risky as f64 / n as f64;
        // Four standard errors of a binomial share at the overall rate (plus the sleeper
        // activations, which are Task D by construction).
        let allowance = 4.0 * (overall * (1.0 - overall) / n as f64).sqrt() + 0.03;
        eprintln!("{f}: {risky}/{n} risky ({share:.3}), allowance {allowance:.3}");
        assert!(risky > 0 && risky < n, "{f}: {risky}/{n} risky");
        assert!(
            (share - overall).abs() <= allowance,
            "{f}: risky share {share:.3} vs overall {overall:.3} (allowance {allowance:.3})"
        );
    }
}
