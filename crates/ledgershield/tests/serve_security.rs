//! `ledgershield serve` against the real binary: boolean variables in every usual spelling,
//! the generated operator key (0600 file, the only way to operator routes, loopback included),
//! the warnings on a network bind, and `run --url` closing every session it opens.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A started server, killed when the test ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ls-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Start `serve --port 0` with `args` and `env`; the address and the stderr reader.
fn start(args: &[&str], env: &[(&str, &str)], key_file: &Path) -> (Server, String, Child) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ledgershield"));
    cmd.args(["serve", "--port", "0"])
        .args(args)
        .env("LEDGERSHIELD_OPERATOR_KEY_FILE", key_file)
        .env_remove("ADMIN_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (mut child, addr) = listening(cmd.spawn().expect("starting ledgershield serve"));
    // Keep stderr in a second handle so the test can read what was logged.
    let stderr = child.stderr.take().unwrap();
    let reader = Command::new("cat")
        .stdin(Stdio::from(stderr))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    (Server(child), addr, reader)
}

/// A started server and the address its first line says it listens on.
fn listening(mut child: Child) -> (Child, String) {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on"), "first line: {line:?}");
    let addr = line.trim().rsplit("http://").next().unwrap().to_owned();
    (child, addr)
}

/// One request; `(status, body)`.
fn request(addr: &str, raw: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply).to_string();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_owned();
    (status, body)
}

fn get(addr: &str, path: &str, key: Option<&str>) -> (u16, String) {
    let key = key
        .map(|k| format!("x-api-key: {k}\r\n"))
        .unwrap_or_default();
    request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{key}\r\n"),
    )
}

/// Defect 12: `1`, `yes`, `ON`, `0`, `off` all start the server; anything else is a clear error.
#[test]
fn boolean_variables_accept_the_usual_spellings() {
    let dir = temp_dir("bools");
    // Empty (`VAR=`, what a container file leaves for an unset value) is off, as the
    // reference reads it.
    for v in ["1", "yes", "ON", "True", "0", "off", "No", ""] {
        let (_s, addr, _e) = start(
            &[],
            &[("TRUST_PROXY_HEADERS", v), ("RATE_LIMIT_LOOPBACK", v)],
            &dir.join("key"),
        );
        assert_eq!(get(&addr, "/health", None).0, 200, "{v}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args(["serve", "--port", "0"])
        .env("TRUST_PROXY_HEADERS", "maybe")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'maybe' is not a boolean"), "{err}");
    // The flag without a value still means on.
    let (_s, addr, _e) = start(&["--rate-limit-loopback"], &[], &dir.join("key"));
    assert_eq!(get(&addr, "/health", None).0, 200);
}

/// Defects 10, 11: with no key configured the server writes a generated key (0600) and says
/// where; operator routes need it from loopback too; agent routes need nothing.
#[test]
fn a_generated_operator_key_guards_operator_routes() {
    let dir = temp_dir("key");
    let key_file = dir.join("state").join("operator-key");
    let (server, addr, stderr) = start(&[], &[], &key_file);
    let key = std::fs::read_to_string(&key_file)
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(key.len(), 64);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert_eq!(get(&addr, "/runs", None).0, 403);
    assert_eq!(get(&addr, "/runs", Some("wrong")).0, 403);
    assert_eq!(get(&addr, "/runs", Some(&key)).0, 200);
    let reset = "POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\ncontent-length: 2\r\n\r\n{}";
    assert_eq!(request(&addr, reset).0, 200);
    drop(server);
    let log = String::from_utf8(stderr.wait_with_output().unwrap().stdout).unwrap();
    assert!(log.contains(&key_file.display().to_string()), "{log}");
    assert!(!log.contains(&key), "the key itself is not logged");
    // A second start writes a new key.
    let (_s, _addr, _e) = start(&[], &[], &key_file);
    let second = std::fs::read_to_string(&key_file)
        .unwrap()
        .trim()
        .to_owned();
    assert_ne!(key, second);
}

/// Defect 10: bound to every address, the server warns that it is reachable without a
/// configured key, and that the Host header is unchecked without ALLOWED_HOSTS; with it, a
/// foreign Host is refused.
#[test]
fn a_network_bind_warns_and_follows_allowed_hosts() {
    let dir = temp_dir("net");
    let (server, addr, stderr) = start(&["--host", "0.0.0.0"], &[], &dir.join("key"));
    let port = addr.rsplit(':').next().unwrap().to_owned();
    assert_eq!(get(&format!("127.0.0.1:{port}"), "/health", None).0, 200);
    drop(server);
    let log = String::from_utf8(stderr.wait_with_output().unwrap().stdout).unwrap();
    assert!(log.contains("reachable from the network"), "{log}");
    assert!(log.contains("without ALLOWED_HOSTS"), "{log}");

    let (_s, addr, _e) = start(
        &["--host", "0.0.0.0", "--allowed-hosts", "env.example"],
        &[],
        &dir.join("key"),
    );
    let port = addr.rsplit(':').next().unwrap().to_owned();
    let local = format!("127.0.0.1:{port}");
    let with_host = |host: &str| {
        request(
            &local,
            &format!("GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
        .0
    };
    assert_eq!(with_host("env.example"), 200);
    assert_eq!(with_host("evil.example"), 403);
}

fn sessions(addr: &str) -> u64 {
    let (status, body) = get(addr, "/health", None);
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["sessions"].as_u64().unwrap()
}

/// Defect 1: 2,000 episodes through `run --url` (more than the server's 1,024 sessions) leave
/// no session behind; a run that fails on a refused reset closes its session too.
#[test]
fn run_url_closes_every_session_it_opens() {
    let dir = temp_dir("run");
    let (_s, addr, _e) = start(&[], &[], &dir.join("key"));
    let cases = vec!["CASE-A-001"; 125].join(",");
    let out = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args([
            "run",
            "--agent",
            "naive-pay",
            "--pass-k",
            "16",
            "--format",
            "json",
        ])
        .args([
            "--cases",
            &cases,
            "--url",
            &format!("http://{addr}"),
            "--db",
        ])
        .arg(dir.join("runs.db"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["episodes"].as_array().map(Vec::len), Some(2000), "{v}");
    assert_eq!(sessions(&addr), 0);
    let out = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args(["run", "--agent", "naive-pay", "--format", "json"])
        .args([
            "--cases",
            "CASE-NOPE-1",
            "--url",
            &format!("http://{addr}"),
            "--db",
        ])
        .arg(dir.join("runs.db"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(sessions(&addr), 0);
}

/// Defect 1 (Ctrl-C): SIGINT during `run --url` ends the episode in progress, closes its
/// session and stops the run (non-zero, nothing stored): the server is left with no session.
#[test]
fn an_interrupted_run_closes_its_session() {
    let dir = temp_dir("sigint");
    let (_s, addr, _e) = start(&[], &[], &dir.join("key"));
    let cases = vec!["CASE-D-001"; 125].join(",");
    let mut run = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args([
            "run", "--agent", "teacher", "--pass-k", "16", "--format", "json",
        ])
        .args([
            "--cases",
            &cases,
            "--url",
            &format!("http://{addr}"),
            "--db",
        ])
        .arg(dir.join("runs.db"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it play a few episodes, then interrupt it mid-run.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(run.try_wait().unwrap().is_none(), "the run was still going");
    let kill = Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = run.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interrupted"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sessions(&addr), 0);
    assert!(
        !dir.join("runs.db").exists()
            || ls_store::Store::open(&dir.join("runs.db"))
                .unwrap()
                .list_runs(10)
                .unwrap()
                .is_empty(),
        "an interrupted run is not stored"
    );
}

/// Defect 7: a second SIGTERM during the drain exits at once (status 130), while a request
/// body still trickling in would otherwise hold the server for the whole grace period.
#[test]
fn a_second_signal_exits_at_once() {
    let dir = temp_dir("second");
    let (mut server, addr, _e) = start(&["--shutdown-grace-secs", "60"], &[], &dir.join("key"));
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"POST /reset HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\r\n{\"case_id\": \"")
        .unwrap();
    let trickle = std::thread::spawn(move || {
        // One byte every 200 ms: never stalled, never finished within the test.
        for _ in 0..100 {
            if s.write_all(b"x").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let term = |pid: u32| {
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
    };
    term(server.0.id());
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        server.0.try_wait().unwrap().is_none(),
        "the first signal drains the request still arriving"
    );
    let t = std::time::Instant::now();
    term(server.0.id());
    let status = loop {
        if let Some(st) = server.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the second signal did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    drop(trickle);
}

/// Issue 47, item 9: two servers on one machine with the default key location write one key
/// file each (named by port), and each key opens its own server's operator routes.
#[test]
fn two_servers_keep_their_own_default_key_files() {
    let dir = temp_dir("two-keys");
    let start_default = || {
        let (child, addr) = listening(
            Command::new(env!("CARGO_BIN_EXE_ledgershield"))
                .args(["serve", "--port", "0"])
                .env("XDG_STATE_HOME", &dir)
                .env_remove("LEDGERSHIELD_OPERATOR_KEY_FILE")
                .env_remove("ADMIN_API_KEY")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        (Server(child), addr)
    };
    let (_a, addr_a) = start_default();
    let (_b, addr_b) = start_default();
    let key_of = |addr: &str| {
        let port = addr.rsplit(':').next().unwrap();
        let file = dir
            .join("ledgershield")
            .join(format!("operator-key-{port}"));
        std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
            .trim()
            .to_owned()
    };
    let (ka, kb) = (key_of(&addr_a), key_of(&addr_b));
    assert_ne!(ka, kb);
    assert_eq!(get(&addr_a, "/runs", Some(&ka)).0, 200);
    assert_eq!(get(&addr_b, "/runs", Some(&kb)).0, 200);
    assert_eq!(get(&addr_a, "/runs", Some(&kb)).0, 403);
}

/// Issue 47, item 7: the database password is never printed: not in `--help` (the variable's
/// value), not in a connection error.
#[test]
fn the_database_password_is_never_printed() {
    const URL: &str = "postgres://ls:Sup3rSecretPw@127.0.0.1:1/ledgershield";
    for cmd in ["serve", "run", "report", "export", "compare"] {
        let out = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
            .args([cmd, "--help"])
            .env("LEDGERSHIELD_DB_PATH", URL)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{cmd} --help: {text}");
        assert!(
            text.contains("LEDGERSHIELD_DB_PATH"),
            "{cmd} --help: {text}"
        );
        assert!(
            !text.contains("Sup3rSecretPw"),
            "{cmd} --help prints the password:\n{text}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .args([
            "run",
            "--agent",
            "naive-pay",
            "--cases",
            "CASE-A-001",
            "--format",
            "json",
        ])
        .env("LEDGERSHIELD_DB_PATH", URL)
        .env("LEDGERSHIELD_LOG", "debug")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "storing into a closed port must fail: {text}"
    );
    assert!(
        text.contains("postgres://ls:***@127.0.0.1:1/ledgershield"),
        "{text}"
    );
    assert!(
        !text.contains("Sup3rSecretPw"),
        "the error prints the password:\n{text}"
    );
}

/// Issue 47, item 9: logs written to a file or a pipe carry no ANSI colour escapes.
#[test]
fn logs_to_a_pipe_have_no_colour_escapes() {
    let dir = temp_dir("ansi");
    let (server, addr, stderr) = start(&[], &[("LEDGERSHIELD_LOG", "debug")], &dir.join("key"));
    assert_eq!(get(&addr, "/health", None).0, 200);
    drop(server);
    let log = String::from_utf8(stderr.wait_with_output().unwrap().stdout).unwrap();
    assert!(log.contains("ControlBench environment ready"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "colour escapes in a piped log: {log:?}"
    );
}
