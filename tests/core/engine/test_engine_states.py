"""Every (EngineState, EngineInput) pair, driven through the public API only.

A pair in ``mrtr_core.engine._state.TRANSITIONS`` must be accepted and lead to one of the
states the table allows; any other pair is misuse: ``LocalProtocolError`` and a
terminal state (``ERROR``, or the terminal state the engine was already in).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from typing import Any

import pytest

import mrtr_core as m

S = m.engine.EngineState
I = m.engine._state.EngineInput  # noqa: E741

CAPS: dict[str, Any] = {"elicitation": {}}
PARAMS: dict[str, Any] = {"name": "book", "arguments": {"city": "Oslo"}}


def form(message: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {"type": "object", "properties": {"v": {"type": "string"}}},
        },
    }


TWO_KEYS: dict[str, Any] = {
    "resultType": "input_required",
    "inputRequests": {"a": form("A?"), "b": form("B?")},
    "requestState": "s1",
}
COMPLETE: dict[str, Any] = {"resultType": "complete", "content": []}
ERROR_OBJ: dict[str, Any] = {"code": -32000, "message": "x"}
ANSWER = m.wire.ElicitResult(action="accept", content={})
TERMINAL_EVENTS = (m.engine.Done, m.engine.Failed, m.engine.TimedOut, m.engine.Cancelled)


def drain(engine: m.engine.RoundEngine) -> tuple[list[Any], m.Wait]:
    events: list[Any] = []
    while True:
        ev = engine.next_event()
        if isinstance(ev, m.Wait):
            return events, ev
        events.append(ev)


#: Engine options: no limits at all, and every limit set (generous enough that
#: the walk below never runs into one by accident).
CONFIGS: dict[str, dict[str, Any]] = {
    "bare": {},
    "limited": {"leg_timeout": 5.0, "input_timeout": 30.0, "total_timeout": 100.0},
}


@pytest.fixture(params=sorted(CONFIGS))
def opts(request: pytest.FixtureRequest) -> dict[str, Any]:
    return CONFIGS[request.param]


def fresh(opts: dict[str, Any]) -> m.engine.RoundEngine:
    return m.engine.RoundEngine("tools/call", PARAMS, capabilities=CAPS, **opts)


def in_idle(opts: dict[str, Any]) -> m.engine.RoundEngine:
    return fresh(opts)


def in_awaiting_result(opts: dict[str, Any]) -> m.engine.RoundEngine:
    engine = fresh(opts)
    engine.start(0.0)
    return engine


def in_awaiting_input(opts: dict[str, Any]) -> m.engine.RoundEngine:
    engine = in_awaiting_result(opts)
    engine.receive_result(TWO_KEYS, 1.0)
    return engine


def in_done(opts: dict[str, Any]) -> m.engine.RoundEngine:
    engine = in_awaiting_result(opts)
    engine.receive_result(COMPLETE, 1.0)
    return engine


def in_failed(opts: dict[str, Any]) -> m.engine.RoundEngine:
    engine = in_awaiting_result(opts)
    engine.receive_error(ERROR_OBJ, 1.0)
    return engine


def in_timed_out(opts: dict[str, Any]) -> m.engine.RoundEngine:
    engine = in_awaiting_result(opts)
    engine.leg_timed_out(6.0)
    return engine


def in_cancelled(opts: dict[str, Any]) -> m.engine.RoundEngine:
    engine = in_awaiting_input(opts)
    engine.cancel(2.0)
    return engine


def in_error(opts: dict[str, Any]) -> m.engine.RoundEngine:
    engine = fresh(opts)
    with pytest.raises(m.LocalProtocolError):
        engine.receive_result(COMPLETE, 0.0)  # a result before start(): misuse
    return engine


BUILDERS: dict[m.engine.EngineState, Callable[[dict[str, Any]], m.engine.RoundEngine]] = {
    S.IDLE: in_idle,
    S.AWAITING_RESULT: in_awaiting_result,
    S.AWAITING_INPUT: in_awaiting_input,
    S.DONE: in_done,
    S.FAILED: in_failed,
    S.TIMED_OUT: in_timed_out,
    S.CANCELLED: in_cancelled,
    S.ERROR: in_error,
}


def built(state: m.engine.EngineState, opts: dict[str, Any]) -> m.engine.RoundEngine:
    """An engine driven into ``state`` with every event handed out."""
    engine = BUILDERS[state](opts)
    assert engine.state is state
    _, wait = drain(engine)
    if state in m.engine._state.TERMINAL_STATES:
        assert wait is m.Wait.FINISHED
    return engine


def pending_key(engine: m.engine.RoundEngine) -> str:
    keys = engine.pending_keys
    return keys[0] if keys else "a"


def apply(
    engine: m.engine.RoundEngine, given: m.engine._state.EngineInput, now: float = 3.0
) -> None:
    if given is I.START:
        engine.start(now)
    elif given is I.RESULT:
        engine.receive_result(COMPLETE, now)
    elif given is I.ERROR_RESPONSE:
        engine.receive_error(ERROR_OBJ, now)
    elif given is I.LEG_TIMED_OUT:
        engine.leg_timed_out(now)
    elif given is I.LEG_BROKEN:
        engine.leg_broken(now)
    elif given is I.PROVIDE:
        engine.provide(pending_key(engine), ANSWER, now)
    elif given is I.FAIL:
        engine.fail(pending_key(engine), "r")
    elif given is I.INPUT_TIMED_OUT:
        engine.input_timed_out(now)
    elif given is I.CANCEL:
        engine.cancel(now)
    else:  # pragma: no cover - every member is handled above
        raise AssertionError(given)


def test_every_state_has_a_builder() -> None:
    assert set(BUILDERS) == set(m.engine.EngineState)


# --- The table itself ----------------------------------------------------------


def test_table_uses_real_enum_members_only() -> None:
    for (state, given), targets in m.engine._state.TRANSITIONS.items():
        assert isinstance(state, m.engine.EngineState)
        assert isinstance(given, m.engine._state.EngineInput)
        assert state in set(m.engine.EngineState)
        assert given in set(m.engine._state.EngineInput)
        assert targets, (state, given)
        assert all(isinstance(t, m.engine.EngineState) for t in targets)


def test_terminal_states_are_the_five_ends() -> None:
    assert (
        frozenset({S.DONE, S.FAILED, S.TIMED_OUT, S.CANCELLED, S.ERROR})
        == m.engine._state.TERMINAL_STATES
    )


@pytest.mark.parametrize(
    "state", [s for s in m.engine.EngineState if s not in m.engine._state.TERMINAL_STATES]
)
def test_every_open_state_has_a_legal_input(state: m.engine.EngineState) -> None:
    assert any(
        (state, given) in m.engine._state.TRANSITIONS for given in m.engine._state.EngineInput
    )


@pytest.mark.parametrize("state", sorted(m.engine._state.TERMINAL_STATES, key=lambda s: s.value))
def test_terminal_states_only_accept_cancel_and_stay(state: m.engine.EngineState) -> None:
    legal = {given for (s, given) in m.engine._state.TRANSITIONS if s is state}
    assert legal <= {I.CANCEL}
    for given in legal:
        assert m.engine._state.TRANSITIONS[(state, given)] == frozenset({state})


def test_no_transition_leads_back_to_idle_or_to_error() -> None:
    # ERROR is only reached by misuse, never by a legal input; nothing returns to IDLE.
    for (state, _), targets in m.engine._state.TRANSITIONS.items():
        assert S.IDLE not in targets
        if state is not S.ERROR:
            assert S.ERROR not in targets


# --- Every pair -------------------------------------------------------------------

PAIRS = list(itertools.product(m.engine.EngineState, m.engine._state.EngineInput))


@pytest.mark.parametrize(("state", "given"), PAIRS, ids=[f"{s.value}-{i.value}" for s, i in PAIRS])
def test_pair(
    state: m.engine.EngineState, given: m.engine._state.EngineInput, opts: dict[str, Any]
) -> None:
    engine = built(state, opts)
    allowed = m.engine._state.TRANSITIONS.get((state, given))
    if allowed is not None:
        apply(engine, given)
        assert engine.state in allowed, (state, given, engine.state)
    else:
        with pytest.raises(m.LocalProtocolError):
            apply(engine, given)
        if state in m.engine._state.TERMINAL_STATES:
            assert engine.state is state
        else:
            assert engine.state is S.ERROR
    events, wait = drain(engine)
    terminal = [e for e in events if isinstance(e, TERMINAL_EVENTS)]
    if engine.state in m.engine._state.TERMINAL_STATES:
        assert wait is m.Wait.FINISHED
        # A flow that was already over emits nothing more; a flow that ends here
        # ends with exactly one terminal event, the last one handed out (misuse
        # may end it without one: ERROR is reported by the exception).
        if state in m.engine._state.TERMINAL_STATES:
            assert events == []
        elif engine.state is S.ERROR:
            assert len(terminal) <= 1
            assert not any(
                isinstance(e, (m.engine.SendRequest, m.engine.SendRetry, m.engine.DispatchInput))
                for e in events
            )
        else:
            assert len(terminal) == 1
            assert events[-1] is terminal[0]
        for _ in range(3):
            assert engine.next_event() is m.Wait.FINISHED
    else:
        assert terminal == []
        assert (
            wait
            is {
                S.IDLE: m.Wait.NEED_START,
                S.AWAITING_RESULT: m.Wait.NEED_RESULT,
                S.AWAITING_INPUT: m.Wait.NEED_INPUT,
            }[engine.state]
        )


@pytest.mark.parametrize(
    ("state", "given"),
    [p for p in PAIRS if p not in m.engine._state.TRANSITIONS],
    ids=[f"{s.value}-{i.value}" for s, i in PAIRS if (s, i) not in m.engine._state.TRANSITIONS],
)
def test_misuse_kills_the_flow_for_good(
    state: m.engine.EngineState, given: m.engine._state.EngineInput, opts: dict[str, Any]
) -> None:
    engine = built(state, opts)
    with pytest.raises(m.LocalProtocolError):
        apply(engine, given)
    after = engine.state
    assert after in m.engine._state.TERMINAL_STATES
    # Once dead, every input except cancel() is misuse too, and cancel() is a no-op.
    for again in m.engine._state.EngineInput:
        if (after, again) in m.engine._state.TRANSITIONS:
            apply(engine, again)
        else:
            with pytest.raises(m.LocalProtocolError):
                apply(engine, again)
        assert engine.state is after
    drain(engine)
    assert engine.next_event() is m.Wait.FINISHED


# --- Each target state of each legal pair is reachable with the right data -------


# (state, input, how, expected state): the data picks the branch.
BRANCHES: list[
    tuple[
        m.engine.EngineState,
        m.engine._state.EngineInput,
        Callable[[m.engine.RoundEngine], None],
        m.engine.EngineState,
    ]
] = [
    (S.AWAITING_RESULT, I.RESULT, lambda e: e.receive_result(COMPLETE, 1.0), S.DONE),
    (S.AWAITING_RESULT, I.RESULT, lambda e: e.receive_result({"content": []}, 1.0), S.DONE),
    (S.AWAITING_RESULT, I.RESULT, lambda e: e.receive_result(TWO_KEYS, 1.0), S.AWAITING_INPUT),
    (
        S.AWAITING_RESULT,
        I.RESULT,
        lambda e: e.receive_result({"resultType": "input_required", "requestState": "x"}, 1.0),
        S.AWAITING_RESULT,
    ),
    (
        S.AWAITING_RESULT,
        I.RESULT,
        lambda e: e.receive_result({"resultType": "input_required"}, 1.0),
        S.FAILED,
    ),
    (S.AWAITING_RESULT, I.RESULT, lambda e: e.receive_result({"resultType": "?"}, 1.0), S.FAILED),
    (S.AWAITING_RESULT, I.ERROR_RESPONSE, lambda e: e.receive_error(ERROR_OBJ, 1.0), S.FAILED),
    (S.AWAITING_RESULT, I.LEG_TIMED_OUT, lambda e: e.leg_timed_out(5.0), S.TIMED_OUT),
    (S.AWAITING_RESULT, I.LEG_BROKEN, lambda e: e.leg_broken(1.0), S.AWAITING_RESULT),
    (S.AWAITING_RESULT, I.CANCEL, lambda e: e.cancel(1.0), S.CANCELLED),
    (S.AWAITING_INPUT, I.PROVIDE, lambda e: e.provide("a", ANSWER, 2.0), S.AWAITING_INPUT),
    (S.AWAITING_INPUT, I.FAIL, lambda e: e.fail("b", "no"), S.FAILED),
    (S.AWAITING_INPUT, I.INPUT_TIMED_OUT, lambda e: e.input_timed_out(9.0), S.TIMED_OUT),
    (S.AWAITING_INPUT, I.CANCEL, lambda e: e.cancel(2.0), S.CANCELLED),
    (S.IDLE, I.START, lambda e: e.start(0.0), S.AWAITING_RESULT),
    (S.IDLE, I.CANCEL, lambda e: e.cancel(0.0), S.CANCELLED),
]


@pytest.mark.parametrize(
    ("state", "given", "how", "expected"),
    BRANCHES,
    ids=[f"{s.value}-{i.value}-{e.value}-{n}" for n, (s, i, _, e) in enumerate(BRANCHES)],
)
def test_branch(
    state: m.engine.EngineState,
    given: m.engine._state.EngineInput,
    how: Callable[[m.engine.RoundEngine], None],
    expected: m.engine.EngineState,
    opts: dict[str, Any],
) -> None:
    assert expected in m.engine._state.TRANSITIONS[(state, given)]
    engine = built(state, opts)
    how(engine)
    assert engine.state is expected
    events, wait = drain(engine)
    if expected in m.engine._state.TERMINAL_STATES:
        assert isinstance(events[-1], TERMINAL_EVENTS)
        assert sum(isinstance(e, TERMINAL_EVENTS) for e in events) == 1
        assert wait is m.Wait.FINISHED
        assert engine.next_event() is m.Wait.FINISHED


def test_provide_last_answer_sends_the_retry(opts: dict[str, Any]) -> None:
    engine = built(S.AWAITING_INPUT, opts)
    engine.provide("a", ANSWER, 2.0)
    assert engine.state is S.AWAITING_INPUT
    engine.provide("b", {"action": "decline"}, 2.5)
    assert engine.state in m.engine._state.TRANSITIONS[(S.AWAITING_INPUT, I.PROVIDE)]
    assert engine.state is S.AWAITING_RESULT
    events, wait = drain(engine)
    assert wait is m.Wait.NEED_RESULT
    (retry,) = events
    assert isinstance(retry, m.engine.SendRetry)
    assert retry.params == {
        **PARAMS,
        "inputResponses": {"a": {"action": "accept", "content": {}}, "b": {"action": "decline"}},
        "requestState": "s1",
    }


def test_provide_after_the_total_budget_times_out() -> None:
    engine = m.engine.RoundEngine("tools/call", PARAMS, capabilities=CAPS, total_timeout=10.0)
    engine.start(0.0)
    engine.receive_result(TWO_KEYS, 1.0)
    drain(engine)
    engine.provide("a", ANSWER, 2.0)
    engine.provide("b", ANSWER, 10.5)
    assert engine.state is S.TIMED_OUT
    assert engine.state in m.engine._state.TRANSITIONS[(S.AWAITING_INPUT, I.PROVIDE)]
    events, wait = drain(engine)
    assert not any(isinstance(e, (m.engine.SendRetry, m.engine.SendRequest)) for e in events)
    assert isinstance(events[-1], m.engine.TimedOut)
    assert events[-1].limit == "total"
    assert wait is m.Wait.FINISHED


def test_leg_broken_past_the_reissue_cap_fails() -> None:
    engine = m.engine.RoundEngine("tools/call", PARAMS, max_leg_reissues=0)
    engine.start(0.0)
    drain(engine)
    engine.leg_broken(1.0)
    assert engine.state is S.FAILED
    events, _ = drain(engine)
    assert isinstance(events[-1], m.engine.Failed)
    assert isinstance(events[-1].error, m.engine.RoundLimitExceeded)


def test_leg_broken_after_the_budget_times_out() -> None:
    engine = m.engine.RoundEngine("tools/call", PARAMS, total_timeout=1.0)
    engine.start(0.0)
    drain(engine)
    engine.leg_broken(1.0)
    assert engine.state is S.TIMED_OUT
    events, _ = drain(engine)
    assert isinstance(events[-1], m.engine.TimedOut)
    assert events[-1].limit == "total"


def test_result_after_the_budget_times_out() -> None:
    engine = m.engine.RoundEngine("tools/call", PARAMS, capabilities=CAPS, total_timeout=1.0)
    engine.start(0.0)
    drain(engine)
    engine.receive_result(TWO_KEYS, 1.5)
    assert engine.state is S.TIMED_OUT
    events, _ = drain(engine)
    assert not any(isinstance(e, m.engine.DispatchInput) for e in events)


@pytest.mark.parametrize("state", [S.AWAITING_RESULT, S.AWAITING_INPUT])
def test_misuse_with_an_unknown_key_is_an_error(
    state: m.engine.EngineState, opts: dict[str, Any]
) -> None:
    engine = built(state, opts)
    with pytest.raises(m.LocalProtocolError):
        engine.provide("no-such-key", ANSWER, 2.0)
    assert engine.state is S.ERROR


def test_misuse_with_a_wrongly_typed_answer_is_an_error(opts: dict[str, Any]) -> None:
    engine = built(S.AWAITING_INPUT, opts)
    with pytest.raises(m.LocalProtocolError):
        engine.provide("a", m.wire.ListRootsResult(roots=[]), 2.0)
    assert engine.state is S.ERROR
    engine = built(S.AWAITING_INPUT, opts)
    with pytest.raises(m.LocalProtocolError):
        engine.provide("a", {"action": "maybe"}, 2.0)
    assert engine.state is S.ERROR


def test_fail_with_an_answered_key_is_misuse(opts: dict[str, Any]) -> None:
    engine = built(S.AWAITING_INPUT, opts)
    engine.provide("a", ANSWER, 2.0)
    with pytest.raises(m.LocalProtocolError):
        engine.fail("a", "already answered")
    assert engine.state is S.ERROR


def test_input_timed_out_with_no_input_limit_configured() -> None:
    # input_timed_out() is legal in AWAITING_INPUT (the table says so), even on an
    # engine with neither input_timeout nor total_timeout: the app may run its own
    # timer.  Whatever the engine makes of it, nothing but an MrtrError may escape
    # and the flow must end.
    engine = m.engine.RoundEngine("tools/call", PARAMS, capabilities=CAPS)
    engine.start(0.0)
    engine.receive_result(TWO_KEYS, 1.0)
    drain(engine)
    with contextlib.suppress(m.MrtrError):
        engine.input_timed_out(2.0)
    assert engine.state in m.engine._state.TERMINAL_STATES
    drain(engine)
    assert engine.next_event() is m.Wait.FINISHED
