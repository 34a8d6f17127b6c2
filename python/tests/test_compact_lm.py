"""The compact state prompt and action language (training/compact.py) and the small LM trained on
it (training/compact_lm.py): expansion round-trips the teacher's actions, copies only what the
observation's pointer table and the learned vocabulary hold (no answer injected), every action
the grammar allows expands, SFT lowers the loss (and ``lr 0`` does not move the weights), and the
LM's checks fail below the bar."""

from __future__ import annotations

import json
import random
from typing import Any, List

import pytest

from ledgershield.training import tasks
from ledgershield.training.compact import EOS, _num, Context, Schema, Table, allowed, allowed_tokens, encode, expand, to_tokens, to_units


def _teacher(set_name: str, n: int) -> List[Any]:
    return [dict(tasks.play_agent("teacher", ep, record=True), reset=ep["reset"]) for ep in tasks.episodes(set_name, n)]


def _case(case_id: str) -> Any:
    """A curated case in a fresh institution, as an episode of the pipeline's form."""
    return {"set": "case", "seed": 0, "reset": {"case_id": case_id, "fresh_institution": True}}


@pytest.fixture(scope="module")
def episodes() -> List[Any]:
    """The teacher's recorded training draws (train templates x train generators), replayed."""
    from ledgershield.training.compact_lm import replay_pairs

    eps = replay_pairs(_teacher("train", 40))
    assert len(eps) >= 30
    return eps


@pytest.fixture(scope="module")
def schema(episodes: List[Any]) -> Schema:
    return Schema.learn([(tb, a) for ep in episodes for _, _, tb, a in ep])


def _leaves(v: Any) -> List[Any]:
    if isinstance(v, dict):
        return [x for k, y in v.items() for x in _leaves(y)]
    if isinstance(v, list):
        return [x for y in v for x in _leaves(y)]
    return [v]


def _table_values(tb: Table) -> set:
    vals: List[Any] = [d for d, _ in tb.docs] + [v for _, v in tb.ids] + [k for k, _ in tb.ids]
    for r in tb.refs:
        vals += [r["doc_id"], r["page"], *r["bbox"], *r["token_ids"], Table.after(r).rstrip("~"), _num(Table.after(r))]
    return {json.dumps(v) for v in vals}  # one by one: a set would merge 2 and 2.0


def _vocab_values(schema: Schema) -> set:
    out = set()
    for fs in schema.fields.values():
        for f, kind, info in fs:
            if kind == "enum":
                out |= {json.dumps(x) for lit in info for x in _leaves(json.loads(lit))}
            elif kind == "const":
                out |= {json.dumps(x) for x in _leaves(json.loads(info))}
    for h in schema.heads:
        out |= {json.dumps(p) for p in h.replace("=", ":").split(":")}
    out |= {json.dumps(x) for x in schema.confidence.values()} | {json.dumps(x) for x in ("PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD", 0.8)}
    return out


def test_expansion_round_trips_the_teacher_actions(episodes: List[Any], schema: Schema) -> None:
    tools = same_tools = subs = 0
    for ep in episodes:
        for _obs, _led, tb, a in ep:
            c = encode(a, tb, schema)
            if c is None:
                continue
            toks = to_tokens(c, tb)
            assert to_units(toks, tb) == c  # pointers as (descriptor, ordinal) tokens and back
            assert not any(t[0] in "dkr" and t[1:].isdigit() for t in toks)
            e = expand(c, tb, schema)
            assert e["action_type"] == a["action_type"]
            if a["action_type"] != "submit_decision":
                tools += 1
                consts = {f for f, k, _ in schema.fields[a["action_type"]] if k == "const"}
                same_tools += all(e["payload"][f] == a["payload"][f] or str(e["payload"][f]).lower() == str(a["payload"][f]).lower()
                                  for f in a["payload"] if f not in consts)
                continue
            subs += 1
            p, q = a["payload"], e["payload"]
            assert q["decision"] == p["decision"]
            for f in ("reason_codes", "fraud_flags", "discrepancies", "campaign_signals"):
                assert sorted(q.get(f) or []) == sorted(p.get(f) or []), f
            assert q["policy_checks"] == (p.get("policy_checks") or {})
            for claim, ref in q["evidence_map"].items():  # every pointed claim cites what the teacher cited
                want = p["evidence_map"][claim]
                assert (sorted(ref.get("token_ids") or []) == sorted(want.get("token_ids") or [])) if "token_ids" in ref else ref == want
            assert len(q["evidence_map"]) >= 0.5 * len(p.get("evidence_map") or {}) or not p.get("evidence_map")
    assert subs == len(episodes)
    assert tools > 50 and same_tools == tools, (same_tools, tools)


def test_expansion_copies_only_table_values_and_vocabulary(episodes: List[Any], schema: Schema) -> None:
    vocab = _vocab_values(schema)
    for ep in episodes:
        for _obs, _led, tb, a in ep:
            c = encode(a, tb, schema)
            if c is None:
                continue
            e = expand(c, tb, schema)
            allowed_vals = _table_values(tb) | vocab
            for leaf in _leaves(e["payload"]):
                assert json.dumps(leaf) in allowed_vals or json.dumps(str(leaf)) in allowed_vals, (a["action_type"], leaf)
    # At reset nothing is revealed: a submission pointing at evidence cannot be expanded, so the
    # language cannot carry an answer the observation has not shown.
    obs0, led0, tb0, _ = episodes[0][0]
    assert not tb0.refs
    with pytest.raises((ValueError, IndexError)):
        expand(["submit", "HOLD", next(h for h in schema.heads if h.startswith("ev:")), "r0", EOS], tb0, schema)


def test_every_action_the_grammar_allows_expands(episodes: List[Any], schema: Schema) -> None:
    seed = random.randrange(10_000)
    print(f"grammar walk seed {seed}")
    rng = random.Random(seed)
    walks = 0
    for ep in episodes:
        played: List[List[str]] = []
        for obs, led, tb, a in ep:
            steps_left = int(obs["max_steps"]) - int(obs["step_count"])
            ctx = Context(tb, schema, played, {t for t in schema.types}, steps_left)
            for _ in range(4):
                prefix: List[str] = []
                while not prefix or prefix[-1] != EOS:
                    opts = allowed_tokens(prefix, ctx)
                    assert opts, prefix
                    prefix.append(rng.choice(opts))
                    assert len(prefix) < 400
                units = to_units(prefix, tb)
                act = expand(units, tb, schema)
                assert act["action_type"] in set(schema.types) | {"submit_decision"}
                if units[0] != "submit":  # no exact repeat while a new completion exists
                    assert tuple(units) not in ctx.played or not ctx.open_completions([units[0]])
                walks += 1
            if steps_left <= 1:
                assert allowed([], ctx) == ["submit"]
            played.append(encode(a, tb, schema) or [a["action_type"], EOS])
    assert walks > 100


def test_state_prompt_is_compact_and_names_pointers(episodes: List[Any], schema: Schema) -> None:
    from ledgershield.training.compact_lm import build_rows

    rows, info = build_rows(episodes, schema)
    assert info["rows"] > 100 and info["max_tokens"] < 1024 and info["median_tokens"] < 400
    state, act = rows[-1]
    assert state[-1] == "<act>" and state[0].startswith("task:")
    # every document and id pointer the target uses is named in its own prompt (its descriptor
    # token); OCR lines are not listed (the grammar offers them), so no line's words are there
    # but those of the actions played and the progress block's open labels
    for state, act in rows:
        assert all(t in state for t in act if t.startswith(("dt:", "key:")))
        head = state[:state.index("|did")]
        assert not any(t.startswith("lab:") for t in head), head


def test_sft_lowers_the_loss_and_lr_zero_does_not_train(episodes: List[Any], schema: Schema) -> None:
    from ledgershield.training.compact_lm import Coder, build_rows, build_vocab, make_model, sft

    torch = pytest.importorskip("torch")
    rows, _ = build_rows(episodes, schema)
    coder = Coder(build_vocab(rows, schema))
    torch.set_num_threads(2)
    m = make_model(len(coder.vocab), dim=32, layers=1, heads=2, seed=1)
    s = sft(m, coder, rows, lr=1e-2, minutes=0, max_steps=60, batch=16, log_every=1)
    losses = [h["loss"] for h in s["history"]]
    assert s["steps"] == 60 and sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5, losses
    m0 = make_model(len(coder.vocab), dim=32, layers=1, heads=2, seed=1)
    before = [p.detach().clone() for p in m0.parameters()]
    sft(m0, coder, rows, lr=0.0, minutes=0, max_steps=3, batch=16)
    assert all(torch.equal(a, b) for a, b in zip(before, m0.parameters()))


def test_label_smoothing_floors_the_sft_loss(episodes: List[Any], schema: Schema) -> None:
    from ledgershield.training.compact_lm import Coder, build_rows, build_vocab, make_model, sft

    torch = pytest.importorskip("torch")
    rows, _ = build_rows(episodes, schema)
    coder = Coder(build_vocab(rows, schema))
    torch.set_num_threads(2)
    last = {}
    for ls in (0.0, 0.2):
        m = make_model(len(coder.vocab), dim=32, layers=1, heads=2, seed=1)
        h = sft(m, coder, rows, lr=1e-2, minutes=0, max_steps=60, batch=16, log_every=1, label_smoothing=ls)["history"]
        last[ls] = sum(x["loss"] for x in h[-5:]) / 5
    # a smoothed target's cross-entropy cannot fall below the entropy of the spread share
    assert last[0.2] > last[0.0] + 0.2, last
    with pytest.raises(ValueError, match="label_smoothing"):
        sft(make_model(len(coder.vocab), dim=32, layers=1, heads=2), coder, rows, lr=1e-2, minutes=0, max_steps=1, batch=16,
            label_smoothing=1.0)


def test_step_limited_sft_spreads_its_probe_over_the_steps(episodes: List[Any], schema: Schema) -> None:
    """A step-limited SFT run (the scratch preset's) scores its held-out probe every
    ``eval_every_steps`` steps, whatever the wall time."""
    pytest.importorskip("torch")
    from ledgershield.training.compact_lm import Coder, build_rows, build_vocab, make_model, sft

    rows, _ = build_rows(episodes, schema)
    coder = Coder(build_vocab(rows, schema))
    seen: List[int] = []
    out = sft(make_model(len(coder.vocab), dim=16, layers=1, heads=2), coder, rows, lr=1e-2, minutes=0, max_steps=30, batch=8,
              eval_fn=lambda m: seen.append(1) or {"mean_score": 0.0}, eval_every_steps=10)
    assert out["steps"] == 30 and [e["step"] for e in out["evals"]] == [10, 20, 30] and len(seen) == 3
    # a step schedule (the preset's) makes the run the same on any machine, even with a minutes cap
    runs = [sft(make_model(len(coder.vocab), dim=16, layers=1, heads=2, seed=3), coder, rows, lr=1e-2, minutes=8, max_steps=12, batch=8,
                log_every=1, schedule_steps=36)["history"] for _ in range(2)]
    assert [h["loss"] for h in runs[0]] == [h["loss"] for h in runs[1]] and len(runs[0]) == 12


def test_group_advantages_floor_damps_rounding_sized_differences() -> None:
    from ledgershield.training.compact_lm import group_advantages

    tiny = [0.800, 0.801, 0.800, 0.801]
    big = [0.2, 0.9, 0.2, 0.9]
    assert abs(group_advantages(tiny)).max() > 0.99  # unfloored: a 0.001 difference weighs like a full one
    assert abs(group_advantages(tiny, 0.1)).max() < 0.006
    assert group_advantages(big, 0.1) == pytest.approx(group_advantages(big))  # std 0.35 is above the floor
    assert group_advantages(big).sum() == pytest.approx(0.0, abs=1e-9)
    assert (group_advantages([0.5] * 4, 0.1) == 0).all()


def test_batched_token_logps_match_one_step_at_a_time(episodes: List[Any], schema: Schema) -> None:
    """The RL update scores recorded steps in padded batches; each chosen token's log-probability
    (renormalised over the grammar's allowed tokens at the sampling temperature) equals the
    one-sequence computation, whatever the chunk size."""
    torch = pytest.importorskip("torch")
    import numpy as np

    from ledgershield.training.compact_lm import Coder, Decoder, build_rows, build_vocab, make_model, play_episode, token_logps

    rows, _ = build_rows(episodes, schema)
    coder = Coder(build_vocab(rows, schema))
    trace: List[Any] = []
    for _ in range(20):  # an untrained model may submit at once: sample until an episode has steps to compare
        dec = Decoder(make_model(len(coder.vocab), dim=32, layers=1, heads=2, seed=random.randrange(1000)), coder, schema)
        trace = []
        play_episode(dec, _case("CASE-D-001"), 1.5, np.random.default_rng(random.randrange(1000)), trace)
        if len(trace) >= 2:
            break
    assert len(trace) >= 2
    with torch.no_grad():
        for chunk in (1, 3, 64):
            got = token_logps(dec.model, trace, 1.5, chunk)
            assert len(got) == len(trace)
            for (sid, chosen), lp in zip(trace, got):
                logits = dec.model(torch.tensor([sid + [oid[k] for oid, k in chosen[:-1]]]))[0, len(sid) - 1:]
                ref = torch.stack([torch.log_softmax(logits[j, torch.tensor(oid)] / 1.5, -1)[k] for j, (oid, k) in enumerate(chosen)])
                assert torch.allclose(ref, lp, atol=1e-5)


def test_clipped_update_moves_toward_the_advantage_and_stays_in_the_clip(episodes: List[Any], schema: Schema) -> None:
    """A positive advantage raises the chosen tokens' probability, a negative one lowers it; over
    several epochs on the same episodes the clip stops the ratio running away (a plain policy
    gradient at the same rate moves a token much further); ``epochs 0`` is refused."""
    torch = pytest.importorskip("torch")
    import numpy as np

    from ledgershield.training.compact_lm import Coder, Decoder, build_rows, build_vocab, grpo, make_model, play_episode, policy_update, token_logps

    rows, _ = build_rows(episodes, schema)
    coder = Coder(build_vocab(rows, schema))
    seed = random.randrange(1000)
    trace: List[Any] = []
    play_episode(Decoder(make_model(len(coder.vocab), dim=32, layers=1, heads=2, seed=seed), coder, schema), _case("CASE-B-001"), 2.0,
                 np.random.default_rng(seed), trace)

    def mean_lp(model: Any) -> float:
        with torch.no_grad():
            return float(torch.cat(token_logps(model, trace, 2.0)).mean())

    moved = {}
    for a, epochs, clip in ((1.0, 1, 0.2), (-1.0, 1, 0.2), (1.0, 8, 0.05), (1.0, 8, 0.99)):
        model = make_model(len(coder.vocab), dim=32, layers=1, heads=2, seed=seed)
        before = mean_lp(model)
        policy_update(model, torch.optim.Adam(model.parameters(), lr=3e-3), [(a, trace)], 2.0, epochs, clip)
        moved[(a, epochs, clip)] = mean_lp(model) - before
    assert moved[(1.0, 1, 0.2)] > 0 > moved[(-1.0, 1, 0.2)]
    assert moved[(1.0, 8, 0.99)] > moved[(1.0, 8, 0.05)] > 0
    with pytest.raises(ValueError, match="epochs"):
        grpo(Decoder(make_model(len(coder.vocab), dim=32, layers=1, heads=2), coder, schema), tasks.episodes("train", 1), 1, 2, 1, 1.0, 1e-3, 0, epochs=0)


def test_the_sets_are_the_task_distributions_splits_and_disjoint() -> None:
    """Every set draws from its own template / generator split (``_native.TEMPLATE_SPLITS``,
    ``GENERATOR_SPLITS``), and no two sets share an episode."""
    from ledgershield import _native

    t_split, g_split = dict(_native.TEMPLATE_SPLITS), dict(_native.GENERATOR_SPLITS)
    seen: set = set()
    for name, (ts, gs) in tasks.SETS.items():
        eps = tasks.episodes(name, 6)
        keys = {tasks.key(e) for e in eps}
        assert not keys & seen
        seen |= keys
        for rec in (tasks.play_agent("naive-pay", e) for e in eps):
            assert g_split[rec["generator"]] == gs, (name, rec)
            if rec["generator"] != "fraudgen":
                assert t_split[rec["template"]] == ts, (name, rec)
    # RL's training draws are other seeds of the train set
    assert not {tasks.key(e) for e in tasks.episodes("train", 3, tasks.RL_SEED_OFFSET)} & seen


def test_macro_means_weigh_every_template_and_generator_alike() -> None:
    rows = [{"set": "test_templates", "template": "T1", "generator": "curated", "final_score": s} for s in (1.0, 1.0, 1.0)]
    rows += [{"set": "test_templates", "template": "T2", "generator": "curated", "final_score": 0.0}]
    rows += [{"set": "test_generators", "template": "T3", "generator": "holdout", "final_score": 0.5}]
    r = tasks.report(rows)
    assert r["macro_templates"] == 0.5 and r["macro_generators"] == 0.5 and r["macro"] == 0.5
    assert r["per_template"] == {"T1": 1.0, "T2": 0.0} and r["mean"] == 0.7
    per = {f"e{i}": dict(x, set=x["set"]) for i, x in enumerate(rows)}
    vals = {k: v["final_score"] for k, v in per.items()}
    assert tasks.macro_of(vals, per) == 0.5
    lo, hi = tasks.macro_ci(vals, per)
    assert lo <= 0.5 <= hi


def test_lookup_table_replays_the_commonest_training_action(episodes: List[Any], schema: Schema) -> None:
    """The lookup table counts the teacher's actions by (family, history) and plays whole test
    episodes under the grammar, every step accepted."""
    from ledgershield.training.compact_lm import evaluate
    from ledgershield.training.lookup import LookupPolicy

    pol = LookupPolicy(episodes, schema)
    first = {fam: c.most_common(1)[0][0][0] for (fam, hist), c in pol.full.items() if not hist}
    assert first and set(first.values()) <= {"lookup_policy", "ocr", "inspect_email_thread", "lookup_vendor"} | set(schema.types)
    assert sum(sum(c.values()) for (_, hist), c in pol.full.items() if not hist) == len(episodes)
    r = evaluate(pol, "lookup-table", tasks.episodes("test_templates", 3) + tasks.episodes("test_generators", 3))  # type: ignore[arg-type]
    assert r["episodes"] == 6 and r["parse_success"] == 1.0 and 0.0 <= r["macro"] <= 1.0


def test_constrained_decoding_plays_and_submits(episodes: List[Any], schema: Schema) -> None:
    pytest.importorskip("torch")
    from ledgershield.training.compact_lm import Coder, Decoder, build_rows, build_vocab, make_model, play_episode

    rows, _ = build_rows(episodes, schema)
    coder = Coder(build_vocab(rows, schema))
    dec = Decoder(make_model(len(coder.vocab), dim=32, layers=1, heads=2), coder, schema)
    ep = play_episode(dec, tasks.episodes("test_templates", 1)[0])
    assert ep["submitted"] and ep["refused"] == 0 and 0.0 <= ep["final_score"] <= 1.0


def test_lm_checks_fail_below_the_bar() -> None:
    from ledgershield.training.pipeline import compact_checks

    st = {"best_scripted": 0.11}
    cfg = {"margin": 0.3, "min_parse": 0.95, "min_lm_score": 0.5}
    ok = {"test_episodes": 48, "sft_held_out": 0.6, "sft_parse_success_under_constraint": 1.0, "rl": {"zero_variance_share": [0.3, 0.5, 0.2]}}
    assert all(compact_checks(cfg, ok, st).values())
    low = dict(ok, sft_held_out=0.3)
    assert not compact_checks(cfg, low, st)["lm_beats_best_scripted"]
    assert not compact_checks(cfg, low, st)["lm_reaches_min_score"]
    # 0.45 is 0.34 above the best scripted baseline but under the 0.5 bar
    assert compact_checks(cfg, dict(ok, sft_held_out=0.45), st)["lm_beats_best_scripted"]
    assert not compact_checks(cfg, dict(ok, sft_held_out=0.45), st)["lm_reaches_min_score"]
    assert not compact_checks(cfg, dict(ok, sft_parse_success_under_constraint=0.9), st)["lm_parse_success"]
    assert not compact_checks(cfg, dict(ok, rl={"zero_variance_share": [0.3, 1.0, 0.2]}), st)["lm_rl_groups_have_variance"]
    assert not compact_checks(cfg, dict(ok, rl={"zero_variance_share": []}), st)["lm_rl_groups_have_variance"]


def test_optional_fields_and_the_instructions_vendor_are_expressible(episodes: List[Any], schema: Schema) -> None:
    from ledgershield.training.compact import instruction_vendor

    # lookup_policy is played with and without a rule id: both are expressible ("null" leaves the
    # field out), so the step every teacher episode takes is trained.
    (f, kind, info), = schema.fields["lookup_policy"]
    assert (f, kind) == ("rule_id", "enum") and "null" in info
    tb = episodes[0][0][2]
    assert expand(["lookup_policy", "rule_id=null", EOS], tb, schema) == {"action_type": "lookup_policy", "payload": {}}
    with pytest.raises(ValueError):
        expand(["lookup_policy", "rule_id=\"no-such-rule\"", EOS], tb, schema)
    # lookup_vendor takes the vendor the instruction names (a pointer, not a constant)
    assert [k for f, k, _ in schema.fields["lookup_vendor"]] == ["k"]
    assert instruction_vendor("Review invoice(s) INV-1 and email E-1 from Juniper Field Fasteners Inc. Inspect the thread.") == "Juniper Field Fasteners Inc"
    assert instruction_vendor("Review invoice(s) INV-1.") is None and instruction_vendor("Investigate from X. Y") is None
    played = skipped = 0
    for ep in episodes:
        for _obs, _led, tb, a in ep:
            if a["action_type"] in ("lookup_policy", "lookup_vendor"):
                c = encode(a, tb, schema)
                skipped += c is None
                played += 1
                if c is not None:
                    assert expand(c, tb, schema)["payload"] == a["payload"] or a["action_type"] == "lookup_vendor"
    assert played > 20 and skipped <= 0.2 * played, (skipped, played)


def test_rl_improvement_is_claimed_only_outside_the_noise() -> None:
    from ledgershield.training.compact_lm import improvement_verdict, paired_delta

    before = {"per_case": {f"c{i}": 0.5 for i in range(40)}}
    up = {"per_case": {f"c{i}": 0.5 + (0.1 if i % 2 else 0.0) for i in range(40)}}
    noise = {"per_case": {f"c{i}": 0.5 + (0.2 if i % 2 else -0.2) for i in range(40)}}
    lo, hi = paired_delta(before, up)
    assert 0 < lo <= 0.05 <= hi
    lo2, hi2 = paired_delta(before, noise)
    assert lo2 < 0 < hi2
    assert improvement_verdict([0.05, 0.05, 0.05], [(lo, hi)] * 3)["claimed"]
    assert not improvement_verdict([0.05, 0.0, 0.05], [(lo, hi), (lo2, hi2), (lo, hi)])["claimed"]
    assert not improvement_verdict([0.1, -0.05, 0.1], [(lo, hi)] * 3)["claimed"]  # spread larger than half the mean gain
    assert not improvement_verdict([], [])["claimed"]
    assert not improvement_verdict([0.003, 0.003, 0.003], [(0.001, 0.005)] * 3)["claimed"]  # outside the noise but immaterial


def test_progress_block_counts_what_the_episode_shows(episodes: List[Any], schema: Schema) -> None:
    """The block before ``<act>`` repeats the task family and counts only what the prompt's own
    ``|did`` list and table show: per action type the actions played, and per argument label (a
    field of the Rust ledger's line classes) the values no action took yet."""
    from collections import Counter

    from ledgershield import _native
    from ledgershield.training.compact_lm import build_rows

    rows, _ = build_rows(episodes, schema)
    fields = {f"lab:{c}" for c in _native.LEDGER_LINE_CLASSES}
    assert schema.arg_labels and set(schema.arg_labels) <= fields
    opened = 0
    for state, act in rows:
        now = state[state.index("|now"):-1]
        assert state[-1] == "<act>" and now[1] == state[0]
        did = state[state.index("|did") + 1:state.index("|now")]
        played: Counter = Counter()
        first = True
        for t in did:
            if first:
                played[t] += 1
            first = t == ";"
        assert {t for t in now if t.startswith("did:")} == {f"did:{a}={min(n, 4)}" for a, n in played.items()}
        opens = [t for t in now if t.startswith("open:")]
        assert all(t[len("open:"):].split("=")[0] in schema.arg_labels for t in opens), opens
        opened += bool(opens)
    assert opened > 0


def test_line_descriptors_are_the_ledgers_fields_and_relations(episodes: List[Any]) -> None:
    """A line is named by the field the Rust ledger reads it as and its first relation, never by
    its words: a vendor's letterhead or an item's name cannot identify a training case."""
    from ledgershield.training.compact import line_descriptors, state_tokens

    allowed = set(line_descriptors())
    seen: set = set()
    for ep in episodes:
        obs, led, tb, _ = ep[-1]
        descs = {tb.desc[f"r{i}"][0] for i in range(len(tb.refs))}
        labs = {t for t in state_tokens(obs, led, [], tb) if t.startswith("lab:")}
        assert descs <= allowed and labs <= allowed, (descs - allowed, labs - allowed)
        seen |= descs
    assert {"lab:total", "lab:po_id", "lab:vendor_name"} <= {d.split("~")[0] for d in seen}
    # a pointer to a line resolves back to that line
    ep = max(episodes, key=lambda e: len(e[-1][2].refs))
    tb = ep[-1][2]
    for i in range(len(tb.refs)):
        assert to_units(to_tokens([f"r{i}"], tb), tb) == [f"r{i}"]


def test_jobs_run_in_subprocesses(tmp_path: Any, episodes: List[Any], schema: Schema) -> None:
    """RL and evaluation jobs run in subprocesses on task draws (any process replays any draw):
    an RL job saves a checkpoint that loads, an eval job scores its episodes, and a failing job
    raises instead of returning nothing."""
    pytest.importorskip("torch")
    from ledgershield.training.compact_lm import Coder, Decoder, build_rows, build_vocab, in_processes, load, make_model, save

    rows, _ = build_rows(episodes, schema)
    coder = Coder(build_vocab(rows, schema))
    save(Decoder(make_model(len(coder.vocab), dim=32, layers=1, heads=2), coder, schema), tmp_path / "m")
    val = tasks.episodes("validation_templates", 1)
    rl = {"init": str(tmp_path / "m"), "episodes": tasks.episodes("train", 2, tasks.RL_SEED_OFFSET), "out": str(tmp_path / "rl"),
          "iterations": 1, "group": 2, "batch": 1, "temperature": 1.0, "lr": 1e-4, "seed": 0, "reward": "dense", "validation": val}
    ev = {"checkpoint": str(tmp_path / "m"), "label": "probe", "episodes": tasks.episodes("test_generators", 2)}
    got_rl, got_ev = in_processes([("rl", rl), ("eval", ev)], tmp_path / "work")
    assert got_rl["train_episodes"] == 2 and got_rl["reward"] == "dense" and len(got_rl["history"]) == 1
    assert got_rl["validation"]["episodes"] == 1
    assert load(tmp_path / "rl").coder.vocab == coder.vocab
    assert got_ev["episodes"] == 2 and 0.0 <= got_ev["macro"] <= 1.0
    with pytest.raises(RuntimeError, match="failed"):
        in_processes([("eval", dict(ev, checkpoint=str(tmp_path / "no-such-model")))], tmp_path / "work")


def test_step_advantages_credit_each_step_with_what_followed_it() -> None:
    """``score`` and ``return`` give every step of an episode its group advantage; ``dense``
    gives each step its reward-to-go against the group's mean return, so a costly step is
    blamed and the steps after it are not."""
    import numpy as np

    from ledgershield.training.compact_lm import step_advantages

    runs = [{"final_score": 0.9, "rewards": [-0.01, -0.01, 0.92]}, {"final_score": 0.1, "rewards": [-0.01, -0.5, 0.61]}]
    score = step_advantages(runs, "score")
    assert all(len(a) == 3 for a in score) and len(set(score[0])) == 1 and score[0][0] > 0 > score[1][0]
    ret = step_advantages(runs, "return")
    assert ret[0][0] > 0 > ret[1][0]
    dense = step_advantages(runs, "dense")
    assert np.allclose(dense[0], [1.0, 1.025, 1.05], atol=1e-3) and np.allclose(dense[1], [-1.0, -0.975, 0.275], atol=1e-3)
    assert dense[1][2] > 0 > dense[1][1]  # the last step of the worse episode did well; the costly one did not
    flat = [{"final_score": 0.5, "rewards": [0.1, 0.4]}, {"final_score": 0.5, "rewards": [0.2, 0.3]}]
    assert all(not a.any() for r in ("score", "return", "dense") for a in step_advantages(flat, r))
    with pytest.raises(ValueError, match="reward"):
        step_advantages(runs, "advantage")
