"""The server's CPU per ``tools/call`` on HTTP: host + ``McpAsgi`` against today's trio server.

Why: ``mrtr serve --http`` moves from the trio server (``HttpServer``) onto the
host (``mrtr_transports.host``) running ``McpAsgi``; the switch must not cost
HTTP throughput.  On a shared machine wall-clock rates are noise, so this
measures the server process's CPU time (user + system, ``/proc``) per
sequential ``tools/call`` on one kept-alive connection, for each server in
turn, ``--rounds`` times (interleaved, so a change of load hits all alike),
and prints the median per server.

Servers (``bench_host.py --serve``): ``host-trio``, ``host-asyncio``,
``uvicorn`` (all running ``McpAsgi``) and ``trio-server`` (``HttpServer``).

``--profile KIND`` instead runs ``KIND`` under cProfile (the server process,
a warm-up left out) and prints the function calls per ``tools/call`` and the
functions by ``--sort`` (``tottime``: their own time): where the time goes.

``--baseline TREE`` adds each server (but the trio server) as run from another
source tree (``git archive COMMIT | tar -x -C TREE``): before/after in one run.

Run: ``.venv/bin/python benchmarks/bench_asgi_call.py [--calls N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_host import Served, read_response, request_bytes, throughput

KINDS = ("host-trio", "host-asyncio", "uvicorn", "trio-server")


def measure(kinds: list[str], calls: int, rounds: int, baseline: str | None) -> None:
    servers = {kind: Served(kind, "mcp") for kind in kinds}
    if baseline is not None:  # (the trio server is the reference: not moved)
        for kind in kinds:
            if kind != "trio-server":
                servers[f"{kind} (before)"] = Served(kind, "mcp", baseline)
    costs: dict[str, list[float]] = {kind: [] for kind in servers}
    try:
        for _ in range(rounds):
            for kind, served in servers.items():
                _, _, cost, _ = throughput(served, "mcp", calls, 1)
                costs[kind].append(cost)
    finally:
        for served in servers.values():
            served.stop()
    for kind, values in costs.items():
        low, high = min(values), max(values)
        print(
            f"{kind:23} server CPU {statistics.median(values):6.0f} µs/call "
            f"(min {low:.0f}, max {high:.0f}; {rounds} x {calls})",
            flush=True,
        )


def profile(kind: str, calls: int, sort: str, limit: int) -> None:
    """``kind`` in a subprocess under cProfile for ``calls`` calls (after a warm-up):
    the functions by ``sort``, and the function calls per ``tools/call``."""
    path = f"/tmp/bench_asgi_call.{os.getpid()}.prof"
    os.environ["BENCH_PROFILE"] = path
    served = Served(kind, "mcp")
    data = request_bytes("mcp")
    try:
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rest = b""
            for n in range(200 + calls):
                if n == 200:
                    served.process.send_signal(signal.SIGUSR1)
                    time.sleep(0.2)
                sock.sendall(data)
                _, _, rest = read_response(sock, rest)
            served.process.send_signal(signal.SIGUSR2)
            for _ in range(100):
                if os.path.exists(path):
                    break
                time.sleep(0.1)
            time.sleep(0.5)
    finally:
        served.stop()
    stats = pstats.Stats(path)
    os.unlink(path)
    print(f"{kind}: {stats.total_calls / calls:.0f} function calls per tools/call")  # type: ignore[attr-defined]
    stats.sort_stats(sort).print_stats(limit)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(KINDS))
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", metavar="KIND")
    parser.add_argument(
        "--baseline", metavar="TREE", help="also each server from TREE (a git archive)"
    )
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--limit", type=int, default=40)
    args = parser.parse_args(argv)
    print(f"# python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    if args.profile:
        profile(args.profile, args.calls, args.sort, args.limit)
    else:
        measure(args.only.split(","), args.calls, args.rounds, args.baseline)


if __name__ == "__main__":
    main(sys.argv[1:])
