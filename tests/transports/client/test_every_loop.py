"""The client on every loop the host layer supports: each test here is marked ``anyio``,
so it runs once on trio and once on asyncio, end to end against real ``mrtr serve``
subprocesses on 127.0.0.1 (tests/support/loops_app.py): stdio, Streamable HTTP in both
eras (2026-07-28 and a 2025-11-25 session), and the WebSocket.  A plain
``asyncio.run`` program (an input handler awaiting asyncio itself) closes the file."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest
import sniffio
from mrtr_transports.client.client import Client
from mrtr_transports.client.errors import CallError, CallTimeout, TransportError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.stdio import open_stdio_client
from mrtr_transports.client.ws import open_ws_client
from support.cli_run import MRTR, TESTS_ON_PATH
from support.serve_subprocess import SharedServers

import mrtr_core as m

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

APP = ["--app", "support.loops_app:app"]
SERVE = [*MRTR, "serve", *APP]
#: stdio, HTTP (2026-07-28), HTTP (a 2025-11-25 session), WebSocket.
TRANSPORTS = ["stdio", "http", "http-2025", "ws"]
#: The app's questions (a 2025 session keys them by method, not by name: go by the text).
ANSWERS = {"Your name?": {"name": "Ada"}, "Which city?": {"city": "Paris"}}


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    await anyio.sleep(0)  # (a handler that awaits: it runs on the loop under test)
    assert isinstance(request, m.wire.ElicitFormRequest)
    return m.wire.ElicitResult(action="accept", content=ANSWERS[request.message])


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


def same_loop() -> list[str]:
    """``mrtr serve --loop`` for the loop this test runs on: client and server share it."""
    return ["--loop", sniffio.current_async_library()]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    """The module's HTTP and WebSocket servers: one per transport and loop, not per test
    (a call, a timeout or a listen stream leaves nothing the next test could see)."""
    shared = SharedServers(tmp_path_factory.mktemp("serve"))
    try:
        yield shared
    finally:
        shared.close()


@asynccontextmanager
async def connected(
    transport: str, servers: SharedServers, **options: Any
) -> AsyncIterator[Client]:
    """A client of the app over ``transport`` (see :data:`TRANSPORTS`)."""
    if transport == "stdio":
        argv = [*SERVE, *same_loop(), "--stdio"]
        async with open_stdio_client(argv, env=TESTS_ON_PATH, **options) as client:
            yield client
        return
    flag = "--ws" if transport == "ws" else "--http"
    url = await servers.url([*APP, flag, "127.0.0.1:0"])
    if transport == "ws":
        async with open_ws_client(url, **options) as client:
            yield client
    else:
        era = "legacy" if transport == "http-2025" else "modern"
        async with open_http_client(url, era=era, **options) as client:
            yield client


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_call_of_two_input_rounds(transport: str, servers: SharedServers) -> None:
    asked: list[str] = []

    async def answering(key: str, request: m.wire.InputRequest) -> Any:
        assert isinstance(request, m.wire.ElicitFormRequest)
        asked.append(request.message)
        return await answer(key, request)

    with anyio.fail_after(30):
        async with connected(transport, servers, answer=answering) as client:
            assert client.era == ("legacy" if transport == "http-2025" else "modern")
            assert text(await client.call_tool("trip")) == "Ada in Paris"
            assert asked == ["Your name?", "Which city?"]
            assert text(await client.call_tool("nap", {"seconds": 0})) == "rested"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_call_times_out_on_the_loops_clock(transport: str, servers: SharedServers) -> None:
    with anyio.fail_after(30):
        async with connected(transport, servers) as client:
            started = anyio.current_time()
            with pytest.raises(CallTimeout) as caught:
                await client.call_tool("nap", {"seconds": 30}, timeout=0.3)
            assert (caught.value.limit, caught.value.budget) == ("total", 0.3)
            assert 0.3 <= anyio.current_time() - started < 10
            # The connection carries on.
            assert text(await client.call_tool("nap", {"seconds": 0})) == "rested"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_listen_stream(transport: str, servers: SharedServers) -> None:
    with anyio.fail_after(30):
        async with connected(transport, servers) as client:
            if client.era == "legacy":  # a 2025 session has no listen streams
                with pytest.raises(CallError) as refused:
                    async with client.listen(tools=True):
                        raise AssertionError("opened")
                assert refused.value.code == m.ErrorCode.METHOD_NOT_FOUND
                return
            async with client.listen(tools=True) as sub:
                assert text(await client.call_tool("listening")) == "1"
                await client.call_tool("add_tool")
                note = await sub.__anext__()
                assert note.method == "notifications/tools/list_changed"
            # Leaving the block closed the stream on the server too.
            while text(await client.call_tool("listening")) != "0":
                await anyio.sleep(0.05)


async def test_a_stdio_server_that_cannot_start_or_dies() -> None:
    with anyio.fail_after(30):
        with pytest.raises(TransportError) as caught:
            async with open_stdio_client(["/nonexistent/mrtr-server"]):
                raise AssertionError("started")
        assert caught.value.kind == "spawn"
        # A child that reads one message, says why on stderr and exits 3.
        dies = "import sys; sys.stdin.readline(); sys.stderr.write('out of cheese\\n'); sys.exit(3)"
        with pytest.raises(TransportError) as caught:
            async with open_stdio_client([sys.executable, "-c", dies], era="modern") as client:
                await client.call_tool("trip")
    assert caught.value.kind == "disconnect" and caught.value.exit_status == 3
    assert caught.value.stderr_tail == ["out of cheese"]


def test_a_plain_asyncio_program(servers: SharedServers) -> None:
    # No anyio at the top: asyncio.run, asyncio.wait_for, and an input handler that
    # awaits asyncio itself (as one using an asyncio-only library would).
    async def asyncio_answer(key: str, request: m.wire.InputRequest) -> Any:
        await asyncio.sleep(0.01)
        assert isinstance(request, m.wire.ElicitFormRequest)
        return m.wire.ElicitResult(action="accept", content=ANSWERS[request.message])

    async def main() -> list[str]:
        texts = []
        for transport in ("stdio", "http", "ws"):
            async with connected(transport, servers, answer=asyncio_answer) as client:
                texts.append(text(await asyncio.wait_for(client.call_tool("trip"), 30)))
        return texts

    assert asyncio.run(main()) == ["Ada in Paris"] * 3


@pytest.mark.parametrize("server", ["closes", "speaks plain HTTP"])
async def test_an_https_server_that_fails_the_tls_handshake(server: str) -> None:
    # No certificate needed: a listener that hangs up at once, or answers in plain text.
    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            if server == "speaks plain HTTP":
                await stream.receive()
                await stream.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(listener.serve, handle)
            with anyio.fail_after(10), pytest.raises(TransportError) as caught:
                async with open_http_client(f"https://127.0.0.1:{port}/mcp"):
                    raise AssertionError("connected")
            tasks.cancel_scope.cancel()
    assert caught.value.kind == "connect"
    assert caught.value.message.startswith(f"could not connect to 127.0.0.1:{port}: ")
    if server == "closes":
        assert "closed the connection during the TLS handshake" in caught.value.message
