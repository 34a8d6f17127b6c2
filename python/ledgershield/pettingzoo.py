"""PettingZoo environments over the in-process environments (``pip install pettingzoo``).

Two turn-based games, each as an AEC environment and as a Parallel environment:

* :func:`audit_campaign_env` / :func:`audit_campaign_parallel_env`: a Financial Audit campaign
  (``native.AuditCampaignEnv``) played by the four specialists and the overseer. Each period the
  specialists play in dependency order (expense, invoice, GST, fraud): on its turn a specialist
  either adds one candidate finding of its episode to its list (an index into the candidates
  the audit environment lists, submit-final first) or, with index 0, submits the list as its
  final answer (one campaign submission; at most ``max_findings_per_step`` findings, after which
  only index 0 is legal). Then the overseer decides the period's findings one turn each (0 leave
  undecided, 1 approve, 2 reject, 3 escalate; a period without findings gives it one turn with
  only 0 legal), its review is filed and the period advances. Rewards: a specialist gets its
  submission's reward, the overseer the period's score. The campaign ends after
  ``total_periods`` (at most 10: the campaign budget pays 40 submissions).
* :func:`watchdog_env` / :func:`watchdog_parallel_env`: the analyst/watchdog pair of
  docs/watchdog.md in process: the analyst plays a ControlBench episode (the Gymnasium env's
  array observation without its mask, flattened, and its candidate actions), the watchdog gets a turn after each analyst step (0 no
  verdict, 1 approve, 2 warn, 3 escalate, 4 veto), reading the filtered watchdog stream (never
  the analyst's confidence or hidden state), including one last turn after the analyst's final
  step. The analyst's rewards are its environment rewards; the watchdog's is its joint-score
  terms (bonus + penalty of ``watchdog_joint``) once the analyst's submission is graded.

Every agent's observation is ``{"observation": ..., "action_mask": ...}``; the mask (int8) is
all zeros when it is not the agent's turn. In the Parallel environments every live agent sends
an action each step and only the acting agent's (the one whose mask has a legal entry) is
played. Both pass PettingZoo's ``api_test`` and ``parallel_api_test`` (tested).
"""

from __future__ import annotations

import abc
import functools
import json
from typing import Any, Dict, List, Optional

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv

from . import _native, native
from .gym_envs import ControlBenchGymEnv

SPECIALISTS = ("expense_specialist", "invoice_specialist", "gst_specialist", "fraud_specialist")
OVERSEER = "overseer"
OVERSEER_VERDICTS = (None, "approve", "reject", "escalate")
WATCHDOG_VERDICTS = (None, "approve", "warn", "escalate", "veto")
# The campaign budget (100) pays 40 submissions of 2.5: four specialists a period.
MAX_CAMPAIGN_PERIODS = 10


def _box(n: int) -> spaces.Box:
    return spaces.Box(-np.inf, np.inf, (n,), np.float32)


def _mask(n: int, legal: Optional[np.ndarray] = None) -> np.ndarray:
    m = np.zeros(n, dtype=np.int8)
    if legal is not None:
        m[: len(legal)] = legal
    return m


class TurnGame(abc.ABC):
    """A turn-based game: one agent acts at a time."""

    possible_agents: List[str]
    done: bool

    @abc.abstractmethod
    def observation_space(self, agent: str) -> spaces.Space: ...

    @abc.abstractmethod
    def action_space(self, agent: str) -> spaces.Space: ...

    @abc.abstractmethod
    def reset(self, seed: Optional[int]) -> None: ...

    @abc.abstractmethod
    def acting(self) -> str:
        """The agent whose turn it is (any agent once the game is over)."""

    @abc.abstractmethod
    def observe(self, agent: str) -> Dict[str, Any]:
        """``{"observation", "action_mask"}``; the mask is zeros unless it is ``agent``'s turn."""

    @abc.abstractmethod
    def act(self, agent: str, action: Any) -> Dict[str, float]:
        """Play ``agent``'s move; the rewards it gave."""


class TurnAECEnv(AECEnv):
    """A :class:`TurnGame` as a PettingZoo AEC environment."""

    metadata = {"render_modes": [], "is_parallelizable": True}

    def __init__(self, game: TurnGame, name: str) -> None:
        super().__init__()
        self.game = game
        self.metadata = {**type(self).metadata, "name": name}
        self.possible_agents = list(game.possible_agents)
        self.render_mode = None

    def observation_space(self, agent: str) -> spaces.Space:
        return self.game.observation_space(agent)

    def action_space(self, agent: str) -> spaces.Space:
        return self.game.action_space(agent)

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None) -> None:
        self.game.reset(seed)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos: Dict[str, Dict[str, Any]] = {a: {} for a in self.agents}
        self.agent_selection = self.game.acting()

    def observe(self, agent: str) -> Dict[str, Any]:
        return self.game.observe(agent)

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        gained = self.game.act(agent, action)
        self.rewards = {a: float(gained.get(a, 0.0)) for a in self.agents}
        if self.game.done:
            self.terminations = {a: True for a in self.agents}
            self.agent_selection = self.agents[0]
        else:
            self.agent_selection = self.game.acting()
        self._accumulate_rewards()

    def render(self) -> None:
        return None

    def close(self) -> None:
        pass


class TurnParallelEnv(ParallelEnv):
    """A :class:`TurnGame` as a PettingZoo Parallel environment: every live agent sends an
    action each step; the acting agent's is played, the others' are ignored."""

    metadata = {"render_modes": []}

    def __init__(self, game: TurnGame, name: str) -> None:
        self.game = game
        self.metadata = {**type(self).metadata, "name": name}
        self.possible_agents = list(game.possible_agents)
        self.agents: List[str] = []
        self.render_mode = None

    def observation_space(self, agent: str) -> spaces.Space:
        return self.game.observation_space(agent)

    def action_space(self, agent: str) -> spaces.Space:
        return self.game.action_space(agent)

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None):
        self.game.reset(seed)
        self.agents = list(self.possible_agents)
        return {a: self.game.observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: Dict[str, Any]):
        agent = self.game.acting()
        if agent not in actions:
            raise KeyError(f"it is {agent}'s turn: the actions must include {agent!r}")
        gained = self.game.act(agent, actions[agent])
        live = list(self.agents)
        obs = {a: self.game.observe(a) for a in live}
        rewards = {a: float(gained.get(a, 0.0)) for a in live}
        done = self.game.done
        terminations = {a: done for a in live}
        truncations = {a: False for a in live}
        infos: Dict[str, Dict[str, Any]] = {a: {} for a in live}
        if done:
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def render(self) -> None:
        return None

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------------------------
# The audit campaign.
# --------------------------------------------------------------------------------------------

SPECIALIST_FEATURES = native.AUDIT_FEATURES + 3
ERROR_TYPES: List[str] = list(_native.AUDIT_ERROR_TYPES)
OVERSEER_FEATURES = 10 + len(ERROR_TYPES)


class AuditCampaignGame(TurnGame):
    """The audit campaign as a turn-based game (see the module docstring)."""

    possible_agents = [*SPECIALISTS, OVERSEER]

    def __init__(self, total_periods: int = 5, max_findings_per_step: int = 50) -> None:
        if not 1 <= int(total_periods) <= MAX_CAMPAIGN_PERIODS:
            raise ValueError(f"total_periods must be between 1 and {MAX_CAMPAIGN_PERIODS} (the campaign budget pays four submissions a period for ten periods)")
        self.total_periods = int(total_periods)
        self.max_findings = int(max_findings_per_step)
        self.campaign = native.AuditCampaignEnv(self.max_findings)
        self.done = True

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent: str) -> spaces.Space:
        if agent == OVERSEER:
            return spaces.Dict({"observation": _box(OVERSEER_FEATURES), "action_mask": spaces.MultiBinary(len(OVERSEER_VERDICTS))})
        return spaces.Dict({"observation": _box(SPECIALIST_FEATURES), "action_mask": spaces.MultiBinary(native.AUDIT_MAX_CANDIDATES)})

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(len(OVERSEER_VERDICTS) if agent == OVERSEER else native.AUDIT_MAX_CANDIDATES)

    def reset(self, seed: Optional[int]) -> None:
        self._note(self.campaign.start(seed=0 if seed is None else int(seed), total_periods=self.total_periods,
                                       campaign_id="pettingzoo"))
        self.done = False
        self._start_period()

    def _note(self, reply: Dict[str, Any]) -> Dict[str, Any]:
        """Keep the period and budget a campaign reply shows."""
        obs = reply.get("observation") or {}
        self.period = int(obs.get("current_period", getattr(self, "period", 1)))
        self.budget = float(obs.get("budget_remaining", getattr(self, "budget", 100.0)))
        return reply

    def _start_period(self) -> None:
        self.turn = 0  # index into possible_agents
        self.queue: List[Dict[str, Any]] = []
        self.decisions: List[Dict[str, Any]] = []
        self._open_task()

    def _open_task(self) -> None:
        role = SPECIALISTS[self.turn]
        self._note(self.campaign.task_start(role=role))
        f, m, text = self.campaign._c.role_view(role)
        self.features = np.frombuffer(f, dtype=np.float32).copy()
        self.legal = np.frombuffer(m, dtype=np.uint8).astype(np.int8)
        self.candidates: List[Dict[str, Any]] = json.loads(text)
        self.pending: List[Dict[str, Any]] = []

    def acting(self) -> str:
        return self.possible_agents[min(self.turn, len(SPECIALISTS))]

    def observe(self, agent: str) -> Dict[str, Any]:
        mine = not self.done and agent == self.acting()
        if agent == OVERSEER:
            obs = self._overseer_features() if mine else np.zeros(OVERSEER_FEATURES, dtype=np.float32)
            legal = np.array([1, 0, 0, 0] if not self.queue else [1, 1, 1, 1], dtype=np.int8)
            return {"observation": obs, "action_mask": _mask(len(OVERSEER_VERDICTS), legal if mine else None)}
        if not mine:
            return {"observation": np.zeros(SPECIALIST_FEATURES, dtype=np.float32),
                    "action_mask": _mask(native.AUDIT_MAX_CANDIDATES)}
        legal = self.legal.copy()
        if len(self.pending) >= self.max_findings:
            legal[1:] = 0
        extra = [self.period / self.total_periods, self.budget / 100.0, len(self.pending) / self.max_findings]
        return {"observation": np.concatenate([self.features, np.array(extra, dtype=np.float32)]),
                "action_mask": legal}

    def act(self, agent: str, action: Any) -> Dict[str, float]:
        if self.done or agent != self.acting():
            raise ValueError(f"it is not {agent}'s turn")
        if agent == OVERSEER:
            return self._overseer_move(int(action))
        a = int(action)
        legal = self.observe(agent)["action_mask"]
        if not (0 <= a < len(legal) and legal[a]):
            raise ValueError(f"action {a} is not legal for {agent} now (see its action_mask)")
        if a > 0:
            self.pending.append(self.candidates[a]["findings"][0])
            self.legal[a] = 0
            return {}
        reply = self._note(self.campaign.task_submit(role=agent, findings=self.pending, submit_final=True))
        self.turn += 1
        if self.turn < len(SPECIALISTS):
            self._open_task()
        else:
            self._open_review()
        return {agent: float(reply["reward"])}

    def _open_review(self) -> None:
        state = self.campaign.state()["state"]
        p = state["current_period"]
        history = [h for h in state["findings_history"] if h["period"] == p]
        docs: Dict[str, set] = {}
        for h in history:
            docs.setdefault(h["document_id"], set()).add(h["role"])
        self.queue = [dict(h, agreement=len(docs[h["document_id"]])) for h in history]
        self.position = 0

    def _overseer_features(self) -> np.ndarray:
        f = np.zeros(OVERSEER_FEATURES, dtype=np.float32)
        f[0] = self.period / self.total_periods
        f[1] = self.budget / 100.0
        f[2] = len(self.queue)
        f[3] = self.position
        if self.position < len(self.queue):
            h = self.queue[self.position]
            if h["role"] in SPECIALISTS:
                f[4 + SPECIALISTS.index(h["role"])] = 1.0
            f[8] = float(h.get("confidence") or 0.0)
            f[9] = h["agreement"]
            if h["error_type"] in ERROR_TYPES:
                f[10 + ERROR_TYPES.index(h["error_type"])] = 1.0
        return f

    def _overseer_move(self, a: int) -> Dict[str, float]:
        legal = self.observe(OVERSEER)["action_mask"]
        if not (0 <= a < len(legal) and legal[a]):
            raise ValueError(f"action {a} is not legal for the overseer now (see its action_mask)")
        if self.position < len(self.queue):
            h = self.queue[self.position]
            if OVERSEER_VERDICTS[a] is not None:
                self.decisions.append({"finding_ref": f"{h['role']}:{h['document_id']}:{h['error_type']}",
                                       "verdict": OVERSEER_VERDICTS[a]})
            self.position += 1
            if self.position < len(self.queue):
                return {}
        self.campaign.review(decisions=self.decisions)
        reply = self._note(self.campaign.advance())
        reward = float((reply.get("period_score") or {}).get("score", 0.0))
        if reply["status"] == "completed" or self.campaign.finished:
            self.done = True
        else:
            self._start_period()
        return {OVERSEER: reward}


def audit_campaign_env(total_periods: int = 5, max_findings_per_step: int = 50) -> TurnAECEnv:
    """The audit campaign as a PettingZoo AEC environment (four specialists and the overseer)."""
    return TurnAECEnv(AuditCampaignGame(total_periods, max_findings_per_step), "ledgershield_audit_campaign_v0")


def audit_campaign_parallel_env(total_periods: int = 5, max_findings_per_step: int = 50) -> TurnParallelEnv:
    """The audit campaign as a PettingZoo Parallel environment (turn-based: see the module)."""
    return TurnParallelEnv(AuditCampaignGame(total_periods, max_findings_per_step), "ledgershield_audit_campaign_v0")


# --------------------------------------------------------------------------------------------
# The analyst and its watchdog.
# --------------------------------------------------------------------------------------------

REASON_CODES: List[str] = list(_native.REASON_CODES)
ACTION_NAMES: List[str] = list(_native.ACTION_NAMES)
DECISIONS = ("PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD")
VERDICT_KINDS = ("veto", "escalate", "warn", "approve")
WATCHDOG_FEATURES = 11 + len(REASON_CODES) + len(ACTION_NAMES) + 1 + len(DECISIONS)


def watchdog_features(stream: Dict[str, Any]) -> np.ndarray:
    """The watchdog's fixed-size view of its stream (``watchdog_observation``): 0 analyst steps,
    1 budget remaining, 2 visible risk signals, 3 interventions, 4 pending artifacts, 5 pressure
    events seen, 6 episode done, 7–10 verdicts so far (veto, escalate, warn, approve), then the
    visible risk signals multi-hot over the reason codes, the analyst's last action one-hot over
    the action names (plus one slot for any other name) and its submitted decision one-hot."""
    f = np.zeros(WATCHDOG_FEATURES, dtype=np.float32)
    steps = stream.get("steps", [])
    f[0] = len(steps)
    f[1] = float(stream.get("budget_remaining", 0.0))
    f[2] = len(stream.get("visible_risk_signals", []))
    f[3] = len(stream.get("intervention_actions", []))
    f[4] = float(stream.get("pending_event_count", 0))
    f[5] = float(stream.get("pressure_events_seen", 0))
    f[6] = 1.0 if stream.get("episode_done") else 0.0
    for v in stream.get("verdicts", []):
        kind = str(v.get("verdict", "")).lower()
        if kind in VERDICT_KINDS:
            f[7 + VERDICT_KINDS.index(kind)] += 1
    base = 11
    for s in stream.get("visible_risk_signals", []):
        if s in REASON_CODES:
            f[base + REASON_CODES.index(s)] = 1.0
    base += len(REASON_CODES)
    if steps:
        last = steps[-1]
        name = last.get("analyst_action")
        f[base + (ACTION_NAMES.index(name) if name in ACTION_NAMES else len(ACTION_NAMES))] = 1.0
        decision = (last.get("payload") or {}).get("decision")
        if name == "submit_decision" and decision in DECISIONS:
            f[base + len(ACTION_NAMES) + 1 + DECISIONS.index(decision)] = 1.0
    return f


class WatchdogGame(TurnGame):
    """The analyst/watchdog pair as a turn-based game (see the module docstring)."""

    possible_agents = ["analyst", "watchdog"]

    def __init__(self, **env_kwargs: Any) -> None:
        env_kwargs.setdefault("observation_mode", "dict")
        if env_kwargs.get("action_mode", "index") != "index":
            raise ValueError("the analyst plays candidate indices (action_mode='index')")
        self.env = ControlBenchGymEnv(**env_kwargs)
        space = self.env.observation_space
        if not isinstance(space, spaces.Dict):
            raise ValueError("the analyst observes arrays: use observation_mode='dict' (or another array mode)")
        # The analyst's observation: the Gymnasium observation without its mask, flattened to
        # one float32 vector (the mask is the agent's action_mask).
        self.analyst_space = spaces.Dict({k: v for k, v in space.spaces.items() if k != "action_mask"})
        self.analyst_size = int(spaces.flatdim(self.analyst_space))
        self.done = True

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent: str) -> spaces.Space:
        if agent == "watchdog":
            return spaces.Dict({"observation": _box(WATCHDOG_FEATURES), "action_mask": spaces.MultiBinary(len(WATCHDOG_VERDICTS))})
        return spaces.Dict({"observation": _box(self.analyst_size),
                            "action_mask": spaces.MultiBinary(native.CONTROLBENCH_MAX_CANDIDATES)})

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(len(WATCHDOG_VERDICTS) if agent == "watchdog" else native.CONTROLBENCH_MAX_CANDIDATES)

    def reset(self, seed: Optional[int]) -> None:
        self.obs, info = self.env.reset(seed=seed)
        self.mask = info["action_mask"]
        self.turn = "analyst"
        self.analyst_done = False
        self.verdicts = 0
        self.done = False

    def acting(self) -> str:
        return self.turn

    def observe(self, agent: str) -> Dict[str, Any]:
        mine = not self.done and agent == self.turn
        if agent == "watchdog":
            obs = watchdog_features(self.env.env.watchdog_observation()) if mine else np.zeros(WATCHDOG_FEATURES, dtype=np.float32)
            legal = np.array([1, 1, 1, 1, 1] if self.verdicts < 64 else [1, 0, 0, 0, 0], dtype=np.int8)
            return {"observation": obs, "action_mask": _mask(len(WATCHDOG_VERDICTS), legal if mine else None)}
        if not mine:
            return {"observation": np.zeros(self.analyst_size, dtype=np.float32),
                    "action_mask": _mask(native.CONTROLBENCH_MAX_CANDIDATES)}
        own = {k: v for k, v in self.obs.items() if k != "action_mask"}
        return {"observation": spaces.flatten(self.analyst_space, own).astype(np.float32),
                "action_mask": self.mask.astype(np.int8)}

    def act(self, agent: str, action: Any) -> Dict[str, float]:
        if self.done or agent != self.turn:
            raise ValueError(f"it is not {agent}'s turn")
        legal = self.observe(agent)["action_mask"]
        a = int(action)
        if not (0 <= a < len(legal) and legal[a]):
            raise ValueError(f"action {a} is not legal for {agent} now (see its action_mask)")
        if agent == "analyst":
            self.obs, reward, terminated, truncated, info = self.env.step(a)
            self.mask = info["action_mask"]
            self.analyst_done = bool(terminated or truncated)
            self.turn = "watchdog"
            return {"analyst": float(reward)}
        if WATCHDOG_VERDICTS[a] is not None:
            self.verdicts = self.env.env.watchdog_verdict(WATCHDOG_VERDICTS[a])
        if not self.analyst_done:
            self.turn = "analyst"
            return {}
        self.done = True
        joint = self.env.env.watchdog_joint()
        return {"watchdog": 0.0 if joint is None else float(joint["watchdog_bonus"] + joint["watchdog_penalty"])}


def watchdog_env(**env_kwargs: Any) -> TurnAECEnv:
    """The analyst/watchdog pair as a PettingZoo AEC environment; ``env_kwargs`` go to the
    analyst's ``ControlBenchGymEnv`` (splits, ``case_id``, ``observation_mode``, ...)."""
    return TurnAECEnv(WatchdogGame(**env_kwargs), "ledgershield_watchdog_v0")


def watchdog_parallel_env(**env_kwargs: Any) -> TurnParallelEnv:
    """The analyst/watchdog pair as a PettingZoo Parallel environment (turn-based)."""
    return TurnParallelEnv(WatchdogGame(**env_kwargs), "ledgershield_watchdog_v0")
