//! Wire types the reference clients rely on: amounts arrive as JSON numbers.

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use std::sync::Arc;

#[test]
fn portfolio_at_risk_amount_is_a_json_number() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    for case in &set.cases {
        let mut env = Environment::new(pool.clone(), EnvConfig::default());
        let e = env
            .reset(&ResetRequest {
                case_id: Some(case.case_id.clone()),
                ..Default::default()
            })
            .unwrap();
        let v = serde_json::to_value(&e).unwrap();
        let amount = &v["observation"]["portfolio_context"]["at_risk_amount"];
        assert!(
            amount.is_number(),
            "{}: at_risk_amount {amount}",
            case.case_id
        );
        assert!(amount.as_f64().unwrap() > 0.0, "{}", case.case_id);
    }
}

#[test]
fn state_carries_the_institutional_context() {
    let set = FixtureSet::embedded().unwrap();
    let pool = Arc::new(CasePool::new(set.clone()));
    let mut env = Environment::new(pool, EnvConfig::default());
    let e = env
        .reset(&ResetRequest {
            case_id: Some("CASE-D-001".into()),
            ..Default::default()
        })
        .unwrap();
    let obs = serde_json::to_value(&e).unwrap();
    let st = serde_json::to_value(env.state().unwrap()).unwrap();
    let ctx = &st["institutional_context"];
    assert!(ctx.as_object().is_some_and(|o| !o.is_empty()), "{ctx}");
    assert_eq!(
        ctx,
        &obs["observation"]["portfolio_context"]["institutional_context"]
    );
}
