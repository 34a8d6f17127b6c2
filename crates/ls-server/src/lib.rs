//! `ls-server` is the protocol layer: axum routes over both environments, per-session isolation,
//! bounded bodies, one JSON error type, one security guard and the accept loop with timeouts and
//! graceful shutdown. It holds no domain logic.
//!
//! Generic layer (knows no environment):
//! * [`config`]: [`ServerConfig`], parsed once by the binary and passed down.
//! * [`sessions`]: the bounded, expiring session map and the `X-Session-Id` extractor.
//! * [`body`]: streamed, size-limited, timed body extraction and the reply writers.
//! * [`error`]: [`ApiError`], the single error enum and its JSON mapping.
//! * [`security`]: Host/Origin checks, CORS, admin key, rate limits, security headers.
//! * [`serve`]: the accept loop (timeouts, graceful shutdown on SIGTERM/SIGINT); [`shutdown`].
//! * [`protocol`]: the OpenEnv traits; [`openenv`]: their routes ([`ws`] at `/ws`, [`ws_mcp`]
//!   MCP JSON-RPC, [`discovery`] `/metadata`, `/schema`); [`ws_socket`]: the upgrade admission
//!   and session loop `/ws` and the watchdog socket share.
//! * [`route_table`]: every route is registered with its documentation; [`openapi`] builds
//!   `/openapi.json` from that table and [`docs_page`] renders it as the `/docs` page.
//!
//! Environment adapters (depend on the generic layer; nothing depends on them):
//! * [`controlbench`] (HTTP routes), [`controlbench_openenv`] (OpenEnv traits).
//! * [`audit`]: the Financial Audit environment (HTTP routes and OpenEnv traits).
//!
//! The product routes (reports, stored runs, comparisons, agent runs, counterfactuals) and the
//! workbench (`/ui/`) live in `ls-product`, which keeps its own state and is merged in with
//! [`router_with`] ([`Extra`]): this crate depends on no report, store, agent or workbench crate.

pub mod audit;
pub mod body;
pub mod capacity;
pub mod config;
mod conn_timer;
pub mod controlbench;
pub mod controlbench_openenv;
pub mod discovery;
pub mod docs_page;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod openapi;
pub mod openenv;
pub mod protocol;
pub mod route_table;
pub mod security;
pub mod serve;
pub mod sessions;
pub mod shutdown;
pub mod watchdog_credential;
pub mod watchdog_role;
pub mod watchdog_ws;
pub mod ws;
pub mod ws_config;
pub mod ws_error;
pub mod ws_mcp;
pub mod ws_socket;

pub use config::{SecurityConfig, ServerConfig, Timeouts};
pub use controlbench::{app_state, AppState, Shared};
pub use error::ApiError;
pub use serve::serve;
pub use shutdown::Shutdown;

use axum::http::{Method, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::Router;

async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {}", error::prefix(uri.path())))
}

async fn method_not_allowed(method: Method, uri: Uri) -> impl IntoResponse {
    let e = ApiError::BadRequest(format!(
        "method {method} is not allowed on {}",
        error::prefix(uri.path())
    ));
    (StatusCode::METHOD_NOT_ALLOWED, axum::Json(e.body()))
}

/// An application as served: the router behind the security guard.
pub type App = security::Guarded<Router>;

/// The security guard, wrapped once around the whole router rather than around each route
/// (`Router::layer` boxes every route once more, one clone and one boxed future per request).
pub fn guarded(
    router: Router,
    security: &SecurityConfig,
    operator: security::OperatorRoutes,
) -> App {
    security::Guarded::new(router, security::Guard::new(security.clone(), operator))
}

/// Routes another crate adds to an application (each set with its own state), documented in the
/// same `/openapi.json` and `/docs` and behind the same guard.
pub struct Extra {
    /// Mounted after the environment's protocol routes (ControlBench: after its OpenEnv routes,
    /// before the watchdog role's).
    pub routes: route_table::ApiRoutes,
    /// Mounted after every other route (the workbench).
    pub last: route_table::ApiRoutes,
    /// The application's operator routes: the environment's (such as
    /// [`controlbench::is_operator_route`]) and the added routes'.
    pub operator: security::OperatorRoutes,
}

impl Extra {
    /// Nothing added: the protocol application alone.
    pub fn none(operator: security::OperatorRoutes) -> Self {
        Self {
            routes: route_table::ApiRoutes::new(),
            last: route_table::ApiRoutes::new(),
            operator,
        }
    }
}

/// The ControlBench protocol application (no product routes, no workbench); serve it with
/// [`serve()`].
pub fn router(state: Shared) -> App {
    router_with(state, Extra::none(controlbench::is_operator_route))
}

/// The ControlBench application with `extra` merged in.
pub fn router_with(state: Shared, extra: Extra) -> App {
    let security = state.security.clone();
    let info = openapi::ApiInfo::of(&*state);
    let protocol = controlbench::routes()
        .merge(controlbench_openenv::routes())
        .with_state(state.clone());
    let watchdog = watchdog_ws::routes().with_state(state);
    let routes = protocol
        .merge(extra.routes)
        .merge(watchdog)
        .merge(extra.last);
    let operator = extra.operator;
    let router = openapi::with_reference(routes, info, operator);
    guarded(
        router
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed),
        &security,
        operator,
    )
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
