"""A server connection sends a task only where the SEP allows one: to a 2026-07-28
``tools/call`` whose own capabilities declare the extension, as a well-formed
CreateTaskResult; elsewhere the app's result is refused (-32021 naming the extension for
a request that did not declare it)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from support import sep2663_examples as sep

import mrtr_core as m
from mrtr_core._connection._server_rules import finish_result
from mrtr_core.server import RequestInfo
from mrtr_core.tasks import CreateTaskResult

SERVER_INFO = {"name": "s", "version": "1"}
DECLARING = sep.DECLARING_CAPABILITIES


def info(method: str = "tools/call", caps: Any = DECLARING, era: Any = "modern") -> RequestInfo:
    return RequestInfo(
        id=1,
        method=method,
        era=era,
        protocol_version="2026-07-28",
        capabilities=caps,
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )


def finish(request: RequestInfo, result: dict[str, Any]) -> dict[str, Any]:
    return finish_result(
        request, result, server_info=SERVER_INFO, cache_ttl_ms=5000, cache_scope="public"
    )


def test_a_task_goes_to_a_declaring_tools_call_with_server_info_and_no_cache_fields() -> None:
    out = finish(info(), sep.FLOW_CREATE)
    assert out == {**sep.FLOW_CREATE, "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    assert CreateTaskResult.from_result(out).task_id == sep.TASK_ID
    assert "cacheScope" not in out


def test_a_retry_legs_final_answer_may_be_a_task() -> None:
    # the composition: MRTR rounds first, then the task (its ttlMs is the task's, untouched)
    retry = attrs.evolve(info(), retry=True)
    assert finish(retry, sep.FLOW_CREATE)["ttlMs"] == sep.FLOW_CREATE["ttlMs"]


@pytest.mark.parametrize("caps", [{}, {"elicitation": {}}, {"extensions": {}}])
def test_a_task_to_a_request_that_did_not_declare_the_extension_is_32021(caps: Any) -> None:
    with pytest.raises(m.AppResultRefused) as caught:
        finish(info(caps=caps), sep.FLOW_CREATE)
    assert caught.value.code == -32021
    assert caught.value.data == sep.MISSING_CAPABILITY_ERROR["data"]


@pytest.mark.parametrize(
    "method", ["prompts/get", "resources/read", "tasks/get", "tasks/update", "tools/list"]
)
def test_only_tools_call_may_answer_with_a_task(method: str) -> None:
    with pytest.raises(m.AppResultRefused, match="cannot answer with a task") as caught:
        finish(info(method), sep.FLOW_CREATE)
    assert caught.value.code == -32603


def test_a_2025_era_request_gets_no_task() -> None:
    with pytest.raises(m.AppResultRefused, match="2025-era") as caught:
        finish(info(era="legacy"), sep.FLOW_CREATE)
    assert caught.value.code == -32603


@pytest.mark.parametrize(
    "broken",
    [
        {**sep.FLOW_CREATE, "requestState": "s"},
        {**sep.FLOW_CREATE, "result": {"content": []}},
        {**sep.FLOW_CREATE, "ttlMs": 1.5},
        {key: value for key, value in sep.FLOW_CREATE.items() if key != "taskId"},
        {"resultType": "task", "task": {"taskId": "t"}},  # the nested 2025-11-25 envelope
    ],
)
def test_a_malformed_task_is_refused(broken: dict[str, Any]) -> None:
    with pytest.raises(m.AppResultRefused, match="malformed CreateTaskResult") as caught:
        finish(info(), broken)
    assert caught.value.code == -32603


# --- through a server connection, from the bytes a client sends -------------------------


def tools_call(request_id: int, caps: Any) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    }
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "hello_world", "arguments": {}, "_meta": meta},
    }
    return json.dumps(message).encode() + b"\n"


def test_a_server_connection_sends_the_task_to_the_declaring_request_only() -> None:
    server = m.Connection(m.SERVER, info=SERVER_INFO)
    server.receive_data(tools_call(1, DECLARING) + tools_call(2, {}))
    first, second = server.next_event(), server.next_event()
    assert isinstance(first, m.Request) and isinstance(second, m.Request)
    sent = json.loads(server.send(m.ResultResponse(id=first.id, result=sep.FLOW_CREATE)))
    assert sent["id"] == 1
    assert CreateTaskResult.from_result(sent["result"]).to_result() == {
        **sep.FLOW_CREATE,
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
    }
    # the same task to the request that did not declare the extension: refused, and the
    # request stays open for the error the client is owed
    with pytest.raises(m.AppResultRefused) as caught:
        server.send(m.ResultResponse(id=second.id, result=sep.FLOW_CREATE))
    assert server.request_info(second.id).method == "tools/call"
    answer = json.loads(server.send(m.error_response(second.id, caught.value)))
    assert answer["error"]["code"] == -32021
    assert answer["error"]["data"] == sep.MISSING_CAPABILITY_ERROR["data"]
