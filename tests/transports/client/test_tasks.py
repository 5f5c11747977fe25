"""Tasks (SEP-2663) on the client: ``Client.call`` drives a task to its end, ``call_task``
and ``task`` hold one, over real stdio, Streamable HTTP and WebSocket on 127.0.0.1, on
both loops, against the scripted task server ``tests/support/task_peer.py`` (served by
``mrtr serve``).  What the client sent is read back from the server's own log of the
task requests it received."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import sniffio
from mrtr_transports.client.client import Client
from mrtr_transports.client.errors import (
    CallError,
    CallTimeout,
    ClientError,
    InputUnavailable,
    TaskCancelled,
    TransportError,
)
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.stdio import open_stdio_client
from mrtr_transports.client.ws import open_ws_client
from support.cli_run import MRTR, TESTS_ON_PATH
from support.serve_subprocess import mrtr_serve

import mrtr_core as m

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

APP = ["--app", "support.task_peer:app"]
SERVE = [*MRTR, "serve", *APP]
TRANSPORTS = ["stdio", "http", "ws"]
TASKS = m.tasks.TASKS_EXTENSION


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    await anyio.sleep(0)
    if isinstance(request, m.wire.ElicitFormRequest):
        if request.message == "Go ahead?":
            return m.wire.ElicitResult(action="accept", content={"ok": True})
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})
    return {"role": "assistant", "content": {"type": "text", "text": "warm"}, "model": "m"}


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


@asynccontextmanager
async def connected(transport: str, tmp_path: Path, **options: Any) -> AsyncIterator[Client]:
    options.setdefault("answer", answer)
    if transport == "stdio":
        argv = [*SERVE, "--loop", sniffio.current_async_library(), "--stdio"]
        async with open_stdio_client(argv, env=TESTS_ON_PATH, **options) as client:
            yield client
        return
    flag = "--ws" if transport == "ws" else "--http"
    async with mrtr_serve([*APP, flag, "127.0.0.1:0"], tmp_path / "serve.log") as url:
        opener = open_ws_client if transport == "ws" else open_http_client
        async with opener(url, **options) as client:
            yield client


async def received(client: Client) -> list[dict[str, Any]]:
    """The task requests the server received so far (its ``log`` tool)."""
    log: list[dict[str, Any]] = json.loads(text(await client.call_tool("log")))
    return log


# --- Client.call: a task driven to its end -----------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_task_that_asks_is_answered_and_its_result_returned(
    transport: str, tmp_path: Path
) -> None:
    asked: list[str] = []
    changes: list[tuple[str, str, str | None]] = []

    async def answering(key: str, request: m.wire.InputRequest) -> Any:
        asked.append(key)
        return await answer(key, request)

    with anyio.fail_after(30):
        async with connected(transport, tmp_path, answer=answering) as client:
            result = await client.call_tool(
                "ask", on_task_status=lambda i, c: changes.append((i, c.status, c.status_message))
            )
            assert result == {"content": [{"type": "text", "text": "hello Ada"}]}
            assert asked == ["name"]  # asked once, though polls repeated the ask
            task_id = changes[0][0]
            assert [(s, msg) for _, s, msg in changes] == [
                ("working", None),
                ("input_required", "waiting for a name"),
                ("completed", None),
            ]
            log = await received(client)
    assert all(entry["declared"] for entry in log)  # every task request declares it
    assert all(entry["params"]["taskId"] == task_id for entry in log)
    updates = [entry["params"] for entry in log if entry["method"] == "tasks/update"]
    assert updates == [
        {
            "taskId": task_id,
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
        }
    ]
    assert [entry["method"] for entry in log].count("tasks/cancel") == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_ending(transport: str, tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with connected(transport, tmp_path) as client:
            assert text(await client.call_tool("quick")) == "done"
            # a tool error completes the task: returned as a sync call returns it
            error_result = await client.call_tool("tool_error")
            assert error_result["isError"] is True and text(error_result) == "bad input"
            with pytest.raises(CallError) as failed:
                await client.call_tool("fail")
            assert (failed.value.code, failed.value.message) == (-32603, "disk full")
            assert failed.value.data == {"disk": "/"}
            with pytest.raises(TaskCancelled, match="operator stopped it") as cancelled:
                await client.call_tool("server_cancel")
            assert cancelled.value.exit_code == 3 and cancelled.value.task_id
            # two asks of two kinds, one shown again after its answer: each asked once
            assert text(await client.call_tool("ask_twice")) == "Ada: warm"
            log = await received(client)
    updates = [
        entry["params"]["inputResponses"] for entry in log if entry["method"] == "tasks/update"
    ]
    assert [list(answers) for answers in updates] == [["a"], ["b"]]
    assert not [entry for entry in log if entry["method"] == "tasks/cancel"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_mrtr_round_then_a_task(transport: str, tmp_path: Path) -> None:
    asked: list[str] = []

    async def answering(key: str, request: m.wire.InputRequest) -> Any:
        asked.append(key)
        return await answer(key, request)

    with anyio.fail_after(30):
        async with connected(transport, tmp_path, answer=answering) as client:
            assert text(await client.call_tool("confirm")) == "hello Ada"
            log = await received(client)
    assert asked == ["confirm", "name"]  # the round's key, then the task's
    assert all("requestState" not in entry["params"] for entry in log)


async def test_tasks_false_declares_nothing(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path, tasks=False) as client:
        assert text(await client.call_tool("quick")) == "no task: quick"
        # and declaring it for one call is the caller's choice
        caps = {"elicitation": {}, "extensions": {TASKS: {}}}
        assert text(await client.call_tool("quick", capabilities=caps)) == "done"


# --- give-ups: timeout, cancellation, hostile servers -------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancelling_the_call_cancels_the_task(transport: str, tmp_path: Path) -> None:
    entered = anyio.Event()

    async def never(key: str, request: m.wire.InputRequest) -> Any:
        entered.set()
        await anyio.sleep_forever()

    with anyio.fail_after(30):
        async with connected(transport, tmp_path, answer=never) as client:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(client.call_tool, "forever_ask")
                    await entered.wait()
                    scope.cancel()
            assert scope.cancelled_caught
            # the call timed out on a task that never ends: cancelled too
            with pytest.raises(CallTimeout) as timed_out:
                await client.call_tool("forever", timeout=0.6)
            assert timed_out.value.limit == "total" and timed_out.value.budget == 0.6
            log = await received(client)
    cancels = [entry["params"] for entry in log if entry["method"] == "tasks/cancel"]
    assert len(cancels) == 2 and cancels[0]["taskId"] != cancels[1]["taskId"]
    assert not [entry for entry in log if entry["method"] == "tasks/update"]


async def test_a_task_request_past_leg_timeout_is_a_leg_timeout(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path) as client:
        with anyio.fail_after(20), pytest.raises(CallTimeout) as timed_out:
            await client.call_tool("slow_get", leg_timeout=0.5, timeout=15)
        assert (timed_out.value.limit, timed_out.value.budget) == ("leg", 0.5)
        log = await received(client)
    assert log[-1]["method"] == "tasks/cancel"


@pytest.mark.parametrize(
    ("tool", "match"),
    [
        ("other_id", "answered for task 'someone-elses'"),
        ("regress", "went from completed to working"),
        ("zero_interval", "pollIntervalMs must be a positive integer"),
        ("many_asks", "asked 300 questions in one poll"),
        ("not_a_task", "invalid tasks/get result"),
    ],
)
async def test_a_hostile_server_is_refused_and_its_task_cancelled(
    tool: str, match: str, tmp_path: Path
) -> None:
    asked: list[str] = []

    async def answering(key: str, request: m.wire.InputRequest) -> Any:
        asked.append(key)
        return await answer(key, request)

    with anyio.fail_after(30):
        async with connected("stdio", tmp_path, answer=answering) as client:
            with pytest.raises(CallError, match=match) as refused:
                await client.call_tool(tool)
            assert refused.value.code == -32603
            log = await received(client)
    assert asked == []
    assert log[-1]["method"] == "tasks/cancel"


async def test_a_huge_interval_is_clamped_to_the_clients_ceiling(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path, task_poll_bounds=(0.05, 0.2)) as client:
        with anyio.fail_after(10):
            started = anyio.current_time()
            assert text(await client.call_tool("huge_interval")) == "done"
            assert anyio.current_time() - started < 5


async def test_an_ask_without_an_answer_fails_the_call_and_cancels_the_task(
    tmp_path: Path,
) -> None:
    async def unavailable(key: str, request: m.wire.InputRequest) -> Any:
        raise InputUnavailable("nobody is here")

    async with connected("stdio", tmp_path, answer=unavailable) as client:
        with anyio.fail_after(20), pytest.raises(InputUnavailable, match="nobody is here"):
            await client.call_tool("ask")
        log = await received(client)
    assert log[-1]["method"] == "tasks/cancel"


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_two_asks_of_one_poll_in_the_servers_order(transport: str, tmp_path: Path) -> None:
    order: list[str] = []

    async def answering(key: str, request: m.wire.InputRequest) -> Any:
        order.append(key)
        await anyio.sleep(0.05 if key == "a" else 0)  # (b answers first)
        return m.wire.ElicitResult(action="accept", content={"name": key.upper()})

    with anyio.fail_after(30):
        async with connected(transport, tmp_path, answer=answering) as client:
            assert text(await client.call_tool("pair")) == "A and B"
            log = await received(client)
    assert order == ["a", "b"]  # entered as the server listed them
    updates = [e["params"]["inputResponses"] for e in log if e["method"] == "tasks/update"]
    assert [list(answers) for answers in updates] == [["b"], ["a"]]  # each as it came


async def test_asks_without_an_input_handler_fail_the_call(tmp_path: Path) -> None:
    caps = {"elicitation": {}}  # declared, with nothing to answer
    async with connected("stdio", tmp_path, answer=None, capabilities=caps) as client:
        with anyio.fail_after(20), pytest.raises(InputUnavailable, match="no input handler"):
            await client.call_tool("pair")
        log = await received(client)
    assert log[-1]["method"] == "tasks/cancel"


async def test_an_ask_the_server_drops_stays_out_until_the_task_ends(tmp_path: Path) -> None:
    ended: list[str] = []

    async def slow(key: str, request: m.wire.InputRequest) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            ended.append(key)

    async with connected("stdio", tmp_path, answer=slow) as client:
        with anyio.fail_after(20):
            assert text(await client.call_tool("withdraw")) == "went on without it"
        log = await received(client)
    assert ended == ["a"]
    assert not [e for e in log if e["method"] in ("tasks/update", "tasks/cancel")]


async def test_handler_failures_and_a_failing_status_callback(tmp_path: Path) -> None:
    async def crashing(key: str, request: m.wire.InputRequest) -> Any:
        raise RuntimeError("boom")

    async def wrong_kind(key: str, request: m.wire.InputRequest) -> Any:
        return m.wire.ListRootsResult(roots=[])

    def bad_callback(task_id: str, change: Any) -> None:
        raise ValueError("the callback's own bug")

    async with connected("stdio", tmp_path, answer=crashing) as client:
        with anyio.fail_after(20), pytest.raises(InputUnavailable, match="boom") as caught:
            await client.call_tool("ask", on_task_status=bad_callback)
        assert isinstance(caught.value.__cause__, RuntimeError)
    async with connected("stdio", tmp_path, answer=wrong_kind) as client:
        with anyio.fail_after(20), pytest.raises(InputUnavailable, match="ElicitResult"):
            await client.call_tool("ask")
        log = await received(client)
    assert not [e for e in log if e["method"] == "tasks/update"]  # never sent


async def test_a_task_that_vanishes_or_a_server_that_dies(tmp_path: Path) -> None:
    async with connected("stdio", tmp_path) as client:
        with anyio.fail_after(20), pytest.raises(CallError) as unknown:
            await client.call_tool("vanish")
        assert unknown.value.code == -32602 and "Task not found" in unknown.value.message
        with anyio.fail_after(20), pytest.raises(TransportError):
            await client.call_tool("die")


# --- HTTP: Mcp-Name and Mcp-Method on every task request -----------------------------------


async def test_over_http_each_task_request_names_its_task(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    async with connected("http", tmp_path) as client:
        link: Any = client.link
        headers_of = link.request_headers

        def spying(out: Any) -> Any:  # (the link's own headers, recorded as they go out)
            headers = headers_of(out)
            seen.append(dict(headers))
            return headers

        link.request_headers = spying
        with anyio.fail_after(20):
            assert text(await client.call_tool("ask")) == "hello Ada"
    task_requests = [h for h in seen if h["Mcp-Method"].startswith("tasks/")]
    assert {h["Mcp-Method"] for h in task_requests} == {"tasks/get", "tasks/update"}
    names = {h["Mcp-Name"] for h in task_requests}
    assert len(names) == 1 and len(names.pop()) >= 16  # the task id, the same on each


# --- TaskHandle: a task the caller holds --------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_held_task(transport: str, tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with connected(transport, tmp_path) as client:
            handle = await client.call_task("ask")
            assert handle.task_id is not None and not handle.complete
            assert handle.created is not None and handle.created.status == "working"
            task = await handle.get()
            assert task.status == "input_required" and task.input_requests is not None
            assert list(task.input_requests) == ["name"]
            await handle.answer({"name": {"action": "accept", "content": {"name": "Bo"}}})
            # result() drives it on; "name" was answered by hand: never asked again
            assert text(await handle.result()) == "hello Bo"
            assert handle.answered == {"name"}

            # taken up again by its id (a restart): the same task, polled to its end
            held = await client.call_task("forever")
            assert held.task_id is not None
            again = client.task(held.task_id)
            assert (await again.get()).status == "working"
            await again.cancel()
            with pytest.raises(TaskCancelled, match="cancelled by the client"):
                await again.result()

            # a server that answers without a task: the handle is complete
            plain = await client.call_task("log")
            assert plain.complete and plain.task_id is None
            assert json.loads(text(await plain.result()))
            with pytest.raises(ClientError, match="without one"):
                await plain.get()

            with pytest.raises(CallError) as unknown:
                await client.task("no-such-task").get()
            assert unknown.value.code == -32602
            with pytest.raises(ClientError, match="cannot send tasks/update"):
                await client.task("any").answer({"k": 5})  # type: ignore[dict-item]
            # a server that answers tasks/get with another task, or with no task
            for tool, said in [("other_id", "answered for task"), ("not_a_task", "invalid")]:
                odd = await client.call_task(tool)
                with pytest.raises(CallError, match=said):
                    await odd.get()
                await odd.cancel()
    with pytest.raises(ClientError, match="non-empty string"):
        client.task("")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_held_task_bounded_by_its_timeout(transport: str, tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with connected(transport, tmp_path) as client:
            handle = await client.call_task("forever", {"interval": 50})
            with pytest.raises(CallTimeout):
                await handle.result(timeout=0.5)
            log = await received(client)
    assert log[-1] == {
        "method": "tasks/cancel",
        "params": {"taskId": handle.task_id},
        "declared": True,
    }


# --- a task where none may come ----------------------------------------------------------

ROGUE = [sys.executable, str(Path(__file__).parents[2] / "support" / "task_peer.py"), "--rogue"]


async def test_a_task_to_a_request_that_did_not_declare_it_is_invalid() -> None:
    with anyio.fail_after(20):
        async with open_stdio_client(ROGUE, env=TESTS_ON_PATH, tasks=False) as client:
            with pytest.raises(CallError, match=re.escape(f"did not declare {TASKS}")) as bad:
                await client.call_tool("quick")
            assert bad.value.code == -32603
        async with open_stdio_client(ROGUE, env=TESTS_ON_PATH) as client:
            with pytest.raises(CallError, match="prompts/get cannot be answered with a task"):
                await client.call("prompts/get", {"name": "p"})
