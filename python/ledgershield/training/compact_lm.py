"""A small causal transformer trained from random weights on the compact language
(:mod:`.compact`): SFT on replayed teacher steps, grammar-constrained decoding, and group-relative
RL (GRPO's advantage, no critic) over several seeds, every checkpoint scored on the structured
stage's held-out episodes, in process. Work on another generated quarter (extra teacher rows, RL's
training cases, the wider held-out set) runs in a subprocess whose pool holds that quarter
(:func:`in_quarters`).

The model is plain torch (no hub, no download): token and position embeddings, ``layers``
pre-norm blocks of causal self-attention and an MLP, a tied output layer, a key/value cache for
decoding. Its vocabulary is the compact language's word tokens seen in the training rows (at
least twice) plus every pointer token. Decoding is constrained token by token by
:func:`.compact.allowed`: at every position only the tokens the grammar allows given the table,
the schema, the actions played and the native interventions are scored, so every action expands
(parse success under constraint is the share of steps the environment accepted).
"""

from __future__ import annotations


import copy
import json
import math
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .compact import ACT, EOS, PAD, UNK, Context, Schema, Table, allowed_tokens, encode, expand, generic_labels, state_tokens, to_tokens, to_units
from .ledger import EvidenceLedger, replay_ledgers
from .progress import bar

MAX_LEN = 1024
# An SFT step budget below this is the run's limit (its held-out probe is spread over the steps);
# at or above it the minutes are (the probe is spread over the time).
STEP_LIMITED_BELOW = 100000


# ---------------------------------------------------------------------------- data


def replay_pairs(records: Sequence[Dict[str, Any]]) -> List[List[Tuple[Dict[str, Any], EvidenceLedger, Table, Dict[str, Any]]]]:
    """Each submitted teacher episode replayed in process: ``[(obs, ledger snapshot, table, action)]``."""
    from ..native import ControlBenchEnv, EnvError

    out = []
    for rec in records:
        traj = rec.get("trajectory") or []
        if not traj or traj[-1].get("action_type") != "submit_decision":
            continue
        ep = []
        try:
            for envelope, led, a in replay_ledgers(ControlBenchEnv(), rec["case_id"], traj):
                obs = envelope["observation"]
                ep.append((obs, copy.deepcopy(led), Table(obs, led), {"action_type": a["action_type"], "payload": a["payload"]}))
        except EnvError:
            continue  # a case this process's pool does not hold
        out.append(ep)
    return out


def build_rows(episodes: Sequence[Sequence[Tuple[Any, EvidenceLedger, Table, Dict[str, Any]]]], schema: Schema) -> Tuple[List[Tuple[List[str], List[str]]], Dict[str, Any]]:
    """(state tokens, action tokens) rows and their coverage / length figures."""
    rows, skipped = [], 0
    sizes: List[int] = []
    for ep in episodes:
        played: List[List[str]] = []  # tokens
        for obs, led, table, a in ep:
            table.relabel(schema.labels)
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


def rows_main(args: Dict[str, Any]) -> Dict[str, Any]:
    """The compact rows of ``db``'s submitted teacher episodes whose base case is in ``bases``,
    replayed in this process's pool (a generated quarter of another seed: see :func:`in_quarters`)."""
    from .ledger import teacher_records
    from .structured import _base

    schema = Schema.from_json(args["schema"])
    bases = set(args["bases"])
    recs = [r for r in teacher_records(Path(args["db"])) if _base(r) in bases]
    episodes = replay_pairs(recs)
    rows, info = build_rows(episodes, schema)
    info.update(episodes=len(episodes), case_ids=sorted({r["case_id"] for r in recs}))
    return {"rows": rows, "info": info}


def quarter_cases(db: Path, bases: Iterable[str]) -> List[str]:
    """The case ids of a quarter's teacher collection whose base case is in ``bases``."""
    from .ledger import teacher_records
    from .structured import _base

    keep = set(bases)
    return sorted({r["case_id"] for r in teacher_records(Path(db)) if _base(r) in keep})


def rl_main(args: Dict[str, Any]) -> Dict[str, Any]:
    """GRPO from the checkpoint ``init`` on the quarter's cases of the training base cases (this
    process's pool holds that quarter), saved to ``out``."""
    dec = load(Path(args["init"]))
    ids = quarter_cases(Path(args["db"]), args["bases"])
    h = grpo(dec, ids, args["iterations"], args["group"], args["batch"], args["temperature"], args["lr"], args["seed"],
             adv_floor=args.get("adv_floor", 0.0), epochs=args.get("epochs", 1), clip=args.get("clip", 0.2))
    save(dec, Path(args["out"]))
    return dict(h, train_cases=len(ids), quarter=args["quarter"])


def eval_main(args: Dict[str, Any]) -> Dict[str, Any]:
    """Every checkpoint in ``checkpoints`` scored greedily on the quarter's cases of the held-out
    base cases (``exclude``: ids already scored elsewhere, the curated cases every pool holds)."""
    skip = set(args["exclude"])
    ids = [c for c in quarter_cases(Path(args["db"]), args["bases"]) if c not in skip]
    return {"case_ids": ids, "per_checkpoint": {str(c): evaluate(load(Path(c)), str(c), ids)["per_case"] for c in args["checkpoints"]}}


_MAINS = {"rows": rows_main, "rl": rl_main, "eval": eval_main}


def quarter_main(argv: Sequence[str]) -> None:
    """``KIND ARGS OUT``: one of :data:`_MAINS` on the JSON arguments in ``ARGS``, its result written to ``OUT``."""
    import torch

    torch.set_num_threads(1)  # two jobs share two cores: more threads spin-wait on each other (8x slower)
    kind, args_path, out = argv
    Path(out).write_text(json.dumps(_MAINS[kind](json.loads(Path(args_path).read_text()))))


def in_quarters(jobs: Sequence[Tuple[str, int, Dict[str, Any]]], work: Path, parallel: int = 2) -> List[Dict[str, Any]]:
    """Run each ``(kind, quarter seed, args)`` in a subprocess whose in-process pool holds that
    seed's generated quarter (a pool holds one quarter), ``parallel`` at a time; their results in order."""
    import os
    import subprocess
    import sys

    work.mkdir(parents=True, exist_ok=True)
    code = "import sys; from ledgershield.training.compact_lm import quarter_main; quarter_main(sys.argv[1:])"
    running: List[Any] = []
    outs = []
    try:
        for i, (kind, seed, args) in enumerate(jobs):
            a, o = work / f"{kind}-{i}-{seed}.args.json", work / f"{kind}-{i}-{seed}.json"
            a.write_text(json.dumps(args, default=lambda v: sorted(v)))
            env = dict(os.environ, LEDGERSHIELD_INCLUDE_CONTROLBENCH="1", LEDGERSHIELD_CONTROLBENCH_SEED=str(seed),
                       PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
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


def extra_rows(sources: Sequence[Tuple[Path, int]], schema: Schema, train_bases: Sequence[str], work: Path) -> Tuple[List[Tuple[List[str], List[str]]], Dict[str, Any]]:
    """Rows from teacher episodes of other generated quarters (``(runs.db, seed)``), each replayed in
    a subprocess whose in-process pool holds that seed's quarter; only training base cases."""
    rows: List[Tuple[List[str], List[str]]] = []
    info: Dict[str, Any] = {"seeds": [], "episodes": 0, "rows": 0, "unexpressed_steps": 0, "case_ids": []}
    jobs = [("rows", seed, {"db": str(db), "schema": schema.to_json(), "bases": sorted(train_bases)}) for db, seed in sources]
    for (_db, seed), got in zip(sources, in_quarters(jobs, work)):
        rows += [(list(a), list(b)) for a, b in got["rows"]]
        info["seeds"].append(seed)
        for k in ("episodes", "rows", "unexpressed_steps"):
            info[k] += got["info"][k]
        info["case_ids"] += got["info"]["case_ids"]
    return rows, info


def _wait(proc: Any) -> None:
    if proc.wait() != 0:
        raise RuntimeError(f"a job in another quarter's pool failed ({proc.returncode}): {proc.args[-3:]}")


def build_vocab(rows: Sequence[Tuple[List[str], List[str]]], schema: Schema) -> List[str]:
    c = Counter(t for s, a in rows for t in s + a)
    vocab = [PAD, UNK, EOS, ACT, "submit"] + [f"n:{i}" for i in range(32)]
    vocab += schema.types + list(schema.heads) + ["PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD"]
    for t, fs in schema.fields.items():
        vocab += [f"{f}={lit}" for f, k, info in fs if k == "enum" for lit in info]
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


def play_episode(dec: Decoder, case_id: str, temperature: float = 0.0, rng: Optional[np.random.Generator] = None,
                 trace: Optional[List[Any]] = None) -> Dict[str, Any]:
    """One episode in process (fresh institution) under constrained decoding."""
    from ..native import ControlBenchEnv, EnvError

    env = ControlBenchEnv()
    envelope = env.reset(case_id=case_id, fresh_institution=True)
    led = EvidenceLedger()
    led.observe(envelope["observation"])
    played: List[List[str]] = []  # tokens (the state prompt's "did" list)
    played_units: List[List[str]] = []  # units (the grammar's no-repeat rule)
    refused = 0
    types: List[str] = []
    decision = None
    while not envelope.get("done"):
        obs = envelope["observation"]
        native = env.candidates()
        table = Table(obs, led, native, dec.schema.labels)
        steps_left = int(obs.get("max_steps") or 0) - int(obs.get("step_count") or 0)
        ctx = Context(table, dec.schema, played_units, {c["action_type"] for c in native}, steps_left)
        toks = dec.act(state_tokens(obs, led, played, table, dec.schema.arg_labels), ctx, temperature, rng, trace)
        units = to_units(toks, table)
        a = expand(units, table, dec.schema)
        try:
            envelope = env.step(a)
        except EnvError:
            refused += 1
            a = {"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.35, "reason_codes": []}}
            envelope = env.step(a)
        played.append(toks)
        played_units.append(units)
        types.append(a["action_type"])
        if a["action_type"] == "submit_decision":
            decision = a["payload"].get("decision")
        led.observe(envelope["observation"])
    info = envelope.get("info") or {}
    return {"case_id": case_id, "task_type": envelope["observation"].get("task_type"), "final_score": float(info.get("final_score") or 0.0),
            "result_class": info.get("result_class"), "steps": len(played), "refused": refused,
            "unsafe_release": bool(info.get("unsafe_release")), "submitted": bool(played) and played[-1][0] == "submit",
            "decision": decision, "types": types}


def evaluate(dec: Decoder, label: str, cases: Sequence[str]) -> Dict[str, Any]:
    from .structured import summarize

    eps = [play_episode(dec, c) for c in cases]
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


def grpo(dec: Decoder, cases: Sequence[str], iterations: int, group: int, batch: int, temperature: float, lr: float, seed: int,
         eval_fn: Any = None, adv_floor: float = 0.0, epochs: int = 1, clip: float = 0.2) -> Dict[str, Any]:
    """Group-relative policy optimisation on the LM: per case ``group`` sampled episodes, advantage =
    (reward - group mean) / max(group std, ``adv_floor``), then :func:`policy_update` (``epochs``
    clipped steps; 1 is the plain policy gradient of every action token the episodes chose). The
    floor keeps a group whose rewards differ by a rounding-sized amount from weighing as much as
    one whose episodes differ in outcome."""
    import torch

    if epochs < 1 or not 0.0 < clip < 1.0:
        raise ValueError(f"epochs must be at least 1 and clip in (0, 1), got {epochs} and {clip}")
    rng = np.random.default_rng(seed)
    model = dec.model
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for it in bar(range(iterations), total=iterations, desc=f"compact LM RL seed {seed}"):
        picked = [cases[int(i)] for i in rng.choice(len(cases), size=min(batch, len(cases)), replace=False)]
        rewards, zero_var, samples = [], 0, []
        for c in picked:
            runs = []
            for _ in range(group):
                tr: List[Any] = []
                runs.append((play_episode(dec, c, temperature, rng, tr)["final_score"], tr))
            r = np.array([x for x, _ in runs])
            rewards += r.tolist()
            if r.std() < 1e-9:
                zero_var += 1
                continue
            adv = group_advantages(r, adv_floor)
            samples += [(float(a), tr) for a, (_, tr) in zip(adv, runs)]
        loss_v = policy_update(model, opt, samples, temperature, epochs, clip)
        h = {"iteration": it + 1, "mean_reward": round(float(np.mean(rewards)), 4), "reward_std": round(float(np.std(rewards)), 4),
             "zero_variance_groups": zero_var, "groups": len(picked), "loss": round(loss_v, 5)}
        if eval_fn is not None:
            h["held_out"] = eval_fn(dec)
        history.append(h)
    zv = sum(h["zero_variance_groups"] for h in history) / max(sum(h["groups"] for h in history), 1)
    return {"history": history, "zero_variance_share": round(zv, 4), "seed": seed, "temperature": temperature, "group": group, "lr": lr,
            "epochs": epochs, "clip": clip}


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


def rl_stage(out: Path, held: Sequence[str], sft_row: Dict[str, Any], train_ids: Sequence[str], train_bases: Sequence[str],
             eval_bases: Sequence[str], cfg: Dict[str, Any], rl_quarters: Sequence[Tuple[Path, int]] = (),
             held_quarters: Sequence[Tuple[Path, int]] = ()) -> Dict[str, Any]:
    """GRPO from the SFT checkpoint (``out/sft``) over ``cfg["seeds"]`` seeds, each checkpoint scored
    on the held-out episodes ``held`` and, with ``held_quarters``, on a wider held-out set.

    With ``rl_quarters``, seed ``i`` trains on the cases of the training base cases in quarter
    ``rl_quarters[i % n]`` (generated values the SFT data never showed: on its own training
    episodes the SFT policy is near its teacher and most groups have no reward variance), in a
    subprocess holding that quarter; without, in process on ``train_ids``. The wider held-out set
    adds the held-out base cases' episodes of every quarter in ``held_quarters`` to ``held`` (no
    stage trains on a held-out base case), and the improvement verdict is judged on it: more
    episodes, a paired interval that a one-case change cannot move."""
    from .structured import bootstrap_ci

    n = int(cfg["seeds"])
    knobs = dict({k: cfg[k] for k in ("iterations", "group", "batch", "temperature", "lr")}, adv_floor=cfg.get("adv_floor", 0.0),
                 epochs=cfg.get("epochs", 1), clip=cfg.get("clip", 0.2))
    if rl_quarters:
        jobs = [("rl", q, dict(knobs, init=str(out / "sft"), db=str(db), bases=list(train_bases), out=str(out / f"rl-s{i}"), seed=i, quarter=q))
                for i, (db, q) in ((i, rl_quarters[i % len(rl_quarters)]) for i in range(n))]
        hist = in_quarters(jobs, out / "quarters", parallel=int(cfg.get("parallel", 2)))
    else:
        hist = []
        for i in range(n):
            dec = load(out / "sft")
            hist.append(dict(grpo(dec, train_ids, knobs["iterations"], knobs["group"], knobs["batch"], knobs["temperature"], knobs["lr"], i,
                                  adv_floor=knobs["adv_floor"], epochs=knobs["epochs"], clip=knobs["clip"]),
                             train_cases=len(train_ids), quarter=None))
            save(dec, out / f"rl-s{i}")
    rows, runs = [], []
    for i, h in enumerate(hist):
        m = evaluate(load(out / f"rl-s{i}"), f"compact-lm-rl-s{i}", held)
        rows.append(m)
        runs.append({"seed": i, "quarter": h["quarter"], "train_cases": h["train_cases"], "held_out_mean": m["mean_score"], "ci95": m["ci95"],
                     "parse_success": m["parse_success"], "zero_variance_share": h["zero_variance_share"], "history": h["history"],
                     "per_family": m["per_family"]})
    means = [r["held_out_mean"] for r in runs]
    deltas = [round(x - sft_row["mean_score"], 4) for x in means]
    paired = [paired_delta(sft_row, m) for m in rows]
    wide = None
    if held_quarters and n:
        names = ["sft"] + [f"rl-s{i}" for i in range(n)]
        per = {k: dict(r["per_case"]) for k, r in zip(names, [sft_row] + rows)}
        jobs = [("eval", q, {"checkpoints": [str(out / k) for k in names], "db": str(db), "bases": list(eval_bases), "exclude": list(held)})
                for db, q in held_quarters]
        for (_db, q), got in zip(held_quarters, in_quarters(jobs, out / "quarters")):
            for k in names:
                per[k].update({f"{q}:{c}": v for c, v in got["per_checkpoint"][str(out / k)].items()})
        mean = {k: round(float(np.mean(list(v.values()))), 4) for k, v in per.items()}
        w_deltas = [round(mean[k] - mean["sft"], 4) for k in names[1:]]
        w_paired = [paired_delta({"per_case": per["sft"]}, {"per_case": per[k]}) for k in names[1:]]
        wide = {"episodes": len(per["sft"]), "quarters": [q for _, q in held_quarters], "sft_mean": mean["sft"],
                "means": [mean[k] for k in names[1:]], "deltas": w_deltas, "paired_delta_ci95": w_paired,
                "sft_ci95": bootstrap_ci(list(per["sft"].values()))}
    verdict = improvement_verdict(wide["deltas"], wide["paired_delta_ci95"]) if wide else improvement_verdict(deltas, paired)
    verdict["judged_on"] = f"{wide['episodes']} held-out episodes (this quarter and {len(held_quarters)} more)" if wide else f"{len(held)} held-out episodes"
    return dict(knobs, seeds=n, quarters=[q for _, q in rl_quarters], held_out_means=means, deltas=deltas, paired_delta_ci95=paired,
                wide=wide, improves=verdict, mean=round(float(np.mean(means)), 4) if means else None,
                std=round(float(np.std(means)), 4) if means else None, zero_variance_share=[r["zero_variance_share"] for r in runs],
                runs=runs, rows=rows)


# ---------------------------------------------------------------------------- the pipeline stage


def compact_lm_stage(data: Path, out: Path, held_ids: Sequence[str], lr: float = 3e-3, minutes: float = 6.0, max_steps: int = 100000,
                     batch: int = 16, dim: int = 128, layers: int = 4, heads: int = 4, rl_seeds: int = 3, rl_iterations: int = 4,
                     rl_group: int = 4, rl_batch: int = 8, rl_temperature: float = 1.0, rl_lr: float = 3e-4, sft_evals: int = 5,
                     threads: int = 1, extra: Sequence[Tuple[Path, int]] = (), rl_quarters: Sequence[Tuple[Path, int]] = (),
                     held_quarters: Sequence[Tuple[Path, int]] = (), label_smoothing: float = 0.0, rl_adv_floor: float = 0.0,
                     rl_epochs: int = 1, rl_clip: float = 0.2, rl_parallel: int = 2, schedule_steps: int = 0) -> Dict[str, Any]:
    """SFT from random weights on the training split's replayed teacher steps, held-out
    evaluation under constraint of the SFT checkpoint and of GRPO over ``rl_seeds`` seeds
    (:func:`rl_stage`; ``rl_quarters`` and ``held_quarters``: ``(runs.db, seed)`` of other
    generated quarters, for RL's training cases and for a wider held-out set)."""
    import torch

    from .ledger import teacher_records
    from .structured import _base, replayable

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    t_cpu, t_wall = time.process_time(), time.monotonic()
    split = json.loads((data / "split.json").read_text())
    train_bases = set(split["train_base_cases"])
    recs = [r for r in teacher_records(data / "runs.db") if _base(r) in train_bases]
    episodes = replay_pairs(recs)
    schema = Schema.learn([(tb, a) for ep in episodes for _, _, tb, a in ep])
    schema.labels = generic_labels([ep[-1][2] for ep in episodes if ep])  # each episode's last table: every line it read
    rows, rows_info = build_rows(episodes, schema)
    held = list(held_ids)
    extra_info = None
    if extra:  # teacher episodes of other quarters' training base cases (never a held-out one)
        more, extra_info = extra_rows(extra, schema, sorted(train_bases), out / "extra")
        assert not set(extra_info["case_ids"]) & set(held), "an extra episode is a held-out one"
        rows += more
        extra_info = {k: v for k, v in extra_info.items() if k != "case_ids"}
    vocab = build_vocab(rows, schema)
    coder = Coder(vocab)
    model = make_model(len(vocab), dim, layers, heads)
    dec = Decoder(model, coder, schema)
    probe = held[:: max(1, len(held) // 12)][:12]  # a fixed held-out subset for the learning curve
    prep_s = round(time.monotonic() - t_wall, 1)

    def curve_eval(m: Any) -> Dict[str, Any]:
        r = evaluate(Decoder(m, coder, schema), "probe", probe)
        return {"mean_score": r["mean_score"], "parse_success": r["parse_success"], "episodes": r["episodes"]}

    start = curve_eval(model) if sft_evals else {"mean_score": 0.0, "parse_success": 0.0, "episodes": 0}
    # the probe's checkpoints: evenly over the steps when the run is step-limited, else over the minutes
    by_steps = sft_evals and max_steps < STEP_LIMITED_BELOW
    every = 60 * minutes / (sft_evals + 1) if sft_evals and minutes and not by_steps else 0.0
    every_steps = max(1, max_steps // (sft_evals + 1)) if by_steps else 0
    s = sft(model, coder, rows, lr, minutes, max_steps, batch, eval_fn=curve_eval if every or every_steps else None, eval_every_s=every,
            label_smoothing=label_smoothing, eval_every_steps=every_steps, schedule_steps=schedule_steps)
    save(dec, out / "sft")
    sft_row = evaluate(dec, "compact-lm-sft", held)
    rl = rl_stage(out, held, sft_row, replayable(sorted({r["case_id"] for r in recs})), sorted(train_bases), split["eval_base_cases"],
                  dict(seeds=rl_seeds, iterations=rl_iterations, group=rl_group, batch=rl_batch, temperature=rl_temperature, lr=rl_lr,
                       adv_floor=rl_adv_floor, epochs=rl_epochs, clip=rl_clip, parallel=rl_parallel),
                  rl_quarters, held_quarters)
    summary = {"params": n_params(model), "vocab": len(vocab), "config": model.config, "rows": rows_info, "extra_rows": extra_info,
               "threads": threads, "schema_types": len(schema.types),
               "schema_heads": len(schema.heads), "train_episodes": len(episodes), "held_out_episodes": len(held), "prep_s": prep_s,
               "sft": {"steps": s["steps"], "wall_s": s["wall_s"], "loss_first": s["history"][0]["loss"] if s["history"] else None,
                       "loss_last": s["history"][-1]["loss"] if s["history"] else None, "lr": lr, "batch": batch, "minutes": minutes,
                       "label_smoothing": label_smoothing, "schedule_steps": schedule_steps},
               "sft_history": s["history"], "sft_curve": s["evals"], "sft_curve_start": start, "probe_cases": probe,
               "sft_held_out": sft_row["mean_score"], "sft_ci95": sft_row["ci95"], "sft_parse_success_under_constraint": sft_row["parse_success"],
               "sft_submitted_share": sft_row["submitted_share"],
               "rl": {k: v for k, v in rl.items() if k != "rows"},
               "matrix": [sft_row] + rl["rows"],
               "cpu_s": round(time.process_time() - t_cpu, 1), "wall_s": round(time.monotonic() - t_wall, 1)}
    (out / "compact_lm_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return summary
