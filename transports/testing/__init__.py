"""Testing an mrtr app: the in-memory test client and its pytest plugin.

(The official conformance suite's fixtures and client are not installed: they live
with the project's tests, in ``tests/support/``.)

The test client's names are importable from here (``from mrtr_transports.testing
import TestClient, accept``); they load on first use, so the pytest plugin, which
pytest imports wherever mrtr is installed, costs nothing where only the core is.
See ``docs/testing.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .answers import AnswerScript, accept, cancel, decline, roots, sampled
    from .attacks import LegOutcome, StateAttacks, tampered
    from .client import CallRecord, Round, TestClient
    from .effects import SideEffects

__all__ = [
    "AnswerScript",
    "CallRecord",
    "LegOutcome",
    "Round",
    "SideEffects",
    "StateAttacks",
    "TestClient",
    "accept",
    "cancel",
    "decline",
    "roots",
    "sampled",
    "tampered",
]

_HOMES = {
    "AnswerScript": "answers",
    "accept": "answers",
    "cancel": "answers",
    "decline": "answers",
    "roots": "answers",
    "sampled": "answers",
    "LegOutcome": "attacks",
    "StateAttacks": "attacks",
    "tampered": "attacks",
    "CallRecord": "client",
    "Round": "client",
    "TestClient": "client",
    "SideEffects": "effects",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
