//! The cap on open connections, over real TCP: past it the server stops accepting, and a waiting
//! connection is served as soon as an open one closes.

use ls_core::FixtureSet;
use ls_env::{CasePool, EnvConfig};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

async fn start(max_connections: usize) -> std::net::SocketAddr {
    let server = ls_server::ServerConfig {
        timeouts: ls_server::Timeouts {
            max_connections,
            ..Default::default()
        },
        ..Default::default()
    };
    let shutdown = ls_server::Shutdown::new();
    let state = ls_server::app_state(
        CasePool::new(FixtureSet::embedded().expect("fixtures")),
        EnvConfig::default(),
        &server,
        &shutdown,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(ls_server::serve(
        listener,
        ls_server::router(state),
        server.timeouts,
        shutdown,
    ));
    addr
}

/// The status line of the next reply on `s` (waiting at most `wait`), `None` if none came.
async fn status_line(s: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(wait, s.read(&mut buf))
        .await
        .ok()?
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    Some(text.lines().next().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn a_connection_past_the_cap_waits_until_an_open_one_closes() {
    let addr = start(1).await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    first.write_all(HEALTH).await.unwrap();
    assert_eq!(
        status_line(&mut first, Duration::from_secs(30))
            .await
            .as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    // The first connection stays open (keep-alive) and holds the only slot.
    let mut second = TcpStream::connect(addr).await.unwrap();
    second.write_all(HEALTH).await.unwrap();
    assert_eq!(
        status_line(&mut second, Duration::from_millis(300)).await,
        None,
        "served past the cap of one connection"
    );
    drop(first);
    assert_eq!(
        status_line(&mut second, Duration::from_secs(30))
            .await
            .as_deref(),
        Some("HTTP/1.1 200 OK"),
        "the waiting connection is served once the open one closes"
    );
}

#[tokio::test]
async fn connections_under_the_cap_are_served_at_once() {
    let addr = start(3).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(HEALTH).await.unwrap();
        assert_eq!(
            status_line(&mut s, Duration::from_secs(30))
                .await
                .as_deref(),
            Some("HTTP/1.1 200 OK")
        );
        open.push(s);
    }
}
