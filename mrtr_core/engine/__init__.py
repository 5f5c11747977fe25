"""The round engine: one multi round-trip flow driven without a connection.

``RoundEngine`` consumes decoded results and the time and hands out events
(send this leg, ask the app this, the flow ended).  Here too: its state table,
pacing of requestState-only rounds, strict retry params, and the errors a
``Failed`` event can carry.  See ``docs/engine.md``.
"""

from .._errors import InputFailed, InvalidInputRequired, MissingCapability, RoundLimitExceeded
from .._wait import FINISHED, NEED_INPUT, NEED_RESULT, NEED_START, Wait
from ._engine import DEFAULT_URL_WAIT, PACE_CAP, PACE_FIRST, URL_PACE_CAP, RoundEngine
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
    input_kind,
)
from ._retry import build_retry_params, strip_round_fields
from ._state import TERMINAL_STATES, TRANSITIONS, EngineInput, EngineState

__all__ = [
    "InputFailed",
    "InvalidInputRequired",
    "MissingCapability",
    "RoundLimitExceeded",
    "DEFAULT_URL_WAIT",
    "PACE_CAP",
    "PACE_FIRST",
    "URL_PACE_CAP",
    "RoundEngine",
    "FINISHED",
    "NEED_INPUT",
    "NEED_RESULT",
    "NEED_START",
    "CancelInputs",
    "Cancelled",
    "CancelLeg",
    "DispatchInput",
    "Done",
    "EngineEvent",
    "Failed",
    "RoundStarted",
    "SendRequest",
    "SendRetry",
    "TimedOut",
    "Wait",
    "input_kind",
    "build_retry_params",
    "strip_round_fields",
    "TERMINAL_STATES",
    "TRANSITIONS",
    "EngineInput",
    "EngineState",
]
