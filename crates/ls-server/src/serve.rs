//! The accept loop: HTTP/1.1 connections (with upgrades, for WebSockets) under the header-read
//! and body timeouts and a cap on open connections, and graceful shutdown: on the signal the listener closes, every connection
//! finishes the request it is serving and closes, WebSocket sessions close with 1001, and the
//! loop returns once nothing is live or the grace period has passed.

use crate::capacity::{ClientKey, FairShare, Refusal, ShareLimits, Slot};
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;

/// After the shutdown signal, a request body that receives nothing for this long is cut off.
pub const STALLED_BODY: Duration = Duration::from_secs(1);

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
        // After shutdown a body that makes no progress for [`STALLED_BODY`] is cut off (a
        // stalled request); one still arriving gets the grace period.
        stop: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
        stopping: bool,
        stall: Option<Pin<Box<tokio::time::Sleep>>>,
        shutdown: Option<Shutdown>,
    }
}

impl TimedBody {
    pub fn new(inner: Incoming, limit: Duration) -> Self {
        Self {
            inner,
            deadline: None,
            limit,
            stop: None,
            stopping: false,
            stall: None,
            shutdown: None,
        }
    }

    /// As [`TimedBody::new`], also failing at once when `shutdown` is triggered while the body
    /// is still arriving.
    pub fn with_shutdown(inner: Incoming, limit: Duration, shutdown: Shutdown) -> Self {
        Self {
            shutdown: Some(shutdown),
            ..Self::new(inner, limit)
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
            // Progress: a stall is measured from the last frame.
            *this.stall = None;
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let limit = *this.limit;
        if let Some(sd) = this.shutdown.as_ref() {
            if !*this.stopping {
                let stop = this.stop.get_or_insert_with(|| {
                    let sd = sd.clone();
                    Box::pin(async move { sd.triggered().await })
                });
                *this.stopping = stop.as_mut().poll(cx).is_ready();
            }
            if *this.stopping {
                let stall = this
                    .stall
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(STALLED_BODY)));
                if stall.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(Box::new(BodyTimedOut(STALLED_BODY.as_secs())))));
                }
            }
        }
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
    let slots = FairShare::new(ShareLimits::new(
        timeouts.max_connections,
        timeouts.max_connections_per_client,
    ));
    loop {
        // At the cap, stop accepting: new connections wait in the listen backlog until an open
        // one closes (idle ones close on the header-read timeout).
        tokio::select! {
            biased;
            () = shutdown.triggered() => break,
            () = slots.room() => {}
        }
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
        // A trusted proxy carries many clients: it is outside the per-client shares (the proxy
        // keeps its own per-client limits), and only the server-wide cap applies to it.
        let key = (!app.carries_many_clients(peer.ip())).then(|| ClientKey::of(peer.ip()));
        let slot = match slots.try_acquire(key) {
            Ok(slot) => slot,
            Err(refusal) => {
                // Over the client's share: answer 503 and close, without holding a slot.
                tokio::spawn(refuse(stream, refusal));
                continue;
            }
        };
        tokio::spawn(connection(
            http.clone(),
            stream,
            peer,
            app.for_peer(peer),
            timeouts,
            shutdown.clone(),
            slot,
        ));
    }
    drop(listener);
    drain(&shutdown, timeouts.shutdown_grace).await;
    Ok(())
}

/// Why a connection is refused, in the words of its 503.
fn refusal_message(refusal: Refusal) -> String {
    match refusal {
        Refusal::ClientCap(limit) => {
            format!("too many connections from this address (at most {limit})")
        }
        Refusal::Reserved { reserve, few } => format!(
            "too many connections from this address while the server is nearly full (its last {reserve} connections are kept for clients holding fewer than {few})"
        ),
        Refusal::Full(cap) => format!("the server holds its most connections ({cap})"),
    }
}

/// Answer a connection over its client's share with a 503 and close it (at most 1 s spent).
async fn refuse(mut stream: tokio::net::TcpStream, refusal: Refusal) {
    use tokio::io::AsyncWriteExt;
    let body = crate::error::ApiError::Capacity(refusal_message(refusal))
        .body()
        .to_string();
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Requests of one connection that are being handled (the service was called and has not
/// answered yet): on shutdown a connection with none is closed at once.
#[derive(Clone, Default)]
struct InFlight(Arc<AtomicUsize>);

struct InFlightGuard(Arc<AtomicUsize>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InFlight {
    fn enter(&self) -> InFlightGuard {
        self.0.fetch_add(1, Ordering::AcqRel);
        InFlightGuard(self.0.clone())
    }
    fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }
}

/// How long a connection with no request in a handler may take to close after the signal (a
/// reply already handed to hyper finishes writing).
const IDLE_CLOSE: Duration = Duration::from_millis(100);

async fn connection(
    mut http: hyper::server::conn::http1::Builder,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    app: crate::App,
    timeouts: Timeouts,
    shutdown: Shutdown,
    _slot: Slot,
) {
    let _live = shutdown.track();
    // The header-read and keep-alive timeouts run on one timer per connection (see conn_timer).
    http.timer(ConnectionTimer::default());
    let body_limit = timeouts.body_read;
    let in_flight = InFlight::default();
    let svc = {
        let in_flight = in_flight.clone();
        let shutdown = shutdown.clone();
        let app = tower::ServiceBuilder::new()
            .map_request(move |req: hyper::Request<Incoming>| {
                req.map(|b| TimedBody::with_shutdown(b, body_limit, shutdown.clone()))
            })
            .service(crate::metrics::Metered::new(app));
        tower::service_fn(move |req| {
            let guard = in_flight.enter();
            let mut app = app.clone();
            async move {
                let r = tower::Service::call(&mut app, req).await;
                drop(guard);
                r
            }
        })
    };
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
            // Idle or stalled (a half-sent head): closed at once. Serving a request: drained
            // within the grace.
            let wait = if in_flight.busy() {
                timeouts.shutdown_grace
            } else {
                IDLE_CLOSE
            };
            match tokio::time::timeout(wait, conn.as_mut()).await {
                Ok(r) => r,
                Err(_) => return,
            }
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

/// Resolves on SIGTERM or SIGINT (Ctrl-C), then triggers `shutdown`; a second signal during
/// the drain exits the process at once (status 130).
pub async fn on_signal(shutdown: Shutdown) {
    first_signal().await;
    shutdown.trigger();
    tokio::spawn(async {
        first_signal().await;
        tracing::warn!("second signal: exiting without waiting for the drain");
        std::process::exit(130);
    });
}

async fn first_signal() {
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
}
