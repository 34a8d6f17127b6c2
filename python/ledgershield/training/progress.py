"""Progress bars for the training stages (tqdm, on stderr), like ``ledgershield run``'s.

``LEDGERSHIELD_PROGRESS=1`` forces them on, ``0`` off; by default they show when stderr is a
terminal, so logs and CI output stay free of carriage returns. The Hugging Face trainers (SFT,
GRPO, DPO) take ``disable_tqdm=not enabled()``; the in-process loops (structured RL, the compact
LM's SFT steps and RL iterations) wrap their iterations in :func:`bar`.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Optional


def enabled() -> bool:
    v = os.environ.get("LEDGERSHIELD_PROGRESS", "auto").strip().lower()
    if v in ("0", "off", "false", "no"):
        return False
    if v in ("1", "on", "true", "yes"):
        return True
    return sys.stderr.isatty()


class _Silent:
    """What :func:`bar` returns without tqdm: iterates, and ``update``/``close`` do nothing."""

    def __init__(self, iterable: Optional[Iterable[Any]]) -> None:
        self.iterable = iterable
        self.n = 0

    def __iter__(self) -> Any:
        return iter(self.iterable or ())

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        pass


def bar(iterable: Optional[Iterable[Any]] = None, total: Optional[int] = None, desc: str = "") -> Any:
    """A tqdm bar over ``iterable`` (or a manual one of ``total``), or a silent stand-in."""
    if not enabled():
        return _Silent(iterable)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _Silent(iterable)
    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True)
