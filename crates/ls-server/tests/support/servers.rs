//! Both environments' protocol servers on ephemeral ports: with the default configuration, or
//! ControlBench with a track mode and an operator key (the route tests). The applications as
//! shipped (product routes and the workbench included) are `ls-product`'s
//! `tests/support/servers.rs`.

// Each test binary that includes this module calls only some of its servers.
#![allow(dead_code)]

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig, TrackMode};
use ls_server::audit::AuditConfig;
use ls_server::{ServerConfig, Shutdown};

/// Serve `app` on an ephemeral loopback port; its base URL.
pub async fn serve(app: ls_server::App, server: &ServerConfig, shutdown: Shutdown) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("http://{addr}")
}

/// ControlBench with the embedded fixtures and the default configuration.
pub async fn controlbench() -> String {
    let pool = CasePool::new(FixtureSet::embedded().expect("embedded fixtures"));
    let server = ServerConfig::default();
    let shutdown = Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig::default(), &server, &shutdown);
    serve(ls_server::router(state), &server, shutdown).await
}

/// ControlBench with the embedded fixtures in `mode`, with `admin_key` as the operator key (16
/// sessions, 10 minutes idle).
pub async fn controlbench_with(mode: TrackMode, admin_key: Option<&str>) -> String {
    let pool = CasePool::new(FixtureSet::embedded().expect("embedded fixtures"));
    let mut server = ServerConfig {
        max_sessions: 16,
        session_idle: std::time::Duration::from_secs(600),
        ..Default::default()
    };
    server.security.admin_api_key = admin_key.map(str::to_owned);
    let shutdown = Shutdown::new();
    let state = ls_server::app_state(pool, EnvConfig { track_mode: mode }, &server, &shutdown);
    serve(ls_server::router(state), &server, shutdown).await
}

/// The audit environment with the default configuration.
pub async fn audit() -> String {
    let server = ServerConfig::default();
    let shutdown = Shutdown::new();
    let app = ls_server::audit::router(AuditConfig::default(), &server, &shutdown);
    serve(app, &server, shutdown).await
}
