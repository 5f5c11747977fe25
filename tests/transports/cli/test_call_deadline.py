"""``mrtr call`` gives the server a deadline at each step (issue 22): ``--timeout``.

Against real sockets on 127.0.0.1: a server that accepts and never answers, one
that answers the handshake and then sends only the response headers of the call,
one that sends only headers to the handshake.  ``mrtr call --timeout 1`` ends
each with exit 4 and one line within a few seconds; the default (60 s) ends the
one that holds the call (a slow test); and a round whose prompt waits longer
than the deadline still completes: a person's time is not the server's.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h11
import pytest
import trio
from mrtr_transports.cli.arguments import DEFAULT_TIMEOUT, deadline_seconds
from mrtr_transports.server.http import HttpServer
from support.calling_app import STDIO_TARGET
from support.calling_app import app as calling_app
from support.cli_pty import PtyUser
from support.cli_run import MRTR, TESTS_ON_PATH, mrtr
from support.peer_http_server import DISCOVER, PeerHttpServer, Reply, Seen, json_reply, result

pytestmark = pytest.mark.subprocess

TOOLS = {"tools": [{"name": "x", "inputSchema": {"type": "object"}}]}


@asynccontextmanager
async def silent_server() -> AsyncIterator[str]:
    """Accepts connections, reads what comes, never writes a byte."""

    async def hold(stream: trio.SocketStream) -> None:
        async with stream:
            while await stream.receive_some(65536):
                pass

    async with trio.open_nursery() as nursery:
        [listener] = await nursery.start(
            functools.partial(trio.serve_tcp, hold, 0, host="127.0.0.1")
        )
        port = listener.socket.getsockname()[1]
        yield f"http://127.0.0.1:{port}/mcp"
        nursery.cancel_scope.cancel()


class HeadersOnly(PeerHttpServer):
    """Answers the requests ``answered`` names; to the others it sends the response's
    status and headers (an SSE stream), then nothing, for as long as the client stays."""

    def __init__(self, answered: set[str]) -> None:
        super().__init__(self.reply)
        self.answered = answered

    async def reply(self, seen: Seen) -> Reply:
        if seen.rpc_method == "server/discover":
            return json_reply(result(seen, DISCOVER))
        return json_reply(result(seen, TOOLS))  # tools/list

    async def _answer(
        self, stream: trio.SocketStream, conn: h11.Connection, seen: Seen, reply: Reply
    ) -> bool:
        if seen.rpc_method in self.answered:
            return await super()._answer(stream, conn, seen, reply)
        head = h11.Response(status_code=200, headers=[("Content-Type", "text/event-stream")])
        await stream.send_all(conn.send(head))
        await trio.sleep_forever()
        raise AssertionError("not reached")


@asynccontextmanager
async def headers_only(answered: set[str]) -> AsyncIterator[str]:
    server = HeadersOnly(answered)
    async with trio.open_nursery() as nursery:
        url = await nursery.start(server.run)
        yield url
        nursery.cancel_scope.cancel()


async def timed_call(url: str, *options: str) -> tuple[Any, float]:
    started = trio.current_time()
    ran = await mrtr("call", *options, url, "x", timeout=120)
    return ran, trio.current_time() - started


def assert_timed_out_in_one_line(ran: Any, elapsed: float, limit: float) -> None:
    assert ran.returncode == 4, ran.stderr
    assert elapsed < limit, elapsed
    [line] = ran.stderr.splitlines()
    assert line.startswith("mrtr call: timed out: the server did not answer"), line
    assert "--timeout" in line and ran.stdout == ""


async def test_a_server_that_accepts_and_never_answers():
    async with silent_server() as url:
        ran, elapsed = await timed_call(url, "--timeout", "1")
    # (the probe times out, then the 2025 initialize it falls back to: two deadlines)
    assert_timed_out_in_one_line(ran, elapsed, 8)
    assert "the handshake within 1 s" in ran.stderr


async def test_a_server_that_sends_only_headers_to_the_handshake():
    async with headers_only(answered=set()) as url:
        ran, elapsed = await timed_call(url, "--timeout", "1")
    assert_timed_out_in_one_line(ran, elapsed, 8)
    assert "the handshake within 1 s" in ran.stderr


@pytest.mark.parametrize("held", ["tools/call", "tools/list"])
async def test_a_server_that_sends_only_headers_to_a_leg(held):
    answered = {"server/discover", "tools/list", "tools/call"} - {held}
    async with headers_only(answered) as url:
        ran, elapsed = await timed_call(url, "--era", "modern", "--timeout", "1")
    assert_timed_out_in_one_line(ran, elapsed, 8)


@pytest.mark.slow
async def test_the_default_deadline_ends_a_held_call():
    async with headers_only({"server/discover", "tools/list"}) as url:
        ran, elapsed = await timed_call(url, "--era", "modern")
    assert_timed_out_in_one_line(ran, elapsed, DEFAULT_TIMEOUT + 20)
    assert elapsed >= DEFAULT_TIMEOUT
    assert "within 60 s (--timeout 60;" in ran.stderr


@asynccontextmanager
async def calling_app_over_http() -> AsyncIterator[str]:
    server = HttpServer(calling_app)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        try:
            yield f"http://{host}:{port}/mcp"
        finally:
            await server.aclose(grace=0.5)


# modern: the person answers between legs; legacy (a 2025 session): the server's
# questions arrive inside the open tools/call, whose timer stops while they are answered.
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_time_at_the_prompt_is_not_the_servers(era):
    user = PtyUser()
    try:
        async with calling_app_over_http() as url:
            process = await trio.lowlevel.open_process(
                [*MRTR, "call", "--era", era, "--timeout", "1", url, "three_questions"],
                stdin=user.slave_fd,
                stdout=subprocess.PIPE,
                stderr=user.slave_fd,
                env=TESTS_ON_PATH,
            )
            for _ in range(3):  # (a 2025 session asks in the order its requests arrive)
                screen = await user.expect("[a]ccept / [d]ecline / [c]ancel: ", timeout=30)
                key = screen.rsplit("Question ", 1)[1].split("?")[0]
                await trio.sleep(1.5)  # the person thinks longer than the server's deadline
                await user.type("a\n")
                await user.expect(f"{key} (string, required): ")
                await user.type(f"{key}\n")
            assert process.stdout is not None
            with trio.fail_after(30):
                out = b""
                while chunk := await process.stdout.receive_some():
                    out += chunk
                code = await process.wait()
    finally:
        await user.aclose()
    assert code == 0, user.output
    assert json.loads(out)["content"][0]["text"] == "zeta alpha mid"


async def test_timeout_takes_seconds_or_none():
    assert deadline_seconds("2.5") == 2.5
    assert deadline_seconds("0") is deadline_seconds("none") is deadline_seconds("None") is None
    for wrong in ("-1", "soon", "inf", "nan"):
        with pytest.raises(Exception, match="seconds"):
            deadline_seconds(wrong)
    ran = await mrtr("call", "--timeout", "soon", STDIO_TARGET, "x")
    assert ran.returncode == 2 and "--timeout" in ran.stderr
