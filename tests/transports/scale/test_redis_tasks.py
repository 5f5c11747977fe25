"""``RedisTaskStore`` against a real redis-server, and the ``TaskStore`` semantics it shares
with ``MemoryTaskStore`` (one suite, run over both stores).

The shared part: bound to the principal (another's id is unknown, exactly as an id that
never existed), unguessable ids (with a routing prefix when asked), statuses only through
the core's table, the bounds (shares, pending inputs, result size, TTL).  The Redis part:
two stores on one URL stand for two workers (a task created on one is read, answered and
cancelled through the other; racing settles settle once; a lapsed lease fails the task;
notifications cross over pub/sub), the records' own expiry in Redis, and failing closed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import coredis
import pytest
from mrtr_transports._shares import LOCAL_CLIENT
from mrtr_transports.apps.task_store import (
    EXPIRED_GRACE,
    MemoryTaskStore,
    TaskStore,
    TooManyTasks,
)
from mrtr_transports.stores.redis_tasks import (
    DEFAULT_TASK_PREFIX,
    WORKER_STOPPED,
    RedisTaskStore,
    TaskStoreUnavailable,
)
from scale_services import RedisServer

import mrtr_core as m

NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])
ROLE = m.server.elicit_form("Your role?", {"role": {"type": "string"}}, required=["role"])
ADA = {"action": "accept", "content": {"name": "Ada"}}

Opener = Callable[..., AbstractAsyncContextManager[Any]]

# Every test on both loops: the store runs under whichever the server runs on.
pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "redis"])
def open_store(request: pytest.FixtureRequest) -> Opener:
    """``async with open_store(**bounds) as store``: a memory store, or a Redis one on a
    fresh redis-server (the same keywords)."""
    if request.param == "memory":

        @asynccontextmanager
        async def memory(**bounds: Any) -> AsyncIterator[MemoryTaskStore]:
            yield MemoryTaskStore(**bounds)

        return memory
    server: RedisServer = request.getfixturevalue("redis_server")

    @asynccontextmanager
    async def redis(**bounds: Any) -> AsyncIterator[RedisTaskStore]:
        async with RedisTaskStore(server.url, check_interval=0.05, **bounds) as store:
            yield store

    return redis


# --- the semantics both stores share ------------------------------------------------------


async def test_a_task_is_its_principals_and_reads_as_unknown_to_anyone_else(
    open_store: Opener,
) -> None:
    async with open_store() as store:
        record = await store.create(principal="ada", client="c", now=10.0)
        found = await store.find(record.task_id, "ada", 11.0)
        assert (found.task_id, found.status, found.principal) == (record.task_id, "working", "ada")
        for principal, task_id in [("eve", record.task_id), (None, record.task_id)]:
            with pytest.raises(m.tasks.UnknownTask) as other:
                await store.find(task_id, principal, 11.0)
            with pytest.raises(m.tasks.UnknownTask) as never:
                await store.find("x" + task_id[1:], "ada", 11.0)
            # exactly the same refusal as an id that never existed
            assert (other.value.code, type(other.value)) == (never.value.code, type(never.value))
            assert other.value.code == m.ErrorCode.INVALID_PARAMS
            with pytest.raises(m.tasks.UnknownTask):
                await store.answer(task_id, principal, {"name": ADA}, 11.0)
            with pytest.raises(m.tasks.UnknownTask):
                await store.cancel(task_id, principal, 11.0)
        for odd in (None, 7, "", ["x"]):
            with pytest.raises(m.tasks.UnknownTask):
                await store.find(odd, "ada", 11.0)
        assert (await store.find(record.task_id, "ada", 12.0)).status == "working"


async def test_ids_are_unguessable_and_carry_the_routing_prefix(open_store: Opener) -> None:
    async with open_store(id_prefix="w1.") as store:
        ids = {
            (await store.create(principal=None, client=f"c{i}", now=0.0)).task_id for i in range(20)
        }
    assert len(ids) == 20
    assert all(task_id.startswith("w1.") and len(task_id) == 3 + 32 for task_id in ids)
    for bad in ("w 1", "w1/", "é", "x" * 65):
        with pytest.raises(ValueError, match="prefix"):
            async with open_store(id_prefix=bad):
                pass


async def test_input_asked_answered_and_taken_by_the_work(open_store: Opener) -> None:
    async with open_store(max_pending_inputs=2) as store:
        record = await store.create(principal="ada", client="c", now=0.0)
        await store.ask(record.task_id, {"name": NAME}, 1.0)
        asked = await store.find(record.task_id, "ada", 1.5)
        assert asked.status == "input_required" and set(asked.pending) == {"name"}
        wire = asked.detailed().to_result()
        assert wire["inputRequests"]["name"]["method"] == "elicitation/create"
        with pytest.raises(m.LocalProtocolError, match="unique"):
            await store.ask(record.task_id, {"name": NAME}, 2.0)
        with pytest.raises(m.LocalProtocolError, match="max_pending_inputs=2"):
            await store.ask(record.task_id, {"a": NAME, "b": ROLE}, 2.0)
        await store.answer(record.task_id, "ada", {"other": ADA}, 3.0)  # not asked: ignored
        assert (await store.find(record.task_id, "ada", 3.0)).status == "input_required"
        await store.answer(record.task_id, "ada", {"name": ADA}, 4.0)
        assert (await store.find(record.task_id, "ada", 4.0)).status == "working"
        assert await store.wait_answers(record.task_id, frozenset({"name"})) == {"name": ADA}
        settled = await store.change(record.task_id, "completed", 5.0, result={"content": []})
        assert settled is not None and settled.status == "completed"
        result = (await store.find(record.task_id, "ada", 6.0)).detailed().to_result()
        assert result["result"] == {"content": []} and "inputRequests" not in result


async def test_a_terminal_task_stays_terminal(open_store: Opener) -> None:
    async with open_store() as store:
        record = await store.create(principal=None, client="c", now=0.0)
        await store.change(record.task_id, "completed", 1.0, result={"content": []})
        again = await store.change(record.task_id, "failed", 2.0)  # a second outcome: ignored
        assert again is not None and again.status == "completed"
        await store.cancel(record.task_id, None, 3.0)  # the same ack; nothing changes
        found = await store.find(record.task_id, None, 4.0)
        assert (found.status, found.updated_at) == ("completed", 1.0)


async def test_a_cancel_settles_a_task_no_work_runs_for(open_store: Opener) -> None:
    async with open_store() as store:
        record = await store.create(principal="ada", client="c", now=0.0)
        await store.cancel(record.task_id, "ada", 1.0)
        found = await store.find(record.task_id, "ada", 2.0)
        assert (found.status, found.updated_at) == ("cancelled", 1.0)


async def test_a_result_over_the_bound_fails_the_task(open_store: Opener) -> None:
    async with open_store(max_result_bytes=100) as store:
        record = await store.create(principal=None, client="c", now=0.0)
        big = {"content": [{"type": "text", "text": "x" * 200}]}
        await store.change(record.task_id, "completed", 1.0, result=big)
        found = (await store.find(record.task_id, None, 2.0)).detailed().to_result()
        assert found["status"] == "failed" and "result" not in found
        assert found["error"]["code"] == m.ErrorCode.INTERNAL_ERROR
        assert "max_result_bytes=100" in found["error"]["message"]


async def test_each_client_has_its_share_of_a_bounded_pool(open_store: Opener) -> None:
    async with open_store(max_tasks=3, max_tasks_per_client=2) as store:
        for _ in range(2):
            await store.create(principal=None, client="peer:a", now=0.0)
        with pytest.raises(TooManyTasks) as own:
            await store.create(principal=None, client="peer:a", now=0.0)
        assert own.value.code == m.ErrorCode.SERVER_BUSY
        assert own.value.data == {"reason": "own_share"}
        assert "max_tasks_per_client=2" in own.value.message
        await store.create(principal=None, client="peer:b", now=0.0)
        with pytest.raises(TooManyTasks) as full:
            await store.create(principal=None, client="peer:c", now=0.0)
        assert full.value.data == {"reason": "pool_full"}
        assert "max_tasks=3" in full.value.message


async def test_the_one_local_client_has_the_whole_pool(open_store: Opener) -> None:
    async with open_store(max_tasks=3, max_tasks_per_client=1) as store:
        for _ in range(3):
            await store.create(principal=None, client=LOCAL_CLIENT, now=0.0)
        with pytest.raises(TooManyTasks, match="max_tasks=3"):
            await store.create(principal=None, client=LOCAL_CLIENT, now=0.0)


async def test_the_ttl_removes_a_finished_task_and_fails_a_running_one(
    open_store: Opener,
) -> None:
    async with open_store(ttl=5, max_tasks=2, max_tasks_per_client=2) as store:
        done = await store.create(principal=None, client="c", now=0.0)
        running = await store.create(principal=None, client="c", now=0.0)
        await store.change(done.task_id, "completed", 1.0, result={"content": []})
        assert (await store.find(done.task_id, None, 4.9)).status == "completed"
        with pytest.raises(m.tasks.UnknownTask):  # at its TTL: removed
            await store.find(done.task_id, None, 5.0)
        expired = (await store.find(running.task_id, None, 5.0)).detailed().to_result()
        assert expired["status"] == "failed" and "expired" in expired["error"]["message"]
        # kept a grace longer, for its client to see why
        assert (await store.find(running.task_id, None, 5.0 + EXPIRED_GRACE - 1)).status == "failed"
        with pytest.raises(m.tasks.UnknownTask):
            await store.find(running.task_id, None, 5.0 + EXPIRED_GRACE)
        # the shares are free again
        await store.create(principal=None, client="c", now=5.0 + EXPIRED_GRACE)
        await store.create(principal=None, client="c", now=5.0 + EXPIRED_GRACE)


async def test_the_work_side_of_a_task_that_is_gone(open_store: Opener) -> None:
    async with open_store(ttl=5) as store:
        record = await store.create(principal=None, client="c", now=0.0)
        await store.change(record.task_id, "completed", 1.0, result={"content": []})
        with pytest.raises(m.tasks.UnknownTask):
            await store.find(record.task_id, None, 5.0)
        if isinstance(store, RedisTaskStore):  # (Redis drops it by its own clock: ask it to)
            await _forget(store, record.task_id)
        assert await store.change(record.task_id, "failed", 7.0) is None
        await store.set_message(record.task_id, "late", 7.0)  # nothing to update
        await store.expire(record.task_id, 7.0)
        with pytest.raises(m.LocalProtocolError, match="gone"):
            await store.ask(record.task_id, {"name": NAME}, 7.0)
        with pytest.raises(m.LocalProtocolError, match="gone"):
            await store.wait_answers(record.task_id, frozenset({"name"}))


async def test_the_works_own_deadline_fails_it_expired(open_store: Opener) -> None:
    async with open_store(ttl=100) as store:
        record = await store.create(principal=None, client="c", now=0.0)
        await store.expire(record.task_id, 50.0)  # the loop's clock got there first
        found = (await store.find(record.task_id, None, 51.0)).detailed().to_result()
        assert found["status"] == "failed" and "expired" in found["error"]["message"]
        await store.change(record.task_id, "completed", 52.0, result={"content": []})
        assert (await store.find(record.task_id, None, 53.0)).status == "failed"  # stays


async def test_watchers_see_each_status_change_until_they_stop(open_store: Opener) -> None:
    async with open_store() as store:
        seen: list[str] = []
        stop = store.watch(lambda record: seen.append(record.status))
        record = await store.create(principal=None, client="c", now=0.0)
        await store.ask(record.task_id, {"name": NAME}, 1.0)
        await store.set_message(record.task_id, "waiting", 1.5)  # not a status change
        assert (await store.find(record.task_id, None, 1.6)).message == "waiting"
        await store.answer(record.task_id, None, {"name": {"action": "decline"}}, 2.0)
        await store.wait_answers(record.task_id, frozenset({"name"}))
        stop()
        await store.change(record.task_id, "completed", 3.0, result={"content": []})
        assert seen == ["input_required", "working"]


# --- across workers: two stores on one Redis ------------------------------------------------


async def _forget(store: RedisTaskStore, task_id: str) -> None:
    async with coredis.Redis.from_url(store.url) as raw:
        await raw.delete([f"{store.prefix}task:{task_id}"])


@asynccontextmanager
async def two_workers(
    server: RedisServer, **options: Any
) -> AsyncIterator[tuple[RedisTaskStore, RedisTaskStore]]:
    async with (
        RedisTaskStore(server.url, check_interval=0.05, **options) as a,
        RedisTaskStore(server.url, check_interval=0.05, **options) as b,
    ):
        yield a, b


async def subscribed(server: RedisServer, stores: int) -> None:
    """Until ``stores`` stores listen on the task channel (each subscribes as it opens,
    in its own task): a wait on Redis's count, not a guess at how long that takes."""
    channel = f"{DEFAULT_TASK_PREFIX}events"
    async with coredis.Redis.from_url(server.url, decode_responses=True) as raw:
        with anyio.fail_after(10):
            while (await raw.pubsub_numsub(channel)).get(channel, 0) < stores:
                await anyio.sleep(0.01)


async def test_a_task_made_on_one_worker_is_answered_and_cancelled_on_another(
    redis_server: RedisServer,
) -> None:
    async with two_workers(redis_server) as (a, b):
        record = await a.create(principal="ada", client="c", now=0.0)
        cancelled = anyio.Event()
        assert a.attach(record.task_id, cancelled.set)
        await a.ask(record.task_id, {"name": NAME}, 1.0)
        assert set((await b.find(record.task_id, "ada", 2.0)).pending) == {"name"}
        got: dict[str, Any] = {}

        async def work_waits() -> None:
            got.update(await a.wait_answers(record.task_id, frozenset({"name"})))

        with anyio.fail_after(10):  # the running worker's next look wakes its work
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(work_waits)
                await anyio.sleep(0.3)
                assert not got  # (waiting)
                await b.answer(record.task_id, "ada", {"name": ADA}, 3.0)
        assert got == {"name": ADA}
        await b.cancel(record.task_id, "ada", 4.0)
        assert (await a.find(record.task_id, "ada", 4.5)).status == "cancelled"  # at once
        with anyio.fail_after(10):  # and the work on the other worker is cancelled
            await cancelled.wait()
        assert len(a) == 0  # no longer running there
        a.attach(record.task_id, None)
        # the work's own settle after its cancellation changes nothing
        after = await a.change(record.task_id, "cancel", 5.0)
        assert after is not None and after.status == "cancelled"


async def test_workers_racing_to_settle_one_task_settle_it_once(redis_server: RedisServer) -> None:
    async with two_workers(redis_server) as (a, b):
        record = await a.create(principal=None, client="c", now=0.0)
        seen: list[str] = []
        for store in (a, b):
            store.watch(lambda r: seen.append(r.status))
        outcomes: list[str] = []
        await subscribed(redis_server, 2)

        async def settle(store: RedisTaskStore, i: int) -> None:
            if i % 3 == 0:
                done = await store.change(
                    record.task_id,
                    "completed",
                    1.0,
                    result={"content": [{"type": "text", "text": str(i)}]},
                )
            elif i % 3 == 1:
                error = m.ErrorObject(code=-32603, message=str(i))
                done = await store.change(record.task_id, "failed", 1.0, error=error)
            else:
                await store.cancel(record.task_id, None, 1.0)
                done = await store.find(record.task_id, None, 1.0)
            assert done is not None
            outcomes.append(done.status)

        async with anyio.create_task_group() as tasks:
            for i in range(30):
                tasks.start_soon(settle, (a, b)[i % 2], i)
        final = await b.find(record.task_id, None, 2.0)
        assert final.status in ("completed", "failed", "cancelled")
        assert set(outcomes) == {final.status}  # every settler saw the one outcome
        await anyio.sleep(0.3)  # (the other worker hears it over pub/sub)
        assert seen == [final.status, final.status]  # one change, told once on each worker


async def test_a_lapsed_lease_fails_the_task_and_a_renewed_one_keeps_it(
    redis_server: RedisServer,
) -> None:
    async with RedisTaskStore(redis_server.url, lease=1.5, check_interval=0.05) as reader:
        async with RedisTaskStore(redis_server.url, lease=1.5, check_interval=0.05) as runner:
            kept = await runner.create(principal=None, client="c", now=0.0)
            runner.attach(kept.task_id, lambda: None)
            stopped = await runner.create(principal=None, client="c", now=0.0)
            await runner.ask(stopped.task_id, {"name": NAME}, 0.5)
            runner.attach(stopped.task_id, lambda: None)
            await anyio.sleep(2.5)  # more than the lease: renewed while the runner lives
            assert (await reader.find(kept.task_id, None, 1.0)).status == "working"
        # the runner is gone (as a killed worker: nothing settles its tasks)
        await anyio.sleep(2.0)
        failed = (await reader.find(stopped.task_id, None, 2.0)).detailed().to_result()
        assert failed["status"] == "failed" and "inputRequests" not in failed
        assert failed["error"] == {"code": -32603, "message": WORKER_STOPPED}
        assert (await reader.find(kept.task_id, None, 2.0)).status == "failed"


async def test_a_listener_on_another_worker_hears_status_changes(redis_server: RedisServer) -> None:
    async with two_workers(redis_server) as (a, b):
        heard: list[tuple[str, str]] = []
        b.watch(
            lambda r: heard.append((r.task_id, r.detailed().to_notification_params()["status"]))
        )
        await subscribed(redis_server, 2)  # (b's subscription is up)
        record = await a.create(principal=None, client="c", now=0.0)
        await a.ask(record.task_id, {"name": NAME}, 1.0)
        await a.change(record.task_id, "completed", 2.0, result={"content": []})
        with anyio.fail_after(10):
            while len(heard) < 2:
                await anyio.sleep(0.02)
        assert heard == [(record.task_id, "input_required"), (record.task_id, "completed")]


async def test_the_shares_hold_across_workers(redis_server: RedisServer) -> None:
    async with two_workers(redis_server, max_tasks=3, max_tasks_per_client=2) as (a, b):
        await a.create(principal=None, client="peer:x", now=0.0)
        await b.create(principal=None, client="peer:x", now=0.0)
        with pytest.raises(TooManyTasks, match="max_tasks_per_client=2"):
            await a.create(principal=None, client="peer:x", now=0.0)
        await a.create(principal=None, client="peer:y", now=0.0)
        with pytest.raises(TooManyTasks, match="max_tasks=3"):
            await b.create(principal=None, client="peer:z", now=0.0)


async def test_the_work_of_a_task_gone_from_redis_is_cancelled(
    redis_server: RedisServer,
) -> None:
    async with RedisTaskStore(redis_server.url, check_interval=0.05) as store:
        record = await store.create(principal=None, client="c", now=0.0)
        cancelled = anyio.Event()
        store.attach(record.task_id, cancelled.set)
        await anyio.sleep(0.2)
        assert not cancelled.is_set() and len(store) == 1  # still there: it runs on
        await _forget(store, record.task_id)  # (Redis dropped it: flushed, or restarted empty)
        with anyio.fail_after(10):
            await cancelled.wait()
        assert len(store) == 0


async def test_a_closed_store_starts_no_work_records_nothing_and_fails_requests_closed(
    redis_server: RedisServer,
) -> None:
    async with RedisTaskStore(redis_server.url) as store:
        record = await store.create(principal=None, client="c", now=0.0)
    # (the server stopped: its works may still end, or start, after the store closed)
    assert store.attach(record.task_id, lambda: None) is False
    assert await store.change(record.task_id, "completed", 1.0, result={"content": []}) is None
    await store.set_message(record.task_id, "late", 1.0)
    await store.expire(record.task_id, 1.0)
    with pytest.raises(TaskStoreUnavailable, match="closed"):
        await store.find(record.task_id, None, 1.0)
    async with RedisTaskStore(redis_server.url) as again:  # nothing was written
        found = await again.find(record.task_id, None, 2.0)
        assert (found.status, found.message) == ("working", None)


async def test_the_channel_ignores_what_is_not_a_task_change(redis_server: RedisServer) -> None:
    async with RedisTaskStore(redis_server.url, check_interval=0.05) as store:
        heard: list[str] = []
        store.watch(lambda record: heard.append(record.task_id))
        await subscribed(redis_server, 1)
        async with coredis.Redis.from_url(redis_server.url) as raw:
            channel = f"{DEFAULT_TASK_PREFIX}events"
            for junk in ("not json", "{}", '{"origin": "x", "record": "{}"}', "[1]"):
                await raw.publish(channel, junk)
        await anyio.sleep(0.3)
        record = await store.create(principal=None, client="c", now=0.0)
        await store.change(record.task_id, "completed", 1.0, result={"content": []})
        assert heard == [record.task_id]  # its own change, told once; the junk, never


async def test_the_record_lives_in_redis_until_its_ttl(redis_server: RedisServer) -> None:
    async with RedisTaskStore(redis_server.url, ttl=100) as store:
        record = await store.create(principal="ada", client="c", now=0.0)
        key = f"{DEFAULT_TASK_PREFIX}task:{record.task_id}"
        async with coredis.Redis.from_url(redis_server.url) as raw:
            running = await raw.pttl(key)
            await store.change(record.task_id, "completed", 10.0, result={"content": []})
            done = await raw.pttl(key)
            lease = await raw.exists([f"{DEFAULT_TASK_PREFIX}lease:{record.task_id}"])
        assert (100 + EXPIRED_GRACE - 1) * 1000 < running <= (100 + EXPIRED_GRACE) * 1000
        assert 89_000 < done <= 90_000  # at its TTL, from its creation
        assert lease == 0  # a settled task holds no lease


async def test_redis_gone_fails_closed_and_the_store_recovers(redis_server: RedisServer) -> None:
    async with RedisTaskStore(redis_server.url, timeout=1.0) as store:
        record = await store.create(principal=None, client="c", now=0.0)
        redis_server.pause()  # the port is open, nothing answers
        try:
            with pytest.raises(TaskStoreUnavailable) as refused:
                await store.find(record.task_id, None, 1.0)
        finally:
            redis_server.resume()
        assert refused.value.code == m.ErrorCode.INTERNAL_ERROR
        assert (
            "127.0.0.1" not in refused.value.message
            and str(redis_server.port) not in refused.value.message
        )
        assert "fail closed" in refused.value.message
        assert (await store.find(record.task_id, None, 2.0)).status == "working"
        redis_server.stop()  # gone altogether
        for attempt in (
            store.find(record.task_id, None, 3.0),
            store.create(principal=None, client="c", now=3.0),
        ):
            with pytest.raises(TaskStoreUnavailable):
                await attempt


def test_the_store_is_used_open_and_configured_sanely(redis_server: RedisServer) -> None:
    store = RedisTaskStore("redis://u:secret@127.0.0.1:1/0")
    assert "secret" not in repr(store)
    for bad in (
        {"lease": 0},
        {"check_interval": 0},
        {"ttl": 0},
        {"max_tasks": 0},
        {"max_pending_inputs": 0},
        {"timeout": 0},
        {"lease": 1.0, "check_interval": 0.5},  # it would lapse between two looks
    ):
        with pytest.raises(ValueError):
            RedisTaskStore(redis_server.url, **bad)
    with pytest.raises(ValueError, match="redis://"):
        RedisTaskStore("http://127.0.0.1/")

    async def closed() -> None:
        with pytest.raises(m.LocalProtocolError, match="async with"):
            await RedisTaskStore(redis_server.url).find("x", None, 0.0)

    anyio.run(closed)


def _is_a_task_store(url: str) -> TaskStore:  # (for mypy: it implements the protocol)
    return RedisTaskStore(url)
