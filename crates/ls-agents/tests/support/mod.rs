//! Shared by the crate's integration tests: a scripted OpenAI-compatible endpoint (the `llm`
//! agent's tests) and the attacker tests' random seeds (`leak.rs`, `learned_attacker.rs`).
//! Each test crate uses some of these.
#![allow(dead_code)]

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

use rand::Rng;
use std::collections::BTreeSet;

/// `n` distinct seeds drawn at random (spaced by 10, so the derived per-kind seeds of two draws
/// never collide), in a random order, or read from `var` to replay a run.
pub fn draw_seeds(var: &str, n: usize) -> Vec<u64> {
    if let Ok(v) = std::env::var(var) {
        let s: Vec<u64> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
        assert_eq!(s.len(), n, "{var} needs {n} seeds");
        return s;
    }
    let mut rng = rand::rng();
    let mut drawn = BTreeSet::new();
    while drawn.len() < n {
        drawn.insert(rng.random_range(100..90_000u64) * 10);
    }
    let mut v: Vec<u64> = drawn.into_iter().collect();
    let k = rng.random_range(0..n);
    v.rotate_left(k);
    v
}
