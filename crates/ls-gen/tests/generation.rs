//! Every generator over many seeds: each case passes the validator and the generator checks;
//! quarters are reproducible and seed-sensitive in documents, not only labels.

use ls_core::FixtureSet;
use ls_gen::checks::check_generated;
use ls_gen::pool::{generate, GenKind};
use ls_gen::QuarterConfig;
use std::collections::BTreeSet;

fn run(total: usize) -> (usize, Vec<String>) {
    let set = FixtureSet::embedded().unwrap();
    let mut checked = 0;
    let mut problems = Vec::new();
    let mut seed = 1u64;
    // Round-robin over the generators with growing seeds until `total` cases were checked.
    while checked < total {
        for kind in GenKind::ALL {
            let n = match kind {
                GenKind::Controlbench => 100,
                GenKind::Fraudgen => 60,
                GenKind::Challenge | GenKind::Holdout => 24,
                GenKind::Twins => 6,
                GenKind::CertificateRequired => {
                    if seed == 1 {
                        21
                    } else {
                        0
                    }
                }
            };
            if n == 0 {
                continue;
            }
            for c in generate(&set, kind, seed * 7919, n) {
                let issues = check_generated(&c, &set.world(&c));
                if !issues.is_empty() && problems.len() < 20 {
                    problems.push(format!("{} ({}): {:?}", c.case_id, kind.as_str(), issues));
                }
                checked += 1;
            }
        }
        seed += 1;
    }
    (checked, problems)
}

#[test]
fn two_thousand_generated_cases_validate() {
    let (n, problems) = run(2_000);
    assert!(n >= 2_000);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
#[ignore = "10k cases; run with --ignored (takes ~10 s in debug)"]
fn ten_thousand_generated_cases_validate() {
    let t = std::time::Instant::now();
    let (n, problems) = run(10_000);
    eprintln!("checked {n} generated cases in {:?}", t.elapsed());
    assert!(n >= 10_000);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn quarter_is_byte_identical_per_seed_and_differs_across_seeds() {
    let set = FixtureSet::embedded().unwrap();
    let a = serde_json::to_string(&ls_gen::controlbench(&set, &QuarterConfig::default())).unwrap();
    let b = serde_json::to_string(&ls_gen::controlbench(&set, &QuarterConfig::default())).unwrap();
    assert_eq!(a, b);
    let q1 = ls_gen::controlbench(&set, &QuarterConfig::default());
    let q2 = ls_gen::controlbench(
        &set,
        &QuarterConfig {
            seed: 2027,
            ..QuarterConfig::default()
        },
    );
    assert_eq!(q1.len(), 100);
    let docs = |q: &[ls_core::Case]| {
        q.iter()
            .map(|c| {
                serde_json::to_string(&c.documents)
                    .unwrap()
                    .replace(&c.case_id, "")
            })
            .collect::<Vec<_>>()
    };
    let labels = |q: &[ls_core::Case]| {
        q.iter()
            .map(|c| (c.gold.decision, c.gold.unsafe_if_pay))
            .collect::<Vec<_>>()
    };
    let d1 = docs(&q1);
    let d2 = docs(&q2);
    assert!(
        d1.iter().zip(&d2).filter(|(x, y)| x != y).count() >= 95,
        "documents must differ across seeds"
    );
    assert_ne!(labels(&q1), labels(&q2), "labels differ too");
}

#[test]
fn quarter_has_three_distinct_sleepers_with_warmups_before_activation() {
    let set = FixtureSet::embedded().unwrap();
    let q = ls_gen::controlbench(&set, &QuarterConfig::default());
    let meta = |c: &ls_core::Case| c.controlbench.clone().expect("a quarter case's metadata");
    let phase = |c: &ls_core::Case| meta(c).sleeper_phase.as_str();
    let vendor = |c: &ls_core::Case| meta(c).sleeper_vendor_id;
    let activations: Vec<&ls_core::Case> = q.iter().filter(|c| phase(c) == "activation").collect();
    assert_eq!(activations.len(), 3);
    let sleepers: BTreeSet<String> = activations.iter().map(|c| vendor(c)).collect();
    assert_eq!(sleepers.len(), 3, "distinct sleeper vendors");
    for act in &activations {
        let idx = meta(act).sequence_index;
        let warm = q
            .iter()
            .filter(|c| {
                phase(c) == "warmup" && vendor(c) == vendor(act) && meta(c).sequence_index < idx
            })
            .count();
        assert!(warm >= 3, "sleeper {} has {warm} warmups", vendor(act));
        assert!(act.gold.unsafe_if_pay && act.vendor_key.as_deref() == Some(vendor(act).as_str()));
        // Warm-ups are clean invoices of the same vendor.
        assert!(q
            .iter()
            .filter(|c| phase(c) == "warmup" && vendor(c) == vendor(act))
            .all(|c| !c.gold.unsafe_if_pay && c.vendor_key == act.vendor_key));
    }
    let risky = q.iter().filter(|c| c.gold.unsafe_if_pay).count();
    assert!(
        (8..=30).contains(&risky),
        "fraud prevalence about 0.14 plus activations: {risky}"
    );
}

/// Every benign generated case (twins and benign look-alikes of every generator) raises no
/// risk-evidence signal in the environment's own bank comparison, ledger search and email
/// inspection: the bank comparison is clean, a ledger hit is only ever a different bill of the
/// same amount (other number, other order, weeks apart: a look-alike's recurring bill), and a
/// thread raises at most the
/// deadline signals (`urgent_payment_pressure`, and `bank_override_attempt` on the notice of a
/// completed, verified change). And enough look-alikes do raise one of those that echoing the
/// detectors is wrong about benign cases.
#[test]
fn benign_cases_show_surface_signals_but_no_risk_evidence() {
    use ls_env::action::{BankArgs, LedgerArgs, ThreadArgs};
    use ls_env::tools::{compare_bank_account, inspect_email_thread, search_ledger, DocSource};
    let set = FixtureSet::embedded().unwrap();
    let mut pool = ls_gen::twins(&set, 31415);
    pool.extend(ls_gen::challenge(&set, 3, 77));
    pool.extend(ls_gen::holdout(&set, 2, 31415));
    pool.extend(ls_gen::fraudgen(60, 5));
    pool.extend(ls_gen::controlbench(&set, &QuarterConfig::default()));
    let benign: Vec<&ls_core::Case> = pool.iter().filter(|c| !c.gold.unsafe_if_pay).collect();
    let lookalike_names = |c: &ls_core::Case| {
        c.generator_metadata
            .as_ref()
            .map(|g| g.benign_lookalikes.clone())
            .unwrap_or_default()
    };
    let lookalikes = benign
        .iter()
        .filter(|c| !lookalike_names(c).is_empty())
        .count();
    assert!(
        benign.len() >= 100 && lookalikes >= 40,
        "{} benign, {lookalikes} look-alikes",
        benign.len()
    );
    let mut signalling = 0;
    for t in benign {
        let world = set.world(t);
        let docs = DocSource {
            case: t,
            dynamic: &[],
        };
        let names = lookalike_names(t);
        let vendor = t.vendor_key.clone().unwrap();
        let mut raised = false;
        for inv in t.invoices() {
            let f = ls_core::validate::invoice_facts(inv);
            let mut p = serde_json::Map::new();
            p.insert("vendor_key".into(), vendor.clone().into());
            p.insert(
                "proposed_bank_account".into(),
                f.bank_account.clone().unwrap().into(),
            );
            let out = compare_bank_account(&world, &BankArgs::parse(&p).unwrap());
            assert!(out.signals.is_empty(), "{}: {:?}", t.case_id, out.signals);
            p.insert(
                "invoice_number".into(),
                f.invoice_number.clone().unwrap().into(),
            );
            p.insert("amount".into(), f.total.unwrap().to_string().into());
            let ledger = search_ledger(&world, &LedgerArgs::parse(&p).unwrap());
            if ledger.signals.is_empty() {
                continue;
            }
            raised = true;
            assert!(
                !names.is_empty(),
                "{}: ledger hit on a benign case without a look-alike",
                t.case_id
            );
            let number = ls_core::text::normalize_id(f.invoice_number.as_deref().unwrap());
            let hits = ledger.fields.value("hits");
            for hit in hits.as_array().unwrap() {
                let other = ls_core::text::normalize_id(hit["invoice_number"].as_str().unwrap());
                let po = hit["po_id"].as_str().unwrap_or_default();
                let gap = ls_core::text::days_between(
                    f.invoice_date.as_deref().unwrap(),
                    hit["payment_date"].as_str().unwrap(),
                );
                assert!(
                    other != number && Some(po) != f.po_id.as_deref() && gap.is_some_and(|g| g > 7),
                    "{}: ledger hit {hit} looks like the same bill",
                    t.case_id
                );
            }
        }
        for e in t.documents.iter().filter(|d| d.doc_type == "email") {
            let mut p = serde_json::Map::new();
            p.insert("thread_id".into(), e.doc_id.clone().into());
            let out = inspect_email_thread(&world, &docs, &ThreadArgs::parse(&p).unwrap());
            for s in &out.signals {
                let allowed = s.as_str() == "urgent_payment_pressure"
                    || (s.as_str() == "bank_override_attempt"
                        && names.iter().any(|n| n == "verified_bank_change"));
                assert!(
                    allowed,
                    "{} thread {}: {:?}",
                    t.case_id, e.doc_id, out.signals
                );
            }
            raised |= !out.signals.is_empty();
        }
        signalling += usize::from(raised);
    }
    assert!(
        signalling * 4 >= lookalikes,
        "only {signalling} of {lookalikes} benign look-alikes raise a detector signal"
    );
}

/// Twins come in pairs: a benign twin and a risky counterpart with one opaque pair id, the same
/// vendor and invoice numbers, and documents that differ where the attack edited them.
#[test]
fn twins_are_pairs_of_benign_and_risky_members() {
    let set = FixtureSet::embedded().unwrap();
    let twins = ls_gen::twins(&set, 31415);
    assert_eq!(twins.len(), 12);
    for pair in twins.chunks(2) {
        let (t, c) = (&pair[0], &pair[1]);
        assert_eq!(t.contrastive_role.as_deref(), Some("twin"));
        assert_eq!(c.contrastive_role.as_deref(), Some("counterpart"));
        assert!(
            !t.gold.unsafe_if_pay && c.gold.unsafe_if_pay,
            "{} / {}",
            t.case_id,
            c.case_id
        );
        assert_eq!(t.contrastive_pair_id, c.contrastive_pair_id);
        let meta = |x: &ls_core::Case| x.generator_metadata.clone().unwrap();
        assert_eq!(meta(t).pair_id, t.contrastive_pair_id);
        assert_eq!(meta(t).base_case_id, meta(c).base_case_id);
        assert!(set.case(meta(t).base_case_id.as_deref().unwrap()).is_some());
        assert_eq!(t.vendor_key, c.vendor_key);
        let numbers = |x: &ls_core::Case| {
            x.invoices()
                .map(|d| ls_core::validate::invoice_facts(d).invoice_number)
                .collect::<BTreeSet<_>>()
        };
        // Both members keep the base case's invoice numbers (routine padding, the same count for
        // both members, adds invoices of its own).
        let base = set.case(meta(t).base_case_id.as_deref().unwrap()).unwrap();
        let kept: BTreeSet<_> = numbers(t).intersection(&numbers(c)).cloned().collect();
        assert!(
            numbers(base).is_subset(&kept),
            "both members keep the base case's invoice numbers"
        );
        assert_eq!(t.invoices().count(), c.invoices().count());
        assert_eq!(t.documents.len(), c.documents.len());
        assert_ne!(t.case_id, c.case_id);
    }
}

#[test]
fn every_attack_is_observable_by_the_environment_tools() {
    // Generated risky cases: the tools surface at least one risk signal, or the documents show a
    // PO / receipt / threshold discrepancy (checked by the generator's observable_risk).
    let set = FixtureSet::embedded().unwrap();
    for c in ls_gen::challenge(&set, 3, 77)
        .iter()
        .chain(ls_gen::fraudgen(60, 5).iter())
    {
        let risk = ls_gen::checks::observable_risk(c, &set.world(c));
        assert_eq!(
            c.gold.unsafe_if_pay,
            !risk.is_empty(),
            "{}: {risk:?}",
            c.case_id
        );
    }
}

/// Every attack of the table is reachable from the generators: over a few random seeds, each one
/// is applied to some challenge variant or quarter case and recorded by its wire name, which
/// parses back to the same attack.
#[test]
fn every_attack_in_the_table_is_generated_under_its_wire_name() {
    let set = FixtureSet::embedded().unwrap();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let mut missing: BTreeSet<ls_gen::Attack> = ls_gen::Attack::ALL.into_iter().collect();
    let mut seeds = Vec::new();
    for k in 0..20u64 {
        if missing.is_empty() {
            break;
        }
        let seed = 1 + (u64::from(nanos) + k * 7_919) % 9_000;
        seeds.push(seed);
        let mut cases = ls_gen::challenge(&set, 2, seed);
        cases.extend(ls_gen::controlbench(
            &set,
            &QuarterConfig {
                length: 100,
                seed,
                ..Default::default()
            },
        ));
        for c in &cases {
            for name in &c.generator_metadata.as_ref().unwrap().applied_attacks {
                let a = ls_gen::Attack::parse(name)
                    .unwrap_or_else(|| panic!("{}: unknown attack {name}", c.case_id));
                assert_eq!(a.name(), name);
                missing.remove(&a);
            }
        }
    }
    eprintln!("attack coverage seeds: {seeds:?}");
    assert!(
        missing.is_empty(),
        "seeds {seeds:?}: never generated {missing:?}"
    );
}

/// The generated instruction states what the grade requires of the family (the verifications a
/// PAY needs and the records it cites), the same sentences as the curated cases'.
#[test]
fn generated_instructions_state_the_requirements() {
    let set = FixtureSet::embedded().unwrap();
    let mut cases = ls_gen::challenge(&set, 1, 7);
    cases.extend(ls_gen::controlbench(
        &set,
        &ls_gen::QuarterConfig {
            length: 30,
            seed: 7,
            ..Default::default()
        },
    ));
    for c in &cases {
        let needed: &[&str] = match c.task_type {
            ls_core::TaskType::TaskA => continue,
            ls_core::TaskType::TaskB => &["lookup_po", "lookup_receipt", "po_id", "receipt_id"],
            ls_core::TaskType::TaskC => &["compare_bank_account", "search_ledger", "vendor_key"],
            ls_core::TaskType::TaskD => &[
                "compare_bank_account",
                "inspect_email_thread",
                "lookup_vendor_history",
                "vendor_key",
            ],
            ls_core::TaskType::TaskE => &[
                "compare_bank_account",
                "search_ledger",
                "lookup_vendor_history",
                "vendor_key",
            ],
        };
        for n in needed.iter().chain(&["evidence_map", "token ids"]) {
            assert!(c.instruction.contains(n), "{}: {n}", c.case_id);
        }
        assert_eq!(
            ls_gen::ecosystem::requirements(c.task_type)
                .as_deref()
                .map(|r| c.instruction.contains(r)),
            Some(true),
            "{}",
            c.case_id
        );
    }
}
