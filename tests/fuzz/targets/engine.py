"""The engine target: one ``RoundEngine`` flow, the server's results and the app's
actions (answers, timers, a broken leg, a cancel, a snapshot restored elsewhere)
in the order the fuzzer says."""

from __future__ import annotations

import json
from typing import Any

import mrtr_core as m

from ._common import ALL_CAPS, STDLIB, guarded
from .client import answer_for

_TERMINAL = (m.engine.Done, m.engine.Failed, m.engine.TimedOut, m.engine.Cancelled)
_METHODS = ("tools/call", "prompts/get", "resources/read")
#: What the client declared: all, nothing, bare elicitation, or (None) what ``_meta`` says.
_CAPABILITIES: tuple[Any, ...] = (ALL_CAPS, {}, {"elicitation": {}}, None)


def _restored(engine: m.engine.RoundEngine, now: float, patch: Any) -> m.engine.RoundEngine | None:
    """``engine`` snapshotted, stored as JSON (with ``patch`` merged in: a store that
    went bad) and restored at ``now``; ``None`` when either side refused."""
    snapshot = guarded(lambda: engine.snapshot(now))
    if snapshot is None:
        return None
    stored = json.loads(json.dumps(snapshot))
    if isinstance(patch, dict):
        stored.update(patch)
    return guarded(lambda: m.engine.RoundEngine.restore(stored, now))  # type: ignore[no-any-return]


def _act(
    flow: m.engine.RoundEngine,
    wait: m.Wait,
    action: int,
    value: Any,
    now: float,
    pending: dict[str, Any],
) -> m.engine.RoundEngine:
    """Do ``action`` (see :func:`engine`); the flow from here (a restored one, maybe)."""
    if action == 0 and wait is m.Wait.NEED_RESULT:
        if isinstance(value, dict) and isinstance(value.get("code"), int):
            guarded(lambda: flow.receive_error(value, now))
        else:  # a result is an object on the wire: the codec saw to that
            result = value if isinstance(value, dict) else {"content": [], "value": value}
            guarded(lambda: flow.receive_result(result, now))
    elif action in (0, 1, 2) and pending:
        key = next(iter(pending))
        if action == 0:
            guarded(lambda: flow.provide(key, value, now))
        elif action == 2:
            guarded(lambda: flow.fail(key, "no"))
        for key, request in list(pending.items()) if action == 1 else []:
            guarded(lambda k=key, r=request: flow.provide(k, answer_for(r), now))
        if action == 1:
            pending.clear()
        pending.pop(key, None)
    elif action == 3:
        guarded(lambda: flow.leg_timed_out(now))
    elif action == 4:
        guarded(lambda: flow.input_timed_out(now))
    elif action == 5:
        guarded(lambda: flow.leg_broken(now))
    elif action in (6, 7):
        restored = _restored(flow, now, value if action == 7 else None)
        if restored is not None:
            pending.clear()  # the restored flow dispatches its inputs again
            return restored
    elif action == 8:
        flow.cancel(now)
    else:
        guarded(lambda: flow.receive_result({"content": []}, now))
    return flow


def engine(data: bytes) -> None:
    """A flow gets arbitrary results and app actions: only documented errors; exactly
    one terminal event, then ``FINISHED``; a snapshot restored carries on the flow.

    Control bytes: ``data[0]``: 0x01 a leg timeout, 0x02 a total timeout, 0x04 an
    input timeout, 0x08/0x10 ``max_rounds`` (1..4), 0x20/0x40 ``max_state_only_legs``
    (0..3), 0x80 one leg re-issue at most.  ``data[1]``: the method (``% 3``), what the
    client declared (``>> 2 & 3``), 0x10 a ``url_wait_timeout`` of 20 s (else the
    default), 0x40 the app cancels before it starts, 0x80 it snapshots and restores it
    before it starts.  Then one step per line: its first byte is the
    action (high nibble) and how many seconds pass first (low nibble); the rest of
    the line is a JSON value.  Actions: 0 the value is the leg's result (or error, if
    it has an integer ``code``) or the answer to the first pending input; 1 typed
    answers to every pending input; 2 the first pending input fails; 3 the leg timer
    fires; 4 the input timer fires; 5 the leg breaks; 6 snapshot and restore; 7 the
    same with the value merged into the stored snapshot; 8 cancel.
    """
    if len(data) < 2:
        return
    control = data[0]
    params = {
        "name": "t",
        "arguments": {"x": 1},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}},
        "requestState": "stale",  # round fields of the caller's are dropped at start
    }
    flow = guarded(
        lambda: m.engine.RoundEngine(
            _METHODS[data[1] % 3],
            params,
            capabilities=_CAPABILITIES[(data[1] >> 2) % 4],
            leg_timeout=5.0 if control & 0x01 else None,
            total_timeout=30.0 if control & 0x02 else None,
            input_timeout=10.0 if control & 0x04 else None,
            max_rounds=1 + (control >> 3) % 4,
            max_state_only_legs=(control >> 5) % 4,
            max_leg_reissues=1 if control & 0x80 else 3,
            url_wait_timeout=20.0 if data[1] & 0x10 else m.engine._engine.DEFAULT_URL_WAIT,
        )
    )
    assert flow is not None
    now = 0.0
    if data[1] & 0x40:
        flow.cancel(now)  # before it started: it ends at once
    elif data[1] & 0x80:
        restored = _restored(flow, now, None)  # stored before it started, restored
        assert restored is not None
        flow = restored
    if flow.state.value == "idle":
        flow.start(now)
    pending: dict[str, Any] = {}
    ended = 0
    steps = iter(data[2:].split(b"\n"))
    for _ in range(10_000):
        event = flow.next_event()
        if isinstance(event, _TERMINAL):
            ended += 1
            continue
        if isinstance(event, m.engine.DispatchInput):
            pending[event.key] = event.request
            continue
        if isinstance(event, m.engine.CancelInputs):
            for key in event.keys:
                pending.pop(key, None)
            continue
        if event is m.Wait.FINISHED:
            break
        if not isinstance(event, m.Wait):
            continue  # SendRequest, SendRetry, RoundStarted, CancelLeg: the transport's
        step = next(steps, None)
        if step is None:
            flow.cancel(now)
            continue
        action, seconds = (step[0] >> 4, step[0] & 0x0F) if step else (0, 0)
        now += seconds
        value = guarded(lambda step=step: STDLIB.loads(step[1:])) if len(step) > 1 else None
        flow = _act(flow, event, action, value, now, pending)
    else:
        raise AssertionError("the flow never finished")
    # API misuse (an answer of the wrong shape, say) ends a flow in ERROR with no
    # terminal event, as documented: the app's bug, raised at the call.  Else: one end.
    assert ended == (0 if flow.state.value == "error" else 1), (ended, flow.state)
    assert flow.next_event() is m.Wait.FINISHED
