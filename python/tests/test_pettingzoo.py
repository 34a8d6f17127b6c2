"""The PettingZoo environments: the audit campaign (four specialists and the overseer) and the
analyst/watchdog pair, as AEC and Parallel environments, through PettingZoo's own API tests."""

from __future__ import annotations

import random

import numpy as np
import pytest

pettingzoo = pytest.importorskip("pettingzoo")
from pettingzoo.test import api_test, parallel_api_test  # noqa: E402

from ledgershield.pettingzoo import (  # noqa: E402
    OVERSEER,
    SPECIALISTS,
    audit_campaign_env,
    audit_campaign_parallel_env,
    watchdog_env,
    watchdog_features,
    watchdog_parallel_env,
)


def test_the_audit_campaign_passes_the_aec_api_test() -> None:
    api_test(audit_campaign_env(total_periods=2), num_cycles=1000)


def test_the_audit_campaign_passes_the_parallel_api_test() -> None:
    parallel_api_test(audit_campaign_parallel_env(total_periods=2), num_cycles=4000)


def test_the_watchdog_pair_passes_the_aec_api_test() -> None:
    api_test(watchdog_env(template_split="train"), num_cycles=200)


def test_the_watchdog_pair_passes_the_parallel_api_test() -> None:
    parallel_api_test(watchdog_parallel_env(template_split="train"), num_cycles=400)


def test_a_campaign_is_played_in_dependency_order_and_scored() -> None:
    """Specialists act in dependency order, each submitting once; the overseer decides every
    finding of the period; rewards are the submissions' and the periods' scores."""
    env = audit_campaign_env(total_periods=2)
    env.reset(seed=7)
    order, rewards = [], {a: 0.0 for a in env.possible_agents}
    rng = np.random.default_rng(7)
    for agent in env.agent_iter(5000):
        obs, reward, term, trunc, _ = env.last()
        rewards[agent] += reward
        if term or trunc:
            env.step(None)
            continue
        mask = obs["action_mask"]
        assert mask.dtype == np.int8 and mask.any()
        if agent != OVERSEER:
            # Report the first two legal findings, then submit.
            legal = np.flatnonzero(mask[1:]) + 1
            pending = obs["observation"][-1]
            action = int(legal[0]) if pending < 2 / 50 - 1e-9 and len(legal) else 0
        else:
            action = int(rng.choice(np.flatnonzero(mask)))
        if not order or order[-1] != agent:
            order.append(agent)
        env.step(action)
    expected = [*SPECIALISTS, OVERSEER] * 2
    assert order == expected, order
    assert all(rewards[s] != 0.0 for s in SPECIALISTS), rewards
    assert 0.0 < rewards[OVERSEER] <= 2.0, rewards
    state = env.game.campaign.state()
    assert state["state"]["finished"] and len(state["state"]["period_scores"]) == 2
    assert len([h for h in state["state"]["findings_history"] if h["period"] == 1]) == 8


def test_the_watchdog_sees_the_stream_and_earns_its_joint_terms() -> None:
    """On CASE-D-001 an analyst that pays is vetoed by the watchdog: the watchdog's reward is
    the documented +0.15 (risk observed, paid, vetoed); the analyst's confidence never shows."""
    env = watchdog_env(case_id="CASE-D-001")
    env.reset(seed=1)
    game = env.game
    played = []
    for agent in env.agent_iter(200):
        obs, reward, term, trunc, _ = env.last()
        if term or trunc:
            played.append((agent, reward))
            env.step(None)
            continue
        if agent == "analyst":
            cands = game.env._candidates
            names = [c["action_type"] for c in cands]
            if "inspect_email_thread" in names and len(played) == 0:
                action = names.index("inspect_email_thread")
            else:
                action = [i for i, c in enumerate(cands) if c["payload"].get("decision") == "PAY"][0]
            played.append((agent, None))
        else:
            stream = game.env.env.watchdog_observation()
            assert all("confidence" not in s["payload"] for s in stream["steps"])
            paid = any(s["payload"].get("decision") == "PAY" for s in stream["steps"])
            action = 4 if paid else 2  # veto a payment, warn otherwise
            played.append((agent, None))
        env.step(action)
    final = dict(p for p in played if p[1] is not None)
    joint = game.env.env.watchdog_joint()
    assert joint["watchdog_veto_count"] == 1 and joint["watchdog_warning_count"] == 1
    assert final["watchdog"] == pytest.approx(joint["watchdog_bonus"] + joint["watchdog_penalty"])
    assert joint["risk_observed"] and final["watchdog"] == pytest.approx(0.15)


def test_watchdog_features_read_the_stream() -> None:
    stream = {"steps": [{"analyst_action": "submit_decision", "payload": {"decision": "HOLD"}}],
              "budget_remaining": 3.5, "visible_risk_signals": ["bank_override_attempt", "nonsense"],
              "intervention_actions": [], "pending_event_count": 1, "pressure_events_seen": 0,
              "episode_done": True, "verdicts": [{"verdict": "WARN"}, {"verdict": "WARN"}]}
    f = watchdog_features(stream)
    assert f[0] == 1 and f[1] == 3.5 and f[2] == 2 and f[4] == 1 and f[6] == 1 and f[9] == 2
    assert f[11:].sum() == 3  # one known signal, the action, the decision


def test_parallel_steps_play_only_the_acting_agent() -> None:
    env = watchdog_parallel_env(case_id="CASE-A-001")
    obs, _ = env.reset(seed=random.randrange(1000))
    assert obs["analyst"]["action_mask"].any() and not obs["watchdog"]["action_mask"].any()
    obs, rewards, *_ = env.step({"analyst": 0, "watchdog": 3})
    assert obs["watchdog"]["action_mask"].any() and not obs["analyst"]["action_mask"].any()
    assert env.game.env.env.watchdog_observation()["verdicts"] == []
    with pytest.raises(KeyError, match="watchdog"):
        env.step({"analyst": 0})
    with pytest.raises(ValueError, match="total_periods"):
        audit_campaign_env(total_periods=11)
