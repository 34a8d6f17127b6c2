//! A minimal keep-alive HTTP/1.1 client connection for `ledgershield load`.
//!
//! Why not `reqwest`: the load generator shares the machine with the server it measures, so every
//! microsecond it spends is taken from the server or perturbs it (cache pollution, preemption).
//! A connection here writes each request with one `write` and reads replies framed by
//! `Content-Length` into one reused buffer; `reqwest` (connection pool, header maps, body
//! streams, two runtimes' worth of wake-ups) cost about as much CPU per episode as the server.
//! Only what our server speaks is supported: plain `http://`, `Content-Length` framing, no
//! pipelining; anything else is a clear error rather than a guess.

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest reply head accepted (status line and headers).
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Largest reply body accepted; a terminal step reply is ~25 KB.
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Most headers parsed in a reply head.
const MAX_HEADERS: usize = 32;

/// The `host:port` of an `http://` base URL (any path after it is refused: routes are absolute).
pub fn authority(base: &str) -> Result<String> {
    let rest = base
        .strip_prefix("http://")
        .with_context(|| format!("{base}: only http:// URLs are supported"))?;
    let authority = rest.trim_end_matches('/');
    if authority.is_empty() || authority.contains('/') {
        bail!("{base}: expected http://host:port with no path");
    }
    Ok(if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    })
}

/// One keep-alive connection.
pub struct Conn {
    stream: TcpStream,
    host: String,
    request: Vec<u8>,
    reply: Vec<u8>,
}

/// A reply: its status code and body.
pub struct Reply<'a> {
    pub status: u16,
    pub body: &'a [u8],
}

impl Conn {
    pub async fn connect(authority: &str) -> Result<Self> {
        let stream = TcpStream::connect(authority)
            .await
            .with_context(|| format!("connecting to {authority}"))?;
        // Requests are written whole; never hold one back waiting for an ACK.
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            host: authority.to_owned(),
            request: Vec::with_capacity(1024),
            reply: Vec::with_capacity(32 * 1024),
        })
    }

    /// Send one request and read its whole reply. `session` becomes the `X-Session-Id` header; a
    /// `body` is sent as JSON.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        session: Option<&str>,
        body: Option<&[u8]>,
    ) -> Result<Reply<'_>> {
        use std::io::Write;
        self.request.clear();
        write!(
            self.request,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n",
            self.host
        )?;
        if let Some(s) = session {
            write!(self.request, "X-Session-Id: {s}\r\n")?;
        }
        if let Some(b) = body {
            write!(
                self.request,
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                b.len()
            )?;
            self.request.extend_from_slice(b);
        } else {
            self.request.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&self.request).await?;
        self.reply.clear();
        let (status, head_len, body_len) = loop {
            if self.stream.read_buf(&mut self.reply).await? == 0 {
                bail!("the server closed the connection mid-reply");
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut head = httparse::Response::new(&mut headers);
            match head.parse(&self.reply).context("malformed reply head")? {
                httparse::Status::Complete(head_len) => {
                    let status = head.code.unwrap_or(0);
                    let length = head
                        .headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
                        .context("reply without a Content-Length (only length-framed replies are supported)")?;
                    if length > MAX_BODY_BYTES {
                        bail!("reply body of {length} bytes exceeds {MAX_BODY_BYTES}");
                    }
                    break (status, head_len, length);
                }
                httparse::Status::Partial if self.reply.len() > MAX_HEAD_BYTES => {
                    bail!("reply head exceeds {MAX_HEAD_BYTES} bytes")
                }
                httparse::Status::Partial => {}
            }
        };
        let end = head_len + body_len;
        self.reply.reserve(end.saturating_sub(self.reply.len()));
        while self.reply.len() < end {
            if self.stream.read_buf(&mut self.reply).await? == 0 {
                bail!("the server closed the connection mid-body");
            }
        }
        if self.reply.len() > end {
            bail!("unexpected bytes after a reply (pipelining is not used)");
        }
        Ok(Reply {
            status,
            body: &self.reply[head_len..end],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_of_base_urls() {
        assert_eq!(
            authority("http://127.0.0.1:8000").unwrap(),
            "127.0.0.1:8000"
        );
        assert_eq!(authority("http://localhost/").unwrap(), "localhost:80");
        assert!(authority("https://example.com").is_err());
        assert!(authority("http://h:1/api").is_err());
        assert!(authority("http://").is_err());
    }

    /// Against a scripted server: a split head, a body in several reads, keep-alive reuse, and a
    /// reply without a length refused.
    #[tokio::test]
    async fn reads_length_framed_replies_over_one_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            for part in [
                &b"HTTP/1.1 200 OK\r\ncontent-le"[..],
                b"ngth: 11\r\n\r\n{\"a\":",
                b"[1,2]}",
            ] {
                s.write_all(part).await.unwrap();
                s.flush().await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            let n = s.read(&mut buf).await.unwrap();
            let second = String::from_utf8_lossy(&buf[..n]).to_string();
            s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")
                .await
                .unwrap();
            assert!(
                s.read(&mut buf).await.unwrap() > 0,
                "a third request arrives"
            );
            s.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nxyz")
                .await
                .unwrap();
            (req, second)
        });
        let mut c = Conn::connect(&addr).await.unwrap();
        let r = c
            .send("POST", "/step", Some("s-1"), Some(b"{\"x\":1}"))
            .await
            .unwrap();
        assert_eq!((r.status, r.body), (200, &b"{\"a\":[1,2]}"[..]));
        let r = c.send("GET", "/health", None, None).await.unwrap();
        assert_eq!((r.status, r.body), (404, &b"{}"[..]));
        let err = c
            .send("GET", "/health", None, None)
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("Content-Length"), "{err}");
        let (req, second) = server.await.unwrap();
        assert!(req.starts_with("POST /step HTTP/1.1\r\n"), "{req}");
        assert!(
            req.contains("X-Session-Id: s-1\r\n")
                && req.contains("Content-Length: 7\r\n")
                && req.ends_with("\r\n\r\n{\"x\":1}"),
            "{req}"
        );
        assert!(
            second.starts_with("GET /health HTTP/1.1\r\n") && !second.contains("Content-Length"),
            "{second}"
        );
    }
}
