"""The structured policy (behaviour cloning + group-relative RL, numpy only) through the
``structured`` command, in a subprocess, on the task distribution's splits (train draws for
training, validation draws for the choice, test templates and the test generator held out):
trained, it beats every scripted baseline on the test episodes (macro means) and its checks
pass; the ladder has the lookup table beside the scripted baselines and the teacher; with
``--lr 0`` nothing is learned and the command fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import _binary
from ledgershield.training.structured import Rows, bootstrap_ci, fit_pointer, fit_softmax

TEST_EPISODES = 8  # per test set: the test templates' set and the test generator's


def _run(out: Path, lr: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ledgershield.training", "--bin", str(_binary()), "structured", "--out", str(out),
           "--train-episodes", "80", "--validation-episodes", "4", "--test-episodes", str(TEST_EPISODES), "--lr", str(lr),
           "--checkpoints", "", "--rl-seeds", "2", "--rl-iterations", "2", "--rl-batch", "4", "--rl-group", "4", "--rl-episodes", "12"]
    import ledgershield

    # The subprocess imports the package this test imported (installed, or the checkout).
    env = dict(os.environ, PYTHONPATH=str(Path(ledgershield.__file__).resolve().parents[1]))
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)


def test_trained_policy_beats_the_scripted_baselines_and_lr_zero_fails(tmp_path: Path) -> None:
    ok = _run(tmp_path / "ok", 0.05)
    assert ok.returncode == 0, ok.stderr[-3000:]
    s = json.loads((tmp_path / "ok" / "structured_summary.json").read_text())
    print(json.dumps({k: s[k] for k in ("held_out_episodes", "bc_held_out", "bc_ci95", "best_scripted", "rl")}))
    assert s["held_out_episodes"] == 2 * TEST_EPISODES and s["validation_episodes"] == 8
    assert all(i.split(":")[0] in ("test_templates", "test_generators") for i in s["held_out_ids"])
    assert all(s["checks"].values()), s["checks"]
    assert s["bc_held_out"] >= s["best_scripted"] + 0.3
    assert s["bc_parse_success_under_constraint"] >= 0.9
    names = [r["policy"] for r in s["matrix"]]
    assert names[:1] == ["structured-bc"]
    assert {"random", "naive-pay", "always-escalate", "teacher", "lookup-table", "structured-rl-s0", "structured-rl-s1"} <= set(names)
    assert all(r["episodes"] == s["held_out_episodes"] for r in s["matrix"])  # one held-out split for every policy
    for r in s["matrix"]:  # the headline is the macro mean of the per-template and per-generator means
        assert r["per_template"] and r["per_generator"] == {"holdout": r["macro_generators"]}
        assert abs(r["macro"] - (r["macro_templates"] + r["macro_generators"]) / 2) < 1e-3
    zero = _run(tmp_path / "zero", 0.0)
    assert zero.returncode == 1, zero.stdout[-2000:]
    assert "policy_beats_best_scripted" in zero.stderr
    z = json.loads((tmp_path / "zero" / "structured_summary.json").read_text())
    assert not z["checks"]["policy_beats_best_scripted"] and z["bc_held_out"] < s["bc_held_out"]


def test_linear_heads_learn_and_zero_lr_does_not() -> None:
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 10000))
    rows = [np.array(sorted(rng.choice(500, size=5, replace=False))) for _ in range(60)]
    ys = [int(r[0] % 3) for r in rows]
    w, losses = fit_softmax(rows, ys, 3, lr=0.1, epochs=80)
    assert losses[-1] < 0.5 * losses[0]
    acc = np.mean(np.argmax(Rows(rows).scores(w), axis=1) == np.array(ys))
    assert acc > 0.9
    w0, l0 = fit_softmax(rows, ys, 3, lr=0.0, epochs=5)
    assert not w0.any() and l0[0] == l0[-1]
    groups = [([np.array([1, 7]), np.array([2, 8]), np.array([3, 9])], [1]) for _ in range(10)]
    wp, lp = fit_pointer(groups, lr=0.1, epochs=50)
    assert lp[-1] < 0.1 and int(np.argmax(Rows(groups[0][0]).scores(wp)[:, 0])) == 1


def test_bootstrap_interval_brackets_the_mean() -> None:
    lo, hi = bootstrap_ci([0.1, 0.9, 0.5, 0.5])
    assert lo <= 0.5 <= hi and lo < hi
    assert bootstrap_ci([]) == (0.0, 0.0)
