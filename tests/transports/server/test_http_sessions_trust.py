"""2025-era sessions against a hostile client (issue 22, items 3, 4 and 5), on real sockets.

* An error never echoes a peer's value at its size, and a session keeps at most
  ``replay_buffer_bytes`` for replay, whatever its events: one ``tools/call`` per
  session with a 3 MB unknown tool name held about 13.5 MiB per session.
* An open GET stream does not make its session busy, lasts
  ``session_stream_lifetime``, and counts against its client's share of the
  session streams: sockets that never read cannot lock newcomers out.
* One client holds at most ``max_sessions_per_client`` sessions: past it, its
  ``initialize`` ends its own session idle the longest, never another client's.

Two clients on one machine: the server trusts 127.0.0.1 as a proxy, and a client
names itself with ``X-Forwarded-For``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from support import srv_apps
from support.cli_run import MRTR
from test_http_server import Served
from test_http_sessions import (
    IN_PROCESS,
    Header,
    call,
    fixtures_app,
    in_session,
    initialize,
    open_session,
    priming_of,
    request,
    serving,
    streaming,
)

import mrtr_core as m

ROOT = Path(__file__).resolve().parents[3]
#: A tool name no app has, of 3 MiB (the POST body stays under the 4 MiB bound).
HUGE_NAME = "x" * (3 * 1024 * 1024)
PROXIED: dict[str, Any] = {"trusted_proxies": ["127.0.0.1"]}


def as_client(address: str) -> Header:
    return ("X-Forwarded-For", address)


async def open_as(
    served: Served, address: str | None, capabilities: dict[str, Any] | None = None
) -> str:
    """A session opened by the client at ``address`` (``None``: 127.0.0.1 itself)."""
    extra = [as_client(address)] if address else []
    reply = await served.post(initialize(capabilities), extra)
    assert reply.status == 200, reply
    session_id = reply.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await served.post(note, in_session(session_id, *extra))).status == 202
    return session_id


async def answers(served: Served, session_id: str) -> bool:
    """Whether the session still answers a ping (404 once it was ended)."""
    reply = await served.post(request("ping"), in_session(session_id))
    assert reply.status in (200, 404), reply
    return reply.status == 200


# --- item 3: the replay buffer and the echo ---------------------------------------


@IN_PROCESS
async def test_a_huge_unknown_tool_name_is_echoed_short_and_kept_within_the_bound(
    kind: str,
) -> None:
    # Before: the error echoed the name twice (a 7 MB event, kept as "the newest"):
    # each session held 7,340,130 bytes for replay, 36x its replay_buffer_bytes.
    sessions = 6
    with trio.fail_after(60):
        async with serving(kind, fixtures_app, max_sessions=sessions) as served:
            side = served.server.sessions
            for _ in range(sessions):
                session_id = await open_session(served)
                async with streaming(served, call(HUGE_NAME), in_session(session_id)) as answer:
                    reply = await answer.message()
                assert reply is not None and reply["error"]["code"] == m.ErrorCode.INVALID_PARAMS
                assert len(json.dumps(reply)) < 512, len(json.dumps(reply))
                message = reply["error"]["message"]
                assert message.startswith("Unknown tool: xxx") and message.endswith("…")
            held = [
                session.buffer.size[1] + session.buffer.passing_bytes
                for session in side.sessions.values()
            ]
            assert len(held) == sessions
            assert max(held) <= side.replay_bytes, held
            assert sum(held) <= side.table.max_sessions * side.replay_bytes


async def test_a_result_too_large_to_keep_reaches_its_live_reader_and_is_not_kept() -> None:
    text = "y" * (1024 * 1024)  # four times replay_buffer_bytes
    with trio.fail_after(30):
        async with serving("mrtr", srv_apps.TestApp(), replay_buffer_bytes=256 * 1024) as served:
            session_id = await open_session(served)
            echo = call("echo", {"text": text}, rid="big")
            async with streaming(served, echo, in_session(session_id)) as answer:
                reply = await answer.message()
                assert await answer.next() is None
            assert reply is not None and reply["result"]["content"][0]["text"] == text
            buffer = served.server.sessions.sessions[session_id].buffer
            assert buffer.size[1] <= 256 * 1024 and buffer.passing_bytes == 0


def _late_and_large_app() -> McpApp:
    app = McpApp("late-and-large", "1.0")

    @app.tool()
    async def late_and_large(ctx: Context) -> str:
        """Answers 512 KiB, after its client has left."""
        await trio.sleep(0.5)
        return "z" * (512 * 1024)

    return app


async def test_a_client_resuming_past_an_event_too_large_to_keep_is_told_so() -> None:
    # Before: the newest event was kept however large (512 KiB here, in a 256 KiB
    # buffer), so resuming replayed it; the bound did not hold.
    with trio.fail_after(30):
        async with serving("mrtr", _late_and_large_app()) as served:
            session_id = await open_session(served)
            async with streaming(served, call("late_and_large"), in_session(session_id)) as left:
                while b"\n\n" not in left.raw:  # the priming event, then the client leaves
                    event = await left.peer.next_event()
                    assert isinstance(event, h11.Data)
                    left.raw += event.data
                primed, _ = priming_of(left)
            await trio.sleep(1.0)  # the answer is recorded with nobody reading: not kept
            buffer = served.server.sessions.sessions[session_id].buffer
            assert buffer.size[1] <= 256 * 1024 and buffer.passing_bytes == 0
            resume = in_session(session_id, ("Last-Event-ID", primed))
            refused = await served.post(None, resume, method="GET", accept="text/event-stream")
            assert refused.status == 400
            assert "too large to keep" in refused.json()["error"]["message"]


def _resident_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


@asynccontextmanager
async def mrtr_serve_http(*args: str) -> AsyncIterator[tuple[trio.Process, int]]:
    """``mrtr serve --http 127.0.0.1:0 ARGS``: the process and its port (killed at the end)."""
    process = await trio.lowlevel.open_process(
        [*MRTR, "serve", "--http", "127.0.0.1:0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        said = b""
        assert process.stderr is not None
        while not (found := re.search(rb"listening on http://127\.0\.0\.1:(\d+)", said)):
            chunk = await process.stderr.receive_some()
            assert chunk, said
            said += chunk
        async with trio.open_nursery() as nursery:

            async def drain() -> None:  # (a full pipe would stall it)
                assert process.stderr is not None
                while await process.stderr.receive_some():
                    pass

            nursery.start_soon(drain)
            yield process, int(found.group(1))
            nursery.cancel_scope.cancel()
    finally:
        process.kill()
        await process.wait()


@pytest.mark.subprocess
async def test_mrtr_serve_keeps_its_memory_when_every_session_echoes_a_huge_name() -> None:
    # Before: 45 -> 887 MiB at 60 sessions (about 13.5 MiB each).  Scaled down to 16
    # sessions: before, about +216 MiB; the bound is what 16 full replay buffers hold
    # (4 MiB) and room for the allocator's own.
    sessions, max_sessions = 16, 32
    app = f"{ROOT / 'tests' / 'support' / 'ops_app.py'}:app"
    with trio.fail_after(120):
        async with mrtr_serve_http("--app", app, "--max-sessions", str(max_sessions)) as (
            process,
            port,
        ):
            served = Served(None, None, "127.0.0.1", port)  # type: ignore[arg-type]

            async def echo_one() -> None:
                session_id = await open_session(served)
                async with streaming(served, call(HUGE_NAME), in_session(session_id)) as answer:
                    reply = await answer.message()
                assert reply is not None and len(reply["error"]["message"]) < 256

            for _ in range(2):  # (the first bodies grow the heap once: not per session)
                await echo_one()
            before = _resident_kib(process.pid)
            for _ in range(sessions):
                await echo_one()
            grown = _resident_kib(process.pid) - before
    assert grown < sessions * 256 + 24 * 1024, f"VmRSS grew {grown} KiB over {sessions} sessions"


# --- item 4: GET streams that never read ------------------------------------------


@IN_PROCESS
async def test_get_streams_that_never_read_lock_nobody_out(kind: str) -> None:
    # Before (max_sessions=4, one client opening 4 sessions with a GET stream each that
    # it never reads): the victim's idle session was ended on the way and every new
    # initialize got 503 for as long as the sockets stayed open.
    options = {**PROXIED, "max_sessions": 4, "max_sessions_per_client": 2}
    with trio.fail_after(30):
        async with serving(kind, fixtures_app, **options) as served, AsyncExitStack() as held:
            victim = await open_as(served, "10.0.0.1")
            for _ in range(4):  # the attacker, 127.0.0.1
                session_id = await open_as(served, None)
                get = streaming(served, None, in_session(session_id), method="GET")
                stream = await held.enter_async_context(get)
                assert stream.status == 200
            newcomer = await served.post(initialize(), [as_client("10.0.0.2")])
            assert newcomer.status == 200, newcomer
            assert await answers(served, victim)
            side = served.server.sessions
            assert side.shares.held_by("peer:127.0.0.1") == 2
            assert len(side.sessions) == 4


@IN_PROCESS
async def test_a_get_stream_ends_at_its_lifetime_and_resumes(kind: str) -> None:
    with trio.fail_after(30):
        async with serving(kind, fixtures_app, session_stream_lifetime=0.3) as served:
            session_id = await open_session(served)
            async with streaming(served, None, in_session(session_id), method="GET") as get:
                assert get.status == 200
                started = trio.current_time()
                assert await get.next() is None  # ended by the server, gracefully
                assert 0.25 <= trio.current_time() - started < 5
                primed = get.raw.split(b"\n\n", 1)[0].decode()
                event_id = dict(line.split(": ", 1) for line in primed.splitlines())["id"]
            resume = in_session(session_id, ("Last-Event-ID", event_id))
            async with streaming(served, None, resume, method="GET") as again:
                assert again.status == 200
            assert await answers(served, session_id)


@IN_PROCESS
async def test_one_client_has_a_share_of_the_session_streams(kind: str) -> None:
    options = {**PROXIED, "max_session_streams_per_client": 1}
    with trio.fail_after(30):
        async with serving(kind, fixtures_app, **options) as served:
            first, second = await open_session(served), await open_session(served)
            other = await open_as(served, "10.0.0.3")
            async with streaming(served, None, in_session(first), method="GET") as get:
                assert get.status == 200
                refused = await served.post(
                    None, in_session(second), method="GET", accept="text/event-stream"
                )
                assert refused.status == 429 and refused.headers["retry-after"] == "1"
                assert "max_session_streams_per_client=1" in refused.json()["error"]["message"]
                theirs = in_session(other, as_client("10.0.0.3"))
                async with streaming(served, None, theirs, method="GET") as their_get:
                    assert their_get.status == 200


# --- item 5: an initialize flood -------------------------------------------------


@IN_PROCESS
async def test_an_initialize_flood_ends_none_of_the_other_clients_sessions(kind: str) -> None:
    # Before: 300 initializes in 3.4 s ended 4 of 5 idle victim sessions (here, at
    # max_sessions=8 and 4 victims: 30 initializes ended all 4).
    options = {**PROXIED, "max_sessions": 8, "max_sessions_per_client": 2}
    with trio.fail_after(60):
        async with serving(kind, fixtures_app, **options) as served:
            victims = [await open_as(served, f"10.0.0.{n}") for n in range(1, 5)]
            flood = [(await served.post(initialize(), [])).status for _ in range(30)]
            assert set(flood) == {200}  # past its share, it ends its own sessions
            side = served.server.sessions
            assert side.shares.held_by("peer:127.0.0.1") == 2
            for victim in victims:
                assert await answers(served, victim)
            # Flooders at several addresses fill the table: the heaviest give way first.
            for n in range(3):
                for _ in range(5):
                    reply = await served.post(initialize(), [as_client(f"10.9.0.{n}")])
                    assert reply.status == 200
            for victim in victims:
                assert await answers(served, victim)
            assert len(side.sessions) == 8


@IN_PROCESS
async def test_a_client_whose_own_sessions_are_all_busy_gets_429(kind: str) -> None:
    options = {**PROXIED, "max_sessions": 8, "max_sessions_per_client": 1}
    with trio.fail_after(30):
        async with serving(kind, fixtures_app, **options) as served:
            busy = await open_session(served, {"elicitation": {}})
            ask = call("test_elicitation", {"message": "wait"}, rid="wait")
            async with streaming(served, ask, in_session(busy)) as waiting:
                assert await waiting.message() is not None
                refused = await served.post(initialize(), [])
                assert refused.status == 429 and refused.headers["retry-after"] == "1"
                assert "max_sessions_per_client=1" in refused.json()["error"]["message"]
                assert (await served.post(initialize(), [as_client("10.0.0.5")])).status == 200
            assert await answers(served, busy)
