"""SEP-2663 over Streamable HTTP: ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` carry
``Mcp-Name: <taskId>``; the client's rule and the server's check are the same table."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mrtr_core import ErrorCode
from mrtr_core.http import (
    HeaderMismatch,
    check_request_headers,
    header_fields,
    request_headers,
    status_for_error,
)
from mrtr_core.http._headers import NAME_FIELDS, MissingHeader
from mrtr_core.tasks import TaskRequest
from mrtr_core.tasks._wire import TASK_METHODS
from mrtr_core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

META = {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}
TASK_ID = "786512e2-9e0d-44bd-8f29-789f320fe840"


def message(method: str, task_id: Any = TASK_ID) -> dict[str, Any]:
    answers = {} if method == "tasks/update" else None
    params = TaskRequest(method=method, task_id="t", input_responses=answers).to_params(META)
    params["taskId"] = task_id
    return {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}


def test_every_task_method_names_its_task() -> None:
    assert {method: NAME_FIELDS[method] for method in TASK_METHODS} == dict.fromkeys(
        TASK_METHODS, "taskId"
    )
    # the removed 2025-11-25 methods mirror nothing
    assert "tasks/result" not in NAME_FIELDS and "tasks/list" not in NAME_FIELDS


@pytest.mark.parametrize("method", sorted(TASK_METHODS))
def test_a_clients_task_request_carries_the_task_id(method: str) -> None:
    headers = request_headers(message(method))
    assert headers == [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
        ("Mcp-Name", TASK_ID),
    ]
    # and the server takes what the client sends
    check_request_headers(header_fields(headers), message(method))


@pytest.mark.parametrize("method", sorted(TASK_METHODS))
def test_a_task_id_that_is_not_plain_ascii_goes_as_base64(method: str) -> None:
    task_id = "tâche 1"
    headers = request_headers(message(method, task_id))
    encoded = "=?base64?" + base64.b64encode(task_id.encode()).decode() + "?="
    assert headers[-1] == ("Mcp-Name", encoded)
    check_request_headers(header_fields(headers), message(method, task_id))


@pytest.mark.parametrize("method", sorted(TASK_METHODS))
def test_the_server_refuses_a_missing_mcp_name(method: str) -> None:
    headers = [h for h in request_headers(message(method)) if h[0] != "Mcp-Name"]
    with pytest.raises(MissingHeader) as caught:
        check_request_headers(header_fields(headers), message(method))
    assert caught.value.code == ErrorCode.HEADER_MISMATCH
    assert caught.value.header == "Mcp-Name"
    assert caught.value.request_id == 3
    assert status_for_error(caught.value.code) == 400


@pytest.mark.parametrize("method", sorted(TASK_METHODS))
def test_the_server_refuses_a_mcp_name_of_another_task(method: str) -> None:
    # the conformance suite's probe: Mcp-Name of another task on tasks/get
    headers = [
        (name, "sep-2663-wrong-task-id-for-routing-header-mismatch" if name == "Mcp-Name" else v)
        for name, v in request_headers(message(method))
    ]
    with pytest.raises(HeaderMismatch, match="does not match") as caught:
        check_request_headers(header_fields(headers), message(method))
    assert caught.value.code == -32020


def test_a_task_request_without_a_string_task_id_needs_no_mcp_name() -> None:
    # (its params are invalid: the method's own reading answers -32602, not the header check)
    broken = message("tasks/get", 12)
    assert [h for h, _ in request_headers(broken)] == ["MCP-Protocol-Version", "Mcp-Method"]
    check_request_headers(header_fields(request_headers(broken)), broken)
