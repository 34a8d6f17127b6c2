"""Steps per second from Python: the in-process environment (one env, and the vector env) beside
the HTTP and WebSocket clients, on the same real episodes. Not a test: figures go to BENCHMARKS.md.

Every client plays the same episodes: seeded random resets (``{"seed": i}`` for episode i, no
operator-only field, so an HTTP server without a key serves them) and the same policy: OCR the
first document (fast), OCR it again (accurate), submit HOLD with confidence 0.8 (three steps, the
last one graded). The sequence is played once in process first (a fresh environment) to fix each
episode's requests and its final reward; every client then replays it in a fresh environment (a
new session, a new socket) and **must** get a 2xx reply (an observation over WebSocket) for every
request, ``done`` on the submit and the same final reward for every episode, or the script stops
with an error: a figure is only printed for episodes that really ran. Each client parses every
reply as JSON, as a trainer would (the in-process single env is also timed without parsing; it
then checks ``"done":true`` in the submit's text). The vector env plays the same policy by
candidate index on its own seeded resets and counts environment steps (autoreset rows are not
counted); it must complete episodes too.

HTTP is measured with two clients, named in every line: ``http.client`` (the standard library's
keep-alive connection, the leanest Python client) and ``requests`` (a ``Session``, what most
trainers use). WebSocket: ``websockets``' synchronous client on ``/ws``.

Every figure is reported twice: steps per wall-clock second, and steps per CPU-second (the CPU
time of every thread of this process, ``time.process_time()``, plus for the HTTP and WebSocket
clients the server process's CPU time read from /proc): on a shared machine the second is the
honest per-core figure, since waiting for a core costs wall time but no CPU time.

    python python/benchmarks/native_vs_http.py --server-bin target/wheel/ledgershield --episodes 300
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import threading
import time
import urllib.parse
import uuid
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import requests

from ledgershield.native import ControlBenchEnv
from ledgershield.vector import AuditVectorEnv, ControlBenchVectorEnv

SUBMIT = {"action_type": "submit_decision", "payload": {"decision": "HOLD", "confidence": 0.8, "reason_codes": []}}

# One episode: the reset body, the three step bodies, and the final reward it must end with.
Episode = Tuple[str, List[str], float]


class BenchError(RuntimeError):
    """A client did not play the episode it was asked to (a refusal, a missing ``done``, another
    final reward): no figure is printed for it."""


def actions_for(reset_reply: Dict[str, Any]) -> List[str]:
    doc = reset_reply["observation"]["visible_documents"][0]["doc_id"]
    return [json.dumps({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "fast"}}),
            json.dumps({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "accurate"}}),
            json.dumps(SUBMIT)]


def episodes(n: int) -> List[Episode]:
    """The episodes, played once in a fresh in-process environment: each one's requests and its
    final reward."""
    env = ControlBenchEnv()._env
    out = []
    for i in range(n):
        reset = json.dumps({"seed": i})
        actions = actions_for(json.loads(env.reset(reset)))
        last: Dict[str, Any] = {}
        for a in actions:
            last = json.loads(env.step(a))
        if not last.get("done"):
            raise BenchError(f"episode {i} did not end on its submit in process")
        out.append((reset, actions, float(last["reward"])))
    return out


def check_final(client: str, i: int, reply: Dict[str, Any], want: float) -> None:
    if reply.get("done") is not True or reply.get("reward") != want:
        raise BenchError(f"{client}: episode {i} ended with done={reply.get('done')!r}, "
                         f"reward={reply.get('reward')!r} (expected done and {want})")


Rate = Tuple[float, float]  # (steps per wall second, steps per CPU second)
SERVER_PID: List[int] = []


def server_cpu() -> float:
    """CPU seconds the server process has used (user + system), 0 without a server."""
    if not SERVER_PID:
        return 0.0
    with open(f"/proc/{SERVER_PID[0]}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Clock:
    """Wall and CPU time of one measurement (CPU: this process's threads, plus the server's
    when `with_server`)."""

    def __init__(self, with_server: bool = False) -> None:
        self.with_server = with_server
        self.t0, self.c0, self.s0 = time.perf_counter(), time.process_time(), server_cpu()

    def rate(self, steps: int) -> Rate:
        wall = time.perf_counter() - self.t0
        cpu = time.process_time() - self.c0
        if self.with_server:
            cpu += server_cpu() - self.s0
        return (steps / wall if wall > 0 else float("nan"), steps / cpu if cpu > 0 else float("nan"))


def bench_native(eps: List[Episode], parse: bool) -> Rate:
    env = ControlBenchEnv()._env
    steps, clock = 0, Clock()
    for i, (reset, actions, want) in enumerate(eps):
        r = env.reset(reset)
        if parse:
            json.loads(r)
        for a in actions:
            r = env.step(a)
            if parse:
                json.loads(r)
            steps += 1
        if parse:
            check_final("native", i, json.loads(r), want)
        elif '"done":true' not in r:
            raise BenchError(f"native: episode {i} did not end on its submit")
    return clock.rate(steps)


def play_http(client: str, post: Callable[[str, str], Tuple[int, bytes]], eps: List[Episode]) -> Rate:
    """Play `eps` with `post(path, body) -> (status, reply bytes)`; every reply must be 2xx."""
    steps, clock = 0, Clock(with_server=True)
    for i, (reset, actions, want) in enumerate(eps):
        status, body = post("/reset", reset)
        if not 200 <= status < 300:
            raise BenchError(f"{client}: /reset of episode {i} answered {status}: {body[:200]!r}")
        json.loads(body)
        reply: Dict[str, Any] = {}
        for a in actions:
            status, body = post("/step", a)
            if not 200 <= status < 300:
                raise BenchError(f"{client}: /step of episode {i} answered {status}: {body[:200]!r}")
            reply = json.loads(body)
            steps += 1
        check_final(client, i, reply, want)
    return clock.rate(steps)


def bench_requests(url: str, eps: List[Episode]) -> Rate:
    s = requests.Session()
    h = {"X-Session-Id": f"bench-{uuid.uuid4().hex}", "Content-Type": "application/json"}

    def post(path: str, body: str) -> Tuple[int, bytes]:
        r = s.post(f"{url}{path}", data=body, headers=h)
        return r.status_code, r.content

    try:
        return play_http("requests", post, eps)
    finally:
        s.delete(f"{url}/session", headers=h)


def bench_http_client(url: str, eps: List[Episode]) -> Rate:
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    h = {"X-Session-Id": f"bench-{uuid.uuid4().hex}", "Content-Type": "application/json"}

    def post(path: str, body: str) -> Tuple[int, bytes]:
        conn.request("POST", path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, r.read()

    try:
        return play_http("http.client", post, eps)
    finally:
        conn.request("DELETE", "/session", headers=h)
        conn.getresponse().read()
        conn.close()


def bench_ws(url: str, eps: List[Episode]) -> Rate:
    from websockets.sync.client import connect

    steps = 0
    with connect(url.replace("http://", "ws://") + "/ws", max_size=None) as ws:
        clock = Clock(with_server=True)
        for i, (reset, actions, want) in enumerate(eps):
            ws.send('{"type": "reset", "data": ' + reset + "}")
            if json.loads(ws.recv())["type"] != "observation":
                raise BenchError(f"websocket: reset of episode {i} was refused")
            reply: Dict[str, Any] = {}
            for a in actions:
                ws.send('{"type": "step", "data": ' + a + "}")
                msg = json.loads(ws.recv())
                if msg["type"] != "observation":
                    raise BenchError(f"websocket: step of episode {i} answered {msg}")
                reply = msg["data"]
                steps += 1
            check_final("websocket", i, reply, want)
        return clock.rate(steps)


def vector_policy(obs: Dict[str, np.ndarray]) -> np.ndarray:
    k = obs["features"][:, 3]
    n = obs["action_mask"].sum(axis=1)
    return np.where(k == 0, 0, np.where(k == 1, 1, n - 3))  # ocr fast, ocr accurate, HOLD


def bench_vector(num_envs: int, threads: int, calls: int) -> Rate:
    vec = ControlBenchVectorEnv(num_envs=num_envs, threads=threads)
    obs, _ = vec.reset(seed=7)
    needs_reset = np.zeros(num_envs, dtype=bool)
    steps, done, clock = 0, 0, Clock()
    for _ in range(calls):
        obs, _, term, trunc, _ = vec.step(vector_policy(obs))
        steps += int((~needs_reset).sum())
        needs_reset = term | trunc
        done += int(needs_reset.sum())
    rate = clock.rate(steps)
    # Three steps an episode: every environment ends one every three steps it takes.
    if done * 3 < steps - 3 * num_envs:
        raise BenchError(f"vector env N={num_envs}: only {done} episodes ended in {steps} steps")
    return rate


def split_vector(num_envs: int, calls: int) -> Dict[str, float]:
    """CPU microseconds a step of the vector env (one worker thread) spends inside the native
    call, in the Python wrapper (action conversion, array views) and in the policy's NumPy."""
    vec = ControlBenchVectorEnv(num_envs=num_envs, threads=1)
    inner = vec._vec
    spent = {"native": 0.0, "policy": 0.0}

    class Timed:
        def step(self, *args: Any) -> Any:
            t = time.process_time()
            out = inner.step(*args)
            spent["native"] += time.process_time() - t
            return out

    obs, _ = vec.reset(seed=7)
    vec._vec = Timed()
    needs_reset = np.zeros(num_envs, dtype=bool)
    steps, t0 = 0, time.process_time()
    for _ in range(calls):
        p = time.process_time()
        actions = vector_policy(obs)
        spent["policy"] += time.process_time() - p
        obs, _, term, trunc, _ = vec.step(actions)
        steps += int((~needs_reset).sum())
        needs_reset = term | trunc
    total = time.process_time() - t0
    us = 1e6 / steps
    return {"total": total * us, "native": spent["native"] * us, "policy": spent["policy"] * us,
            "wrapper": (total - spent["native"] - spent["policy"]) * us}


def bench_audit_vector(num_envs: int, calls: int) -> Rate:
    """The audit vector env (one worker thread): report the first candidate finding, then
    submit final (two steps an episode)."""
    vec = AuditVectorEnv(num_envs=num_envs, threads=1)
    obs, _ = vec.reset(seed=7)
    needs_reset = np.zeros(num_envs, dtype=bool)
    steps, done, clock = 0, 0, Clock()
    for _ in range(calls):
        actions = np.where(obs["features"][:, 0] == 0, 1, 0)
        obs, _, term, trunc, _ = vec.step(actions)
        steps += int((~needs_reset).sum())
        needs_reset = term | trunc
        done += int(needs_reset.sum())
    rate = clock.rate(steps)
    if done == 0:
        raise BenchError("audit vector env: no episode ended")
    return rate


def start_server(binary: str) -> Tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([binary, "serve", "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    m = re.search(r"listening on (http://\S+)", proc.stdout.readline())
    if not m:
        raise BenchError("server did not report its address")
    SERVER_PID[:] = [proc.pid]
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    url = m.group(1).rstrip("/")
    for _ in range(200):
        try:
            if requests.get(f"{url}/health", timeout=1).ok:
                break
        except requests.RequestException:
            time.sleep(0.05)
    return proc, url


VECTOR = "vector env N=16, 1 thread(s)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin", default=None, help="ledgershield binary for the HTTP/WebSocket clients")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--vector-calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    eps = episodes(a.episodes)
    results: Dict[str, List[Rate]] = {}

    def record(name: str, value: Rate) -> None:
        results.setdefault(name, []).append(value)

    proc, url = start_server(a.server_bin) if a.server_bin else (None, None)
    try:
        for _ in range(a.rounds):
            record("native single env, reply text only", bench_native(eps, parse=False))
            record("native single env, reply parsed", bench_native(eps, parse=True))
            for n, t in ((16, 1), (64, 1), (256, 1), (64, 2)):
                record(f"vector env N={n}, {t} thread(s)", bench_vector(n, t, max(a.vector_calls * 16 // n, 20)))
            record("audit vector env N=64, 1 thread", bench_audit_vector(64, max(a.vector_calls // 4, 20)))
            if url:
                record("HTTP, http.client keep-alive, reply parsed", bench_http_client(url, eps))
                record("HTTP, requests.Session keep-alive, reply parsed", bench_requests(url, eps))
                record("WebSocket /ws, websockets sync client, reply parsed", bench_ws(url, eps))
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"{len(eps)} episodes per client per round, every one checked (2xx, done, final reward)")
    print(f"load average at the end: {os.getloadavg()}")
    medians: Dict[str, Rate] = {}
    for name, values in results.items():
        wall = [v[0] for v in values]
        cpu = [v[1] for v in values]
        medians[name] = (float(np.median(wall)), float(np.median(cpu)))
        print(f"{name:55s} wall median {np.median(wall):9.0f} steps/s (min {min(wall):.0f}, max {max(wall):.0f})"
              f"   CPU median {np.median(cpu):9.0f} steps/CPU-s (min {min(cpu):.0f}, max {max(cpu):.0f})")
    for name, (wall, cpu) in medians.items():
        if name.startswith(("HTTP", "WebSocket")):
            vw, vc = medians[VECTOR]
            print(f"{VECTOR} vs {name}: {vc / cpu:.1f}x per CPU-second, {vw / wall:.1f}x wall-clock")
    for n in (16, 64):
        split = split_vector(n, max(a.vector_calls * 16 // n, 20))
        print(f"vector env N={n}, CPU us per step: " + ", ".join(f"{k} {v:.1f}" for k, v in split.items()))
    print(json.dumps({k: {"wall": [round(v[0]) for v in vs], "cpu": [round(v[1]) for v in vs]} for k, vs in results.items()}))


if __name__ == "__main__":
    main()
