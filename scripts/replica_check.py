#!/usr/bin/env python3
"""Plays episodes over /ws through the load balancer and checks how the replicas shared the work.

    python3 scripts/replica_check.py ws   --url http://127.0.0.1:8000 --connections 24 --episodes 8
    python3 scripts/replica_check.py clients --url http://127.0.0.1:8000 --clients 300
    python3 scripts/replica_check.py spread --replicas http://127.0.0.1:8001,... --min-share 0.2

`ws`: each connection plays whole episodes (reset, five tools, submit_decision) on the curated
cases; every reply must be an observation (no error, no reset_required: a WebSocket connection
keeps one replica's session), and each episode must end done with a final score. Prints one
JSON line with the counts and exits non-zero on any failure.

`clients`: `--clients` clients at once, each from its own loopback address (127.1.x.y), each on
its own keep-alive connection: all connect first, then each plays one whole episode over HTTP
(its own X-Session-Id). Every reply must be 2xx (a 503 or a 429 is a failure: the stage turned a
client away) and every episode must end graded.

`spread`: reads each replica's Prometheus /metrics and checks that every replica started at
least `--min-share` of a fair share of the episodes (HTTP and /ws together), and that none
answered a 5xx. Standard library only (a minimal RFC 6455 client), so CI installs nothing.
"""

import argparse
import base64
import concurrent.futures
import http.client
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.parse
import urllib.request

CASES = [f"CASE-{c}" for c in (
    "A-001 A-002 A-003 A-004 B-001 B-002 B-003 B-004 B-005 C-001 C-002 C-003 C-004 "
    "D-001 D-002 D-003 D-004 D-005 D-006 E-001 E-002").split()]


class WebSocket:
    """The client side of RFC 6455 for text messages: masked frames out, any length in."""

    def __init__(self, url, timeout=30.0):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET {u.path or '/'} HTTP/1.1\r\nHost: {u.netloc}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        self.buf = b""
        head = self._until(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise RuntimeError(f"upgrade refused: {status.decode(errors='replace')}")

    def _until(self, marker):
        while marker not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(marker, 1)
        return head

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed")
        self.buf += chunk

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, obj):
        data = json.dumps(obj).encode()
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        mask = os.urandom(4)
        body = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + body)

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._take(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._take(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._take(8))[0]
            payload = self._take(n)
            op = b0 & 0x0F
            if op == 0x8:
                raise RuntimeError(f"closed by server: {payload[2:].decode(errors='replace')}")
            if op in (0x9, 0xA):
                continue  # ping / pong
            message += payload
            if b0 & 0x80:
                return json.loads(message)

    def close(self):
        try:
            self.sock.sendall(struct.pack("!BB", 0x88, 0x80) + os.urandom(4))
        finally:
            self.sock.close()


def script(obs):
    docs = obs.get("visible_documents") or [{}]
    doc = docs[0].get("doc_id", "")
    return [
        {"action_type": "ocr", "payload": {"doc_id": doc, "mode": "fast"}},
        {"action_type": "zoom", "payload": {"doc_id": doc, "page": 1, "bbox": [0, 0, 300, 200]}},
        {"action_type": "lookup_policy", "payload": {}},
        {"action_type": "search_ledger", "payload": {"amount": 2478}},
        {"action_type": "request_callback_verification", "payload": {}},
        {"action_type": "submit_decision", "payload": {
            "decision": "NEEDS_REVIEW", "confidence": 0.6, "reason_codes": [], "evidence_map": {}}},
    ]


def play_connection(url, worker, episodes):
    """One connection's episodes; (episodes completed, list of failures)."""
    ws_url = url.replace("http://", "ws://", 1).rstrip("/") + "/ws"
    failures, done = [], 0
    ws = WebSocket(ws_url)
    try:
        for k in range(episodes):
            case = CASES[(worker + k) % len(CASES)]
            ws.send({"type": "reset", "data": {"case_id": case}})
            reply = ws.recv()
            if reply.get("type") != "observation":
                failures.append(f"{case} reset: {json.dumps(reply)[:200]}")
                continue
            obs = reply["data"].get("observation", reply["data"])
            last = None
            for action in script(obs):
                ws.send({"type": "step", "data": action})
                last = ws.recv()
                if last.get("type") != "observation":
                    failures.append(f"{case} step {action['action_type']}: {json.dumps(last)[:200]}")
                    break
            else:
                data = last["data"]
                info = data.get("info") or {}
                if data.get("done") is True and "final_score" in info:
                    done += 1
                else:
                    failures.append(f"{case}: the episode did not end graded: {json.dumps(data)[:200]}")
    finally:
        ws.close()
    return done, failures


def cmd_ws(args):
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.connections) as pool:
        results = list(pool.map(lambda w: play_connection(args.url, w, args.episodes),
                                range(args.connections)))
    elapsed = time.monotonic() - t0
    done = sum(r[0] for r in results)
    failures = [f for r in results for f in r[1]]
    print(json.dumps({"ws_episodes": done, "connections": args.connections,
                      "failures": len(failures), "seconds": round(elapsed, 2),
                      "episodes_per_s": round(done / elapsed, 1)}))
    for f in failures[:10]:
        print("  failure:", f, file=sys.stderr)
    expected = args.connections * args.episodes
    if failures or done != expected:
        print(f"FAIL: {done}/{expected} WebSocket episodes completed", file=sys.stderr)
        return 1
    return 0


def client_episode(url, i, barrier):
    """Client `i` from its own loopback address: connect, wait for every other client, then play
    one episode on the connection; (statuses seen, failure or None)."""
    u = urllib.parse.urlparse(url)
    src = f"127.1.{i // 250}.{i % 250 + 1}"
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60, source_address=(src, 0))
    conn.connect()
    statuses = []

    def post(path, body):
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json", "X-Session-Id": f"client-{i}"})
        r = conn.getresponse()
        data = r.read()
        statuses.append(r.status)
        if not 200 <= r.status < 300:
            raise RuntimeError(f"{path} answered {r.status}: {data[:200]!r}")
        return json.loads(data)

    try:
        barrier.wait(timeout=120)
        case = CASES[i % len(CASES)]
        obs = post("/reset", {"case_id": case})["observation"]
        last = {}
        for action in script(obs):
            last = post("/step", action)
        if last.get("done") is not True or "final_score" not in (last.get("info") or {}):
            return statuses, f"client {i}: {case} did not end graded"
        return statuses, None
    except (RuntimeError, OSError, threading.BrokenBarrierError) as e:
        return statuses, f"client {i} ({src}): {e}"
    finally:
        conn.close()


def cmd_clients(args):
    barrier = threading.Barrier(args.clients)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
        results = list(pool.map(lambda i: client_episode(args.url, i, barrier), range(args.clients)))
    statuses = [s for r in results for s in r[0]]
    failures = [r[1] for r in results if r[1]]
    counts = {str(code): statuses.count(code) for code in sorted(set(statuses))}
    print(json.dumps({"clients": args.clients, "statuses": counts, "failures": len(failures),
                      "seconds": round(time.monotonic() - t0, 2)}))
    for f in failures[:10]:
        print("  failure:", f, file=sys.stderr)
    if failures or statuses.count(503):
        print(f"FAIL: {len(failures)} of {args.clients} clients were not served whole "
              f"({statuses.count(503)} replies were 503)", file=sys.stderr)
        return 1
    return 0


def scrape(base):
    req = urllib.request.Request(base.rstrip("/") + "/metrics", headers={"Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    episodes = server_errors = 0.0
    for line in text.splitlines():
        if line.startswith("ledgershield_episodes_started_total{"):
            episodes += float(line.rsplit(" ", 1)[1])
        elif line.startswith("ledgershield_http_errors_total{class=\"5xx\"}"):
            server_errors += float(line.rsplit(" ", 1)[1])
    return episodes, server_errors


def cmd_spread(args):
    replicas = [u for u in args.replicas.split(",") if u]
    counts = [scrape(u) for u in replicas]
    total = sum(c[0] for c in counts)
    fair = total / len(replicas)
    shares = [round(c[0] / total, 3) if total else 0.0 for c in counts]
    print(json.dumps({"episodes_per_replica": [int(c[0]) for c in counts], "shares": shares,
                      "server_errors": [int(c[1]) for c in counts]}))
    ok = total > 0
    for url, (episodes, errors) in zip(replicas, counts):
        if episodes < args.min_share * fair:
            print(f"FAIL: {url} started {int(episodes)} episodes, under {args.min_share:.0%} "
                  f"of a fair share ({fair:.0f})", file=sys.stderr)
            ok = False
        if errors:
            print(f"FAIL: {url} answered {int(errors)} 5xx responses", file=sys.stderr)
            ok = False
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("ws")
    w.add_argument("--url", required=True)
    w.add_argument("--connections", type=int, default=24)
    w.add_argument("--episodes", type=int, default=8, help="per connection")
    c = sub.add_parser("clients")
    c.add_argument("--url", required=True)
    c.add_argument("--clients", type=int, default=300)
    s = sub.add_parser("spread")
    s.add_argument("--replicas", required=True, help="comma-separated replica base URLs")
    s.add_argument("--min-share", type=float, default=0.6)
    args = p.parse_args()
    return {"ws": cmd_ws, "clients": cmd_clients, "spread": cmd_spread}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
