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
            Played {
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
                    eprintln!(
                        "case {:24} {:16} {:.4} {} benign={}",
                        f.name(),
                        p.rec.case_id,
                        p.rec.final_score,
                        p.rec.result_class,
                        p.benign
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

fn generated_pools() -> Vec<(String, Vec<Case>)> {
    let set = FixtureSet::embedded().expect("fixtures");
    let mut pools: Vec<(String, Vec<Case>)> = (1..=5)
        .map(|s| (format!("holdout-{s}"), ls_gen::holdout(&set, 1, s)))
        .collect();
    pools.push(("challenge".into(), ls_gen::challenge(&set, 1, 2026)));
    pools.push(("twins".into(), ls_gen::generators::twins(&set, 99)));
    pools
}

/// Plays every family and the teacher over the generated pools (holdout seeds 1–5, challenge,
/// twins as benign/risky pairs) and asserts the bounds; the teacher must reach 0.85 on each
/// holdout with no unsafe release.
#[test]
fn gaming_policies_score_low_on_generated_pools() {
    let set = FixtureSet::embedded().expect("fixtures");
    let master = Arc::new(set.master.clone());
    let mut failures = Vec::new();
    for (label, cases) in generated_pools() {
        let pool = Arc::new(CasePool::from_parts(
            cases.into_iter().map(Arc::new).collect(),
            master.clone(),
        ));
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
        if label.starts_with("holdout") && (tm < 0.85 || unsafe_releases > 0) {
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
