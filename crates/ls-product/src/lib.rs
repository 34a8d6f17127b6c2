//! `ls-product`: the ControlBench product routes, over the protocol layer (`ls-server`).
//!
//! The protocol layer serves episodes, sessions and the OpenEnv protocol and knows nothing of
//! reports, stores or agents; this crate adds what is built on them:
//! * [`reports`]: the report-backed endpoints (leaderboard, benchmark report, certify,
//!   summaries, stored runs) over the persistent [`report_store`];
//! * [`comparisons`]: stored live model comparisons;
//! * [`agent_runs`]: a scripted agent (or the `llm` agent against an endpoint, [`llm_runs`])
//!   played in-process on served cases; [`hand_runs`]: an episode played by hand stored as a run;
//! * [`sealed_runs`]: sealed evaluation runs on held-out cases (no grade per episode, the run's
//!   score once; the per-case grades for the operator);
//! * [`counterfactual`]: counterfactual queries on the causal model of the session's case
//!   (answered by the report crate's causal model, so it lives here rather than in the protocol);
//! * [`workbench`]: the browser workbench (`ls-ui`, `/ui/`), mounted in both applications.
//!
//! The routes keep their own state ([`ProductState`]: the report store beside the protocol
//! layer's [`Shared`] state, which they read for sessions and the served pool) and are merged
//! into the protocol router by [`app`] with [`ls_server::router_with`]; [`is_operator_route`]
//! adds their operator routes to the protocol layer's.

pub mod agent_runs;
pub mod comparisons;
pub mod counterfactual;
pub mod hand_runs;
pub mod llm_runs;
pub mod report_store;
pub mod reports;
pub mod sealed_runs;
pub mod workbench;

pub use report_store::ReportStore;

use axum::http::Method;
use ls_server::controlbench::AppState;
use ls_server::route_table::ApiRoutes;
use ls_server::Shared;
use std::sync::Arc;

/// The product routes' state: the report store, and the protocol layer's state (sessions, the
/// served pool and configuration), which it reads through [`std::ops::Deref`].
pub struct ProductState {
    pub app: Shared,
    /// Persistent report store behind the product endpoints.
    pub reports: ReportStore,
    /// The agent runs being played now ([`agent_runs::MAX_CONCURRENT_AGENT_RUNS`] at most).
    pub agent_runs: Arc<tokio::sync::Semaphore>,
    /// The sealed runs ([`sealed_runs`]).
    pub sealed: sealed_runs::registry::SealedRuns,
    /// The served fixtures as one set, for the held-out generators (built on first use).
    pub sealed_fixtures: std::sync::OnceLock<Arc<ls_core::FixtureSet>>,
}

impl std::ops::Deref for ProductState {
    type Target = AppState;

    fn deref(&self) -> &AppState {
        &self.app
    }
}

/// The product routes' shared state.
pub type Product = Arc<ProductState>;

/// Every product route, with its documentation and its state.
pub fn routes(app: Shared, reports: ReportStore) -> ApiRoutes {
    let state: Product = Arc::new(ProductState {
        app,
        reports,
        agent_runs: Arc::new(tokio::sync::Semaphore::new(
            agent_runs::MAX_CONCURRENT_AGENT_RUNS,
        )),
        sealed: sealed_runs::registry::SealedRuns::new(Default::default()),
        sealed_fixtures: Default::default(),
    });
    reports::routes()
        .merge(agent_runs::routes())
        .merge(hand_runs::routes())
        .merge(comparisons::routes())
        .merge(counterfactual::routes())
        .merge(sealed_runs::routes())
        .with_state(state)
}

/// The product's operator routes (the operator key, from every address).
pub fn is_product_operator_route(method: &Method, path: &str) -> bool {
    // Stored runs hold other agents' decisions and evidence for the same cases: an agent under
    // evaluation must not read them, so they are operator reads.
    let stored_runs = *method == Method::GET && (path == "/runs" || path.starts_with("/runs/"));
    // A scripted agent's submissions on a served case are a worked answer.
    let agent_runs = *method == Method::POST && (path == "/agent-runs" || path == hand_runs::ROUTE);
    // A sealed run's per-case grades are what the run withholds from its player.
    stored_runs || agent_runs || sealed_runs::is_operator_route(method, path)
}

/// The operator routes of the served application: the protocol layer's and the product's.
pub fn is_operator_route(method: &Method, path: &str) -> bool {
    ls_server::controlbench::is_operator_route(method, path)
        || is_product_operator_route(method, path)
}

/// The ControlBench application as shipped: the protocol router with the product routes and the
/// workbench merged in, behind one security guard; serve it with [`ls_server::serve()`].
pub fn app(state: Shared, reports: ReportStore) -> ls_server::App {
    let extra = ls_server::Extra {
        routes: routes(state.clone(), reports),
        last: workbench::routes(),
        operator: is_operator_route,
    };
    ls_server::router_with(state, extra)
}

/// The audit application as shipped: its protocol router with the workbench.
pub fn audit_app(
    config: ls_server::audit::AuditConfig,
    server: &ls_server::ServerConfig,
    shutdown: &ls_server::Shutdown,
) -> ls_server::App {
    ls_server::audit::router_with(config, server, shutdown, workbench::routes())
}
