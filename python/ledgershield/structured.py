"""ControlBench through the structured observation and the factored action space (``ls-rl``).

The observation is a ``Dict`` of fixed-shape arrays computed in Rust from the evidence ledger of
the episode (what the agent revealed, never hidden state):

* ``global`` (float32, ``STRUCTURED_GLOBAL_FEATURES``): family, budget, steps, pending events,
  tools that succeeded or failed, interventions, artifacts, observed risk signals, and the
  submission being composed (decision, codes, fields, items, verifications, links, checks, what
  is pending). Entry names: ``GLOBAL_NAMES``.
* ``rows`` (float32, ``STRUCTURED_MAX_ROWS`` x ``STRUCTURED_ROW_FEATURES``) and ``row_mask``:
  one row per ledger row (document, OCR line, thread, vendor record, history change, bank
  comparison, ledger hit, PO, receipt, artifact) with its kind, line class, document, amount,
  the relations computed between revealed rows (amount vs PO, account vs vendor master, sender
  domain, duplicates, cue wording), its affinity with what is pending and whether it is a legal
  pointer now. Entry names: ``ROW_NAMES``.
* ``action_mask`` (int8, ``FACTORED_ACTIONS``): the legal actions now (also ``action_masks()``,
  which sb3-contrib's ``MaskablePPO`` reads).

The action space is ``Discrete(FACTORED_ACTIONS)``, one masked choice per step (names:
``ACTION_NAMES``): ``tool.<name>`` then ``point.<row>`` (the row the tool's argument is read from),
``lookup_policy``, ``intervene.<name>``, ``decide.<decision>``, ``target.<what>`` then
``point.<row>`` (a reason code and the row that shows it, a Task A field, a line item, a
verification, a link), ``check.<check>.<pass|fail>``, ``submit``. Composing actions (decide,
target, point at a target, check, and choosing a tool) reach no environment: reward 0, the
episode's clock does not move. The return is the episode's final score less its action costs
(``docs/grading.md``, "The reward a learner maximises").
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces

from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from . import _native
from .gym_envs import check_reset_options, controlbench_reset
from .vector import _NativeVectorEnv, _num_envs

GLOBAL_FEATURES: int = _native.STRUCTURED_GLOBAL_FEATURES
ROW_FEATURES: int = _native.STRUCTURED_ROW_FEATURES
MAX_ROWS: int = _native.STRUCTURED_MAX_ROWS
FACTORED_ACTIONS: int = _native.FACTORED_ACTIONS
ACTION_NAMES: List[str] = list(_native.FACTORED_ACTION_NAMES)
GLOBAL_NAMES: List[str] = list(_native.STRUCTURED_GLOBAL_NAMES)
ROW_NAMES: List[str] = list(_native.STRUCTURED_ROW_NAMES)


def observation_space() -> spaces.Dict:
    """The structured observation's space (the same for every episode)."""
    return spaces.Dict({
        "global": spaces.Box(0.0, 1.0, (GLOBAL_FEATURES,), np.float32),
        "rows": spaces.Box(0.0, 1.0, (MAX_ROWS, ROW_FEATURES), np.float32),
        "row_mask": spaces.MultiBinary(MAX_ROWS),
        "action_mask": spaces.MultiBinary(FACTORED_ACTIONS),
    })


class StructuredControlBenchEnv(gymnasium.Env):
    """One ControlBench environment in process, structured observation, factored actions.

    ``reset(seed=s, options={...})`` draws the reset seed from ``np_random`` (so the same seed and
    actions replay the same episode byte for byte); ``options`` may carry any reset field
    (``case_id``, ``track``, ...). Each reset starts from a fresh institution.
    ``info`` always has the same keys: ``composed`` (the step only composed), ``final_score`` and
    ``result_class`` (the grade on the graded step, else 0.0 and ""), ``episode_return`` and
    ``task`` (once the episode is over, where a task-distribution draw came from: generator,
    template, family, seed, splits; else ``{}``). Pass ``reset_options={"template_split": "train",
    "generator_split": "train"}`` (or per reset ``options``) to draw from the task distribution
    (``docs/python.md``).
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    def __init__(self, track_mode: str = "blind", case_id: Optional[str] = None, track: Optional[str] = None,
                 template_split: str = "all", generator_split: str = "all", curriculum: bool = False,
                 fresh_institution: Optional[bool] = None, render_mode: Optional[str] = None,
                 reset_options: Optional[Dict[str, Any]] = None) -> None:
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        check_reset_options(template_split, generator_split, curriculum, fresh_institution)
        self.render_mode = render_mode
        self.env = _native.StructuredControlBench(track_mode)
        self.defaults: Dict[str, Any] = {"case_id": case_id, "track": track, "template_split": template_split,
                                         "generator_split": generator_split, "curriculum": curriculum,
                                         "fresh_institution": fresh_institution}
        self.defaults.update(reset_options or {})
        self.observation_space = observation_space()
        self.action_space = spaces.Discrete(FACTORED_ACTIONS)
        self._mask = np.zeros(FACTORED_ACTIONS, dtype=np.int8)
        self._return = 0.0
        self._last: Dict[str, Any] = {}

    def _observe(self) -> Dict[str, np.ndarray]:
        g, r, rm, m = self.env.arrays()
        self._mask = np.frombuffer(m, dtype=np.uint8).astype(np.int8)
        return {
            "global": np.frombuffer(g, dtype=np.float32).copy(),
            "rows": np.frombuffer(r, dtype=np.float32).reshape(MAX_ROWS, ROW_FEATURES).copy(),
            "row_mask": np.frombuffer(rm, dtype=np.uint8).astype(np.int8),
            "action_mask": self._mask.copy(),
        }

    def _info(self, composed: bool) -> Dict[str, Any]:
        done = bool(self._last.get("done"))
        info = self._last.get("info", {}) if done else {}
        task = self.env.finished_task() if done else None
        return {"composed": composed,
                "final_score": float(info.get("final_score", 0.0) or 0.0),
                "result_class": str(info.get("result_class", "") or ""),
                "episode_return": self._return,
                "task": json.loads(task) if task else {}}

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        super().reset(seed=seed)
        request = controlbench_reset(self.defaults, options)
        request.setdefault("seed", int(self.np_random.integers(0, 2**31 - 1)))
        self._last = json.loads(self.env.reset(json.dumps(request)))
        self._return = 0.0
        return self._observe(), self._info(False)

    def step(self, action: Any) -> Tuple[Dict[str, np.ndarray], float, bool, bool, Dict[str, Any]]:
        text = self.env.step(int(action))
        if text is None:
            return self._observe(), 0.0, False, False, self._info(True)
        self._last = json.loads(text)
        reward = float(self._last["reward"])
        self._return += reward
        return (self._observe(), reward, bool(self._last["terminated"]), bool(self._last["truncated"]),
                self._info(False))

    def action_masks(self) -> np.ndarray:
        """The legal actions now (sb3-contrib's ``MaskablePPO`` calls this)."""
        return self._mask.astype(bool)

    def express(self, action: Dict[str, Any]) -> Optional[List[int]]:
        """The factored actions that express a typed action (``{action_type, payload}``) now, or
        ``None`` when it cannot be expressed (behaviour cloning from another agent)."""
        return self.env.express(json.dumps(action))

    def ledger_text(self) -> str:
        """The evidence ledger as text."""
        return self.env.ledger_text()

    def draft(self) -> Dict[str, Any]:
        """The submission the composer would send now."""
        return json.loads(self.env.draft())

    def render(self) -> Optional[str]:
        return self.ledger_text() if self.render_mode == "ansi" else None


class StructuredControlBenchVectorEnv(_NativeVectorEnv):
    """N structured ControlBench environments stepped in Rust worker threads (one call per
    batch, the GIL released): batched ``global`` / ``rows`` / ``row_mask`` / ``action_mask``,
    ``MultiDiscrete`` factored actions, next-step (or same-step) autoreset, ``action_masks()``.
    A composing action of one environment reports reward 0, neither terminated nor truncated."""

    def __init__(self, num_envs: int = 1, track_mode: str = "blind", threads: Optional[int] = None,
                 case_id: Optional[str] = None, track: Optional[str] = None, template_split: str = "all",
                 generator_split: str = "all", curriculum: bool = False, fresh_institution: Optional[bool] = None,
                 with_text: bool = False, autoreset_mode: Any = AutoresetMode.NEXT_STEP, **_: Any) -> None:
        check_reset_options(template_split, generator_split, curriculum, fresh_institution)
        num_envs = _num_envs(num_envs)
        self._vec = _native.StructuredControlBenchVector(num_envs, track_mode, threads)
        self.defaults = {"case_id": case_id, "track": track, "template_split": template_split,
                         "generator_split": generator_split, "curriculum": curriculum,
                         "fresh_institution": fresh_institution}
        self._features, self._max_candidates, self._rl = GLOBAL_FEATURES, FACTORED_ACTIONS, MAX_ROWS * ROW_FEATURES
        self._setup(num_envs, "index", with_text, autoreset_mode)
        self.single_observation_space = observation_space()
        self.observation_space = batch_space(self.single_observation_space, num_envs)

    def _request(self, options: Optional[Dict[str, Any]]) -> str:
        return json.dumps(controlbench_reset(self.defaults, options))

    def _unpack(self, out: Tuple[Any, ...]):
        f, r, m, rew, term, trunc, texts = out
        n = self.num_envs
        masks = np.frombuffer(m, dtype=np.int8).reshape(n, FACTORED_ACTIONS + MAX_ROWS)
        obs = {"global": np.frombuffer(f, dtype=np.float32).reshape(n, GLOBAL_FEATURES),
               "rows": np.frombuffer(r, dtype=np.float32).reshape(n, MAX_ROWS, ROW_FEATURES),
               "row_mask": masks[:, FACTORED_ACTIONS:],
               "action_mask": masks[:, :FACTORED_ACTIONS]}
        infos: Dict[str, Any] = {}
        if texts is not None:
            infos["reply"] = np.array(texts, dtype=object)
            infos["_reply"] = np.ones(n, dtype=bool)
        self._mask = obs["action_mask"]
        return (obs, np.frombuffer(rew, dtype=np.float64), np.frombuffer(term, dtype=np.bool_),
                np.frombuffer(trunc, dtype=np.bool_), infos)

    def candidates(self, i: int) -> List[str]:
        """Environment ``i``'s legal action names, in index order."""
        return json.loads(self._vec.candidates(int(i)))
