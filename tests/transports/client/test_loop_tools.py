"""The client's per-call path on both loops: what it looks up once (``_loop.py``)
and the input handler it runs in the caller's task rather than a task of its own
(``Flow.wait_in_caller``).  Marked ``anyio``: each test runs on trio and on asyncio,
through the real in-memory link to the shared server driver."""

from __future__ import annotations

import socket
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import trio
from mrtr_transports._loop import LoopTools
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.client.errors import CallTimeout
from mrtr_transports.client.opening import open_client
from mrtr_transports.testing.memory import MemoryLink
from support.calling_app import QUESTION_KEYS
from support.calling_app import app as calling_app

import mrtr_core as m

pytestmark = pytest.mark.anyio

app = McpApp("one-question", "1.0")
ASK = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])


@app.tool(description="Asks one question, then greets.")
def greet(ctx: Context) -> Any:
    reply = ctx.answer("name", ASK)
    if not isinstance(reply, m.wire.ElicitResult) or reply.content is None:
        return ctx.ask({"name": ASK})
    return f"Hello {reply.content['name']}"


def _accept(key: str) -> m.wire.ElicitResult:
    return m.wire.ElicitResult(action="accept", content={key: key.upper()})


async def test_the_loop_tools_are_the_running_loops(anyio_backend_name: str) -> None:
    loop = LoopTools()
    before = anyio.current_time()
    now = loop.now()
    assert before <= now <= anyio.current_time()

    # On trio, trio's own classes (what anyio's wrap); elsewhere anyio's own.
    on_trio = anyio_backend_name == "trio"
    event = loop.event()
    expected_event = trio.Event if on_trio else type(anyio.Event())
    assert type(event) is expected_event
    assert not event.is_set()
    event.set()
    await event.wait()

    scope = loop.cancel_scope(deadline=loop.now() + 0.05)
    assert isinstance(scope, trio.CancelScope if on_trio else anyio.CancelScope)
    with scope:
        await anyio.sleep(5)
    assert scope.cancelled_caught

    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.setblocking(False)
        theirs.send(b"x")
        with anyio.fail_after(5):
            await loop.wait_readable(ours.fileno())
        assert ours.recv(1) == b"x"
    await loop.checkpoint()


async def test_spawn_starts_a_task_in_the_group_cancelled_and_failing_with_it() -> None:
    loop = LoopTools()
    ran: list[str] = []

    async def task(name: str) -> None:
        ran.append(name)
        await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        loop.spawn(group, task, "first")
        loop.spawn(group, task, "second")
        await anyio.wait_all_tasks_blocked()
        assert sorted(ran) == ["first", "second"]
        group.cancel_scope.cancel()  # ... ends the spawned tasks with the group

    async def fails() -> None:
        raise LookupError("from a spawned task")

    with pytest.raises(ExceptionGroup) as raised:
        async with anyio.create_task_group() as group:
            loop.spawn(group, fails)
    assert raised.group_contains(LookupError, match="from a spawned task")

    # A group not yet entered, or already closed, refuses as start_soon does.
    closed = anyio.create_task_group()
    async with closed:
        pass
    with pytest.raises(RuntimeError):
        loop.spawn(closed, task, "late")
    assert sorted(ran) == ["first", "second"]


async def test_the_first_handler_of_a_round_runs_in_the_callers_task() -> None:
    where: dict[str, int] = {}

    async def answer(key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        where[key] = anyio.get_current_task().id
        await anyio.lowlevel.checkpoint()
        return _accept(key)

    async with open_client(MemoryLink(calling_app), answer=answer, era="modern") as client:
        caller = anyio.get_current_task().id
        for _ in range(3):
            where.clear()
            result = await client.call_tool("three_questions", {})
            assert result["content"][0]["text"] == "ZETA ALPHA MID"
            # The first key in the caller's own task; the two others each in a task.
            assert where[QUESTION_KEYS[0]] == caller
            assert caller not in (where[QUESTION_KEYS[1]], where[QUESTION_KEYS[2]])
            assert where[QUESTION_KEYS[1]] != where[QUESTION_KEYS[2]]


async def test_a_caller_that_gives_up_cancels_the_handler_running_in_its_task() -> None:
    entered = anyio.Event()
    ended: list[str] = []
    block = [True]  # the first call's handler never answers; the next one's at once

    async def answer(key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        if block[0]:
            entered.set()
            try:
                await anyio.sleep_forever()
            finally:
                ended.append(key)
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})

    async with open_client(MemoryLink(app), answer=answer, era="modern") as client:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await client.call_tool("greet", {})

                group.start_soon(call)
                await entered.wait()
                group.cancel_scope.cancel()
        assert ended == ["name"]
        block[0] = False
        with anyio.fail_after(5):
            result = await client.call_tool("greet", {})
        assert result["content"][0]["text"] == "Hello Ada"


async def test_an_input_timeout_cancels_the_handler_running_in_the_callers_task() -> None:
    ended: list[str] = []

    async def answer(key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        try:
            await anyio.sleep_forever()
        finally:
            ended.append(key)
        raise AssertionError("unreachable")

    async with open_client(MemoryLink(app), answer=answer, era="modern") as client:
        with anyio.fail_after(5), pytest.raises(CallTimeout) as caught:
            await client.call_tool("greet", {}, input_timeout=0.1)
        assert caught.value.limit == "input" and ended == ["name"]
