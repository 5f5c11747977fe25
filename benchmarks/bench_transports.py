"""Whole tool calls through real transports: mrtr against the official ``mcp`` 2.3.0 SDK.

The model: for each transport (stdio, Streamable HTTP) and each side (ours,
the peer's), a fresh worker process opens one client session to a server in
another process, warms up, then times sequential ``tools/call`` requests on
that session.  Both sides speak 2026-07-28 and run the same workload:

* ``greet`` (two legs): the first leg gets an ``input_required`` result with
  one form elicitation under ``name`` and a sealed ``requestState``; the
  client's answer callback fills it in at once and the retry (answer plus the
  echoed state) gets ``Hello Ada``.
* ``plain`` (one leg, no input): ``done``.

The pairings (each server in its own process):

* stdio, ours: ``open_stdio_client`` spawning
  ``python -m mrtr_transports.server --stdio --app bench_mrtr_app:app``;
  peer: ``mcp.client.Client(StdioServerParameters(...))`` spawning
  ``bench_mcp_peer.py stdio`` (``MCPServer.run("stdio")``).
* http, ours: ``open_http_client`` to
  ``python -m mrtr_transports.server --http 127.0.0.1:0 --app bench_mrtr_app:app``;
  peer: ``mcp.client.Client(url)`` to ``bench_mcp_peer.py http`` (``MCPServer``'s
  Streamable HTTP app under uvicorn, stateless with JSON responses, like ours).

Our client runs under ``trio.run``, the SDK's under ``anyio.run`` (asyncio),
each in its own worker process so neither side's imports or heap weigh on
the other.  A row's figure is the best of ``--repeats`` batches of ``--calls``
calls (the two tools' batches interleaved); the time covers the client, the
pipe or socket, and the server process: the whole path a user waits on.
``ours/peer`` is our calls/s over the peer's from the same run (higher is
faster).  Each batch checks every result's text and that the answer callback
ran once per ``greet`` call (so every call really took two legs).

A second table splits the same best batches into CPU time per call: the
client worker's (``time.process_time``) and the server process's (its
user + system ticks from ``/proc``, Linux only, 10 ms resolution: ``n/a``
elsewhere).  Wall time beyond their sum is waiting (wake-ups, the kernel's
pipe and socket work); with two or more CPUs the two can overlap.

Run: ``.venv/bin/python benchmarks/bench_transports.py [--calls N] [--repeats R]``
(about a minute with the defaults).  Not a test: timings never pass or fail.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import select
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER = str(HERE / "bench_mcp_peer.py")
OUR_APP = ["--app", "bench_mrtr_app:app"]
#: ``PYTHONPATH`` addition that lets our server command lines import ``bench_mrtr_app``.
OUR_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}

TOOLS = ("greet", "plain")
LEGS = {"greet": 2, "plain": 1}
EXPECTED = {"greet": "Hello Ada", "plain": "done"}
NAME: dict[str, Any] = {"name": "Ada"}
PROTOCOL = "2026-07-28"
START_TIMEOUT = 30.0  # seconds for a server subprocess to say it listens


# --- Servers in subprocesses -------------------------------------------------------------


def _first_line(stream: Any, what: str) -> str:
    ready, _, _ = select.select([stream], [], [], START_TIMEOUT)
    line = stream.readline().decode() if ready else ""
    if not line:
        raise RuntimeError(f"{what} did not start within {START_TIMEOUT:.0f} s")
    return str(line)


def _drain(stream: Any) -> list[bytes]:
    """Read ``stream`` to its end in a thread (a full pipe would block the server); the
    last 50 lines, for an error message."""
    tail: list[bytes] = []

    def read() -> None:
        for line in stream:
            tail.append(line)
            del tail[:-50]

    threading.Thread(target=read, daemon=True).start()
    return tail


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def http_server(side: str) -> Iterator[str]:
    """A Streamable HTTP server for ``side`` in a subprocess; yields its endpoint URL."""
    pipe = subprocess.PIPE
    if side == "mrtr":
        argv = [sys.executable, "-m", "mrtr_transports.server", "--http", "127.0.0.1:0", *OUR_APP]
        env = {**os.environ, **OUR_ENV}
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=pipe, stderr=pipe)
        ready, said, other = "listening on http://", process.stderr, process.stdout
    else:
        process = subprocess.Popen([sys.executable, PEER, "http"], stdout=pipe, stderr=pipe)
        ready, said, other = "PORT ", process.stdout, process.stderr
    tail = _drain(other)
    try:
        line = _first_line(said, f"the {side} HTTP server")
        if not line.startswith(ready):
            raise RuntimeError(f"the {side} HTTP server said {line!r}")
        _drain(said)
        yield line.split()[-1] if side == "mrtr" else f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    except BaseException:
        sys.stderr.write(b"".join(tail).decode(errors="replace"))
        raise
    finally:
        _stop(process)


# --- Workers: one side's client, timed -----------------------------------------------------


def children_cpu() -> float | None:
    """CPU seconds (user + system) used so far by this process's children, the server:
    Linux only (``/proc``), at the kernel's tick resolution (usually 10 ms)."""
    try:
        pids = [
            pid
            for task in Path("/proc/self/task").iterdir()
            for pid in (task / "children").read_text().split()
        ]
        ticks = 0
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


async def timed_batches(
    call: Callable[[str], Awaitable[str]], answers: list[int], warmup: int, calls: int, repeats: int
) -> dict[str, list[list[float | None]]]:
    """Per tool, each batch's ``[calls/s, client CPU µs/call, server CPU µs/call]``;
    ``call(tool)`` returns the result's text."""

    async def batch(tool: str, n: int) -> list[float | None]:
        asked_before = answers[0]
        server_before, client_before = children_cpu(), time.process_time()
        start = time.perf_counter()
        for _ in range(n):
            text = await call(tool)
            if text != EXPECTED[tool]:
                raise AssertionError(f"{tool} returned {text!r}")
        elapsed = time.perf_counter() - start
        client_cpu, server_after = time.process_time() - client_before, children_cpu()
        asked = answers[0] - asked_before
        if asked != (n if tool == "greet" else 0):
            raise AssertionError(f"{tool}: the answer callback ran {asked} times in {n} calls")
        server_cpu = None
        if server_before is not None and server_after is not None:
            server_cpu = (server_after - server_before) * 1e6 / n
        return [n / elapsed, client_cpu * 1e6 / n, server_cpu]

    for tool in TOOLS:
        if warmup:
            await batch(tool, warmup)
    batches: dict[str, list[list[float | None]]] = {tool: [] for tool in TOOLS}
    for _ in range(repeats):
        for tool in TOOLS:
            batches[tool].append(await batch(tool, calls))
    return batches


def work_mrtr(transport: str, warmup: int, calls: int, repeats: int) -> dict[str, Any]:
    import trio
    from mrtr_transports.client.http import open_http_client
    from mrtr_transports.client.stdio import open_stdio_client

    import mrtr_core as m

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

        batches = await timed_batches(call, answers, warmup, calls, repeats)
        return {"batches": batches, "json": m.wire.json_backend().name}

    async def main() -> dict[str, Any]:
        if transport == "stdio":
            argv = [sys.executable, "-m", "mrtr_transports.server", "--stdio", *OUR_APP]
            async with open_stdio_client(argv, env=OUR_ENV, cwd=ROOT, **options) as client:
                return await run(client)
        with http_server("mrtr") as url:
            async with open_http_client(url, **options) as client:
                return await run(client)

    result: dict[str, Any] = trio.run(main)
    return result


def work_mcp(transport: str, warmup: int, calls: int, repeats: int) -> dict[str, Any]:
    import anyio
    import mcp_types as types
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    answers = [0]

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        answers[0] += 1
        return types.ElicitResult(action="accept", content=NAME)

    async def run(server: Any) -> dict[str, Any]:
        async with Client(server, elicitation_callback=elicit) as client:
            if client.protocol_version != PROTOCOL:
                raise AssertionError(f"the mcp client settled on {client.protocol_version}")

            async def call(tool: str) -> str:
                result = await client.call_tool(tool, {})
                block = result.content[0]
                return block.text if isinstance(block, types.TextContent) else repr(result)

            batches = await timed_batches(call, answers, warmup, calls, repeats)
            return {"batches": batches, "json": "pydantic"}

    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=[PEER, "stdio"])
        result: dict[str, Any] = anyio.run(run, params)
        return result
    with http_server("mcp") as url:
        result = anyio.run(run, url)
        return result


def run_worker(side: str, transport: str, warmup: int, calls: int, repeats: int) -> dict[str, Any]:
    """One side's figures for one transport, measured in a fresh process."""
    argv = [sys.executable, __file__, "--worker", side, "--transport", transport]
    argv += ["--warmup", str(warmup), "--calls", str(calls), "--repeats", str(repeats)]
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE)
    if done.returncode != 0:  # its traceback is already on stderr
        raise SystemExit(f"the {side} worker for {transport} failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


# --- The table ------------------------------------------------------------------------------


def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = ", ".join(
        f"{name} {metadata.version(name)}" for name in ("mcp", "trio", "h11", "uvicorn")
    )
    return (
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{cpu}, {os.cpu_count()} CPUs; {versions}"
    )


def _cpu(us: float | None, width: int) -> str:
    return f"{us:>{width},.0f}" if us is not None else f"{'n/a':>{width}}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per timed batch")
    parser.add_argument("--repeats", type=int, default=5, help="timed batches per row (best wins)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed calls per tool first")
    parser.add_argument("--transport", choices=("stdio", "http"), action="append")
    parser.add_argument("--worker", choices=("mrtr", "mcp"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if min(args.calls, args.repeats) < 1 or args.warmup < 0:
        parser.error("--calls and --repeats must be at least 1, --warmup at least 0")
    transports = args.transport or ["stdio", "http"]

    if args.worker:  # a child of the run below: print one JSON line
        work = work_mrtr if args.worker == "mrtr" else work_mcp
        print(json.dumps(work(transports[0], args.warmup, args.calls, args.repeats)))
        return 0

    print(machine_line())
    print(
        f"best of {args.repeats} x {args.calls} sequential calls on one session "
        f"(after {args.warmup} warm-up calls per tool); one worker process per side"
    )
    header = (
        f"{'transport':<9} {'tool':<5} {'legs':>4}  {'mrtr calls/s':>12} {'µs/call':>8}  "
        f"{'mcp calls/s':>11} {'µs/call':>8}  {'ours/peer':>9}"
    )
    print(header)
    print("-" * len(header))
    started = time.perf_counter()
    cpu_rows: list[str] = []
    for transport in transports:
        ours = run_worker("mrtr", transport, args.warmup, args.calls, args.repeats)
        peer = run_worker("mcp", transport, args.warmup, args.calls, args.repeats)
        for tool in TOOLS:
            mine_best = max(ours["batches"][tool], key=lambda batch: batch[0])
            peer_best = max(peer["batches"][tool], key=lambda batch: batch[0])
            mine, theirs = mine_best[0], peer_best[0]
            print(
                f"{transport:<9} {tool:<5} {LEGS[tool]:>4}  {mine:>12,.0f} {1e6 / mine:>8,.0f}  "
                f"{theirs:>11,.0f} {1e6 / theirs:>8,.0f}  {mine / theirs:>8.2f}x"
            )
            cpu_rows.append(
                f"{transport:<9} {tool:<5}  {_cpu(mine_best[1], 11)} {_cpu(mine_best[2], 7)}  "
                f"{_cpu(peer_best[1], 10)} {_cpu(peer_best[2], 7)}"
            )
    took = time.perf_counter() - started
    print(f"(JSON: ours {ours['json']}, mcp {peer['json']}; the run took {took:.0f} s)")
    print()
    print("CPU µs per call in the same best batches (the rest of the wall time is waiting):")
    columns = f"{'mrtr client':>11} {'server':>7}  {'mcp client':>10} {'server':>7}"
    print(f"{'transport':<9} {'tool':<5}  {columns}")
    for row in cpu_rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
