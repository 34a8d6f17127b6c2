#!/usr/bin/env python3
"""Bounds check of a real server binary (issue 17's lifetime targets), loopback only.

Starts `ledgershield serve` (ControlBench, then `--env audit`) on local ports with a 5-second
idle timeout and checks, as a hostile or clumsy client would push it:
  * 1,024 + 1 named sessions from one client: every one is served (the client recycles its own
    least recently used sessions past its quota of 256), another client is served, the default
    session still works, and a new session is accepted once the others have expired;
  * 10,000 GETs of /institutional-memory with new ids create no session;
  * 500 connections that never finish their request head: a normal client is still served, and
    the header-read timeout closes all 500;
  * 300 audit campaigns from one client, never finished: every one is served, the client holds at
    most its quota (64), another client is served, other routes keep serving, and a new campaign
    is accepted once idle campaigns expire;
  * SIGTERM: exit code 0.
Prints one JSON object of what it measured and exits non-zero if a check fails.

    python3 scripts/bounds_check.py target/debug/ledgershield
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BIN = sys.argv[1] if len(sys.argv) > 1 else "target/debug/ledgershield"
WORKDIR = tempfile.mkdtemp(prefix="ls-bounds-")
IDLE_SECS = 5
HEADER_TIMEOUT_SECS = 15  # the server's default header-read timeout


def start(args, port):
    proc = subprocess.Popen([os.path.abspath(BIN), "serve", "--port", str(port), "--session-idle-secs", str(IDLE_SECS)] + args,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=WORKDIR)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not start")


def req(port, method, path, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=data,
                               headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(r, timeout=10) as f:
            return f.status, f.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def req_from(src, port, method, path, body=None, headers=None):
    """`req` from another loopback address (another client)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(src, 0))
    c.request(method, path, body=None if body is None else json.dumps(body),
              headers={"Content-Type": "application/json", **(headers or {})})
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


def tally(codes):
    out = {}
    for c in codes:
        out[str(c)] = out.get(str(c), 0) + 1
    return out


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return -1


def controlbench(out, checks):
    port = 18201
    # 500 slow connections come from one address: allow them all, so the check measures the
    # header-read timeout rather than the per-client connection cap (256 by default).
    p = start(["--max-sessions", "1024", "--max-connections-per-client", "1024"], port)
    before = json.loads(req(port, "GET", "/health")[1])["sessions"]
    gets = [req(port, "GET", "/institutional-memory", None, {"X-Session-Id": f"new{i}"})[0] for i in range(10000)]
    out["gets_10000"] = tally(gets)
    out["sessions_before_and_after_gets"] = [before, json.loads(req(port, "GET", "/health")[1])["sessions"]]
    checks["reads created no session"] = out["sessions_before_and_after_gets"][1] == before
    codes = [req(port, "POST", "/reset", {"case_id": "CASE-A-001"}, {"X-Session-Id": f"s{i}"})[0] for i in range(1025)]
    out["sessions_1025"] = tally(codes)
    checks["every session of one client served"] = codes.count(200) == 1025
    out["sessions_held_by_one_client"] = json.loads(req(port, "GET", "/health")[1])["sessions"]
    checks["one client holds at most its quota"] = out["sessions_held_by_one_client"] <= 256 + 1
    checks["another client served"] = req_from("127.0.0.2", port, "POST", "/reset", {"case_id": "CASE-A-001"},
                                               {"X-Session-Id": "other"})[0] == 200
    checks["default session served at capacity"] = req(port, "POST", "/reset", {"case_id": "CASE-A-001"})[0] == 200
    out["rss_kb_at_capacity"] = rss_kb(p.pid)
    time.sleep(IDLE_SECS + 1)
    checks["new session after idle expiry"] = req(port, "POST", "/reset", {"case_id": "CASE-A-001"}, {"X-Session-Id": "late"})[0] == 200
    slow = []
    for _ in range(500):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.append(s)
    t = time.time()
    checks["normal client served beside 500 slow ones"] = req(port, "GET", "/health")[0] == 200
    out["normal_reply_secs_beside_slow"] = round(time.time() - t, 3)
    out["rss_kb_with_500_slow"] = rss_kb(p.pid)
    time.sleep(HEADER_TIMEOUT_SECS + 2)
    closed = 0
    for s in slow:
        s.settimeout(0.5)
        try:
            closed += s.recv(1) == b""
        except OSError:
            pass
        s.close()
    out["slow_connections_closed"] = closed
    checks["header timeout closed every slow connection"] = closed == 500
    p.terminate()
    checks["controlbench exits 0 on SIGTERM"] = p.wait(15) == 0


def audit(out, checks):
    port = 18202
    p = start(["--env", "audit"], port)
    codes = [req(port, "POST", "/campaign/start", {"seed": i, "total_periods": 5})[0] for i in range(300)]
    out["campaigns_300"] = tally(codes)
    checks["every campaign of one client served"] = codes.count(200) == 300
    out["campaigns_held"] = json.loads(req(port, "GET", "/health")[1])["active_campaigns"]
    checks["one client holds at most its campaign quota"] = out["campaigns_held"] <= 64
    checks["another client's campaign served"] = req_from("127.0.0.2", port, "POST", "/campaign/start",
                                                          {"seed": 7, "total_periods": 5})[0] == 200
    checks["reset served with the campaign map full"] = req(port, "POST", "/reset", {"task_id": 1, "seed": 42})[0] == 200
    out["audit_rss_kb_with_campaigns"] = rss_kb(p.pid)
    time.sleep(IDLE_SECS + 1)
    checks["new campaign after idle expiry"] = req(port, "POST", "/campaign/start", {"seed": 1, "total_periods": 5})[0] == 200
    p.terminate()
    checks["audit exits 0 on SIGTERM"] = p.wait(15) == 0


def main():
    out, checks = {}, {}
    controlbench(out, checks)
    audit(out, checks)
    out["checks"] = checks
    print(json.dumps(out, indent=1))
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
