//! The Financial Audit environment's HTTP routes: parse, pick the session or campaign, call
//! `audit_env`, serialize. Sessions live in the one [`SessionManager`] shared with `/mcp`;
//! campaigns in a bounded map that expires idle entries. Security (origin, host, admin key, rate
//! limits, headers) is the shared [`crate::security`] guard around the whole application.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::Json;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use audit_env::adversarial::FraudDifficulty;
use audit_env::baseline::{self, BaselineConfig};
use audit_env::campaign::Campaign;
use audit_env::campaign_api::{self as api, to_json};
use audit_env::episode::{
    AuditEnv, AuditResetRequest, AuditStepEnvelope, AuditStepRequest, EnvConfig,
};
use audit_env::error::AuditError;
use audit_env::model::{limits, TaskId};
use audit_env::util;

use crate::error::{prefix, ApiError};
use crate::extract::{ApiPath, ApiQuery};
use crate::route_table::ApiRoutes;
use crate::sessions::{lock_env, SessionManager, DEFAULT_SESSION};

mod table;

pub const VERSION: &str = "2.0.0";

/// The audit environment's own settings (documented environment variables, parsed by the binary
/// through [`AuditConfig::from_lookup`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditConfig {
    /// `MAX_FINDINGS_PER_STEP` (default 50, ceiling 500).
    pub max_findings_per_step: usize,
    /// `CAMPAIGN_TOTAL_PERIODS` (default 5): used when a campaign start omits total_periods.
    pub campaign_total_periods: u32,
    /// `FRAUD_DIFFICULTY`: `auto` or 0–4.
    pub fraud_difficulty: FraudDifficulty,
    /// `MAX_BODY_BYTES` (default and ceiling 1 MiB), enforced on the streamed body.
    pub max_body_bytes: usize,
    /// Most live campaigns; idle ones expire with the session idle timeout.
    pub max_campaigns: usize,
    /// Live campaigns one client may hold (default a quarter of `max_campaigns`): past it the
    /// client's least recently used campaign is dropped for the new one.
    pub max_campaigns_per_client: usize,
    /// `LOG_LEVEL` (default INFO); reported in `/health`, applied by the server binary.
    pub log_level: String,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            max_findings_per_step: limits::MAX_FINDINGS_PER_STEP_DEFAULT,
            campaign_total_periods: 5,
            fraud_difficulty: FraudDifficulty::Auto,
            max_body_bytes: limits::MAX_BODY_BYTES,
            max_campaigns: limits::MAX_CAMPAIGNS,
            max_campaigns_per_client: (limits::MAX_CAMPAIGNS / 4).max(1),
            log_level: "INFO".into(),
        }
    }
}

impl AuditConfig {
    /// Parse the settings from a variable lookup (the binary passes the process environment).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, AuditError> {
        let mut c = AuditConfig::default();
        let num = |k: &str, v: String| {
            v.trim().parse::<u64>().map_err(|_| {
                AuditError::invalid(
                    k,
                    format!("{k} must be a non-negative integer, got '{}'", prefix(&v)),
                )
            })
        };
        if let Some(v) = get("MAX_FINDINGS_PER_STEP") {
            c.max_findings_per_step = (num("MAX_FINDINGS_PER_STEP", v)? as usize)
                .clamp(1, limits::MAX_FINDINGS_PER_STEP_CEILING);
        }
        if let Some(v) = get("CAMPAIGN_TOTAL_PERIODS") {
            c.campaign_total_periods =
                (num("CAMPAIGN_TOTAL_PERIODS", v)? as u32).clamp(1, limits::MAX_PERIODS);
        }
        if let Some(v) = get("FRAUD_DIFFICULTY") {
            c.fraud_difficulty = FraudDifficulty::parse(&v).ok_or_else(|| {
                AuditError::invalid(
                    "FRAUD_DIFFICULTY",
                    format!("FRAUD_DIFFICULTY must be auto or 0-4, got '{}'", prefix(&v)),
                )
            })?;
        }
        if let Some(v) = get("MAX_BODY_BYTES") {
            c.max_body_bytes =
                (num("MAX_BODY_BYTES", v)? as usize).clamp(1024, crate::body::MAX_BODY_BYTES);
        }
        if let Some(v) = get("LOG_LEVEL") {
            c.log_level = v;
        }
        Ok(c)
    }

    pub fn env_config(&self) -> EnvConfig {
        EnvConfig {
            max_findings_per_step: self.max_findings_per_step,
            fraud_difficulty: self.fraud_difficulty,
        }
    }
}

/// A leaderboard entry: one whole run (`POST /leaderboard/run`), the means of the server's
/// grades over its seeds.
#[derive(Serialize, Clone, JsonSchema)]
struct LeaderEntry {
    model: String,
    task_id: TaskId,
    /// Mean score over the run's seeds.
    score: f64,
    weighted_score: f64,
    risk_mitigation_pct: f64,
    /// The run the entry scores.
    run_id: String,
    /// The held-out seeds the server drew for the run.
    seeds: Vec<u64>,
    /// Unix seconds when the entry was recorded (the reference's `timestamp`).
    timestamp: f64,
}

#[derive(Default)]
struct Metrics {
    total_resets: u64,
    total_steps: u64,
    total_episodes_completed: u64,
    task_usage: BTreeMap<String, u64>,
    campaigns_started: u64,
    requests_total: u64,
    latency_ms_total: u64,
}

/// A campaign, when it was last used (idle campaigns expire) and the client that started it.
struct CampaignEntry {
    campaign: Campaign,
    last_used: Instant,
    owner: Option<crate::capacity::ClientKey>,
}

struct Inner {
    campaigns: BTreeMap<String, CampaignEntry>,
    leaderboard: Vec<LeaderEntry>,
    /// When the leaderboard runs of the last minute started (server-wide limit).
    run_starts: std::collections::VecDeque<Instant>,
    metrics: Metrics,
    started: Instant,
}

#[derive(Clone)]
pub(crate) struct AppState {
    config: Arc<AuditConfig>,
    service: Arc<super::service::AuditService>,
    inner: Arc<Mutex<Inner>>,
}

impl AppState {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a handler panicked mid-update; the data is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sessions(&self) -> &SessionManager<AuditEnv> {
        &self.service.sessions
    }

    fn campaign_ttl(&self) -> Duration {
        self.service.sessions.idle_timeout
    }
}

/// The operator routes of the audit environment: none. Every route is agent-facing as in the
/// reference (episodes, campaigns, the overseer, self-improvement, the baseline run and
/// leaderboard entries, whose scores come from the grader, not the client: the routes of the
/// environment's README, `inference.py --campaign` and the demo) and needs no credential from
/// any address. The one operator action is the adversary override `fraud_level` on
/// `POST /reset`, checked by its handler.
pub fn is_operator_route(_method: &Method, _path: &str) -> bool {
    false
}

/// Every audit HTTP route, with the audit service's sessions.
pub(crate) fn routes(config: AuditConfig, service: Arc<super::service::AuditService>) -> ApiRoutes {
    let state = AppState {
        config: Arc::new(config),
        service,
        inner: Arc::new(Mutex::new(Inner {
            campaigns: BTreeMap::new(),
            leaderboard: vec![],
            run_starts: Default::default(),
            metrics: Metrics::default(),
            started: Instant::now(),
        })),
    };
    table::table().map_router(|r| {
        r.layer(middleware::from_fn_with_state(state.clone(), count))
            .with_state(state)
    })
}

pub(crate) async fn fallback(req: Request) -> ApiError {
    AuditError::RouteNotFound(format!("{} {}", req.method(), prefix(req.uri().path()))).into()
}

pub(crate) async fn method_not_allowed() -> ApiError {
    AuditError::MethodNotAllowed.into()
}

/// Request count and latency for `/metrics`.
async fn count(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let t0 = Instant::now();
    st.lock().metrics.requests_total += 1;
    let resp = next.run(req).await;
    st.lock().metrics.latency_ms_total += t0.elapsed().as_millis() as u64;
    resp
}

// ------------------------------------------------------------------------------------------
// JSON extraction: content type, the shared bounded body reader, field-naming errors.
// ------------------------------------------------------------------------------------------

pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, st: &AppState) -> Result<Self, Self::Rejection> {
        let limit = st.config.max_body_bytes;
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or("");
            if !ct.to_ascii_lowercase().contains("application/json") {
                return Err(AuditError::UnsupportedMediaType.into());
            }
        }
        let bytes = crate::body::read_body(req, limit)
            .await
            .map_err(|e| match e {
                ApiError::PayloadTooLarge { limit_bytes } => {
                    ApiError::Audit(AuditError::BodyTooLarge { limit_bytes })
                }
                other => other,
            })?;
        parse_typed(&bytes).map(JsonBody)
    }
}

/// Parse a body into `T`, naming the offending field; an empty body is `{}`.
pub fn parse_typed<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let text: &[u8] = if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        b"{}"
    } else {
        bytes
    };
    let de = &mut serde_json::Deserializer::from_slice(text);
    serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if path == "." || path.is_empty() {
            missing_field(&inner.to_string()).unwrap_or_else(|| "body".into())
        } else {
            prefix(&path)
        };
        AuditError::invalid(field, format!("{inner}")).into()
    })
}

fn missing_field(msg: &str) -> Option<String> {
    let i = msg.find("missing field `")?;
    let rest = &msg[i + 15..];
    Some(prefix(&rest[..rest.find('`')?]))
}

// ------------------------------------------------------------------------------------------
// Sessions: the shared session manager.
// ------------------------------------------------------------------------------------------

fn session_key(
    headers: &HeaderMap,
    body: Option<&str>,
    query: Option<&str>,
) -> Result<String, ApiError> {
    let raw = headers
        .get("x-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(body.map(str::to_string))
        .or(query.map(str::to_string));
    match raw {
        None => Ok(DEFAULT_SESSION.into()),
        Some(s) => {
            let s = s.trim().to_string();
            crate::sessions::validate_id(&s)
                .map_err(|e| AuditError::invalid("session_id", e.to_string()))?;
            Ok(s)
        }
    }
}

/// Who is creating state: the client's key for its quotas.
type Client = Option<axum::Extension<crate::security::ClientAddr>>;

/// The session's environment; an unknown named session is created (for `owner`) only when
/// `create`.
fn session(
    st: &AppState,
    key: &str,
    create: Option<&Client>,
) -> Result<Arc<Mutex<AuditEnv>>, ApiError> {
    let sessions = st.sessions();
    if create.is_some() || key == DEFAULT_SESSION {
        let owner = create.and_then(|c| crate::security::client_key(c.as_ref()));
        return sessions
            .get_or_create(key, owner, || AuditEnv::new(st.config.env_config()))
            .map_err(|e| match e {
                ApiError::TooManySessions(_) => {
                    AuditError::Capacity(format!("at most {} sessions", sessions.max_sessions))
                        .into()
                }
                other => other,
            });
    }
    sessions.get(key).ok_or_else(|| {
        AuditError::NotFound {
            kind: "session_id",
            id: prefix(key),
        }
        .into()
    })
}

#[derive(Deserialize, Default)]
struct SessionQuery {
    session_id: Option<String>,
    campaign_id: Option<String>,
    task_id: Option<String>,
    limit: Option<usize>,
}

// ------------------------------------------------------------------------------------------
// Handlers: single-task episodes.
// ------------------------------------------------------------------------------------------

async fn root() -> Json<Value> {
    Json(json!({
        "name": "financial_audit_env",
        "version": VERSION,
        "workbench": "/ui/", "docs": "/docs", "openapi": "/openapi.json",
        "description": "Financial audit RL environment: four seeded audit tasks, multi-period campaigns with regulatory shocks, an overseer and self-improvement.",
        "tasks": TaskId::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        "endpoints": {
            "health": "GET /health", "tasks": "GET /tasks", "reset": "POST /reset", "step": "POST /step",
            "state": "GET /state", "session": "POST /session", "grader": "GET /grader",
            "campaign_start": "POST /campaign/start", "campaign_state": "GET /campaign/state/{campaign_id}",
            "campaign_task_start": "POST /campaign/task/start", "campaign_task_submit": "POST /campaign/task/submit",
            "campaign_action": "POST /campaign/action", "campaign_advance": "POST /campaign/period/advance",
            "overseer_review": "POST /overseer/review", "overseer_report": "GET /overseer/report",
            "self_improve": "POST /self-improve", "self_improve_history": "GET /self-improve/history",
            "leaderboard": "GET|POST /leaderboard", "metrics": "GET /metrics",
            "adaptive_difficulty": "GET /adaptive-difficulty", "adversarial_state": "GET /adversarial/state",
            "baseline": "POST /baseline"
        },
        "quickstart": "POST /reset {\"task_id\": 1, \"seed\": 42}\nPOST /step {\"findings\": [{\"document_id\": \"EXP-001\", \"error_type\": \"weekend_expense\"}], \"submit_final\": true}\nPOST /campaign/start {\"seed\": 42}\nGET /campaign/state/{id}"
    }))
}

async fn health(State(st): State<AppState>) -> Json<Value> {
    let g = st.lock();
    Json(
        json!({"status": "healthy", "environment": "financial_audit_env", "version": VERSION, "tasks_available": 4, "active_sessions": st.sessions().len(), "active_campaigns": g.campaigns.len(), "log_level": st.config.log_level}),
    )
}

async fn tasks(State(st): State<AppState>) -> Json<Value> {
    Json(audit_env::episode::task_catalogue(
        st.config.max_findings_per_step,
    ))
}

async fn reset(
    State(st): State<AppState>,
    access: Option<axum::Extension<crate::security::OperatorAccess>>,
    client: Client,
    headers: HeaderMap,
    JsonBody(req): JsonBody<AuditResetRequest>,
) -> Result<Json<Value>, ApiError> {
    // `fraud_level` overrides the adaptive adversary: an operator override.
    let operator = access.is_some_and(|a| a.0 .0);
    if req.fraud_level.is_some() && !operator {
        return Err(AuditError::Forbidden.into());
    }
    let key = session_key(&headers, req.session_id.as_deref(), None)?;
    let env = session(&st, &key, Some(&client))?;
    let mut env_resp = lock_env(&env).reset(req)?;
    env_resp.session_id = Some(key);
    let task = env_resp.observation.task_id;
    let mut g = st.lock();
    g.metrics.total_resets += 1;
    *g.metrics
        .task_usage
        .entry(task.as_str().into())
        .or_default() += 1;
    Ok(Json(
        serde_json::to_value(env_resp).map_err(|_| AuditError::Internal)?,
    ))
}

async fn step(
    State(st): State<AppState>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<AuditStepRequest>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&headers, req.session_id.as_deref(), None)?;
    let env = session(&st, &key, None)?;
    let mut out = lock_env(&env).step(req)?;
    out.session_id = Some(key);
    let mut g = st.lock();
    g.metrics.total_steps += 1;
    if out.done {
        g.metrics.total_episodes_completed += 1;
    }
    Ok(Json(
        serde_json::to_value(out).map_err(|_| AuditError::Internal)?,
    ))
}

async fn state_route(
    State(st): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    let env = session(&st, &key, None)?;
    let state = lock_env(&env).state();
    Ok(Json(
        serde_json::to_value(state).map_err(|_| AuditError::Internal)?,
    ))
}

async fn new_session(State(st): State<AppState>, client: Client) -> Result<Json<Value>, ApiError> {
    let id = SessionManager::<AuditEnv>::new_id("sess");
    session(&st, &id, Some(&client))?;
    let ttl = st.sessions().idle_timeout.as_secs();
    Ok(Json(
        json!({"session_id": id, "ttl_seconds": ttl, "message": "Session created. Send it as the X-Session-Id header (or session_id in the body) on /reset and /step; DELETE /session closes it."}),
    ))
}

/// `DELETE /session`: close the named session now.
async fn close_session(
    State(st): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    if !st.sessions().remove(&key) {
        return Err(AuditError::NotFound {
            kind: "session_id",
            id: prefix(&key),
        }
        .into());
    }
    Ok(Json(json!({"session_id": key, "status": "closed"})))
}

/// `GET /grader`: the session's last grade. A held-out episode's grade is sealed: only an
/// operator (the evaluator) reads it; anyone else gets `status: sealed`.
async fn grader(
    State(st): State<AppState>,
    access: Option<axum::Extension<crate::security::OperatorAccess>>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    let env = session(&st, &key, None)?;
    let env = lock_env(&env);
    let Some(ep) = env.episode.as_ref() else {
        return Ok(Json(
            json!({"status": "no_completed_episode", "message": "No episode completed. Call /reset then /step with submit_final=true."}),
        ));
    };
    let operator = access.is_some_and(|a| a.0 .0);
    if ep.last_grade.is_some() && ep.agent_grade().is_none() && !operator {
        return Ok(Json(
            json!({"status": "sealed", "task_id": ep.task(), "episode_id": ep.episode_id, "message": "The episode was on a held-out seed: its grade is sealed and read with the operator credential."}),
        ));
    }
    match &ep.last_grade {
        None => Ok(Json(
            json!({"status": "no_completed_episode", "message": "No episode completed. Call /reset then /step with submit_final=true."}),
        )),
        Some(gr) => {
            let mut v = serde_json::to_value(gr).map_err(|_| AuditError::Internal)?;
            if let Value::Object(m) = &mut v {
                m.insert("status".into(), json!("completed"));
                m.insert("task_id".into(), json!(ep.task()));
                m.insert("episode_id".into(), json!(ep.episode_id));
            }
            Ok(Json(v))
        }
    }
}

async fn adaptive(
    State(st): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    let env = session(&st, &key, None)?;
    let value = serde_json::to_value(lock_env(&env).adaptive_difficulty());
    Ok(Json(value.map_err(|_| AuditError::Internal)?))
}

async fn adversarial_state(
    State(st): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    let env = session(&st, &key, None)?;
    let value = serde_json::to_value(lock_env(&env).adversarial.arms_race());
    Ok(Json(value.map_err(|_| AuditError::Internal)?))
}

async fn metrics(State(st): State<AppState>) -> Json<Value> {
    let g = st.lock();
    let m = &g.metrics;
    Json(json!({
        "uptime_seconds": g.started.elapsed().as_secs(),
        "total_resets": m.total_resets, "total_steps": m.total_steps,
        "total_episodes_completed": m.total_episodes_completed, "task_usage": m.task_usage,
        "active_sessions": st.sessions().len(), "active_campaigns": g.campaigns.len(),
        "campaigns_started": m.campaigns_started, "requests_total": m.requests_total,
        "mean_latency_ms": if m.requests_total == 0 { 0.0 } else { util::round_n(m.latency_ms_total as f64 / m.requests_total as f64, 3) }
    }))
}

// ------------------------------------------------------------------------------------------
// Campaigns.
// ------------------------------------------------------------------------------------------

// The bodies and replies are declared once in `audit_env::campaign_api` (the in-process campaign
// serves the same); here the campaign id is required.
pub(crate) type CampaignStartReq = api::StartBody;
pub(crate) type CampaignIdReq = api::IdBody<String>;
pub(crate) type RoleReq = api::RoleBody<String>;
pub(crate) type SubmitReq = api::SubmitBody<String>;
pub(crate) type ReviewReq = api::ReviewBody<String>;
pub(crate) type ImproveReq = api::ImproveBody<String>;

/// A live campaign; an idle one past the timeout is dropped and reported unknown.
fn campaign_mut<'a>(
    g: &'a mut Inner,
    ttl: Duration,
    id: &str,
) -> Result<&'a mut Campaign, AuditError> {
    let unknown = || AuditError::NotFound {
        kind: "campaign_id",
        id: prefix(id),
    };
    if g.campaigns
        .get(id)
        .is_some_and(|e| e.last_used.elapsed() >= ttl)
    {
        g.campaigns.remove(id);
    }
    let e = g.campaigns.get_mut(id).ok_or_else(unknown)?;
    e.last_used = Instant::now();
    Ok(&mut e.campaign)
}

/// Make room for one more campaign of `owner`: drop expired ones; a client at its quota gives
/// up its own least recently used campaign (finished ones first); a full map gives up the least
/// recently used finished campaign, else the least recently used one of the client holding the
/// most ([`crate::capacity::make_room`]). Refused only when every client holds no more than this
/// one.
fn campaign_room(
    g: &mut Inner,
    ttl: Duration,
    config: &AuditConfig,
    owner: Option<crate::capacity::ClientKey>,
) -> Result<(), AuditError> {
    use crate::capacity::{make_room, Held, Room};
    g.campaigns.retain(|_, e| e.last_used.elapsed() < ttl);
    let held = g.campaigns.iter().map(|(id, e)| Held {
        id,
        owner: e.owner,
        last_used: e.last_used,
        finished: e.campaign.finished,
    });
    match make_room(
        held,
        owner,
        config.max_campaigns_per_client,
        config.max_campaigns,
    ) {
        Room::Free => Ok(()),
        Room::Evict(id) => {
            g.campaigns.remove(&id);
            Ok(())
        }
        Room::Full => Err(AuditError::Capacity(format!(
            "at most {} live campaigns; idle ones expire after {} s",
            config.max_campaigns,
            ttl.as_secs()
        ))),
    }
}

async fn campaign_start(
    State(st): State<AppState>,
    access: Option<axum::Extension<crate::security::OperatorAccess>>,
    client: Client,
    JsonBody(req): JsonBody<CampaignStartReq>,
) -> Result<Json<Value>, ApiError> {
    let seed = req.seed.unwrap_or(42);
    let periods = req
        .total_periods
        .unwrap_or(st.config.campaign_total_periods);
    // The body's own errors first (as in process), then the held-out rule: no per-submission
    // grades on a held-out seed without the operator credential, then the client's room.
    let c = Campaign::new(
        util::random_id("cmp"),
        seed,
        periods,
        st.config.max_findings_per_step,
    )?;
    if !access.is_some_and(|a| a.0 .0) {
        api::refuse_held_out(seed, periods)?;
    }
    let mut g = st.lock();
    let owner = crate::security::client_key(client.as_ref());
    campaign_room(&mut g, st.campaign_ttl(), &st.config, owner)?;
    let reply = c.start_reply()?;
    g.campaigns.insert(
        c.id.clone(),
        CampaignEntry {
            campaign: c,
            last_used: Instant::now(),
            owner,
        },
    );
    g.metrics.campaigns_started += 1;
    Ok(Json(reply))
}

/// The `campaign_id` query parameter (required).
fn query_id(q: SessionQuery) -> Result<String, AuditError> {
    q.campaign_id.ok_or_else(|| {
        AuditError::invalid("campaign_id", "query parameter campaign_id is required")
    })
}

/// Runs `f` on the live campaign `id` (under the lock).
fn with_campaign(
    st: &AppState,
    id: &str,
    f: impl FnOnce(&mut Campaign) -> Result<Value, AuditError>,
) -> Result<Json<Value>, ApiError> {
    let mut g = st.lock();
    Ok(Json(f(campaign_mut(&mut g, st.campaign_ttl(), id)?)?))
}

async fn campaign_state_q(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    with_campaign(&st, &query_id(q)?, |c| c.state_reply())
}

async fn campaign_state_p(
    State(st): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    with_campaign(&st, &id, |c| c.state_reply())
}

async fn campaign_task_start(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<RoleReq>,
) -> Result<Json<Value>, ApiError> {
    with_campaign(&st, &req.campaign_id, |c| c.task_start_reply(req.role))
}

fn do_submit(st: &AppState, req: SubmitReq, status: &str) -> Result<Json<Value>, ApiError> {
    let (id, role, action) = req.into_parts();
    with_campaign(st, &id, |c| c.submit_reply(role, action, status))
}

async fn campaign_task_submit(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<SubmitReq>,
) -> Result<Json<Value>, ApiError> {
    do_submit(&st, req, "submitted")
}

async fn campaign_action(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<SubmitReq>,
) -> Result<Json<Value>, ApiError> {
    do_submit(&st, req, "accepted")
}

async fn campaign_advance(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<CampaignIdReq>,
) -> Result<Json<Value>, ApiError> {
    with_campaign(&st, &req.campaign_id, |c| c.advance_reply())
}

async fn overseer_review(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<ReviewReq>,
) -> Result<Json<Value>, ApiError> {
    let (id, action) = req.into_parts();
    with_campaign(&st, &id, |c| c.review_reply(action))
}

async fn overseer_report(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    with_campaign(&st, &query_id(q)?, |c| c.report_reply())
}

async fn self_improve(
    State(st): State<AppState>,
    JsonBody(req): JsonBody<ImproveReq>,
) -> Result<Json<Value>, ApiError> {
    let (id, train, held) = req.into_parts();
    with_campaign(&st, &id, |c| c.self_improve_reply(&train, &held))
}

/// An unknown or expired campaign has an empty history (not a 404), as the reference serves it.
async fn self_improve_history(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    let id = query_id(q)?;
    with_campaign(&st, &id, |c| c.history_reply())
        .or_else(|_| Ok(Json(json!({"campaign_id": id, "history": []}))))
}

// ------------------------------------------------------------------------------------------
// Leaderboard (scores come from the server's own grader) and baseline.
// ------------------------------------------------------------------------------------------

#[derive(Deserialize, Default, JsonSchema)]
struct LeaderReq {
    /// Model name for the entry (required here or as the `model` query parameter).
    #[serde(default)]
    model: Option<String>,
    /// The session whose completed run is submitted (else the header or query).
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Deserialize, Default)]
struct LeaderQuery {
    model: Option<String>,
    session_id: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
struct RunReq {
    /// The task the run evaluates (`expense_audit`… or 1–4).
    task_id: TaskId,
    /// The session that plays the run (else the header; default: the default session).
    #[serde(default)]
    session_id: Option<String>,
}

/// Server-wide leaderboard runs started per minute.
const RUNS_PER_MIN: usize = 6;

/// `POST /leaderboard/run`: draw a run's held-out seeds for this session. A new run replaces an
/// unfinished one of the same session.
async fn leaderboard_run(
    State(st): State<AppState>,
    headers: HeaderMap,
    client: Client,
    JsonBody(req): JsonBody<RunReq>,
) -> Result<Json<Value>, ApiError> {
    let key = session_key(&headers, req.session_id.as_deref(), None)?;
    {
        let mut g = st.lock();
        let now = Instant::now();
        while g
            .run_starts
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60))
        {
            g.run_starts.pop_front();
        }
        if g.run_starts.len() >= RUNS_PER_MIN {
            return Err(AuditError::RateLimited {
                per_min: RUNS_PER_MIN as u32,
            }
            .into());
        }
        g.run_starts.push_back(now);
    }
    let env = session(&st, &key, Some(&client))?;
    let run = audit_env::leaderboard::EvalRun::draw(req.task_id);
    let reply = json!({
        "status": "started", "run_id": run.run_id, "task_id": run.task_id,
        "seeds": run.seeds, "session_id": key,
        "message": "Play each seed once in this session (POST /reset {task_id, seed}, then /step with submit_final=true; episodes are sealed), then POST /leaderboard {model}. The first completed episode of each seed counts."
    });
    lock_env(&env).run = Some(run);
    Ok(Json(reply))
}

/// `POST /leaderboard`: submit the session's whole run. Nothing else is scored: no single
/// episode, no seed the client chose, and a run is scored once.
async fn leaderboard_post(
    State(st): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<LeaderQuery>,
    JsonBody(req): JsonBody<LeaderReq>,
) -> Result<Json<Value>, ApiError> {
    let model = req
        .model
        .or(q.model)
        .map(|m| {
            m.trim()
                .chars()
                .take(limits::MAX_ID_CHARS)
                .collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .ok_or_else(|| AuditError::invalid("model", "model is required"))?;
    let key = session_key(&headers, req.session_id.as_deref(), q.session_id.as_deref())?;
    let env = session(&st, &key, None)?;
    let scored = {
        let mut env = lock_env(&env);
        let run = env.run.as_ref().ok_or_else(|| AuditError::Conflict("the leaderboard takes whole runs only: POST /leaderboard/run {task_id} draws the run's held-out seeds for this session; play each once, then submit".into()))?;
        let scored = run.score()?;
        env.run = None;
        scored
    };
    let entry = LeaderEntry {
        model: model.clone(),
        task_id: scored.task_id,
        score: scored.score,
        weighted_score: scored.weighted_score,
        risk_mitigation_pct: scored.risk_mitigation_pct,
        run_id: scored.run_id,
        seeds: scored.seeds,
        timestamp: audit_env::util::unix_seconds(),
    };
    let mut g = st.lock();
    // Best score per (model, task).
    if let Some(pos) = g
        .leaderboard
        .iter()
        .position(|e| e.model == entry.model && e.task_id == entry.task_id)
    {
        if g.leaderboard[pos].score < entry.score {
            g.leaderboard[pos] = entry.clone();
        }
    } else {
        g.leaderboard.push(entry.clone());
    }
    g.leaderboard.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.model.cmp(&b.model))
    });
    g.leaderboard.truncate(limits::MAX_LEADERBOARD_ENTRIES);
    let rank = g
        .leaderboard
        .iter()
        .position(|e| e.model == model && e.task_id == entry.task_id)
        .map(|p| p as i64 + 1)
        .unwrap_or(-1);
    Ok(Json(
        json!({"status": "submitted", "rank": rank, "entry": to_json(&entry)?, "note": "the mean of the server's grades of the run's first attempts on its drawn held-out seeds; the run is now closed"}),
    ))
}

async fn leaderboard_get(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<SessionQuery>,
) -> Result<Json<Value>, ApiError> {
    let task = match q.task_id.as_deref() {
        Some(t) => Some(TaskId::parse(t).ok_or_else(|| AuditError::UnknownTask(prefix(t)))?),
        None => None,
    };
    let limit = q.limit.unwrap_or(20).min(limits::MAX_LEADERBOARD_ENTRIES);
    let g = st.lock();
    let rows: Vec<&LeaderEntry> = g
        .leaderboard
        .iter()
        .filter(|e| task.is_none_or(|t| e.task_id == t))
        .collect();
    Ok(Json(
        json!({"leaderboard": to_json(&rows.iter().take(limit).collect::<Vec<_>>())?, "total_entries": rows.len()}),
    ))
}

#[derive(Deserialize, Default, JsonSchema)]
struct BaselineReq {
    /// Seeds to run the baseline on (default `[42]`).
    #[serde(default)]
    seeds: Option<Vec<u64>>,
}

async fn baseline_route(JsonBody(req): JsonBody<BaselineReq>) -> Result<Json<Value>, ApiError> {
    let seeds = req.seeds.unwrap_or_else(|| vec![42]);
    if seeds.is_empty() || seeds.len() > limits::MAX_SELF_IMPROVE_SEEDS {
        return Err(AuditError::invalid(
            "seeds",
            format!("between 1 and {} seeds", limits::MAX_SELF_IMPROVE_SEEDS),
        )
        .into());
    }
    let report =
        tokio::task::spawn_blocking(move || baseline::run(&seeds, &BaselineConfig::default()))
            .await
            .map_err(|_| AuditError::Internal)?;
    Ok(Json(
        json!({"status": "completed", "model": report.model, "scores": to_json(&report)?}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_lookup() {
        let env: BTreeMap<&str, &str> = [
            ("MAX_FINDINGS_PER_STEP", "200"),
            ("FRAUD_DIFFICULTY", "2"),
            ("CAMPAIGN_TOTAL_PERIODS", "3"),
            ("MAX_BODY_BYTES", "99999999"),
        ]
        .into();
        let c = AuditConfig::from_lookup(|k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(
            (
                c.max_findings_per_step,
                c.campaign_total_periods,
                c.max_body_bytes
            ),
            (200, 3, crate::body::MAX_BODY_BYTES)
        );
        assert_eq!(c.fraud_difficulty, FraudDifficulty::Fixed(3));
        let bad = AuditConfig::from_lookup(|k| {
            (k == "MAX_FINDINGS_PER_STEP").then(|| "x".repeat(10_000))
        })
        .unwrap_err();
        assert!(
            bad.to_string().len() < 200,
            "the error quotes a prefix only"
        );
    }

    #[test]
    fn operator_routes() {
        // The README's agent loop is open: campaigns, the overseer, self-improvement.
        for (m, p) in [
            (Method::POST, "/campaign/start"),
            (Method::GET, "/campaign/state/cmp-1"),
            (Method::POST, "/overseer/review"),
            (Method::POST, "/self-improve"),
        ] {
            assert!(!is_operator_route(&m, p), "{m} {p}");
        }
        assert!(!is_operator_route(&Method::POST, "/baseline"));
        assert!(!is_operator_route(&Method::POST, "/leaderboard"));
        assert!(!is_operator_route(&Method::GET, "/leaderboard"));
        assert!(!is_operator_route(&Method::POST, "/reset"));
    }
}
