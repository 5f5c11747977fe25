"""``notifications/tasks`` on ``subscriptions/listen`` (SEP-2663), over real HTTP on
127.0.0.1: the listen stream is read raw (``support.raw_http``, trio), as the project's
client does not ask for ``taskIds`` yet; the task is driven by the project's client.
"""

from __future__ import annotations

from typing import Any

import trio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import SUBSCRIPTION_ID, McpApp
from mrtr_transports.apps.task_methods import MAX_LISTENED_TASKS
from mrtr_transports.apps.task_runs import TaskContext
from mrtr_transports.apps.task_store import MemoryTaskStore, TaskStore
from support.raw_http import RawHttp, sse_messages
from tasks_kit import TASKS, WITH_TASKS, WITHOUT_TASKS, accept, call, client_of, get, served

import mrtr_core as m

NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])


def build_app(
    gates: list[trio.Event], store: TaskStore | None = None, principal: str = "ada"
) -> McpApp:
    app = McpApp("listened", "1.0", principal=principal, tasks=store)

    async def gated(task: TaskContext) -> str:
        await gates[0].wait()
        name = await task.wait_for_answer("name", NAME)
        await gates[1].wait()
        return f"hello {(name.content or {}).get('name')}"

    @app.tool(task="optional")
    def stepped(ctx: Context) -> Any:
        return ctx.run_task(gated)

    return app


def listen_request(task_ids: Any, capabilities: Any = WITH_TASKS) -> dict[str, Any]:
    meta = {
        m.wire.META_PROTOCOL_VERSION: "2026-07-28",
        m.wire.META_CLIENT_CAPABILITIES: capabilities,
    }
    params = {"notifications": {"taskIds": task_ids}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": params}


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def read_messages(conn: RawHttp, count: int) -> list[dict[str, Any]]:
    """The stream's first ``count`` complete SSE messages (reading more as needed)."""
    with trio.fail_after(10):
        while True:
            body = bytes(conn._body)
            whole = body[: body.rfind(b"\n\n") + 2] if b"\n\n" in body else b""
            found = sse_messages(whole)
            if len(found) >= count:
                return found[:count]
            await conn._more()


async def open_listen(url: str, task_ids: Any, capabilities: Any = WITH_TASKS) -> RawHttp:
    conn = await RawHttp.connect(port_of(url))
    await conn.send(listen_request(task_ids, capabilities))
    await conn.head()
    return conn


async def test_a_listen_stream_gets_each_status_change_as_tasks_get_would_answer() -> None:
    gates = [trio.Event(), trio.Event()]
    async with served(build_app(gates)) as url, client_of(url) as client:
        task_id = (await call(client, "stepped"))["taskId"]
        conn = await open_listen(url, [task_id, "never-created", task_id])
        try:
            [ack] = await read_messages(conn, 1)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"] == {"taskIds": [task_id]}

            def as_pushed(task: dict[str, Any]) -> dict[str, Any]:
                return {k: v for k, v in task.items() if k not in ("resultType", "_meta")}

            gates[0].set()  # the work asks: input_required
            asked = (await read_messages(conn, 2))[1]
            assert asked["method"] == "notifications/tasks"
            assert asked["params"]["_meta"] == {SUBSCRIPTION_ID: "listen-1"}
            assert as_pushed(asked["params"]) == as_pushed(await get(client, task_id))
            assert asked["params"]["status"] == "input_required"
            assert list(asked["params"]["inputRequests"]) == ["name"]

            await client.request(
                "tasks/update", {"taskId": task_id, "inputResponses": {"name": accept(name="Ada")}}
            )
            working = (await read_messages(conn, 3))[2]
            assert working["params"]["status"] == "working"
            assert as_pushed(working["params"]) == as_pushed(await get(client, task_id))

            gates[1].set()  # the work ends: completed, its result inlined
            done = (await read_messages(conn, 4))[3]
            assert done["params"]["status"] == "completed"
            assert done["params"]["result"]["content"][0]["text"] == "hello Ada"
            assert as_pushed(done["params"]) == as_pushed(await get(client, task_id))
            assert "requestState" not in done["params"]
        finally:
            await conn.aclose()


async def test_task_ids_need_the_extension_and_a_short_list() -> None:
    async with served(build_app([trio.Event(), trio.Event()])) as url:
        for task_ids, capabilities, code in (
            (["x"], WITHOUT_TASKS, -32021),
            (["x"] * (MAX_LISTENED_TASKS + 1), WITH_TASKS, -32602),
            ("x", WITH_TASKS, -32602),
            ([1], WITH_TASKS, -32602),
        ):
            conn = await RawHttp.connect(port_of(url))
            try:
                reply = await conn.post(listen_request(task_ids, capabilities))
            finally:
                await conn.aclose()
            error = reply.final()["error"]
            assert error["code"] == code, (task_ids, capabilities)
            if code == -32021:
                assert error["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}


async def test_another_principals_task_is_not_acknowledged() -> None:
    store = MemoryTaskStore()
    gates = [trio.Event(), trio.Event()]
    alice = build_app(gates, store, principal="alice")
    bob = build_app(gates, store, principal="bob")
    async with served(alice) as alice_url, served(bob) as bob_url, client_of(alice_url) as as_alice:
        theirs = (await call(as_alice, "stepped"))["taskId"]
        conn = await open_listen(bob_url, [theirs])
        try:
            [ack] = await read_messages(conn, 1)
        finally:
            await conn.aclose()
        # As for an id that never existed: nothing agreed to.
        assert ack["params"]["notifications"] == {}
        await as_alice.request("tasks/cancel", {"taskId": theirs})
