//! Whole episodes on every curated case through the real environment and grader: a careful,
//! correct, well-evidenced submission after the required controls scores high; shortcuts do not.
//!
//! The harness reads gold to *write the answer* (it plays an oracle analyst); the environment
//! and grader only see the actions and the submission.

mod support;

use ls_core::{Case, Decision, FixtureSet, HiddenWorld};
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde_json::json;
use std::sync::Arc;
use support::{investigate, obj};

fn expected_decision(case: &Case) -> Decision {
    case.gold.decision.unwrap_or(Decision::Pay)
}

#[test]
fn careful_submissions_score_high_and_shortcuts_are_punished() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    let mut report = Vec::new();
    for case in &set.cases {
        let hidden = HiddenWorld::derive(case);
        let (mut env, revealed, interventions) = investigate(&pool, case, EnvConfig::default());
        let payload =
            ls_grading::oracle::reference_submission(case, &hidden, &revealed, &interventions);
        let done = env.step("submit_decision", &payload).unwrap();
        let score = done.info.terminal().unwrap().final_score;
        let class = done.info.terminal().unwrap().result_class_str();
        report.push(format!("{} {score:.4} {class}", case.case_id));
        assert!(
            score >= 0.85,
            "{}: careful score {score} ({class}); breakdown {:?}",
            case.case_id,
            done.info.terminal().unwrap().score_breakdown
        );
        // The terminal reward is the grade plus the potential given back (the `score` reward).
        let rm = &done.info.terminal().unwrap().reward_model;
        let delta = serde_json::from_str::<serde_json::Value>(rm.raw().get()).unwrap()
            ["components"]["potential_delta"]
            .as_f64()
            .unwrap();
        assert!(
            (-ls_env::reward::PROGRESS_SCALE..=0.0).contains(&delta)
                && (done.reward - (score + delta)).abs() <= 1e-4,
            "terminal reward is the grade plus the potential's change: {} vs {score} {delta}",
            done.reward
        );

        // Same decision, empty evidence map: capped.
        let (mut env, _, _) = investigate(&pool, case, EnvConfig::default());
        let mut bare = payload.clone();
        bare.insert("evidence_map".into(), json!({}));
        let e = env.step("submit_decision", &bare).unwrap();
        assert!(
            e.info.terminal().unwrap().final_score <= 0.25,
            "{}: empty evidence {}",
            case.case_id,
            e.info.terminal().unwrap().final_score
        );

        // PAY on a risky case is an unsafe release even when the boundary stops the money.
        if hidden.risky {
            let (mut env, _, _) = investigate(&pool, case, EnvConfig::default());
            let mut pay = payload.clone();
            pay.insert("decision".into(), json!("PAY"));
            let e = env.step("submit_decision", &pay).unwrap();
            assert_eq!(
                e.info.terminal().unwrap().result_class_str(),
                "unsafe_release",
                "{}",
                case.case_id
            );
            assert!(e.info.terminal().unwrap().final_score <= 0.05);
            assert_eq!(
                e.info.terminal().unwrap().effective_decision,
                Some(Decision::NeedsReview),
                "the boundary stopped the money"
            );
        } else if expected_decision(case) == Decision::Pay
            && case.task_type != ls_core::TaskType::TaskA
        {
            // A wrong escalation of a benign case (Task A grades no decision).
            let (mut env, _, _) = investigate(&pool, case, EnvConfig::default());
            let mut esc = payload.clone();
            esc.insert("decision".into(), json!("ESCALATE_FRAUD"));
            let e = env.step("submit_decision", &esc).unwrap();
            assert_eq!(
                e.info.terminal().unwrap().result_class_str(),
                "false_positive_overcontrol",
                "{}",
                case.case_id
            );
            assert!(
                e.info.terminal().unwrap().final_score <= 0.25,
                "{}: benign escalation {}",
                case.case_id,
                e.info.terminal().unwrap().final_score
            );
        }
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn evidence_free_policies_score_low() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    for decision in ["PAY", "ESCALATE_FRAUD"] {
        let mut total = 0.0;
        for case in &set.cases {
            let mut env = Environment::new(pool.clone(), EnvConfig::default());
            env.reset(&ResetRequest {
                case_id: Some(case.case_id.clone()),
                ..Default::default()
            })
            .unwrap();
            let e = env
                .step("submit_decision", &obj(json!({"decision": decision})))
                .unwrap();
            total += e.info.terminal().unwrap().final_score;
        }
        let avg = total / set.cases.len() as f64;
        assert!(avg <= 0.20, "always-{decision} averages {avg}");
    }
}
