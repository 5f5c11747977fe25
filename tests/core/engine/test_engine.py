"""The round engine's rules, one test (or a few) per rule of the issue."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import mrtr_core as m

CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}},
    "roots": {},
}
PARAMS: dict[str, Any] = {
    "name": "weather",
    "arguments": {"city": "Oslo"},
    "_meta": {"io.modelcontextprotocol/clientCapabilities": CAPS},
}

FORM = {
    "method": "elicitation/create",
    "params": {
        "message": "Units?",
        "requestedSchema": {"type": "object", "properties": {"u": {"type": "string"}}},
    },
}
URL = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "Log in", "url": "https://x.test/a"},
}
SAMPLING = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 9,
    },
}
SAMPLING_TOOLS = copy.deepcopy(SAMPLING)
SAMPLING_TOOLS["params"]["tools"] = [{"name": "t", "inputSchema": {"type": "object"}}]
ROOTS = {"method": "roots/list"}

ACCEPT = m.wire.ElicitResult(action="accept", content={"u": "metric"})
SAMPLED = m.wire.CreateMessageResult(
    role="assistant", content={"type": "text", "text": "yo"}, model="x"
)
ROOTS_ANSWER = m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///w")])


def input_required(
    requests: dict[str, Any] | None = None, state: str | None = None
) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = requests
    if state is not None:
        result["requestState"] = state
    return result


def drain(engine: m.engine.RoundEngine) -> list[Any]:
    events = []
    while True:
        ev = engine.next_event()
        if isinstance(ev, m.Wait):
            return events
        events.append(ev)


def started(**kwargs: Any) -> m.engine.RoundEngine:
    engine = m.engine.RoundEngine("tools/call", kwargs.pop("params", PARAMS), **kwargs)
    engine.start(0.0)
    return engine


def only(events: list[Any], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


# --- Construction ---------------------------------------------------------------


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "resources/read"])
def test_the_three_mrtr_methods_are_accepted(method: str) -> None:
    engine = m.engine.RoundEngine(method, {})
    assert engine.next_event() is m.Wait.NEED_START


@pytest.mark.parametrize(
    "kwargs",
    [
        {"method": "tools/list"},
        {"params": ["not", "a", "mapping"]},
        {"leg_timeout": 0},
        {"total_timeout": -1.0},
        {"input_timeout": "5"},
        {"max_rounds": -1},
        {"max_rounds": True},
        {"max_state_only_legs": 1.5},
        {"capabilities": ["roots"]},
    ],
)
def test_bad_construction_is_a_local_error(kwargs: dict[str, Any]) -> None:
    args = {"method": "tools/call", "params": {}, **kwargs}
    with pytest.raises(m.LocalProtocolError):
        m.engine.RoundEngine(args.pop("method"), args.pop("params"), **args)


def test_capabilities_default_to_the_request_meta_then_to_none() -> None:
    assert m.engine.RoundEngine("tools/call", PARAMS).capabilities == CAPS
    assert m.engine.RoundEngine("tools/call", {}).capabilities == {}
    assert m.engine.RoundEngine("tools/call", {"_meta": {"x": 1}}).capabilities == {}
    explicit = {"roots": {}}
    assert (
        m.engine.RoundEngine("tools/call", PARAMS, capabilities=explicit).capabilities is explicit
    )


# --- A complete flow ---------------------------------------------------------------


def test_complete_result_and_missing_result_type_are_done() -> None:
    for result in ({"resultType": "complete", "content": []}, {"content": []}):
        engine = started()
        (send,) = drain(engine)
        assert isinstance(send, m.engine.SendRequest) and send.leg == 1 and not send.reissue
        assert engine.next_event() is m.Wait.NEED_RESULT
        engine.receive_result(result, 1.0)
        assert drain(engine) == [m.engine.Done(result=result)]
        assert engine.state is m.engine.EngineState.DONE
        assert engine.next_event() is m.Wait.FINISHED


def test_two_rounds_then_done() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"a": FORM}, "s1"), 1.0)
    events = drain(engine)
    assert events[0] == m.engine.RoundStarted(
        round=1, keys=("a",), kinds=("elicitation/create",), input_timeout=None
    )
    assert isinstance(events[1], m.engine.DispatchInput) and events[1].key == "a"
    assert isinstance(events[1].request, m.wire.ElicitFormRequest)
    assert engine.next_event() is m.Wait.NEED_INPUT
    assert engine.pending_keys == ("a",)
    engine.provide("a", ACCEPT, 2.0)
    (retry,) = drain(engine)
    assert isinstance(retry, m.engine.SendRetry)
    assert retry.round == 1 and retry.leg == 2 and retry.delay == 0.0
    assert retry.params["inputResponses"] == {"a": {"action": "accept", "content": {"u": "metric"}}}
    assert retry.params["requestState"] == "s1"
    engine.receive_result(input_required({"b": SAMPLING, "c": ROOTS, "d": URL}), 3.0)
    events = drain(engine)
    assert events[0].kinds == ("sampling/createMessage", "roots/list", "elicitation/create#url")
    assert [e.key for e in only(events, m.engine.DispatchInput)] == ["b", "c", "d"]
    engine.provide("c", ROOTS_ANSWER, 4.0)
    assert drain(engine) == []
    engine.provide(
        "b", {"role": "assistant", "content": {"type": "text", "text": "t"}, "model": "m"}, 4.0
    )
    engine.provide("d", m.wire.ElicitResult(action="decline"), 4.0)
    (retry,) = drain(engine)
    assert set(retry.params["inputResponses"]) == {"b", "c", "d"}
    assert "requestState" not in retry.params  # the latest result had none
    engine.receive_result({"resultType": "complete", "content": [1]}, 5.0)
    assert drain(engine) == [m.engine.Done(result={"resultType": "complete", "content": [1]})]
    assert engine.legs == 3 and engine.round == 2


# --- Retry params --------------------------------------------------------------------


def test_retry_params_strip_stale_fields_and_never_mutate_the_original() -> None:
    original = {**PARAMS, "inputResponses": {"old": {"action": "cancel"}}, "requestState": "stale"}
    frozen = copy.deepcopy(original)
    engine = started(params=original)
    (first,) = drain(engine)
    assert "inputResponses" not in first.params and "requestState" not in first.params
    engine.receive_result(input_required({"k": FORM}), 1.0)
    drain(engine)
    engine.provide("k", ACCEPT, 1.0)
    (retry,) = drain(engine)
    assert set(retry.params["inputResponses"]) == {"k"}
    assert "requestState" not in retry.params
    assert original == frozen


def test_answers_are_never_accumulated_across_rounds() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"one": FORM}, "s"), 1.0)
    drain(engine)
    engine.provide("one", ACCEPT, 1.0)
    drain(engine)
    engine.receive_result(input_required({"two": ROOTS}, "s"), 2.0)
    drain(engine)
    engine.provide("two", ROOTS_ANSWER, 2.0)
    (retry,) = drain(engine)
    assert list(retry.params["inputResponses"]) == ["two"]


def test_request_state_is_echoed_as_the_same_str() -> None:
    state = 'é\u2028\x00🙂 "quoted" \\ line\nbreak'
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"k": FORM}, state), 1.0)
    drain(engine)
    engine.provide("k", ACCEPT, 1.0)
    (retry,) = drain(engine)
    assert retry.params["requestState"] is state
    line = m.wire.Codec("stdlib").encode(m.Request(id=2, method="tools/call", params=retry.params))
    assert b"\n" not in line
    assert json.loads(line)["params"]["requestState"] == state


def test_empty_request_state_is_still_echoed() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"k": FORM}, ""), 1.0)
    drain(engine)
    engine.provide("k", ACCEPT, 1.0)
    (retry,) = drain(engine)
    assert retry.params["requestState"] == ""


def test_manual_mode_helper() -> None:
    original = {"name": "t", "requestState": "old", "inputResponses": {"x": {}}}
    params = m.engine.build_retry_params(original, {"k": ACCEPT}, "new")
    assert params == {
        "name": "t",
        "inputResponses": {"k": {"action": "accept", "content": {"u": "metric"}}},
        "requestState": "new",
    }
    assert m.engine.build_retry_params(original) == {"name": "t"}
    assert m.engine.build_retry_params(original, {}, None) == {"name": "t"}
    assert original["requestState"] == "old"
    with pytest.raises(m.LocalProtocolError):
        m.engine.build_retry_params(["x"])  # type: ignore[arg-type]
    with pytest.raises(m.LocalProtocolError):
        m.engine.build_retry_params({}, None, b"bytes")  # type: ignore[arg-type]


# --- requestState-only legs ------------------------------------------------------------


def test_state_only_legs_are_paced_and_reset_by_an_input_round() -> None:
    engine = started()
    drain(engine)
    delays = []
    for i in range(4):
        engine.receive_result(input_required(None, f"s{i}"), float(i))
        started_ev, retry = drain(engine)
        assert started_ev == m.engine.RoundStarted(
            round=i + 1, keys=(), kinds=(), input_timeout=None
        )
        assert "inputResponses" not in retry.params and retry.params["requestState"] == f"s{i}"
        delays.append(retry.delay)
    assert delays == [0.05, 0.1, 0.2, 0.25]
    engine.receive_result(input_required({"k": FORM}, "x"), 5.0)
    drain(engine)
    engine.provide("k", ACCEPT, 5.0)
    drain(engine)
    engine.receive_result(input_required(None, "y"), 6.0)
    assert drain(engine)[1].delay == 0.05


def test_empty_input_requests_with_state_is_a_state_only_round() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({}, "s"), 1.0)
    _, retry = drain(engine)
    assert isinstance(retry, m.engine.SendRetry) and "inputResponses" not in retry.params


def test_state_only_legs_are_capped() -> None:
    engine = started(max_state_only_legs=2)
    drain(engine)
    for i in range(2):
        engine.receive_result(input_required(None, "s"), float(i))
        drain(engine)
    last = input_required(None, "s")
    engine.receive_result(last, 3.0)
    (failed,) = drain(engine)
    assert isinstance(failed.error, m.engine.RoundLimitExceeded)
    assert failed.error.limit_name == "max_state_only_legs" and failed.error.last_result is last


# --- Round cap -------------------------------------------------------------------------


def test_round_cap_allows_max_rounds_retries_then_fails_with_the_payload() -> None:
    engine = started()
    sends = drain(engine)
    for i in range(10):
        engine.receive_result(input_required({f"k{i}": FORM}, str(i)), float(i))
        drain(engine)
        engine.provide(f"k{i}", ACCEPT, float(i))
        sends += drain(engine)
    assert len(sends) == 11  # the original leg and ten retries
    last = input_required({"k10": FORM}, "10")
    engine.receive_result(last, 11.0)
    events = drain(engine)
    assert not only(events, m.engine.DispatchInput)
    (failed,) = events
    assert isinstance(failed.error, m.engine.RoundLimitExceeded)
    assert failed.error.limit_name == "max_rounds" and failed.error.limit == 10
    assert failed.error.last_result is last


def test_max_rounds_zero_means_no_retry_at_all() -> None:
    engine = started(max_rounds=0)
    drain(engine)
    engine.receive_result(input_required({"k": FORM}), 1.0)
    (failed,) = drain(engine)
    assert isinstance(failed, m.engine.Failed) and isinstance(
        failed.error, m.engine.RoundLimitExceeded
    )


# --- Invalid input_required results ------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "key", "method"),
    [
        ({"resultType": "maybe"}, None, None),
        ({"resultType": "input_required"}, None, None),
        ({"resultType": "input_required", "inputRequests": {}}, None, None),
        ({"resultType": "input_required", "inputRequests": [FORM]}, None, None),
        ({"resultType": "input_required", "requestState": 7}, None, None),
        (input_required({"k": {"method": "ping", "params": {}}}), "k", "ping"),
        (
            input_required({"k": {"method": "elicitation/create", "params": {"mode": "dance"}}}),
            "k",
            "elicitation/create",
        ),
        (
            input_required({"k": {"method": "sampling/createMessage", "params": {"maxTokens": 1}}}),
            "k",
            "sampling/createMessage",
        ),
        (input_required({"k": "not an object"}), "k", None),
        (input_required({"k": {"method": 5}}), "k", None),
    ],
)
def test_invalid_input_required_fails_without_retry(
    result: dict[str, Any], key: str | None, method: str | None
) -> None:
    engine = started()
    drain(engine)
    engine.receive_result(result, 1.0)
    events = drain(engine)
    assert len(events) == 1 and isinstance(events[0], m.engine.Failed)
    error = events[0].error
    assert isinstance(error, m.engine.InvalidInputRequired) and isinstance(
        error, m.RemoteProtocolError
    )
    assert error.key == key and error.method == method
    assert engine.state is m.engine.EngineState.FAILED


@pytest.mark.parametrize(
    ("caps", "ask", "required"),
    [
        ({}, FORM, {"elicitation": {"form": {}}}),
        ({"elicitation": {"url": {}}}, FORM, {"elicitation": {"form": {}}}),
        ({"elicitation": {}}, URL, {"elicitation": {"url": {}}}),
        ({"elicitation": {"form": {}}}, URL, {"elicitation": {"url": {}}}),
        ({}, SAMPLING, {"sampling": {}}),
        ({}, SAMPLING_TOOLS, {"sampling": {"tools": {}}}),
        ({"sampling": {}}, SAMPLING_TOOLS, {"sampling": {"tools": {}}}),
        ({"elicitation": {}}, ROOTS, {"roots": {}}),
    ],
)
def test_undeclared_capability_fails(
    caps: dict[str, Any], ask: dict[str, Any], required: dict[str, Any]
) -> None:
    engine = started(capabilities=caps)
    drain(engine)
    engine.receive_result(
        input_required({"ok": FORM, "bad": ask} if caps.get("elicitation") == {} else {"bad": ask}),
        1.0,
    )
    (failed,) = drain(engine)
    error = failed.error
    assert isinstance(error, m.engine.MissingCapability)
    assert error.key == "bad" and error.required == required
    assert error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
    assert error.data == {"requiredCapabilities": required}


@pytest.mark.parametrize(
    ("caps", "ask"),
    [
        ({"elicitation": {}}, FORM),
        ({"elicitation": {"form": {}}}, FORM),
        ({"elicitation": {"url": {}}}, URL),
        ({"sampling": {}}, SAMPLING),
        ({"sampling": {"tools": {}}}, SAMPLING_TOOLS),
        ({"roots": {}}, ROOTS),
    ],
)
def test_declared_capability_dispatches(caps: dict[str, Any], ask: dict[str, Any]) -> None:
    engine = started(capabilities=caps)
    drain(engine)
    engine.receive_result(input_required({"k": ask}), 1.0)
    assert len(only(drain(engine), m.engine.DispatchInput)) == 1


# --- Errors, timeouts, breaks ---------------------------------------------------------------


def test_error_response_ends_the_flow_with_that_error() -> None:
    for error in (
        m.ErrorObject(code=-32602, message="bad", data={"x": 1}),
        {"code": -32602, "message": "bad", "data": {"x": 1}},
    ):
        engine = started()
        drain(engine)
        engine.receive_error(error, 1.0)
        (failed,) = drain(engine)
        assert isinstance(failed.error, m.PeerError)
        assert (failed.error.code, failed.error.message, failed.error.data) == (
            -32602,
            "bad",
            {"x": 1},
        )


def test_error_response_with_junk_fields_and_misuse() -> None:
    engine = started()
    drain(engine)
    engine.receive_error({"code": "x", "message": None}, 1.0)
    (failed,) = drain(engine)
    assert failed.error.code == 0 and failed.error.message == ""
    engine = started()
    with pytest.raises(m.LocalProtocolError):
        engine.receive_error("boom", 1.0)  # type: ignore[arg-type]
    assert engine.state is m.engine.EngineState.ERROR


def test_result_must_be_a_mapping() -> None:
    engine = started()
    with pytest.raises(m.LocalProtocolError):
        engine.receive_result(["x"], 1.0)  # type: ignore[arg-type]
    assert engine.state is m.engine.EngineState.ERROR


def test_leg_timeout_cancels_the_leg_then_times_out() -> None:
    engine = started(leg_timeout=5.0)
    (send,) = drain(engine)
    assert send.timeout == 5.0
    engine.leg_timed_out(5.5)
    cancel, timed_out = drain(engine)
    assert cancel == m.engine.CancelLeg(leg=1)
    assert timed_out == m.engine.TimedOut(elapsed=5.5, budget=5.0, limit="leg")


def test_leg_timeout_without_a_configured_timeout() -> None:
    engine = started()
    drain(engine)
    engine.leg_timed_out(3.0)
    assert drain(engine)[1] == m.engine.TimedOut(elapsed=3.0, budget=None, limit="leg")


def test_leg_timeout_covers_server_time_only() -> None:
    engine = started(leg_timeout=5.0)
    drain(engine)
    engine.receive_result(input_required({"k": FORM}), 1.0)
    drain(engine)
    engine.provide("k", ACCEPT, 1000.0)  # a slow human is not charged to any leg
    (retry,) = drain(engine)
    assert retry.timeout == 5.0
    engine.leg_timed_out(1005.0)
    assert drain(engine)[1] == m.engine.TimedOut(elapsed=5.0, budget=5.0, limit="leg")


def test_leg_broken_reissues_the_same_params_bounded() -> None:
    engine = started(max_leg_reissues=2)
    (first,) = drain(engine)
    engine.leg_broken(1.0)
    (again,) = drain(engine)
    assert isinstance(again, m.engine.SendRequest) and again.reissue and again.leg == 2
    assert again.params == first.params
    engine.receive_result(input_required({"k": FORM}, "s"), 2.0)
    drain(engine)
    engine.provide("k", ACCEPT, 2.0)
    (retry,) = drain(engine)
    engine.leg_broken(3.0)
    (re_retry,) = drain(engine)
    assert (
        isinstance(re_retry, m.engine.SendRetry)
        and re_retry.reissue
        and re_retry.params == retry.params
    )
    engine.leg_broken(4.0)
    drain(engine)
    engine.leg_broken(5.0)
    (failed,) = drain(engine)
    assert (
        isinstance(failed.error, m.engine.RoundLimitExceeded)
        and failed.error.limit_name == "max_leg_reissues"
    )


# --- The whole-flow budget ---------------------------------------------------------------


def test_leg_timeout_is_capped_by_the_remaining_budget() -> None:
    engine = started(leg_timeout=30.0, total_timeout=10.0)
    (send,) = drain(engine)
    assert send.timeout == 10.0
    engine.leg_timed_out(10.0)
    assert drain(engine)[1] == m.engine.TimedOut(elapsed=10.0, budget=10.0, limit="total")


def test_a_leg_cut_by_the_total_budget_reports_the_whole_flow_not_the_leg() -> None:
    # The retry is sent at 12 s with 8 s of the 20 s budget left; when its timer
    # fires, the report measures the flow from start against total_timeout, as
    # every limit="total" report does, not the leg from its send against those 8 s.
    engine = started(leg_timeout=30.0, total_timeout=20.0)
    drain(engine)
    engine.receive_result(input_required({"k": FORM}), 4.0)
    drain(engine)
    engine.provide("k", ACCEPT, 12.0)
    (retry,) = drain(engine)
    assert isinstance(retry, m.engine.SendRetry) and retry.timeout == 8.0
    engine.leg_timed_out(20.0)
    assert drain(engine) == [
        m.engine.CancelLeg(leg=2),
        m.engine.TimedOut(elapsed=20.0, budget=20.0, limit="total"),
    ]


def test_budget_is_checked_before_any_input_is_dispatched() -> None:
    engine = started(total_timeout=10.0)
    drain(engine)
    engine.receive_result(input_required({"k": FORM}), 10.0)
    events = drain(engine)
    assert events == [m.engine.TimedOut(elapsed=10.0, budget=10.0, limit="total")]


def test_budget_is_checked_again_before_the_retry() -> None:
    engine = started(total_timeout=10.0, leg_timeout=4.0)
    drain(engine)
    engine.receive_result(input_required({"k": FORM}), 2.0)
    (round_started, _) = drain(engine)
    assert round_started.input_timeout == 8.0  # no input_timeout: the remaining budget
    engine.provide("k", ACCEPT, 8.0)
    (retry,) = drain(engine)
    assert retry.timeout == 2.0  # min(leg_timeout, remaining)
    engine.receive_result(input_required({"k": FORM}), 9.0)
    drain(engine)
    engine.provide("k", ACCEPT, 10.5)  # past the budget and the input deadline
    cancel_free = drain(engine)
    assert cancel_free == [m.engine.TimedOut(elapsed=10.5, budget=10.0, limit="total")]


def test_state_only_retry_is_not_sent_when_its_delay_outlasts_the_budget() -> None:
    engine = started(total_timeout=1.0)
    drain(engine)
    engine.receive_result(input_required(None, "s"), 0.97)
    events = drain(engine)
    assert isinstance(events[-1], m.engine.TimedOut) and events[-1].limit == "total"
    assert not only(events, m.engine.SendRetry)


def test_state_only_retry_timeout_excludes_its_delay() -> None:
    engine = started(total_timeout=1.0)
    drain(engine)
    engine.receive_result(input_required(None, "s"), 0.5)
    retry = drain(engine)[-1]
    assert retry.delay == 0.05 and retry.timeout == pytest.approx(0.45)


def test_input_timeout_bounds_each_round() -> None:
    engine = started(input_timeout=60.0)
    drain(engine)
    engine.receive_result(input_required({"a": FORM, "b": ROOTS}), 1.0)
    round_started = drain(engine)[0]
    assert round_started.input_timeout == 60.0
    engine.provide("a", ACCEPT, 30.0)
    engine.input_timed_out(61.0)
    cancel, timed_out = drain(engine)
    assert cancel == m.engine.CancelInputs(keys=("b",))
    assert timed_out == m.engine.TimedOut(elapsed=60.0, budget=60.0, limit="input")


def test_a_late_answer_is_dropped_and_times_out() -> None:
    engine = started(input_timeout=10.0)
    drain(engine)
    engine.receive_result(input_required({"a": FORM, "b": ROOTS}), 0.0)
    drain(engine)
    engine.provide("a", ACCEPT, 11.0)
    cancel, timed_out = drain(engine)
    assert cancel == m.engine.CancelInputs(keys=("b",)) and timed_out.limit == "input"
    engine = started(input_timeout=10.0)
    drain(engine)
    engine.receive_result(input_required({"a": FORM}), 0.0)
    drain(engine)
    engine.provide("a", ACCEPT, 11.0)
    assert drain(engine) == [m.engine.TimedOut(elapsed=11.0, budget=10.0, limit="input")]


def test_input_wait_capped_by_budget_reports_total() -> None:
    engine = started(input_timeout=60.0, total_timeout=20.0)
    drain(engine)
    engine.receive_result(input_required({"a": FORM}), 5.0)
    assert drain(engine)[0].input_timeout == 15.0
    engine.input_timed_out(20.0)
    (cancel, timed_out) = drain(engine)
    assert cancel == m.engine.CancelInputs(keys=("a",))
    assert timed_out == m.engine.TimedOut(elapsed=20.0, budget=20.0, limit="total")


# --- provide / fail / cancel --------------------------------------------------------------


def test_fail_cancels_the_other_keys_and_ends_the_flow() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"a": FORM, "b": ROOTS, "c": SAMPLING}), 1.0)
    drain(engine)
    engine.provide("b", ROOTS_ANSWER, 1.0)
    engine.fail("a", "handler crashed")
    cancel, failed = drain(engine)
    assert cancel == m.engine.CancelInputs(keys=("c",))
    assert isinstance(failed.error, m.engine.InputFailed) and failed.error.key == "a"
    assert failed.error.reason == "handler crashed"


def test_fail_on_the_last_key_has_nothing_to_cancel() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"a": FORM}), 1.0)
    drain(engine)
    engine.fail("a", "no")
    (failed,) = drain(engine)
    assert isinstance(failed, m.engine.Failed)


@pytest.mark.parametrize(
    ("key", "answer"),
    [
        ("nope", ACCEPT),
        ("a", ROOTS_ANSWER),
        ("a", {"action": "maybe"}),
        ("a", "accept"),
    ],
)
def test_bad_provide_is_misuse(key: str, answer: Any) -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"a": FORM, "b": ROOTS}), 1.0)
    drain(engine)
    with pytest.raises(m.LocalProtocolError):
        engine.provide(key, answer, 1.0)
    assert engine.state is m.engine.EngineState.ERROR


def test_answering_a_key_twice_is_misuse() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"a": FORM, "b": ROOTS}), 1.0)
    drain(engine)
    engine.provide("a", ACCEPT, 1.0)
    with pytest.raises(m.LocalProtocolError):
        engine.provide("a", ACCEPT, 1.0)
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"a": FORM, "b": ROOTS}), 1.0)
    drain(engine)
    with pytest.raises(m.LocalProtocolError):
        engine.fail("zzz", "x")


def test_cancel_in_each_open_state() -> None:
    idle = m.engine.RoundEngine("tools/call", PARAMS)
    idle.cancel()
    assert drain(idle) == [m.engine.Cancelled()]

    in_flight = started()
    drain(in_flight)
    in_flight.cancel(1.0)
    assert drain(in_flight) == [m.engine.CancelLeg(leg=1), m.engine.Cancelled()]

    waiting = started()
    drain(waiting)
    waiting.receive_result(input_required({"a": FORM, "b": ROOTS}), 1.0)
    drain(waiting)
    waiting.provide("a", ACCEPT, 1.0)
    waiting.cancel(2.0)
    events = drain(waiting)
    assert events == [m.engine.CancelInputs(keys=("b",)), m.engine.Cancelled()]
    assert waiting.state is m.engine.EngineState.CANCELLED


def test_cancel_after_the_end_is_a_no_op() -> None:
    engine = started()
    drain(engine)
    engine.receive_result({"resultType": "complete"}, 1.0)
    drain(engine)
    engine.cancel(2.0)
    assert drain(engine) == [] and engine.state is m.engine.EngineState.DONE


def test_misuse_after_the_end_keeps_the_terminal_state() -> None:
    engine = started()
    drain(engine)
    engine.receive_result({"resultType": "complete"}, 1.0)
    with pytest.raises(m.LocalProtocolError):
        engine.start(2.0)
    assert engine.state is m.engine.EngineState.DONE


# --- Snapshot and restore -----------------------------------------------------------------


def test_snapshot_mid_round_restores_elsewhere_and_redispatches() -> None:
    engine = started(total_timeout=100.0, input_timeout=50.0)
    drain(engine)
    engine.receive_result(input_required({"a": FORM, "b": ROOTS}, "st"), 10.0)
    drain(engine)
    engine.provide("a", ACCEPT, 20.0)
    snap = engine.snapshot(30.0)
    snap = json.loads(json.dumps(snap))  # survives a trip through storage
    restored = m.engine.RoundEngine.restore(snap, 5000.0)  # another process, another clock
    events = drain(restored)
    assert events[0] == m.engine.RoundStarted(
        round=1, keys=("b",), kinds=("roots/list",), input_timeout=30.0
    )
    assert [e.key for e in only(events, m.engine.DispatchInput)] == ["b"]
    restored.provide("b", ROOTS_ANSWER, 5001.0)
    (retry,) = drain(restored)
    assert set(retry.params["inputResponses"]) == {"a", "b"}
    assert retry.params["requestState"] == "st"
    assert retry.timeout == pytest.approx(100.0 - 31.0)


def test_snapshot_with_a_leg_in_flight_reissues_it() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required(None, "s"), 1.0)
    _, retry = drain(engine)
    restored = m.engine.RoundEngine.restore(engine.snapshot(2.0), 0.0)
    (again,) = drain(restored)
    assert isinstance(again, m.engine.SendRetry) and again.reissue and again.params == retry.params
    idle = m.engine.RoundEngine.restore(
        m.engine.RoundEngine("prompts/get", {"name": "p"}).snapshot(0.0), 0.0
    )
    assert idle.next_event() is m.Wait.NEED_START and idle.method == "prompts/get"
    first = started()
    drain(first)
    (resent,) = drain(m.engine.RoundEngine.restore(first.snapshot(1.0), 0.0))
    assert isinstance(resent, m.engine.SendRequest) and resent.reissue


def test_snapshot_refuses_undelivered_events_and_finished_flows() -> None:
    engine = started()
    with pytest.raises(m.LocalProtocolError):
        engine.snapshot(0.0)
    drain(engine)
    engine.receive_result({}, 1.0)
    drain(engine)
    with pytest.raises(m.LocalProtocolError):
        engine.snapshot(1.0)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: s.update(version=99),
        lambda s: s.update(state="done"),
        lambda s: s.update(state="bogus"),
        lambda s: s.pop("legs"),
        lambda s: s.update(request_state=5),
        lambda s: s.update(method="tools/list"),
        lambda s: s.update(pending={"k": {"method": "nope"}}),
        lambda s: s.update(options="x"),
    ],
)
def test_restore_rejects_bad_snapshots(mutate: Any) -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"k": FORM}, "s"), 1.0)
    drain(engine)
    snap = engine.snapshot(1.0)
    mutate(snap)
    with pytest.raises(m.LocalProtocolError):
        m.engine.RoundEngine.restore(snap, 0.0)


def test_restore_keeps_last_result_and_pace() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required(None, "s"), 1.0)
    drain(engine)
    restored = m.engine.RoundEngine.restore(engine.snapshot(1.0), 0.0)
    drain(restored)
    assert restored.last_input_required == input_required(None, "s")
    restored.receive_result(input_required(None, "t"), 1.0)
    assert drain(restored)[-1].delay == 0.1


def test_input_timed_out_without_any_configured_limit() -> None:
    engine = started()
    drain(engine)
    engine.receive_result(input_required({"a": FORM}), 2.0)
    drain(engine)
    engine.input_timed_out(9.0)  # the driver's own timer (a closed dialog, say)
    assert drain(engine) == [
        m.engine.CancelInputs(keys=("a",)),
        m.engine.TimedOut(elapsed=7.0, budget=None, limit="input"),
    ]


def test_a_budget_bound_retry_leg_times_out_against_the_budget() -> None:
    engine = started(leg_timeout=30.0, total_timeout=50.0)
    drain(engine)
    engine.receive_result(input_required({"a": FORM}), 5.0)
    drain(engine)
    engine.provide("a", ACCEPT, 40.0)
    (retry,) = drain(engine)
    assert retry.timeout == 10.0
    engine.leg_timed_out(50.0)
    assert drain(engine) == [
        m.engine.CancelLeg(leg=2),
        m.engine.TimedOut(elapsed=50.0, budget=50.0, limit="total"),
    ]


@pytest.mark.parametrize(
    ("include_context", "caps", "allowed"),
    [
        (None, {"sampling": {}}, True),
        ("none", {"sampling": {}}, True),
        ("thisServer", {"sampling": {}}, False),
        ("allServers", {"sampling": {"context": {}}}, True),
        ("allServers", {}, False),
    ],
)
def test_include_context_needs_sampling_context(
    include_context: str | None, caps: dict[str, Any], allowed: bool
) -> None:
    ask = copy.deepcopy(SAMPLING)
    if include_context is not None:
        ask["params"]["includeContext"] = include_context
    engine = started(capabilities=caps)
    drain(engine)
    engine.receive_result(input_required({"k": ask}), 1.0)
    events = drain(engine)
    if allowed:
        assert len(only(events, m.engine.DispatchInput)) == 1
    else:
        (failed,) = events
        assert isinstance(failed.error, m.engine.MissingCapability)
        assert "context" in failed.error.required["sampling"]


def test_restore_after_the_input_deadline_passed_times_out_without_dispatching() -> None:
    engine = started(input_timeout=10.0)
    drain(engine)
    engine.receive_result(input_required({"a": FORM}), 1.0)
    drain(engine)
    # Times in a snapshot are elapsed seconds: time in storage is not counted (no clock
    # is shared between processes), but a snapshot taken after the deadline is expired.
    snap = engine.snapshot(20.0)
    restored = m.engine.RoundEngine.restore(snap, 100.0)
    assert restored.state is m.engine.EngineState.TIMED_OUT
    assert drain(restored) == [m.engine.TimedOut(elapsed=19.0, budget=10.0, limit="input")]


def test_restore_exactly_at_the_input_deadline_times_out_rather_than_prompt_for_0_s() -> None:
    # The live engine still takes an answer given at the deadline itself (only a later
    # one is late), but a restored round with no time left is not shown to anyone: a
    # zero-second prompt cannot be answered.  It times out at once, dispatching nothing.
    engine = started(input_timeout=10.0)
    drain(engine)
    engine.receive_result(input_required({"a": FORM}), 1.0)
    drain(engine)
    restored = m.engine.RoundEngine.restore(engine.snapshot(11.0), 500.0)
    assert restored.state is m.engine.EngineState.TIMED_OUT
    assert drain(restored) == [m.engine.TimedOut(elapsed=10.0, budget=10.0, limit="input")]
