"""``LedgerShieldEnv``: openenv-core's ``EnvClient`` for LedgerShield ControlBench.

Async by default, as openenv's clients are; ``.sync()`` gives the synchronous wrapper::

    async with LedgerShieldEnv(base_url="http://127.0.0.1:8000") as env:
        result = await env.reset(case_id="CASE-A-001")
        result = await env.act("ocr", doc_id=result.observation.visible_documents[0].doc_id)

    with LedgerShieldEnv(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=3)
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Union

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .models import ControlBenchAction, ControlBenchObservation, ControlBenchState


class LedgerShieldServerError(RuntimeError):
    """An ``error`` reply from the server.

    ``code`` is the OpenEnv protocol code (``VALIDATION_ERROR``, ``EXECUTION_ERROR``, ...);
    ``error`` is LedgerShield's finer code (``reset_required``, ``episode_ended``, ...) when given.
    """

    def __init__(self, data: Mapping[str, Any]):
        self.data: Dict[str, Any] = dict(data)
        self.code: str = str(self.data.get("code", "UNKNOWN"))
        self.error: str | None = self.data.get("error")
        self.message: str = str(self.data.get("message", "Unknown error"))
        super().__init__(f"Server error: {self.message} (code: {self.code})")


ActionLike = Union[ControlBenchAction, Mapping[str, Any]]


class LedgerShieldEnv(EnvClient[ControlBenchAction, ControlBenchObservation, ControlBenchState]):
    """WebSocket client of a LedgerShield ControlBench server; one connection = one session."""

    def _step_payload(self, action: ActionLike) -> Dict[str, Any]:
        if not isinstance(action, ControlBenchAction):
            action = ControlBenchAction.model_validate(dict(action))
        return action.model_dump(exclude_defaults=False)

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[ControlBenchObservation]:
        obs = dict(payload.get("observation", {}))
        observation = ControlBenchObservation(
            **obs,
            done=bool(payload.get("done", False)),
            reward=payload.get("reward"),
            terminated=bool(payload.get("terminated", False)),
            truncated=bool(payload.get("truncated", False)),
            info=dict(payload.get("info", {})),
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done", False)))

    def _parse_state(self, payload: Dict[str, Any]) -> ControlBenchState:
        return ControlBenchState.model_validate(payload)

    async def _send_and_receive(self, message: Dict[str, Any]) -> Dict[str, Any]:
        await self._send(message)
        response = await self._receive()
        if response.get("type") == "error":
            raise LedgerShieldServerError(response.get("data", {}))
        return response

    async def act(self, action_type: str, **payload: Any) -> StepResult[ControlBenchObservation]:
        """Shorthand for ``step(ControlBenchAction(action_type=..., payload=payload))``."""
        return await self.step(ControlBenchAction(action_type=action_type, payload=payload))  # type: ignore[arg-type]
