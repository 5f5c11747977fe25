"""The stdio server when its client does not read: memory stays bounded, end of input still ends it.

Each test starts a real server process (``python -m mrtr_transports serve --stdio``
with ``tests/support/srv_apps.py``) and writes raw request lines down its stdin
while leaving its stdout unread for a while (or for good).
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

import mrtr_core as m

# serial: "the server stopped taking requests" is read as "no progress for a second",
# which a starved server on a full machine also shows
pytestmark = [pytest.mark.subprocess, pytest.mark.serial]

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: The server's resident memory may not pass this while nobody reads its output (it
#: starts near 40 MB; before requests held their slot until written it grew by about
#: 80 MB a second).
RSS_BOUND_KB = 150_000
#: Requests the server may take in before it stops reading: its 1024 request slots,
#: the 64 messages of its outbox and what the pipes and one read hold, with room to spare.
TAKEN_IN_BOUND = 4_000


def server_env() -> dict[str, str]:
    paths = [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


async def start_server(drain_timeout: float) -> trio.Process:
    argv = [sys.executable, "-m", "mrtr_transports", "serve", "--stdio"]
    argv += ["--app", "support.srv_apps:TestApp", "--drain-timeout", str(drain_timeout)]
    return await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=server_env(),
    )


def echo_line(request_id: int, text: str) -> bytes:
    params = {"name": "echo", "arguments": {"text": text}, "_meta": META}
    request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(request).encode() + b"\n"


def resident_kb(pid: int) -> int:
    """The process's resident memory (``VmRSS`` of ``/proc/PID/status``), in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


async def read_all(stream: trio.abc.ReceiveStream) -> bytes:
    received = bytearray()
    while data := await stream.receive_some(65536):
        received += data
    return bytes(received)


def messages_of(output: bytes) -> list[dict[str, Any]]:
    assert output.endswith(b"\n"), "stdout ends in the middle of a line"
    return [json.loads(line) for line in output.splitlines()]


async def test_a_client_that_never_reads_cannot_grow_the_server_and_loses_nothing() -> None:
    process = await start_server(drain_timeout=10)
    assert process.stdin is not None and process.stdout is not None
    written = 0
    stop = False
    flood_ended = trio.Event()
    output: list[bytes] = []

    async def flood() -> None:
        # As fast as the pipe takes them; blocks for good once the server stops reading.
        nonlocal written
        assert process.stdin is not None
        while not stop:
            await process.stdin.send_all(echo_line(written + 1, f"request {written + 1}" * 20))
            written += 1
        flood_ended.set()

    async def read() -> None:
        assert process.stdout is not None
        output.append(await read_all(process.stdout))

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(flood)
                # Wait until the server stops taking requests in (with the old driver it
                # never did: 13,000 a second, each a task holding its unsent answer).
                # (Still for three seconds, not one: on a loaded machine the server may get
                # no CPU for a second while it still has room to take requests in.)
                still = 0
                while still < 3:
                    before = written
                    await trio.sleep(1.0)
                    still = still + 1 if written == before else 0
                rss = [resident_kb(process.pid)]
                await trio.sleep(1.0)  # and it stays stopped
                rss.append(resident_kb(process.pid))
                assert max(rss) < RSS_BOUND_KB, rss
                assert 1024 < written < TAKEN_IN_BOUND, written  # its slots, and no more
                # Now read: the flood's blocked line is taken in, then it stops.
                stop = True
                nursery.start_soon(read)
                await flood_ended.wait()
                await process.stdin.aclose()
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    # Every request written got exactly one answer, and it is the right one.
    messages = messages_of(output[0])
    answered = [msg["id"] for msg in messages]
    assert sorted(answered) == list(range(1, written + 1))
    for msg in messages:
        assert msg["result"]["content"][0]["text"] == f"request {msg['id']}" * 20


@pytest.mark.parametrize("stdout_read", [False, True], ids=["stdout-unread", "stdout-read"])
async def test_a_last_line_without_its_newline_still_ends_the_server_at_eof(
    stdout_read: bool,
) -> None:
    # Regression: the read loop waited to hand the error reply for the cut-off line to
    # the writer, which waited on the client, so it never saw the end of input.  The
    # answers to 100 requests of 4 kB fill the output pipe and the outbox.
    requests = b"".join(echo_line(i, "x" * 4096) for i in range(1, 101))
    process = await start_server(drain_timeout=0.5)
    assert process.stdin is not None and process.stdout is not None
    try:
        async with trio.open_nursery() as nursery:
            output: list[bytes] = []
            if stdout_read:

                async def read() -> None:
                    assert process.stdout is not None
                    output.append(await read_all(process.stdout))

                nursery.start_soon(read)
            await process.stdin.send_all(requests + b'{"jsonrpc": "2.0", "id": 101, "meth')
            await process.stdin.aclose()
            with trio.fail_after(15):  # the drain time is 0.5 s; the rest is for a busy machine
                assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    if stdout_read:
        messages = messages_of(output[0])
        answers = [msg for msg in messages if "result" in msg]
        assert sorted(msg["id"] for msg in answers) == list(range(1, 101))
        (refusal,) = [msg for msg in messages if "error" in msg]
        assert refusal["error"]["code"] == m.ErrorCode.PARSE_ERROR and "id" not in refusal
