"""Steps per second from Python: the in-process environment (one env, and the vector env) beside
the HTTP and WebSocket clients, on the same trajectories. Not a test: figures go to BENCHMARKS.md.

Every client plays the same policy on seeded random resets (seed i for episode i): OCR the first
document (fast), OCR it again (accurate), submit HOLD with confidence 0.8 (three steps, the last
one graded). Each client parses every reply as JSON, as a trainer would (the in-process single
env is also timed without parsing). The vector env plays the same policy by candidate index on
its own seeded resets and counts environment steps (autoreset rows are not counted).

    python python/benchmarks/native_vs_http.py --server-bin target/wheel/ledgershield --episodes 300
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import threading
import time
from typing import Any, Dict, List, Tuple

import numpy as np
import requests

from ledgershield.native import ControlBenchEnv
from ledgershield.vector import ControlBenchVectorEnv

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


def rate(steps: int, seconds: float) -> float:
    return steps / seconds if seconds > 0 else float("nan")


def bench_native(trajs: List[Tuple[str, List[str]]], parse: bool) -> float:
    env = ControlBenchEnv()._env
    steps, t0 = 0, time.perf_counter()
    for reset, actions in trajs:
        r = env.reset(reset)
        if parse:
            json.loads(r)
        for a in actions:
            r = env.step(a)
            if parse:
                json.loads(r)
            steps += 1
    return rate(steps, time.perf_counter() - t0)


def bench_http(url: str, trajs: List[Tuple[str, List[str]]]) -> float:
    s = requests.Session()
    h = {"X-Session-Id": "bench-http", "Content-Type": "application/json"}
    steps, t0 = 0, time.perf_counter()
    for reset, actions in trajs:
        s.post(f"{url}/reset", data=reset, headers=h).json()
        for a in actions:
            s.post(f"{url}/step", data=a, headers=h).json()
            steps += 1
    return rate(steps, time.perf_counter() - t0)


def bench_ws(url: str, trajs: List[Tuple[str, List[str]]]) -> float:
    from websockets.sync.client import connect

    steps = 0
    with connect(url.replace("http://", "ws://") + "/ws", max_size=None) as ws:
        t0 = time.perf_counter()
        for reset, actions in trajs:
            ws.send(json.dumps({"type": "reset", "data": json.loads(reset)}))
            json.loads(ws.recv())
            for a in actions:
                ws.send('{"type": "step", "data": ' + a + "}")
                json.loads(ws.recv())
                steps += 1
        return rate(steps, time.perf_counter() - t0)


def bench_vector(num_envs: int, threads: int, calls: int) -> float:
    vec = ControlBenchVectorEnv(num_envs=num_envs, threads=threads)
    obs, _ = vec.reset(seed=7)
    needs_reset = np.zeros(num_envs, dtype=bool)
    steps, t0 = 0, time.perf_counter()
    for _ in range(calls):
        k = obs["features"][:, 3]
        n = obs["action_mask"].sum(axis=1)
        actions = np.where(k == 0, 0, np.where(k == 1, 1, n - 3))  # ocr fast, ocr accurate, HOLD
        obs, _, term, trunc, _ = vec.step(actions)
        steps += int((~needs_reset).sum())
        needs_reset = term | trunc
    return rate(steps, time.perf_counter() - t0)


def start_server(binary: str) -> Tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([binary, "serve", "--host", "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    m = re.search(r"listening on (http://\S+)", proc.stdout.readline())
    assert m, "server did not report its address"
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
    results: Dict[str, List[float]] = {}

    def record(name: str, value: float) -> None:
        results.setdefault(name, []).append(value)

    proc, url = start_server(a.server_bin) if a.server_bin else (None, None)
    try:
        for _ in range(a.rounds):
            record("native single env, reply text only", bench_native(trajs, parse=False))
            record("native single env, reply parsed", bench_native(trajs, parse=True))
            for n, t in ((16, 1), (64, 1), (64, 2)):
                record(f"vector env N={n}, {t} thread(s)", bench_vector(n, t, a.vector_calls * 16 // n))
            if url:
                record("HTTP client (requests, keep-alive), reply parsed", bench_http(url, trajs))
                record("WebSocket client (/ws), reply parsed", bench_ws(url, trajs))
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
    for name, values in results.items():
        print(f"{name:55s} median {np.median(values):10.0f} steps/s   (rounds: {', '.join(f'{v:.0f}' for v in values)})")
    print(json.dumps({k: float(np.median(v)) for k, v in results.items()}))


if __name__ == "__main__":
    main()
