//! The cross-cutting guard both environments are served behind, as one tower service wrapped
//! once around the whole router (no per-route layers, no boxed future):
//!
//! 1. `Host`: on a loopback bind only loopback names (or `ALLOWED_HOSTS`) are served, so a web
//!    page cannot reach the server through DNS rebinding.
//! 2. `Origin`: a request that carries one is served only when it is the server's own origin or
//!    listed in `CORS_ORIGINS` (then it gets CORS headers and preflights are answered). Browsers
//!    send `Origin` on every cross-origin POST, `text/plain` ones included; curl and SDK clients
//!    send none and are unaffected.
//! 3. Operator routes (each environment names its own) need `X-API-Key` when `ADMIN_API_KEY` is
//!    set and answer loopback clients only when it is not.
//! 4. Rate limits per client address and per `X-Session-Id`, answered 429 with `Retry-After`;
//!    loopback clients are not throttled unless `RATE_LIMIT_LOOPBACK` is set.
//! 5. Security headers on every reply (unless the route set its own).

use crate::config::SecurityConfig;
use crate::error::{prefix, ApiError};
use axum::body::Body;
use axum::http::{
    header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode,
};
use axum::response::IntoResponse;
use futures_util::future::{Either, Ready};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Is this request an operator route of the environment served?
pub type OperatorRoutes = fn(&Method, &str) -> bool;

/// Headers set on every reply that does not set them itself.
const SECURITY_HEADERS: [(&str, &str); 7] = [
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
    (
        "content-security-policy",
        "default-src 'none'; frame-ancestors 'none'",
    ),
    ("cross-origin-resource-policy", "same-origin"),
    ("x-robots-tag", "noindex, nofollow"),
];

/// [`SECURITY_HEADERS`] as a header map built once: every reply starts from a copy of it (an
/// allocation and static-bytes clones) instead of hashing seven inserts into its own map.
static SECURITY_HEADER_MAP: LazyLock<HeaderMap> = LazyLock::new(|| {
    // Room for the reply's own headers and CORS, so adding them does not rehash.
    let mut map = HeaderMap::with_capacity(SECURITY_HEADERS.len() + 4);
    for (name, value) in SECURITY_HEADERS {
        map.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    map
});

const RATE_WINDOW: Duration = Duration::from_secs(60);
/// Most rate-limit keys remembered; past it, expired windows are dropped and, if still full,
/// new keys share one bucket.
const MAX_RATE_KEYS: usize = 65_536;

/// Fixed one-minute windows per key.
#[derive(Default)]
struct RateLimiter {
    windows: Mutex<HashMap<String, (Instant, u32)>>,
}

impl RateLimiter {
    /// Count one request for `key`; `Err(retry_after_secs)` past `limit` in the current window.
    fn check(&self, key: &str, limit: u32, now: Instant) -> Result<(), u64> {
        let mut map = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_RATE_KEYS && !map.contains_key(key) {
            map.retain(|_, (start, _)| now.duration_since(*start) < RATE_WINDOW);
        }
        let key = if map.len() >= MAX_RATE_KEYS && !map.contains_key(key) {
            "overflow"
        } else {
            key
        };
        let w = map.entry(key.to_owned()).or_insert((now, 0));
        if now.duration_since(w.0) >= RATE_WINDOW {
            *w = (now, 0);
        }
        if w.1 >= limit {
            let left = RATE_WINDOW.saturating_sub(now.duration_since(w.0));
            return Err(left.as_secs() + 1);
        }
        w.1 += 1;
        Ok(())
    }
}

/// The guard's shared state.
pub struct Guard {
    config: SecurityConfig,
    operator: OperatorRoutes,
    limiter: RateLimiter,
    /// Mark every passed request with [`OperatorAccess`] (for handlers whose body fields are
    /// operator overrides, e.g. the audit reset's `fraud_level`).
    mark_operator: bool,
}

/// Whether the request's client may use operator routes (inserted when the guard is built
/// with [`Guard::marking_operator_access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorAccess(pub bool);

impl Guard {
    pub fn new(config: SecurityConfig, operator: OperatorRoutes) -> Arc<Self> {
        Arc::new(Self {
            config,
            operator,
            limiter: RateLimiter::default(),
            mark_operator: false,
        })
    }

    /// As [`Guard::new`], marking every request with its [`OperatorAccess`].
    pub fn marking_operator_access(config: SecurityConfig, operator: OperatorRoutes) -> Arc<Self> {
        Arc::new(Self {
            config,
            operator,
            limiter: RateLimiter::default(),
            mark_operator: true,
        })
    }

    fn operator_access(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> OperatorAccess {
        let client = client_ip(headers, peer, self.config.trust_proxy_headers);
        OperatorAccess(
            self.operator_allowed(headers, client.is_some_and(|ip| ip.is_loopback()))
                .is_ok(),
        )
    }

    /// Decide a request: `Err` is the refusal; `Ok` passes it on (with the CORS origin to echo,
    /// if any) or answers a preflight.
    fn admit(&self, req: &Request<Body>, peer: Option<SocketAddr>) -> Result<Admit, ApiError> {
        let headers = req.headers();
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if self.config.loopback_bind && !host.is_empty() && !self.host_allowed(host) {
            return Err(ApiError::Forbidden(format!(
                "host '{}' is not served here (set ALLOWED_HOSTS to allow it)",
                prefix(host)
            )));
        }
        let cors = match headers.get(header::ORIGIN) {
            None => None,
            Some(origin) => self.origin(origin, host)?,
        };
        if req.method() == Method::OPTIONS
            && cors.is_some()
            && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            return Ok(Admit::Preflight);
        }
        let client = client_ip(headers, peer, self.config.trust_proxy_headers);
        let loopback = client.is_some_and(|ip| ip.is_loopback());
        if (self.operator)(req.method(), req.uri().path()) {
            self.operator_allowed(headers, loopback)?;
        }
        if !loopback || self.config.rate_limit_loopback {
            self.rate_limit(headers, client)?;
        }
        Ok(Admit::Pass(cors))
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host, |(n, _)| n),
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        name == "localhost"
            || name.ends_with(".localhost")
            || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            || self
                .config
                .allowed_hosts
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&name) || h.eq_ignore_ascii_case(host))
    }

    /// `Ok(Some(origin))` for a listed origin (CORS headers follow), `Ok(None)` for the server's
    /// own origin, a 403 otherwise.
    fn origin(&self, origin: &HeaderValue, host: &str) -> Result<Option<HeaderValue>, ApiError> {
        let text = origin.to_str().unwrap_or("");
        if self.config.cors_origins.iter().any(|o| o == "*") {
            return Ok(Some(HeaderValue::from_static("*")));
        }
        if self
            .config
            .cors_origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(text))
        {
            return Ok(Some(origin.clone()));
        }
        let own = text
            .strip_prefix("http://")
            .or_else(|| text.strip_prefix("https://"));
        if own.is_some_and(|h| !host.is_empty() && h.eq_ignore_ascii_case(host)) {
            return Ok(None);
        }
        Err(ApiError::Forbidden(format!(
            "origin '{}' is not allowed (set CORS_ORIGINS to allow it)",
            prefix(text)
        )))
    }

    fn operator_allowed(&self, headers: &HeaderMap, loopback: bool) -> Result<(), ApiError> {
        match &self.config.admin_api_key {
            Some(key) => {
                let given = headers.get("x-api-key").map(HeaderValue::as_bytes).unwrap_or(b"");
                if constant_time_eq(given, key.as_bytes()) {
                    Ok(())
                } else {
                    Err(ApiError::Forbidden("API key required for this endpoint (X-API-Key)".into()))
                }
            }
            None if loopback => Ok(()),
            None => Err(ApiError::Forbidden("operator route: set ADMIN_API_KEY and send it as X-API-Key, or call from the server's own host".into())),
        }
    }

    fn rate_limit(&self, headers: &HeaderMap, client: Option<IpAddr>) -> Result<(), ApiError> {
        let now = Instant::now();
        let per_client = self.config.client_rate_per_min;
        let key = client.map_or_else(|| "client:unknown".to_owned(), |ip| format!("client:{ip}"));
        self.limiter
            .check(&key, per_client, now)
            .map_err(|retry_after_secs| ApiError::RateLimited {
                per_min: per_client,
                scope: "client",
                retry_after_secs,
            })?;
        if let Some(sid) = headers
            .get(crate::sessions::SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            let per_session = self.config.session_rate_per_min;
            let key = format!("session:{}", prefix(sid.trim()));
            self.limiter
                .check(&key, per_session, now)
                .map_err(|retry_after_secs| ApiError::RateLimited {
                    per_min: per_session,
                    scope: "session",
                    retry_after_secs,
                })?;
        }
        Ok(())
    }
}

/// What the guard does with an admitted request.
#[derive(Debug)]
enum Admit {
    /// Pass it on; echo this CORS origin on the reply.
    Pass(Option<HeaderValue>),
    /// Answer a CORS preflight from a listed origin.
    Preflight,
}

fn preflight() -> Response<Body> {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::NO_CONTENT;
    let h = res.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type, x-session-id, x-api-key"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    res
}

/// The client's address: the connection's peer, or the first forwarded address when proxy
/// headers are trusted.
fn client_ip(headers: &HeaderMap, peer: Option<SocketAddr>, trust_proxy: bool) -> Option<IpAddr> {
    if trust_proxy {
        let fwd = headers
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.split(',').next())
            .and_then(|s| s.trim().parse().ok());
        let real = headers
            .get("x-real-ip")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse().ok());
        if let Some(ip) = fwd.or(real) {
            return Some(ip);
        }
    }
    peer.map(|p| p.ip())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Add the security headers (a header the reply set itself keeps the reply's values) and, for an
/// allowed origin, the CORS headers.
fn finish(res: &mut Response<Body>, cors: Option<HeaderValue>) {
    let own = std::mem::replace(res.headers_mut(), SECURITY_HEADER_MAP.clone());
    let h = res.headers_mut();
    let mut name = None;
    // `None` names are further values of the header named before them.
    for (next, value) in own {
        match next {
            Some(n) => {
                h.insert(&n, value);
                name = Some(n);
            }
            None => {
                if let Some(n) = &name {
                    h.append(n, value);
                }
            }
        }
    }
    if let Some(origin) = cors {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
}

/// A service behind the [`Guard`], for one connection's peer.
#[derive(Clone)]
pub struct Guarded<S> {
    inner: S,
    guard: Arc<Guard>,
    peer: Option<SocketAddr>,
}

impl<S> Guarded<S> {
    pub fn new(inner: S, guard: Arc<Guard>) -> Self {
        Self {
            inner,
            guard,
            peer: None,
        }
    }

    /// The same service for a connection from `peer`.
    pub fn for_peer(&self, peer: SocketAddr) -> Self
    where
        S: Clone,
    {
        Self {
            inner: self.inner.clone(),
            guard: self.guard.clone(),
            peer: Some(peer),
        }
    }
}

impl<S, B> tower::Service<Request<B>> for Guarded<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = GuardFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let req = req.map(Body::new);
        let answer = |mut res: Response<Body>, cors: Option<HeaderValue>| {
            finish(&mut res, cors);
            GuardFuture {
                inner: Either::Left(futures_util::future::ready(Ok(res))),
                cors: None,
            }
        };
        match self.guard.admit(&req, self.peer) {
            Err(refusal) => answer(refusal.into_response(), None),
            Ok(Admit::Preflight) => {
                let origin = req.headers().get(header::ORIGIN).cloned();
                answer(preflight(), origin)
            }
            Ok(Admit::Pass(cors)) => {
                let mut req = req;
                if self.guard.mark_operator {
                    let access = self.guard.operator_access(req.headers(), self.peer);
                    req.extensions_mut().insert(access);
                }
                GuardFuture {
                    inner: Either::Right(self.inner.call(req)),
                    cors,
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The inner service's reply (or the guard's refusal) with the security headers added.
    pub struct GuardFuture<F> {
        #[pin]
        inner: Either<Ready<Result<Response<Body>, Infallible>>, F>,
        cors: Option<HeaderValue>,
    }
}

impl<F: Future<Output = Result<Response<Body>, Infallible>>> Future for GuardFuture<F> {
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(mut res) = std::task::ready!(this.inner.poll(cx));
        finish(&mut res, this.cors.take());
        Poll::Ready(Ok(res))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(config: SecurityConfig) -> Arc<Guard> {
        Guard::new(config, |m, p| m == Method::POST && p == "/op")
    }

    fn req(method: Method, path: &str, headers: &[(&str, &str)]) -> Request<Body> {
        let mut b = Request::builder().method(method).uri(path);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(Body::empty()).unwrap()
    }

    const LOCAL: Option<SocketAddr> = Some(SocketAddr::new(
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        9,
    ));
    const REMOTE: Option<SocketAddr> = Some(SocketAddr::new(
        IpAddr::V4(std::net::Ipv4Addr::new(10, 1, 2, 3)),
        9,
    ));

    fn status(r: Result<Admit, ApiError>) -> u16 {
        match r {
            Ok(Admit::Pass(_)) => 200,
            Ok(Admit::Preflight) => 204,
            Err(e) => e.status().as_u16(),
        }
    }

    #[test]
    fn hosts_and_origins() {
        let g = guard(SecurityConfig::default());
        assert_eq!(
            status(g.admit(&req(Method::GET, "/", &[("host", "127.0.0.1:8000")]), LOCAL)),
            200
        );
        assert_eq!(
            status(g.admit(&req(Method::GET, "/", &[("host", "[::1]:8000")]), LOCAL)),
            200
        );
        assert_eq!(
            status(g.admit(&req(Method::GET, "/", &[("host", "localhost")]), LOCAL)),
            200
        );
        assert_eq!(
            status(g.admit(
                &req(Method::GET, "/", &[("host", "evil.example:8000")]),
                LOCAL
            )),
            403
        );
        let cross = [
            ("host", "127.0.0.1:8000"),
            ("origin", "https://evil.example"),
        ];
        assert_eq!(
            status(g.admit(&req(Method::POST, "/step", &cross), LOCAL)),
            403
        );
        let own = [
            ("host", "127.0.0.1:8000"),
            ("origin", "http://127.0.0.1:8000"),
        ];
        assert!(matches!(
            g.admit(&req(Method::POST, "/step", &own), LOCAL),
            Ok(Admit::Pass(None))
        ));
        let g = guard(SecurityConfig {
            cors_origins: vec!["https://app.example".into()],
            allowed_hosts: vec!["box.lan".into()],
            ..Default::default()
        });
        let listed = [("host", "box.lan:8000"), ("origin", "https://app.example")];
        assert!(matches!(
            g.admit(&req(Method::POST, "/step", &listed), LOCAL),
            Ok(Admit::Pass(Some(o))) if o == "https://app.example"
        ));
        let pre = [
            ("host", "127.0.0.1"),
            ("origin", "https://app.example"),
            ("access-control-request-method", "POST"),
        ];
        assert_eq!(
            status(g.admit(&req(Method::OPTIONS, "/step", &pre), LOCAL)),
            204
        );
    }

    #[test]
    fn operator_routes() {
        let g = guard(SecurityConfig::default());
        assert_eq!(status(g.admit(&req(Method::POST, "/op", &[]), LOCAL)), 200);
        assert_eq!(status(g.admit(&req(Method::POST, "/op", &[]), REMOTE)), 403);
        assert_eq!(status(g.admit(&req(Method::GET, "/op", &[]), REMOTE)), 200);
        let g = guard(SecurityConfig {
            admin_api_key: Some("k".into()),
            ..Default::default()
        });
        assert_eq!(status(g.admit(&req(Method::POST, "/op", &[]), LOCAL)), 403);
        assert_eq!(
            status(g.admit(&req(Method::POST, "/op", &[("x-api-key", "k")]), REMOTE)),
            200
        );
    }

    #[test]
    fn rate_limits_per_client_and_session_with_retry_after() {
        let g = guard(SecurityConfig {
            client_rate_per_min: 3,
            session_rate_per_min: 2,
            ..Default::default()
        });
        for _ in 0..10 {
            assert_eq!(
                status(g.admit(&req(Method::GET, "/", &[]), LOCAL)),
                200,
                "loopback is not throttled by default"
            );
        }
        let s = [("x-session-id", "a")];
        assert_eq!(status(g.admit(&req(Method::GET, "/", &s), REMOTE)), 200);
        assert_eq!(status(g.admit(&req(Method::GET, "/", &s), REMOTE)), 200);
        let limited = g
            .admit(&req(Method::GET, "/", &s), REMOTE)
            .unwrap_err()
            .into_response();
        assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
        let secs: u64 = limited.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=61).contains(&secs));
        assert_eq!(
            status(g.admit(&req(Method::GET, "/", &[]), REMOTE)),
            429,
            "the client's budget is spent too"
        );
    }

    /// Every reply gets the security headers; a header the reply set itself keeps its values
    /// (all of them), and the reply's other headers are kept.
    #[test]
    fn security_headers_keep_the_replys_own() {
        let mut res = Response::new(Body::empty());
        let h = res.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=60"),
        );
        h.append(header::SET_COOKIE, HeaderValue::from_static("a=1"));
        h.append(header::SET_COOKIE, HeaderValue::from_static("b=2"));
        finish(
            &mut res,
            Some(HeaderValue::from_static("https://a.example")),
        );
        let h = res.headers();
        for (name, value) in SECURITY_HEADERS {
            if name != "cache-control" {
                assert_eq!(h[name], value, "{name}");
            }
        }
        assert_eq!(h[header::CACHE_CONTROL], "max-age=60");
        assert_eq!(h.get_all(header::CACHE_CONTROL).iter().count(), 1);
        assert_eq!(h[header::CONTENT_TYPE], "text/html");
        let cookies: Vec<&str> = h
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(cookies, ["a=1", "b=2"]);
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], "https://a.example");
        assert_eq!(h[header::VARY], "Origin");
        assert_eq!(h.len(), SECURITY_HEADERS.len() + 5);
    }
}
