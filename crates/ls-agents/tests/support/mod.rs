//! Shared by the tests that play agents against a scripted OpenAI-compatible endpoint.

use axum::Router;

/// Serve `app` on an ephemeral loopback port on its own thread (a current-thread runtime);
/// returns the API base `http://127.0.0.1:PORT/v1`.
pub fn serve_app(app: Router) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            axum::serve(l, app).await.unwrap();
        });
    });
    format!("http://{}/v1", rx.recv().unwrap())
}
