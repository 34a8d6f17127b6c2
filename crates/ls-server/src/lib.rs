//! `ls-server` is the protocol layer: axum routes over the environments, per-session isolation,
//! bounded bodies and one JSON error type. It holds no domain logic.
//!
//! * [`controlbench`]: `/`, `/health`, `/reset`, `/step`, `/state`, institutional-memory routes.
//! * [`sessions`]: the bounded, expiring session map.
//! * [`body`]: streamed, size-limited JSON body extraction.
//! * [`error`]: [`ApiError`], the single error enum and its JSON mapping.
//! * [`openenv`]: OpenEnv protocol surface, generic over the environment ([`ws`] sessions at
//!   `/ws`, [`ws_mcp`] MCP JSON-RPC, [`discovery`] `/metadata`, `/schema`, `/openapi.json`).
//! * [`reports`]: report-backed product endpoints.
//! * [`audit`]: the Financial Audit environment on the same OpenEnv machinery.

pub mod audit;
pub mod body;
pub mod controlbench;
pub mod discovery;
pub mod error;
pub mod openenv;
pub mod reports;
pub mod sessions;
pub mod ws;
pub mod ws_mcp;

pub use controlbench::{app_state, AppState, Shared};
pub use error::ApiError;

use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::Router;
use tower_http::cors::CorsLayer;
use tower_http::set_header::SetResponseHeaderLayer;

async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {}", uri.path().chars().take(200).collect::<String>()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> impl IntoResponse {
    let e = ApiError::BadRequest(format!("method {method} is not allowed on {}", uri.path().chars().take(200).collect::<String>()));
    (StatusCode::METHOD_NOT_ALLOWED, axum::Json(e.body()))
}

/// The ControlBench application as served: the router inside the cross-cutting layers.
pub type App = tower_http::cors::Cors<tower_http::set_header::SetResponseHeader<Router, HeaderValue>>;

/// Cross-cutting layers, wrapped once around the whole router rather than around each route
/// (`Router::layer` boxes every route once more, one clone and one boxed future per request).
pub fn with_common_layers(router: Router) -> App {
    let router = router.fallback(not_found).method_not_allowed_fallback(method_not_allowed);
    tower::ServiceBuilder::new()
        // Permissive CORS (any origin, method and header; browsers' preflights answered). The
        // answer never depends on the request's origin, so no `Vary` header: building it cost
        // ~1 % of an episode's instructions, rebuilt on every reply.
        .layer(CorsLayer::permissive().vary([]))
        .layer(SetResponseHeaderLayer::if_not_present(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")))
        .service(router)
}

/// The ControlBench application; serve it with `axum::serve(listener, make_service(app))`.
pub fn router(state: Shared) -> App {
    with_common_layers(controlbench::routes().merge(openenv::routes()).merge(reports::routes()).merge(ls_ui::router()).with_state(state))
}

/// An [`App`] as `axum::serve` takes it.
pub fn make_service(app: App) -> axum::routing::IntoMakeService<App> {
    axum::ServiceExt::<axum::extract::Request>::into_make_service(app)
}

/// Periodically drop idle sessions.
pub fn spawn_session_sweeper(state: Shared) {
    let every = (state.sessions.idle_timeout / 4).max(std::time::Duration::from_secs(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let dropped = state.sessions.sweep();
            if dropped > 0 {
                tracing::info!(dropped, "expired idle sessions");
            }
        }
    });
}
