"""The example app's ``build_report``: long work in a task that asks mid-task, served over
real HTTP on 127.0.0.1 (both loops)."""

from __future__ import annotations

import anyio
import pytest
from mrtr_transports.apps.example import build_example_app
from tasks_kit import TASKS, WITHOUT_TASKS, accept, call, client_of, error_of, get, poll, served

pytestmark = pytest.mark.anyio


async def test_build_report_works_reports_progress_asks_then_publishes() -> None:
    async with served(build_example_app()) as url, client_of(url) as client:
        created = await call(client, "build_report", {"rows": 2})
        assert created["resultType"] == "task" and created["status"] == "working"
        task_id = created["taskId"]
        messages = set()
        with anyio.fail_after(10):
            while (task := await get(client, task_id))["status"] == "working":
                messages.add(task.get("statusMessage"))
                await anyio.sleep(0.05)
        assert messages & {"building row 1 of 2", "building row 2 of 2"}
        assert task["statusMessage"] == "2 rows built: waiting for your answer"
        assert list(task["inputRequests"]) == ["publish"]
        await client.request(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"publish": accept(publish=True, title="Q3")}},
        )
        done = await poll(client, task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "Published 'Q3': 2 rows."}]


async def test_build_report_declined_completes_with_a_tool_error() -> None:
    async with served(build_example_app()) as url, client_of(url) as client:
        task_id = (await call(client, "build_report", {"rows": 1}))["taskId"]
        await poll(client, task_id, until=["input_required"])
        await client.request(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"publish": {"action": "decline"}}},
        )
        done = await poll(client, task_id)
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert done["result"]["content"][0]["text"] == (
        "Report not published: you declined to answer 'Publish the report?'."
    )


async def test_build_report_needs_a_client_that_declares_tasks() -> None:
    async with served(build_example_app()) as url, client_of(url, WITHOUT_TASKS) as client:
        refused = await error_of(lambda: call(client, "build_report", {"rows": 1}))
    assert refused.code == -32021
    assert refused.data["requiredCapabilities"] == {"extensions": {TASKS: {}}}
