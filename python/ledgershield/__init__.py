"""LedgerShield for Python: the environments in process (``ledgershield.native``, Gymnasium
environments and vector envs), the OpenEnv ``EnvClient``, typed models, submission helpers and a
TRL-ready tool environment."""

from .client import LedgerShieldEnv, LedgerShieldServerError
from .models import (
    ACTION_TYPES,
    DECISIONS,
    INTERVENTIONS,
    INVESTIGATION_TOOLS,
    ControlBenchAction,
    ControlBenchObservation,
    ControlBenchState,
)
from .submission import EvidenceRef, Submission, submit_decision_action, submit_decision_payload
from .trl_env import LedgerShieldToolEnv, environment_factory

__all__ = [
    "ACTION_TYPES",
    "DECISIONS",
    "INTERVENTIONS",
    "INVESTIGATION_TOOLS",
    "ControlBenchAction",
    "ControlBenchObservation",
    "ControlBenchState",
    "EvidenceRef",
    "LedgerShieldEnv",
    "LedgerShieldServerError",
    "LedgerShieldToolEnv",
    "Submission",
    "environment_factory",
    "submit_decision_action",
    "submit_decision_payload",
]
__version__ = "0.1.0"

# Gymnasium ids (LedgerShield/ControlBench-v0, LedgerShield/Audit-v0) over the native module.
from .gym_envs import register_envs as _register_envs  # noqa: E402

_register_envs()
