"""The WebSocket server on both loops, end to end: a real server process
(``tests/support/loop_server.py ws BACKEND``) on trio or on asyncio, driven by the
real WebSocket client (and by a raw peer, ``tests/support/ws_peer.py``).

On each loop an ``async def`` tool awaits that loop's own library, across rounds,
under cancellation, with a client that stops reading, and a refusal still reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.client.ws import open_ws_client
from support.ws_peer import Refused, WsPeer, connect

import mrtr_core as m

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
SERVER = str(TESTS / "support" / "loop_server.py")
BACKENDS = ["trio", "asyncio"]
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@asynccontextmanager
async def ws_server(backend: str) -> AsyncIterator[tuple[str, int]]:
    """A server process on ``backend``; its address once it listens."""
    paths = [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    process = await trio.lowlevel.open_process(
        [sys.executable, SERVER, "ws", backend],
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )
    try:
        assert process.stderr is not None
        said = b""
        with trio.fail_after(20):
            while b"listening on" not in said or not said.endswith(b"\n"):
                said += await process.stderr.receive_some(4096)
        port = int(said.split(b"ws://127.0.0.1:")[1].split(b"/")[0])
        yield ("127.0.0.1", port)
    finally:
        process.kill()
        await process.wait()


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    return m.wire.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_tool_awaits_its_own_loop_across_rounds_and_a_cancel_reaches_it(
    backend: str,
) -> None:
    async with ws_server(backend) as (host, port):
        with trio.fail_after(30):
            url = f"ws://{host}:{port}/mcp"
            async with open_ws_client(url, answer=answer) as client:
                assert text(await client.call_tool("nap")) == f"napped on {backend}"
                assert text(await client.call_tool("greet")) == f"Hello, Ada! ({backend})"
                async with trio.open_nursery() as nursery:  # many at once, on one WebSocket
                    for _ in range(20):
                        nursery.start_soon(client.call_tool, "greet")
                with trio.move_on_after(0.5) as waited:
                    await client.call_tool("hang")
                assert waited.cancelled_caught
                while True:  # the cancellation is a message: it reaches the handler soon
                    counts = (await client.call_tool("counts"))["structuredContent"]
                    if counts["cancelled"]:
                        break
                    await trio.sleep(0.05)
                assert counts == {"started": 1, "cancelled": 1}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_refusal_is_written_on_either_loop(backend: str) -> None:
    async with ws_server(backend) as address:
        with trio.fail_after(10):
            refused = await connect(address, path="/elsewhere")
        assert isinstance(refused, Refused) and refused.status == 404
        assert "no WebSocket endpoint" in refused.json()["error"]["message"]


def echo_request(request_id: int) -> bytes:
    # 4 kB each way, so the sockets' buffers (megabytes on loopback) fill in seconds.
    text = f"request {request_id} " + "x" * 4096
    params = {"name": "echo", "arguments": {"text": text}, "_meta": META}
    request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(request).encode()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_peer_that_stops_reading_gets_backpressure(backend: str) -> None:
    # The server stops reading once its request slots are taken (the socket's buffers
    # fill, then our writes block); once we read, every request gets its answer.
    async with ws_server(backend) as address:
        peer = await connect(address)
        assert isinstance(peer, WsPeer)
        written = 0
        stop = False
        flood_ended = trio.Event()
        answered: set[int] = set()

        async def flood() -> None:
            nonlocal written
            while not stop:  # a write blocks once the server stops reading
                await peer.write(echo_request(written + 1))
                written += 1
            flood_ended.set()

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(flood)
                while True:  # until it stops taking requests in
                    before = written
                    await trio.sleep(1.0)
                    if written == before:
                        break
                assert written > 1024
                stop = True  # (the blocked write goes through once we read)
                while not flood_ended.is_set() or len(answered) < written:
                    for message in await peer.read_messages():
                        reply = json.loads(message)
                        assert reply["result"]["content"][0]["text"] == (
                            f"request {reply['id']} {'x' * 4096} on {backend}"
                        )
                        answered.add(reply["id"])
            assert answered == set(range(1, written + 1))
