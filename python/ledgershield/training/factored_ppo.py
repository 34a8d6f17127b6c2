"""Learning ControlBench with a stock RL algorithm through the structured interface.

``python -m ledgershield.training.factored_ppo --out DIR [--minutes 60] [--seeds 1,2,3]``

* **Environment**: ``ledgershield.structured.StructuredControlBenchEnv`` (the structured
  observation and the factored action space computed in Rust), episodes drawn from the task
  distribution (``ls_gen::tasks``) on the **train** templates and **train** generators.
* **Algorithm**: sb3-contrib's ``MaskablePPO`` with SB3's stock ``MultiInputPolicy`` (an MLP over
  the flattened observation), from random initialisation; the action mask comes from
  ``action_masks()``. Nothing of the algorithm is project code.
* **Model selection** on the **validation** split only (held-out validation templates and the
  validation generator); the **test** split (held-out test templates, the test generator) is
  played once, at the end, by the selected checkpoint.
* **Baselines** on the same episodes: random legal actions, naive PAY, always escalate,
  checklist-PAY (runs the family's tools, parses nothing, pays citing their records), a
  **lookup table** (the most common training action of the teacher given the family and the
  actions so far) and the teacher itself (re-expressed through the factored space).
* **BC then PPO**: behaviour cloning of the teacher's factored episodes (cross-entropy of the
  stock policy's masked distribution), then the same PPO; compared with the BC start over seeds.
* **Reported**: macro means over held-out templates and over held-out generators (each
  template's / generator's mean, then their mean), per-template and per-generator tables, into
  ``DIR/results.json`` and ``DIR/results.md``. Never fabricated: every figure is an episode played.

The return the learner maximises is the episode's score less its action costs (``docs/grading.md``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ledgershield.structured import ACTION_NAMES, StructuredControlBenchEnv

Policy = Callable[[StructuredControlBenchEnv, Dict[str, np.ndarray]], int]
NAME_INDEX = {n: i for i, n in enumerate(ACTION_NAMES)}

# (templates split, generators split) of each evaluation set.
SETS = {
    "train": ("train", "train"),
    "validation_templates": ("validation", "train"),
    "validation_generators": ("train", "validation"),
    "test_templates": ("test", "train"),
    "test_generators": ("train", "test"),
}


def make_env(templates: str, generators: str) -> StructuredControlBenchEnv:
    return StructuredControlBenchEnv(reset_options={"template_split": templates, "generator_split": generators})


# ---------------------------------------------------------------------------------------------
# Playing and scoring.
# ---------------------------------------------------------------------------------------------

def play(env: StructuredControlBenchEnv, policy: Policy, seed: int, max_steps: int = 600) -> Dict[str, Any]:
    """One episode from ``reset(seed)``; its score, return and where it came from."""
    obs, info = env.reset(seed=seed)
    if hasattr(policy, "begin"):
        policy.begin()
    total = 0.0
    for _ in range(max_steps):
        a = policy(env, obs)
        obs, r, term, trunc, info = env.step(a)
        total += r
        if term or trunc:
            break
    task = info.get("task", {})
    return {"seed": seed, "score": info["final_score"], "return": total, "result_class": info["result_class"],
            "template": task.get("template") or f"fraudgen:{task.get('family')}", "generator": task.get("generator", "?"),
            "family": task.get("family", "?")}


def macro(rows: Sequence[Dict[str, Any]], key: str) -> Tuple[float, Dict[str, float]]:
    """Mean per group of ``key``, then the mean of the groups."""
    groups: Dict[str, List[float]] = collections.defaultdict(list)
    for r in rows:
        groups[str(r[key])].append(r["score"])
    per = {k: statistics.fmean(v) for k, v in sorted(groups.items())}
    return (statistics.fmean(per.values()) if per else 0.0), per


def evaluate(policy: Policy, set_name: str, episodes: int, base_seed: int) -> Dict[str, Any]:
    t, g = SETS[set_name]
    env = make_env(t, g)
    rows = [play(env, policy, base_seed + i) for i in range(episodes)]
    by_template, per_template = macro(rows, "template")
    by_generator, per_generator = macro(rows, "generator")
    return {"set": set_name, "episodes": len(rows), "mean": statistics.fmean(r["score"] for r in rows),
            "macro_templates": by_template, "macro_generators": by_generator,
            "per_template": per_template, "per_generator": per_generator, "rows": rows}


# ---------------------------------------------------------------------------------------------
# Scripted baselines (factored actions, masks respected).
# ---------------------------------------------------------------------------------------------

def legal(obs: Dict[str, np.ndarray]) -> np.ndarray:
    return np.flatnonzero(obs["action_mask"])


def random_policy(rng: random.Random) -> Policy:
    return lambda env, obs: int(rng.choice(list(legal(obs))))


def first_legal(obs: Dict[str, np.ndarray], names: Sequence[str]) -> Optional[int]:
    mask = obs["action_mask"]
    for n in names:
        i = NAME_INDEX.get(n)
        if i is not None and mask[i]:
            return i
    return None


def fixed_decision(decision: str) -> Policy:
    """Decide at once and submit (naive PAY, always escalate)."""
    def pol(env: StructuredControlBenchEnv, obs: Dict[str, np.ndarray]) -> int:
        a = first_legal(obs, ["point.best", f"decide.{decision}", "submit"])
        return a if a is not None else int(legal(obs)[0])
    return pol


CHECKS = ["tool.ocr", "tool.zoom", "tool.inspect_email_thread", "tool.lookup_vendor", "tool.lookup_vendor_history",
          "tool.compare_bank_account", "tool.search_ledger", "tool.lookup_po", "tool.lookup_receipt", "lookup_policy"]
VERIFY = ["target.verify.three_way_match_po", "target.verify.three_way_match_receipt",
          "target.verify.bank_account_verified", "target.verify.invoice_total"]


def checklist_pay() -> Policy:
    """Run every tool once per argument row, parse nothing, PAY citing the records the tools returned."""
    def pol(env: StructuredControlBenchEnv, obs: Dict[str, np.ndarray]) -> int:
        a = first_legal(obs, ["point.best"] + CHECKS[:-1])
        if a is None and obs["global"][env_global("succeeded.lookup_policy")] == 0:
            a = first_legal(obs, ["lookup_policy"])
        if a is None:
            a = first_legal(obs, ["decide.PAY"] + VERIFY + ["submit"])
        return a if a is not None else int(legal(obs)[0])
    return pol


_GLOBAL_INDEX: Dict[str, int] = {}


def env_global(name: str) -> int:
    if not _GLOBAL_INDEX:
        from ledgershield.structured import GLOBAL_NAMES
        _GLOBAL_INDEX.update({n: i for i, n in enumerate(GLOBAL_NAMES)})
    return _GLOBAL_INDEX[name]


# ---------------------------------------------------------------------------------------------
# Teacher demonstrations, the lookup table and behaviour cloning.
# ---------------------------------------------------------------------------------------------

def teacher_demos(episodes: int, base_seed: int) -> List[Tuple[int, List[int], str]]:
    """The teacher's factored action sequences on train draws: (seed, indices, family)."""
    env = make_env("train", "train")
    out = []
    for i in range(episodes):
        seed = base_seed + i
        obs, _ = env.reset(seed=seed)
        family = family_of(obs)
        out.append((seed, list(env.env.teacher_play()), family))
    return out


def family_of(obs: Dict[str, np.ndarray]) -> str:
    fam = ["task_a", "task_b", "task_c", "task_d", "task_e"]
    g = obs["global"]
    for k, f in enumerate(fam):
        if g[env_global(f"family.{f}")] > 0:
            return f
    return "?"


def replay(env: StructuredControlBenchEnv, seed: int, indices: Sequence[int]) -> List[Tuple[Dict[str, np.ndarray], int]]:
    """(observation, action) pairs of a demonstration replayed from ``reset(seed)``."""
    obs, _ = env.reset(seed=seed)
    pairs = []
    for a in indices:
        if not obs["action_mask"][a]:
            break
        pairs.append((obs, a))
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    return pairs


def lookup_table(demos: Sequence[Tuple[int, List[int], str]]) -> Policy:
    """The most common teacher action given the family and the actions so far (names), falling back
    to the most common action given the family and the previous action, then the family alone."""
    full: Dict[Tuple, collections.Counter] = collections.defaultdict(collections.Counter)
    prev: Dict[Tuple, collections.Counter] = collections.defaultdict(collections.Counter)
    fam: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for _, seq, family in demos:
        names = [ACTION_NAMES[i] for i in seq]
        for k, n in enumerate(names):
            full[(family, tuple(names[:k]))][n] += 1
            prev[(family, names[k - 1] if k else "")][n] += 1
            fam[family][n] += 1
    class Table:
        """A policy with a memory of the episode's actions (``begin`` clears it)."""

        def __init__(self) -> None:
            self.h: List[str] = []

        def begin(self) -> None:
            self.h = []

        def __call__(self, env: StructuredControlBenchEnv, obs: Dict[str, np.ndarray]) -> int:
            family = family_of(obs)
            mask = obs["action_mask"]
            h = self.h
            for table, k in ((full, (family, tuple(h))), (prev, (family, h[-1] if h else "")), (fam, family)):
                for name, _ in table.get(k, collections.Counter()).most_common():
                    i = NAME_INDEX[name]
                    if mask[i]:
                        h.append(name)
                        return i
            i = int(legal(obs)[0])
            h.append(ACTION_NAMES[i])
            return i
    return Table()


def obs_tensor(policy, batch: Sequence[Dict[str, np.ndarray]]):
    import torch
    keys = batch[0].keys()
    stacked = {k: np.stack([b[k] for b in batch]) for k in keys}
    return policy.obs_to_tensor(stacked)[0] if hasattr(policy, "obs_to_tensor") else {k: torch.as_tensor(v) for k, v in stacked.items()}


def behaviour_clone(model, pairs: Sequence[Tuple[Dict[str, np.ndarray], int]], epochs: int, batch_size: int = 256,
                    lr: float = 1e-3, seed: int = 0) -> List[float]:
    """Cross-entropy of the stock policy's masked action distribution on the teacher's actions."""
    import torch
    policy = model.policy
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    rng = random.Random(seed)
    losses = []
    for _ in range(epochs):
        order = list(range(len(pairs)))
        rng.shuffle(order)
        for s in range(0, len(order), batch_size):
            chunk = [pairs[i] for i in order[s:s + batch_size]]
            obs = obs_tensor(policy, [c[0] for c in chunk])
            acts = torch.as_tensor([c[1] for c in chunk])
            masks = np.stack([c[0]["action_mask"] for c in chunk]).astype(bool)
            _, log_prob, _ = policy.evaluate_actions(obs, acts, action_masks=masks)
            loss = -log_prob.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return losses


def model_policy(model) -> Policy:
    def pol(env: StructuredControlBenchEnv, obs: Dict[str, np.ndarray]) -> int:
        a, _ = model.predict(obs, action_masks=obs["action_mask"].astype(bool), deterministic=True)
        return int(a)
    return pol


# ---------------------------------------------------------------------------------------------
# Training.
# ---------------------------------------------------------------------------------------------

def new_model(seed: int, n_envs: int, args: argparse.Namespace):
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(max(1, args.threads))
    venv = DummyVecEnv([lambda: make_env("train", "train") for _ in range(n_envs)])
    venv.seed(seed)
    return MaskablePPO("MultiInputPolicy", venv, seed=seed, n_steps=args.n_steps, batch_size=args.batch_size,
                       n_epochs=args.epochs, learning_rate=args.lr, gamma=args.gamma, gae_lambda=0.95,
                       ent_coef=args.ent_coef, policy_kwargs={"net_arch": [256, 256]}, verbose=0, device="cpu")


def train(model, minutes: float, val_every_steps: int, val_episodes: int, log: List[Dict[str, Any]],
          label: str) -> Dict[str, Any]:
    """PPO for ``minutes`` of wall clock; the checkpoint with the best validation macro mean is kept."""
    import io
    start = time.monotonic()
    best = {"score": -1.0, "state": None, "steps": 0}
    steps = 0
    while time.monotonic() - start < minutes * 60:
        model.learn(total_timesteps=val_every_steps, reset_num_timesteps=False, progress_bar=False)
        steps += val_every_steps
        pol = model_policy(model)
        vt = evaluate(pol, "validation_templates", val_episodes, 500_000)
        vg = evaluate(pol, "validation_generators", val_episodes, 600_000)
        val = (vt["macro_templates"] + vg["macro_generators"]) / 2
        log.append({"run": label, "steps": steps, "minutes": round((time.monotonic() - start) / 60, 2),
                    "validation": round(val, 4)})
        print(json.dumps(log[-1]), flush=True)
        if val > best["score"]:
            buf = io.BytesIO()
            model.save(buf)
            best = {"score": val, "state": buf.getvalue(), "steps": steps}
    return best


def load_best(best: Dict[str, Any]):
    import io
    from sb3_contrib import MaskablePPO
    return MaskablePPO.load(io.BytesIO(best["state"]), device="cpu")


class Teacher:
    """The teacher re-expressed through the factored space: at each reset it plays the episode on
    a twin environment (same split and seed) and then replays those indices here."""

    def __init__(self) -> None:
        self.plan: Optional[List[int]] = None

    def begin(self) -> None:
        self.plan = None

    def __call__(self, env: StructuredControlBenchEnv, obs: Dict[str, np.ndarray]) -> int:
        if self.plan is None:
            twin = StructuredControlBenchEnv(reset_options=dict(env.defaults))
            twin.reset(options={"seed": env.last_seed})
            self.plan = list(twin.env.teacher_play())
        a = self.plan.pop(0) if self.plan else int(legal(obs)[0])
        return a if obs["action_mask"][a] else int(legal(obs)[0])


def test_figures(policy: Policy, episodes: int) -> Dict[str, Any]:
    t = evaluate(policy, "test_templates", episodes, 700_000)
    g = evaluate(policy, "test_generators", episodes, 800_000)
    return {"held_out_templates": round(t["macro_templates"], 4), "held_out_generators": round(g["macro_generators"], 4),
            "per_template": t["per_template"], "per_generator": g["per_generator"], "episodes": t["episodes"] + g["episodes"]}


def markdown(results: Dict[str, Any]) -> str:
    """The results as a Markdown table: macro means over held-out templates and generators."""
    lines = ["| policy | held-out templates (macro) | held-out generators (macro) | episodes |", "|---|---|---|---|"]
    for name, b in results["baselines"].items():
        lines.append(f"| {name} | {b['held_out_templates']:.4f} | {b['held_out_generators']:.4f} | {b['episodes']} |")
    for kind, rows in results["runs"].items():
        for r in rows:
            lines.append(f"| {kind} (seed {r['seed']}) | {r['held_out_templates']:.4f} | {r['held_out_generators']:.4f} | {r['episodes']} |")
    cfg = results["config"]
    lines += ["", f"Configuration: {json.dumps(cfg, sort_keys=True)}; wall {results.get('wall_minutes')} min; "
              f"BC pairs {results.get('bc_pairs')}."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--minutes", type=float, default=60.0, help="PPO wall clock per seed (from scratch)")
    p.add_argument("--bc-minutes", type=float, default=15.0, help="PPO wall clock after BC per seed")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--n-steps", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.999)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--val-every", type=int, default=20_000, help="environment steps between validations")
    p.add_argument("--val-episodes", type=int, default=60)
    p.add_argument("--test-episodes", type=int, default=200)
    p.add_argument("--demos", type=int, default=400, help="teacher episodes for BC and the lookup table")
    p.add_argument("--bc-epochs", type=int, default=8)
    p.add_argument("--skip-scratch", action="store_true")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    results: Dict[str, Any] = {"config": vars(args), "log": []}
    t0 = time.monotonic()

    demos = teacher_demos(args.demos, 100_000)
    results["baselines"] = {
        name: test_figures(pol, args.test_episodes)
        for name, pol in [("random", random_policy(random.Random(0))), ("naive-pay", fixed_decision("PAY")),
                          ("always-escalate", fixed_decision("ESCALATE_FRAUD")), ("checklist-pay", checklist_pay()),
                          ("lookup-table", lookup_table(demos)), ("teacher", Teacher())]
    }
    print(json.dumps({k: (v["held_out_templates"], v["held_out_generators"]) for k, v in results["baselines"].items()}), flush=True)

    pair_env = make_env("train", "train")
    pairs = [pr for seed, seq, _ in demos for pr in replay(pair_env, seed, seq)]
    results["bc_pairs"] = len(pairs)
    runs: Dict[str, List[Dict[str, Any]]] = {"scratch": [], "bc": [], "bc_ppo": []}
    for seed in seeds:
        if not args.skip_scratch:
            model = new_model(seed, args.n_envs, args)
            best = train(model, args.minutes, args.val_every, args.val_episodes, results["log"], f"scratch-{seed}")
            runs["scratch"].append({"seed": seed, "best_steps": best["steps"], "validation": best["score"],
                                    **test_figures(model_policy(load_best(best)), args.test_episodes)})
        model = new_model(seed, args.n_envs, args)
        losses = behaviour_clone(model, pairs, args.bc_epochs, seed=seed)
        bc = test_figures(model_policy(model), args.test_episodes)
        runs["bc"].append({"seed": seed, "loss_first": losses[0], "loss_last": losses[-1], **bc})
        best = train(model, args.bc_minutes, args.val_every, args.val_episodes, results["log"], f"bc-ppo-{seed}")
        runs["bc_ppo"].append({"seed": seed, "best_steps": best["steps"], "validation": best["score"],
                               **test_figures(model_policy(load_best(best)) if best["state"] else model_policy(model), args.test_episodes)})
        (out / "results.json").write_text(json.dumps({**results, "runs": runs}, indent=1))
    results["runs"] = runs
    results["wall_minutes"] = round((time.monotonic() - t0) / 60, 1)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(markdown(results))
    print(json.dumps({k: [(r["held_out_templates"], r["held_out_generators"]) for r in v] for k, v in runs.items()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
