"""What HTTP refusals and evictions cost multi-round flows: flows/s and flow restarts.

The model: a ``support.load_server`` subprocess with a small ``max_connections``
serves ``relay`` flows (three legs each, see ``tests/support/load_flows.py``)
to ``--clients`` HTTP clients of ``--client-connections`` keep-alive
connections each: more connections than the server has slots, so the server
keeps evicting idle kept-alive connections for newcomers, and, while
``--holders`` connections keep slots busy for ``--hold`` seconds at the start,
refuses newcomers (503).  Every flow that fails with a refusal is started
over by the flow driver: a *restart*.  A client that retries what the server
provably did not process (a stale kept-alive connection, a 503 SERVER_BUSY
with Retry-After) hides the refusals: no restarts, and more flows per second.

Run: ``.venv/bin/python benchmarks/http_refusals.py [--flows 200] [--repeat 3]``.
Not a test: the figures never pass or fail (``tests/transports/load`` holds the
checks).  The defaults are the scenario of ``test_load_http_flows.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the server app and the flow driver live there

from mrtr_transports.client.http import open_http_client  # noqa: E402
from support.load_flows import FlowDriver, LoadReport, percentile  # noqa: E402
from support.load_servers import http_server  # noqa: E402
from support.raw_http import hold_busy  # noqa: E402


async def one_run(args: argparse.Namespace) -> LoadReport:
    driver = FlowDriver()
    options: dict[str, Any] = {}
    if args.retry_attempts is not None:  # (left out, this also runs on older clients)
        options["retry_attempts"] = args.retry_attempts
    async with http_server(max_connections=args.max_connections, idle_timeout=2.0) as server:
        assert server.url is not None
        async with AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    open_http_client(
                        server.url,
                        answer=driver.answer,
                        max_connections=args.client_connections,
                        era="modern",
                        **options,
                    )
                )
                for _ in range(args.clients)
            ]
            holders = await hold_busy(server.port, args.holders, seconds=args.hold)
            report = await driver.run(clients, range(args.flows), concurrency=args.flows)
            for holder in holders:
                await holder.aclose()
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flows", type=int, default=200)
    parser.add_argument("--max-connections", type=int, default=17, help="the server's bound")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--client-connections", type=int, default=8, help="per client")
    parser.add_argument("--holders", type=int, default=16, help="slots held busy at the start")
    parser.add_argument("--hold", type=float, default=1.5, help="seconds they are held")
    parser.add_argument("--retry-attempts", type=int, default=None, help="the client option")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--verbose", action="store_true", help="show what refusals said")
    args = parser.parse_args(argv)
    print(f"$ .venv/bin/python benchmarks/http_refusals.py {' '.join(argv or sys.argv[1:])}")
    print(
        f"{args.flows} relay flows at once; {args.clients} clients x {args.client_connections} "
        f"connections against max_connections={args.max_connections}, {args.holders} slots "
        f"held for {args.hold} s; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print("| run | flows/s | completed | lost | restarts | refusals by kind | round p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for run in range(1, args.repeat + 1):
        r = trio.run(one_run, args)
        print(
            f"| {run} | {r.flows_per_second:.0f} | {r.completed}/{r.flows} | {r.lost} | "
            f"{r.retries} | {dict(r.refusal_kinds)} | {percentile(r.rounds, 0.5) * 1000:.1f} |"
        )
        if r.failures:
            print(f"lost, by reason: {dict(r.failures)}")
        if args.verbose:
            print(f"what the restarted flows were told: {r.refusal_examples}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
