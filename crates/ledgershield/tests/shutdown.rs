//! SIGTERM under load against the real binary: requests already accepted are answered, the
//! listener closes, the process exits 0. Also: an idle connection is closed by the header-read
//! timeout.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A started server that is killed if a test ends (or fails) without stopping it, so a failed
/// assertion does not leave the process running.
struct Server(Child);

impl std::ops::Deref for Server {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn start(extra: &[&str]) -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args(["serve", "--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting ledgershield serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_owned();
    (Server(child), addr)
}

/// One request on its own connection; `Some(status)` when a whole reply came back.
fn request(addr: &str, raw: &[u8]) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    s.write_all(raw).ok()?;
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).ok()?;
    let text = String::from_utf8_lossy(&reply);
    let status = text.split(' ').nth(1)?.parse().ok()?;
    // The reply is whole: the declared body length arrived.
    let (head, body) = text.split_once("\r\n\r\n")?;
    let len: usize = head.lines().find_map(|l| {
        l.to_ascii_lowercase()
            .strip_prefix("content-length:")
            .map(|v| v.trim().parse().unwrap())
    })?;
    assert_eq!(body.len(), len, "truncated reply: {text}");
    Some(status)
}

/// SIGTERM to the child through the system's `kill` (std's `Child::kill` sends SIGKILL), so the
/// test needs no `unsafe` FFI call.
fn sigterm(child: &Child) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM failed: {status}");
}

#[test]
fn sigterm_answers_in_flight_requests_and_exits_zero() {
    let (mut child, addr) = start(&["--shutdown-grace-secs", "10"]);
    // Requests in flight at the signal: head and half the body sent, the rest after SIGTERM.
    let body = br#"{"case_id": "CASE-A-001"}"#;
    let mut pending = Vec::new();
    for i in 0..4 {
        let mut s = TcpStream::connect(&addr).unwrap();
        let head = format!("POST /reset HTTP/1.1\r\nhost: {addr}\r\nx-session-id: t{i}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(&body[..10]).unwrap();
        pending.push(s);
    }
    // Load: clients hammering the server on fresh connections while it shuts down.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (addr, stop, answered) = (addr.clone(), stop.clone(), answered.clone());
            std::thread::spawn(move || {
                let raw =
                    format!("GET /health HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
                while !stop.load(Ordering::Relaxed) {
                    match request(&addr, raw.as_bytes()) {
                        Some(status) => {
                            assert_eq!(status, 200);
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        None => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    sigterm(&child);
    std::thread::sleep(Duration::from_millis(300));
    for mut s in pending {
        s.write_all(&body[10..]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        assert!(
            reply.starts_with("HTTP/1.1 200"),
            "in-flight request answered: {}",
            &reply[..reply.len().min(200)]
        );
    }
    let status = child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join()
            .expect("every reply the load clients got was whole and 200");
    }
    assert!(
        answered.load(Ordering::Relaxed) > 0,
        "the load was served before the signal"
    );
    assert!(status.success(), "exit status {status:?}");
    assert!(TcpStream::connect(&addr).is_err(), "the listener is closed");
}

#[test]
fn idle_connections_are_closed_by_the_header_timeout() {
    let (mut child, addr) = start(&["--header-timeout-secs", "1"]);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .unwrap();
    let mut buf = Vec::new();
    // The server closes the connection (EOF, possibly after a 408) instead of waiting for the
    // rest of the head; our own 10 s read timeout would report an error instead.
    let t0 = std::time::Instant::now();
    let r = s.read_to_end(&mut buf);
    assert!(r.is_ok(), "the server closed the idle connection: {r:?}");
    assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    sigterm(&child);
    assert!(child.wait().unwrap().success());
}

/// Keep-alive: requests answered on one connection, spaced by less than the timeout, then
/// silence. Each wait for a head re-arms the connection's one timer (`conn_timer`), so the
/// connection lives through the requests and closes about one timeout after the last reply.
#[test]
fn a_keep_alive_connection_closes_one_timeout_after_its_last_request() {
    let (mut child, addr) = start(&["--header-timeout-secs", "1"]);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    for _ in 0..3 {
        s.write_all(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).unwrap();
        // Idle for 0.6 s of the 1 s timeout: the timer armed while waiting for the first head
        // fires during the second wait, and that wait must not end there (it is re-armed).
        std::thread::sleep(Duration::from_millis(600));
    }
    // Three requests 0.6 s apart on one connection were all served (1.8 s > the 1 s timeout).
    let t0 = std::time::Instant::now();
    let mut rest = Vec::new();
    let r = reader.read_to_end(&mut rest);
    assert!(r.is_ok(), "the server closed the idle connection: {r:?}");
    let closed_after = t0.elapsed();
    // 0.6 s of the timeout had passed before t0; the close comes about 0.4 s later.
    assert!(closed_after < Duration::from_secs(8), "{closed_after:?}");
    sigterm(&child);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_body_that_never_arrives_gets_408() {
    let (mut child, addr) = start(&["--body-timeout-secs", "1"]);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"POST /reset HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"case").unwrap();
    let mut reply = vec![0u8; 4096];
    let n = s.read(&mut reply).unwrap();
    let text = String::from_utf8_lossy(&reply[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request_timeout"), "{text}");
    sigterm(&child);
    assert!(child.wait().unwrap().success());
}
