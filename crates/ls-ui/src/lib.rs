//! `ls-ui`: the LedgerShield workbench, a browser front end served by the binary at `/ui/`.
//!
//! The assets (`assets/`: one HTML page, one stylesheet, plain JavaScript ES modules) are embedded
//! at compile time; there is no build step, no CDN and no external font, so the workbench works
//! offline on a fresh machine. The pages talk only to the public routes the agents use (`/reset`,
//! `/step`, `/state`, `/mcp`, the report routes, the audit routes), so blind mode stays blind.
//!
//! [`router`] is generic over the router state so both environments mount it with one `merge`.
//! Every asset is served with its content type, a strong `ETag` (FNV-1a of the bytes, computed at
//! compile time) and `Cache-Control: no-cache` (revalidate each load; a matching
//! `If-None-Match` gets `304 Not Modified`). The HTML page carries a strict
//! `Content-Security-Policy` (same-origin scripts, styles and connections; no inline code).

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, MethodRouter};
use axum::Router;
use std::sync::LazyLock;

/// The policy sent with the HTML page: nothing inline, nothing from another origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Path under `/ui/` (empty for the page itself).
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
    /// Quoted strong validator.
    pub etag: &'static str,
}

/// FNV-1a (64 bit) of the bytes: a cheap, stable content hash for the `ETag`.
pub const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

const fn hex_etag(h: u64) -> [u8; 18] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [b'"'; 18];
    let mut i = 0;
    while i < 16 {
        out[1 + i] = HEX[((h >> (60 - 4 * i)) & 0xf) as usize];
        i += 1;
    }
    out
}

macro_rules! assets {
    ($( $path:literal => $file:literal, $ctype:expr; )*) => {
        /// Every embedded asset.
        pub const ASSETS: &[Asset] = &[ $( {
            const BODY: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/", $file));
            const TAG: [u8; 18] = hex_etag(fnv1a(BODY));
            Asset {
                path: $path,
                content_type: $ctype,
                body: BODY,
                etag: match std::str::from_utf8(&TAG) { Ok(s) => s, Err(_) => panic!("hex is ASCII") },
            }
        }, )* ];
    };
}

const JS: &str = "text/javascript; charset=utf-8";

assets! {
    "" => "index.html", "text/html; charset=utf-8";
    "app.css" => "app.css", "text/css; charset=utf-8";
    "favicon.svg" => "favicon.svg", "image/svg+xml";
    "js/main.js" => "js/main.js", JS;
    "js/api.js" => "js/api.js", JS;
    "js/dom.js" => "js/dom.js", JS;
    "js/charts.js" => "js/charts.js", JS;
    "js/docview.js" => "js/docview.js", JS;
    "js/play.js" => "js/play.js", JS;
    "js/grade.js" => "js/grade.js", JS;
    "js/replay.js" => "js/replay.js", JS;
    "js/board.js" => "js/board.js", JS;
    "js/institution.js" => "js/institution.js", JS;
    "js/audit.js" => "js/audit.js", JS;
    "js/audit_episode.js" => "js/audit_episode.js", JS;
    "js/submitform.js" => "js/submitform.js", JS;
    "js/results.js" => "js/results.js", JS;
    "js/instrumented.js" => "js/instrumented.js", JS;
    "js/runner.js" => "js/runner.js", JS;
}

/// The server's authority levels, most authority first (the order of `AuthorityLevel::rank`).
pub fn authority_levels() -> Vec<&'static str> {
    use ls_env::memory::AuthorityLevel as A;
    // An exhaustive match: a new level fails to compile here until it is listed.
    let all = [
        A::FullAuthority,
        A::RestrictedAuthority,
        A::ReviewOnly,
        A::Locked,
    ];
    for a in all {
        match a {
            A::FullAuthority | A::RestrictedAuthority | A::ReviewOnly | A::Locked => {}
        }
    }
    let mut v = all.to_vec();
    v.sort_by_key(|a| a.rank());
    v.into_iter().map(|a| a.as_str()).collect()
}

/// The vocabulary the decision form offers, from the domain crate (one source of truth):
/// decisions, each task family's output contract (`ls_core::contract`), the 27 canonical reason
/// codes, the server's authority levels in rank order, the tracks, the action catalogue with costs,
/// curated case ids.
pub fn catalog() -> &'static [u8] {
    static CATALOG: LazyLock<Vec<u8>> = LazyLock::new(|| {
        use ls_core::{ActionKind, ActionName, Decision};
        let kind = |k: ActionKind| match k {
            ActionKind::Investigation => "investigation",
            ActionKind::Intervention => "intervention",
            ActionKind::Final => "final",
        };
        let actions: Vec<_> = ActionName::ALL
            .iter()
            .map(|a| serde_json::json!({"name": a.as_str(), "kind": kind(a.kind()), "cost": a.base_cost()}))
            .collect();
        let cases: Vec<_> = ls_core::FixtureSet::embedded()
            .map(|s| s.cases.iter().map(|c| serde_json::json!({"case_id": c.case_id, "task_type": c.task_type.as_str()})).collect())
            .unwrap_or_default();
        let contracts: serde_json::Map<String, serde_json::Value> = ls_core::TaskType::ALL
            .iter()
            .map(|t| {
                (
                    t.as_str().to_owned(),
                    serde_json::to_value(ls_core::contract::output_contract(*t))
                        .unwrap_or_default(),
                )
            })
            .collect();
        // Every track a reset may name, from the track table (the case track is the default).
        let tracks: Vec<_> = ls_core::BenchmarkTrack::ALL
            .into_iter()
            .filter(|t| *t != ls_core::BenchmarkTrack::Case)
            .map(|t| serde_json::json!({"track": t, "label": t.label(), "description": t.description()}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "decisions": Decision::ALL.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
            "output_contracts": contracts,
            "authority_levels": authority_levels(),
            "tracks": tracks,
            "agents": ls_agents::OFFLINE_AGENTS,
            "reason_codes": {"discrepancy": ls_core::text::DISCREPANCY_CODES, "fraud": ls_core::text::FRAUD_CODES},
            "actions": actions,
            "curated_cases": cases,
        }))
        .unwrap_or_default()
    });
    &CATALOG
}

fn find(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

fn serve(asset: &Asset, headers: &HeaderMap) -> Response {
    let not_modified = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim() == asset.etag || t.trim() == "*")
        });
    let mut resp = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let h = resp.headers_mut();
    if !not_modified {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
    }
    h.insert(header::ETAG, HeaderValue::from_static(asset.etag));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if asset.path.is_empty() {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
    resp
}

async fn page(headers: HeaderMap) -> Response {
    match find("") {
        Some(a) => serve(a, &headers),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn asset(
    axum::extract::Path(path): axum::extract::Path<String>,
    headers: HeaderMap,
) -> Response {
    if path == "catalog.json" {
        let mut resp = catalog().into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        return resp;
    }
    match find(&path).filter(|a| !a.path.is_empty()) {
        Some(a) => serve(a, &headers),
        None => not_found(&path),
    }
}

fn not_found(path: &str) -> Response {
    let name: String = path.chars().take(200).collect();
    let body = serde_json::json!({"error": {"code": "not_found", "message": format!("no workbench asset /ui/{name}")}});
    (StatusCode::NOT_FOUND, axum::Json(body)).into_response()
}

/// One workbench route (all are `GET`): what it serves, for the server's API reference.
pub struct UiRoute<S> {
    pub path: &'static str,
    pub summary: &'static str,
    /// The success status (`308` for the redirect, else `200`).
    pub status: u16,
    /// The media type of a success reply.
    pub media: &'static str,
    pub route: MethodRouter<S>,
}

/// The workbench routes: `/ui` (redirects to `/ui/`), `/ui/`, `/ui/catalog.json` and every asset.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Vec<UiRoute<S>> {
    vec![
        UiRoute {
            path: "/ui",
            summary: "Redirect to the workbench at `/ui/`",
            status: 308,
            media: "text/plain",
            route: get(|| async { Redirect::permanent("/ui/") }),
        },
        UiRoute {
            path: "/ui/",
            summary: "The workbench page",
            status: 200,
            media: "text/html; charset=utf-8",
            route: get(page),
        },
        UiRoute {
            path: "/ui/{*path}",
            summary: "A workbench asset (`app.css`, `favicon.svg`, `js/*.js`) or `catalog.json`; `ETag` / `If-None-Match` answer 304",
            status: 200,
            media: "application/octet-stream",
            route: get(asset),
        },
    ]
}

/// The workbench routes as a router (see [`routes`]).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    routes()
        .into_iter()
        .fold(Router::new(), |r, u| r.route(u.path, u.route))
}

#[cfg(test)]
mod tests;
