//! The task distribution: the documented partitions, proportions over 1,000 seeds, determinism,
//! split disjointness over thousands of seeds, and every draw a valid case.

use ls_core::fixtures::FixtureSet;
use ls_core::TaskType;
use ls_gen::checks::check_generated;
use ls_gen::tasks::{template_split, TEMPLATE_SPLITS};
use ls_gen::{Generator, Selection, Split, TaskDistribution};
use std::collections::BTreeMap;

fn dist() -> TaskDistribution {
    TaskDistribution::embedded().expect("fixtures")
}

fn sel(templates: Split, generators: Split) -> Selection {
    Selection {
        templates,
        generators,
    }
}

/// A seed base that differs from run to run (printed), so the properties are checked on new
/// seeds each time.
fn seed_base(what: &str) -> u64 {
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 % 1_000_000_007)
        .unwrap_or(1);
    eprintln!("{what}: seeds from {base}");
    base
}

/// Every curated template is in the partition once; every family has training templates and,
/// where it has at least three, a held-out one.
#[test]
fn the_template_partition_covers_every_family() {
    let set = FixtureSet::embedded().unwrap();
    assert_eq!(TEMPLATE_SPLITS.len(), set.cases.len());
    for c in &set.cases {
        assert!(template_split(&c.case_id).is_some(), "{}", c.case_id);
    }
    for family in TaskType::ALL {
        let of: Vec<Split> = set
            .cases
            .iter()
            .filter(|c| c.task_type == family)
            .map(|c| template_split(&c.case_id).unwrap())
            .collect();
        assert!(of.contains(&Split::Train), "{family:?}");
        if of.len() >= 3 {
            assert!(
                of.iter().any(|s| *s != Split::Train),
                "{family:?} has no held-out template"
            );
        }
        if of.len() >= 4 {
            assert!(of.contains(&Split::Validation) && of.contains(&Split::Test));
        }
    }
    let held: Vec<Generator> = Generator::ALL
        .into_iter()
        .filter(|g| g.split() != Split::Train)
        .collect();
    assert_eq!(held, [Generator::Holdout, Generator::Twins]);
}

/// Over 1,000 seeds of the default selection every family and every generator appears, in the
/// documented proportions: families uniform, generators uniform within a family (the exact
/// shares from [`TaskDistribution::proportions`]), within 4.5 standard errors.
#[test]
fn a_thousand_default_draws_follow_the_documented_proportions() {
    let d = dist();
    let s = Selection::default();
    let base = seed_base("coverage");
    let n = 1000;
    let mut fam: BTreeMap<TaskType, usize> = BTreeMap::new();
    let mut gen: BTreeMap<Generator, usize> = BTreeMap::new();
    for seed in base..base + n {
        let draw = d.draw(s, seed).unwrap();
        *fam.entry(draw.family).or_default() += 1;
        *gen.entry(draw.generator).or_default() += 1;
    }
    let props = d.proportions(s);
    let near = |count: usize, p: f64, what: &str| {
        let f = count as f64 / n as f64;
        let se = (p * (1.0 - p) / n as f64).sqrt();
        assert!(
            (f - p).abs() <= 4.5 * se + 1e-9,
            "{what}: {f} vs {p} (seeds from {base})"
        );
    };
    for family in TaskType::ALL {
        let p: f64 = props.iter().filter(|x| x.0 == family).map(|x| x.2).sum();
        assert!((p - 0.2).abs() < 1e-12);
        near(fam.get(&family).copied().unwrap_or(0), p, family.as_str());
    }
    for g in Generator::ALL {
        let p: f64 = props.iter().filter(|x| x.1 == g).map(|x| x.2).sum();
        assert!(p > 0.05, "{g:?} {p}");
        near(gen.get(&g).copied().unwrap_or(0), p, g.as_str());
    }
}

/// A draw is a pure function of (selection, seed): the same case, byte for byte, whatever was
/// drawn before; different seeds give different cases.
#[test]
fn draws_are_deterministic() {
    let d = dist();
    let base = seed_base("determinism");
    let mut distinct = std::collections::BTreeSet::new();
    for split in Split::ALL {
        let s = sel(split, Split::All);
        let first: Vec<String> = (base..base + 30)
            .map(|seed| serde_json::to_string(&*d.draw(s, seed).unwrap().case).unwrap())
            .collect();
        let again: Vec<String> = (base..base + 30)
            .rev()
            .map(|seed| serde_json::to_string(&*dist().draw(s, seed).unwrap().case).unwrap())
            .collect();
        let again: Vec<String> = again.into_iter().rev().collect();
        assert_eq!(first, again, "{split:?} seeds from {base}");
        distinct.extend(first);
    }
    assert!(distinct.len() > 60, "{}", distinct.len());
}

/// Split disjointness over thousands of seeds: a train draw never has a held-out base template
/// (nor a held-out generator), under any generator; a held-out template split draws only its
/// templates; the generator splits give only their generators. Every generated case carries
/// its base template (FraudGen has none) and passes the generator checks.
#[test]
fn splits_are_disjoint_over_thousands_of_seeds() {
    let d = dist();
    let set = FixtureSet::embedded().unwrap();
    let base = seed_base("splits");
    let mut seen: BTreeMap<(Split, Split), BTreeMap<Generator, usize>> = BTreeMap::new();
    let runs = [
        (sel(Split::Train, Split::Train), 2000),
        (sel(Split::Train, Split::All), 600),
        (sel(Split::Validation, Split::All), 300),
        (sel(Split::Test, Split::All), 300),
        (sel(Split::All, Split::Validation), 150),
        (sel(Split::All, Split::Test), 150),
        (sel(Split::Validation, Split::Validation), 60),
        (sel(Split::Test, Split::Test), 60),
    ];
    for (s, n) in runs {
        for seed in base..base + n {
            let draw = d.draw(s, seed).unwrap();
            let c = &draw.case;
            let meta_base = c
                .generator_metadata
                .as_ref()
                .and_then(|m| m.base_case_id.clone());
            match draw.generator {
                Generator::Fraudgen => {
                    assert_eq!(draw.template, None);
                    assert!(s.templates.admits(Split::Train));
                }
                Generator::Curated => {
                    assert_eq!(draw.template.as_deref(), Some(c.case_id.as_str()))
                }
                _ => assert_eq!(draw.template, meta_base, "{}", c.case_id),
            }
            if let Some(t) = &draw.template {
                let split = template_split(t).unwrap();
                assert!(
                    s.templates.admits(split),
                    "{s:?} seed {seed}: {t} ({split:?}) via {:?}",
                    draw.generator
                );
            }
            assert!(s.generators.admits(draw.generator.split()), "{s:?} {seed}");
            assert_eq!(draw.family, c.task_type);
            if draw.generator != Generator::Curated {
                let issues = check_generated(c, &set.world(c));
                assert!(issues.is_empty(), "{s:?} seed {seed}: {issues:?}");
            }
            *seen
                .entry((s.templates, s.generators))
                .or_default()
                .entry(draw.generator)
                .or_default() += 1;
        }
    }
    let gens = |t, g| seen[&(t, g)].keys().copied().collect::<Vec<_>>();
    assert_eq!(gens(Split::All, Split::Validation), [Generator::Twins]);
    assert_eq!(gens(Split::All, Split::Test), [Generator::Holdout]);
    assert_eq!(
        gens(Split::Train, Split::Train),
        [
            Generator::Curated,
            Generator::Challenge,
            Generator::Quarter,
            Generator::Fraudgen
        ]
    );
    assert_eq!(gens(Split::Test, Split::All).len(), 4, "{seen:?}");
}

/// A selection with nothing in it is an error naming both splits.
#[test]
fn an_empty_selection_is_refused() {
    // Task E has no held-out template and twins are the validation generator: validation
    // templates under the test generator still have holdout cases (C, D), so use a fixture set
    // without held-out templates instead.
    let set = FixtureSet::embedded().unwrap();
    let train: Vec<_> = set
        .cases
        .iter()
        .filter(|c| template_split(&c.case_id) == Some(Split::Train))
        .cloned()
        .collect();
    let templates = train.iter().cloned().map(std::sync::Arc::new).collect();
    let only_train = FixtureSet::from_parts(train, set.master.clone()).unwrap();
    let d = TaskDistribution::new(std::sync::Arc::new(only_train), templates);
    let e = d.draw(sel(Split::Test, Split::All), 1).unwrap_err();
    assert!(e.to_string().contains("'test'") && e.to_string().contains("'all'"));
    assert!(d.draw(sel(Split::Train, Split::All), 1).is_ok());
}

/// A quarter slot built alone is the quarter's case at that position, byte for byte.
#[test]
fn a_quarter_slot_is_the_quarters_case() {
    let set = FixtureSet::embedded().unwrap();
    let cfg = ls_gen::QuarterConfig {
        length: 40,
        seed: seed_base("quarter slot") % 100_000,
        ..Default::default()
    };
    let quarter = ls_gen::controlbench(&set, &cfg);
    let templates: Vec<&ls_core::Case> = set.cases.iter().collect();
    for index in [1, 2, 17, 40] {
        let slot = ls_gen::controlbench_slot(&templates, &cfg, index).unwrap();
        assert_eq!(
            serde_json::to_string(&slot).unwrap(),
            serde_json::to_string(&quarter[index - 1]).unwrap(),
            "slot {index} of seed {}",
            cfg.seed
        );
    }
    assert!(ls_gen::controlbench_slot(&templates, &cfg, 0).is_none());
    assert!(ls_gen::controlbench_slot(&templates, &cfg, 41).is_none());
    assert!(ls_gen::controlbench_slot(&[], &cfg, 1).is_none());
}
