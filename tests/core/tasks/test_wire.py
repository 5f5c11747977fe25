"""The task wire shapes: the SEP's examples read and written back, and every field rule
from both sides (our code: LocalProtocolError; a peer: -32602)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from support import sep2663_examples as sep

from mrtr_core import ErrorObject, LocalProtocolError, RemoteProtocolError
from mrtr_core.tasks import CreateTaskResult, DetailedTask, TaskRequest
from mrtr_core.tasks._wire import TASK_AUGMENTABLE_METHODS, TASK_METHODS, TASK_NOTIFICATION
from mrtr_core.wire import ElicitFormRequest, ElicitResult, ListRootsRequest

INVALID_PARAMS = -32602


def without(raw: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k not in keys}


def refused(reader: Any, raw: Any, match: str) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError, match=match) as caught:
        reader(raw)
    assert caught.value.code == INVALID_PARAMS
    return caught.value


def test_the_method_names() -> None:
    assert {"tasks/get", "tasks/update", "tasks/cancel"} == TASK_METHODS
    assert TASK_NOTIFICATION == "notifications/tasks"
    assert {"tools/call"} == TASK_AUGMENTABLE_METHODS


# --- CreateTaskResult ----------------------------------------------------------------------


@pytest.mark.parametrize("raw", [sep.CREATE_TASK_RESULT, sep.FLOW_CREATE])
def test_the_seps_create_task_results_read_and_write_back(raw: dict[str, Any]) -> None:
    before = copy.deepcopy(raw)
    task = CreateTaskResult.from_result(raw)
    assert task.task_id == sep.TASK_ID
    assert task.status == "working"
    assert task.ttl_ms == raw["ttlMs"]
    assert task.poll_interval_ms == 5000
    assert task.to_result() == raw
    assert raw == before  # not mutated


def test_a_create_task_result_is_flat() -> None:
    task = CreateTaskResult.from_result(sep.CREATE_TASK_RESULT)
    out = task.to_result()
    assert out["resultType"] == "task"
    assert not {"task", "result", "error", "inputRequests", "requestState"} & set(out)


def test_optional_fields_are_left_out_and_null_ttl_is_kept() -> None:
    task = CreateTaskResult(
        task_id="t",
        status="working",
        created_at="2026-01-01T00:00:00Z",
        last_updated_at="2026-01-01T00:00:00Z",
        ttl_ms=None,
    )
    assert task.to_result() == {
        "resultType": "task",
        "taskId": "t",
        "status": "working",
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z",
        "ttlMs": None,
    }
    assert CreateTaskResult.from_result(task.to_result()) == task


def test_times_passed_as_floats_are_written_in_utc() -> None:
    task = CreateTaskResult(
        task_id="t",
        status="working",
        created_at=1764066600.0,
        last_updated_at=1764066600.25,
        ttl_ms=1,
    )
    assert task.created_at == "2025-11-25T10:30:00.000Z"
    assert task.last_updated_at == "2025-11-25T10:30:00.250Z"
    assert CreateTaskResult.from_result(task.to_result()) == task


@pytest.mark.parametrize("seconds", [1e300, float("nan"), float("inf")])
def test_a_time_with_no_timestamp_is_refused(seconds: float) -> None:
    with pytest.raises(LocalProtocolError, match="no timestamp"):
        CreateTaskResult(
            task_id="t",
            status="working",
            created_at=seconds,
            last_updated_at="2026-01-01T00:00:00Z",
            ttl_ms=1,
        )


def test_unknown_keys_are_kept_and_never_override() -> None:
    raw = {**sep.FLOW_CREATE, "_meta": {"k": 1}, "later": True}
    task = CreateTaskResult.from_result(raw)
    assert task.extra == {"_meta": {"k": 1}, "later": True}
    assert task.to_result() == raw
    forged = CreateTaskResult(
        task_id="t",
        status="working",
        created_at="2026-01-01T00:00:00Z",
        last_updated_at="2026-01-01T00:00:00Z",
        ttl_ms=1,
        extra={"taskId": "other"},
    )
    assert forged.to_result()["taskId"] == "t"


@pytest.mark.parametrize(
    "key", ["task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"]
)
def test_a_create_task_result_refuses_what_it_must_not_carry(key: str) -> None:
    refused(CreateTaskResult.from_result, {**sep.FLOW_CREATE, key: {}}, f"must not carry {key}")


@pytest.mark.parametrize("key", ["taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"])
def test_a_create_task_result_needs_every_required_key(key: str) -> None:
    refused(CreateTaskResult.from_result, without(sep.FLOW_CREATE, key), f"has no {key}")


@pytest.mark.parametrize("result_type", [None, "complete", "input_required", 1])
def test_a_create_task_result_is_resulttype_task(result_type: Any) -> None:
    raw = without(sep.FLOW_CREATE, "resultType")
    if result_type is not None:
        raw["resultType"] = result_type
    refused(CreateTaskResult.from_result, raw, "resultType")


BAD_FIELDS = [
    ("taskId", 1, "taskId"),
    ("taskId", "", "taskId"),
    ("taskId", None, "taskId"),
    ("status", "done", "status"),
    ("status", ["working"], "status"),
    ("createdAt", 1764066600, "createdAt"),
    ("createdAt", "yesterday", "createdAt"),
    ("createdAt", "2025-11-25", "createdAt"),
    ("lastUpdatedAt", "2025-13-45T10:30:00Z", "lastUpdatedAt"),
    ("lastUpdatedAt", None, "lastUpdatedAt"),
    ("ttlMs", True, "ttlMs"),
    ("ttlMs", 1.5, "ttlMs"),
    ("ttlMs", 60000.0, "ttlMs"),
    ("ttlMs", 0, "ttlMs"),
    ("ttlMs", -1, "ttlMs"),
    ("ttlMs", "60000", "ttlMs"),
    ("pollIntervalMs", False, "pollIntervalMs"),
    ("pollIntervalMs", 0, "pollIntervalMs"),
    ("pollIntervalMs", 2.5, "pollIntervalMs"),
    ("pollIntervalMs", None, "pollIntervalMs"),
    ("statusMessage", 5, "statusMessage"),
    ("statusMessage", None, "statusMessage"),
]


@pytest.mark.parametrize(("key", "value", "match"), BAD_FIELDS)
def test_a_peers_bad_field_is_invalid_params(key: str, value: Any, match: str) -> None:
    for raw in (sep.FLOW_CREATE, sep.FLOW_WORKING):
        reader = (
            CreateTaskResult.from_result if raw is sep.FLOW_CREATE else DetailedTask.from_result
        )
        error = refused(reader, {**raw, key: value}, match)
        assert isinstance(error.__cause__, LocalProtocolError) or error.__cause__ is None


def test_pollintervalms_null_is_not_absent() -> None:
    # (an optional key is absent or an integer: ``null`` is neither)
    refused(CreateTaskResult.from_result, {**sep.FLOW_CREATE, "pollIntervalMs": None}, "pollInt")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ttl_ms", True),
        ("poll_interval_ms", 0),
        ("status", "done"),
        ("task_id", ""),
        ("status_message", 1),
        ("created_at", None),
        ("last_updated_at", [1]),
        ("created_at", "soon"),
        ("extra", []),
    ],
)
def test_our_bad_field_is_a_local_error(field: str, value: Any) -> None:
    fields: dict[str, Any] = dict(
        task_id="t",
        status="working",
        created_at="2026-01-01T00:00:00Z",
        last_updated_at="2026-01-01T00:00:00Z",
        ttl_ms=1,
    )
    fields[field] = value
    with pytest.raises(LocalProtocolError):
        CreateTaskResult(**fields)


@pytest.mark.parametrize("raw", [None, [], "task", 1])
def test_a_result_that_is_not_an_object(raw: Any) -> None:
    refused(CreateTaskResult.from_result, raw, "must be an object")
    refused(DetailedTask.from_result, raw, "must be an object")
    refused(DetailedTask.from_notification_params, raw, "must be an object")


# --- DetailedTask --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [sep.FLOW_WORKING, sep.FLOW_INPUT_REQUIRED, sep.FLOW_COMPLETED],
    ids=["working", "input_required", "completed"],
)
def test_the_seps_tasks_get_results_read_and_write_back(raw: dict[str, Any]) -> None:
    task = DetailedTask.from_result(raw)
    assert task.status == raw["status"]
    assert task.to_result() == raw
    assert task.to_notification_params() == without(raw, "resultType")


def test_the_seps_input_requests_are_typed() -> None:
    task = DetailedTask.from_result(sep.FLOW_INPUT_REQUIRED)
    assert task.input_requests is not None
    ask = task.input_requests["name"]
    assert isinstance(ask, ElicitFormRequest)
    assert ask.message == "Please enter your name."


def test_the_seps_notification_reads_and_writes_back() -> None:
    task = DetailedTask.from_notification_params(sep.NOTIFICATION_PARAMS)
    assert task.result == sep.NOTIFICATION_PARAMS["result"]
    assert task.to_notification_params() == sep.NOTIFICATION_PARAMS
    assert task.to_result() == {**sep.NOTIFICATION_PARAMS, "resultType": "complete"}


def test_a_missing_resulttype_reads_as_complete() -> None:
    task = DetailedTask.from_result(without(sep.FLOW_COMPLETED, "resultType"))
    assert task.to_result() == sep.FLOW_COMPLETED


@pytest.mark.parametrize(
    "raw", [sep.FAILED_AS_PRINTED, sep.TOOL_ERROR_AS_PRINTED], ids=["failed", "tool-error"]
)
def test_the_seps_printed_error_examples_break_its_resulttype_rule(raw: dict[str, Any]) -> None:
    # The SEP prints these tasks/get results with resultType "task", which its own text
    # forbids ("MUST be set to "complete"" on tasks/get; "task" only on CreateTaskResult).
    refused(DetailedTask.from_result, raw, "resultType")
    # With the discriminator the text requires, they read as printed otherwise.
    fixed = {**raw, "resultType": "complete"}
    task = DetailedTask.from_result(fixed)
    assert task.to_result() == fixed


def test_a_failed_task_carries_its_json_rpc_error() -> None:
    task = DetailedTask.from_result({**sep.FAILED_AS_PRINTED, "resultType": "complete"})
    assert task.error == ErrorObject(code=-32603, message="API rate limit exceeded")
    assert task.result is None
    with_data = {
        **sep.FAILED_AS_PRINTED,
        "resultType": "complete",
        "error": {"code": -32603, "message": "m", "data": {"retry": 5}},
    }
    task = DetailedTask.from_result(with_data)
    assert task.error is not None and task.error.data == {"retry": 5}
    assert task.to_result()["error"] == {"code": -32603, "message": "m", "data": {"retry": 5}}


@pytest.mark.parametrize(
    "error",
    [
        None,
        "boom",
        {"code": "x", "message": "m"},
        {"code": True, "message": "m"},
        {"code": 1},
        {"message": "m"},
    ],
)
def test_a_bad_error_object_is_invalid_params(error: Any) -> None:
    raw = {**sep.FAILED_AS_PRINTED, "resultType": "complete", "error": error}
    refused(DetailedTask.from_result, raw, "error")


ASKS = {"k": ListRootsRequest()}
RESULT = {"content": [], "isError": False}
ERROR = ErrorObject(code=-32603, message="m")
PAYLOADS: dict[str, dict[str, Any]] = {
    "input_requests": {"input_requests": ASKS},
    "result": {"result": RESULT},
    "error": {"error": ERROR},
}
#: Which payload each status carries (None: none).
CARRIES = {
    "working": None,
    "input_required": "input_requests",
    "completed": "result",
    "failed": "error",
    "cancelled": None,
}


def _task(status: str, **payload: Any) -> DetailedTask:
    return DetailedTask(
        task_id="t",
        status=status,
        created_at="2026-01-01T00:00:00Z",  # type: ignore[arg-type]
        last_updated_at="2026-01-01T00:00:00Z",
        ttl_ms=1000,
        **payload,
    )


@pytest.mark.parametrize("status", list(CARRIES))
@pytest.mark.parametrize("payload", [None, *PAYLOADS])
def test_each_status_carries_its_payload_and_only_it(status: str, payload: str | None) -> None:
    given = PAYLOADS[payload] if payload is not None else {}
    if payload == CARRIES[status]:
        task = _task(status, **given)
        wire = task.to_result()
        assert DetailedTask.from_result(wire) == task
        assert not {"inputRequests", "result", "error"} - {
            "inputRequests" if payload == "input_requests" else "",
            "result" if payload == "result" else "",
            "error" if payload == "error" else "",
        } & set(wire)
        return
    with pytest.raises(LocalProtocolError):
        _task(status, **given)
    # the same rule on a peer's value
    wire = _task("working").to_result()
    wire["status"] = status
    if payload is not None:
        donor = _task(CARRIES_REV[payload], **given).to_result()
        key = {"input_requests": "inputRequests", "result": "result", "error": "error"}[payload]
        wire[key] = donor[key]
    refused(DetailedTask.from_result, wire, "carr")


CARRIES_REV = {"input_requests": "input_required", "result": "completed", "error": "failed"}


def test_a_detailed_task_never_carries_request_state() -> None:
    for raw in (sep.FLOW_WORKING, sep.FLOW_INPUT_REQUIRED, sep.FLOW_COMPLETED):
        refused(DetailedTask.from_result, {**raw, "requestState": "s"}, "requestState")
        refused(DetailedTask.from_result, {**raw, "task": {}}, "must not carry task")


@pytest.mark.parametrize(
    ("asks", "match"),
    [
        ({}, "non-empty"),
        ([], "must be an object"),
        ({"k": {"method": "nope/x"}}, "unknown input"),
        ({"k": {"method": "elicitation/create", "params": {"message": 1}}}, "ElicitFormRequest"),
    ],
)
def test_bad_input_requests_are_invalid_params(asks: Any, match: str) -> None:
    refused(DetailedTask.from_result, {**sep.FLOW_INPUT_REQUIRED, "inputRequests": asks}, match)


@pytest.mark.parametrize(
    "asks", [{}, {"k": {"method": "roots/list"}}, {1: ListRootsRequest()}, ["k"]]
)
def test_our_input_requests_are_typed_and_keyed_by_strings(asks: Any) -> None:
    with pytest.raises(LocalProtocolError, match="inputRequests"):
        _task("input_required", input_requests=asks)


@pytest.mark.parametrize(("field", "value"), [("result", []), ("error", {"code": 1})])
def test_our_result_and_error_are_typed(field: str, value: Any) -> None:
    with pytest.raises(LocalProtocolError, match=field):
        _task("completed" if field == "result" else "failed", **{field: value})


def test_a_result_that_is_not_an_object_is_invalid_params() -> None:
    refused(DetailedTask.from_result, {**sep.FLOW_COMPLETED, "result": [1]}, "result must be")


@pytest.mark.parametrize("result_type", ["task", "input_required", 0])
def test_a_tasks_get_result_is_resulttype_complete(result_type: Any) -> None:
    refused(DetailedTask.from_result, {**sep.FLOW_WORKING, "resultType": result_type}, "resultType")


# --- the task methods' params ------------------------------------------------------------


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel"])
def test_get_and_cancel_params(method: str) -> None:
    request = TaskRequest.from_params(method, sep.FLOW_GET_PARAMS)
    assert (request.method, request.task_id, request.input_responses) == (method, sep.TASK_ID, None)
    assert request.to_params() == sep.FLOW_GET_PARAMS
    with pytest.raises(LocalProtocolError, match="no inputResponses"):
        TaskRequest(method=method, task_id="t", input_responses={})


def test_the_seps_update_params() -> None:
    request = TaskRequest.from_params("tasks/update", sep.FLOW_UPDATE_PARAMS)
    assert request.input_responses == sep.FLOW_UPDATE_PARAMS["inputResponses"]
    assert request.to_params() == sep.FLOW_UPDATE_PARAMS


def test_typed_answers_are_written_as_their_wire_form() -> None:
    request = TaskRequest(
        method="tasks/update",
        task_id=sep.TASK_ID,
        input_responses={"name": ElicitResult(action="accept", content={"input": "Luca"})},
    )
    assert request.to_params() == sep.FLOW_UPDATE_PARAMS


def test_meta_goes_on_every_task_request() -> None:
    meta = {"io.modelcontextprotocol/clientCapabilities": sep.DECLARING_CAPABILITIES}
    params = TaskRequest(method="tasks/get", task_id="t").to_params(meta)
    assert params == {"taskId": "t", "_meta": meta}
    assert params["_meta"] is not meta


def test_request_state_never_goes_out_nor_comes_in() -> None:
    # built from a retry's params (an MRTR leg's requestState among them): stripped
    request = TaskRequest(
        method="tasks/update",
        task_id="t",
        input_responses={},
        extra={"requestState": "sealed", "other": 1},
    )
    assert request.to_params() == {"taskId": "t", "inputResponses": {}, "other": 1}
    # read from a peer: dropped, never acted on
    read = TaskRequest.from_params(
        "tasks/update", {**sep.FLOW_UPDATE_PARAMS, "requestState": "sealed"}
    )
    assert "requestState" not in read.extra
    assert "requestState" not in read.to_params()


def test_an_update_with_unknown_keys_reads_plain() -> None:
    # (the conformance suite acks {"unknown-key": {"ignored": true}}: keys are read later,
    # against what was asked)
    read = TaskRequest.from_params(
        "tasks/update", {"taskId": "t", "inputResponses": {"unknown-key": {"ignored": True}}}
    )
    assert read.input_responses == {"unknown-key": {"ignored": True}}


@pytest.mark.parametrize(
    ("method", "params", "match"),
    [
        ("tasks/get", None, "must be an object"),
        ("tasks/get", {}, "needs a taskId"),
        ("tasks/cancel", {"taskId": 7}, "taskId"),
        ("tasks/cancel", {"taskId": ""}, "taskId"),
        ("tasks/update", {"taskId": "t"}, "needs inputResponses"),
        ("tasks/update", {"taskId": "t", "inputResponses": None}, "needs inputResponses"),
        ("tasks/update", {"taskId": "t", "inputResponses": []}, "must be an object"),
        ("tasks/update", {"taskId": "t", "inputResponses": {"k": 12345}}, "answer object"),
    ],
)
def test_bad_task_params_are_invalid_params(method: str, params: Any, match: str) -> None:
    refused(lambda raw: TaskRequest.from_params(method, raw), params, match)


def test_an_update_needs_answers_from_our_code_too() -> None:
    with pytest.raises(LocalProtocolError, match="needs inputResponses"):
        TaskRequest(method="tasks/update", task_id="t")
    with pytest.raises(LocalProtocolError, match="answer object"):
        TaskRequest(method="tasks/update", task_id="t", input_responses={"k": "yes"})


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list", "tools/call"])
def test_only_the_three_are_task_methods(method: str) -> None:
    with pytest.raises(LocalProtocolError, match="not a task method"):
        TaskRequest.from_params(method, {"taskId": "t"})
    with pytest.raises(LocalProtocolError, match="not a task method"):
        TaskRequest(method=method, task_id="t")


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel"])
def test_a_read_or_a_cancel_never_carries_answers_on(method: str) -> None:
    # (an earlier draft let tasks/get carry inputResponses: a read stays a read)
    read = TaskRequest.from_params(
        method, {"taskId": "t", "inputResponses": {"k": {"action": "accept"}}, "requestState": "s"}
    )
    assert read.input_responses is None
    assert read.to_params() == {"taskId": "t"}


def test_a_result_type_in_extra_never_overrides_the_shapes_own() -> None:
    fields: dict[str, Any] = dict(
        task_id="t",
        status="working",
        created_at="2026-01-01T00:00:00Z",
        last_updated_at="2026-01-01T00:00:00Z",
        ttl_ms=1,
        extra={"resultType": "task", "_meta": {}},
    )
    assert DetailedTask(**fields).to_result()["resultType"] == "complete"
    assert DetailedTask(**fields).to_notification_params() == {
        "taskId": "t",
        "status": "working",
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z",
        "ttlMs": 1,
        "_meta": {},
    }
    fields["extra"] = {"resultType": "complete"}
    assert CreateTaskResult(**fields).to_result()["resultType"] == "task"
