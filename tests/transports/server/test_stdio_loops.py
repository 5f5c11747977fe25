"""``serve_stdio`` on both loops, end to end: a real server process
(``tests/support/loop_server.py``) on trio or on asyncio, driven by the real stdio client.

On each loop an ``async def`` tool awaits that loop's own library (``asyncio.sleep``
on asyncio: the case that failed with ``no running event loop`` when the host was
trio-only), across rounds, under cancellation, and with a client that stops reading.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.client.stdio import open_stdio_client

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


def env() -> dict[str, str]:
    paths = [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(paths)}


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    return m.wire.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_tool_awaits_its_own_loop_across_rounds(backend: str) -> None:
    argv = [sys.executable, SERVER, "stdio", backend]
    with trio.fail_after(30):
        async with open_stdio_client(argv, env=env(), answer=answer) as client:
            assert text(await client.call_tool("nap")) == f"napped on {backend}"
            greeting = await client.call_tool("greet")
            assert text(greeting) == f"Hello, Ada! ({backend})"
            parked = await client.call_tool("greet_twice")  # parked on the server's loop
            assert text(parked) == f"Hello, Ada and Ada! ({backend})"
            async with trio.open_nursery() as nursery:  # many at once, on one connection
                for _ in range(20):
                    nursery.start_soon(client.call_tool, "greet")


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_cancelled_call_cancels_its_handler(backend: str) -> None:
    argv = [sys.executable, SERVER, "stdio", backend]
    with trio.fail_after(30):
        async with open_stdio_client(argv, env=env(), answer=answer) as client:
            with trio.move_on_after(0.5) as waited:
                await client.call_tool("hang")
            assert waited.cancelled_caught
            while True:  # the cancellation is a message: it reaches the handler soon
                counts = (await client.call_tool("counts"))["structuredContent"]
                if counts["cancelled"]:
                    break
                await trio.sleep(0.05)
            assert counts == {"started": 1, "cancelled": 1}
            assert text(await client.call_tool("nap")) == f"napped on {backend}"


def echo_line(request_id: int) -> bytes:
    params = {"name": "echo", "arguments": {"text": f"request {request_id}"}, "_meta": META}
    request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(request).encode() + b"\n"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_client_that_stops_reading_gets_backpressure(backend: str) -> None:
    # The server takes in its 1024 request slots and a little more, then stops reading
    # until its output is read; nothing is lost.
    process = await trio.lowlevel.open_process(
        [sys.executable, SERVER, "stdio", backend],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env()},
    )
    assert process.stdin is not None and process.stdout is not None
    # Once it answers one request it is up (starting takes a while on a busy machine).
    await process.stdin.send_all(echo_line(1))
    output = bytearray(await process.stdout.receive_some(65536))
    while not output.endswith(b"\n"):
        output += await process.stdout.receive_some(65536)
    written = 1

    async def flood() -> None:
        nonlocal written
        assert process.stdin is not None
        while True:  # blocks for good once the server stops reading
            await process.stdin.send_all(echo_line(written + 1))
            written += 1

    async def read() -> None:
        assert process.stdout is not None
        while data := await process.stdout.receive_some(65536):
            output.extend(data)

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                flooding = trio.CancelScope()

                async def flood_until_stopped() -> None:
                    with flooding:
                        await flood()

                nursery.start_soon(flood_until_stopped)
                while True:  # until it stops taking requests in
                    before = written
                    await trio.sleep(1.0)
                    if written == before:
                        break
                assert 1024 < written < 4000, written
                nursery.start_soon(read)
                while written == before:  # reading lets the blocked line through
                    await trio.sleep(0.05)
                flooding.cancel()
                await process.stdin.aclose()  # (a line is only counted once written whole)
                assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    answers = [json.loads(line) for line in bytes(output).splitlines()]
    assert sorted(msg["id"] for msg in answers) == list(range(1, written + 1))
    for msg in answers:
        assert msg["result"]["content"][0]["text"] == f"request {msg['id']} on {backend}"
