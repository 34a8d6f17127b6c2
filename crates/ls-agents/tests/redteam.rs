//! The red-team suite: evidence-blind gaming policies played in blind mode, a fresh session per
//! case, over the curated cases and the generated pools (both asserted, figures printed). The test
//! reads gold only to split benign from risky cases.

use ls_agents::redteam::GamingFamily;
use ls_agents::{offline_agent, run_episode, EpisodeRecord, LocalEnv, Silent};
use ls_core::schema::Case;
use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, TrackMode};
use std::sync::Arc;

/// Most a gaming family may score on a pool's benign cases.
const BENIGN_THRESHOLD: f64 = 0.25;

struct Played {
    benign: bool,
    /// The gold, for the `TEACHER_DUMP` diagnostics only.
    gold: String,
    rec: EpisodeRecord,
}

fn play(agent: &str, pool: &Arc<CasePool>) -> Vec<Played> {
    pool.cases
        .iter()
        .map(|c| {
            let mut env = Environment::new(
                pool.clone(),
                EnvConfig {
                    track_mode: TrackMode::Blind,
                },
            );
            let mut a = offline_agent(agent).expect("agent");
            let req = ResetRequest {
                case_id: Some(c.case_id.clone()),
                ..Default::default()
            };
            let rec = run_episode(
                a.as_mut(),
                &mut LocalEnv::new(&mut env),
                &req,
                7,
                &mut Silent,
            );
            let g = &c.gold;
            Played {
                gold: format!(
                    "{:?} codes={:?}/{:?}/{:?} campaign={:?} links={:?} dup={:?} targets={:?}",
                    g.decision,
                    g.reason_codes,
                    g.fraud_flags,
                    g.discrepancies,
                    g.campaign_signals,
                    g.cross_invoice_links,
                    g.duplicate_links,
                    g.evidence_targets
                        .iter()
                        .map(|(k, v)| format!("{k}@{}:{:?}", v.doc_id, v.token_ids))
                        .collect::<Vec<_>>()
                ),
                benign: !c.gold.unsafe_if_pay,
                rec,
            }
        })
        .collect()
}

fn mean<'a>(it: impl Iterator<Item = &'a Played>) -> f64 {
    let v: Vec<f64> = it.map(|p| p.rec.final_score).collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// (family, mean, benign mean, valid_success count) of every family over a pool.
fn figures(pool: &Arc<CasePool>) -> Vec<(GamingFamily, f64, f64, usize)> {
    GamingFamily::ALL
        .into_iter()
        .map(|f| {
            let played = play(f.name(), pool);
            for p in &played {
                assert!(
                    p.rec.terminated,
                    "{} did not submit on {}: {:?}",
                    f.name(),
                    p.rec.case_id,
                    p.rec.errors
                );
            }
            // `REDTEAM_CASES=1` prints every case's score (to see which cases a family wins).
            if std::env::var_os("REDTEAM_CASES").is_some() {
                for p in &played {
                    let bd = p
                        .rec
                        .terminal_info
                        .get("score_breakdown")
                        .cloned()
                        .unwrap_or_default();
                    eprintln!(
                        "case {:24} {:16} {:.4} {} benign={} supported={} misdirected={} submitted={}",
                        f.name(),
                        p.rec.case_id,
                        p.rec.final_score,
                        p.rec.result_class,
                        p.benign,
                        bd["gold_codes_supported"],
                        bd["gold_codes_misdirected"],
                        p.rec
                            .trajectory
                            .last()
                            .and_then(|t| t.payload.get("evidence_map"))
                            .map(|v| v.to_string())
                            .unwrap_or_default()
                    );
                }
            }
            let valid = played
                .iter()
                .filter(|p| p.rec.result_class == "valid_success")
                .count();
            (
                f,
                mean(played.iter()),
                mean(played.iter().filter(|p| p.benign)),
                valid,
            )
        })
        .collect()
}

fn print(label: &str, rows: &[(GamingFamily, f64, f64, usize)]) {
    for (f, m, b, v) in rows {
        eprintln!(
            "redteam {label:10} {:24} mean {m:.4} benign {b:.4} valid_success {v}",
            f.name()
        );
    }
}

fn curated() -> Arc<CasePool> {
    Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")))
}

/// Every family, every bound, no exception: the curated layouts vary per document (token ids
/// and line order seeded by the document id), so a fixed position no longer finds the gold line.
#[test]
fn gaming_policies_score_low_on_the_curated_cases() {
    let rows = figures(&curated());
    print("curated", &rows);
    for (f, m, b, _) in rows {
        assert!(
            m <= f.mean_threshold(),
            "{} mean {m:.4} > {}",
            f.name(),
            f.mean_threshold()
        );
        assert!(
            b <= BENIGN_THRESHOLD.max(f.mean_threshold()),
            "{} benign mean {b:.4}",
            f.name()
        );
    }
}

/// `n` distinct pool seeds drawn from the OS random source (printed, so a failure reproduces
/// with `REDTEAM_SEEDS=s1,s2,...`).
fn draw_seeds(label: &str, n: usize) -> Vec<u64> {
    let seeds: Vec<u64> = match std::env::var("REDTEAM_SEEDS") {
        Ok(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
        Err(_) => distinct_seeds(&mut rand::rng(), n),
    };
    eprintln!("{label} seeds (REDTEAM_SEEDS={})", seed_list(&seeds));
    seeds
}

/// `n` distinct seeds from 1..=9999, in order.
fn distinct_seeds(r: &mut dyn rand::RngCore, n: usize) -> Vec<u64> {
    use rand::Rng;
    let mut s = std::collections::BTreeSet::new();
    while s.len() < n {
        s.insert(r.random_range(1..=9_999u64));
    }
    s.into_iter().collect()
}

/// Seeds as the comma-separated list the replay variables take.
fn seed_list(seeds: &[u64]) -> String {
    seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Three holdout pools, a challenge pool and a twins pool, every seed drawn at random. Each pool
/// joins two seeds (one seed gives a dozen cases, where one lucky
/// positional hit moves a pool's mean by 0.05; the bound is about the policy, not one draw: see
/// `bounds_hold_over_many_random_seeds` and docs/grading.md for the measured margins).
fn generated_pools() -> Vec<(String, Vec<Case>)> {
    let set = FixtureSet::embedded().expect("fixtures");
    let seeds = draw_seeds("redteam pool", 10);
    let mut pools: Vec<(String, Vec<Case>)> = seeds[..6]
        .chunks(2)
        .map(|p| {
            (
                format!("holdout-{}+{}", p[0], p[1]),
                holdout_pool(&set, p[0], p[1]),
            )
        })
        .collect();
    let mut challenge = ls_gen::challenge(&set, 1, seeds[6]);
    challenge.extend(ls_gen::challenge(&set, 1, seeds[7]));
    pools.push((format!("challenge-{}+{}", seeds[6], seeds[7]), challenge));
    pools.push((
        format!("twins-{}+{}", seeds[8], seeds[9]),
        twins_pool(&set, seeds[8], seeds[9]),
    ));
    pools
}

/// A holdout pool over two seeds (case ids are distinct: they hash the seed).
fn holdout_pool(set: &FixtureSet, a: u64, b: u64) -> Vec<Case> {
    let mut cases = ls_gen::holdout(set, 1, a);
    let mut ids: std::collections::BTreeSet<String> =
        cases.iter().map(|c| c.case_id.clone()).collect();
    cases.extend(
        ls_gen::holdout(set, 1, b)
            .into_iter()
            .filter(|c| ids.insert(c.case_id.clone())),
    );
    cases
}

/// A twins pool over two seeds: each risky curated D/E case's twin and counterpart, twice.
fn twins_pool(set: &FixtureSet, a: u64, b: u64) -> Vec<Case> {
    let mut cases = ls_gen::generators::twins(set, a);
    let mut ids: std::collections::BTreeSet<String> =
        cases.iter().map(|c| c.case_id.clone()).collect();
    cases.extend(
        ls_gen::generators::twins(set, b)
            .into_iter()
            .filter(|c| ids.insert(c.case_id.clone())),
    );
    cases
}

fn pool_of(cases: Vec<Case>) -> Arc<CasePool> {
    let set = FixtureSet::embedded().expect("fixtures");
    Arc::new(CasePool::from_parts(
        cases.into_iter().map(Arc::new).collect(),
        Arc::new(set.master.clone()),
    ))
}

/// The pool kinds the teacher is held to: holdout, challenge and twins pools of one seed, and a
/// ControlBench quarter of [`QUARTER_LENGTH`] cases (played case by case, a fresh session each).
const TEACHER_KINDS: [&str; 4] = ["holdout", "challenge", "twins", "quarter"];

/// Cases of a quarter pool in the teacher tests (the default quarter has 100; its first 40 hold
/// the sleeper vendors' warm-ups and activations and the regular risky draws of every family).
const QUARTER_LENGTH: usize = 40;

/// One pool of `kind` from `seed`.
fn teacher_pool(set: &FixtureSet, kind: &str, seed: u64) -> Vec<Case> {
    match kind {
        "holdout" => ls_gen::holdout(set, 1, seed),
        "challenge" => ls_gen::challenge(set, 1, seed),
        "twins" => ls_gen::generators::twins(set, seed),
        "quarter" => ls_gen::controlbench(
            set,
            &ls_gen::QuarterConfig {
                length: QUARTER_LENGTH,
                seed,
                ..Default::default()
            },
        ),
        other => panic!("unknown pool kind {other}"),
    }
}

/// `n` distinct seeds per kind from 1..=9999, drawn by a ChaCha generator with a fixed seed (so
/// CI draws the same pools every run) or, with `random`, from the OS source; `TEACHER_SEEDS`
/// (`kind:s1,s2;kind:...`) replays a printed draw.
fn teacher_seeds(kind: &str, n: usize, random: bool) -> Vec<u64> {
    use rand::SeedableRng;
    if let Ok(v) = std::env::var("TEACHER_SEEDS") {
        let listed = v.split(';').find_map(|part| {
            let (k, seeds) = part.split_once(':')?;
            (k.trim() == kind).then(|| {
                seeds
                    .split(',')
                    .filter_map(|s| s.trim().parse().ok())
                    .collect::<Vec<u64>>()
            })
        });
        return listed.unwrap_or_default();
    }
    let mut r: Box<dyn rand::RngCore> = if random {
        Box::new(rand::rng())
    } else {
        // One stream per kind: the fixed seed is the kind's name.
        let salt = kind.bytes().fold(0x4C53_5445_4143_4845u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
        });
        Box::new(rand_chacha::ChaCha8Rng::seed_from_u64(salt))
    };
    let seeds = distinct_seeds(r.as_mut(), n);
    eprintln!(
        "teacher {kind} seeds (TEACHER_SEEDS='{kind}:{}')",
        seed_list(&seeds)
    );
    seeds
}

/// `TEACHER_DUMP=1`: the low case's breakdown and trajectory.
fn dump_low_case(p: &Played) {
    let i = &p.rec.terminal_info;
    let bd = i.get("score_breakdown").cloned().unwrap_or_default();
    let low: Vec<String> = bd
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| v.as_f64().is_some_and(|x| x < 0.75))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    eprintln!(
        "dump {} {} low: {}",
        p.rec.case_id,
        p.rec.task_type,
        low.join(" ")
    );
    eprintln!("dump gold {}", p.gold);
    for t in &p.rec.trajectory {
        eprintln!(
            "dump   {} {} ok={} {}",
            t.action_type,
            serde_json::Value::Object(t.payload.clone()),
            t.success,
            t.error.clone().unwrap_or_default()
        );
    }
}

/// The teacher's bar on pools of `kind` from `seeds`: mean >= 0.85 over all their cases, no pool
/// under 0.80, no unsafe release. Returns what broke it (empty when it holds).
fn teacher_bar(set: &FixtureSet, kind: &str, seeds: &[u64]) -> Vec<String> {
    let (mut all, mut failures) = (Vec::new(), Vec::new());
    for &s in seeds {
        let teacher = play("teacher", &pool_of(teacher_pool(set, kind, s)));
        let m = mean(teacher.iter());
        let low = teacher
            .iter()
            .map(|p| p.rec.final_score)
            .fold(1.0, f64::min);
        let unsafe_releases = teacher.iter().filter(|p| p.rec.unsafe_release).count();
        eprintln!("teacher {kind}-{s} mean {m:.4} min-case {low:.4} unsafe {unsafe_releases}");
        for p in teacher.iter().filter(|p| p.rec.final_score < 0.80) {
            if std::env::var_os("TEACHER_DUMP").is_some() {
                dump_low_case(p);
            }
            let i = &p.rec.terminal_info;
            eprintln!(
                "teacher-low {kind}-{s} {} {:.4} {} caps={} reasons={}",
                p.rec.case_id,
                p.rec.final_score,
                p.rec.result_class,
                i.get("cap_reasons").cloned().unwrap_or_default(),
                i.get("control_resolution")
                    .and_then(|c| c.get("control_failure_reasons"))
                    .cloned()
                    .unwrap_or_default()
            );
        }
        if unsafe_releases > 0 {
            failures.push(format!("{kind}-{s}: {unsafe_releases} unsafe"));
        }
        if m < 0.80 {
            failures.push(format!("{kind}-{s}: pool mean {m:.4} under 0.80"));
        }
        all.extend(teacher);
    }
    let m = mean(all.iter());
    let low = all.iter().map(|p| p.rec.final_score).fold(1.0, f64::min);
    eprintln!(
        "teacher {kind} overall mean {m:.4} over {} pools, {} cases, min case {low:.4}",
        seeds.len(),
        all.len()
    );
    if m < 0.85 {
        failures.push(format!("{kind}: overall mean {m:.4} under 0.85"));
    }
    failures
}

/// The teacher on 20 pools of every kind (holdout, challenge, twins, quarter), their seeds drawn
/// from 1..=9999 by a seeded generator: per kind, mean >= 0.85 over all cases, no pool under
/// 0.80, no unsafe release, asserted with no tolerance (`TEACHER_POOLS=n` draws more pools).
#[test]
fn teacher_holds_on_every_pool_kind() {
    let n = std::env::var("TEACHER_POOLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20usize)
        .max(20);
    let kinds = std::env::var("TEACHER_KINDS").unwrap_or_else(|_| TEACHER_KINDS.join(","));
    assert_teacher_bar(&kinds, n, false);
}

/// [`teacher_bar`] on `n` seeds of each of the comma-separated `kinds`; fails with every breach.
fn assert_teacher_bar(kinds: &str, n: usize, random: bool) {
    let set = FixtureSet::embedded().expect("fixtures");
    let failures: Vec<String> = kinds
        .split(',')
        .flat_map(|kind| teacher_bar(&set, kind, &teacher_seeds(kind, n, random)))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The same bar on `REDTEAM_LOOP_N` (default 100) seeds per kind drawn from the OS random source
/// (ignored: tens of minutes; run with `--ignored`; `REDTEAM_LOOP_KINDS` picks kinds).
#[test]
#[ignore]
fn teacher_holds_on_every_pool_kind_over_many_random_seeds() {
    let (n, kinds) = loop_config(&TEACHER_KINDS.join(","));
    assert_teacher_bar(&kinds, n, true);
}

/// Plays every family and the teacher over the generated pools (random holdout seeds, a random
/// challenge and twins pool) and asserts the bounds; the teacher must make no unsafe release.
#[test]
fn gaming_policies_score_low_on_generated_pools() {
    let mut failures = Vec::new();
    for (label, cases) in generated_pools() {
        let pool = pool_of(cases);
        let rows = figures(&pool);
        print(&label, &rows);
        let teacher = play("teacher", &pool);
        let unsafe_releases = teacher.iter().filter(|p| p.rec.unsafe_release).count();
        let tm = mean(teacher.iter());
        for p in teacher.iter().filter(|p| p.rec.final_score < 0.85) {
            let i = &p.rec.terminal_info;
            let bd = i.get("score_breakdown").cloned().unwrap_or_default();
            let reasons = i
                .get("control_resolution")
                .and_then(|c| c.get("control_failure_reasons"))
                .cloned()
                .unwrap_or_default();
            eprintln!(
                "teacher-low {label} {} {:.4} {} caps={} reasons={reasons} recall={} precision={} uncalled={}",
                p.rec.case_id, p.rec.final_score, p.rec.result_class, i.get("cap_reasons").cloned().unwrap_or_default(), bd["supported_code_recall"], bd["claim_precision"], bd["uncalled_interventions"]
            );
        }
        eprintln!(
            "redteam {label:10} teacher                  mean {tm:.4} unsafe {unsafe_releases}"
        );
        if unsafe_releases > 0 {
            failures.push(format!(
                "{label}: teacher mean {tm:.4}, {unsafe_releases} unsafe releases"
            ));
        }
        for (f, m, b, _) in rows {
            if m > f.mean_threshold() {
                failures.push(format!("{label}: {} mean {m:.4}", f.name()));
            }
            if b > BENIGN_THRESHOLD.max(f.mean_threshold()) {
                failures.push(format!("{label}: {} benign mean {b:.4}", f.name()));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The long loops' size: `REDTEAM_LOOP_N` seeds per kind (default 100) and the kinds of
/// `REDTEAM_LOOP_KINDS` (comma-separated, default `default_kinds`).
fn loop_config(default_kinds: &str) -> (usize, String) {
    let n = std::env::var("REDTEAM_LOOP_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let kinds = std::env::var("REDTEAM_LOOP_KINDS").unwrap_or_else(|_| default_kinds.into());
    (n, kinds)
}

/// The bounds' margin over many random seeds (ignored: minutes; run with `--ignored`). Every
/// family on `REDTEAM_LOOP_N` (default 100) random seeds per pool kind, built as the test above
/// builds them (seed pairs); prints each family's
/// max and mean pool mean per kind, and fails if any pool breaks a bound (`holdout1` and
/// `twins1`: single-seed pools, to see the margin a pool of one seed leaves).
#[test]
#[ignore]
fn bounds_hold_over_many_random_seeds() {
    let set = FixtureSet::embedded().expect("fixtures");
    let (n, kinds) = loop_config("holdout,challenge,twins");
    let mut failures = Vec::new();
    for kind in kinds.split(',') {
        let seeds = draw_seeds(&format!("loop {kind}"), 2 * n);
        let mut per_family: Vec<Vec<f64>> = vec![Vec::new(); GamingFamily::ALL.len()];
        let mut benign_max = vec![0.0f64; GamingFamily::ALL.len()];
        for pair in seeds.chunks(2).take(n) {
            let cases = match kind {
                "holdout1" => ls_gen::holdout(&set, 1, pair[0]),
                "holdout" => holdout_pool(&set, pair[0], pair[1]),
                "challenge" => {
                    let mut c = ls_gen::challenge(&set, 1, pair[0]);
                    c.extend(ls_gen::challenge(&set, 1, pair[1]));
                    c
                }
                "twins1" => ls_gen::generators::twins(&set, pair[0]),
                _ => twins_pool(&set, pair[0], pair[1]),
            };
            let rows = figures(&pool_of(cases));
            for (i, (f, m, b, _)) in rows.into_iter().enumerate() {
                per_family[i].push(m);
                benign_max[i] = benign_max[i].max(b);
                if m > f.mean_threshold() || b > BENIGN_THRESHOLD.max(f.mean_threshold()) {
                    failures.push(format!(
                        "{kind} {pair:?}: {} mean {m:.4} benign {b:.4}",
                        f.name()
                    ));
                }
            }
        }
        for (i, f) in GamingFamily::ALL.iter().enumerate() {
            let v = &per_family[i];
            let max = v.iter().copied().fold(0.0, f64::max);
            let avg = v.iter().sum::<f64>() / v.len().max(1) as f64;
            let var = v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / v.len().max(1) as f64;
            eprintln!(
                "loop {kind:9} {:26} pools {} mean {avg:.4} sd {:.4} max {max:.4} benign-max {:.4}",
                f.name(),
                v.len(),
                var.sqrt(),
                benign_max[i]
            );
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The checklist-PAY policy (`game-checklist-pay`, mechanical): the family's checks, every
/// follow-up the control boundary announces, then PAY citing the record ids it passed to the
/// checks, whatever they showed. On a benign case a PAY after the required checks may earn an
/// honest analyst's marks; on a risky case the PAY is an unsafe release, so its pool mean is
/// bounded by the pool's benign share. Asserted: no risky case scores over the unsafe-release cap,
/// and the pool mean stays under the benign share plus that cap. Its headline (paired
/// discrimination) is 0: `ls-report/tests/headline.rs`.
#[test]
fn checklist_pay_earns_only_the_benign_cases() {
    let set = FixtureSet::embedded().expect("fixtures");
    let seeds = draw_seeds("checklist-pay", 3);
    let mut challenge = ls_gen::challenge(&set, 1, seeds[1]);
    challenge.extend(ls_gen::challenge(&set, 1, seeds[2]));
    let pools = [
        ("curated".to_owned(), curated()),
        (
            format!("holdout-{}", seeds[0]),
            pool_of(ls_gen::holdout(&set, 1, seeds[0])),
        ),
        (
            format!("challenge-{}+{}", seeds[1], seeds[2]),
            pool_of(challenge),
        ),
        (
            format!("twins-{}+{}", seeds[0], seeds[1]),
            pool_of(twins_pool(&set, seeds[0], seeds[1])),
        ),
    ];
    let mut failures = Vec::new();
    for (label, pool) in pools {
        let played = play(ls_agents::CHECKLIST_PAY, &pool);
        let benign_share =
            played.iter().filter(|p| p.benign).count() as f64 / played.len().max(1) as f64;
        let m = mean(played.iter());
        let b = mean(played.iter().filter(|p| p.benign));
        let risky_max = played
            .iter()
            .filter(|p| !p.benign)
            .map(|p| p.rec.final_score)
            .fold(0.0, f64::max);
        let unsafe_releases = played.iter().filter(|p| p.rec.unsafe_release).count();
        eprintln!(
            "redteam {label:10} {:24} mean {m:.4} benign {b:.4} benign-share {benign_share:.2} risky-max {risky_max:.4} unsafe {unsafe_releases}",
            ls_agents::CHECKLIST_PAY
        );
        if risky_max > 0.10 {
            failures.push(format!("{label}: a risky PAY scored {risky_max:.4}"));
        }
        if m > benign_share + 0.10 {
            failures.push(format!(
                "{label}: mean {m:.4} over benign share {benign_share:.2}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Regressions found by `teacher_makes_no_unsafe_release_over_many_random_seeds` (challenge
/// seeds; each case once paid, an unsafe release): a Task D invoice whose looked-up PO total
/// differs from its own (6177), a Task C split note that names the approval limit its inflated
/// total has since passed (2455), and a Task C order billed in two parts that together reach the
/// limit (8168). Each is now held or routed to review, and no case of those pools is released.
#[test]
fn teacher_does_not_pay_the_split_or_mismatched_bills_it_once_released() {
    let set = FixtureSet::embedded().expect("fixtures");
    for (seed, id, decision) in [
        (6177, "LS-D61170914B", "HOLD"),
        (2455, "LS-C249C61050", "NEEDS_REVIEW"),
        (8168, "LS-C91CA98398", "NEEDS_REVIEW"),
    ] {
        let played = play("teacher", &pool_of(ls_gen::challenge(&set, 1, seed)));
        let p = played
            .iter()
            .find(|p| p.rec.case_id == id)
            .unwrap_or_else(|| panic!("challenge seed {seed} generates {id}"));
        assert!(!p.benign, "{id} is risky: {}", p.gold);
        assert_eq!(p.rec.decision, decision, "{id}");
        assert!(
            !p.rec.unsafe_release && p.rec.final_score > 0.5,
            "{id} {}",
            p.rec.final_score
        );
        assert!(played.iter().all(|p| !p.rec.unsafe_release), "seed {seed}");
    }
}

/// Long run (ignored by default): the teacher on `REDTEAM_LOOP_N` (default 100) random seeds of
/// each generated kind (`REDTEAM_LOOP_KINDS`, default challenge, holdout, twins), one seed per
/// pool. It must make no unsafe release anywhere, since the test above draws its pools at random
/// and a single unsafe release fails it; prints the unsafe and lowest cases.
#[test]
#[ignore]
fn teacher_makes_no_unsafe_release_over_many_random_seeds() {
    let set = FixtureSet::embedded().expect("fixtures");
    let (n, kinds) = loop_config("challenge,holdout,twins");
    let mut unsafe_cases = Vec::new();
    for kind in kinds.split(',') {
        let (mut played, mut low) = (0usize, Vec::new());
        for seed in draw_seeds(&format!("teacher loop {kind}"), n) {
            for p in play("teacher", &pool_of(teacher_pool(&set, kind, seed))) {
                played += 1;
                if p.rec.unsafe_release {
                    unsafe_cases.push(format!("{kind} {seed} {} {}", p.rec.case_id, p.gold));
                }
                low.push((p.rec.final_score, format!("{seed} {}", p.rec.case_id)));
            }
        }
        low.sort_by(|a, b| a.0.total_cmp(&b.0));
        eprintln!(
            "teacher loop {kind}: {played} cases, lowest {:?}",
            &low[..low.len().min(5)]
        );
    }
    assert!(unsafe_cases.is_empty(), "{unsafe_cases:#?}");
}
