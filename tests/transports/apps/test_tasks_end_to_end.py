"""Tasks end to end: the project's ``Client`` against the project's ``McpApp``, over real
stdio, Streamable HTTP and WebSocket on 127.0.0.1, on both loops.

``mrtr serve`` runs the conformance fixtures app (its task tools: ``confirm_delete``,
``multi_input``, ``test_tool_with_task``, ``failing_job``, ``protocol_error_job``,
``slow_compute``) in a subprocess; the client drives each task with the same answer
handler as an MRTR round.  Each status the server's table allows is met: a task that
asks mid-work (``input_required`` and back), one that asks twice at once, an MRTR round
before the task, a tool error (``completed`` with ``isError``), a protocol error
(``failed``), and a cancel (``cancelled``), seen from the client and read back from the
server by ``tasks/get``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import sniffio
from mrtr_transports.client.client import Client
from mrtr_transports.client.errors import CallError, CallTimeout
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.stdio import open_stdio_client
from mrtr_transports.client.ws import open_ws_client
from support.cli_run import MRTR, TESTS_ON_PATH
from support.conformance_suite import FIXTURES_APP
from support.serve_subprocess import mrtr_serve

import mrtr_core as m

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

APP = ["--app", FIXTURES_APP]
SERVE = [*MRTR, "serve", *APP]
TRANSPORTS = ["stdio", "http", "ws"]


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    """The person at the client: a name, and yes to every question."""
    assert isinstance(request, m.wire.ElicitFormRequest), request
    properties = request.requested_schema.get("properties", {})
    content: dict[str, Any] = {}
    if "name" in properties:
        content["name"] = "Ada"
    if "confirm" in properties:
        content["confirm"] = True
    return m.wire.ElicitResult(action="accept", content=content)


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


@asynccontextmanager
async def connected(transport: str, tmp_path: Path, **options: Any) -> AsyncIterator[Client]:
    options.setdefault("answer", answer)
    loop = ["--loop", sniffio.current_async_library()]
    if transport == "stdio":
        async with open_stdio_client(
            [*SERVE, *loop, "--stdio"], env=TESTS_ON_PATH, **options
        ) as client:
            yield client
        return
    flag = "--ws" if transport == "ws" else "--http"
    async with mrtr_serve([*APP, flag, "127.0.0.1:0"], tmp_path / "serve.log") as url:
        opener = open_ws_client if transport == "ws" else open_http_client
        async with opener(url, **options) as client:
            yield client


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_ending_of_a_task_reaches_the_client(transport: str, tmp_path: Path) -> None:
    statuses: dict[str, list[str]] = {}

    def seen(task_id: str, change: m.tasks.TaskStatusChanged) -> None:
        statuses.setdefault(task_id, []).append(change.status)

    with anyio.fail_after(60):
        async with connected(transport, tmp_path) as client:
            # asks mid-task: input_required, answered by tasks/update, then completed
            deleted = await client.call_tool(
                "confirm_delete", {"filename": "a.txt"}, on_task_status=seen
            )
            assert text(deleted) == "Deleted a.txt."
            # two asks outstanding at once, both answered
            both = await client.call_tool("multi_input", on_task_status=seen)
            assert text(both) == "name=Ada, confirmed=True"
            # an MRTR round on the tools/call first, then the task carries its answer
            greeted = await client.call_tool("test_tool_with_task", on_task_status=seen)
            assert text(greeted) == "Hello, Ada! (from a task)"
            # a tool error completes the task, with isError
            failed_tool = await client.call_tool("failing_job", on_task_status=seen)
            assert failed_tool["isError"] is True
            # a protocol error fails it: the client raises the inlined JSON-RPC error
            with pytest.raises(CallError) as failed:
                await client.call_tool("protocol_error_job", on_task_status=seen)
            assert failed.value.code == m.ErrorCode.INTERNAL_ERROR
            assert "backend is unavailable" in failed.value.message
    # Every one of them was a task, and each status came through the table's moves.
    lives = list(statuses.values())
    assert len(lives) == 5, statuses
    # (the working between the answer and the end is too short for a poll to see)
    assert _moves(lives[0])[:2] == ["working", "input_required"]
    assert lives[0][-1] == "completed"
    assert "input_required" in lives[1] and lives[1][-1] == "completed"
    assert lives[2][-1] == "completed" and "input_required" not in lives[2]
    assert lives[3][-1] == "completed"
    assert lives[4][-1] == "failed"


def _moves(seen: list[str]) -> list[str]:
    """The statuses as they changed (a poll that saw the same status again adds nothing)."""
    out: list[str] = []
    for status in seen:
        if not out or out[-1] != status:
            out.append(status)
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_task_held_by_its_handle_is_cancelled_and_settles_cancelled(
    transport: str, tmp_path: Path
) -> None:
    with anyio.fail_after(60):
        async with connected(transport, tmp_path) as client:
            handle = await client.call_task("slow_compute", {"seconds": 60, "label": "held"})
            assert handle.task_id is not None and not handle.complete
            with anyio.fail_after(10):  # (the work sets its message as it starts)
                while (running := await handle.get()).status_message is None:
                    assert running.status == "working", running
                    await anyio.sleep(0.05)
            assert running.status == "working"
            assert running.status_message == "computing held for 60.0 s"
            await handle.cancel()
            with anyio.fail_after(10):
                while (settled := await handle.get()).status != "cancelled":
                    assert settled.status == "working", settled
                    await anyio.sleep(0.05)
            await handle.cancel()  # a terminal task's cancel: the same ack, nothing changes
            assert (await handle.get()).status == "cancelled"
            # Another handle on the same id (a client that persisted it) sees the same.
            again = client.task(handle.task_id)
            assert (await again.get()).status == "cancelled"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_call_given_up_cancels_its_task_on_the_server(
    transport: str, tmp_path: Path
) -> None:
    with anyio.fail_after(60):
        async with connected(transport, tmp_path) as client:
            started: list[str] = []

            def seen(task_id: str, change: m.tasks.TaskStatusChanged) -> None:
                started.append(task_id)

            with pytest.raises(CallTimeout):
                await client.call(
                    "tools/call",
                    {"name": "slow_compute", "arguments": {"seconds": 60}},
                    timeout=1.5,
                    on_task_status=seen,
                )
            assert started, "no task was created"
            # The call sent tasks/cancel as it gave up: the server's task settles cancelled.
            handle = client.task(started[0])
            with anyio.fail_after(10):
                while (task := await handle.get()).status != "cancelled":
                    assert task.status == "working", task
                    await anyio.sleep(0.05)


async def test_a_client_that_does_not_declare_tasks_gets_plain_results_or_minus_32021(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with connected("stdio", tmp_path, tasks=False) as client:
            plain = await client.call_tool("slow_compute", {"seconds": 0, "label": "inline"})
            assert text(plain) == "Computed inline in 0.0 s."  # the work ran inline
            with pytest.raises(CallError) as refused:
                await client.call_tool("failing_job")  # task="required"
            assert refused.value.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
            assert refused.value.data == {
                "requiredCapabilities": {"extensions": {m.tasks.TASKS_EXTENSION: {}}}
            }
