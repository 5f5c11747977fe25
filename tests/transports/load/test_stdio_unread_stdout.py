"""A stdio client that stops reading the server's stdout: the server's memory stays bounded.

The client (raw pipes, ``support.load_app`` behind the serve entry) writes
thousands of ``blob`` requests and reads nothing for a few seconds.  What must
hold: the server pushes back (its stdin is left unread) instead of taking
every request and holding every answer, so its resident set grows by a
bounded amount however much the client writes; and once the client reads
again, every request it wrote gets its answer (nothing lost), and the server
exits cleanly at the end of its input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import trio
from support.load_servers import APP, ROOT, RssSampler, server_env
from support.raw_http import tool_call

BUDGET = 90
REQUESTS = 10_000
ANSWER_SIZE = 4096
#: How long the client reads nothing while it writes.
DEAF_FOR = 3.0


def line(rid: int) -> bytes:
    return json.dumps(tool_call("blob", {"size": ANSWER_SIZE}, rid=rid)).encode() + b"\n"


async def test_a_server_whose_stdout_is_not_read_stops_reading_and_loses_nothing() -> None:
    argv = [sys.executable, "-m", "mrtr_transports", "serve", "--stdio", "--app", APP]
    argv += ["--drain-timeout", "60"]  # the end of input comes long before the last answer
    env = {**os.environ, **server_env()}
    with trio.fail_after(BUDGET):
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
        )
        assert process.stdin is not None and process.stdout is not None
        buffer = b""
        await process.stdin.send_all(line(0))
        while b"\n" not in buffer:  # the server is up and answering
            buffer += await process.stdout.receive_some(65536)
        buffer = buffer.split(b"\n", 1)[1]
        sampler = RssSampler(process.pid)
        baseline = sampler.sample()
        written = 0

        async def write_all() -> None:
            nonlocal written
            assert process.stdin is not None
            for start in range(1, REQUESTS + 1, 100):
                ids = range(start, min(start + 100, REQUESTS + 1))
                await process.stdin.send_all(b"".join(line(rid) for rid in ids))
                written = ids[-1]
            await process.stdin.aclose()

        answered: dict[int, int] = {}
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write_all)
            with trio.move_on_after(DEAF_FOR):
                await sampler.run()  # reading nothing meanwhile
            deaf_peak = sampler.peak_kib
            written_while_deaf = written
            # Read again: every request written gets its answer.
            while data := await process.stdout.receive_some(1 << 20):
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for text in lines:
                    message = json.loads(text)
                    answered[message["id"]] = len(message["result"]["content"][0]["text"])
        assert await process.wait() == 0
    # Pushed back: it did not take (and hold answers for) everything written so far.
    assert written_while_deaf < REQUESTS // 2
    assert deaf_peak - baseline < 48 * 1024, (baseline, deaf_peak)
    assert sorted(answered) == list(range(1, REQUESTS + 1))
    assert set(answered.values()) == {ANSWER_SIZE}
