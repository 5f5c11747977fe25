"""The stdio client against real child processes (tests/peer_stdio_server.py).

The peer is a small server on ``mrtr_core.Connection(SERVER)`` that can also
misbehave: write junk to stderr and stdout, die mid-call, exit at start,
ignore stdin closing and SIGTERM, speak only 2025 versions, or never answer
``server/discover``.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
from mrtr_transports.client.client import TraceRecord
from mrtr_transports.client.errors import CallTimeout, InputUnavailable, TransportError
from mrtr_transports.client.stdio import StdioLink, open_stdio_client

import mrtr_core as m

PEER = str(Path(__file__).resolve().parents[2] / "support" / "peer_stdio_server.py")
LLM_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "hey"}, "model": "test"}


def peer(*flags: str) -> list[str]:
    return [sys.executable, PEER, *flags]


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    if isinstance(request, m.wire.ElicitFormRequest):
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})
    if isinstance(request, m.wire.CreateMessageRequest):
        return LLM_ANSWER
    return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///work")])


def stdio_link(client: Any) -> StdioLink:
    link = client.link
    assert isinstance(link, StdioLink)
    return link


async def test_a_modern_session_over_a_child_with_a_chatty_stderr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mrtr.client.stdio")
    with trio.fail_after(10):
        async with open_stdio_client(peer(), answer=answer) as client:
            assert (client.era, client.protocol_version) == ("modern", "2026-07-28")
            assert client.peer_info == {"name": "peer-stdio", "version": "1"}
            result = await client.call_tool("ask")
            assert result["content"][0]["text"] == "Hello Ada"
            mixed = await client.call_tool("mixed")
            assert mixed["content"][0]["text"] == "who=Ada llm=hey roots=file:///work"
            link = stdio_link(client)
        assert link.signals_sent == []  # it exited when its stdin closed
        assert link.process is not None and link.process.returncode == 0
    stderr = [r.getMessage() for r in caplog.records if r.name == "mrtr.client.stdio"]
    assert any(line.endswith("peer starting") for line in stderr)
    assert any("invalid utf-8: \ufffd" in line for line in stderr)  # decoded, never fatal
    assert all(r.levelno < logging.WARNING for r in caplog.records if r.name == "mrtr.client.stdio")


async def test_junk_on_stdout_is_skipped_and_the_call_goes_on() -> None:
    with trio.fail_after(10):
        async with open_stdio_client(peer(), era="modern") as client:
            result = await client.call_tool("garbage")
            assert result["content"][0]["text"] == "after garbage"
            assert (await client.call_tool("echo", {"x": 1}))["content"][0]["text"] == '{"x": 1}'


async def test_a_child_that_dies_mid_call_is_a_transport_error_with_its_stderr() -> None:
    with trio.fail_after(10):
        async with open_stdio_client(peer(), era="modern") as client:
            with pytest.raises(TransportError) as caught:
                await client.call_tool("die")
            with pytest.raises(TransportError):  # the link stays dead
                await client.call_tool("echo")
    error = caught.value
    assert error.kind == "disconnect" and error.exit_status == 3
    assert error.stderr_tail is not None
    assert error.stderr_tail[-1] == "fatal: the die tool was called"
    assert "exited with status 3" in str(error) and "fatal: the die tool" in str(error)


async def test_a_command_that_does_not_exist_fails_to_start() -> None:
    with trio.fail_after(5), pytest.raises(TransportError) as caught:
        async with open_stdio_client(["/nonexistent/mcp-server", "--flag"]):
            raise AssertionError("the client opened")
    assert caught.value.kind == "spawn" and caught.value.stderr_tail == []
    assert "/nonexistent/mcp-server" in str(caught.value)


async def test_a_child_that_exits_at_start_reports_status_and_stderr() -> None:
    with trio.fail_after(10), pytest.raises(TransportError) as caught:
        async with open_stdio_client(peer("--exit-at-start", "2")):
            raise AssertionError("the client opened")
    assert caught.value.exit_status == 2
    assert caught.value.stderr_tail is not None
    assert "giving up with status 2" in caught.value.stderr_tail


async def test_a_child_that_ignores_stdin_closing_gets_sigterm() -> None:
    with trio.fail_after(10):
        async with open_stdio_client(
            peer("--ignore-stdin-eof"), era="modern", close_timeout=0.2, terminate_timeout=2
        ) as client:
            await client.call_tool("echo")
            link = stdio_link(client)
    assert link.signals_sent == ["SIGTERM"]
    assert link.process is not None and link.process.returncode == -signal.SIGTERM


async def test_a_child_that_ignores_sigterm_gets_sigkill() -> None:
    with trio.fail_after(10):
        async with open_stdio_client(
            peer("--ignore-stdin-eof", "--ignore-sigterm"),
            era="modern",
            close_timeout=0.2,
            terminate_timeout=0.2,
        ) as client:
            await client.call_tool("echo")
            link = stdio_link(client)
    assert link.signals_sent == ["SIGTERM", "SIGKILL"]
    assert link.process is not None and link.process.returncode == -signal.SIGKILL


async def test_auto_falls_back_to_initialize_and_answers_server_requests() -> None:
    asked: list[str] = []

    async def record(key: str, request: m.wire.InputRequest) -> Any:
        asked.append(key)
        return await answer(key, request)

    with trio.fail_after(10):
        async with open_stdio_client(peer("--legacy-only"), answer=record) as client:
            assert (client.era, client.protocol_version) == ("legacy", "2025-11-25")
            result = await client.call_tool("mixed")
            assert result["content"][0]["text"] == "who=Ada llm=hey roots=file:///work"
    # A 2025 server asks with its own requests (answered concurrently); the key is the method.
    assert sorted(asked) == ["elicitation/create", "roots/list", "sampling/createMessage"]


async def test_a_silent_probe_times_out_into_the_legacy_handshake() -> None:
    # The timeout restarts for each handshake request, so it must also cover a peer
    # still starting up when initialize goes out (0.3 s flaked on a loaded machine).
    with trio.fail_after(30):
        async with open_stdio_client(
            peer("--legacy-only", "--silent-discover"), answer=answer, handshake_timeout=3
        ) as client:
            assert client.era == "legacy"
            assert (await client.call_tool("ask"))["content"][0]["text"] == "Hello Ada"


async def test_no_answer_in_a_2025_session_fails_the_call() -> None:
    async def refuse(key: str, request: m.wire.InputRequest) -> Any:
        raise InputUnavailable("nobody at the keyboard")

    with trio.fail_after(10):
        async with open_stdio_client(peer(), era="legacy", answer=refuse) as client:
            with pytest.raises(InputUnavailable) as caught:
                await client.call_tool("ask")
            assert caught.value.key == "elicitation/create"
            assert "nobody at the keyboard" in caught.value.reason
            # The session is still usable afterwards.
            assert (await client.call_tool("echo"))["content"][0]["text"] == "{}"


async def test_a_leg_timeout_drops_the_late_answer() -> None:
    with trio.fail_after(10):
        async with open_stdio_client(peer(), era="modern") as client:
            with pytest.raises(CallTimeout) as caught:
                await client.call_tool("slow", {"seconds": 0.4}, leg_timeout=0.1)
            assert caught.value.limit == "leg"
            # The late answer arrives while this call waits, and is dropped quietly.
            assert (await client.call_tool("echo", {"n": 2}))["content"][0]["text"] == '{"n": 2}'


async def test_progress_env_cwd_and_trace(tmp_path: Path) -> None:
    records: list[TraceRecord] = []
    progress: list[m.Progress] = []
    with trio.fail_after(10):
        async with open_stdio_client(
            peer(), era="modern", env={"MRTR_PEER_VAR": "set"}, cwd=tmp_path, tracer=records.append
        ) as client:
            env = await client.call_tool("env", {"name": "MRTR_PEER_VAR"})
            assert env["content"][0]["text"] == f"set in {tmp_path}"
            await client.call_tool("progress", on_progress=progress.append)
    assert [p.message for p in progress] == ["step 1", "step 2"]
    received = [r for r in records if r.dir == "recv"]
    notes = [r for r in received if r.msg.get("method") == "notifications/progress"]
    assert len(notes) == 2 and notes[0].flow == notes[1].flow is not None
    answers = [r for r in received if "result" in r.msg]
    assert [r.flow for r in answers] == [1, 2] and [r.round for r in answers] == [0, 0]


def _client_tasks(client: Any) -> set[str]:
    """The names of the tasks running in the client's task group (the link's, the flows'):
    the children of the task that opened the client (this test's)."""
    opener = anyio.get_current_task().id
    return {
        task.name.rsplit(".", 1)[-1]
        for task in anyio.get_running_tasks()
        if task.parent_id == opener and task.id != opener
    }


async def test_a_calls_tasks_end_with_it() -> None:
    # A call's timers and input tasks run in the client's nursery (no nursery per call):
    # none of them outlives the call, whichever way it ends.
    with trio.fail_after(10):
        async with open_stdio_client(peer(), era="modern", answer=answer) as client:
            link_tasks = _client_tasks(client)
            assert link_tasks == {"_read_stderr", "_write_stdin", "_read_stdout"}
            result = await client.call_tool("ask", leg_timeout=5, input_timeout=5, timeout=5)
            assert result["content"][0]["text"] == "Hello Ada"
            assert _client_tasks(client) == link_tasks
            with pytest.raises(CallTimeout):
                await client.call_tool("slow", {"seconds": 0.4}, leg_timeout=0.1, timeout=5)
            assert _client_tasks(client) == link_tasks
            # A caller that gives up (its own cancel scope) takes the call's tasks along.
            with trio.move_on_after(0.1):
                await client.call_tool("slow", {"seconds": 0.4}, leg_timeout=5, timeout=5)
            assert _client_tasks(client) == link_tasks


class HandlerBug(BaseException):
    """Not an ``Exception``: the input task does not turn it into ``InputUnavailable``."""


async def test_a_bug_in_a_calls_task_is_raised_by_the_call_not_in_the_client() -> None:
    async def broken(key: str, request: m.wire.InputRequest) -> Any:
        raise HandlerBug("the input handler blew up")

    with trio.fail_after(10):
        async with open_stdio_client(peer(), era="modern", answer=broken) as client:
            with pytest.raises(HandlerBug):
                await client.call_tool("ask")
            # The client (its nursery, the link) carries on.
            assert (await client.call_tool("echo", {"n": 3}))["content"][0]["text"] == '{"n": 3}'
            assert _client_tasks(client) == {"_read_stderr", "_write_stdin", "_read_stdout"}


async def test_many_calls_in_a_row_and_at_once() -> None:
    # The direct pipe paths (no writer hop, no checkpoint per read) under both shapes of
    # load: sequential two-leg calls, and concurrent ones whose lines share reads.
    with trio.fail_after(30):
        async with open_stdio_client(peer(), era="modern", answer=answer) as client:
            for _ in range(50):
                assert (await client.call_tool("ask"))["content"][0]["text"] == "Hello Ada"
            texts: list[str] = []

            async def one(n: int) -> None:
                texts.append((await client.call_tool("echo", {"n": n}))["content"][0]["text"])

            async with trio.open_nursery() as nursery:
                for n in range(200):
                    nursery.start_soon(one, n)
            assert sorted(texts) == sorted(f'{{"n": {n}}}' for n in range(200))
