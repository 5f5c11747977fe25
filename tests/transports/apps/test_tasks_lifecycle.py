"""Tasks (SEP-2663) in ``McpApp``, over real HTTP on 127.0.0.1, on both loops: every
status transition, the outcomes, cancellation, the composition with an MRTR round,
the gates, and what the task wire never carries (``requestState``).
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

import anyio
import pytest
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.results import tool_error
from mrtr_transports.apps.task_runs import TaskContext
from tasks_kit import (
    TASKS,
    WITH_TASKS,
    WITHOUT_TASKS,
    accept,
    call,
    client_of,
    error_of,
    get,
    poll,
    served,
    without_meta,
)

import mrtr_core as m

pytestmark = pytest.mark.anyio

NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])
GO = m.server.elicit_form("Go on?", {"go": {"type": "boolean"}}, required=["go"])


class Probe:
    """What the tests hold of the work: a gate it waits at, what it saw."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.seen: list[str] = []


def build_app(probe: Probe) -> McpApp:
    app = McpApp("tasks", "1.0", principal="ada")

    async def two_rounds(task: TaskContext) -> str:
        await task.status("waiting for a name")
        name = await task.wait_for_answer("name", NAME)
        await task.status("name received")
        await probe.gate.wait()  # the test looks at the working status here
        go = await task.wait_for_answer("go", GO)
        return f"{(name.content or {}).get('name')} says go={(go.content or {}).get('go')}"

    @app.tool(task="optional")
    def stepper(ctx: Context) -> Any:
        return ctx.run_task(two_rounds)

    async def both(task: TaskContext) -> str:
        answers = await task.wait_for({"name": NAME, "go": GO})
        name, go = answers.get("name", NAME), answers.get("go", GO)
        assert name is not None and go is not None
        return f"{(name.content or {}).get('name')}/{(go.content or {}).get('go')}"

    @app.tool(task="optional")
    def two_at_once(ctx: Context) -> Any:
        return ctx.run_task(both)

    async def refuses(task: TaskContext) -> Any:
        raise m.MrtrError("the backend said no", code=-32050, data={"backend": "db1"})

    @app.tool(task="optional")
    def protocol_error(ctx: Context) -> Any:
        return ctx.run_task(refuses)

    async def crashes(task: TaskContext) -> Any:
        raise RuntimeError("secret detail " + "x" * 2000)

    @app.tool(task="optional")
    def crashing(ctx: Context) -> Any:
        return ctx.run_task(crashes)

    async def reports_error(task: TaskContext) -> Any:
        return tool_error("the file is locked")

    @app.tool(task="optional")
    def tool_failure(ctx: Context) -> Any:
        return ctx.run_task(reports_error)

    async def sleeps(task: TaskContext, seconds: float) -> str:
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            probe.seen.append("cancelled")
            raise
        return f"slept {seconds}"

    @app.tool(task="optional")
    def slow(ctx: Context, seconds: float) -> Any:
        return ctx.run_task(sleeps, seconds)

    @app.tool(task="required")
    def composed(ctx: Context) -> Any:
        probe.seen.append("composed ran")
        name = ctx.answer("name", NAME)
        if name is None:
            return ctx.ask({"name": NAME})
        return ctx.run_task(greets, (name.content or {}).get("name"))

    async def greets(task: TaskContext, name: str) -> str:
        return f"Hello, {name}, from a task"

    async def asks(task: TaskContext) -> str:
        await task.wait_for_answer("name", NAME)
        return "never inline"

    @app.tool(task="optional")
    def asks_inline(ctx: Context) -> Any:
        return ctx.run_task(asks)

    async def reuses(task: TaskContext) -> str:
        await task.wait_for_answer("name", NAME)
        await task.wait_for_answer("name", NAME)  # a key already used in this task
        return "never"

    @app.tool(task="optional")
    def reusing(ctx: Context) -> Any:
        return ctx.run_task(reuses)

    @app.tool()
    def not_a_task_tool(ctx: Context) -> Any:
        return ctx.run_task(greets, "nobody")

    return app


def timestamp(text: str) -> datetime.datetime:
    assert text.endswith("Z"), text
    return datetime.datetime.fromisoformat(text)


async def test_a_task_moves_working_input_required_working_completed() -> None:
    probe = Probe()
    async with served(build_app(probe)) as url, client_of(url) as client:
        created = await call(client, "stepper")
        assert created["resultType"] == "task" and created["status"] == "working"
        assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 1000
        assert created["createdAt"] == created["lastUpdatedAt"]
        timestamp(created["createdAt"])
        assert not {"requestState", "result", "error", "inputRequests", "task"} & set(created)
        task_id = created["taskId"]

        waiting = await poll(client, task_id, until=["input_required"])
        assert waiting["status"] == "input_required"
        assert waiting["statusMessage"] == "waiting for a name"
        assert list(waiting["inputRequests"]) == ["name"]
        assert waiting["inputRequests"]["name"]["method"] == "elicitation/create"
        assert "requestState" not in waiting and waiting["resultType"] == "complete"

        ack = await client.request(
            "tasks/update", {"taskId": task_id, "inputResponses": {"name": accept(name="Ada")}}
        )
        assert without_meta(ack) == {"resultType": "complete"}
        working = await poll(client, task_id, until=["working"])
        assert working["status"] == "working" and "inputRequests" not in working
        with anyio.fail_after(5):  # the work sets its message once it resumes
            while (await get(client, task_id)).get("statusMessage") != "name received":
                await anyio.sleep(0.01)
        probe.gate.set()

        again = await poll(client, task_id, until=["input_required"])
        assert list(again["inputRequests"]) == ["go"]  # only what is outstanding now
        await client.request(
            "tasks/update", {"taskId": task_id, "inputResponses": {"go": accept(go=True)}}
        )
        done = await poll(client, task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "Ada says go=True"}]
    assert "requestState" not in done and "error" not in done
    assert timestamp(done["lastUpdatedAt"]) >= timestamp(done["createdAt"])


async def test_several_asks_at_once_partial_updates_and_unknown_keys() -> None:
    async with served(build_app(Probe())) as url, client_of(url) as client:
        task_id = (await call(client, "two_at_once"))["taskId"]
        asked = await poll(client, task_id, until=["input_required"])
        assert sorted(asked["inputRequests"]) == ["go", "name"]

        await client.request(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"name": accept(name="Ada"), "zzz": {"x": 1}}},
        )
        partly = await get(client, task_id)
        assert partly["status"] == "input_required"
        assert list(partly["inputRequests"]) == ["go"]

        # An answer to a key already answered, or never asked, is ignored: acked, no change.
        ack = await client.request(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"name": accept(name="Eve"), "never": {}}},
        )
        assert without_meta(ack) == {"resultType": "complete"}
        assert list((await get(client, task_id))["inputRequests"]) == ["go"]

        await client.request(
            "tasks/update", {"taskId": task_id, "inputResponses": {"go": accept(go=False)}}
        )
        done = await poll(client, task_id)
    assert done["result"]["content"][0]["text"] == "Ada/False"


async def test_an_answer_is_validated_as_an_mrtr_answer_is() -> None:
    async with served(build_app(Probe())) as url, client_of(url) as client:
        task_id = (await call(client, "two_at_once"))["taskId"]
        await poll(client, task_id, until=["input_required"])
        bad = {"name": accept(name=5), "go": accept(go=True)}
        refused = await error_of(
            lambda: client.request("tasks/update", {"taskId": task_id, "inputResponses": bad})
        )
        # The same refusal an MRTR retry gets for the same answer (InvalidAnswer).
        mrtr = m.server.Answers({"inputResponses": {"name": accept(name=5)}})
        with pytest.raises(m.server.InvalidAnswer) as expected:
            mrtr.get("name", NAME)
        assert (refused.code, refused.data) == (expected.value.code, expected.value.data)
        assert refused.data["field"] == "/name"
        # Nothing of the refused update was applied: both keys are still outstanding.
        still = await get(client, task_id)
        assert still["status"] == "input_required"
        assert sorted(still["inputRequests"]) == ["go", "name"]
        # A sampling answer that is not one, to a form ask: refused by its shape.
        refused = await error_of(
            lambda: client.request(
                "tasks/update", {"taskId": task_id, "inputResponses": {"go": {"role": 1}}}
            )
        )
        assert refused.code == -32602 and refused.data["key"] == "go"
        await client.request("tasks/cancel", {"taskId": task_id})


async def test_outcomes_completed_tool_error_failed_protocol_error_and_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with served(build_app(Probe())) as url, client_of(url) as client:
        tool_failed = await poll(client, (await call(client, "tool_failure"))["taskId"])
        protocol = await poll(client, (await call(client, "protocol_error"))["taskId"])
        with caplog.at_level(logging.ERROR, logger="mrtr.server"):
            crashed = await poll(client, (await call(client, "crashing"))["taskId"])

    assert tool_failed["status"] == "completed"
    assert tool_failed["result"] == {
        "content": [{"type": "text", "text": "the file is locked"}],
        "isError": True,
    }
    assert protocol["status"] == "failed" and "result" not in protocol
    assert protocol["error"] == {
        "code": -32050,
        "message": "the backend said no",
        "data": {"backend": "db1"},
    }
    assert crashed["status"] == "failed"
    assert crashed["error"]["code"] == -32603
    message = crashed["error"]["message"]
    assert "RuntimeError: secret detail" in message
    assert len(message) < 400 and "Traceback" not in message
    assert any("crashing" in record.getMessage() for record in caplog.records)


async def test_cancel_settles_a_running_task_and_leaves_a_finished_one() -> None:
    probe = Probe()
    async with served(build_app(probe)) as url, client_of(url) as client:
        running = (await call(client, "slow", {"seconds": 60}))["taskId"]
        ack = await client.request("tasks/cancel", {"taskId": running})
        assert without_meta(ack) == {"resultType": "complete"}
        cancelled = await poll(client, running)
        assert cancelled["status"] == "cancelled"
        assert not {"result", "error", "inputRequests"} & set(cancelled)
        assert probe.seen == ["cancelled"]  # the work itself was cancelled
        again = await client.request("tasks/cancel", {"taskId": running})
        assert without_meta(again) == {"resultType": "complete"}
        assert (await get(client, running))["status"] == "cancelled"

        finished = (await call(client, "slow", {"seconds": 0}))["taskId"]
        done = await poll(client, finished)
        assert done["status"] == "completed"
        ack = await client.request("tasks/cancel", {"taskId": finished})
        assert without_meta(ack) == {"resultType": "complete"}
        assert await get(client, finished) == done  # nothing changed

        # A task waiting for input is cancelled too.
        waiting = (await call(client, "two_at_once"))["taskId"]
        await poll(client, waiting, until=["input_required"])
        await client.request("tasks/cancel", {"taskId": waiting})
        assert (await poll(client, waiting))["status"] == "cancelled"


async def test_an_mrtr_round_then_a_task_whose_result_holds_the_answer() -> None:
    async with served(build_app(Probe())) as url, client_of(url) as client:
        first = await call(client, "composed")
        assert first["resultType"] == "input_required" and "taskId" not in first
        retry = {
            "name": "composed",
            "arguments": {},
            "inputResponses": {"name": accept(name="Grace")},
            "requestState": first["requestState"],
        }
        created = await client.request("tools/call", retry)
        assert created["resultType"] == "task"
        assert "requestState" not in created and "inputRequests" not in created
        done = await poll(client, created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Hello, Grace, from a task"


async def test_without_the_extension_optional_runs_inline_and_required_is_refused() -> None:
    probe = Probe()
    async with served(build_app(probe)) as url, client_of(url, WITHOUT_TASKS) as client:
        inline = await call(client, "slow", {"seconds": 0})
        assert inline["resultType"] == "complete" and "taskId" not in inline
        assert inline["content"] == [{"type": "text", "text": "slept 0.0"}]

        asking = await error_of(lambda: call(client, "asks_inline"))
        assert asking.code == -32021
        assert asking.data["requiredCapabilities"] == {"extensions": {TASKS: {}}}
        assert TASKS in asking.message

        required = await error_of(lambda: call(client, "composed"))
        assert required.code == -32021
        assert required.data["requiredCapabilities"] == {"extensions": {TASKS: {}}}
        assert "composed" in required.message
        assert probe.seen == []  # refused before the handler ran

        for method, params in (
            ("tasks/get", {"taskId": "x"}),
            ("tasks/update", {"taskId": "x", "inputResponses": {}}),
            ("tasks/cancel", {"taskId": "x"}),
        ):
            gated = await error_of(lambda: client.request(method, params))  # noqa: B023
            assert gated.code == -32021, method
            assert gated.data["requiredCapabilities"] == {"extensions": {TASKS: {}}}


async def test_the_task_methods_refuse_what_they_do_not_know() -> None:
    async with served(build_app(Probe())) as url, client_of(url) as client:
        for method in ("tasks/result", "tasks/list"):
            gone = await error_of(lambda: client.request(method, {"taskId": "x"}))  # noqa: B023
            assert gone.code == -32601, method
        unknown = await error_of(lambda: get(client, "no-such-task"))
        assert unknown.code == -32602 and unknown.data == {"taskId": "no-such-task"}
        malformed = await error_of(lambda: client.request("tasks/get", {}))
        assert malformed.code == -32602


async def test_a_key_asked_twice_in_one_task_fails_it_and_run_task_needs_task_support() -> None:
    async with served(build_app(Probe())) as url, client_of(url) as client:
        task_id = (await call(client, "reusing"))["taskId"]
        await poll(client, task_id, until=["input_required"])
        await client.request(
            "tasks/update", {"taskId": task_id, "inputResponses": {"name": accept(name="A")}}
        )
        failed = await poll(client, task_id)
        assert failed["status"] == "failed"
        assert "unique over a task's lifetime" in failed["error"]["message"]

        misuse = await call(client, "not_a_task_tool")
        assert misuse["isError"] is True
        assert "task='optional'" in misuse["content"][0]["text"]


async def test_the_extension_is_advertised_and_tools_list_keeps_its_schema() -> None:
    app = build_app(Probe())
    assert app.capabilities["extensions"] == {TASKS: {}}
    assert "tasks" not in app.capabilities  # never the 2025 experimental slot
    plain = McpApp("plain", "1.0")
    plain.add_tool(lambda ctx: "hi", "hi")
    assert "extensions" not in plain.capabilities and plain.tasks is None
    with pytest.raises(ValueError, match="task is 'optional', 'required' or None"):
        plain.add_tool(lambda ctx: "hi", "sometimes", task="sometimes")  # type: ignore[arg-type]
    async with served(app) as url, client_of(url, WITH_TASKS) as client:
        tools = await client.request("tools/list")
    assert all("execution" not in tool for tool in tools["tools"])


async def test_a_tasks_result_is_checked_against_the_output_schema_and_any_style_may_hand_off() -> (
    None
):
    app = McpApp("shaped", "1.0")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def counts(task: TaskContext, n: Any) -> dict[str, Any]:
        return {"n": n}

    @app.tool(task="optional", output_schema=schema)
    def count(ctx: Context, n: Any) -> Any:
        return ctx.run_task(counts, n)

    @app.tool(task="optional", continuation=True)
    async def parked(ctx: Context) -> Any:
        name = await ctx.wait_for_answer("name", NAME)  # an MRTR round, parked
        return ctx.run_task(greets, (name.content or {}).get("name"))

    async def greets(task: TaskContext, name: str) -> str:
        with pytest.raises(TypeError, match="a status message is a string"):
            await task.status(3)  # type: ignore[arg-type]
        return f"Hello, {name}"

    async with served(app) as url, client_of(url) as client:
        good = await poll(client, (await call(client, "count", {"n": 3}))["taskId"])
        assert good["result"]["structuredContent"] == {"n": 3}
        bad = await poll(client, (await call(client, "count", {"n": "three"}))["taskId"])
        assert bad["status"] == "completed" and bad["result"]["isError"] is True
        assert "does not match its outputSchema" in bad["result"]["content"][0]["text"]

        first = await call(client, "parked")
        assert first["resultType"] == "input_required"
        created = await client.request(
            "tools/call",
            {
                "name": "parked",
                "arguments": {},
                "inputResponses": {"name": accept(name="Lin")},
                "requestState": first["requestState"],
            },
        )
        assert created["resultType"] == "task" and "requestState" not in created
        done = await poll(client, created["taskId"])
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Lin"}]
