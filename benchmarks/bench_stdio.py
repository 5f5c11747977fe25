"""End to end over stdio: tool calls per second, mrtr against the official Python SDK.

Each row opens one session to a server child process (``bench_apps.py``) and
makes sequential ``tools/call`` requests on it after a warm-up: ``echo`` is
one leg; ``greet`` is two (an ``input_required`` round with one form
elicitation answered at once by the client, then the retry with the answer and
the echoed ``requestState``).  Four pairings, all in the same run: our client
and server, the ``mcp`` 2.3.0 client and server, and each client against the
other's server.  Both sides speak 2026-07-28 (each client probes
``server/discover`` first).  The time covers the client, the pipes and the
server process: the whole path a user waits on.

Run: ``.venv/bin/python benchmarks/bench_stdio.py [--calls N] [--repeats R]``.
Not a test: timings never decide pass or fail.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
APPS = str(HERE / "bench_apps.py")
NAME = {"name": "Ada"}


def server_argv(kind: str) -> list[str]:
    return [sys.executable, APPS, kind]


def run_mrtr_client(kind: str, tool: str, calls: int, repeats: int) -> float:
    """Best calls/s of our client against the ``kind`` server."""
    import trio
    from mrtr_transports.stdio_client import open_stdio_client

    import mrtr_core as m

    async def answer(key: str, request: m.InputRequest) -> m.InputResponse:
        return m.ElicitResult(action="accept", content=NAME)

    async def main() -> float:
        best = 0.0
        caps = {"elicitation": {}}
        async with open_stdio_client(server_argv(kind), answer=answer, capabilities=caps) as client:
            await timed_loop(lambda: client.call_tool(tool, {}), 20)  # warm-up
            for _ in range(repeats):
                best = max(best, await timed_loop(lambda: client.call_tool(tool, {}), calls))
        return best

    async def timed_loop(call: Callable[[], Awaitable[Any]], n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            result = await call()
            assert result["content"][0]["text"] in ("", "Hello Ada"), result
        return n / (time.perf_counter() - start)

    return trio.run(main)


def run_mcp_client(kind: str, tool: str, calls: int, repeats: int) -> float:
    """Best calls/s of the ``mcp`` 2.3.0 client against the ``kind`` server."""
    import anyio
    import mcp_types as types
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=NAME)

    async def main() -> float:
        best = 0.0
        argv = server_argv(kind)
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with Client(params, elicitation_callback=elicit) as client:
            await timed_loop(client, 20)
            for _ in range(repeats):
                best = max(best, await timed_loop(client, calls))
        return best

    async def timed_loop(client: Any, n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            result = await client.call_tool(tool, {})
            assert not result.is_error, result
        return n / (time.perf_counter() - start)

    return anyio.run(main)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"Python {platform.python_version()} on {platform.machine()}; "
        f"best of {args.repeats} x {args.calls} sequential calls on one session"
    )
    print(f"{'tool':<6} {'client':<6} {'server':<6} {'calls/s':>9} {'ms/call':>8}  vs mcp/mcp")
    for tool in ("echo", "greet"):
        rates: dict[tuple[str, str], float] = {}
        for client, server in (("mcp", "mcp"), ("mrtr", "mrtr"), ("mrtr", "mcp"), ("mcp", "mrtr")):
            runner = run_mrtr_client if client == "mrtr" else run_mcp_client
            rate = runner(server, tool, args.calls, args.repeats)
            rates[(client, server)] = rate
            ratio = rate / rates[("mcp", "mcp")]
            print(
                f"{tool:<6} {client:<6} {server:<6} {rate:>9,.0f} {1000 / rate:>8.2f}  {ratio:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
