//! The workbench is mounted on both environments' routers: the page, its policy and its modules.

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig};
use ls_server::audit::AuditConfig;
use ls_server::{ReportStore, ServerConfig, Shutdown};

async fn serve(app: ls_server::App, server: &ServerConfig, shutdown: Shutdown) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(listener, app, server.timeouts, shutdown));
    format!("http://{addr}")
}

async fn controlbench() -> String {
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

async fn check_workbench(base: &str) {
    let r = reqwest::get(format!("{base}/ui/")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(
        r.headers()["content-security-policy"],
        ls_ui::CONTENT_SECURITY_POLICY
    );
    assert!(r.text().await.unwrap().contains("/ui/js/main.js"));
    let js = reqwest::get(format!("{base}/ui/js/main.js")).await.unwrap();
    assert_eq!(js.status(), 200);
    assert_eq!(
        js.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    let tag = js.headers()["etag"].clone();
    let again = reqwest::Client::new()
        .get(format!("{base}/ui/js/main.js"))
        .header("if-none-match", tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    let missing = reqwest::get(format!("{base}/ui/js/missing.js"))
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

#[tokio::test]
async fn controlbench_serves_the_workbench() {
    check_workbench(&controlbench().await).await;
}

#[tokio::test]
async fn audit_serves_the_workbench() {
    let server = ServerConfig::default();
    let shutdown = Shutdown::new();
    let app = ls_server::audit::router(AuditConfig::default(), &server, &shutdown);
    let base = serve(app, &server, shutdown).await;
    check_workbench(&base).await;
}
