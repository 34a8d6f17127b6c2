//! Bounded outbound HTTP for agents that call a model endpoint (the `llm` agent, and the server's
//! `POST /agent-runs` that plays it): one transport that every such call goes through, so a slow,
//! silent, huge or hostile endpoint costs a bounded amount.
//!
//! * [`ApiBase`]: the endpoint's base URL, parsed and checked: `http` or `https`, a host, a port
//!   (explicit or the scheme's), no user info, no query, no fragment, and a path of plain
//!   segments; the request path is the base path plus a fixed leaf (`chat/completions`), so no
//!   `?`, `#` or `..` in the base can select another path.
//! * [`Limits`]: a per-call timeout, an overall deadline for everything the transport is asked
//!   to do, a cap on reply bytes (read as a stream and cut off past the cap, never read whole
//!   first), and whether errors are **opaque**: every failure (refused, unreachable, timed out,
//!   an HTTP error status, a reply that is not JSON) then reads the same, so the caller of a
//!   server route cannot use it to scan a network.
//! * [`Cancel`]: cancellation from outside (a server route whose client went away): the call in
//!   progress is dropped (its connection closed) and later calls fail at once.
//! * No redirects are followed (a 3xx is a failed call), so a request never goes elsewhere with
//!   its body and bearer token.
//!
//! Calls run on one small runtime shared by the process (one thread), whatever thread asks, so
//! no call starts threads of its own.

use reqwest::Url;
use serde_json::Value;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Longest accepted base URL.
pub const MAX_API_BASE_CHARS: usize = 500;

/// A checked base URL of an OpenAI-compatible API (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiBase {
    url: Url,
}

impl ApiBase {
    /// Parse and check `text`; the error names what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() || text.len() > MAX_API_BASE_CHARS {
            return Err(format!(
                "an http:// or https:// URL of at most {MAX_API_BASE_CHARS} characters"
            ));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("no spaces or control characters".into());
        }
        if text.contains('%') {
            // Percent-encoding could spell a dot segment the parser then resolves.
            return Err(
                "the path may hold only plain segments (letters, digits, - . _ ~), no %-escapes"
                    .into(),
            );
        }
        let url = Url::parse(text).map_err(|e| format!("not a URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("the scheme must be http or https".into());
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("a host is required".into());
        }
        if url.port_or_known_default().is_none() {
            return Err("a port is required".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("no user name or password in the URL (send a key as api_key)".into());
        }
        if url.query().is_some() || url.fragment().is_some() || text.contains(['?', '#']) {
            return Err(
                "no query (?) or fragment (#): the path is the base path plus /chat/completions"
                    .into(),
            );
        }
        let plain = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        };
        let segments: Vec<&str> = url
            .path_segments()
            .map(|s| s.filter(|p| !p.is_empty()).collect())
            .unwrap_or_default();
        if segments.iter().any(|s| !plain(s)) || text.contains("/../") || text.ends_with("/..") {
            return Err("the path may hold only plain segments (letters, digits, - . _ ~)".into());
        }
        Ok(Self { url })
    }

    /// The URL of `leaf` (fixed segments) under the base path.
    pub fn endpoint(&self, leaf: &[&str]) -> Url {
        let mut url = self.url.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(leaf);
        }
        url
    }

    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }
}

/// What one transport may spend (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// One call, connection included.
    pub call_timeout: Duration,
    /// Establishing a connection.
    pub connect_timeout: Duration,
    /// Everything the transport is asked to do ends by then (`None`: no overall deadline).
    pub deadline: Option<Instant>,
    /// Largest reply body read.
    pub max_reply_bytes: usize,
    /// Every failure reads the same (see [`OutboundError::Unusable`]); an HTTP error status is
    /// a failure too.
    pub opaque_errors: bool,
}

/// Default cap on a reply: a chat completion is a few kilobytes.
pub const DEFAULT_MAX_REPLY_BYTES: usize = 1 << 20;

impl Limits {
    /// A call timeout, no overall deadline, a 1 MiB reply cap, detailed errors: what a command
    /// line run against the operator's own endpoint wants.
    pub fn per_call(call_timeout: Duration) -> Self {
        Self {
            call_timeout,
            connect_timeout: call_timeout.min(Duration::from_secs(10)),
            deadline: None,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            opaque_errors: false,
        }
    }
}

/// Cancellation shared between a transport and whoever may stop it.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    cancelled: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Cancel {
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }

    /// A guard that cancels when dropped (held by a request handler: dropped when the client
    /// goes away).
    pub fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

/// Cancels its [`Cancel`] when dropped.
#[derive(Debug)]
pub struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    #[error("cancelled")]
    Cancelled,
    #[error("the run's deadline has passed")]
    Deadline,
    #[error("timeout")]
    Timeout,
    #[error("transport: {0}")]
    Transport(String),
    #[error("the reply exceeds {0} bytes")]
    TooLarge(usize),
    #[error("redirect (HTTP {0}) not followed")]
    Redirect(u16),
    #[error("the reply is not UTF-8")]
    NotText,
    #[error("invalid api_base: {0}")]
    InvalidBase(String),
    /// Opaque mode: any failure of the endpoint, whatever it was.
    #[error("the model endpoint gave no usable reply")]
    Unusable,
}

impl OutboundError {
    /// Retrying cannot help: the transport was stopped or the base is invalid.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Self::Cancelled | Self::Deadline | Self::InvalidBase(_)
        )
    }
}

/// A reply: its status and its body (at most [`Limits::max_reply_bytes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// The bounded transport (see the module docs).
#[derive(Debug, Clone)]
pub struct Outbound {
    client: Option<reqwest::Client>,
    limits: Limits,
    cancel: Cancel,
}

/// The runtime every call runs on: one worker thread for the whole process.
fn runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ls-outbound")
            .enable_all()
            .build()
            .ok()
    })
    .as_ref()
}

impl Outbound {
    pub fn new(limits: Limits) -> Self {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits.connect_timeout)
            .timeout(limits.call_timeout)
            .build()
            .ok();
        Self {
            client,
            limits,
            cancel: Cancel::default(),
        }
    }

    /// The same transport, stopped by `cancel`.
    pub fn with_cancel(mut self, cancel: Cancel) -> Self {
        self.cancel = cancel;
        self
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// POST `body` as JSON to `leaf` under `api_base` (checked first), with `bearer` as the
    /// token; blocks the calling thread until the reply, the call timeout, the deadline or a
    /// cancellation.
    pub fn post_json(
        &self,
        api_base: &str,
        leaf: &[&str],
        body: &Value,
        bearer: Option<&str>,
    ) -> Result<Reply, OutboundError> {
        let base = ApiBase::parse(api_base).map_err(OutboundError::InvalidBase)?;
        let url = base.endpoint(leaf);
        let outcome = self.run(self.send(url, body.clone(), bearer.map(str::to_owned)));
        if !self.limits.opaque_errors {
            return outcome;
        }
        match outcome {
            Err(e) if e.is_final() => Err(e),
            Ok(r)
                if (200..300).contains(&r.status)
                    && serde_json::from_str::<Value>(&r.body).is_ok() =>
            {
                Ok(r)
            }
            _ => Err(OutboundError::Unusable),
        }
    }

    /// Run `call` on the shared runtime under the deadline and the cancellation; blocks until it
    /// ends.
    fn run(
        &self,
        call: impl Future<Output = Result<Reply, OutboundError>> + Send + 'static,
    ) -> Result<Reply, OutboundError> {
        if self.cancel.is_cancelled() {
            return Err(OutboundError::Cancelled);
        }
        let left = match self.limits.deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Err(OutboundError::Deadline),
            },
            None => None,
        };
        let Some(rt) = runtime() else {
            return Err(OutboundError::Transport(
                "no runtime for outbound calls".into(),
            ));
        };
        let cancel = self.cancel.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        rt.spawn(async move {
            let bounded = async {
                match left {
                    Some(left) => tokio::time::timeout(left, call)
                        .await
                        .unwrap_or(Err(OutboundError::Deadline)),
                    None => call.await,
                }
            };
            // Dropping the call's future closes its connection.
            let out = tokio::select! {
                out = bounded => out,
                () = cancel.cancelled() => Err(OutboundError::Cancelled),
            };
            let _ = tx.send(out);
        });
        rx.recv()
            .unwrap_or(Err(OutboundError::Transport("the call was dropped".into())))
    }

    fn send(
        &self,
        url: Url,
        body: Value,
        bearer: Option<String>,
    ) -> impl Future<Output = Result<Reply, OutboundError>> + Send + 'static {
        let client = self.client.clone();
        let cap = self.limits.max_reply_bytes;
        async move {
            let client =
                client.ok_or_else(|| OutboundError::Transport("HTTP client unavailable".into()))?;
            let mut req = client.post(url).json(&body);
            if let Some(k) = bearer {
                req = req.bearer_auth(k);
            }
            let mut resp = req.send().await.map_err(transport)?;
            let status = resp.status().as_u16();
            if (300..400).contains(&status) {
                return Err(OutboundError::Redirect(status));
            }
            if resp.content_length().is_some_and(|n| n > cap as u64) {
                return Err(OutboundError::TooLarge(cap));
            }
            let mut bytes = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(transport)? {
                if bytes.len() + chunk.len() > cap {
                    return Err(OutboundError::TooLarge(cap));
                }
                bytes.extend_from_slice(&chunk);
            }
            let body = String::from_utf8(bytes).map_err(|_| OutboundError::NotText)?;
            Ok(Reply { status, body })
        }
    }
}

fn transport(e: reqwest::Error) -> OutboundError {
    if e.is_timeout() {
        OutboundError::Timeout
    } else {
        OutboundError::Transport(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    #[test]
    fn api_bases_are_parsed_and_the_path_is_fixed() {
        let ok = ApiBase::parse("http://127.0.0.1:8000/v1").unwrap();
        assert_eq!(
            ok.endpoint(&["chat", "completions"]).as_str(),
            "http://127.0.0.1:8000/v1/chat/completions"
        );
        let slash = ApiBase::parse("https://api.example.com/v1/").unwrap();
        assert_eq!(
            slash.endpoint(&["chat", "completions"]).as_str(),
            "https://api.example.com/v1/chat/completions"
        );
        let bare = ApiBase::parse("http://localhost:9").unwrap();
        assert_eq!(
            bare.endpoint(&["chat", "completions"]).as_str(),
            "http://localhost:9/chat/completions"
        );
        for (bad, why) in [
            ("file:///etc/passwd", "scheme"),
            ("ftp://x/v1", "scheme"),
            ("http://127.0.0.1:9/admin?", "query"),
            ("http://127.0.0.1:9/admin?x=1", "query"),
            ("http://127.0.0.1:9/admin#", "fragment"),
            ("http://user:pw@127.0.0.1:9/v1", "password"),
            ("http://127.0.0.1:9/v1/../admin", "plain segments"),
            ("http://127.0.0.1:9/%2e%2e/admin", "plain segments"),
            ("http://127.0.0.1:9/v 1", "spaces"),
            ("http://:9/v1", "host"),
            ("not a url", "spaces"),
            ("", "at most"),
        ] {
            let e = ApiBase::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    /// One connection answered with `reply` (raw HTTP); the number of connections accepted.
    fn endpoint(reply: &'static [u8]) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = seen.clone();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(reply);
            }
        });
        (format!("http://{addr}/v1"), seen)
    }

    #[test]
    fn redirects_are_not_followed_and_big_replies_are_cut() {
        let t = Outbound::new(Limits::per_call(Duration::from_secs(5)));
        let (base, _) = endpoint(
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:1/x\r\nContent-Length: 0\r\n\r\n",
        );
        assert_eq!(
            t.post_json(&base, &["chat", "completions"], &Value::Null, None),
            Err(OutboundError::Redirect(307))
        );
        let small = Outbound::new(Limits {
            max_reply_bytes: 16,
            ..Limits::per_call(Duration::from_secs(5))
        });
        let (base, _) = endpoint(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789012345678901234567890123456789",
        );
        assert_eq!(
            small.post_json(&base, &["c"], &Value::Null, None),
            Err(OutboundError::TooLarge(16))
        );
        let (base, _) = endpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        assert_eq!(
            t.post_json(&base, &["c"], &Value::Null, None),
            Ok(Reply {
                status: 200,
                body: "{}".into()
            })
        );
    }

    #[test]
    fn opaque_errors_read_the_same_and_the_deadline_and_cancel_stop_calls() {
        let opaque = Outbound::new(Limits {
            opaque_errors: true,
            ..Limits::per_call(Duration::from_millis(300))
        });
        // Refused (nothing listens), an HTTP error, a reply that is not JSON, a silent endpoint.
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/v1", l.local_addr().unwrap())
        };
        let (error, _) = endpoint(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        let (text, _) = endpoint(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_url = format!("http://{}/v1", silent.local_addr().unwrap());
        for base in [&closed, &error, &text, &silent_url] {
            assert_eq!(
                opaque.post_json(base, &["c"], &Value::Null, None),
                Err(OutboundError::Unusable),
                "{base}"
            );
        }
        let gone = Outbound::new(Limits {
            deadline: Some(Instant::now()),
            ..Limits::per_call(Duration::from_secs(5))
        });
        assert_eq!(
            gone.post_json(&closed, &["c"], &Value::Null, None),
            Err(OutboundError::Deadline)
        );
        let cancel = Cancel::default();
        let t =
            Outbound::new(Limits::per_call(Duration::from_secs(30))).with_cancel(cancel.clone());
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(cancel.on_drop());
        });
        let started = Instant::now();
        assert_eq!(
            t.post_json(&silent_url, &["c"], &Value::Null, None),
            Err(OutboundError::Cancelled)
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        stopper.join().unwrap();
        assert_eq!(
            t.post_json(&silent_url, &["c"], &Value::Null, None),
            Err(OutboundError::Cancelled),
            "later calls fail at once"
        );
        drop(silent);
    }
}
