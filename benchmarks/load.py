"""Load figures for the stdio and Streamable HTTP servers: many multi-round flows at once.

The model: a server subprocess serves ``support.load_app`` (``tests/support``);
this process runs ``relay`` flows against it with the project's clients.  A
``relay`` flow is three legs (two ``input_required`` rounds, then the
result); its questions name the flow and the client's answer echoes them, so
a flow counts as completed only with its exact expected result.  Per
transport, two phases:

* **burst**: ``--flows`` flows started at once.  Over HTTP they go through
  ``--clients`` clients of ``--client-connections`` keep-alive connections
  each, against a server of ``--max-connections``: more connections than the
  server takes, so some are refused (503) and the flow is started again after
  a short backoff (the client-side retry).  Over stdio they share one
  connection.
* **sequential**: ``--sequential`` flows after a warm-up of a tenth of that
  many, ``--sequential-concurrency`` at a time (1 on stdio), on one client:
  the server's resident set before and after says whether memory grows with
  the number of flows served.

Figures per phase: completed flows per second (wall time of the phase), the
p50 and p99 of a round's latency (from the leg that opened it to the next
question or the result, as the client sees it), lost flows (not ended with
their exact result), refusals (503, or a connection shed under load) and
retries, the server's peak VmRSS (sampled every 50 ms) and, for the
sequential phase, its growth.

Run: ``.venv/bin/python benchmarks/load.py [--flows 1000] [--transport http|stdio|both]``
(about half a minute with the defaults).  Not a test: the figures never pass
or fail; ``tests/transports/load`` holds the checks.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the server app and the flow driver live there

from mrtr_transports.client.client import Client  # noqa: E402
from mrtr_transports.client.http import open_http_client  # noqa: E402
from mrtr_transports.client.stdio import open_stdio_client  # noqa: E402
from support.load_flows import FlowDriver, LoadReport, percentile  # noqa: E402
from support.load_servers import (  # noqa: E402
    STDIO_SERVER,
    RssSampler,
    http_server,
    server_env,
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Phase:
    """One phase's figures."""

    def __init__(
        self,
        name: str,
        report: LoadReport,
        peak_kib: int,
        growth_kib: int | None,
        cpu: tuple[float, float],
    ) -> None:
        self.name = name
        self.report = report
        self.peak_kib = peak_kib
        self.growth_kib = growth_kib
        self.client_cpu, self.server_cpu = cpu

    def row(self, transport: str) -> str:
        r = self.report
        growth = "" if self.growth_kib is None else f"{self.growth_kib / 1024:+.1f}"
        return (
            f"| {transport} | {self.name} | {r.flows} | {r.flows_per_second:,.0f} | "
            f"{percentile(r.rounds, 0.5) * 1000:.1f} | {percentile(r.rounds, 0.99) * 1000:.1f} | "
            f"{r.lost} | {r.refusals} | {r.retries} | {self.peak_kib / 1024:.1f} | {growth} | "
            f"{self.client_cpu * 1000 / r.flows:.2f} | {self.server_cpu * 1000 / r.flows:.2f} |"
        )


async def measured(
    driver: FlowDriver, clients: Sequence[Client], numbers: range, concurrency: int, pid: int
) -> tuple[LoadReport, int, tuple[float, float]]:
    """Run the flows while sampling the server's VmRSS; the report, the peak (KiB) and
    the CPU seconds spent by this (client) process and by the server."""
    sampler = RssSampler(pid)
    client_cpu, server_cpu = time.process_time(), cpu_seconds(pid)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sampler.run)
        report = await driver.run(clients, numbers, concurrency=concurrency)
        nursery.cancel_scope.cancel()
    sampler.sample()
    cpu = (time.process_time() - client_cpu, cpu_seconds(pid) - server_cpu)
    return report, sampler.peak_kib, cpu


async def sequential(
    driver: FlowDriver, client: Client, count: int, concurrency: int, pid: int
) -> Phase:
    warm = max(1, count // 10)
    await driver.run([client], range(warm), concurrency=concurrency)
    sampler = RssSampler(pid)
    before = sampler.sample()
    report, peak, cpu = await measured(
        driver, [client], range(warm, warm + count), concurrency, pid
    )
    after = sampler.sample()
    return Phase(f"sequential x{concurrency}", report, peak, after - before, cpu)


async def run_http(args: argparse.Namespace) -> list[Phase]:
    driver = FlowDriver()
    async with http_server(max_connections=args.max_connections, idle_timeout=5.0) as server:
        assert server.url is not None
        async with AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    open_http_client(
                        server.url,
                        answer=driver.answer,
                        max_connections=args.client_connections,
                        era="modern",
                    )
                )
                for _ in range(args.clients)
            ]
            report, peak, cpu = await measured(
                driver, clients, range(args.flows), args.flows, server.pid
            )
        burst = Phase("burst", report, peak, None, cpu)
        async with open_http_client(server.url, answer=driver.answer) as client:
            steady = await sequential(
                driver, client, args.sequential, args.sequential_concurrency, server.pid
            )
    return [burst, steady]


@asynccontextmanager
async def stdio_client(driver: FlowDriver) -> AsyncIterator[tuple[Client, int]]:
    async with open_stdio_client(
        STDIO_SERVER, env=server_env(), cwd=ROOT, answer=driver.answer
    ) as client:
        assert client.link.process is not None  # type: ignore[attr-defined]
        yield client, client.link.process.pid  # type: ignore[attr-defined]


async def run_stdio(args: argparse.Namespace) -> list[Phase]:
    driver = FlowDriver()
    async with stdio_client(driver) as (client, pid):
        report, peak, cpu = await measured(driver, [client], range(args.flows), args.flows, pid)
        burst = Phase("burst", report, peak, None, cpu)
        steady = await sequential(driver, client, args.sequential, 1, pid)
    return [burst, steady]


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = "load average n/a"
    with contextlib.suppress(OSError):
        load = "load average " + ", ".join(f"{v:.1f}" for v in os.getloadavg())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{datetime.date.today().isoformat()}, commit {commit or '?'}; Python "
        f"{platform.python_version()} on {platform.system()} {platform.machine()}, {cpu}, "
        f"{os.cpu_count()} CPUs ({load} at the start)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("http", "stdio", "both"), default="both")
    parser.add_argument("--flows", type=int, default=1000, help="flows in the burst")
    parser.add_argument("--max-connections", type=int, default=64, help="HTTP server bound")
    parser.add_argument("--clients", type=int, default=4, help="HTTP clients in the burst")
    parser.add_argument(
        "--client-connections", type=int, default=32, help="keep-alive connections per client"
    )
    parser.add_argument("--sequential", type=int, default=1000, help="flows in that phase")
    parser.add_argument(
        "--sequential-concurrency", type=int, default=4, help="HTTP flows at once in that phase"
    )
    args = parser.parse_args(argv)
    shown = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    print(f"$ .venv/bin/python benchmarks/load.py {shown}".rstrip())
    print(machine_line())
    print(
        f"HTTP burst: {args.clients} clients x {args.client_connections} connections against "
        f"max_connections={args.max_connections}"
    )
    print()
    columns = (
        "| transport | phase | flows | flows/s | round p50 ms | round p99 ms | lost | "
        "refusals | retries | peak RSS MiB | RSS growth MiB | client CPU ms/flow | "
        "server CPU ms/flow |"
    )
    print(columns)
    print("|---" * (columns.count("|") - 1) + "|")
    phases: list[tuple[str, Phase]] = []
    if args.transport in ("http", "both"):
        phases += [("http", phase) for phase in trio.run(run_http, args)]
    if args.transport in ("stdio", "both"):
        phases += [("stdio", phase) for phase in trio.run(run_stdio, args)]
    for transport, phase in phases:
        print(phase.row(transport))
    failures: dict[str, Any] = {}
    for transport, phase in phases:
        if phase.report.failures:
            failures[f"{transport} {phase.name}"] = dict(phase.report.failures)
    if failures:
        print(f"\nlost flows, by reason: {failures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
