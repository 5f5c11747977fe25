"""Whole tool calls over WebSocket, next to our stdio and Streamable HTTP: mrtr only.

The model: as ``bench_transports.py`` (the same app, ``bench_mrtr_app:app``, the
same ``greet`` (two legs) and ``plain`` (one leg) tools, the same timed batches
and checks), for our three transports, each server in its own subprocess
(``python -m mrtr_transports serve --stdio | --http 127.0.0.1:0 | --ws
127.0.0.1:0``) and our client in this process under ``trio.run``.  The
official SDK has no WebSocket server to compare with, so the comparison here
is between our own transports: what one long conversation on a socket costs
next to a pipe (stdio) and one POST per message (HTTP).

Run: ``.venv/bin/python benchmarks/bench_ws.py [--quick] [--calls N] [--repeats R]``.
Not a test: timings never pass or fail.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio
from _harness import Stats, machine
from bench_transports import (
    EXPECTED,
    NAME,
    OUR_APP,
    OUR_ENV,
    PROTOCOL,
    ROOT,
    TOOLS,
    _drain,
    _first_line,
    _stop,
)

import mrtr_core as m

TRANSPORTS = ("stdio", "http", "ws")


@contextmanager
def network_server(transport: str) -> Iterator[str]:
    """``mrtr_transports.server --http`` or ``--ws`` on a free port; yields its URL."""
    argv = [sys.executable, "-m", "mrtr_transports", "serve", f"--{transport}", "127.0.0.1:0"]
    process = subprocess.Popen(
        [*argv, *OUR_APP],
        cwd=ROOT,
        env={**os.environ, **OUR_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        line = _first_line(process.stderr, f"the {transport} server")
        if "listening on" not in line:
            raise RuntimeError(f"the {transport} server said {line!r}")
        _drain(process.stderr)
        yield line.split()[-1]
    finally:
        _stop(process)


def measure(transport: str, warmup: int, calls: int, repeats: int) -> dict[str, Any]:
    """Per tool, each timed batch's (wall seconds per call, client CPU seconds per call)."""
    from mrtr_transports.client.http import open_http_client
    from mrtr_transports.client.stdio import open_stdio_client
    from mrtr_transports.client.ws import open_ws_client

    answers = [0]

    async def answer(key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        answers[0] += 1
        return m.wire.ElicitResult(action="accept", content=NAME)

    options: dict[str, Any] = {"answer": answer, "capabilities": {"elicitation": {}}}

    async def run(client: Any) -> dict[str, Any]:
        if client.protocol_version != PROTOCOL:
            raise AssertionError(f"our client settled on {client.protocol_version}")

        async def batch(tool: str, n: int) -> tuple[float, float]:
            asked, cpu, start = answers[0], time.process_time(), time.perf_counter()
            for _ in range(n):
                result = await client.call_tool(tool, {})
                if result["content"][0]["text"] != EXPECTED[tool]:
                    raise AssertionError(f"{tool} returned {result!r}")
            elapsed = time.perf_counter() - start
            if answers[0] - asked != (n if tool == "greet" else 0):
                raise AssertionError(f"{tool}: the answer callback ran {answers[0] - asked} times")
            return elapsed / n, (time.process_time() - cpu) / n

        for tool in TOOLS:
            await batch(tool, warmup)
        timed: dict[str, list[tuple[float, float]]] = {tool: [] for tool in TOOLS}
        for _ in range(repeats):
            for tool in TOOLS:  # interleaved: a burst of load falls on both tools
                timed[tool].append(await batch(tool, calls))
        return timed

    async def main() -> dict[str, Any]:
        if transport == "stdio":
            argv = [sys.executable, "-m", "mrtr_transports", "serve", "--stdio", *OUR_APP]
            async with open_stdio_client(argv, env=OUR_ENV, cwd=ROOT, **options) as client:
                return await run(client)
        with network_server(transport) as url:
            opener = open_ws_client if transport == "ws" else open_http_client
            async with opener(url, **options) as client:
                return await run(client)

    result: dict[str, Any] = trio.run(main)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per timed batch")
    parser.add_argument("--repeats", type=int, default=5, help="timed batches per row")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per tool first")
    parser.add_argument("--quick", action="store_true", help="a short noisy run")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.repeats, args.warmup = 100, 3, 20
    if min(args.calls, args.repeats) < 1 or args.warmup < 1:
        parser.error("--calls, --repeats and --warmup must be at least 1")
    print(machine(("mrtr", "orjson", "trio", "h11", "wsproto")))
    print(f"median of {args.repeats} x {args.calls} sequential calls on one client (spread)")
    header = (
        f"{'transport':<9} {'tool':<5} {'calls/s':>9} {'spread':>12} "
        f"{'client µs/call':>15} {'vs stdio':>9}"
    )
    print(header)
    print("-" * len(header))
    stdio_rate: dict[str, float] = {}
    for transport in TRANSPORTS:
        timed = measure(transport, args.warmup, args.calls, args.repeats)
        for tool in TOOLS:
            wall = Stats(tuple(row[0] for row in timed[tool]))
            cpu = Stats(tuple(row[1] for row in timed[tool]))
            stdio_rate.setdefault(tool, wall.rate)
            print(
                f"{transport:<9} {tool:<5} {wall.rate:>9,.0f} {wall.spread:>12} "
                f"{cpu.us():>15,.0f} {wall.rate / stdio_rate[tool]:>9.2f}"
            )
    assert set(EXPECTED) == set(TOOLS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
