"""Steps per second from Python: the in-process environment (one env, and the vector env) beside
the HTTP and WebSocket clients, on the same trajectories. Not a test: figures go to BENCHMARKS.md.

Every client plays the same policy on seeded random resets (seed i for episode i): OCR the first
document (fast), OCR it again (accurate), submit HOLD with confidence 0.8 (three steps, the last
one graded). Each client parses every reply as JSON, as a trainer would (the in-process single
env is also timed without parsing). The vector env plays the same policy by candidate index on
its own seeded resets and counts environment steps (autoreset rows are not counted).

Every figure is reported twice: steps per wall-clock second, and steps per CPU-second (the CPU
time of every thread of this process, `time.process_time()`, plus for the HTTP and WebSocket
clients the server process's CPU time read from /proc): on a shared machine the second is the
honest per-core figure, since waiting for a core costs wall time but no CPU time.

    python python/benchmarks/native_vs_http.py --server-bin target/wheel/ledgershield --episodes 300
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import threading
import time
from typing import Any, Dict, List, Tuple

import numpy as np
import requests

from ledgershield.native import ControlBenchEnv
from ledgershield.vector import AuditVectorEnv, ControlBenchVectorEnv

SUBMIT = {"action_type": "submit_decision", "payload": {"decision": "HOLD", "confidence": 0.8, "reason_codes": []}}


def actions_for(reset_reply: Dict[str, Any]) -> List[str]:
    doc = reset_reply["observation"]["visible_documents"][0]["doc_id"]
    return [json.dumps({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "fast"}}),
            json.dumps({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "accurate"}}),
            json.dumps(SUBMIT)]


def trajectories(episodes: int) -> List[Tuple[str, List[str]]]:
    env = ControlBenchEnv()
    out = []
    for i in range(episodes):
        reset = json.dumps({"seed": i, "fresh_institution": True})
        out.append((reset, actions_for(json.loads(env._env.reset(reset)))))
    return out


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


def bench_native(trajs: List[Tuple[str, List[str]]], parse: bool) -> Rate:
    env = ControlBenchEnv()._env
    steps, clock = 0, Clock()
    for reset, actions in trajs:
        r = env.reset(reset)
        if parse:
            json.loads(r)
        for a in actions:
            r = env.step(a)
            if parse:
                json.loads(r)
            steps += 1
    return clock.rate(steps)


def bench_http(url: str, trajs: List[Tuple[str, List[str]]]) -> Rate:
    s = requests.Session()
    h = {"X-Session-Id": "bench-http", "Content-Type": "application/json"}
    steps, clock = 0, Clock(with_server=True)
    for reset, actions in trajs:
        s.post(f"{url}/reset", data=reset, headers=h).json()
        for a in actions:
            s.post(f"{url}/step", data=a, headers=h).json()
            steps += 1
    return clock.rate(steps)


def bench_ws(url: str, trajs: List[Tuple[str, List[str]]]) -> Rate:
    from websockets.sync.client import connect

    steps = 0
    with connect(url.replace("http://", "ws://") + "/ws", max_size=None) as ws:
        clock = Clock(with_server=True)
        for reset, actions in trajs:
            ws.send(json.dumps({"type": "reset", "data": json.loads(reset)}))
            json.loads(ws.recv())
            for a in actions:
                ws.send('{"type": "step", "data": ' + a + "}")
                json.loads(ws.recv())
                steps += 1
        return clock.rate(steps)


def bench_vector(num_envs: int, threads: int, calls: int) -> Rate:
    vec = ControlBenchVectorEnv(num_envs=num_envs, threads=threads)
    obs, _ = vec.reset(seed=7)
    needs_reset = np.zeros(num_envs, dtype=bool)
    steps, clock = 0, Clock()
    for _ in range(calls):
        k = obs["features"][:, 3]
        n = obs["action_mask"].sum(axis=1)
        actions = np.where(k == 0, 0, np.where(k == 1, 1, n - 3))  # ocr fast, ocr accurate, HOLD
        obs, _, term, trunc, _ = vec.step(actions)
        steps += int((~needs_reset).sum())
        needs_reset = term | trunc
    return clock.rate(steps)


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
        k = obs["features"][:, 3]
        n = obs["action_mask"].sum(axis=1)
        actions = np.where(k == 0, 0, np.where(k == 1, 1, n - 3))
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
    steps, clock = 0, Clock()
    for _ in range(calls):
        actions = np.where(obs["features"][:, 0] == 0, 1, 0)
        obs, _, term, trunc, _ = vec.step(actions)
        steps += int((~needs_reset).sum())
        needs_reset = term | trunc
    return clock.rate(steps)


def start_server(binary: str) -> Tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([binary, "serve", "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    m = re.search(r"listening on (http://\S+)", proc.stdout.readline())
    assert m, "server did not report its address"
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server-bin", default=None, help="ledgershield binary for the HTTP/WebSocket clients")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--vector-calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    trajs = trajectories(a.episodes)
    results: Dict[str, List[Rate]] = {}

    def record(name: str, value: Rate) -> None:
        results.setdefault(name, []).append(value)

    proc, url = start_server(a.server_bin) if a.server_bin else (None, None)
    try:
        for _ in range(a.rounds):
            record("native single env, reply text only", bench_native(trajs, parse=False))
            record("native single env, reply parsed", bench_native(trajs, parse=True))
            for n, t in ((16, 1), (64, 1), (256, 1), (64, 2)):
                record(f"vector env N={n}, {t} thread(s)", bench_vector(n, t, max(a.vector_calls * 16 // n, 20)))
            record("audit vector env N=64, 1 thread", bench_audit_vector(64, max(a.vector_calls // 4, 20)))
            if url:
                record("HTTP client (requests, keep-alive), reply parsed", bench_http(url, trajs))
                record("WebSocket client (/ws), reply parsed", bench_ws(url, trajs))
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"load average at the end: {os.getloadavg()}")
    for name, values in results.items():
        wall = [v[0] for v in values]
        cpu = [v[1] for v in values]
        print(f"{name:50s} wall median {np.median(wall):9.0f} steps/s (min {min(wall):.0f}, max {max(wall):.0f})"
              f"   CPU median {np.median(cpu):9.0f} steps/CPU-s (min {min(cpu):.0f}, max {max(cpu):.0f})")
    for n in (16, 64):
        split = split_vector(n, max(a.vector_calls * 16 // n, 20))
        print(f"vector env N={n}, CPU us per step: " + ", ".join(f"{k} {v:.1f}" for k, v in split.items()))
    print(json.dumps({k: {"wall": [round(v[0]) for v in vs], "cpu": [round(v[1]) for v in vs]} for k, vs in results.items()}))


if __name__ == "__main__":
    main()
