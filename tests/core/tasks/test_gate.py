"""Who may use tasks: the per-request capability, -32021 naming the extension, -32602 for
an unknown task id; each error as the SEP's examples show it."""

from __future__ import annotations

from typing import Any

import pytest
from support import sep2663_examples as sep

import mrtr_core as m
from mrtr_core import ErrorCode, RemoteProtocolError
from mrtr_core._meta import declared_capabilities
from mrtr_core.server import CapabilityRequired
from mrtr_core.tasks import TASKS_EXTENSION, UnknownTask, declares_tasks, require_tasks
from mrtr_core.wire import META_CLIENT_CAPABILITIES


def test_the_extension_identifier() -> None:
    assert TASKS_EXTENSION == "io.modelcontextprotocol/tasks"


@pytest.mark.parametrize(
    ("capabilities", "declared"),
    [
        (sep.DECLARING_CAPABILITIES, True),
        ({"extensions": {TASKS_EXTENSION: {"later": 1}}, "elicitation": {}}, True),
        (None, False),
        ({}, False),
        ([], False),
        ({"extensions": {}}, False),
        ({"extensions": []}, False),
        ({"extensions": {TASKS_EXTENSION: True}}, False),  # support is an object
        ({"extensions": {TASKS_EXTENSION: None}}, False),
        ({"extensions": {"io.modelcontextprotocol/other": {}}}, False),
        # the 2025-11-25 experimental slot is not this extension (SEP: non-declaring)
        ({"tasks": {"requests": {"tools": {"call": {}}}}}, False),
        ({TASKS_EXTENSION: {}}, False),
    ],
)
def test_declares_tasks(capabilities: Any, declared: bool) -> None:
    assert declares_tasks(capabilities) is declared


def test_per_request_capabilities_are_read_from_that_requests_meta() -> None:
    declaring = {"name": "t", "_meta": {META_CLIENT_CAPABILITIES: sep.DECLARING_CAPABILITIES}}
    silent = {"name": "t", "_meta": {META_CLIENT_CAPABILITIES: {}}}
    assert declares_tasks(declared_capabilities(declaring))
    assert not declares_tasks(declared_capabilities(silent))
    assert not declares_tasks(declared_capabilities({"name": "t"}))


@pytest.mark.parametrize("what", ["tasks/get", "tasks/update", "tasks/cancel", "tool 'deploy'"])
def test_a_non_declaring_request_is_refused_with_32021(what: str) -> None:
    with pytest.raises(CapabilityRequired) as caught:
        require_tasks({"elicitation": {}}, what)
    error = caught.value
    assert error.code == ErrorCode.MISSING_CLIENT_CAPABILITY == sep.MISSING_CAPABILITY_ERROR["code"]
    assert error.data == sep.MISSING_CAPABILITY_ERROR["data"]
    assert error.message.startswith(sep.MISSING_CAPABILITY_ERROR["message"])
    assert what in error.message and TASKS_EXTENSION in error.message
    # as the wire shows it
    sent = m.error_response(1, error).error
    assert (sent.code, sent.data) == (-32021, sep.MISSING_CAPABILITY_ERROR["data"])
    # what the conformance suite reads
    assert sent.data["requiredCapabilities"]["extensions"][TASKS_EXTENSION] == {}


def test_a_declaring_request_passes() -> None:
    require_tasks(sep.DECLARING_CAPABILITIES, "tasks/get")


def test_each_refusal_has_its_own_data() -> None:
    with pytest.raises(CapabilityRequired) as first:
        require_tasks(None, "tasks/get")
    first.value.data["requiredCapabilities"]["extensions"].clear()
    with pytest.raises(CapabilityRequired) as second:
        require_tasks(None, "tasks/get")
    assert second.value.data == sep.MISSING_CAPABILITY_ERROR["data"]


def test_capability_required_keeps_its_message_for_input() -> None:
    error = CapabilityRequired({"elicitation": {"url": {}}})
    assert error.message == "the request did not declare the capabilities this input needs"


def test_an_unknown_task_is_invalid_params() -> None:
    error = UnknownTask("nope", request_id=70)
    assert isinstance(error, RemoteProtocolError)
    assert error.code == sep.NOT_FOUND_ERROR["code"] == ErrorCode.INVALID_PARAMS
    assert error.message.startswith(sep.NOT_FOUND_ERROR["message"])
    assert (error.request_id, error.task_id, error.data) == (70, "nope", {"taskId": "nope"})
    assert UnknownTask("x").request_id is None


def test_an_unknown_task_id_is_echoed_bounded() -> None:
    huge = "x" * 1_000_000
    error = UnknownTask(huge)
    assert len(error.message) < 200
    assert len(error.data["taskId"]) < 200
    assert UnknownTask(["a", 1]).data == {"taskId": "list ['a', 1]"}


def test_with_tasks_declares_the_extension_on_a_copy() -> None:
    from mrtr_core.tasks._gate import with_tasks

    given = {"elicitation": {}, "extensions": {"x/y": {"a": 1}}}
    out = with_tasks(given)
    assert declares_tasks(out) and not declares_tasks(given)
    assert out == {
        "elicitation": {},
        "extensions": {"x/y": {"a": 1}, "io.modelcontextprotocol/tasks": {}},
    }
    assert with_tasks({"extensions": "junk"}) == {
        "extensions": {"io.modelcontextprotocol/tasks": {}}
    }
