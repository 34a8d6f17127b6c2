"""The training pipeline's data: episodes of the task distribution (``ls_gen::tasks``, see
``docs/python.md``), split by base template and by generator, played in process.

* **Sets** (:data:`SETS`): ``train`` (train templates x train generators: curated, challenge,
  quarter, FraudGen), ``validation_templates`` (the validation templates under the train
  generators), ``validation_generators`` (the validation generator, twins, on the train
  templates), ``test_templates`` and ``test_generators`` (the test templates; the test generator,
  the holdout suite). A set's episodes are the draws of consecutive seeds from its own base
  (:data:`SEED_BASES`), so no two sets share an episode and a stage that needs more training
  episodes (RL) takes other seeds of ``train``.
* An **episode** is ``{"set", "reset", "seed"}`` where ``reset`` is the keyword arguments of
  ``ControlBenchEnv.reset_text`` (``template_split``, ``generator_split``, ``seed``): a pure
  function of those, replayable in any process.
* **Agents** (:func:`play_agent`): the teacher and the scripted baselines (``random``,
  ``naive-pay``, ``always-escalate``) are the Rust agents (``ledgershield._native.OfflineAgent``)
  fed the replies in process.
* **Figures** (:func:`report`): for a held-out pair of sets, the mean per held-out template (of
  the template set) and per held-out generator (of the generator set), then their mean: the macro
  means every policy of the pipeline is reported by, with the per-template and per-generator
  tables.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

# (template split, generator split) of each set.
SETS: Dict[str, Tuple[str, str]] = {
    "train": ("train", "train"),
    "validation_templates": ("validation", "train"),
    "validation_generators": ("train", "validation"),
    "test_templates": ("test", "train"),
    "test_generators": ("train", "test"),
}
SEED_BASES: Dict[str, int] = {"train": 100_000, "validation_templates": 500_000, "validation_generators": 600_000,
                              "test_templates": 700_000, "test_generators": 800_000}
# Training seeds past this offset of ``train``'s base are RL's (never SFT or BC data).
RL_SEED_OFFSET = 50_000
HELD_OUT = {"validation": ("validation_templates", "validation_generators"), "test": ("test_templates", "test_generators")}


def episodes(set_name: str, n: int, offset: int = 0) -> List[Dict[str, Any]]:
    """``n`` episodes of ``set_name``: the draws of seeds ``base + offset``, ``base + offset + 1``, ..."""
    t, g = SETS[set_name]
    base = SEED_BASES[set_name] + offset
    return [{"set": set_name, "seed": base + i, "reset": {"template_split": t, "generator_split": g, "seed": base + i}} for i in range(n)]


def held_out(kind: str, n: int) -> List[Dict[str, Any]]:
    """``n`` episodes of each of the two sets of ``kind`` (``validation`` or ``test``)."""
    a, b = HELD_OUT[kind]
    return episodes(a, n) + episodes(b, n)


def key(ep: Dict[str, Any]) -> str:
    """An episode's name in per-episode tables (``test_templates:700003``)."""
    return f"{ep['set']}:{ep['seed']}"


def origin(env: Any) -> Dict[str, str]:
    """Where the episode that just ended came from (template, generator, family)."""
    task = env.task() or {}
    return {"template": task.get("template") or f"fraudgen:{task.get('family')}", "generator": str(task.get("generator", "?")),
            "family": str(task.get("family", "?"))}


def finish(ep: Dict[str, Any], env: Any, envelope: Dict[str, Any], steps: int, extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """One played episode's record: its score and how it ended, with where it came from."""
    info = envelope.get("info") or {}
    rec = {"episode": key(ep), "set": ep["set"], "seed": ep["seed"], "task_type": envelope["observation"].get("task_type"),
           "final_score": float(info.get("final_score") or 0.0), "result_class": info.get("result_class"),
           "unsafe_release": bool(info.get("unsafe_release")), "steps": steps, **origin(env)}
    rec.update(extra or {})
    return rec


def play_agent(name: str, ep: Dict[str, Any], seed: int = 0, record: bool = False, max_steps: int = 200) -> Dict[str, Any]:
    """One episode of a Rust offline agent in process; with ``record`` its ``trajectory``
    (``[{action_type, payload, reward}]``, every step's dense reward)."""
    from .._native import OfflineAgent
    from ..native import ControlBenchEnv

    env = ControlBenchEnv()
    agent = OfflineAgent(name, seed)
    text = env.reset_text(**ep["reset"])
    agent.begin(text)
    envelope = json.loads(text)
    traj: List[Dict[str, Any]] = []
    while not envelope.get("done") and len(traj) < max_steps:
        a = json.loads(agent.act(text))
        text = env.step_text(a)
        envelope = json.loads(text)
        traj.append(dict(a, reward=float(envelope.get("reward") or 0.0)))
    return finish(ep, env, envelope, len(traj), {"trajectory": traj} if record else None)


def macro(rows: Sequence[Dict[str, Any]], by: str) -> Tuple[float, Dict[str, float], Dict[str, int]]:
    """The mean of each group of ``by`` (template or generator), then the mean of the groups;
    with the per-group means and counts."""
    groups: Dict[str, List[float]] = defaultdict(list)
    for r in rows:
        groups[str(r[by])].append(float(r["final_score"]))
    per = {k: round(statistics.fmean(v), 4) for k, v in sorted(groups.items())}
    return (round(statistics.fmean(per.values()), 4) if per else 0.0), per, {k: len(v) for k, v in sorted(groups.items())}


def report(rows: Sequence[Dict[str, Any]], kind: str = "test") -> Dict[str, Any]:
    """A policy's figures on the held-out episodes of ``kind``: the macro mean over the template
    set's templates and over the generator set's generators, their mean (the headline), the
    per-template and per-generator tables, the plain episode mean and the unsafe-release rate."""
    tset, gset = HELD_OUT[kind]
    trows = [r for r in rows if r["set"] == tset]
    grows = [r for r in rows if r["set"] == gset]
    m_t, per_t, n_t = macro(trows, "template")
    m_g, per_g, n_g = macro(grows, "generator")
    _, per_gt, _ = macro(grows, "template")
    n = max(len(rows), 1)
    return {"kind": kind, "episodes": len(rows), "macro": round((m_t + m_g) / 2, 4), "macro_templates": m_t, "macro_generators": m_g,
            "per_template": per_t, "per_template_episodes": n_t, "per_generator": per_g, "per_generator_episodes": n_g,
            "generator_set_per_template": per_gt,
            "mean": round(sum(float(r["final_score"]) for r in rows) / n, 4),
            "unsafe_release_rate": round(sum(bool(r.get("unsafe_release")) for r in rows) / n, 4)}


def _groups(per_episode: Dict[str, Dict[str, Any]], kind: str) -> List[List[str]]:
    """The episode keys of each macro group of ``kind``: one group per template of the template
    set, one per generator of the generator set."""
    tset, gset = HELD_OUT[kind]
    out: Dict[Tuple[str, str], List[str]] = defaultdict(list)
    for k, e in per_episode.items():
        if e["set"] == tset:
            out[("t", str(e["template"]))].append(k)
        elif e["set"] == gset:
            out[("g", str(e["generator"]))].append(k)
    return [v for _, v in sorted(out.items())]


def macro_of(values: Dict[str, float], per_episode: Dict[str, Dict[str, Any]], kind: str = "test") -> float:
    """The headline macro mean of per-episode ``values`` (keyed like ``per_episode``): the mean
    over the template set's templates and the mean over the generator set's generators, averaged."""
    import numpy as np

    tset, _ = HELD_OUT[kind]
    sides: Dict[bool, List[float]] = {True: [], False: []}
    for g in _groups(per_episode, kind):
        sides[per_episode[g[0]]["set"] == tset].append(float(np.mean([values[k] for k in g])))
    parts = [float(np.mean(v)) for v in sides.values() if v]
    return round(float(np.mean(parts)), 4) if parts else 0.0


def macro_ci(values: Dict[str, float], per_episode: Dict[str, Dict[str, Any]], kind: str = "test", n: int = 2000,
             seed: int = 0) -> Tuple[float, float]:
    """95 % percentile-bootstrap interval of :func:`macro_of`, resampling the episodes within each
    template / generator group (the groups are fixed by design; their episodes are the sample)."""
    import numpy as np

    groups = _groups(per_episode, kind)
    if not groups:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    tset, _ = HELD_OUT[kind]
    sides: Dict[bool, List[Any]] = {True: [], False: []}
    for g in groups:
        a = np.array([values[k] for k in g], dtype=float)
        sides[per_episode[g[0]]["set"] == tset].append(a[rng.integers(0, len(a), size=(n, len(a)))].mean(axis=1))
    parts = [np.mean(np.stack(v), axis=0) for v in sides.values() if v]
    m = np.mean(np.stack(parts), axis=0)
    return (round(float(np.percentile(m, 2.5)), 4), round(float(np.percentile(m, 97.5)), 4))


def template_splits() -> Dict[str, str]:
    """The curated templates' split (``ls_gen::tasks::TEMPLATE_SPLITS``)."""
    from .._native import TEMPLATE_SPLITS

    return dict(TEMPLATE_SPLITS)
