//! ControlBench on the OpenEnv protocol: [`Environment`] as the per-session backend and
//! [`AppState`] as the service.

pub use crate::controlbench::ControlBenchAction;
use crate::controlbench::{check_fresh_institution, parse_reset, parse_step, AppState};
use crate::discovery::{self, EnvironmentMetadata, EnvironmentSchemas, ToolSpec};
use crate::error::ApiError;
use crate::protocol::{to_json, OpenEnvBackend, OpenEnvService};
use crate::sessions::SessionManager;
use crate::ws_config::WsRuntime;
use ls_core::enums::{ActionKind, ActionName};
use ls_env::{Environment, Observation, PublicState};
use ls_json::RawJson;
use serde_json::{Map, Value};

/// Routes of the OpenEnv protocol surface for ControlBench.
pub fn routes() -> crate::route_table::ApiRoutes<crate::Shared> {
    crate::openenv::protocol_routes::<AppState>()
}

const WS_SESSION_FIELD: &str =
    "session_id is not accepted here: each WebSocket connection is its own session";

impl OpenEnvBackend for Environment {
    fn reset(&mut self, data: Map<String, Value>) -> Result<RawJson, ApiError> {
        let req = parse_reset(Value::Object(data))?;
        if req.session_id.is_some() {
            return Err(ApiError::Validation(WS_SESSION_FIELD.into()));
        }
        // WebSocket and MCP messages carry no operator credential.
        check_fresh_institution(&req, false)?;
        to_json(&Environment::reset(self, &req)?)
    }

    fn step(&mut self, action: Map<String, Value>) -> Result<RawJson, ApiError> {
        let req = parse_step(Value::Object(action))?;
        if req.session_id.is_some() {
            return Err(ApiError::Validation(WS_SESSION_FIELD.into()));
        }
        let action = ls_env::ActionRequest::parse(&req.action_type, &req.payload);
        to_json(&Environment::step_request(self, action)?)
    }

    fn state(&self) -> Option<Value> {
        // A sealed episode that is over answers its sealed view (no grade).
        Environment::state_view(self).and_then(|s| serde_json::to_value(s).ok())
    }
}

fn tool_description(action: ActionName) -> String {
    let kind = match action.kind() {
        ActionKind::Investigation => "Investigation tool",
        ActionKind::Intervention => "Intervention",
        ActionKind::Final => "Final action: ends the episode and grades it",
    };
    format!(
        "{kind} `{}` (cost {} budget units).",
        action.as_str(),
        action.base_cost()
    )
}

impl OpenEnvService for AppState {
    type Backend = Environment;

    fn new_backend(&self) -> Result<Environment, ApiError> {
        Ok(self.new_env())
    }

    fn ws_runtime(&self) -> &WsRuntime {
        &self.ws
    }

    fn sessions(&self) -> &SessionManager<Environment> {
        &self.sessions
    }

    fn initial_state(&self) -> Value {
        serde_json::to_value(PublicState {
            budget_total: 15.0,
            budget_remaining: 15.0,
            max_steps: 20,
            track_mode: self.config.track_mode.as_str().to_owned(),
            ..Default::default()
        })
        .unwrap_or(Value::Null)
    }

    fn metadata(&self) -> EnvironmentMetadata {
        EnvironmentMetadata {
            name: "ledgershield_controlbench".into(),
            description: "LedgerShield ControlBench: accounts-payable financial-control episodes. The agent investigates an invoice case with 11 tools and 9 interventions under a budget and step limit, then submits PAY, HOLD, NEEDS_REVIEW or ESCALATE_FRAUD with evidence; the final grade is the episode's terminal reward.".into(),
            readme_content: Some(controlbench_readme(self.pool.cases.len())),
            version: Some(env!("CARGO_PKG_VERSION").into()),
            author: Some("LedgerShield".into()),
            documentation_url: None,
        }
    }

    fn schemas(&self) -> EnvironmentSchemas {
        EnvironmentSchemas {
            action: discovery::input_schema::<ControlBenchAction>(),
            observation: discovery::output_schema::<Observation>(),
            // The OpenEnv clients' state (a WebSocket connection's own environment never holds
            // a sealed episode; `/state`'s reply schema also lists the sealed state).
            state: discovery::output_schema::<PublicState>(),
        }
    }

    fn extra_message_types(&self) -> &'static [&'static str] {
        &["watchdog_credential"]
    }

    /// `{"type": "watchdog_credential"}`: a token a second agent attaches with on the watchdog
    /// socket to watch this connection's episodes (`crate::watchdog_ws`). Only on a connection
    /// opened with the operator key: whoever plays the analyst on the socket must not issue its
    /// own watchdog.
    fn extra_message(
        &self,
        _ty: &str,
        data: Map<String, Value>,
        backend: &crate::protocol::SharedBackend<Environment>,
        operator: bool,
    ) -> Result<Value, ApiError> {
        if !operator {
            return Err(ApiError::Forbidden(
                "watchdog_credential needs a connection opened with the operator key (X-API-Key on the upgrade): the analyst cannot issue its own watchdog; a harness without the key creates the session with POST /watchdog/pair".into(),
            ));
        }
        if !data.is_empty() {
            return Err(ApiError::Validation(
                "a 'watchdog_credential' message takes no data".into(),
            ));
        }
        let token = self.watchdog.issue(backend);
        Ok(
            serde_json::json!({"type": "watchdog_credential", "data": crate::watchdog_credential::credential_reply(&token)}),
        )
    }

    fn tools(&self) -> Vec<ToolSpec> {
        ActionName::ALL
            .iter()
            .map(|&a| ToolSpec {
                name: a.as_str().to_owned(),
                description: tool_description(a),
                input_schema: ls_env::action::payload_schema(a),
            })
            .collect()
    }
}

fn controlbench_readme(cases: usize) -> String {
    let mut s = String::from(
        "# LedgerShield ControlBench\n\n\
         Accounts-payable control episodes: each episode is one invoice case (task families A–E). \
         The agent reads documents, queries vendor, PO, receipt, ledger and policy records, may take \
         interventions (callbacks, freezes, escalations) whose results arrive later, and ends the \
         episode with `submit_decision`. The terminal reward is the episode's final grade.\n\n",
    );
    s.push_str(&format!("Cases loaded: {cases}.\n\n## Protocol\n\n"));
    s.push_str(
        "* WebSocket `/ws` (OpenEnv 0.3): `{\"type\":\"reset\",\"data\":{\"case_id\":\"CASE-A-001\"}}`, \
         `{\"type\":\"step\",\"data\":{\"action_type\":\"ocr\",\"payload\":{\"doc_id\":\"...\"}}}`, \
         `{\"type\":\"state\"}`, `{\"type\":\"close\"}`. Each connection owns an isolated environment.\n\
         * HTTP: `POST /reset`, `POST /step`, `GET /state` with an `X-Session-Id` header.\n\
         * MCP: `POST /mcp` (`tools/list`, `tools/call` with `session_id`).\n\n\
         ## Reset parameters\n\n`seed`, `case_id`, `track`, `custom_case`, `episode_id` (accepted, ignored).\n\n## Actions\n\n\
         | action | kind | cost |\n|---|---|---|\n",
    );
    for a in ActionName::ALL {
        let kind = match a.kind() {
            ActionKind::Investigation => "investigation",
            ActionKind::Intervention => "intervention",
            ActionKind::Final => "final",
        };
        s.push_str(&format!(
            "| `{}` | {kind} | {} |\n",
            a.as_str(),
            a.base_cost()
        ));
    }
    s.push_str("\nDecisions: `PAY`, `HOLD`, `NEEDS_REVIEW`, `ESCALATE_FRAUD`.\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn action_schema_lists_all_21_actions() {
        let schema = discovery::input_schema::<ControlBenchAction>();
        let text = schema.to_string();
        for a in ActionName::ALL {
            assert!(
                text.contains(&format!("\"{}\"", a.as_str())),
                "schema lacks {}",
                a.as_str()
            );
        }
        let names: Vec<&str> = ActionName::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(names.len(), ActionName::COUNT);
        // The enum is the serde form of ActionName, which must equal the wire names.
        for a in ActionName::ALL {
            assert_eq!(serde_json::to_value(a).unwrap(), json!(a.as_str()));
        }
        assert_eq!(schema["required"], json!(["action_type"]));
    }

    #[test]
    fn tool_schemas_are_objects() {
        for a in ActionName::ALL {
            let s = ls_env::action::payload_schema(a);
            assert_eq!(s["type"], "object");
            for r in s["required"].as_array().unwrap() {
                assert!(
                    s["properties"].get(r.as_str().unwrap()).is_some(),
                    "{} requires an undeclared field",
                    a.as_str()
                );
            }
        }
    }
}
