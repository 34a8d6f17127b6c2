//! The cross-cutting guard both environments are served behind, as one tower service wrapped
//! once around the whole router (no per-route layers, no boxed future):
//!
//! 1. `Host`: on a loopback bind only loopback names (or `ALLOWED_HOSTS`) are served, so a web
//!    page cannot reach the server through DNS rebinding; on another bind, `ALLOWED_HOSTS` when
//!    it is set.
//! 2. `Origin`: a request that carries one is served only when it is the server's own origin or
//!    listed in `CORS_ORIGINS` (then it gets CORS headers and preflights are answered). Browsers
//!    send `Origin` on every cross-origin POST, `text/plain` ones included; curl and SDK clients
//!    send none and are unaffected.
//! 3. Operator routes (each environment names its own) need the operator key in `X-API-Key`
//!    from every address: no address, loopback included, and no header grants operator access.
//! 4. Rate limits per client address and per `X-Session-Id`, answered 429 with `Retry-After`;
//!    a client connected directly from loopback is not throttled unless `RATE_LIMIT_LOOPBACK`
//!    is set. The client address is the peer's, or, on a connection from a trusted proxy, the
//!    rightmost `X-Forwarded-For` entry that is not itself a trusted proxy.
//! 5. Security headers on every reply (unless the route set its own); a 429 or 503 reply also
//!    closes its connection (`Connection: close`), so a throttled client gives its slot back.

use crate::capacity::ClientKey;
use crate::config::SecurityConfig;
use crate::error::{prefix, ApiError};
use axum::body::Body;
use axum::http::{
    header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode,
};
use axum::response::IntoResponse;
use futures_util::future::{Either, Ready};
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

/// Fixed one-minute windows per key, in a bounded least-recently-used table: at capacity the
/// key seen least recently is forgotten, so a flood of new (forged) keys can only make the
/// limiter forget old counts, never lock a new client out.
struct RateLimiter {
    windows: Mutex<hashlink::LruCache<String, (Instant, u32)>>,
}

impl RateLimiter {
    fn new(capacity: usize) -> Self {
        Self {
            windows: Mutex::new(hashlink::LruCache::new(capacity.max(1))),
        }
    }

    /// Count one request for `key`; `Err(retry_after_secs)` past `limit` in the current window.
    fn check(&self, key: &str, limit: u32, now: Instant) -> Result<(), u64> {
        let mut map = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if map.get_mut(key).is_none() {
            map.insert(key.to_owned(), (now, 0));
        }
        let Some(w) = map.get_mut(key) else {
            return Ok(());
        };
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
}

/// Whether the request carries the operator credential (inserted into a passed request that
/// carries the key, for handlers whose fields or views depend on it: the audit reset's
/// `fraud_level`, a fresh-institution reset, the per-case rows of stored reports; absent means
/// no operator access).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorAccess(pub bool);

/// The client's address as the guard decided it (inserted into WebSocket upgrades and every
/// request but a GET, for what is counted per client: WebSocket sessions, named sessions,
/// campaigns): the peer's, or the forwarded one from a trusted proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub Option<IpAddr>);

impl ClientAddr {
    /// The client's key for per-client shares and quotas (an IPv6 address by its /64).
    pub fn key(&self) -> Option<ClientKey> {
        self.0.map(ClientKey::of)
    }
}

/// The client key of a request's [`ClientAddr`] extension (`None` without one).
pub fn client_key(addr: Option<&axum::Extension<ClientAddr>>) -> Option<ClientKey> {
    addr.and_then(|a| a.0.key())
}

/// Who sent a request.
#[derive(Debug, Clone, Copy)]
struct Client {
    ip: Option<IpAddr>,
    /// The address is the connection's own peer (not read from a forwarding header).
    direct: bool,
}

impl Guard {
    pub fn new(config: SecurityConfig, operator: OperatorRoutes) -> Arc<Self> {
        let limiter = RateLimiter::new(config.rate_limit_clients);
        Arc::new(Self {
            config,
            operator,
            limiter,
        })
    }

    /// The same as [`Guard::new`] (every guard marks requests with their [`OperatorAccess`]).
    pub fn marking_operator_access(config: SecurityConfig, operator: OperatorRoutes) -> Arc<Self> {
        Self::new(config, operator)
    }

    /// Whether connections from `ip` carry many clients: a trusted proxy, when proxy headers
    /// are trusted (its clients are told apart by the forwarded address, and the proxy keeps
    /// its own per-client connection limits).
    pub fn carries_many_clients(&self, ip: IpAddr) -> bool {
        self.config.trust_proxy_headers && self.trusted_proxy(ip)
    }

    fn trusted_proxy(&self, ip: IpAddr) -> bool {
        if self.config.trusted_proxies.is_empty() {
            ip.is_loopback()
        } else {
            self.config.trusted_proxies.iter().any(|n| n.contains(&ip))
        }
    }

    /// The client: the peer, unless proxy headers are trusted and the peer is a trusted proxy;
    /// then the rightmost `X-Forwarded-For` entry that is not a trusted proxy (entries to its
    /// left were written by the client and prove nothing), else `X-Real-IP`.
    fn client(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> Client {
        let peer_ip = peer.map(|p| p.ip());
        let direct = Client {
            ip: peer_ip,
            direct: true,
        };
        if !self.config.trust_proxy_headers || !peer_ip.is_some_and(|ip| self.trusted_proxy(ip)) {
            return direct;
        }
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect::<Vec<_>>();
        if !forwarded.is_empty() {
            let mut leftmost = None;
            for entry in forwarded.iter().rev() {
                // An unparsable entry is where the chain can no longer be trusted: stop there.
                let Ok(ip) = entry.parse::<IpAddr>() else {
                    return leftmost.map_or(direct, |ip| Client {
                        ip: Some(ip),
                        direct: false,
                    });
                };
                if !self.trusted_proxy(ip) {
                    return Client {
                        ip: Some(ip),
                        direct: false,
                    };
                }
                leftmost = Some(ip);
            }
            // Every entry is a trusted proxy (a client on the proxy's own host, or one that
            // wrote a proxy's address itself): the first is the client, as nginx's
            // `real_ip_recursive` reads it. Still forwarded, so never a direct loopback client.
            return Client {
                ip: leftmost,
                direct: false,
            };
        }
        match headers
            .get("x-real-ip")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse().ok())
        {
            Some(ip) => Client {
                ip: Some(ip),
                direct: false,
            },
            None => direct,
        }
    }

    /// Decide a request: `Err` is the refusal; `Ok` passes it on (with the CORS origin to echo,
    /// if any) or answers a preflight.
    fn admit(&self, req: &Request<Body>, peer: Option<SocketAddr>) -> Result<Admit, ApiError> {
        let headers = req.headers();
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let check_host = self.config.loopback_bind || !self.config.allowed_hosts.is_empty();
        if check_host && !host.is_empty() && !self.host_allowed(host) {
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
        // HEAD is answered by the GET route: it is guarded as that route.
        let method = if req.method() == Method::HEAD {
            &Method::GET
        } else {
            req.method()
        };
        if (self.operator)(method, req.uri().path()) {
            self.operator_allowed(headers)?;
        }
        let client = self.client(headers, peer);
        // Only the connection itself can show a loopback client: no header ever does.
        let local = client.direct && client.ip.is_some_and(|ip| ip.is_loopback());
        if !local || self.config.rate_limit_loopback {
            self.rate_limit(headers, client.ip)?;
        }
        Ok(Admit::Pass(cors, client.ip))
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

    /// Does the request carry the operator key? The only way to operator access.
    pub fn operator_allowed(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match &self.config.admin_api_key {
            Some(key) => {
                let given = headers
                    .get("x-api-key")
                    .map(HeaderValue::as_bytes)
                    .unwrap_or(b"");
                if constant_time_eq(given, key.as_bytes()) {
                    Ok(())
                } else {
                    Err(ApiError::Forbidden("operator route: send the operator key as X-API-Key (ADMIN_API_KEY, or the key file the server printed at start)".into()))
                }
            }
            None => Err(ApiError::Forbidden(
                "operator route: no operator key is configured on this server".into(),
            )),
        }
    }

    fn rate_limit(&self, headers: &HeaderMap, client: Option<IpAddr>) -> Result<(), ApiError> {
        let now = Instant::now();
        let per_client = self.config.client_rate_per_min;
        // An IPv6 client is counted by its /64 (one host holds a whole prefix).
        let key = client.map_or_else(
            || "client:unknown".to_owned(),
            |ip| format!("client:{}", ClientKey::of(ip)),
        );
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
    /// Pass it on; echo this CORS origin on the reply; the client's address.
    Pass(Option<HeaderValue>, Option<IpAddr>),
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
        HeaderValue::from_static(
            "content-type, x-session-id, x-api-key, x-watchdog-credential, x-harness-token",
        ),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    res
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
    // Under pressure a refused client gives its connection back instead of holding it open.
    if matches!(
        res.status(),
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
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

    /// Whether connections from `ip` carry many clients (a trusted proxy): see
    /// [`Guard::carries_many_clients`].
    pub fn carries_many_clients(&self, ip: IpAddr) -> bool {
        self.guard.carries_many_clients(ip)
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
            Ok(Admit::Pass(cors, client)) => {
                let mut req = req;
                // Only what a handler reads, so the common request allocates no extension map:
                // access when the key is there (absent means none), the address for WebSockets.
                if req.headers().contains_key("x-api-key")
                    && self.guard.operator_allowed(req.headers()).is_ok()
                {
                    req.extensions_mut().insert(OperatorAccess(true));
                }
                // The client's address for what is counted per client: WebSocket sessions
                // (`/ws`, `/watchdog/ws`) and what requests other than reads create (named
                // sessions, campaigns).
                if req.method() != Method::GET || req.uri().path().ends_with("/ws") {
                    req.extensions_mut().insert(ClientAddr(client));
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
            Ok(Admit::Pass(..)) => 200,
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
            Ok(Admit::Pass(None, _))
        ));
        let g = guard(SecurityConfig {
            cors_origins: vec!["https://app.example".into()],
            allowed_hosts: vec!["box.lan".into()],
            ..Default::default()
        });
        let listed = [("host", "box.lan:8000"), ("origin", "https://app.example")];
        assert!(matches!(
            g.admit(&req(Method::POST, "/step", &listed), LOCAL),
            Ok(Admit::Pass(Some(o), _)) if o == "https://app.example"
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
        // No key configured: refused to everyone, loopback included.
        let g = guard(SecurityConfig::default());
        assert_eq!(status(g.admit(&req(Method::POST, "/op", &[]), LOCAL)), 403);
        assert_eq!(status(g.admit(&req(Method::POST, "/op", &[]), REMOTE)), 403);
        assert_eq!(status(g.admit(&req(Method::GET, "/op", &[]), REMOTE)), 200);
        let g = guard(SecurityConfig {
            admin_api_key: Some("k".into()),
            ..Default::default()
        });
        assert_eq!(status(g.admit(&req(Method::POST, "/op", &[]), LOCAL)), 403);
        assert_eq!(
            status(g.admit(&req(Method::POST, "/op", &[("x-api-key", "x")]), LOCAL)),
            403
        );
        assert_eq!(
            status(g.admit(&req(Method::POST, "/op", &[("x-api-key", "k")]), REMOTE)),
            200
        );
    }

    /// Proxy headers count only from a trusted proxy, and then the rightmost untrusted entry;
    /// a forged loopback entry never exempts a client from the rate limit.
    #[test]
    fn forwarded_for_is_read_like_a_reverse_proxy() {
        let g = guard(SecurityConfig {
            trust_proxy_headers: true,
            client_rate_per_min: 1,
            ..Default::default()
        });
        let fwd = |v: &'static str| [("x-forwarded-for", v)];
        let c = g.client(
            &req(Method::GET, "/", &fwd("127.0.0.1, 10.9.9.9"))
                .headers()
                .clone(),
            LOCAL,
        );
        assert_eq!(c.ip, Some("10.9.9.9".parse().unwrap()));
        assert!(!c.direct);
        // From an untrusted peer the header is ignored.
        let c = g.client(
            &req(Method::GET, "/", &fwd("127.0.0.1")).headers().clone(),
            REMOTE,
        );
        assert_eq!(c.ip, REMOTE.map(|p| p.ip()));
        // A proxy that forwards a client claiming loopback: that client is throttled.
        let forged = fwd("127.0.0.1, 10.9.9.9");
        assert_eq!(status(g.admit(&req(Method::GET, "/", &forged), LOCAL)), 200);
        assert_eq!(status(g.admit(&req(Method::GET, "/", &forged), LOCAL)), 429);
        // Every entry a trusted proxy: the leftmost is the client, and it is forwarded, so a
        // forwarded loopback address is throttled like any other.
        let all_local = fwd("::1, 127.0.0.1");
        let c = g.client(&req(Method::GET, "/", &all_local).headers().clone(), LOCAL);
        assert_eq!((c.ip, c.direct), (Some("::1".parse().unwrap()), false));
        assert_eq!(
            status(g.admit(&req(Method::GET, "/", &all_local), LOCAL)),
            200
        );
        assert_eq!(
            status(g.admit(&req(Method::GET, "/", &all_local), LOCAL)),
            429
        );
    }

    /// A flood of new client keys evicts the least recently seen ones; a new client is never
    /// locked out by a full table.
    #[test]
    fn a_full_rate_table_never_locks_a_new_client_out() {
        let limiter = RateLimiter::new(100);
        let now = Instant::now();
        for i in 0..10_000 {
            assert!(limiter.check(&format!("client:{i}"), 2, now).is_ok());
        }
        assert!(limiter.check("client:new", 2, now).is_ok());
        assert!(limiter.check("client:new", 2, now).is_ok());
        assert!(limiter.check("client:new", 2, now).is_err());
        assert!(limiter.windows.lock().unwrap().len() <= 100);
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
