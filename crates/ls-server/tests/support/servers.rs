//! Both environments' servers on ephemeral ports: with the default configuration, or
//! ControlBench with a track mode and an operator key (the route tests). Here the applications
//! are the protocol routers; `ls-product`'s `tests/support/servers.rs` includes this module and
//! composes the applications as shipped (product routes and the workbench included) through the
//! `*_composed` functions.

// Each test binary that includes this module calls only some of its servers.
#![allow(dead_code)]

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, TrackMode};
use ls_server::audit::AuditConfig;
use ls_server::{ServerConfig, Shared, Shutdown};

/// Serve `app` on an ephemeral loopback port; its base URL.
pub async fn serve(app: ls_server::App, server: &ServerConfig, shutdown: Shutdown) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("http://{addr}")
}

/// The route tests' server configuration: 16 sessions, 10 minutes idle, `admin_key` as the
/// operator key.
pub fn route_test_config(admin_key: Option<&str>) -> ServerConfig {
    let mut server = ServerConfig {
        max_sessions: 16,
        session_idle: std::time::Duration::from_secs(600),
        ..Default::default()
    };
    server.security.admin_api_key = admin_key.map(str::to_owned);
    server
}

/// ControlBench with the embedded fixtures in `mode` under `server`, the application composed
/// from its state by `compose`.
pub async fn controlbench_composed(
    mode: TrackMode,
    server: ServerConfig,
    compose: impl FnOnce(Shared) -> ls_server::App,
) -> String {
    let pool = CasePool::new(FixtureSet::embedded().expect("embedded fixtures"));
    let shutdown = Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig { track_mode: mode }, &server, &shutdown);
    serve(compose(state), &server, shutdown).await
}

/// The audit environment with the default configuration, the application composed by `compose`.
pub async fn audit_composed(
    compose: impl FnOnce(AuditConfig, &ServerConfig, &Shutdown) -> ls_server::App,
) -> String {
    let server = ServerConfig::default();
    let shutdown = Shutdown::new();
    let app = compose(AuditConfig::default(), &server, &shutdown);
    serve(app, &server, shutdown).await
}

/// ControlBench with the embedded fixtures and the default configuration.
pub async fn controlbench() -> String {
    controlbench_composed(
        EnvConfig::default().track_mode,
        ServerConfig::default(),
        ls_server::router,
    )
    .await
}

/// ControlBench with the embedded fixtures in `mode`, with `admin_key` as the operator key (16
/// sessions, 10 minutes idle).
pub async fn controlbench_with(mode: TrackMode, admin_key: Option<&str>) -> String {
    controlbench_composed(mode, route_test_config(admin_key), ls_server::router).await
}

/// The audit environment with the default configuration.
pub async fn audit() -> String {
    audit_composed(ls_server::audit::router).await
}
