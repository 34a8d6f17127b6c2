"""LedgerShield training pipeline: collect → SFT → GRPO (plan reward and tool calling) →
self-play + DPO → held-out evaluation → plots, against the live environments.

Command line: ``python -m ledgershield.training <command> --help`` (or ``ledgershield-train``).
Install with ``pip install './python[train]'``; see TRAINING.md.
"""

from .collect import collect, expand_suites, pick_eval_cases
from .evaluate import compare, metrics

__all__ = ["collect", "compare", "expand_suites", "metrics", "pick_eval_cases"]
