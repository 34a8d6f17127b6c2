//! The workbench is mounted on both environments' routers: the page, its policy and its modules.

#[path = "support/servers.rs"]
mod servers;

use servers::{audit, controlbench};

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
    check_workbench(&audit().await).await;
}
