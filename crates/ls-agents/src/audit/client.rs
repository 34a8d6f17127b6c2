//! The Financial Audit environment as an auditor sees it: its routes, called in process
//! ([`LocalAudit`], through `audit_env`'s public API and the campaign replies it declares once
//! for both places) or over HTTP ([`HttpAudit`], a server started with `ledgershield serve --env
//! audit`). Both answer with the same JSON, so the auditor is written once.

use audit_env::campaign::Campaign;
use audit_env::campaign_api::{IdBody, ReviewBody, RoleBody, StartBody, SubmitBody};
use audit_env::episode::{AuditEnv, AuditResetRequest, AuditStepRequest, EnvConfig};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::time::Duration;

/// Longest reply read from an audit server.
pub const MAX_ENV_REPLY_BYTES: u64 = 8 * 1024 * 1024;

/// The routes an auditor calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditRoute {
    /// `GET /tasks`.
    Tasks,
    /// `POST /reset` (a fresh session per task).
    Reset,
    /// `POST /step`.
    Step,
    /// `GET /grader` (the evaluator's read: sealed held-out grades need the operator key).
    Grader,
    /// `POST /campaign/start`.
    CampaignStart,
    /// `POST /campaign/task/start`.
    TaskStart,
    /// `POST /campaign/task/submit`.
    TaskSubmit,
    /// `POST /overseer/review`.
    Review,
    /// `POST /campaign/period/advance`.
    Advance,
    /// `GET /campaign/state?campaign_id=`.
    CampaignState,
}

impl AuditRoute {
    fn http(self) -> (reqwest::Method, &'static str) {
        use reqwest::Method as M;
        match self {
            Self::Tasks => (M::GET, "/tasks"),
            Self::Reset => (M::POST, "/reset"),
            Self::Step => (M::POST, "/step"),
            Self::Grader => (M::GET, "/grader"),
            Self::CampaignStart => (M::POST, "/campaign/start"),
            Self::TaskStart => (M::POST, "/campaign/task/start"),
            Self::TaskSubmit => (M::POST, "/campaign/task/submit"),
            Self::Review => (M::POST, "/overseer/review"),
            Self::Advance => (M::POST, "/campaign/period/advance"),
            Self::CampaignState => (M::GET, "/campaign/state"),
        }
    }
}

/// An audit environment: a route called with a JSON body, answered with the route's JSON reply
/// or an error message (the server's, or the domain error's).
pub trait AuditClient {
    fn call(&mut self, route: AuditRoute, body: &Value) -> Result<Value, String>;
    /// Start a new single-task session (the next `Reset` plays in it).
    fn new_session(&mut self);
    /// Where the environment runs (`in-process`, or the server's origin).
    fn source(&self) -> String;
}

/// The environment in process: a fresh `AuditEnv` per task (so an adaptive fraud level never
/// carries over from one task to the next) and one campaign.
pub struct LocalAudit {
    config: EnvConfig,
    env: AuditEnv,
    campaign: Option<Campaign>,
}

impl Default for LocalAudit {
    fn default() -> Self {
        let config = EnvConfig::default();
        Self {
            env: AuditEnv::new(config.clone()),
            config,
            campaign: None,
        }
    }
}

fn typed<T: DeserializeOwned>(body: &Value) -> Result<T, String> {
    serde_json::from_value(body.clone()).map_err(|e| format!("request: {e}"))
}

fn reply<T: serde::Serialize>(v: Result<T, audit_env::AuditError>) -> Result<Value, String> {
    let v = v.map_err(|e| e.to_string())?;
    serde_json::to_value(v).map_err(|e| e.to_string())
}

impl LocalAudit {
    fn campaign(&mut self) -> Result<&mut Campaign, String> {
        self.campaign
            .as_mut()
            .ok_or_else(|| "no campaign is running".to_owned())
    }

    fn campaign_call(&mut self, route: AuditRoute, body: &Value) -> Result<Value, String> {
        match route {
            AuditRoute::CampaignStart => {
                let req: StartBody = typed(body)?;
                let c = Campaign::new(
                    audit_env::util::random_id("cmp"),
                    req.seed.unwrap_or(42),
                    req.total_periods.unwrap_or(5),
                    self.config.max_findings_per_step,
                )
                .map_err(|e| e.to_string())?;
                let out = c.start_reply().map_err(|e| e.to_string());
                self.campaign = Some(c);
                out
            }
            AuditRoute::TaskStart => {
                let req: RoleBody<Option<String>> = typed(body)?;
                reply(self.campaign()?.task_start_reply(req.role))
            }
            AuditRoute::TaskSubmit => {
                let (_, role, action) = typed::<SubmitBody<Option<String>>>(body)?.into_parts();
                reply(self.campaign()?.submit_reply(role, action, "submitted"))
            }
            AuditRoute::Review => {
                let (_, action) = typed::<ReviewBody<Option<String>>>(body)?.into_parts();
                reply(self.campaign()?.review_reply(action))
            }
            AuditRoute::Advance => {
                let _: IdBody<Option<String>> = typed(body)?;
                reply(self.campaign()?.advance_reply())
            }
            _ => reply(self.campaign()?.state_reply()),
        }
    }
}

impl AuditClient for LocalAudit {
    fn call(&mut self, route: AuditRoute, body: &Value) -> Result<Value, String> {
        match route {
            AuditRoute::Tasks => Ok(audit_env::episode::task_catalogue(
                self.config.max_findings_per_step,
            )),
            AuditRoute::Reset => {
                let req: AuditResetRequest = typed(body)?;
                reply(self.env.reset(req))
            }
            AuditRoute::Step => {
                let req: AuditStepRequest = typed(body)?;
                reply(self.env.step(req))
            }
            // In process the auditor is the evaluator: the full grade, held-out seeds included.
            AuditRoute::Grader => match self.env.last_grade() {
                Some(g) => {
                    let mut v = serde_json::to_value(g).map_err(|e| e.to_string())?;
                    v["status"] = json!("completed");
                    Ok(v)
                }
                None => Ok(json!({"status": "no_completed_episode"})),
            },
            other => self.campaign_call(other, body),
        }
    }

    fn new_session(&mut self) {
        self.env = AuditEnv::new(self.config.clone());
    }

    fn source(&self) -> String {
        "in-process".into()
    }
}

/// An audit server over HTTP: bounded requests (a deadline each, no redirects, replies read with
/// a size cap), a fresh `X-Session-Id` per task, closed when the next one starts or the client is
/// dropped, and the operator key (if given) sent so the evaluator can read sealed grades.
pub struct HttpAudit {
    base: String,
    http: reqwest::blocking::Client,
    session: Option<String>,
    operator_key: Option<String>,
    campaign_id: Option<String>,
}

impl HttpAudit {
    pub fn new(
        base: &str,
        timeout: Duration,
        operator_key: Option<String>,
    ) -> Result<Self, String> {
        let http = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            http,
            session: None,
            operator_key,
            campaign_id: None,
        })
    }

    fn close_session(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = self
                .http
                .delete(format!("{}/session", self.base))
                .header("x-session-id", s)
                .send();
        }
    }
}

impl Drop for HttpAudit {
    fn drop(&mut self) {
        self.close_session();
    }
}

impl AuditClient for HttpAudit {
    fn call(&mut self, route: AuditRoute, body: &Value) -> Result<Value, String> {
        let (method, path) = route.http();
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(s) = &self.session {
            req = req.header("x-session-id", s);
        }
        if let Some(k) = &self.operator_key {
            req = req.header("x-api-key", k);
        }
        if route == AuditRoute::CampaignState {
            req = req.query(&[("campaign_id", self.campaign_id.clone().unwrap_or_default())]);
        }
        if method == reqwest::Method::POST {
            req = req.json(body);
        }
        let resp = req.send().map_err(|e| {
            format!(
                "{path}: {}",
                if e.is_timeout() {
                    "timeout"
                } else {
                    "transport error"
                }
            )
        })?;
        let status = resp.status();
        let bytes = crate::chat::read_bounded(resp, MAX_ENV_REPLY_BYTES)
            .map_err(|e| format!("{path}: {e}"))?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|_| format!("{path}: HTTP {} reply is not JSON", status.as_u16()))?;
        if !status.is_success() {
            let detail = v.get("detail").and_then(Value::as_str).unwrap_or("");
            return Err(format!("{path}: HTTP {} {detail}", status.as_u16()));
        }
        if route == AuditRoute::CampaignStart {
            self.campaign_id = v
                .get("campaign_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        Ok(v)
    }

    fn new_session(&mut self) {
        self.close_session();
        self.session = Some(audit_env::util::random_id("audit-llm"));
    }

    fn source(&self) -> String {
        match reqwest::Url::parse(&self.base) {
            Ok(u) => format!(
                "{}://{}{}",
                u.scheme(),
                u.host_str().unwrap_or(""),
                u.port().map(|p| format!(":{p}")).unwrap_or_default()
            ),
            Err(_) => "server".into(),
        }
    }
}

/// The value at `pointer` of a reply, read into its type; `None` when it is absent or not that
/// type.
pub fn read<T: DeserializeOwned>(reply: &Value, pointer: &str) -> Option<T> {
    T::deserialize(reply.pointer(pointer)?).ok()
}

/// How many findings one step takes, as the task catalogue (`GET /tasks`) states it, else the
/// environment's default.
pub fn max_findings_per_step(catalogue: &Value) -> usize {
    read(catalogue, "/tasks/0/action_schema/max_findings_per_step")
        .unwrap_or(audit_env::model::limits::MAX_FINDINGS_PER_STEP_DEFAULT)
}

/// The error types a finding may name, as a task observation's metadata lists them (the task's,
/// plus any a shock added).
pub fn valid_error_types(observation: &Value) -> Vec<String> {
    read(observation, "/metadata/valid_error_types").unwrap_or_default()
}
