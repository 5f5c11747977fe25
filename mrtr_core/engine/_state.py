"""The round engine's states and inputs, and the one table of legal transitions.

A (state, input) pair missing from :data:`TRANSITIONS` is API misuse: the engine
raises :class:`~mrtr_core.LocalProtocolError` and enters ``ERROR`` (a terminal
state stays as it is).  A pair that is present maps to the set of states the
input may lead to; which one is taken depends on the data (a complete result
ends the flow, an input_required result starts a round).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class EngineState(enum.Enum):
    # Members are singletons: identity hashing is correct and, unlike Enum's
    # Python-level __hash__, costs nothing on the engine's per-input table check.
    __hash__ = object.__hash__

    IDLE = "idle"  # created, start() not yet called
    AWAITING_RESULT = "awaiting_result"  # a leg is (to be) on the wire
    AWAITING_INPUT = "awaiting_input"  # a round's input requests are out to the app
    DONE = "done"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    ERROR = "error"  # the API was misused; the flow is dead


class EngineInput(enum.Enum):
    __hash__ = object.__hash__

    START = "start"
    RESULT = "receive_result"
    ERROR_RESPONSE = "receive_error"
    LEG_TIMED_OUT = "leg_timed_out"
    LEG_BROKEN = "leg_broken"
    PROVIDE = "provide"
    FAIL = "fail"
    INPUT_TIMED_OUT = "input_timed_out"
    CANCEL = "cancel"


S = EngineState
I = EngineInput  # noqa: E741

TERMINAL_STATES = frozenset({S.DONE, S.FAILED, S.TIMED_OUT, S.CANCELLED, S.ERROR})

TRANSITIONS: Mapping[tuple[EngineState, EngineInput], frozenset[EngineState]] = {
    (S.IDLE, I.START): frozenset({S.AWAITING_RESULT}),
    (S.IDLE, I.CANCEL): frozenset({S.CANCELLED}),
    # A result: complete, another leg (requestState only), a round, or a bad result,
    # the budget spent, a cap reached.
    (S.AWAITING_RESULT, I.RESULT): frozenset(
        {S.DONE, S.AWAITING_RESULT, S.AWAITING_INPUT, S.FAILED, S.TIMED_OUT}
    ),
    (S.AWAITING_RESULT, I.ERROR_RESPONSE): frozenset({S.FAILED}),
    (S.AWAITING_RESULT, I.LEG_TIMED_OUT): frozenset({S.TIMED_OUT}),
    # A broken stream re-issues the leg, unless the reissue cap or the budget is spent.
    (S.AWAITING_RESULT, I.LEG_BROKEN): frozenset({S.AWAITING_RESULT, S.FAILED, S.TIMED_OUT}),
    (S.AWAITING_RESULT, I.CANCEL): frozenset({S.CANCELLED}),
    # An answer: wait for more, or send the retry, or find the time spent.
    (S.AWAITING_INPUT, I.PROVIDE): frozenset({S.AWAITING_INPUT, S.AWAITING_RESULT, S.TIMED_OUT}),
    (S.AWAITING_INPUT, I.FAIL): frozenset({S.FAILED}),
    (S.AWAITING_INPUT, I.INPUT_TIMED_OUT): frozenset({S.TIMED_OUT}),
    (S.AWAITING_INPUT, I.CANCEL): frozenset({S.CANCELLED}),
    # Cancelling a finished flow is a harmless race (the user clicked as the answer came).
    **{(state, I.CANCEL): frozenset({state}) for state in TERMINAL_STATES},
}
