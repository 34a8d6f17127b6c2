"""A small causal transformer trained from random weights on the compact language
(:mod:`.compact`): SFT on replayed teacher steps, grammar-constrained decoding, and group-relative
RL (GRPO's advantage, no critic) over several seeds, every checkpoint chosen on the validation
episodes and scored on the test episodes of the task distribution (:mod:`.tasks`), in process.
RL seeds run in subprocesses (:func:`in_processes`), one per core.

The model is plain torch (no hub, no download): token and position embeddings, ``layers``
pre-norm blocks of causal self-attention and an MLP, a tied output layer, a key/value cache for
decoding. Its vocabulary is the compact language's word tokens seen in the training rows (at
least twice) plus every pointer token. Decoding is constrained token by token by
:func:`.compact.allowed`: at every position only the tokens the grammar allows given the table,
the schema, the actions played and the native interventions are scored, so every action expands
(parse success under constraint is the share of steps the environment accepted).
"""

from __future__ import annotations


import json
import math
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import tasks
from .compact import ACT, EOS, PAD, UNK, Context, Schema, Table, allowed_tokens, encode, expand, line_descriptors, state_tokens, to_tokens, to_units
from .ledger import EvidenceLedger, LedgerView, replay_ledgers
from .progress import bar

MAX_LEN = 1024
# An SFT step budget below this is the run's limit (its validation probe is spread over the steps);
# at or above it the minutes are (the probe is spread over the time).
STEP_LIMITED_BELOW = 100000
# What an observation keeps for the state prompt and the table (the rest of a reply is not read).
OBS_KEYS = ("task_type", "instruction", "visible_documents", "revealed_artifacts", "pending_events", "max_steps", "step_count")
Step = Tuple[Dict[str, Any], LedgerView, Table, Dict[str, Any]]


# ---------------------------------------------------------------------------- data


def replay_pairs(episodes: Sequence[Dict[str, Any]]) -> List[List[Step]]:
    """Each submitted teacher episode (``{"reset", "trajectory"}``, :func:`.tasks.play_agent`)
    replayed in process: ``[(observation, ledger view, table, action)]`` per step."""
    from ..native import ControlBenchEnv

    out = []
    for rec in episodes:
        traj = rec.get("trajectory") or []
        if not traj or traj[-1].get("action_type") != "submit_decision":
            continue
        ep = []
        for envelope, view, a in replay_ledgers(ControlBenchEnv(), rec["reset"], traj):
            obs = {k: envelope["observation"].get(k) for k in OBS_KEYS}
            ep.append((obs, view, Table(obs, view), {"action_type": a["action_type"], "payload": a["payload"]}))
        out.append(ep)
    return out


def build_rows(episodes: Sequence[Sequence[Step]], schema: Schema) -> Tuple[List[Tuple[List[str], List[str]]], Dict[str, Any]]:
    """(state tokens, action tokens) rows and their coverage / length figures."""
    rows, skipped = [], 0
    sizes: List[int] = []
    for ep in episodes:
        played: List[List[str]] = []  # tokens
        for obs, led, table, a in ep:
            units = encode(a, table, schema)
            state = state_tokens(obs, led, played, table, schema.arg_labels)
            if units is None:
                skipped += 1
                played.append([a["action_type"], EOS])
                continue
            act = to_tokens(units, table)
            rows.append((state, act))
            sizes.append(len(state) + len(act))
            played.append(act)
    sizes.sort()
    acts = sorted(len(a) for _, a in rows)
    return rows, {"rows": len(rows), "unexpressed_steps": skipped, "median_tokens": sizes[len(sizes) // 2] if sizes else 0,
                  "p95_tokens": sizes[int(0.95 * (len(sizes) - 1))] if sizes else 0, "max_tokens": sizes[-1] if sizes else 0,
                  "target_max": acts[-1] if acts else 0, "target_median": acts[len(acts) // 2] if acts else 0}


def rl_main(args: Dict[str, Any]) -> Dict[str, Any]:
    """GRPO from the checkpoint ``init`` on ``episodes`` (training draws), saved to ``out``, then
    scored on the validation episodes (``validation``)."""
    dec = load(Path(args["init"]))
    h = grpo(dec, args["episodes"], args["iterations"], args["group"], args["batch"], args["temperature"], args["lr"], args["seed"],
             adv_floor=args.get("adv_floor", 0.0), epochs=args.get("epochs", 1), clip=args.get("clip", 0.2), reward=args.get("reward", "score"))
    save(dec, Path(args["out"]))
    h["validation"] = evaluate(dec, "validation", args["validation"])
    return dict(h, train_episodes=len(args["episodes"]))


def eval_main(args: Dict[str, Any]) -> Dict[str, Any]:
    """The checkpoint ``checkpoint`` scored greedily on ``episodes``."""
    return evaluate(load(Path(args["checkpoint"])), args["label"], args["episodes"])


_MAINS = {"rl": rl_main, "eval": eval_main}


def job_main(argv: Sequence[str]) -> None:
    """``KIND ARGS OUT``: one of :data:`_MAINS` on the JSON arguments in ``ARGS``, its result written to ``OUT``."""
    import torch

    torch.set_num_threads(1)  # two jobs share two cores: more threads spin-wait on each other (8x slower)
    kind, args_path, out = argv
    Path(out).write_text(json.dumps(_MAINS[kind](json.loads(Path(args_path).read_text()))))


def in_processes(jobs: Sequence[Tuple[str, Dict[str, Any]]], work: Path, parallel: int = 2) -> List[Dict[str, Any]]:
    """Run each ``(kind, args)`` of :data:`_MAINS` in a subprocess, ``parallel`` at a time; their
    results in order. Any process can replay any episode (a task draw is a pure function of its
    splits and seed), so the jobs need nothing but their arguments."""
    import os
    import subprocess
    import sys

    work.mkdir(parents=True, exist_ok=True)
    code = "import sys; from ledgershield.training.compact_lm import job_main; job_main(sys.argv[1:])"
    running: List[Any] = []
    outs = []
    try:
        for i, (kind, args) in enumerate(jobs):
            a, o = work / f"{kind}-{i}.args.json", work / f"{kind}-{i}.json"
            a.write_text(json.dumps(args, default=lambda v: sorted(v)))
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            running.append(subprocess.Popen([sys.executable, "-c", code, kind, str(a), str(o)], env=env))
            outs.append(o)
            if len(running) >= parallel:
                _wait(running.pop(0))
        while running:
            _wait(running.pop(0))
    finally:  # a failed job (or an interrupt) stops the others rather than leaving them running
        for proc in running:
            proc.kill()
            proc.wait()
    return [json.loads(o.read_text()) for o in outs]


def _wait(proc: Any) -> None:
    if proc.wait() != 0:
        raise RuntimeError(f"a job in a subprocess failed ({proc.returncode}): {proc.args[-3:]}")


def build_vocab(rows: Sequence[Tuple[List[str], List[str]]], schema: Schema) -> List[str]:
    c = Counter(t for s, a in rows for t in s + a)
    vocab = [PAD, UNK, EOS, ACT, "submit"] + [f"n:{i}" for i in range(32)]
    vocab += schema.types + list(schema.heads) + ["PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD"]
    for t, fs in schema.fields.items():
        vocab += [f"{f}={lit}" for f, k, info in fs if k == "enum" for lit in info]
    vocab += line_descriptors()  # every line pointer, seen in training or not
    seen = set(vocab)
    vocab += sorted(t for t, n in c.items() if n >= 2 and t not in seen)
    return list(dict.fromkeys(vocab))


# ---------------------------------------------------------------------------- the model


def make_model(vocab_size: int, dim: int = 128, layers: int = 4, heads: int = 4, seed: int = 0) -> Any:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x: Any, cache: Optional[List[Any]] = None, pad_mask: Any = None) -> Any:
            b, n, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).view(b, n, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
            if cache is not None and cache[0] is not None:
                k = torch.cat([cache[0], k], 2)
                v = torch.cat([cache[1], v], 2)
            if cache is not None:
                cache[0], cache[1] = k, v
            if k.shape[2] == n:
                att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # decoding new tokens after a cached prefix
                m = torch.ones(n, k.shape[2], dtype=torch.bool).tril(k.shape[2] - n)
                att = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
            x = x + self.proj(att.transpose(1, 2).reshape(b, n, dim))
            return x + self.mlp(self.n2(x))

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab_size, dim), nn.Embedding(MAX_LEN, dim)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.norm = nn.LayerNorm(dim)
            self.config = {"vocab_size": vocab_size, "dim": dim, "layers": layers, "heads": heads}
            for mod in self.modules():
                if isinstance(mod, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(mod.weight, std=0.02)
                if isinstance(mod, nn.Linear) and mod.bias is not None:
                    nn.init.zeros_(mod.bias)

        def forward(self, ids: Any, caches: Optional[List[List[Any]]] = None, start: int = 0) -> Any:
            pos = torch.arange(start, start + ids.shape[1])
            x = self.tok(ids) + self.pos(pos)[None]
            for i, blk in enumerate(self.blocks):
                x = blk(x, caches[i] if caches is not None else None)
            return self.norm(x) @ self.tok.weight.T

    torch.manual_seed(seed)
    return LM()


def n_params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


class Coder:
    def __init__(self, vocab: List[str]) -> None:
        self.vocab = vocab
        self.ix = {t: i for i, t in enumerate(vocab)}

    def ids(self, toks: Sequence[str]) -> List[int]:
        return [self.ix.get(t, 1) for t in toks]


def _clip_state(ids: List[int], room: int) -> List[int]:
    return ids if len(ids) <= room else ids[-room:]


# ---------------------------------------------------------------------------- SFT


def sft(model: Any, coder: Coder, rows: Sequence[Tuple[List[str], List[str]]], lr: float, minutes: float, max_steps: int, batch: int,
        seed: int = 0, log_every: int = 10, eval_fn: Any = None, eval_every_s: float = 0.0, label_smoothing: float = 0.0,
        eval_every_steps: int = 0, schedule_steps: int = 0) -> Dict[str, Any]:
    """Cross-entropy on the action tokens only, AdamW with warmup and cosine decay, until
    ``max_steps`` or ``minutes`` of wall time; length-bucketed batches; ``eval_fn`` every
    ``eval_every_s`` seconds or ``eval_every_steps`` steps. The cosine runs over ``schedule_steps``
    steps when given (a step-limited run that stops before it ends is an early checkpoint of that
    schedule, the same on any machine), else over the minutes, else over ``max_steps``. ``label_smoothing`` spreads
    that share of each target over the vocabulary: a policy that is not certain of every token,
    so RL's sampled groups differ (the loss then floors above zero)."""
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    import torch
    import torch.nn.functional as F

    rng = random.Random(seed)
    data = []
    for s, a in rows:
        sid, aid = coder.ids(s), coder.ids(a)
        sid = _clip_state(sid, MAX_LEN - len(aid) - 1)
        data.append((sid + aid, len(sid)))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    est_steps = max_steps
    history, evals = [], []
    t0, last_eval = time.monotonic(), time.monotonic()
    step = 0
    limit = 60 * minutes if minutes else math.inf  # minutes 0: step-limited
    model.train()
    pb = bar(total=max_steps if math.isfinite(max_steps) else None, desc="compact LM SFT")
    while step < max_steps and time.monotonic() - t0 < limit:
        order = sorted(range(len(data)), key=lambda i: len(data[i][0]) + rng.random() * 40)
        batches = [order[i:i + batch] for i in range(0, len(order), batch)]
        rng.shuffle(batches)
        for b in batches:
            if step >= max_steps or time.monotonic() - t0 >= limit:
                break
            width = max(len(data[i][0]) for i in b)
            x = torch.zeros(len(b), width, dtype=torch.long)
            y = torch.full((len(b), width), -100, dtype=torch.long)
            for j, i in enumerate(b):
                seq, p = data[i]
                x[j, :len(seq)] = torch.tensor(seq)
                y[j, p - 1:len(seq) - 1] = torch.tensor(seq[p:])
            warm = min(1.0, (step + 1) / 30)
            if schedule_steps:
                frac = min(1.0, step / schedule_steps)
            else:
                frac = min(1.0, (time.monotonic() - t0) / max(60 * minutes, 1e-9)) if minutes else step / max(est_steps, 1)
            for g in opt.param_groups:
                g["lr"] = lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
            loss = F.cross_entropy(model(x).reshape(-1, len(coder.vocab)), y.reshape(-1), ignore_index=-100,
                                   label_smoothing=label_smoothing)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            pb.update(1)
            if step % log_every == 0 or step == 1:
                history.append({"step": step, "loss": round(float(loss.detach()), 5), "wall_s": round(time.monotonic() - t0, 1)})
            due = (eval_every_s and time.monotonic() - last_eval >= eval_every_s) or (eval_every_steps and step % eval_every_steps == 0)
            if eval_fn is not None and due:
                model.eval()
                evals.append(dict(eval_fn(model), step=step, wall_s=round(time.monotonic() - t0, 1)))
                model.train()
                last_eval = time.monotonic()
    pb.close()
    model.eval()
    return {"steps": step, "history": history, "evals": evals, "wall_s": round(time.monotonic() - t0, 1)}


# ---------------------------------------------------------------------------- constrained decoding


class Decoder:
    """Grammar-constrained decoding (greedy, or sampled at ``temperature`` with the choices
    recorded for RL)."""

    def __init__(self, model: Any, coder: Coder, schema: Schema) -> None:
        self.model, self.coder, self.schema = model, coder, schema

    def act(self, state: List[str], ctx: Context, temperature: float = 0.0, rng: Optional[np.random.Generator] = None,
            trace: Optional[List[Any]] = None) -> List[str]:
        import torch

        sid = _clip_state(self.coder.ids(state), MAX_LEN - 2 - 2 * 48 - 4)
        caches: List[List[Any]] = [[None, None] for _ in self.model.blocks]
        prefix: List[str] = []
        chosen: List[Tuple[List[int], int]] = []
        with torch.inference_mode():
            logits = self.model(torch.tensor([sid]), caches)[0, -1]
            pos = len(sid)
            while True:
                opts = allowed_tokens(prefix, ctx)
                oid = self.coder.ids(opts)
                z = logits[torch.tensor(oid)].double().numpy()
                if temperature > 0 and rng is not None:
                    p = np.exp((z - z.max()) / temperature)
                    p /= p.sum()
                    k = int(rng.choice(len(opts), p=p))
                else:
                    k = int(np.argmax(z))
                prefix.append(opts[k])
                chosen.append((oid, k))
                if opts[k] == EOS or pos >= MAX_LEN - 1:
                    break
                logits = self.model(torch.tensor([[oid[k]]]), caches, start=pos)[0, -1]
                pos += 1
        if prefix[-1] != EOS:
            prefix.append(EOS)
        if trace is not None:
            trace.append((sid, chosen))
        return prefix


def play_episode(dec: Decoder, ep: Dict[str, Any], temperature: float = 0.0, rng: Optional[np.random.Generator] = None,
                 trace: Optional[List[Any]] = None) -> Dict[str, Any]:
    """One episode (:mod:`.tasks`) in process under constrained decoding; ``trace`` gets each
    step's decoding trace (for RL), the record each step's dense reward (``rewards``)."""
    from ..native import ControlBenchEnv, EnvError

    env = ControlBenchEnv()
    text = env.reset_text(**ep["reset"])
    envelope = json.loads(text)
    led = EvidenceLedger()
    led.absorb(text)
    played: List[List[str]] = []  # tokens (the state prompt's "did" list)
    played_units: List[List[str]] = []  # units (the grammar's no-repeat rule)
    refused = 0
    types: List[str] = []
    rewards: List[float] = []
    decision = None
    while not envelope.get("done"):
        obs = envelope["observation"]
        native = env.candidates()
        table = Table(obs, led.view, native)
        steps_left = int(obs.get("max_steps") or 0) - int(obs.get("step_count") or 0)
        ctx = Context(table, dec.schema, played_units, {c["action_type"] for c in native}, steps_left)
        toks = dec.act(state_tokens(obs, led.view, played, table, dec.schema.arg_labels), ctx, temperature, rng, trace)
        units = to_units(toks, table)
        a = expand(units, table, dec.schema)
        try:
            text = env.step_text(a)
        except EnvError:
            refused += 1
            a = {"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.35, "reason_codes": []}}
            text = env.step_text(a)
        envelope = json.loads(text)
        rewards.append(float(envelope.get("reward") or 0.0))
        played.append(toks)
        played_units.append(units)
        types.append(a["action_type"])
        if a["action_type"] == "submit_decision":
            decision = a["payload"].get("decision")
        led.absorb(text)
    return tasks.finish(ep, env, envelope, len(played), {"refused": refused, "submitted": bool(played) and played[-1][0] == "submit",
                                                         "decision": decision, "types": types, "rewards": rewards})


def evaluate(dec: Decoder, label: str, episodes: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    from .structured import summarize

    eps = [play_episode(dec, e) for e in episodes]
    steps = sum(e["steps"] for e in eps)
    m = summarize(label, eps, round(1 - sum(e["refused"] for e in eps) / max(steps, 1), 4))
    m["submitted_share"] = round(sum(e["submitted"] for e in eps) / max(len(eps), 1), 4)
    return m


# ---------------------------------------------------------------------------- RL


def group_advantages(rewards: Any, floor: float = 0.0) -> Any:
    """GRPO's advantages of one group: (reward - group mean) / max(group std, ``floor``)."""
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / (max(float(r.std()), floor) + 1e-6)


def token_logps(model: Any, steps: Sequence[Tuple[List[int], List[Tuple[List[int], int]]]], temperature: float, chunk: int = 32) -> List[Any]:
    """The log-probability of every token each recorded step chose (``(state ids, [(allowed ids,
    chosen index)])``, as :meth:`Decoder.act` traces it), at ``temperature`` and renormalised over
    that position's allowed tokens, as it was sampled: one tensor per step. Steps are scored
    ``chunk`` at a time in one right-padded forward pass (the model is causal: padding after a
    sequence does not change its positions)."""
    import torch

    out: List[Any] = []
    for i in range(0, len(steps), chunk):
        part = steps[i:i + chunk]
        seqs = [sid + [oid[k] for oid, k in chosen[:-1]] for sid, chosen in part]
        x = torch.zeros(len(part), max(map(len, seqs)), dtype=torch.long)
        for j, seq in enumerate(seqs):
            x[j, :len(seq)] = torch.tensor(seq)
        logits = model(x)
        rows, cols, opts, picks, sizes = [], [], [], [], []
        for j, (sid, chosen) in enumerate(part):
            for t, (oid, k) in enumerate(chosen):
                rows.append(j)
                cols.append(len(sid) - 1 + t)
                opts.append(oid)
                picks.append(k)
            sizes.append(len(chosen))
        idx = torch.zeros(len(opts), max(map(len, opts)), dtype=torch.long)
        valid = torch.zeros(idx.shape, dtype=torch.bool)
        for n, oid in enumerate(opts):
            idx[n, :len(oid)] = torch.tensor(oid)
            valid[n, :len(oid)] = True
        z = logits[torch.tensor(rows), torch.tensor(cols)].gather(1, idx) / temperature
        lp = torch.log_softmax(z.masked_fill(~valid, float("-inf")), -1).gather(1, torch.tensor(picks)[:, None])[:, 0]
        out += list(torch.split(lp, sizes))
    return out


def policy_update(model: Any, opt: Any, samples: Sequence[Tuple[float, List[Any]]], temperature: float, epochs: int = 1,
                  clip: float = 0.2, chunk: int = 32) -> float:
    """``epochs`` optimizer steps on one batch of sampled episodes (``(advantage, trace)``): the
    clipped surrogate of PPO per chosen token, ``min(r A, clip(r, 1 - clip, 1 + clip) A)`` with
    ``r`` the token's probability over its probability when sampled, summed over each step's
    tokens and averaged over the batch's steps. The first step has ``r = 1`` and is the plain
    policy gradient (-A x the log-probability); later ones reuse the same episodes, and the clip
    stops a token's probability moving more than ``clip`` from where it was sampled. Returns the
    first step's loss."""
    import torch

    steps = [st for _, tr in samples for st in tr]
    adv = [a for a, tr in samples for _ in tr]
    if not steps:
        return 0.0
    old: List[Any] = []
    first = 0.0
    model.train()
    for epoch in range(epochs):
        opt.zero_grad()
        total = 0.0
        for i in range(0, len(steps), chunk):
            lps = token_logps(model, steps[i:i + chunk], temperature, chunk)
            if epoch == 0:
                old += [lp.detach() for lp in lps]
            loss = 0.0
            for j, lp in enumerate(lps):
                ratio = torch.exp(lp - old[i + j])
                a = adv[i + j]
                loss = loss - torch.minimum(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a).sum() / len(steps)
            loss.backward()
            total += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        first = total if epoch == 0 else first
    model.eval()
    return first


REWARDS = ("score", "return", "dense")


def step_advantages(runs: Sequence[Dict[str, Any]], reward: str = "score", floor: float = 0.0) -> List[np.ndarray]:
    """Each episode's per-step advantages in one group of episodes of the same case (``runs``:
    :func:`play_episode` records with their dense ``rewards``).

    * ``score``: GRPO's advantage of the episode's final score, on every step;
    * ``return``: the same of the episode's return (the sum of its dense rewards: the score less
      the action costs, ``docs/grading.md``), on every step;
    * ``dense``: each step's reward-to-go (the dense rewards from that step on) less the group's
      mean return, over the group's return standard deviation (floored): a step is credited with
      what followed it only, so an action's own cost or failure falls on it and the steps before,
      not on the steps after.

    A group whose values do not differ gives zeros (no gradient)."""
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
    if reward == "score":
        adv = group_advantages([r["final_score"] for r in runs], floor)
        return [np.full(len(r["rewards"]), a) for r, a in zip(runs, adv)]
    returns = np.array([sum(r["rewards"]) for r in runs], dtype=float)
    if reward == "return":
        adv = group_advantages(returns, floor)
        return [np.full(len(r["rewards"]), a) for r, a in zip(runs, adv)]
    scale = max(float(returns.std()), floor) + 1e-6
    if returns.std() < 1e-9:
        return [np.zeros(len(r["rewards"])) for r in runs]
    return [(np.cumsum(np.asarray(r["rewards"], dtype=float)[::-1])[::-1] - returns.mean()) / scale for r in runs]


def grpo(dec: Decoder, episodes: Sequence[Dict[str, Any]], iterations: int, group: int, batch: int, temperature: float, lr: float, seed: int,
         eval_fn: Any = None, adv_floor: float = 0.0, epochs: int = 1, clip: float = 0.2, reward: str = "score") -> Dict[str, Any]:
    """Group-relative policy optimisation on the LM: per training episode ``group`` sampled
    episodes, per-step advantages by :func:`step_advantages` (``reward``: the final score, the
    return, or the dense rewards to go), then :func:`policy_update` (``epochs`` clipped steps; 1
    is the plain policy gradient of every action token the episodes chose). The floor keeps a
    group whose rewards differ by a rounding-sized amount from weighing as much as one whose
    episodes differ in outcome."""
    import torch

    if epochs < 1 or not 0.0 < clip < 1.0:
        raise ValueError(f"epochs must be at least 1 and clip in (0, 1), got {epochs} and {clip}")
    rng = np.random.default_rng(seed)
    model = dec.model
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for it in bar(range(iterations), total=iterations, desc=f"compact LM RL seed {seed}"):
        picked = [episodes[int(i)] for i in rng.choice(len(episodes), size=min(batch, len(episodes)), replace=False)]
        scores, returns, zero_var, samples = [], [], 0, []
        for ep in picked:
            runs, traces = [], []
            for _ in range(group):
                tr: List[Any] = []
                runs.append(play_episode(dec, ep, temperature, rng, tr))
                traces.append(tr)
            scores += [r["final_score"] for r in runs]
            returns += [sum(r["rewards"]) for r in runs]
            advs = step_advantages(runs, reward, adv_floor)
            if all(not np.any(a) for a in advs):
                zero_var += 1
                continue
            samples += [(float(a), [st]) for adv, tr in zip(advs, traces) for a, st in zip(adv, tr)]
        loss_v = policy_update(model, opt, samples, temperature, epochs, clip)
        h = {"iteration": it + 1, "mean_reward": round(float(np.mean(scores)), 4), "reward_std": round(float(np.std(scores)), 4),
             "mean_return": round(float(np.mean(returns)), 4), "zero_variance_groups": zero_var, "groups": len(picked), "loss": round(loss_v, 5)}
        if eval_fn is not None:
            h["held_out"] = eval_fn(dec)
        history.append(h)
    zv = sum(h["zero_variance_groups"] for h in history) / max(sum(h["groups"] for h in history), 1)
    return {"history": history, "zero_variance_share": round(zv, 4), "seed": seed, "temperature": temperature, "group": group, "lr": lr,
            "epochs": epochs, "clip": clip, "reward": reward}


def paired_delta(before: Dict[str, Any], after: Dict[str, Any]) -> Tuple[float, float]:
    """95 % bootstrap interval of the mean per-episode score change on the same held-out
    episodes (both evaluations are greedy, so each episode's change is the policy's)."""
    from .structured import bootstrap_ci

    a, b = before["per_case"], after["per_case"]
    return bootstrap_ci([b[c] - a[c] for c in a if c in b])


def improvement_verdict(deltas: Sequence[float], paired: Sequence[Tuple[float, float]], min_gain: float = 0.02) -> Dict[str, Any]:
    """Whether RL raised the held-out score by a margin outside the noise: every seed's paired
    interval above zero, the mean gain larger than twice the seeds' standard deviation and at
    least ``min_gain`` (a material gain, not a rounding-sized one)."""
    if not deltas:
        return {"claimed": False, "why": "no RL seed ran"}
    mean, sd = float(np.mean(deltas)), float(np.std(deltas))
    every = all(lo > 0 for lo, _ in paired)
    claimed = every and mean > 2 * sd and mean >= min_gain
    return {"claimed": claimed, "mean_delta": round(mean, 4), "seed_std": round(sd, 4), "every_seed_paired_ci_above_zero": every,
            "mean_over_2sd": mean > 2 * sd, "min_gain": min_gain}


# ---------------------------------------------------------------------------- save / load


def save(dec: Decoder, out: Path) -> None:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    torch.save(dec.model.state_dict(), out / "model.pt")
    (out / "compact_lm.json").write_text(json.dumps({"config": dec.model.config, "vocab": dec.coder.vocab, "schema": dec.schema.to_json()},
                                                    default=lambda o: sorted(o)))


def load(path: Path) -> Decoder:
    import torch

    meta = json.loads((path / "compact_lm.json").read_text())
    c = meta["config"]
    model = make_model(c["vocab_size"], c["dim"], c["layers"], c["heads"])
    model.load_state_dict(torch.load(path / "model.pt"))
    model.eval()
    return Decoder(model, Coder(meta["vocab"]), Schema.from_json(meta["schema"]))


def _selected(rows: Dict[str, Dict[str, Any]]) -> str:
    """The checkpoint with the best validation macro mean (ties: the first listed)."""
    return max(rows, key=lambda k: (rows[k]["macro"], -list(rows).index(k)))


def rl_stage(out: Path, sft_val: Dict[str, Any], sft_test: Dict[str, Any], validation: Sequence[Dict[str, Any]],
             test: Sequence[Dict[str, Any]], cfg: Dict[str, Any]) -> Dict[str, Any]:
    """GRPO from the SFT checkpoint (``out/sft``) for every reward in ``cfg["rewards"]`` over
    ``cfg["seeds"]`` seeds, in subprocesses. Seed ``i`` trains on its own training draws (seeds
    of the ``train`` set that neither SFT nor another seed uses), the same for every reward, so
    the rewards are compared paired; each checkpoint is scored on the validation episodes (for
    the choice) and on the test episodes. The improvement verdict of each reward is judged on the
    test episodes, paired against the SFT checkpoint; the dense rewards' gain over the terminal
    score is the paired change between the two on the same seeds."""
    n, rewards = int(cfg["seeds"]), list(cfg.get("rewards") or ["score"])
    knobs = dict({k: cfg[k] for k in ("iterations", "group", "batch", "temperature", "lr")}, adv_floor=cfg.get("adv_floor", 0.0),
                 epochs=cfg.get("epochs", 1), clip=cfg.get("clip", 0.2))
    names = [f"rl-{r}-s{i}" for r in rewards for i in range(n)]
    jobs = [("rl", dict(knobs, init=str(out / "sft"), out=str(out / f"rl-{r}-s{i}"), seed=i, reward=r, validation=list(validation),
                        episodes=tasks.episodes("train", int(cfg["episodes"]), tasks.RL_SEED_OFFSET + 10_000 * i)))
            for r in rewards for i in range(n)]
    hist = in_processes(jobs, out / "jobs", parallel=int(cfg.get("parallel", 2)))
    tests = in_processes([("eval", {"checkpoint": str(out / k), "label": f"compact-lm-{k}", "episodes": list(test)}) for k in names],
                         out / "jobs", parallel=int(cfg.get("parallel", 2)))
    runs = []
    for k, h, t in zip(names, hist, tests):
        runs.append({"name": k, "reward": h["reward"], "seed": h["seed"], "train_episodes": h["train_episodes"], "history": h["history"],
                     "zero_variance_share": h["zero_variance_share"], "validation": _figures(h["validation"]), "test": _figures(t),
                     "test_row": t, "delta": round(t["macro"] - sft_test["macro"], 4), "paired_delta_ci95": paired_delta(sft_test, t)})
    by_reward = {}
    for r in rewards:
        rs = [x for x in runs if x["reward"] == r]
        v = improvement_verdict([x["delta"] for x in rs], [x["paired_delta_ci95"] for x in rs])
        v["judged_on"] = f"{len(test)} test episodes, paired per episode against the SFT checkpoint"
        by_reward[r] = {"test_macro": [x["test"]["macro"] for x in rs], "validation_macro": [x["validation"]["macro"] for x in rs],
                        "deltas": [x["delta"] for x in rs], "paired_delta_ci95": [x["paired_delta_ci95"] for x in rs], "improves": v,
                        "zero_variance_share": [x["zero_variance_share"] for x in rs]}
    dense_gain = None
    if "score" in rewards and "dense" in rewards:
        pairs = [(a, b) for a in runs if a["reward"] == "score" for b in runs if b["reward"] == "dense" and b["seed"] == a["seed"]]
        dense_gain = {"test_deltas": [round(b["test"]["macro"] - a["test"]["macro"], 4) for a, b in pairs],
                      "validation_deltas": [round(b["validation"]["macro"] - a["validation"]["macro"], 4) for a, b in pairs],
                      "paired_delta_ci95": [paired_delta(a["test_row"], b["test_row"]) for a, b in pairs],
                      "zero_variance_share": {"score": by_reward["score"]["zero_variance_share"], "dense": by_reward["dense"]["zero_variance_share"]}}
        dense_gain["verdict"] = improvement_verdict(dense_gain["test_deltas"], dense_gain["paired_delta_ci95"])
    val = {"sft": sft_val, **{x["name"]: x["validation"] for x in runs}}
    chosen = _selected(val)
    return dict(knobs, seeds=n, rewards=rewards, by_reward=by_reward, dense_vs_score=dense_gain, selected=chosen,
                selected_test=(sft_test if chosen == "sft" else next(x["test_row"] for x in runs if x["name"] == chosen)),
                zero_variance_share=[x["zero_variance_share"] for x in runs],
                runs=[{k: v for k, v in x.items() if k != "test_row"} for x in runs], rows=[x["test_row"] for x in runs])


def _figures(m: Dict[str, Any]) -> Dict[str, Any]:
    """A summary row's headline figures."""
    return {k: m.get(k) for k in ("macro", "macro_ci95", "macro_templates", "macro_generators", "mean_score", "parse_success", "episodes")}


# ---------------------------------------------------------------------------- the pipeline stage


def compact_lm_stage(out: Path, train: Sequence[Dict[str, Any]], validation: Sequence[Dict[str, Any]], test: Sequence[Dict[str, Any]],
                     lr: float = 3e-3, minutes: float = 0.0, max_steps: int = 1500, batch: int = 16, dim: int = 128, layers: int = 4,
                     heads: int = 4, sft_evals: int = 5, threads: int = 1, label_smoothing: float = 0.0, schedule_steps: int = 0,
                     rl: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """SFT from random weights on the replayed teacher steps of ``train`` (recorded episodes of
    the training draws), the checkpoint chosen on ``validation`` among the probe checkpoints, then
    GRPO (:func:`rl_stage`, ``rl``: its configuration, ``None`` for none); every checkpoint scored
    on ``test`` once."""
    import torch

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    t_cpu, t_wall = time.process_time(), time.monotonic()
    episodes = replay_pairs(train)
    schema = Schema.learn([(tb, a) for ep in episodes for _, _, tb, a in ep])
    rows, rows_info = build_rows(episodes, schema)
    vocab = build_vocab(rows, schema)
    coder = Coder(vocab)
    model = make_model(len(vocab), dim, layers, heads)
    dec = Decoder(model, coder, schema)
    prep_s = round(time.monotonic() - t_wall, 1)
    kept: Dict[str, Any] = {}

    def curve_eval(m: Any) -> Dict[str, Any]:
        r = evaluate(Decoder(m, coder, schema), "probe", validation)
        kept[r["macro"]] = kept.get(r["macro"]) or {k: v.detach().clone() for k, v in m.state_dict().items()}
        return {"macro": r["macro"], "mean_score": r["mean_score"], "parse_success": r["parse_success"], "episodes": r["episodes"]}

    start = curve_eval(model) if sft_evals else {"macro": 0.0, "mean_score": 0.0, "parse_success": 0.0, "episodes": 0}
    kept.clear()  # random weights are not a candidate
    by_steps = sft_evals and max_steps < STEP_LIMITED_BELOW
    every = 60 * minutes / (sft_evals + 1) if sft_evals and minutes and not by_steps else 0.0
    every_steps = max(1, max_steps // sft_evals) if by_steps else 0
    s = sft(model, coder, rows, lr, minutes, max_steps, batch, eval_fn=curve_eval if every or every_steps else None, eval_every_s=every,
            label_smoothing=label_smoothing, eval_every_steps=every_steps, schedule_steps=schedule_steps)
    if not s["evals"] or s["evals"][-1]["step"] != s["steps"]:  # the last step is always a candidate
        model.eval()
        s["evals"].append(dict(curve_eval(model), step=s["steps"], wall_s=s["wall_s"]))
    best = max(s["evals"], key=lambda e: e["macro"])
    model.load_state_dict(kept[best["macro"]])
    model.eval()
    save(dec, out / "sft")
    sft_val = evaluate(dec, "compact-lm-sft (validation)", validation)
    sft_test = evaluate(dec, "compact-lm-sft", test)
    rl_out = rl_stage(out, sft_val, sft_test, validation, test, rl) if rl and int(rl.get("seeds", 0)) > 0 else None
    summary = {"params": n_params(model), "vocab": len(vocab), "config": model.config, "rows": rows_info, "threads": threads,
               "schema_types": len(schema.types), "schema_heads": len(schema.heads), "train_episodes": len(episodes),
               "validation_episodes": len(validation), "test_episodes": len(test), "prep_s": prep_s,
               "sft": {"steps": s["steps"], "wall_s": s["wall_s"], "loss_first": s["history"][0]["loss"] if s["history"] else None,
                       "loss_last": s["history"][-1]["loss"] if s["history"] else None, "lr": lr, "batch": batch, "minutes": minutes,
                       "label_smoothing": label_smoothing, "schedule_steps": schedule_steps, "chosen_step": best["step"],
                       "chosen_validation_macro": best["macro"]},
               "sft_history": s["history"], "sft_curve": s["evals"], "sft_curve_start": start,
               "sft_validation": _figures(sft_val), "sft_test": _figures(sft_test), "sft_held_out": sft_test["macro"],
               "sft_parse_success_under_constraint": sft_test["parse_success"], "sft_submitted_share": sft_test["submitted_share"],
               "rl": {k: v for k, v in rl_out.items() if k != "rows"} if rl_out else None,
               "matrix": [sft_test] + (rl_out["rows"] if rl_out else []),
               "cpu_s": round(time.process_time() - t_cpu, 1), "wall_s": round(time.monotonic() - t_wall, 1)}
    (out / "compact_lm_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary
