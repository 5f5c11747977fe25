"""The round engine: one multi round-trip flow driven without a connection, for
client SDK authors.

``RoundEngine`` consumes decoded results and the time and hands out events
(send this leg, ask the app this, the flow ended); ``EngineState`` names where it
is; ``missing_capability`` and ``build_retry_params`` check a request and build a retry
for rounds driven by hand (manual mode); and four errors say why a ``Failed`` event
failed.  The engine's table, its pacing constants and its
helpers live in the private modules.  See ``docs/engine.md``.
"""

from .._errors import InputFailed, InvalidInputRequired, MissingCapability, RoundLimitExceeded
from ..wire._capabilities import missing_capability
from ._engine import RoundEngine
from ._events import (
    CancelInputs,
    Cancelled,
    CancelLeg,
    DispatchInput,
    Done,
    EngineEvent,
    Failed,
    RoundStarted,
    SendRequest,
    SendRetry,
    TimedOut,
)
from ._retry import build_retry_params
from ._state import EngineState

__all__ = [
    "EngineState",
    "RoundEngine",
    "build_retry_params",
    "missing_capability",
    # its events
    "CancelInputs",
    "CancelLeg",
    "Cancelled",
    "DispatchInput",
    "Done",
    "EngineEvent",
    "Failed",
    "RoundStarted",
    "SendRequest",
    "SendRetry",
    "TimedOut",
    # the errors a Failed event carries
    "InputFailed",
    "InvalidInputRequired",
    "MissingCapability",
    "RoundLimitExceeded",
]
