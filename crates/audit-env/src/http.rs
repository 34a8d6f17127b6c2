//! Thin axum layer: routing, sessions, JSON extraction with bounded bodies, rate limits,
//! the admin key and security headers. All environment logic lives in the library.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequest, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::{BodyExt, Limited};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::adversarial::FraudDifficulty;
use crate::baseline::{self, BaselineConfig};
use crate::campaign::{self, Campaign, OverseerAction, Role};
use crate::episode::{AuditAction, AuditEnv, AuditResetRequest, AuditStepRequest, EnvConfig};
use crate::error::AuditError;
use crate::model::{limits, Finding, TaskId, HELD_OUT_SEEDS, TRAIN_SEEDS};
use crate::util;

pub const VERSION: &str = "2.0.0";
pub const DEFAULT_SESSION: &str = "default";
pub const LOOPBACK_RATE_MULTIPLIER: u32 = 50;
const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Server configuration (documented environment variables).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditConfig {
    /// `RATE_LIMIT_PER_MIN` (default 120): per-IP limit on write routes; ×50 on loopback.
    pub rate_limit_per_min: u32,
    /// `ADMIN_API_KEY`: when set, admin routes need `X-API-Key`.
    pub admin_api_key: Option<String>,
    /// `MAX_FINDINGS_PER_STEP` (default 200 as the README says, ceiling 500).
    pub max_findings_per_step: usize,
    /// `CAMPAIGN_TOTAL_PERIODS` (default 5): used when a campaign start omits total_periods.
    pub campaign_total_periods: u32,
    /// `FRAUD_DIFFICULTY`: `auto` or 0–4.
    pub fraud_difficulty: FraudDifficulty,
    /// `TRUST_PROXY_HEADERS`: use X-Forwarded-For / X-Real-IP as the client address.
    pub trust_proxy_headers: bool,
    /// `CORS_ORIGINS`: comma-separated allowed origins (default `*`); GET and POST, any header,
    /// no credentials.
    pub cors_origins: Vec<String>,
    /// `MAX_BODY_BYTES` (default 1 MiB), enforced on the streamed body.
    pub max_body_bytes: usize,
    pub max_sessions: usize,
    pub max_campaigns: usize,
    /// `LOG_LEVEL` (default INFO); reported in `/health`, applied by the server binary.
    pub log_level: String,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            rate_limit_per_min: 120,
            admin_api_key: None,
            max_findings_per_step: limits::MAX_FINDINGS_PER_STEP_DEFAULT,
            campaign_total_periods: 5,
            fraud_difficulty: FraudDifficulty::Auto,
            trust_proxy_headers: false,
            cors_origins: vec!["*".into()],
            max_body_bytes: limits::MAX_BODY_BYTES,
            max_sessions: limits::MAX_SESSIONS,
            max_campaigns: limits::MAX_CAMPAIGNS,
            log_level: "INFO".into(),
        }
    }
}

impl AuditConfig {
    pub fn from_env() -> Result<Self, AuditError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, AuditError> {
        let mut c = AuditConfig::default();
        let num = |k: &str, v: String| v.trim().parse::<u64>().map_err(|_| AuditError::invalid(k, format!("{k} must be a non-negative integer, got '{v}'")));
        if let Some(v) = get("RATE_LIMIT_PER_MIN") {
            c.rate_limit_per_min = num("RATE_LIMIT_PER_MIN", v)?.clamp(1, 1_000_000) as u32;
        }
        if let Some(v) = get("ADMIN_API_KEY") {
            c.admin_api_key = Some(v).filter(|k| !k.is_empty());
        }
        if let Some(v) = get("MAX_FINDINGS_PER_STEP") {
            c.max_findings_per_step = (num("MAX_FINDINGS_PER_STEP", v)? as usize).clamp(1, limits::MAX_FINDINGS_PER_STEP_CEILING);
        }
        if let Some(v) = get("CAMPAIGN_TOTAL_PERIODS") {
            c.campaign_total_periods = (num("CAMPAIGN_TOTAL_PERIODS", v)? as u32).clamp(1, limits::MAX_PERIODS);
        }
        if let Some(v) = get("FRAUD_DIFFICULTY") {
            c.fraud_difficulty = FraudDifficulty::parse(&v).ok_or_else(|| AuditError::invalid("FRAUD_DIFFICULTY", format!("FRAUD_DIFFICULTY must be auto or 0-4, got '{v}'")))?;
        }
        if let Some(v) = get("CORS_ORIGINS") {
            let origins: Vec<String> = v.split(',').map(|o| o.trim().to_owned()).filter(|o| !o.is_empty()).collect();
            for o in &origins {
                if o != "*" && axum::http::HeaderValue::from_str(o).is_err() {
                    return Err(AuditError::invalid("CORS_ORIGINS", format!("invalid origin '{o}'")));
                }
            }
            c.cors_origins = if origins.is_empty() { vec!["*".into()] } else { origins };
        }
        if let Some(v) = get("TRUST_PROXY_HEADERS") {
            c.trust_proxy_headers = matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes");
        }
        if let Some(v) = get("MAX_BODY_BYTES") {
            c.max_body_bytes = (num("MAX_BODY_BYTES", v)? as usize).clamp(1024, 16 * limits::MAX_BODY_BYTES);
        }
        if let Some(v) = get("LOG_LEVEL") {
            c.log_level = v;
        }
        Ok(c)
    }

    fn env_config(&self) -> EnvConfig {
        EnvConfig { max_findings_per_step: self.max_findings_per_step, fraud_difficulty: self.fraud_difficulty }
    }
}

struct Session {
    env: AuditEnv,
    last_access: Instant,
}

#[derive(Serialize, Clone)]
struct LeaderEntry {
    model: String,
    task_id: TaskId,
    score: f64,
    weighted_score: f64,
    risk_mitigation_pct: f64,
    episode_id: String,
    seed: u64,
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

struct Inner {
    sessions: BTreeMap<String, Session>,
    campaigns: BTreeMap<String, Campaign>,
    campaign_counter: u64,
    session_counter: u64,
    leaderboard: Vec<LeaderEntry>,
    metrics: Metrics,
    limiter: BTreeMap<String, VecDeque<Instant>>,
    started: Instant,
}

#[derive(Clone)]
struct AppState {
    config: Arc<AuditConfig>,
    inner: Arc<Mutex<Inner>>,
}

impl AppState {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a handler panicked mid-update; the data is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Build the router with every audit route.
/// CORS per `CORS_ORIGINS`: `*` allows any origin; otherwise the listed origins.
fn cors_layer(origins: &[String]) -> tower_http::cors::CorsLayer {
    use tower_http::cors::{AllowOrigin, Any, CorsLayer};
    let layer = CorsLayer::new().allow_methods([axum::http::Method::GET, axum::http::Method::POST]).allow_headers(Any);
    if origins.iter().any(|o| o == "*") {
        layer.allow_origin(Any)
    } else {
        layer.allow_origin(AllowOrigin::list(origins.iter().filter_map(|o| axum::http::HeaderValue::from_str(o).ok())))
    }
}

pub fn router(config: AuditConfig) -> Router {
    let cors = cors_layer(&config.cors_origins);
    let mut sessions = BTreeMap::new();
    sessions.insert(DEFAULT_SESSION.to_string(), Session { env: AuditEnv::new(config.env_config()), last_access: Instant::now() });
    let state = AppState {
        config: Arc::new(config),
        inner: Arc::new(Mutex::new(Inner {
            sessions,
            campaigns: BTreeMap::new(),
            campaign_counter: 0,
            session_counter: 0,
            leaderboard: vec![],
            metrics: Metrics::default(),
            limiter: BTreeMap::new(),
            started: Instant::now(),
        })),
    };
    Router::new()
        .route("/", get(root))
        .route("/health", get(health))
        .route("/tasks", get(tasks))
        .route("/reset", post(reset))
        .route("/step", post(step))
        .route("/state", get(state_route))
        .route("/session", post(new_session))
        .route("/grader", get(grader))
        .route("/campaign/start", post(campaign_start))
        .route("/campaign/state", get(campaign_state_q))
        .route("/campaign/state/{campaign_id}", get(campaign_state_p))
        .route("/campaign/task/start", post(campaign_task_start))
        .route("/campaign/task/submit", post(campaign_task_submit))
        .route("/campaign/action", post(campaign_action))
        .route("/campaign/period/advance", post(campaign_advance))
        .route("/campaign/period", post(campaign_advance))
        .route("/overseer/review", post(overseer_review))
        .route("/overseer/report", get(overseer_report))
        .route("/self-improve", post(self_improve))
        .route("/self-improve/history", get(self_improve_history))
        .route("/leaderboard", get(leaderboard_get).post(leaderboard_post))
        .route("/metrics", get(metrics))
        .route("/adaptive-difficulty", get(adaptive))
        .route("/adversarial/state", get(adversarial_state))
        .route("/baseline", post(baseline_route))
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        // CORS sits inside the security guard, so preflights count toward the rate limit.
        .layer(cors)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

async fn fallback(req: Request) -> AuditError {
    AuditError::RouteNotFound(format!("{} {}", req.method(), req.uri().path()))
}

async fn method_not_allowed() -> AuditError {
    AuditError::MethodNotAllowed
}

// ------------------------------------------------------------------------------------------
// Middleware: request id, rate limit, admin key, security headers, latency metrics.
// ------------------------------------------------------------------------------------------

const ADMIN_ROUTES: [&str; 9] = [
    "/baseline", "/campaign/start", "/campaign/task/start", "/campaign/task/submit", "/campaign/action",
    "/campaign/period", "/campaign/period/advance", "/overseer/review", "/self-improve",
];
const LIMITED_PREFIXES: [&str; 7] = ["/reset", "/step", "/campaign", "/overseer", "/self-improve", "/baseline", "/leaderboard"];

fn client_ip(req: &Request, trust_proxy: bool) -> Option<IpAddr> {
    if trust_proxy {
        let h = req.headers();
        let fwd = h.get("x-forwarded-for").and_then(|v| v.to_str().ok()).and_then(|s| s.split(',').next()).and_then(|s| s.trim().parse().ok());
        let real = h.get("x-real-ip").and_then(|v| v.to_str().ok()).and_then(|s| s.trim().parse().ok());
        if let Some(ip) = fwd.or(real) {
            return Some(ip);
        }
    }
    req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip())
}

fn add_security_headers(h: &mut HeaderMap, request_id: &str) {
    let pairs = [
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("x-xss-protection", "1; mode=block"),
        ("strict-transport-security", "max-age=31536000; includeSubDomains"),
        ("cache-control", "no-store"),
        ("referrer-policy", "strict-origin-when-cross-origin"),
        ("x-robots-tag", "noindex, nofollow"),
    ];
    for (k, v) in pairs {
        h.insert(k, HeaderValue::from_static(v));
    }
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert("x-request-id", v);
    }
}

async fn guard(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let t0 = Instant::now();
    let path = req.uri().path().to_string();
    let request_id = {
        let mut g = st.lock();
        g.metrics.requests_total += 1;
        format!("{:08x}", g.metrics.requests_total.wrapping_mul(2_654_435_761) & 0xffff_ffff)
    };
    let ip = client_ip(&req, st.config.trust_proxy_headers);
    let rejected: Option<AuditError> = (|| {
        if LIMITED_PREFIXES.iter().any(|p| path.starts_with(p)) && req.method() != Method::OPTIONS {
            let loopback = ip.is_some_and(|i| i.is_loopback());
            let limit = if loopback { st.config.rate_limit_per_min.saturating_mul(LOOPBACK_RATE_MULTIPLIER) } else { st.config.rate_limit_per_min };
            let key = ip.map(|i| i.to_string()).unwrap_or_else(|| "unknown".into());
            let mut g = st.lock();
            let now = Instant::now();
            if g.limiter.len() > 10_000 {
                g.limiter.retain(|_, q| q.back().is_some_and(|t| now.duration_since(*t) < RATE_WINDOW));
            }
            let q = g.limiter.entry(key).or_default();
            while q.front().is_some_and(|t| now.duration_since(*t) >= RATE_WINDOW) {
                q.pop_front();
            }
            if q.len() >= limit as usize {
                return Some(AuditError::RateLimited { per_min: limit });
            }
            q.push_back(now);
        }
        if let Some(key) = &st.config.admin_api_key {
            if ADMIN_ROUTES.contains(&path.as_str()) {
                let given = req.headers().get("x-api-key").and_then(|v| v.to_str().ok()).unwrap_or("");
                if !constant_time_eq(given.as_bytes(), key.as_bytes()) {
                    return Some(AuditError::Forbidden);
                }
            }
        }
        None
    })();
    let mut resp = match rejected {
        Some(e) => e.into_response(),
        None => next.run(req).await,
    };
    add_security_headers(resp.headers_mut(), &request_id);
    st.lock().metrics.latency_ms_total += t0.elapsed().as_millis() as u64;
    resp
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// ------------------------------------------------------------------------------------------
// JSON extraction: content type, streamed body limit, field-naming errors.
// ------------------------------------------------------------------------------------------

pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = AuditError;

    async fn from_request(req: Request, st: &AppState) -> Result<Self, Self::Rejection> {
        let limit = st.config.max_body_bytes;
        if let Some(ct) = req.headers().get(header::CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or("");
            if !ct.to_ascii_lowercase().contains("application/json") {
                return Err(AuditError::UnsupportedMediaType);
            }
        }
        if let Some(len) = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok()) {
            if len > limit {
                return Err(AuditError::BodyTooLarge { limit_bytes: limit });
            }
        }
        let body = req.into_body();
        let bytes = match Limited::new(body, limit).collect().await {
            Ok(c) => c.to_bytes(),
            Err(e) => {
                if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                    return Err(AuditError::BodyTooLarge { limit_bytes: limit });
                }
                return Err(AuditError::invalid("body", "could not read the request body"));
            }
        };
        let text: &[u8] = if bytes.iter().all(|b| b.is_ascii_whitespace()) { b"{}" } else { &bytes };
        let de = &mut serde_json::Deserializer::from_slice(text);
        match serde_path_to_error::deserialize::<_, T>(de) {
            Ok(v) => Ok(JsonBody(v)),
            Err(e) => {
                let path = e.path().to_string();
                let inner = e.into_inner();
                let field = if path == "." || path.is_empty() { missing_field(&inner.to_string()).unwrap_or_else(|| "body".into()) } else { path };
                Err(AuditError::invalid(field, format!("{inner}")))
            }
        }
    }
}

fn missing_field(msg: &str) -> Option<String> {
    let i = msg.find("missing field `")?;
    let rest = &msg[i + 15..];
    Some(rest[..rest.find('`')?].to_string())
}

// ------------------------------------------------------------------------------------------
// Sessions.
// ------------------------------------------------------------------------------------------

fn session_key(headers: &HeaderMap, body: Option<&str>, query: Option<&str>) -> Result<String, AuditError> {
    let raw = headers.get("x-session-id").and_then(|v| v.to_str().ok()).map(str::to_string).or(body.map(str::to_string)).or(query.map(str::to_string));
    match raw {
        None => Ok(DEFAULT_SESSION.into()),
        Some(s) => {
            let s = s.trim().to_string();
            if s.is_empty() || s.len() > 64 || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(AuditError::invalid("session_id", "session ids are 1-64 characters of [A-Za-z0-9_-]"));
            }
            Ok(s)
        }
    }
}

fn sweep_sessions(g: &mut Inner) {
    let ttl = Duration::from_secs(limits::SESSION_TTL_SECS);
    let now = Instant::now();
    g.sessions.retain(|k, s| k == DEFAULT_SESSION || now.duration_since(s.last_access) < ttl);
}

fn session_mut<'a>(g: &'a mut Inner, cfg: &AuditConfig, key: &str, create: bool) -> Result<&'a mut AuditEnv, AuditError> {
    if !g.sessions.contains_key(key) {
        if !create {
            return Err(AuditError::NotFound { kind: "session_id", id: key.into() });
        }
        sweep_sessions(g);
        if g.sessions.len() >= cfg.max_sessions {
            return Err(AuditError::Capacity(format!("at most {} sessions", cfg.max_sessions)));
        }
        g.sessions.insert(key.to_string(), Session { env: AuditEnv::new(cfg.env_config()), last_access: Instant::now() });
    }
    let s = g.sessions.get_mut(key).ok_or(AuditError::Internal)?;
    s.last_access = Instant::now();
    Ok(&mut s.env)
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
    Json(json!({"status": "healthy", "environment": "financial_audit_env", "version": VERSION, "tasks_available": 4, "active_sessions": g.sessions.len(), "active_campaigns": g.campaigns.len(), "log_level": st.config.log_level}))
}

async fn tasks(State(st): State<AppState>) -> Json<Value> {
    Json(crate::episode::task_catalogue(st.config.max_findings_per_step))
}

async fn reset(State(st): State<AppState>, headers: HeaderMap, JsonBody(req): JsonBody<AuditResetRequest>) -> Result<Json<Value>, AuditError> {
    let key = session_key(&headers, req.session_id.as_deref(), None)?;
    let mut g = st.lock();
    let env = session_mut(&mut g, &st.config, &key, true)?;
    let mut env_resp = env.reset(req.clone())?;
    env_resp.session_id = Some(key);
    let task = env_resp.observation.task_id;
    g.metrics.total_resets += 1;
    *g.metrics.task_usage.entry(task.as_str().into()).or_default() += 1;
    Ok(Json(serde_json::to_value(env_resp).map_err(|_| AuditError::Internal)?))
}

async fn step(State(st): State<AppState>, headers: HeaderMap, JsonBody(req): JsonBody<AuditStepRequest>) -> Result<Json<Value>, AuditError> {
    let key = session_key(&headers, req.session_id.as_deref(), None)?;
    let mut g = st.lock();
    let env = session_mut(&mut g, &st.config, &key, key == DEFAULT_SESSION)?;
    let mut out = env.step(req)?;
    out.session_id = Some(key);
    g.metrics.total_steps += 1;
    if out.done {
        g.metrics.total_episodes_completed += 1;
    }
    Ok(Json(serde_json::to_value(out).map_err(|_| AuditError::Internal)?))
}

async fn state_route(State(st): State<AppState>, headers: HeaderMap, Query(q): Query<SessionQuery>) -> Result<Json<Value>, AuditError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    let mut g = st.lock();
    let env = session_mut(&mut g, &st.config, &key, key == DEFAULT_SESSION)?;
    Ok(Json(serde_json::to_value(env.state()).map_err(|_| AuditError::Internal)?))
}

async fn new_session(State(st): State<AppState>) -> Result<Json<Value>, AuditError> {
    let mut g = st.lock();
    g.session_counter += 1;
    let id = util::opaque_id("sess", 0x5e55, g.session_counter);
    session_mut(&mut g, &st.config, &id, true)?;
    Ok(Json(json!({"session_id": id, "ttl_seconds": limits::SESSION_TTL_SECS, "message": "Session created. Send it as the X-Session-Id header (or session_id in the body) on /reset and /step."})))
}

async fn grader(State(st): State<AppState>, headers: HeaderMap, Query(q): Query<SessionQuery>) -> Result<Json<Value>, AuditError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    let mut g = st.lock();
    let env = session_mut(&mut g, &st.config, &key, key == DEFAULT_SESSION)?;
    let Some(ep) = env.episode.as_ref() else {
        return Ok(Json(json!({"status": "no_completed_episode", "message": "No episode completed. Call /reset then /step with submit_final=true."})));
    };
    match &ep.last_grade {
        None => Ok(Json(json!({"status": "no_completed_episode", "message": "No episode completed. Call /reset then /step with submit_final=true."}))),
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

async fn adaptive(State(st): State<AppState>, headers: HeaderMap, Query(q): Query<SessionQuery>) -> Result<Json<Value>, AuditError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    let mut g = st.lock();
    let env = session_mut(&mut g, &st.config, &key, key == DEFAULT_SESSION)?;
    Ok(Json(serde_json::to_value(env.adaptive_difficulty()).map_err(|_| AuditError::Internal)?))
}

async fn adversarial_state(State(st): State<AppState>, headers: HeaderMap, Query(q): Query<SessionQuery>) -> Result<Json<Value>, AuditError> {
    let key = session_key(&headers, None, q.session_id.as_deref())?;
    let mut g = st.lock();
    let env = session_mut(&mut g, &st.config, &key, key == DEFAULT_SESSION)?;
    Ok(Json(serde_json::to_value(env.adversarial.arms_race()).map_err(|_| AuditError::Internal)?))
}

async fn metrics(State(st): State<AppState>) -> Json<Value> {
    let g = st.lock();
    let m = &g.metrics;
    Json(json!({
        "uptime_seconds": g.started.elapsed().as_secs(),
        "total_resets": m.total_resets, "total_steps": m.total_steps,
        "total_episodes_completed": m.total_episodes_completed, "task_usage": m.task_usage,
        "active_sessions": g.sessions.len(), "active_campaigns": g.campaigns.len(),
        "campaigns_started": m.campaigns_started, "requests_total": m.requests_total,
        "mean_latency_ms": if m.requests_total == 0 { 0.0 } else { util::round_n(m.latency_ms_total as f64 / m.requests_total as f64, 3) }
    }))
}

// ------------------------------------------------------------------------------------------
// Campaigns.
// ------------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct CampaignStartReq {
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    total_periods: Option<u32>,
}

#[derive(Deserialize)]
struct CampaignIdReq {
    campaign_id: String,
}

#[derive(Deserialize)]
struct RoleReq {
    campaign_id: String,
    role: Role,
}

#[derive(Deserialize)]
struct SubmitReq {
    campaign_id: String,
    role: Role,
    #[serde(default)]
    action: Option<AuditAction>,
    #[serde(default)]
    findings: Option<Vec<Finding>>,
    #[serde(default)]
    submit_final: Option<bool>,
}

#[derive(Deserialize)]
struct ReviewReq {
    campaign_id: String,
    #[serde(default)]
    action: Option<OverseerAction>,
    #[serde(default)]
    decisions: Option<Vec<campaign::OverseerDecision>>,
    #[serde(default)]
    conflicts_resolved: Option<Vec<campaign::ConflictResolution>>,
    #[serde(default)]
    audit_trail_id: Option<String>,
}

#[derive(Deserialize)]
struct ImproveReq {
    campaign_id: String,
    #[serde(default)]
    train_seeds: Option<Vec<u64>>,
    #[serde(default)]
    held_out_seeds: Option<Vec<u64>>,
}

fn campaign_mut<'a>(g: &'a mut Inner, id: &str) -> Result<&'a mut Campaign, AuditError> {
    g.campaigns.get_mut(id).ok_or_else(|| AuditError::NotFound { kind: "campaign_id", id: id.to_string() })
}

fn to_json<T: Serialize>(v: &T) -> Result<Value, AuditError> {
    serde_json::to_value(v).map_err(|_| AuditError::Internal)
}

async fn campaign_start(State(st): State<AppState>, JsonBody(req): JsonBody<CampaignStartReq>) -> Result<Json<Value>, AuditError> {
    let mut g = st.lock();
    if g.campaigns.len() >= st.config.max_campaigns {
        // Evict the oldest finished campaign first; refuse when all are live.
        let finished = g.campaigns.iter().find(|(_, c)| c.finished).map(|(k, _)| k.clone());
        match finished {
            Some(k) => {
                g.campaigns.remove(&k);
            }
            None => return Err(AuditError::Capacity(format!("at most {} live campaigns", st.config.max_campaigns))),
        }
    }
    let seed = req.seed.unwrap_or(42);
    g.campaign_counter += 1;
    let id = util::opaque_id("cmp", seed, g.campaign_counter);
    let c = Campaign::new(id.clone(), seed, req.total_periods.unwrap_or(st.config.campaign_total_periods), st.config.max_findings_per_step)?;
    let obs = to_json(&c.observation(None))?;
    g.campaigns.insert(id.clone(), c);
    g.metrics.campaigns_started += 1;
    Ok(Json(json!({"status": "started", "campaign_id": id, "observation": obs})))
}

fn campaign_state_json(c: &Campaign) -> Result<Value, AuditError> {
    Ok(json!({
        "campaign_id": c.id,
        "score": c.score(),
        "score_breakdown": c.period_scores.last().map(|p| &p.score),
        "current_period_score": c.score_period().score,
        "state": to_json(&c.state())?,
        "observation": to_json(&c.observation(None))?,
    }))
}

async fn campaign_state_q(State(st): State<AppState>, Query(q): Query<SessionQuery>) -> Result<Json<Value>, AuditError> {
    let id = q.campaign_id.ok_or_else(|| AuditError::invalid("campaign_id", "query parameter campaign_id is required"))?;
    let mut g = st.lock();
    Ok(Json(campaign_state_json(campaign_mut(&mut g, &id)?)?))
}

async fn campaign_state_p(State(st): State<AppState>, Path(id): Path<String>) -> Result<Json<Value>, AuditError> {
    let mut g = st.lock();
    Ok(Json(campaign_state_json(campaign_mut(&mut g, &id)?)?))
}

async fn campaign_task_start(State(st): State<AppState>, JsonBody(req): JsonBody<RoleReq>) -> Result<Json<Value>, AuditError> {
    let mut g = st.lock();
    let c = campaign_mut(&mut g, &req.campaign_id)?;
    let ep = c.start_task(req.role)?;
    let obs = ep.observation(0.0, ep.reset_feedback(), false);
    let p = c.current_period;
    let prior: Vec<_> = c.history.iter().filter(|h| h.period < p).cloned().collect();
    Ok(Json(json!({
        "status": "started", "campaign_id": c.id, "role": req.role,
        "observation": to_json(&c.observation(Some(obs)))?,
        "world_state": to_json(&c.world)?,
        "findings_history": to_json(&prior)?,
        "active_instructions": to_json(&c.active_instructions())?,
        "pending_regulatory_shocks": to_json(&c.world.mid_period_rule_drops)?,
    })))
}

fn do_submit(st: &AppState, req: SubmitReq, status: &str) -> Result<Json<Value>, AuditError> {
    let mut action = req.action.unwrap_or_default();
    if let Some(f) = req.findings {
        action.findings.extend(f);
    }
    if req.submit_final.is_some() {
        action.submit_final = req.submit_final;
    }
    let mut g = st.lock();
    let c = campaign_mut(&mut g, &req.campaign_id)?;
    let r = c.submit(req.role, action)?;
    Ok(Json(json!({
        "status": status, "campaign_id": req.campaign_id, "role": req.role,
        "observation": to_json(&r.observation)?, "reward": r.reward, "done": r.done,
        "deferred": r.deferred, "shock": r.shock, "grader": r.grader, "warnings": r.warnings,
    })))
}

async fn campaign_task_submit(State(st): State<AppState>, JsonBody(req): JsonBody<SubmitReq>) -> Result<Json<Value>, AuditError> {
    do_submit(&st, req, "submitted")
}

async fn campaign_action(State(st): State<AppState>, JsonBody(req): JsonBody<SubmitReq>) -> Result<Json<Value>, AuditError> {
    do_submit(&st, req, "accepted")
}

async fn campaign_advance(State(st): State<AppState>, JsonBody(req): JsonBody<CampaignIdReq>) -> Result<Json<Value>, AuditError> {
    let mut g = st.lock();
    let c = campaign_mut(&mut g, &req.campaign_id)?;
    let status = c.advance()?;
    Ok(Json(json!({
        "status": status, "campaign_id": c.id, "observation": to_json(&c.observation(None))?,
        "period_score": c.period_scores.last().map(|p| &p.score), "score": c.score(),
    })))
}

async fn overseer_review(State(st): State<AppState>, JsonBody(req): JsonBody<ReviewReq>) -> Result<Json<Value>, AuditError> {
    let mut action = req.action.unwrap_or_default();
    if let Some(d) = req.decisions {
        action.decisions.extend(d);
    }
    if let Some(c) = req.conflicts_resolved {
        action.conflicts_resolved.extend(c);
    }
    if req.audit_trail_id.is_some() {
        action.audit_trail_id = req.audit_trail_id;
    }
    let mut g = st.lock();
    let c = campaign_mut(&mut g, &req.campaign_id)?;
    let r = c.review(action)?;
    Ok(Json(json!({"status": "reviewed", "campaign_id": req.campaign_id, "result": to_json(&r)?})))
}

async fn overseer_report(State(st): State<AppState>, Query(q): Query<SessionQuery>) -> Result<Json<Value>, AuditError> {
    let id = q.campaign_id.ok_or_else(|| AuditError::invalid("campaign_id", "query parameter campaign_id is required"))?;
    let mut g = st.lock();
    let c = campaign_mut(&mut g, &id)?;
    let mut per_role = BTreeMap::new();
    for (r, e) in &c.episodes {
        if let Some(gr) = &e.last_grade {
            per_role.insert(r.as_str().to_string(), json!({"precision": gr.precision, "recall": gr.recall, "score": gr.score}));
        }
    }
    Ok(Json(json!({
        "campaign_id": c.id, "current_period": c.current_period, "budget_remaining": c.budget_remaining,
        "findings_seen": c.history.len(), "regulatory_shocks_applied": to_json(&c.shocks_applied)?,
        "reviews": to_json(&c.reviews)?, "per_role_current_period": per_role,
        "period_scores": c.period_scores.iter().map(|p| json!({"period": p.period, "score": p.score.score, "overseer_quality": p.inputs.overseer_quality})).collect::<Vec<_>>(),
    })))
}

async fn self_improve(State(st): State<AppState>, JsonBody(req): JsonBody<ImproveReq>) -> Result<Json<Value>, AuditError> {
    let train = req.train_seeds.unwrap_or_else(|| TRAIN_SEEDS.collect());
    let held = req.held_out_seeds.unwrap_or_else(|| HELD_OUT_SEEDS.collect());
    let mut g = st.lock();
    let c = campaign_mut(&mut g, &req.campaign_id)?;
    let rec = c.self_improve(&train, &held)?;
    Ok(Json(json!({"status": "completed", "campaign_id": req.campaign_id, "summary": to_json(&rec)?})))
}

async fn self_improve_history(State(st): State<AppState>, Query(q): Query<SessionQuery>) -> Result<Json<Value>, AuditError> {
    let id = q.campaign_id.ok_or_else(|| AuditError::invalid("campaign_id", "query parameter campaign_id is required"))?;
    let g = st.lock();
    let hist = g.campaigns.get(&id).map(|c| c.improve_history.clone()).unwrap_or_default();
    Ok(Json(json!({"campaign_id": id, "history": to_json(&hist)?})))
}

// ------------------------------------------------------------------------------------------
// Leaderboard (scores come from the server's own grader) and baseline.
// ------------------------------------------------------------------------------------------

#[derive(Deserialize, Default)]
struct LeaderReq {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Deserialize, Default)]
struct LeaderQuery {
    model: Option<String>,
    session_id: Option<String>,
}

async fn leaderboard_post(State(st): State<AppState>, headers: HeaderMap, Query(q): Query<LeaderQuery>, JsonBody(req): JsonBody<LeaderReq>) -> Result<Json<Value>, AuditError> {
    let model = req.model.or(q.model).map(|m| m.trim().chars().take(limits::MAX_ID_CHARS).collect::<String>()).filter(|m| !m.is_empty()).ok_or_else(|| AuditError::invalid("model", "model is required"))?;
    let key = session_key(&headers, req.session_id.as_deref(), q.session_id.as_deref())?;
    let mut g = st.lock();
    let env = session_mut(&mut g, &st.config, &key, key == DEFAULT_SESSION)?;
    let ep = env.episode.as_ref().ok_or(AuditError::NotInitialized)?;
    let gr = ep.last_grade.clone().ok_or_else(|| AuditError::Conflict("no completed episode in this session: finish an episode (submit_final=true) before submitting to the leaderboard".into()))?;
    let entry = LeaderEntry { model: model.clone(), task_id: ep.task(), score: gr.score, weighted_score: gr.weighted_score, risk_mitigation_pct: gr.risk_score.risk_mitigation_pct, episode_id: ep.episode_id.clone(), seed: ep.data.seed, timestamp: util::unix_seconds() };
    // Best score per (model, task).
    if let Some(pos) = g.leaderboard.iter().position(|e| e.model == entry.model && e.task_id == entry.task_id) {
        if g.leaderboard[pos].score < entry.score {
            g.leaderboard[pos] = entry.clone();
        }
    } else {
        g.leaderboard.push(entry.clone());
    }
    g.leaderboard.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or(std::cmp::Ordering::Equal).then(a.model.cmp(&b.model)));
    g.leaderboard.truncate(limits::MAX_LEADERBOARD_ENTRIES);
    let rank = g.leaderboard.iter().position(|e| e.model == model && e.task_id == entry.task_id).map(|p| p as i64 + 1).unwrap_or(-1);
    Ok(Json(json!({"status": "submitted", "rank": rank, "entry": to_json(&entry)?, "note": "scores are taken from the server's grader for this session's last completed episode"})))
}

async fn leaderboard_get(State(st): State<AppState>, Query(q): Query<SessionQuery>) -> Result<Json<Value>, AuditError> {
    let task = match q.task_id.as_deref() {
        Some(t) => Some(TaskId::parse(t).ok_or_else(|| AuditError::UnknownTask(t.to_string()))?),
        None => None,
    };
    let limit = q.limit.unwrap_or(20).min(limits::MAX_LEADERBOARD_ENTRIES);
    let g = st.lock();
    let rows: Vec<&LeaderEntry> = g.leaderboard.iter().filter(|e| task.map_or(true, |t| e.task_id == t)).collect();
    Ok(Json(json!({"leaderboard": to_json(&rows.iter().take(limit).collect::<Vec<_>>())?, "total_entries": rows.len()})))
}

#[derive(Deserialize, Default)]
struct BaselineReq {
    #[serde(default)]
    seeds: Option<Vec<u64>>,
}

async fn baseline_route(JsonBody(req): JsonBody<BaselineReq>) -> Result<Json<Value>, AuditError> {
    let seeds = req.seeds.unwrap_or_else(|| vec![42]);
    if seeds.is_empty() || seeds.len() > limits::MAX_SELF_IMPROVE_SEEDS {
        return Err(AuditError::invalid("seeds", format!("between 1 and {} seeds", limits::MAX_SELF_IMPROVE_SEEDS)));
    }
    let report = tokio::task::spawn_blocking(move || baseline::run(&seeds, &BaselineConfig::default())).await.map_err(|_| AuditError::Internal)?;
    Ok(Json(json!({"status": "completed", "model": report.model, "scores": to_json(&report)?})))
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_from_lookup() {
        let env: BTreeMap<&str, &str> = [("RATE_LIMIT_PER_MIN", "7"), ("ADMIN_API_KEY", "k"), ("MAX_FINDINGS_PER_STEP", "200"), ("FRAUD_DIFFICULTY", "2"), ("CAMPAIGN_TOTAL_PERIODS", "3")].into();
        let c = AuditConfig::from_lookup(|k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!((c.rate_limit_per_min, c.max_findings_per_step, c.campaign_total_periods), (7, 200, 3));
        assert_eq!(c.admin_api_key.as_deref(), Some("k"));
        assert_eq!(c.fraud_difficulty, FraudDifficulty::Fixed(3));
        assert!(AuditConfig::from_lookup(|k| (k == "RATE_LIMIT_PER_MIN").then(|| "x".to_string())).is_err());
    }

    #[tokio::test]
    async fn cors_follows_cors_origins() {
        use tower::ServiceExt;
        let c = AuditConfig::from_lookup(|k| (k == "CORS_ORIGINS").then(|| "https://a.example, https://b.example".to_string())).unwrap();
        assert_eq!(c.cors_origins, vec!["https://a.example".to_string(), "https://b.example".to_string()]);
        assert!(AuditConfig::from_lookup(|k| (k == "CORS_ORIGINS").then(|| "bad\norigin".to_string())).is_err());
        let app = router(c);
        let req = |origin: &str| {
            axum::http::Request::builder()
                .uri("/health")
                .header("origin", origin)
                .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from(([127, 0, 0, 1], 9))))
                .body(axum::body::Body::empty())
                .unwrap()
        };
        let ok = app.clone().oneshot(req("https://a.example")).await.unwrap();
        assert_eq!(ok.headers().get("access-control-allow-origin").map(|v| v.to_str().unwrap()), Some("https://a.example"));
        let other = app.oneshot(req("https://evil.example")).await.unwrap();
        assert!(other.headers().get("access-control-allow-origin").is_none());
    }
}
