"""The client's polling engine: every (state, input) pair of its table, the events of a
task's life, and each way a hostile server is refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_core import ErrorObject, LocalProtocolError, PeerError, RemoteProtocolError
from mrtr_core._wait import FINISHED, NEED_INPUT, NEED_RESULT
from mrtr_core.engine import (
    CancelInputs,
    Cancelled,
    DispatchInput,
    Done,
    EngineState,
    Failed,
    InputFailed,
    MissingCapability,
    TimedOut,
)
from mrtr_core.tasks import (
    CreateTaskResult,
    DetailedTask,
    SendTaskRequest,
    TaskPoller,
    TaskStatusChanged,
)
from mrtr_core.tasks._poll import TRANSITIONS, _PollInput
from mrtr_core.wire import ElicitFormRequest, ElicitResult

TASK_ID = "task-1"
STAMP = "2026-01-01T00:00:00Z"
CAPS = {"elicitation": {}, "sampling": {}, "roots": {}}
ASK = {
    "method": "elicitation/create",
    "params": {
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 5,
    },
}
ACCEPT = {"action": "accept", "content": {"name": "Ada"}}


def created(*, status: str = "working", interval: int | None = 500, **extra: Any) -> Any:
    raw: dict[str, Any] = {
        "resultType": "task",
        "taskId": TASK_ID,
        "status": status,
        "createdAt": STAMP,
        "lastUpdatedAt": STAMP,
        "ttlMs": 60000,
        **extra,
    }
    if interval is not None:
        raw["pollIntervalMs"] = interval
    return CreateTaskResult.from_result(raw)


def got(status: str = "working", *, interval: int | None = 500, **fields: Any) -> dict[str, Any]:
    """A tasks/get result."""
    raw: dict[str, Any] = {
        "resultType": "complete",
        "taskId": TASK_ID,
        "status": status,
        "createdAt": STAMP,
        "lastUpdatedAt": STAMP,
        "ttlMs": 60000,
        **fields,
    }
    if interval is not None:
        raw["pollIntervalMs"] = interval
    return raw


def asking(*keys: str, **fields: Any) -> dict[str, Any]:
    return got("input_required", inputRequests={key: ASK for key in keys}, **fields)


def drain(poller: TaskPoller) -> list[Any]:
    out = []
    while not isinstance(event := poller.next_event(), type(FINISHED)):
        out.append(event)
    return out


def poller(**options: Any) -> TaskPoller:
    options.setdefault("capabilities", CAPS)
    made = TaskPoller(created(), 0.0, **options)
    drain(made)
    return made


def sends(events: list[Any]) -> list[tuple[str, Any]]:
    return [
        (e.request.method, e.request.to_params()) for e in events if isinstance(e, SendTaskRequest)
    ]


# --- the table, pair by pair --------------------------------------------------------------

S = EngineState
I = _PollInput  # noqa: E741
INPUTS = [I.RESULT, I.ERROR, I.PROVIDE, I.FAIL, I.TIME_OUT, I.CANCEL]
LIVE = [S.AWAITING_RESULT, S.AWAITING_INPUT]
ENDS = [S.DONE, S.FAILED, S.TIMED_OUT, S.CANCELLED, S.ERROR]
# Written out independently: which inputs each state takes.
TAKES = {
    S.AWAITING_RESULT: {I.RESULT, I.ERROR, I.TIME_OUT, I.CANCEL},
    S.AWAITING_INPUT: {I.RESULT, I.ERROR, I.PROVIDE, I.FAIL, I.TIME_OUT, I.CANCEL},
    **{state: {I.CANCEL} for state in ENDS},
}


def in_state(state: EngineState) -> TaskPoller:
    made = poller(timeout=100.0)
    if state is S.AWAITING_INPUT:
        made.receive_result(asking("a"), 1.0)
    elif state is S.DONE:
        made.receive_result(got("completed", result={"content": []}), 1.0)
    elif state is S.FAILED:
        made.receive_error({"code": -32602, "message": "no such task"}, 1.0)
    elif state is S.TIMED_OUT:
        made.timed_out(100.0)
    elif state is S.CANCELLED:
        made.cancel(1.0)
    elif state is S.ERROR:
        with pytest.raises(LocalProtocolError):
            made.provide("nobody", ACCEPT, 1.0)
    drain(made)
    assert made.state is state
    return made


def feed(made: TaskPoller, given_input: str) -> None:
    if given_input == I.RESULT:
        made.receive_result(got(), 2.0)
    elif given_input == I.ERROR:
        made.receive_error(ErrorObject(code=-32603, message="boom"), 2.0)
    elif given_input == I.PROVIDE:
        made.provide("a", ACCEPT, 2.0)
    elif given_input == I.FAIL:
        made.fail("a", "no person")
    elif given_input == I.TIME_OUT:
        made.timed_out(100.0)
    else:
        made.cancel(2.0)


@pytest.mark.parametrize("state", [*LIVE, *ENDS], ids=lambda s: s.value)
@pytest.mark.parametrize("given_input", INPUTS)
def test_every_state_and_input(state: EngineState, given_input: str) -> None:
    made = in_state(state)
    assert ((state, given_input) in TRANSITIONS) == (given_input in TAKES[state])
    if given_input not in TAKES[state]:
        with pytest.raises(LocalProtocolError, match="is not allowed in state"):
            feed(made, given_input)
        assert made.state is (state if state in ENDS else S.ERROR)
        return
    feed(made, given_input)
    assert made.state in TRANSITIONS[(state, given_input)]


def test_the_table_names_only_known_states_and_inputs() -> None:
    for (state, given_input), targets in TRANSITIONS.items():
        assert state in TAKES and given_input in TAKES[state]
        assert targets <= {*LIVE, *ENDS}


# --- a task's life ------------------------------------------------------------------------


def test_a_task_that_works_then_completes() -> None:
    made = TaskPoller(created(), 10.0, capabilities=CAPS)
    assert made.task_id == TASK_ID and made.interval == 0.5
    first = drain(made)
    assert first == [
        TaskStatusChanged(status="working", status_message=None, poll=0),
        SendTaskRequest(request=first[1].request, delay=0.5),
    ]
    assert sends(first) == [("tasks/get", {"taskId": TASK_ID})]
    assert made.next_event() is NEED_RESULT
    made.receive_result(got(interval=800), 10.5)
    events = drain(made)
    # the same status: no change handed out; the server's new interval is followed
    assert [type(e) for e in events] == [SendTaskRequest]
    assert events[0].delay == 0.8 and made.polls == 1
    made.receive_result(got(statusMessage="half way"), 11.3)
    events = drain(made)
    assert events[0] == TaskStatusChanged(status="working", status_message="half way", poll=2)
    result = {"content": [{"type": "text", "text": "done"}], "isError": True}
    made.receive_result(got("completed", result=result, statusMessage="half way"), 12.0)
    events = drain(made)
    assert events == [
        TaskStatusChanged(status="completed", status_message="half way", poll=3),
        Done(result=result),
    ]
    assert made.state is S.DONE and made.status == "completed"
    assert made.next_event() is FINISHED
    made.cancel(13.0)  # a harmless race: nothing is sent
    assert drain(made) == []


def test_a_failed_task_fails_with_its_inlined_error() -> None:
    made = poller()
    made.receive_result(
        got("failed", error={"code": -32603, "message": "disk full", "data": {"x": 1}}), 1.0
    )
    events = drain(made)
    assert isinstance(events[-1], Failed)
    error = events[-1].error
    assert isinstance(error, PeerError)
    assert (error.code, error.message, error.data) == (-32603, "disk full", {"x": 1})
    assert not sends(events)  # the server ended it: nothing to cancel


def test_a_task_the_server_cancelled_ends_cancelled_and_says_so() -> None:
    made = poller()
    made.receive_result(asking("a"), 1.0)
    drain(made)
    made.receive_result(got("cancelled", statusMessage="operator"), 2.0)
    events = drain(made)
    assert events == [
        TaskStatusChanged(status="cancelled", status_message="operator", poll=2),
        CancelInputs(keys=("a",)),
        Cancelled(),
    ]
    assert made.status == "cancelled"


def test_asks_are_handed_out_once_and_answered_by_update() -> None:
    made = poller()
    made.receive_result(asking("a", "b"), 1.0)
    events = drain(made)
    dispatched = [e for e in events if isinstance(e, DispatchInput)]
    assert [(e.key, e.round) for e in dispatched] == [("a", 1), ("b", 1)]
    assert isinstance(dispatched[0].request, ElicitFormRequest)
    assert made.next_event() is NEED_INPUT and made.pending_keys == ("a", "b")
    assert sends(events) == [("tasks/get", {"taskId": TASK_ID})]  # polling goes on
    # the next poll repeats the asks: nothing new is handed out
    made.receive_result(asking("a", "b"), 1.5)
    assert [type(e) for e in drain(made)] == [SendTaskRequest]
    made.provide("a", ElicitResult(action="accept", content={"name": "Ada"}), 2.0)
    update = drain(made)
    assert sends(update) == [("tasks/update", {"taskId": TASK_ID, "inputResponses": {"a": ACCEPT}})]
    assert "requestState" not in update[0].request.to_params()
    assert made.state is S.AWAITING_INPUT
    # eventual consistency: the server still shows "a"; it is never handed out again
    made.receive_result(asking("a", "b"), 2.5)
    assert not [e for e in drain(made) if isinstance(e, DispatchInput)]
    made.provide("b", {"action": "decline"}, 3.0)
    assert sends(drain(made)) == [
        ("tasks/update", {"taskId": TASK_ID, "inputResponses": {"b": {"action": "decline"}}})
    ]
    assert made.state is S.AWAITING_RESULT and made.answered_keys == {"a", "b"}
    made.receive_result(asking("a", "c"), 3.5)
    assert [e.key for e in drain(made) if isinstance(e, DispatchInput)] == ["c"]


def test_an_ask_stays_out_until_answered_or_the_end() -> None:
    made = poller()
    made.receive_result(asking("a", "b"), 1.0)
    drain(made)
    # a lagging read, or "a" superseded: nothing withdrawn, nothing asked twice
    made.receive_result(asking("b"), 2.0)
    made.receive_result(got(), 3.0)
    made.receive_result(asking("a", "b"), 4.0)
    assert [type(e) for e in drain(made)] == [
        SendTaskRequest,
        *(TaskStatusChanged, SendTaskRequest),
        *(TaskStatusChanged, SendTaskRequest),
    ]
    assert made.pending_keys == ("a", "b") and made.state is S.AWAITING_INPUT
    made.provide("a", ACCEPT, 5.0)  # (the server ignores it if "a" was superseded)
    made.receive_result(got("completed", result={"x": 1}), 6.0)
    events = drain(made)
    assert CancelInputs(keys=("b",)) in events and events[-1] == Done(result={"x": 1})


def test_keys_answered_before_are_never_handed_out() -> None:
    made = poller(answered=["a", 7])
    made.receive_result(asking("a", "b"), 1.0)
    assert [e.key for e in drain(made) if isinstance(e, DispatchInput)] == ["b"]


def test_a_resumed_task_is_acted_on_at_once() -> None:
    task = DetailedTask.from_result(asking("a"))
    made = TaskPoller(task, 0.0, capabilities=CAPS)
    events = drain(made)
    assert events[0] == TaskStatusChanged(status="input_required", status_message=None, poll=0)
    assert [e.key for e in events if isinstance(e, DispatchInput)] == ["a"]
    done = TaskPoller(DetailedTask.from_result(got("completed", result={"x": 1})), 0.0)
    assert drain(done)[-1] == Done(result={"x": 1})


def test_a_created_terminal_status_is_polled_for_its_payload() -> None:
    made = TaskPoller(created(status="completed"), 0.0)
    assert sends(drain(made)) == [("tasks/get", {"taskId": TASK_ID})]
    made.receive_result(got("completed", result={"x": 1}), 1.0)
    assert drain(made)[-1] == Done(result={"x": 1})


# --- the poll interval ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("interval_ms", "expected"),
    [(None, 1.0), (1, 0.1), (250, 0.25), (10**12, 30.0)],
)
def test_the_interval_is_the_servers_clamped(interval_ms: int | None, expected: float) -> None:
    made = TaskPoller(created(interval=interval_ms), 0.0)
    assert [e.delay for e in drain(made) if isinstance(e, SendTaskRequest)] == [expected]


def test_the_caller_sets_floor_and_ceiling() -> None:
    made = TaskPoller(created(interval=1), 0.0, min_interval=0.05, max_interval=0.2)
    assert made.interval == 0.05
    made.receive_result(got(interval=10**9), 1.0)
    assert drain(made)[-1].delay == 0.2


@given(st.integers(min_value=1, max_value=10**15), st.floats(0.01, 5), st.floats(0, 100))
def test_any_interval_lands_between_floor_and_ceiling(ms: int, floor: float, span: float) -> None:
    made = TaskPoller(created(interval=ms), 0.0, min_interval=floor, max_interval=floor + span)
    delay = drain(made)[-1].delay
    assert floor <= delay <= floor + span


# --- time ---------------------------------------------------------------------------------


def test_the_budget_ends_a_task_that_never_ends() -> None:
    made = poller(timeout=5.0)
    assert made.deadline == 5.0
    now = 0.0
    while now < 5.0:
        now += 0.5
        made.receive_result(got(), now)
        events = drain(made)
    assert sends(events) == [("tasks/cancel", {"taskId": TASK_ID})]
    assert events[-1] == TimedOut(elapsed=5.0, budget=5.0, limit="total")


def test_the_callers_timer_ends_it_and_withdraws_the_asks() -> None:
    made = poller(timeout=5.0)
    made.receive_result(asking("a"), 1.0)
    drain(made)
    made.timed_out(5.0)
    events = drain(made)
    assert events[0] == CancelInputs(keys=("a",))
    assert sends(events) == [("tasks/cancel", {"taskId": TASK_ID})]
    assert isinstance(events[-1], TimedOut) and made.state is S.TIMED_OUT


def test_an_answer_past_the_deadline_is_dropped() -> None:
    made = poller(timeout=5.0)
    made.receive_result(asking("a"), 1.0)
    drain(made)
    made.provide("a", ACCEPT, 6.0)
    events = drain(made)
    assert sends(events) == [("tasks/cancel", {"taskId": TASK_ID})]
    assert isinstance(events[-1], TimedOut)


# --- cancel ---------------------------------------------------------------------------------


def test_cancel_hands_out_one_tasks_cancel() -> None:
    made = poller()
    made.receive_result(asking("a"), 1.0)
    drain(made)
    made.cancel(2.0)
    made.cancel(3.0)
    events = drain(made)
    assert events[0] == CancelInputs(keys=("a",))
    assert sends(events) == [("tasks/cancel", {"taskId": TASK_ID})]
    assert events[-1] == Cancelled() and made.status == "input_required"


# --- hostile servers -----------------------------------------------------------------------


def abandoned(made: TaskPoller, match: str) -> RemoteProtocolError:
    events = drain(made)
    assert sends(events)[-1] == ("tasks/cancel", {"taskId": TASK_ID})
    assert isinstance(events[-1], Failed) and made.state is S.FAILED
    error = events[-1].error
    assert isinstance(error, RemoteProtocolError)
    assert error.code == -32603
    assert match in error.message
    return error


def test_a_result_for_another_task_is_refused() -> None:
    made = poller()
    made.receive_result({**got(), "taskId": "someone-else"}, 1.0)
    abandoned(made, "answered for task 'someone-else'")


@pytest.mark.parametrize(
    "raw",
    [
        None,
        [],
        {"resultType": "complete"},
        got("input_required"),  # no inputRequests
        got("completed"),  # no result
        {**got(), "requestState": "x"},
        {**got(), "resultType": "input_required"},
    ],
)
def test_a_result_that_is_not_a_detailed_task_is_refused(raw: Any) -> None:
    made = poller()
    made.receive_result(raw, 1.0)
    abandoned(made, "invalid tasks/get result")


@pytest.mark.parametrize("later", ["working", "input_required", "failed"])
def test_a_terminal_status_never_changes(later: str) -> None:
    made = TaskPoller(created(status="completed"), 0.0)
    drain(made)
    fields: dict[str, Any] = {
        "working": {},
        "input_required": {"inputRequests": {"a": ASK}},
        "failed": {"error": {"code": 1, "message": "x"}},
    }[later]
    made.receive_result(got(later, **fields), 1.0)
    abandoned(made, f"went from completed to {later}")


@pytest.mark.parametrize("kind", ["input_required", "task", 3])
def test_a_completed_result_that_is_not_complete_is_refused(kind: Any) -> None:
    made = poller()
    made.receive_result(got("completed", result={"resultType": kind, "content": []}), 1.0)
    abandoned(made, "completed with a result of resultType")
    done = poller()
    done.receive_result(got("completed", result={"resultType": "complete"}), 1.0)
    assert drain(done)[-1] == Done(result={"resultType": "complete"})


def test_more_asks_in_one_poll_than_the_bound_are_refused() -> None:
    made = poller(max_input_requests=4)
    made.receive_result(asking(*"abcd"), 1.0)
    assert len([e for e in drain(made) if isinstance(e, DispatchInput)]) == 4
    made = poller()
    made.receive_result(asking(*(f"k{n}" for n in range(300))), 1.0)
    abandoned(made, "asked 300 questions in one poll (at most 32)")


def test_asks_out_at_once_and_over_the_life_are_bounded() -> None:
    made = poller(max_input_requests=3)
    made.receive_result(asking("a", "b"), 1.0)
    made.receive_result(asking("a", "b", "c"), 2.0)  # still 3 out: fine
    drain(made)
    made.receive_result(asking("d"), 3.0)  # a, b, c unanswered, and d: 4 out
    abandoned(made, "asked 4 questions out at once (at most 3)")
    made = poller(max_asks=3)
    for n, key in enumerate("abc"):
        made.receive_result(asking(key), float(n))
        drain(made)
        made.provide(key, ACCEPT, float(n))
    made.receive_result(asking("d"), 9.0)
    abandoned(made, "asked more questions over its life (at most 3)")
    made = poller(max_asks=3, answered=["x", "y"])
    made.receive_result(asking("a"), 1.0)  # 2 answered before, 1 new: 3
    assert [e.key for e in drain(made) if isinstance(e, DispatchInput)] == ["a"]


def test_an_ask_beyond_the_declared_capabilities_is_refused() -> None:
    made = poller(capabilities={"elicitation": {}})
    made.receive_result(got("input_required", inputRequests={"a": ASK, "s": SAMPLE}), 1.0)
    events = drain(made)
    assert not [e for e in events if isinstance(e, DispatchInput)]  # not even "a"
    assert sends(events)[-1][0] == "tasks/cancel"
    assert isinstance(events[-1], Failed) and isinstance(events[-1].error, MissingCapability)
    assert events[-1].error.data == {"requiredCapabilities": {"sampling": {}}}


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (ErrorObject(code=-32602, message="Task not found"), -32602, "Task not found"),
        ({"code": -32602, "message": "gone", "data": 1}, -32602, "gone"),
        ({"code": True, "message": 5}, -32603, ""),
    ],
)
def test_an_error_response_fails_the_poller(error: Any, code: int, message: str) -> None:
    made = poller()
    made.receive_result(asking("a"), 1.0)
    drain(made)
    made.receive_error(error, 2.0)
    events = drain(made)
    assert events[0] == CancelInputs(keys=("a",))
    assert isinstance(events[-1], Failed) and isinstance(events[-1].error, PeerError)
    assert (events[-1].error.code, events[-1].error.message) == (code, message)
    assert not sends(events)


def test_an_input_failure_abandons_the_task() -> None:
    made = poller()
    made.receive_result(asking("a", "b"), 1.0)
    drain(made)
    made.fail("a", "nobody is there")
    events = drain(made)
    assert events[0] == CancelInputs(keys=("a", "b"))
    assert sends(events) == [("tasks/cancel", {"taskId": TASK_ID})]
    assert isinstance(events[-1], Failed) and isinstance(events[-1].error, InputFailed)
    assert events[-1].error.key == "a"


# --- misuse ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"min_interval": -1}, "min_interval"),
        ({"max_interval": "1"}, "max_interval"),
        ({"min_interval": 2.0, "max_interval": 1.0}, "below"),
        ({"max_input_requests": 0}, "max_input_requests"),
        ({"max_input_requests": True}, "max_input_requests"),
        ({"max_asks": 0}, "max_asks"),
        ({"capabilities": []}, "capabilities"),
    ],
)
def test_bad_options_are_misuse(options: dict[str, Any], match: str) -> None:
    with pytest.raises(LocalProtocolError, match=match):
        TaskPoller(created(), 0.0, **options)


def test_a_task_of_another_shape_is_misuse() -> None:
    with pytest.raises(LocalProtocolError, match="CreateTaskResult or a DetailedTask"):
        TaskPoller(got(), 0.0)  # type: ignore[arg-type]


def test_bad_answers_and_errors_are_misuse() -> None:
    made = poller()
    made.receive_result(asking("a"), 1.0)
    drain(made)
    with pytest.raises(LocalProtocolError, match="not an ask"):
        made.provide(3, ACCEPT, 2.0)  # type: ignore[arg-type]
    made = poller()
    made.receive_result(asking("a"), 1.0)
    with pytest.raises(LocalProtocolError, match="not a valid ElicitResult"):
        made.provide("a", {"action": "maybe"}, 2.0)
    made = poller()
    made.receive_result(asking("a"), 1.0)
    with pytest.raises(LocalProtocolError, match="not an ask"):
        made.fail("zz", "x")
    made = poller()
    with pytest.raises(LocalProtocolError, match="ErrorObject or a mapping"):
        made.receive_error("boom", 1.0)  # type: ignore[arg-type]
    assert made.state is S.ERROR


# --- the round engine hands a task over --------------------------------------------------


def _engine_result(method: str, capabilities: Any, result: Any) -> Any:
    from mrtr_core.engine import RoundEngine

    engine = RoundEngine(method, {"name": "t"}, capabilities=capabilities)
    engine.start(0.0)
    engine.next_event()
    engine.receive_result(result, 1.0)
    return engine.next_event()


DECLARING = {**CAPS, "extensions": {"io.modelcontextprotocol/tasks": {}}}


def test_a_task_ends_the_mrtr_phase_of_a_declaring_tools_call() -> None:
    raw = created().to_result()
    assert _engine_result("tools/call", DECLARING, raw) == Done(result=raw)


@pytest.mark.parametrize(
    ("method", "capabilities", "raw", "match"),
    [
        ("tools/call", CAPS, None, "did not declare io.modelcontextprotocol/tasks"),
        ("prompts/get", DECLARING, None, "prompts/get cannot be answered with a task"),
        ("tools/call", DECLARING, {"resultType": "task", "taskId": 1}, "malformed"),
    ],
)
def test_a_task_anywhere_else_is_an_invalid_response(
    method: str, capabilities: Any, raw: Any, match: str
) -> None:
    event = _engine_result(method, capabilities, raw or created().to_result())
    assert isinstance(event, Failed) and isinstance(event.error, RemoteProtocolError)
    assert event.error.code == -32603 and match in event.error.message


# --- any sequence of polls and answers --------------------------------------------------

KEYS = ("a", "b", "c", "d")
POLL = st.one_of(
    st.just(("working",)),
    st.tuples(st.just("input_required"), st.sets(st.sampled_from(KEYS), min_size=1)),
    st.just(("completed",)),
    st.just(("failed",)),
    st.just(("cancelled",)),
    st.tuples(st.just("answer"), st.sampled_from(KEYS)),
    st.just(("cancel",)),
)


def _poll_result(step: tuple[Any, ...]) -> dict[str, Any]:
    if step[0] == "input_required":
        return asking(*sorted(step[1]))
    if step[0] == "completed":
        return got("completed", result={"content": []})
    if step[0] == "failed":
        return got("failed", error={"code": -1, "message": "x"})
    return got(step[0])


@given(st.lists(POLL, max_size=30))
def test_any_life_keeps_the_pollers_promises(steps: list[tuple[Any, ...]]) -> None:
    made = TaskPoller(created(), 0.0, capabilities=CAPS)
    events = drain(made)
    now = 0.0
    for step in steps:
        now += 1.0
        if made.state not in LIVE:
            break
        if step[0] == "answer":
            if step[1] in made.pending_keys:
                made.provide(step[1], ACCEPT, now)
        elif step[0] == "cancel":
            made.cancel(now)
        else:
            made.receive_result(_poll_result(step), now)
        events += drain(made)
    dispatched = [e.key for e in events if isinstance(e, DispatchInput)]
    updated = [
        key
        for method, p in sends(events)
        if method == "tasks/update"
        for key in p["inputResponses"]
    ]
    assert len(dispatched) == len(set(dispatched))  # each ask handed out once
    assert len(updated) == len(set(updated)) and set(updated) <= set(dispatched)
    assert [method for method, _ in sends(events)].count("tasks/cancel") <= 1
    ends = [e for e in events if isinstance(e, (Done, Failed, Cancelled, TimedOut))]
    assert len(ends) <= 1 and (not ends or events[-1] is ends[0])
    assert (made.next_event() is FINISHED) == bool(ends)
    # every ask handed out is answered, withdrawn, or still out
    withdrawn = {key for e in events if isinstance(e, CancelInputs) for key in e.keys}
    assert set(dispatched) == set(updated) | withdrawn | set(made.pending_keys)
