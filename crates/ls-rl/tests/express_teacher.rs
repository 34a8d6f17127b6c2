//! The factored action space can express what the teacher does: the teacher plays every case of
//! every pool kind, each of its actions is re-expressed as factored actions (a tool and the ledger
//! row its argument comes from, an intervention, the submission composed part by part) and only
//! those reach the environment. Per pool kind, the re-expressed episodes keep at least 95 % of the
//! teacher's own mean score.

use ls_agents::{Agent, TeacherAgent};
use ls_core::{Case, FixtureSet};
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest, StepEnvelope};
use ls_rl::{Composer, Layout, Ledger, Step};
use std::sync::Arc;

fn reset(env: &mut Environment, case: &Case) -> StepEnvelope {
    env.reset(&ResetRequest {
        case_id: Some(case.case_id.clone()),
        track: Some("case".into()),
        ..Default::default()
    })
    .unwrap()
}

fn score(e: &StepEnvelope) -> f64 {
    e.info.terminal().map_or(0.0, |t| t.final_score)
}

/// The teacher on its own.
fn teacher_alone(pool: &Arc<CasePool>, case: &Case) -> f64 {
    let mut env = Environment::new(pool.clone(), EnvConfig::default());
    let mut last = reset(&mut env, case);
    let mut t = TeacherAgent::new();
    t.begin(&last, 0);
    for _ in 0..80 {
        let a = t.next_action(&last);
        last = match env.step(&a.action_type, &a.payload) {
            Ok(e) => e,
            Err(_) => break,
        };
        if last.done {
            break;
        }
    }
    score(&last)
}

/// The teacher deciding, the factored interface acting. Returns (score, actions not expressible).
fn teacher_factored(pool: &Arc<CasePool>, case: &Case, layout: &Layout) -> (f64, usize) {
    let mut env = Environment::new(pool.clone(), EnvConfig::default());
    let mut last = reset(&mut env, case);
    let mut ledger = Ledger::new();
    ledger.absorb(&last);
    let mut composer = Composer::new();
    let mut t = TeacherAgent::new();
    t.begin(&last, 0);
    let mut missed = 0;
    for _ in 0..80 {
        let a = t.next_action(&last);
        let debug = std::env::var("EXPRESS_DEBUG").is_ok_and(|d| d == case.case_id);
        if debug {
            eprintln!(
                "teacher: {} {}",
                a.action_type,
                serde_json::to_string(&a.payload).unwrap()
            );
        }
        let Ok(plan) = composer.express(layout, &ledger, &a.action_type, &a.payload) else {
            if debug {
                eprintln!("  NOT EXPRESSIBLE\n{}", ledger.render());
            }
            missed += 1;
            if a.action_type == "submit_decision" {
                break;
            }
            continue;
        };
        for i in plan {
            let legal = composer.mask(layout, &ledger)[i];
            assert!(
                legal,
                "{}: expressed action {:?} is not legal",
                case.case_id,
                layout.action(i)
            );
            if let Step::Env {
                action_type,
                payload,
            } = composer.apply(layout, &ledger, i)
            {
                if debug {
                    eprintln!(
                        "  factored: {action_type} {}",
                        serde_json::to_string(&payload).unwrap()
                    );
                }
                last = env.step(&action_type, &payload).unwrap();
                ledger.absorb(&last);
                if last.done {
                    break;
                }
            }
        }
        if last.done {
            break;
        }
    }
    if std::env::var("EXPRESS_DEBUG").is_ok_and(|d| d == case.case_id) {
        eprintln!(
            "{}\n{:?}",
            ledger.render(),
            last.info
                .terminal()
                .map(|t| t.score_breakdown.raw().get().to_owned())
        );
    }
    (score(&last), missed)
}

fn pools(set: &FixtureSet) -> Vec<(&'static str, Vec<Case>)> {
    use ls_gen::pool::{generate, GenKind};
    vec![
        ("curated", set.cases.clone()),
        ("holdout", generate(set, GenKind::Holdout, 31415, 24)),
        ("challenge", generate(set, GenKind::Challenge, 2026, 24)),
        ("twins", generate(set, GenKind::Twins, 31415, 24)),
        ("quarter", generate(set, GenKind::Controlbench, 2026, 24)),
    ]
}

#[test]
fn teacher_reexpressed_keeps_its_scores_on_every_pool_kind() {
    let set = FixtureSet::embedded().unwrap();
    let layout = Layout::new();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for (kind, cases) in pools(&set) {
        let pool = Arc::new(CasePool::from_parts(
            cases.iter().cloned().map(Arc::new).collect(),
            Arc::new(set.master.clone()),
        ));
        let (mut own, mut fact, mut missed) = (0.0, 0.0, 0);
        for case in &cases {
            let a = teacher_alone(&pool, case);
            let (b, m) = teacher_factored(&pool, case, &layout);
            own += a;
            fact += b;
            missed += m;
            if b + 0.05 < a {
                report.push(format!(
                    "  {kind} {} teacher {a:.3} factored {b:.3} (missed {m})",
                    case.case_id
                ));
            }
        }
        let n = cases.len() as f64;
        let ratio = fact / own.max(1e-9);
        report.push(format!(
            "{kind}: {} cases, teacher {:.4}, factored {:.4}, ratio {ratio:.4}, {missed} actions not expressible",
            cases.len(),
            own / n,
            fact / n
        ));
        if ratio < 0.95 {
            failures.push(kind);
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "below 0.95 of the teacher on {failures:?}"
    );
}

/// The same on the task distribution's draws (what a Gymnasium reset plays): every family and
/// generator, 40 draws per selection: each split by itself and the two held-out sets a trainer
/// reports. The teacher's own mean is at least 0.85 on each (0.946 train, 0.935 validation,
/// 0.905 test, 0.937 held-out templates, 0.913 held-out generator when this was written).
#[test]
fn teacher_reexpressed_keeps_its_scores_on_task_draws() {
    use ls_gen::{Selection, Split, TaskDistribution};
    let set = Arc::new(FixtureSet::embedded().unwrap());
    let templates: Vec<Arc<Case>> = set.cases.iter().cloned().map(Arc::new).collect();
    let dist = TaskDistribution::new(set.clone(), templates);
    let layout = Layout::new();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    // Each split by itself, and the two held-out sets a trainer reports: held-out templates on
    // the training generators, the held-out generator on the training templates.
    let selections = [
        (Split::Train, Split::Train),
        (Split::Validation, Split::Validation),
        (Split::Test, Split::Test),
        (Split::Test, Split::Train),
        (Split::Train, Split::Test),
    ];
    for (templates, generators) in selections {
        let sel = Selection {
            templates,
            generators,
        };
        let split = (templates, generators);
        let (mut own, mut fact) = (0.0, 0.0);
        let n = 40;
        for seed in 0..n {
            let draw = dist.draw(sel, seed).unwrap();
            let pool = Arc::new(CasePool::from_parts(
                vec![draw.case.clone()],
                Arc::new(set.master.clone()),
            ));
            let a = teacher_alone(&pool, &draw.case);
            let (b, m) = teacher_factored(&pool, &draw.case, &layout);
            own += a;
            fact += b;
            report.push(format!(
                "  {split:?} {seed} {} {:?} {:?} {:?}: teacher {a:.3} factored {b:.3} (missed {m})",
                draw.case.case_id, draw.generator, draw.template, draw.family
            ));
        }
        let ratio = fact / own.max(1e-9);
        report.push(format!(
            "{split:?}: teacher {:.4}, factored {:.4}, ratio {ratio:.4}",
            own / f64::from(n as u32),
            fact / f64::from(n as u32)
        ));
        // The teacher itself is the expert these draws are held to (a three-way match that came
        // with e-mail gets the fraud review: it scored 0.70 on the test split without it).
        if ratio < 0.95 || own / f64::from(n as u32) < 0.85 {
            failures.push(split);
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(
        failures.is_empty(),
        "the teacher under 0.85, or its re-expression under 0.95 of it, on {failures:?}"
    );
}
