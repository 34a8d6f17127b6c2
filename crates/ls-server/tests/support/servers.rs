//! Both environments' default servers on ephemeral ports, for the tests that only need one
//! running as shipped (`api_reference.rs`, `ui.rs`).

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig};
use ls_server::audit::AuditConfig;
use ls_server::{ReportStore, ServerConfig, Shutdown};

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
    let state = ls_server::app_state(
        pool,
        EnvConfig::default(),
        &server,
        ReportStore::disabled(),
        &shutdown,
    );
    serve(ls_server::router(state), &server, shutdown).await
}

/// The audit environment with the default configuration.
pub async fn audit() -> String {
    let server = ServerConfig::default();
    let shutdown = Shutdown::new();
    let app = ls_server::audit::router(AuditConfig::default(), &server, &shutdown);
    serve(app, &server, shutdown).await
}
