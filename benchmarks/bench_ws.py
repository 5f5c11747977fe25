"""Whole tool calls over WebSocket, next to our stdio and Streamable HTTP: mrtr only.

The model: as ``bench_transports.py`` (the same app, ``bench_mrtr_app:app``, the
same ``greet`` (two legs) and ``plain`` (one leg) tools, the same timed batches
and checks), for our three transports, each server in its own subprocess
(``python -m mrtr_transports.server --stdio | --http 127.0.0.1:0 | --ws
127.0.0.1:0``) and our client in this process under ``trio.run``.  The
official SDK has no WebSocket server to compare with, so the comparison here
is between our own transports: what one long conversation on a socket costs
next to a pipe (stdio) and one POST per message (HTTP).

Run: ``.venv/bin/python benchmarks/bench_ws.py [--calls N] [--repeats R]``.
Not a test: timings never pass or fail.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio
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
    machine_line,
    timed_batches,
)

import mrtr_core as m

TRANSPORTS = ("stdio", "http", "ws")


@contextmanager
def network_server(transport: str) -> Iterator[str]:
    """``mrtr_transports.server --http`` or ``--ws`` on a free port; yields its URL."""
    argv = [sys.executable, "-m", "mrtr_transports.server", f"--{transport}", "127.0.0.1:0"]
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

        async def call(tool: str) -> str:
            result = await client.call_tool(tool, {})
            return str(result["content"][0]["text"])

        return await timed_batches(call, answers, warmup, calls, repeats)

    async def main() -> dict[str, Any]:
        if transport == "stdio":
            argv = [sys.executable, "-m", "mrtr_transports.server", "--stdio", *OUR_APP]
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
    parser.add_argument("--calls", type=int, default=1000, help="calls per timed batch")
    parser.add_argument("--repeats", type=int, default=5, help="timed batches per row (best wins)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed calls per tool first")
    args = parser.parse_args()
    if min(args.calls, args.repeats) < 1 or args.warmup < 0:
        parser.error("--calls and --repeats must be at least 1, --warmup at least 0")
    print(machine_line())
    print(f"best of {args.repeats} x {args.calls} sequential calls on one client")
    header = f"{'transport':<9} {'tool':<5} {'calls/s':>9} {'client µs/call':>15}"
    print(header)
    print("-" * len(header))
    for transport in TRANSPORTS:
        batches = measure(transport, args.warmup, args.calls, args.repeats)
        for tool in TOOLS:
            best = max(batches[tool], key=lambda row: row[0] or 0.0)
            rate, client_us = best[0] or 0.0, best[1] or 0.0
            print(f"{transport:<9} {tool:<5} {rate:>9,.0f} {client_us:>15,.0f}")
    assert set(EXPECTED) == set(TOOLS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
