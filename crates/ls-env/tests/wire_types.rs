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
