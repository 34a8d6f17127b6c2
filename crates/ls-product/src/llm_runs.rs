//! The `llm` agent for `POST /agent-runs`: the server plays `ls_agents::LlmAgent` against an
//! OpenAI-compatible endpoint the operator names (`llm: {api_base, model, api_key?}`), as
//! `ledgershield run --agent llm` does. An operator route (it makes the server call the URL);
//! the request's key, if any, is sent as the endpoint's bearer token and never echoed. Every call
//! goes through the bounded transport of `ls_agents::outbound` (see [`transport`]): the base URL
//! checked (scheme, host, port, a plain path; the request path fixed), an overall deadline,
//! cancellation when the client goes away, a streamed reply cap, no redirects, and failures that
//! all read the same (no reachability oracle).

use ls_agents::outbound::{ApiBase, Cancel, Limits, Outbound};
use ls_agents::{
    offline_agent, Agent, Assistance, CallStats, EpisodeRecord, LlmAgent, LlmConfig, OFFLINE_AGENTS,
};
use ls_server::error::ApiError;
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::{Duration, Instant};

/// The agent name that takes an endpoint.
pub const LLM_AGENT: &str = "llm";
const MAX_MODEL_CHARS: usize = 200;
/// Per model call (the endpoint is asked once per decision).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Establishing a connection to the endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest reply read from the endpoint (a chat completion is a few kilobytes).
const MAX_REPLY_BYTES: usize = 1 << 20;

/// The transport of one agent run: every call of the run ends by `deadline`, stops when `cancel`
/// is cancelled, reads at most [`MAX_REPLY_BYTES`], follows no redirect, and fails the same way
/// whatever went wrong.
pub fn transport(deadline: Instant, cancel: Cancel) -> Outbound {
    Outbound::new(Limits {
        call_timeout: CALL_TIMEOUT,
        connect_timeout: CONNECT_TIMEOUT,
        deadline: Some(deadline),
        max_reply_bytes: MAX_REPLY_BYTES,
        opaque_errors: true,
    })
    .with_cancel(cancel)
}

/// An OpenAI-compatible endpoint.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmEndpoint {
    /// Base URL of the OpenAI-compatible API (`http(s)://host[:port]/v1`); the agent posts to
    /// `{api_base}/chat/completions`.
    pub api_base: String,
    /// Model name sent with each request (also the run's model on the reply).
    pub model: String,
    /// Bearer token for the endpoint, if it needs one.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Assistance for the model (each off by default; any one on makes the run *assisted*, which
    /// the reply's `harness` records).
    #[serde(default)]
    pub assistance: LlmAssistance,
}

/// The `llm` agent's assistance options (`ls_agents::Assistance`).
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmAssistance {
    /// Show the teacher's suggested next action in every step prompt.
    #[serde(default)]
    pub teacher_hint: bool,
    /// Repair broken JSON replies.
    #[serde(default)]
    pub repair: bool,
    /// Agent-side guardrails on submissions.
    #[serde(default)]
    pub guardrails: bool,
}

impl From<LlmAssistance> for Assistance {
    fn from(a: LlmAssistance) -> Self {
        Assistance {
            teacher_hint: a.teacher_hint,
            repair: a.repair,
            guardrails: a.guardrails,
        }
    }
}

/// What a played run reports about its model: the harness (track, assistance, reply cap) and
/// the endpoint's calls; an error when the endpoint answered no call (a failing endpoint is not
/// a score of the model). `None` for scripted agents.
pub fn provenance(
    agent: &str,
    llm: Option<&LlmEndpoint>,
    episodes: &[EpisodeRecord],
) -> Result<Option<serde_json::Value>, ApiError> {
    let Some(e) = llm.filter(|_| agent == LLM_AGENT) else {
        return Ok(None);
    };
    let calls = CallStats::total(episodes.iter().filter_map(|r| r.model_calls.as_ref()));
    if calls.endpoint_failed() {
        return Err(ApiError::BadGateway(format!(
            "llm: the endpoint answered none of {} model calls (every call failed); the run has no score",
            calls.calls
        )));
    }
    let inert = Outbound::new(Limits::per_call(CALL_TIMEOUT));
    let harness = self::agent(agent, Some(e), &inert).and_then(|a| a.harness());
    Ok(Some(
        serde_json::json!({"harness": harness, "model_calls": calls}),
    ))
}

fn checked(e: &LlmEndpoint) -> Result<(), ApiError> {
    ApiBase::parse(&e.api_base).map_err(|why| {
        ApiError::Validation(format!(
            "llm.api_base: {why} (e.g. http://127.0.0.1:8000/v1; requests go to <api_base>/chat/completions)"
        ))
    })?;
    let m = e.model.trim();
    if m.is_empty() || m.len() > MAX_MODEL_CHARS {
        return Err(ApiError::Validation(format!(
            "llm.model: the model name, 1-{MAX_MODEL_CHARS} characters"
        )));
    }
    Ok(())
}

/// Check the agent name against the endpoint: `llm` needs one, the scripted agents take none.
pub fn check(agent: &str, llm: Option<&LlmEndpoint>) -> Result<(), ApiError> {
    match (agent, llm) {
        (LLM_AGENT, Some(e)) => checked(e),
        (LLM_AGENT, None) => Err(ApiError::Validation(
            "agent 'llm' needs llm: {api_base, model} (an OpenAI-compatible endpoint)".into(),
        )),
        (a, Some(_)) if offline_agent(a).is_some() => Err(ApiError::Validation(format!(
            "llm: only agent 'llm' takes an endpoint ('{a}' is a scripted agent)"
        ))),
        (a, _) if offline_agent(a).is_some() => Ok(()),
        (a, _) => Err(ApiError::Validation(format!(
            "agent: unknown agent '{}'; use one of {}, llm",
            ls_server::error::prefix(a),
            OFFLINE_AGENTS.join(", ")
        ))),
    }
}

/// A fresh agent for one case (`None` for a name [`check`] refuses); the `llm` agent calls
/// through `transport`.
pub fn agent(
    name: &str,
    llm: Option<&LlmEndpoint>,
    transport: &Outbound,
) -> Option<Box<dyn Agent>> {
    match (name, llm) {
        (LLM_AGENT, Some(e)) => Some(Box::new(
            LlmAgent::new(LlmConfig {
                api_base: e.api_base.trim().trim_end_matches('/').to_owned(),
                model: e.model.trim().to_owned(),
                api_key: e.api_key.clone().filter(|k| !k.is_empty()),
                temperature: 0.0,
                timeout: CALL_TIMEOUT,
                max_retries: 1,
                backoff: Duration::from_millis(500),
                max_tokens: None,
            })
            .with_assistance(e.assistance.into())
            .with_transport(transport.clone()),
        )),
        (LLM_AGENT, None) => None,
        (other, _) => offline_agent(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(url: &str, model: &str) -> LlmEndpoint {
        LlmEndpoint {
            api_base: url.into(),
            model: model.into(),
            api_key: None,
            assistance: LlmAssistance::default(),
        }
    }

    #[test]
    fn endpoints_are_checked_with_the_reason_named() {
        assert!(check("llm", Some(&ep("http://127.0.0.1:9/v1", "m"))).is_ok());
        let e = check("llm", None).unwrap_err();
        assert!(e.to_string().contains("needs llm"), "{e}");
        let e = check("llm", Some(&ep("file:///etc/passwd", "m"))).unwrap_err();
        assert!(e.to_string().contains("llm.api_base"), "{e}");
        for bad in [
            "http://127.0.0.1:9/admin?",
            "http://127.0.0.1:9/x#",
            "http://u:p@127.0.0.1:9/v1",
        ] {
            let e = check("llm", Some(&ep(bad, "m"))).unwrap_err();
            assert!(e.to_string().contains("llm.api_base"), "{bad}: {e}");
        }
        let e = check("llm", Some(&ep("http://x/v1", " "))).unwrap_err();
        assert!(e.to_string().contains("llm.model"), "{e}");
        let e = check("teacher", Some(&ep("http://x/v1", "m"))).unwrap_err();
        assert!(e.to_string().contains("only agent 'llm'"), "{e}");
        let e = check("oracle", None).unwrap_err();
        assert!(e.to_string().contains("unknown agent 'oracle'"), "{e}");
        assert!(check("teacher", None).is_ok());
        let t = transport(Instant::now(), Cancel::default());
        assert!(agent("llm", Some(&ep("http://x/v1/", "m")), &t).is_some());
        assert!(agent("llm", None, &t).is_none());
    }
}
