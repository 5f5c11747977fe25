"""Tasks (SEP-2663) in ``McpApp``: who may see a task, and every bound of the store, over
real HTTP on 127.0.0.1 (both loops): unguessable ids, another principal's task read as
an unknown one, the per-client share before the pool, pending inputs, result size, and
the TTL (the app's clock, a fake one here; and the loop's).
"""

from __future__ import annotations

import base64
import re
from typing import Any

import anyio
import pytest
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.task_runs import TaskContext
from mrtr_transports.apps.task_store import EXPIRED_GRACE, MemoryTaskStore, TaskStore
from tasks_kit import accept, call, client_of, error_of, get, poll, served, without_meta

import mrtr_core as m

pytestmark = pytest.mark.anyio

NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])


class FakeClock:
    """The app's clock (``McpApp(clock=...)``), moved by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def build_app(
    store: TaskStore | None = None, *, principal: str | None = "ada", clock: Any = None
) -> McpApp:
    options: dict[str, Any] = {"principal": principal}
    if store is not None:
        options["tasks"] = store
    if clock is not None:
        options["clock"] = clock
    app = McpApp("bounded", "1.0", **options)

    async def sleeps(task: TaskContext, seconds: float) -> str:
        await anyio.sleep(seconds)
        return "slept"

    @app.tool(task="optional")
    def slow(ctx: Context, seconds: float) -> Any:
        return ctx.run_task(sleeps, seconds)

    async def asks(task: TaskContext, count: int) -> str:
        await task.wait_for({f"q{i}": NAME for i in range(count)})
        return "answered"

    @app.tool(task="optional")
    def asking(ctx: Context, count: int) -> Any:
        return ctx.run_task(asks, count)

    async def big(task: TaskContext, size: int) -> str:
        return "x" * size

    @app.tool(task="optional")
    def sized(ctx: Context, size: int) -> Any:
        return ctx.run_task(big, size)

    return app


async def test_task_ids_are_unguessable() -> None:
    async with served(build_app()) as url, client_of(url) as client:
        ids = [(await call(client, "slow", {"seconds": 0}))["taskId"] for _ in range(30)]
    assert len(set(ids)) == len(ids)
    for task_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{32}", task_id), task_id
        assert len(base64.urlsafe_b64decode(task_id)) * 8 >= 128  # 192 bits
    # Random, not a counter: the ids share no common prefix, and use the whole alphabet.
    assert len({task_id[:4] for task_id in ids}) == len(ids)
    assert len(set("".join(ids))) > 50


async def test_another_principals_task_is_exactly_an_unknown_one() -> None:
    store = MemoryTaskStore()
    alice, bob = build_app(store, principal="alice"), build_app(store, principal="bob")
    async with (
        served(alice) as alice_url,
        served(bob) as bob_url,
        client_of(alice_url) as as_alice,
        client_of(bob_url) as as_bob,
    ):
        theirs = (await call(as_alice, "asking", {"count": 1}))["taskId"]
        await poll(as_alice, theirs, until=["input_required"])
        never = "A" * len(theirs)  # an id that never existed, of the same length

        def same(error: Any, task_id: str) -> tuple[int, str, Any]:
            data = {**error.data, "taskId": error.data["taskId"].replace(task_id, "<id>")}
            return error.code, error.message.replace(task_id, "<id>"), data

        requests: list[tuple[str, dict[str, Any]]] = [
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {"q0": accept(name="Mallory")}}),
            ("tasks/cancel", {}),
        ]
        for method, params in requests:
            got = await error_of(
                lambda: as_bob.request(method, {"taskId": theirs, **params})  # noqa: B023
            )
            unknown = await error_of(
                lambda: as_bob.request(method, {"taskId": never, **params})  # noqa: B023
            )
            assert got.code == -32602, method
            assert same(got, theirs) == same(unknown, never), method
        # Nothing Bob sent reached Alice's task.
        still = await get(as_alice, theirs)
        assert still["status"] == "input_required" and list(still["inputRequests"]) == ["q0"]
        await as_alice.request("tasks/cancel", {"taskId": theirs})


async def test_the_per_client_share_is_reached_before_the_pool() -> None:
    store = MemoryTaskStore(max_tasks=8, max_tasks_per_client=2)
    app = build_app(store)
    async with served(app, trusted_proxies=["127.0.0.1"]) as url:

        def as_client(n: int) -> Any:
            return client_of(url, headers={"X-Forwarded-For": f"10.0.0.{n}"})

        async with as_client(1) as first:
            for _ in range(2):
                assert (await call(first, "slow", {"seconds": 60}))["resultType"] == "task"
            own = await error_of(lambda: call(first, "slow", {"seconds": 60}))
            assert own.code == -32000 and own.data == {"reason": "own_share"}
            assert "max_tasks_per_client=2" in own.message
        for n in (2, 3, 4):  # three more clients fill the pool, two each
            async with as_client(n) as other:
                for _ in range(2):
                    assert (await call(other, "slow", {"seconds": 60}))["resultType"] == "task"
        async with as_client(5) as late:
            full = await error_of(lambda: call(late, "slow", {"seconds": 60}))
        assert full.code == -32000 and full.data == {"reason": "pool_full"}
        assert "max_tasks=8" in full.message
        assert len(store) == 8
        for record in list(store._records.values()):  # (stop the sleeping work)
            await store.cancel(record.task_id, "ada", app.clock())


async def test_pending_inputs_and_result_size_are_bounded() -> None:
    store = MemoryTaskStore(max_pending_inputs=2, max_result_bytes=1000)
    async with served(build_app(store)) as url, client_of(url) as client:
        two = (await call(client, "asking", {"count": 2}))["taskId"]
        assert sorted((await poll(client, two, until=["input_required"]))["inputRequests"]) == [
            "q0",
            "q1",
        ]
        three = await poll(client, (await call(client, "asking", {"count": 3}))["taskId"])
        assert three["status"] == "failed"
        assert "max_pending_inputs=2" in three["error"]["message"]

        small = await poll(client, (await call(client, "sized", {"size": 100}))["taskId"])
        assert small["status"] == "completed"
        large = await poll(client, (await call(client, "sized", {"size": 5000}))["taskId"])
        assert large["status"] == "failed" and "result" not in large
        assert large["error"]["code"] == -32603
        assert large["error"]["message"].startswith("result too large")
        await client.request("tasks/cancel", {"taskId": two})


async def test_ttl_by_the_apps_clock_removes_finished_tasks_and_fails_running_ones() -> None:
    clock = FakeClock()
    store = MemoryTaskStore(ttl=60, max_tasks_per_client=2)
    async with served(build_app(store, clock=clock)) as url, client_of(url) as client:
        finished = (await call(client, "slow", {"seconds": 0}))["taskId"]
        assert (await poll(client, finished))["status"] == "completed"
        running = (await call(client, "slow", {"seconds": 60}))["taskId"]
        created = await get(client, running)
        assert created["ttlMs"] == 60_000

        clock.now += 59.9  # within the TTL: both kept as they are
        assert (await get(client, finished))["status"] == "completed"
        assert (await get(client, running))["status"] == "working"
        refused = await error_of(lambda: call(client, "slow", {"seconds": 0}))
        assert refused.data == {"reason": "own_share"}  # both count until removed

        clock.now += 0.2  # past it
        gone = await error_of(lambda: get(client, finished))
        assert gone.code == -32602 and gone.data == {"taskId": finished}
        expired = await get(client, running)
        assert expired["status"] == "failed"
        assert expired["error"]["message"].startswith("expired")

        # The finished task's place is free again; the expired one is kept a grace.
        assert (await call(client, "slow", {"seconds": 0}))["resultType"] == "task"
        clock.now += EXPIRED_GRACE
        assert (await error_of(lambda: get(client, running))).code == -32602


async def test_a_running_task_is_stopped_at_its_ttl_by_the_loops_clock() -> None:
    store = MemoryTaskStore(ttl=0.3)
    async with served(build_app(store)) as url, client_of(url) as client:
        created = await call(client, "slow", {"seconds": 60})
        assert created["ttlMs"] == 300
        expired = await poll(client, created["taskId"])
    assert expired["status"] == "failed"
    assert expired["error"] == {"code": -32603, "message": "expired: the task outlived its ttlMs"}


async def test_store_options_are_checked() -> None:
    for bad in (
        {"max_pending_inputs": 0},
        {"max_result_bytes": 0},
        {"ttl": 0},
        {"poll_interval": -1},
        {"max_tasks": 0},
    ):
        with pytest.raises(ValueError):
            MemoryTaskStore(**bad)
    store = MemoryTaskStore(poll_interval=0.25)
    async with served(build_app(store)) as url, client_of(url) as client:
        created = await call(client, "slow", {"seconds": 0})
        assert created["pollIntervalMs"] == 250
        await poll(client, created["taskId"])
        ack = await client.request("tasks/cancel", {"taskId": created["taskId"]})
        assert without_meta(ack) == {"resultType": "complete"}
