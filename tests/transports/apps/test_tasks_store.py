"""The memory task store's own rules, without a server: what the HTTP tests cannot time
(a cancel that comes before the work started), and the edges of its interface."""

from __future__ import annotations

import pytest
from mrtr_transports.apps.task_store import MemoryTaskStore, TaskRecord

import mrtr_core as m

pytestmark = pytest.mark.anyio

NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])


async def test_a_task_cancelled_before_its_work_started_runs_nothing() -> None:
    store = MemoryTaskStore()
    record = await store.create(principal="ada", client="c", now=10.0)
    await store.cancel(record.task_id, "ada", 11.0)
    assert record.status == "cancelled" and record.updated_at == 11.0
    assert store.attach(record.task_id, lambda: None) is False  # the run then returns
    await store.cancel(record.task_id, "ada", 12.0)  # idempotent
    assert record.status == "cancelled" and record.updated_at == 11.0


async def test_watchers_see_each_status_change_until_they_stop() -> None:
    store = MemoryTaskStore()
    seen: list[str] = []
    stop = store.watch(lambda record: seen.append(record.status))
    record = await store.create(principal=None, client="c", now=0.0)
    assert store.attach(record.task_id, lambda: None)
    await store.ask(record.task_id, {"name": NAME}, 1.0)
    await store.set_message(record.task_id, "waiting", 1.5)  # not a status change
    await store.answer(record.task_id, None, {"name": {"action": "decline"}}, 2.0)
    assert await store.wait_answers(record.task_id, frozenset({"name"})) == {
        "name": {"action": "decline"}
    }
    stop()
    await store.change(record.task_id, "completed", 3.0, result={"content": []})
    assert seen == ["input_required", "working"]
    assert record.detailed().to_result()["result"] == {"content": []}


async def test_the_work_side_of_a_task_that_is_gone() -> None:
    store = MemoryTaskStore(ttl=5)
    record: TaskRecord = await store.create(principal=None, client="c", now=0.0)
    await store.change(record.task_id, "completed", 1.0, result={"content": []})
    assert (await store.find(record.task_id, None, 4.9)).status == "completed"
    with pytest.raises(m.tasks.UnknownTask):  # at its TTL: removed
        await store.find(record.task_id, None, 5.0)
    assert await store.change(record.task_id, "failed", 7.0) is None
    await store.set_message(record.task_id, "late", 7.0)  # nothing to update
    await store.expire(record.task_id, 7.0)
    assert store.attach(record.task_id, None) is False
    with pytest.raises(m.LocalProtocolError, match="gone"):
        await store.ask(record.task_id, {"name": NAME}, 7.0)
    with pytest.raises(m.LocalProtocolError, match="gone"):
        await store.wait_answers(record.task_id, frozenset({"name"}))
    assert len(store) == 0 and len(store.shares) == 0
