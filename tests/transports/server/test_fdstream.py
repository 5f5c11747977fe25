"""``FdStream`` (a pipe as an anyio byte stream) and ``serve_stdio(stop=...)`` on both loops."""

from __future__ import annotations

import json
import os

import anyio
import pytest
from mrtr_transports.server.fdstream import FdStream
from mrtr_transports.server.stdio import serve_stdio
from support import loop_app

pytestmark = pytest.mark.anyio

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def pipe() -> tuple[FdStream, FdStream]:
    """(read end, write end)."""
    read_end, write_end = os.pipe()
    return FdStream(read_end), FdStream(write_end)


async def test_bytes_go_through_and_the_end_is_end_of_stream(anyio_backend: str) -> None:
    reader, writer = pipe()
    with anyio.fail_after(5):
        await writer.send(b"hello")
        assert await reader.receive() == b"hello"
        big = b"x" * 1_000_000  # more than the pipe holds: the writer waits for the reader
        received = bytearray()

        async def read_all() -> None:
            while len(received) < len(big):
                received.extend(await reader.receive())

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_all)
            await writer.send(big)
        assert received == big
        await writer.aclose()
        with pytest.raises(anyio.EndOfStream):
            await reader.receive()
        await reader.aclose()
        assert reader.fileno() == writer.fileno() == -1


async def test_closing_wakes_a_waiting_reader(anyio_backend: str) -> None:
    reader, writer = pipe()
    caught: list[BaseException] = []

    async def wait() -> None:
        try:
            await reader.receive()
        except anyio.ClosedResourceError as exc:
            caught.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait)
            await anyio.sleep(0.05)  # it waits for the pipe
            await reader.aclose()  # from another task
    assert len(caught) == 1
    with pytest.raises(anyio.ClosedResourceError):
        await reader.receive()
    with pytest.raises(anyio.BrokenResourceError):  # nobody reads any more
        await writer.send(b"late")
    await writer.aclose()


async def test_serve_stdio_stops_when_asked_and_answers_first(anyio_backend: str) -> None:
    to_server, server_in = pipe()[::-1]
    from_server, server_out = pipe()
    stop = anyio.Event()
    params = {"name": "echo", "arguments": {"text": "hi"}, "_meta": META}
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(
                lambda: serve_stdio(loop_app.app, stdin=server_in, stdout=server_out, stop=stop)
            )
            await to_server.send(json.dumps(request).encode() + b"\n")
            answer = await from_server.receive()
            assert json.loads(answer)["result"]["content"][0]["text"] == f"hi on {anyio_backend}"
            stop.set()  # stdin closes: the end of input, and serve_stdio returns
    for stream in (to_server, server_in, from_server, server_out):
        await stream.aclose()
