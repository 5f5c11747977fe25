"""A round engine's state as a plain JSON-able value, and an engine resumed from one.

Times are stored as elapsed seconds, so a snapshot does not depend on the monotonic
clock of the process that took it; restoring rebases them on the new ``now``.
These read and set the engine's own fields: they are its methods
(:meth:`RoundEngine.snapshot`, :meth:`RoundEngine.restore`), kept in their own module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import LocalProtocolError, describe
from ..wire._convert import structure_input_request, unstructure_input_request
from ..wire._inputs import InputRegistry
from ._state import TERMINAL_STATES, EngineState

if TYPE_CHECKING:
    from ._engine import RoundEngine

__all__ = ["SNAPSHOT_VERSION", "restored", "snapshot_of"]

SNAPSHOT_VERSION = 1


def snapshot_of(engine: RoundEngine, now: float) -> dict[str, Any]:
    """:meth:`RoundEngine.snapshot`."""
    if engine.state in TERMINAL_STATES or engine._events:
        raise LocalProtocolError("snapshot needs an open flow with every event handed out")
    return {
        "version": SNAPSHOT_VERSION,
        "method": engine.method,
        "params": dict(engine.params),
        "capabilities": dict(engine.capabilities),
        "options": {
            "leg_timeout": engine.leg_timeout,
            "total_timeout": engine.total_timeout,
            "input_timeout": engine.input_timeout,
            "max_rounds": engine.max_rounds,
            "max_state_only_legs": engine.max_state_only_legs,
            "max_leg_reissues": engine.max_leg_reissues,
            "url_wait_timeout": engine.url_wait_timeout,
        },
        "state": engine.state.value,
        "elapsed": now - engine._started_at,
        "round": engine.round,
        "legs": engine.legs,
        "input_rounds": engine._input_rounds,
        "state_only_legs": engine._state_only_legs,
        "reissues": engine._reissues,
        "pace": engine._pace,
        "url_accepted": engine._url_accepted,
        "url_waited": None if engine._url_wait_since is None else now - engine._url_wait_since,
        "leg_params": dict(engine._leg_params),
        "leg_is_retry": engine._leg_is_retry,
        "pending": {k: unstructure_input_request(v) for k, v in engine._pending.items()},
        "responses": dict(engine._responses),
        "request_state": engine._request_state,
        "round_elapsed": now - engine._round_started_at,
        "last_input_required": (
            None if engine.last_input_required is None else dict(engine.last_input_required)
        ),
    }


def restored(
    cls: type[RoundEngine], snap: Mapping[str, Any], now: float, input_kinds: InputRegistry
) -> RoundEngine:
    """:meth:`RoundEngine.restore`, its errors not yet wrapped."""
    if snap["version"] != SNAPSHOT_VERSION:
        raise LocalProtocolError(f"unknown snapshot version {describe(snap['version'])}")
    engine = cls(
        snap["method"],
        snap["params"],
        capabilities=snap["capabilities"],
        input_kinds=input_kinds,
        **snap["options"],
    )
    state = EngineState(snap["state"])
    if state in TERMINAL_STATES:  # (an open state: one whose wait the engine names)
        raise LocalProtocolError(f"cannot restore a flow in state {state.value}")
    engine.state = state
    engine._started_at = now - float(snap["elapsed"])
    engine.round = int(snap["round"])
    engine.legs = int(snap["legs"])
    engine._input_rounds = int(snap["input_rounds"])
    engine._state_only_legs = int(snap["state_only_legs"])
    engine._reissues = int(snap["reissues"])
    pace = snap["pace"]
    engine._pace = None if pace is None else float(pace)
    # (absent from a snapshot of an older version: no person waited for)
    engine._url_accepted = bool(snap.get("url_accepted", False))
    waited = snap.get("url_waited")
    engine._url_wait_since = None if waited is None else now - float(waited)
    engine._leg_params = dict(snap["leg_params"])
    engine._leg_is_retry = bool(snap["leg_is_retry"])
    engine._responses = dict(snap["responses"])
    request_state = snap["request_state"]
    if request_state is not None and not isinstance(request_state, str):
        raise LocalProtocolError("invalid snapshot: request_state must be a str")
    engine._request_state = request_state
    last = snap["last_input_required"]
    engine.last_input_required = None if last is None else dict(last)
    if state is EngineState.AWAITING_RESULT:
        # The leg in flight died with the old process: re-issue it with a new id.
        # Not counted against max_leg_reissues (that bounds one process's broken
        # streams); how often a stored flow is resumed is the app's decision.
        engine._send_leg(
            now, engine._leg_params, retry=engine._leg_is_retry, delay=0.0, reissue=True
        )
    elif state is EngineState.AWAITING_INPUT:
        engine._pending = {
            k: structure_input_request(v, input_kinds) for k, v in dict(snap["pending"]).items()
        }
        engine._round_started_at = now - float(snap["round_elapsed"])
        engine._open_round(now)
    return engine
