//! What a schema's `required` means on the wire: a tool whose declaration requires a field fails
//! (a penalised step, `success: false`, never a 4xx) when the field is missing, and a tool that
//! requires nothing succeeds on an empty payload. Interventions never fail. Checked on every
//! curated case, so a schema that marks the wrong field required fails here.

use ls_core::{ActionKind, ActionName, FixtureSet};
use ls_env::action::fields;
use ls_env::{CasePool, EnvConfig, Environment, ResetRequest};
use serde_json::Map;
use std::sync::Arc;

#[test]
fn required_fields_are_the_ones_a_tool_fails_without() {
    let pool = Arc::new(CasePool::new(FixtureSet::embedded().expect("fixtures")));
    let mut env = Environment::new(pool.clone(), EnvConfig::default());
    for case in &pool.cases {
        for name in ActionName::ALL {
            if name.kind() == ActionKind::Final {
                continue;
            }
            let req = ResetRequest {
                case_id: Some(case.case_id.clone()),
                ..Default::default()
            };
            env.reset(&req).expect("reset");
            let out = env.step(name.as_str(), &Map::new()).expect("no 4xx");
            let result = &out.observation.last_tool_result;
            let success = result.get("success").and_then(|v| v.as_bool());
            let requires = fields(name).iter().any(|f| f.required);
            let callback_refused = result
                .get("error")
                .and_then(|e| e.as_str().map(str::to_owned))
                == Some("callback_capacity_exhausted".into());
            assert_eq!(
                success,
                Some(!requires || callback_refused),
                "{} on {} with an empty payload",
                name.as_str(),
                case.case_id
            );
        }
    }
}
