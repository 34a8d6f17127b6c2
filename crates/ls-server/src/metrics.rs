//! Prometheus metrics at `GET /metrics` (text exposition format) on both environments: HTTP
//! requests by method, route and status, their latency, requests in flight, errors, live and
//! created sessions, and episodes started over HTTP and `/ws`. One process-wide registry.
//!
//! [`Metered`] wraps the whole application once per connection (outside the security guard, so
//! requests the guard refuses are counted too). A `GET /metrics` still goes through the guard and
//! the router: when the environment has no `/metrics` route of its own (ControlBench) its 404
//! becomes the exposition; the Financial Audit environment keeps the reference's JSON counters
//! there, and answers the exposition when the client asks for it the way Prometheus does
//! (`Accept: text/plain` or `application/openmetrics-text`) or with `?format=prometheus`.
//!
//! Labels come from closed sets, so no client-chosen string becomes a series: the method label is
//! one of the nine standard methods, else `other`; the route label is the path's first segment
//! when it is one the servers serve, else `other`. Nothing per session, case or score is exported
//! (blind mode hides nothing more than a request count could already show).
//!
//! The format matches its content type: the Prometheus text format 0.0.4 (`text/plain;
//! version=0.0.4`, counter families named with their `_total` samples, no `# EOF`) unless the
//! client asks for OpenMetrics (`Accept: application/openmetrics-text`), which it then gets as
//! `application/openmetrics-text; version=1.0.0`.

use axum::body::Body;
use axum::http::{header, HeaderValue, Method, Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Instant;

/// The content type of the text format 0.0.4 (the default exposition).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of the OpenMetrics exposition (when the client asks for it).
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The method labels; any other method is `other`.
const METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT",
];

/// The method label of a request: a standard method, else `other`.
pub fn method_label(method: &Method) -> &'static str {
    METHODS
        .iter()
        .find(|m| **m == method.as_str())
        .copied()
        .unwrap_or("other")
}

/// First path segments that name a route of either server; any other path is `other`.
const ROUTES: &[&str] = &[
    "reset",
    "step",
    "state",
    "health",
    "ws",
    "mcp",
    "metadata",
    "schema",
    "docs",
    "openapi.json",
    "ui",
    "tasks",
    "grader",
    "session",
    "leaderboard",
    "metrics",
    "runs",
    "report",
    "reports",
    "benchmark-report",
    "institutional-memory",
    "institutional-reset",
    "baseline",
    "adaptive-difficulty",
    "campaign",
    "adversarial",
    "overseer",
    "self-improve",
    "human-baseline",
    "controlbench-summary",
    "holdout-challenge",
    "watchdog",
    "agent-runs",
    "hand-runs",
    "comparisons",
    "counterfactual",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabels {
    transport: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

type LatencyFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
    errors: Family<ClassLabels, Counter>,
    in_flight: Gauge,
    sessions: Gauge,
    sessions_created: Counter,
    episodes: Family<TransportLabels, Counter>,
}

fn latency_histogram() -> Histogram {
    // 0.25 ms … about 8 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

fn metrics() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| {
        let mut registry = Registry::with_prefix("ledgershield");
        let m = Metrics {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            errors: Family::default(),
            in_flight: Gauge::default(),
            sessions: Gauge::default(),
            sessions_created: Counter::default(),
            episodes: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route and status",
            m.requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to the response head, by route",
            m.latency.clone(),
        );
        registry.register(
            "http_errors",
            "Responses with a 4xx (client) or 5xx (server) status",
            m.errors.clone(),
        );
        registry.register(
            "http_requests_in_flight",
            "Requests being handled now",
            m.in_flight.clone(),
        );
        registry.register(
            "sessions_active",
            "Live sessions (the default one included)",
            m.sessions.clone(),
        );
        registry.register(
            "sessions_created",
            "Sessions created",
            m.sessions_created.clone(),
        );
        registry.register(
            "episodes_started",
            "Episodes started by a successful reset, by transport (http, ws)",
            m.episodes.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        registry.register("build_info", "The running build", build);
        Metrics { registry, ..m }
    })
}

/// The route label of a path (see the module docs).
pub fn route_label(path: &str) -> &'static str {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    if first.is_empty() {
        return "root";
    }
    ROUTES
        .iter()
        .find(|r| **r == first)
        .copied()
        .unwrap_or("other")
}

/// The OpenMetrics exposition of every metric.
pub fn render_openmetrics() -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &metrics().registry);
    out
}

/// The text format 0.0.4 exposition of every metric.
pub fn render() -> String {
    to_text_004(&render_openmetrics())
}

/// The 0.0.4 text of an OpenMetrics exposition of this registry's kinds (counters, gauges,
/// histograms): a counter family's `# HELP` and `# TYPE` name its `_total` samples, `# UNIT`
/// and `# EOF` go; samples are written alike in both formats.
fn to_text_004(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta.and_then(|(p, rest)| rest.split_once(' ').map(|(name, tail)| (p, name, tail))) {
            Some((p, name, tail)) if counters.contains(name) => {
                out.push_str(p);
                out.push_str(name);
                out.push_str("_total ");
                out.push_str(tail);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// An episode started (a successful reset) over `transport` (`http` or `ws`).
pub fn episode_started(transport: &str) {
    metrics()
        .episodes
        .get_or_create(&TransportLabels {
            transport: transport.into(),
        })
        .inc();
}

/// Held by each live session: counts it in `sessions_active` until dropped, however the session
/// ends (closed, expired, swept, or its map dropped).
#[derive(Debug)]
pub struct LiveSession(());

impl LiveSession {
    pub fn new() -> Self {
        let m = metrics();
        m.sessions.inc();
        m.sessions_created.inc();
        Self(())
    }
}

impl Default for LiveSession {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for LiveSession {
    fn drop(&mut self) {
        metrics().sessions.dec();
    }
}

/// The exposition formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Text004,
    OpenMetrics,
}

/// The format the request asks for: OpenMetrics when `Accept` lists it (Prometheus asks for it
/// first), else text 0.0.4; `None` when it asks for neither (a JSON client of the audit
/// environment's counters), unless `?format=prometheus`.
fn wanted_format<B>(req: &Request<B>) -> Option<Format> {
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.contains("application/openmetrics-text") {
        Some(Format::OpenMetrics)
    } else if accept.contains("text/plain")
        || req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "format=prometheus"))
    {
        Some(Format::Text004)
    } else {
        None
    }
}

fn exposition(format: Format) -> Response<Body> {
    let (text, content_type) = match format {
        Format::Text004 => (render(), CONTENT_TYPE),
        Format::OpenMetrics => (render_openmetrics(), OPENMETRICS_CONTENT_TYPE),
    };
    let mut res = Response::new(Body::from(text));
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// Decrements the in-flight gauge when the request ends, answered or dropped.
struct InFlight;

impl InFlight {
    fn start() -> Self {
        metrics().in_flight.inc();
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        metrics().in_flight.dec();
    }
}

fn record(method: &'static str, route: &'static str, status: StatusCode, started: Instant) {
    let m = metrics();
    m.requests
        .get_or_create(&RequestLabels {
            method: method.into(),
            route: route.into(),
            status: status.as_u16().to_string(),
        })
        .inc();
    m.latency
        .get_or_create(&RouteLabels {
            route: route.into(),
        })
        .observe(started.elapsed().as_secs_f64());
    let class = if status.is_server_error() {
        "5xx"
    } else if status.is_client_error() {
        "4xx"
    } else {
        return;
    };
    m.errors
        .get_or_create(&ClassLabels {
            class: class.into(),
        })
        .inc();
}

/// The metering service around an application (see the module docs).
#[derive(Clone)]
pub struct Metered<S> {
    inner: S,
}

impl<S> Metered<S> {
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, B> tower::Service<Request<B>> for Metered<S>
where
    S: tower::Service<Request<B>, Response = Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let started = Instant::now();
        let method = method_label(req.method());
        let route = route_label(req.uri().path());
        let metrics_get = req.method() == Method::GET && req.uri().path() == "/metrics";
        let format = if metrics_get {
            wanted_format(&req)
        } else {
            None
        };
        let is_reset = req.method() == Method::POST && route == "reset";
        let in_flight = InFlight::start();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let Ok(mut res) = fut.await;
            let status = res.status();
            if metrics_get && status == StatusCode::NOT_FOUND {
                res = exposition(format.unwrap_or(Format::Text004));
            } else if let (Some(format), true) = (format, status.is_success()) {
                res = exposition(format);
            }
            if is_reset && status.is_success() {
                episode_started("http");
            }
            record(method, route, res.status(), started);
            drop(in_flight);
            Ok(res)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_labels_are_bounded() {
        assert_eq!(route_label("/"), "root");
        assert_eq!(route_label("/reset"), "reset");
        assert_eq!(route_label("/runs/abc/episodes/3"), "runs");
        assert_eq!(route_label("/ui/app.js"), "ui");
        assert_eq!(route_label("/%00evil/x"), "other");
        assert_eq!(route_label("/a-client-chosen-string"), "other");
    }

    #[test]
    fn method_labels_are_a_closed_set() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        for m in ["FOO", "get", "PROPFIND", "X1234567890"] {
            assert_eq!(
                method_label(&Method::from_bytes(m.as_bytes()).unwrap()),
                "other"
            );
        }
    }

    /// Text 0.0.4 names a counter family by its `_total` samples and has no `# EOF`; the
    /// OpenMetrics exposition keeps both as OpenMetrics writes them.
    #[test]
    fn text_004_and_openmetrics_differ_where_the_formats_do() {
        episode_started("http");
        let om = render_openmetrics();
        assert!(
            om.contains("# TYPE ledgershield_episodes_started counter\n"),
            "{om}"
        );
        assert!(om.trim_end().ends_with("# EOF"), "{om}");
        let text = to_text_004(&om);
        assert!(
            text.contains("# TYPE ledgershield_episodes_started_total counter\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP ledgershield_episodes_started_total "),
            "{text}"
        );
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE ledgershield_sessions_active gauge\n"),
            "{text}"
        );
        // Samples are unchanged.
        let samples = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| !l.starts_with('#'))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(samples(&om), samples(&text));
    }

    #[test]
    fn exposition_names_every_family() {
        episode_started("ws");
        drop(LiveSession::new());
        let text = render();
        for name in [
            "ledgershield_episodes_started_total{transport=\"ws\"}",
            "# TYPE ledgershield_sessions_active gauge",
            "ledgershield_sessions_created_total",
            "# TYPE ledgershield_http_request_duration_seconds histogram",
            "# TYPE ledgershield_http_requests_in_flight gauge",
            "ledgershield_build_info{version=",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
