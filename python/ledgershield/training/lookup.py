"""The lookup-table baseline: the most common training action given the task family and the
actions so far.

It reads what the compact language model reads (:mod:`.compact`: the state prompt's task family
and its list of actions played, in the compact language) and answers with the teacher's most
common next action in the training episodes after exactly that history; without that history,
after the same last action; else the family's most common action. An action is played only
where the grammar allows it in this state (its pointers exist here, it is not a repeat); a
submission keeps the items whose pointers exist here. It learns nothing but counts, so it marks
how much of a trained policy's score a memorised action sequence per family already reaches.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .compact import DESC_PREFIXES, EOS, Context, Schema, allowed_tokens, encode, to_tokens

Tokens = Tuple[str, ...]


def _history(state: Sequence[str]) -> Tuple[str, List[Tokens]]:
    """The family and the actions played, as the state prompt lists them."""
    family = state[0] if state else ""
    i, j = state.index("|did") + 1, state.index("|now")
    played: List[Tokens] = []
    cur: List[str] = []
    for t in state[i:j]:
        if t == ";":
            played.append(tuple(cur))
            cur = []
        else:
            cur.append(t)
    return family, played


def _items(tokens: Tokens) -> List[List[str]]:
    """A submission's items after its decision: a head, or a head and its pointer."""
    out: List[List[str]] = []
    body = [t for t in tokens[2:] if t != EOS]
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1].startswith(DESC_PREFIXES):
            out.append(body[k:k + 3])
            k += 3
        else:
            out.append([body[k]])
            k += 1
    return out


class LookupPolicy:
    """Counts of the teacher's compact actions by (family, history), (family, last action) and
    family; ``act`` has the decoder's interface (:class:`.compact_lm.Decoder`)."""

    def __init__(self, episodes: Sequence[Sequence[Any]], schema: Schema) -> None:
        self.schema = schema
        self.full: Dict[Tuple[str, Tuple[Tokens, ...]], Counter] = defaultdict(Counter)
        self.prev: Dict[Tuple[str, Tokens], Counter] = defaultdict(Counter)
        self.fam: Dict[str, Counter] = defaultdict(Counter)
        for ep in episodes:
            played: List[Tokens] = []
            for obs, _led, table, a in ep:
                family = f"task:{obs.get('task_type')}"
                units = encode(a, table, schema)
                toks: Tokens = tuple(to_tokens(units, table)) if units is not None else (a["action_type"], EOS)
                if units is not None:
                    self.full[(family, tuple(played))][toks] += 1
                    self.prev[(family, played[-1] if played else ())][toks] += 1
                    self.fam[family][toks] += 1
                played.append(toks)

    def _fits(self, cand: Tokens, ctx: Context) -> Optional[List[str]]:
        """``cand`` as the grammar allows it here: whole for a tool action, the items whose
        pointers exist here for a submission; ``None`` when it cannot be played."""
        if cand[0] != "submit":
            prefix: List[str] = []
            for t in cand:
                if t not in allowed_tokens(prefix, ctx):
                    return None
                prefix.append(t)
            return prefix
        if "submit" not in allowed_tokens([], ctx) or cand[1] not in allowed_tokens(["submit"], ctx):
            return None
        prefix = ["submit", cand[1]]
        for item in _items(cand):
            trial = list(prefix)
            for t in item:
                if t not in allowed_tokens(trial, ctx):
                    break
                trial.append(t)
            else:
                prefix = trial
        return prefix + [EOS] if EOS in allowed_tokens(prefix, ctx) else None

    def act(self, state: List[str], ctx: Context, temperature: float = 0.0, rng: Any = None, trace: Optional[List[Any]] = None) -> List[str]:
        family, played = _history(state)
        for table, k in ((self.full, (family, tuple(played))), (self.prev, (family, played[-1] if played else ())), (self.fam, family)):
            for cand, _ in table.get(k, Counter()).most_common():  # type: ignore[attr-defined]
                fit = self._fits(cand, ctx)
                if fit is not None:
                    return fit
        return ["submit", "NEEDS_REVIEW", EOS]


def evaluate_lookup(train: Sequence[Dict[str, Any]], test: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The lookup table of the teacher's recorded training draws, scored on ``test``."""
    from .compact_lm import evaluate, replay_pairs

    episodes = replay_pairs(train)
    schema = Schema.learn([(tb, a) for ep in episodes for _, _, tb, a in ep])
    return evaluate(LookupPolicy(episodes, schema), "lookup-table", test)  # type: ignore[arg-type]

