//! The accept loop: HTTP/1.1 connections (with upgrades, for WebSockets) under the header-read
//! and body timeouts and a cap on open connections, and graceful shutdown: on the signal the listener closes, every connection
//! finishes the request it is serving and closes, WebSocket sessions close with 1001, and the
//! loop returns once nothing is live or the grace period has passed.

use crate::config::Timeouts;
use crate::conn_timer::ConnectionTimer;
use crate::shutdown::Shutdown;
use axum::body::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The error a request body reports once its deadline has passed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0} s")]
pub struct BodyTimedOut(pub u64);

pin_project_lite::pin_project! {
    /// A request body that fails with [`BodyTimedOut`] when it has not arrived by its deadline.
    /// The deadline is armed the first time the body is not ready (`limit` from then): a body
    /// that arrived with its head, as nearly every one does, never touches the timer.
    pub struct TimedBody {
        #[pin]
        inner: Incoming,
        deadline: Option<Pin<Box<tokio::time::Sleep>>>,
        limit: Duration,
    }
}

impl TimedBody {
    pub fn new(inner: Incoming, limit: Duration) -> Self {
        Self {
            inner,
            deadline: None,
            limit,
        }
    }
}

impl hyper::body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let limit = *this.limit;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(this.limit.as_secs()))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Serve `app` on `listener` until `shutdown` is triggered, then drain (see the module docs).
pub async fn serve(
    listener: TcpListener,
    app: crate::App,
    timeouts: Timeouts,
    shutdown: Shutdown,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.header_read_timeout(timeouts.header_read)
        .keep_alive(true);
    let slots = Arc::new(Semaphore::new(timeouts.max_connections.max(1)));
    loop {
        // At the cap, stop accepting: new connections wait in the listen backlog until an open
        // one closes (idle ones close on the header-read timeout).
        let slot = tokio::select! {
            biased;
            () = shutdown.triggered() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(s) => s,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = shutdown.triggered() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            http.clone(),
            stream,
            peer,
            app.for_peer(peer),
            timeouts.body_read,
            shutdown.clone(),
            slot,
        ));
    }
    drop(listener);
    drain(&shutdown, timeouts.shutdown_grace).await;
    Ok(())
}

async fn connection(
    mut http: hyper::server::conn::http1::Builder,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    app: crate::App,
    body_limit: Duration,
    shutdown: Shutdown,
    _slot: OwnedSemaphorePermit,
) {
    let _live = shutdown.track();
    // The header-read and keep-alive timeouts run on one timer per connection (see conn_timer).
    http.timer(ConnectionTimer::default());
    let svc = tower::ServiceBuilder::new()
        .map_request(move |req: hyper::Request<Incoming>| {
            req.map(|b| TimedBody::new(b, body_limit))
        })
        .service(crate::metrics::Metered::new(app));
    let conn = http
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc))
        .with_upgrades();
    tokio::pin!(conn);
    let done = tokio::select! {
        r = conn.as_mut() => Some(r),
        () = shutdown.triggered() => None,
    };
    let result = match done {
        Some(r) => r,
        None => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Wait until no connection or WebSocket session is live, at most `grace`.
async fn drain(shutdown: &Shutdown, grace: Duration) {
    let waited = tokio::time::timeout(grace, async {
        while shutdown.live() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    if waited.is_err() {
        tracing::warn!(
            live = shutdown.live(),
            "grace period over; closing what is left"
        );
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C), then triggers `shutdown`.
pub async fn on_signal(shutdown: Shutdown) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                    _ = int.recv() => tracing::info!("SIGINT: shutting down"),
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    shutdown.trigger();
}
