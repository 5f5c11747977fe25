"""What one call costs the client's host layer, counted rather than timed.

Wall time on a loaded machine moves by more than the client's overhead, so this
counts.  Whole tool calls (``bench_mrtr_app``'s ``greet``: two legs and one
answer; ``plain``: one leg) run over an in-memory link
(:class:`~mrtr_transports.testing.memory.MemoryLink`: our client, the shared
server driver, no socket, no process) under ``anyio.run`` on trio or asyncio,
and three figures are taken per call:

* ``instructions``: ``valgrind --tool=callgrind``, two whole runs of ``N1`` and
  ``N2`` calls, their difference divided by ``N2 - N1`` (start-up and warm-up
  cancel out).  Client and in-memory server together: the server's part is the
  same on both sides of a client change;
* ``lookups`` and ``tasks``: anyio backend lookups (``get_async_backend``, one per
  ``anyio.current_time()``, ``anyio.Event()``, ``anyio.CancelScope()``,
  ``anyio.sleep`` ...) and tasks started (``start_soon``) per call, from
  ``cProfile`` over ``N2`` calls;
* ``cpu``: process CPU seconds per call (``time.process_time``, median of 5
  batches of ``N2`` calls): noisy, but beside the counts.

``--tree TREE`` counts another checkout instead (e.g. ``git archive`` of the base
commit, for a before/after; its ``transports`` imported as ``mrtr_transports``,
as ``_run_from_tree.py`` does).  Needs valgrind on PATH for the instructions
(``--no-valgrind`` skips them).  No pass/fail.

Run: ``.venv/bin/python benchmarks/count_client.py [--tree TREE] [--loop trio|asyncio]
[--tool greet|plain] [--n1 N] [--n2 N]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WARMUP = 30


def _use_tree(tree: str) -> None:
    """Import ``mrtr_core`` and ``mrtr_transports`` from ``tree`` (see ``_run_from_tree``)."""
    import importlib.util

    sys.meta_path[:] = [finder for finder in sys.meta_path if "editable" not in repr(finder)]
    sys.path.insert(0, tree)
    spec = importlib.util.spec_from_file_location(
        "mrtr_transports",
        f"{tree}/transports/__init__.py",
        submodule_search_locations=[f"{tree}/transports"],
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules["mrtr_transports"] = package
    spec.loader.exec_module(package)


SERVER = ["-m", "mrtr_transports", "serve", "--app", "bench_mrtr_app:app"]


@contextlib.asynccontextmanager
async def _client(transport: str, **options: Any) -> AsyncIterator[Any]:
    """A client over ``transport``: in memory, or to our server in a subprocess (always
    the installed tree's server: only the client is counted, and valgrind does not
    follow the child)."""
    if transport == "memory":
        from bench_mrtr_app import app
        from mrtr_transports.client.opening import open_client
        from mrtr_transports.testing.memory import MemoryLink

        async with open_client(MemoryLink(app), **options) as client:
            yield client
    elif transport == "stdio":
        from mrtr_transports.client.stdio import open_stdio_client

        argv = [_server_python(), *SERVER, "--stdio"]
        async with open_stdio_client(argv, env=_env(), **options) as client:
            yield client
    else:
        from mrtr_transports.client.http import open_http_client

        argv = [_server_python(), *SERVER, "--http", "127.0.0.1:0"]
        pipe = subprocess.PIPE
        server = subprocess.Popen(argv, env=_env(), stdout=pipe, stderr=pipe)
        try:
            assert server.stderr is not None
            line = server.stderr.readline().decode()
            if "listening on http://" not in line:
                raise RuntimeError(f"the HTTP server said {line!r}")
            async with open_http_client(line.split()[-1], **options) as client:
                yield client
        finally:
            server.terminate()
            server.wait()


def _server_python() -> str:
    return os.environ.get("COUNT_CLIENT_SERVER_PYTHON", sys.executable)


def worker(transport: str, loop: str, tool: str, calls: int, mode: str) -> None:
    """Open one client, warm up, then run ``calls`` calls of ``tool``; with ``mode``
    "profile" or "cpu" print what was measured as one JSON line."""
    import anyio

    import mrtr_core as m

    async def answer(key: str, request: Any) -> Any:
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})

    arguments: dict[str, Any] = {}

    async def run(client: Any, n: int) -> None:
        for _ in range(n):
            await client.call_tool(tool, arguments)

    async def main() -> None:
        async with _client(transport, answer=answer, era="modern") as client:
            await run(client, WARMUP)
            if mode == "count":
                await run(client, calls)
            elif mode == "profile":
                import cProfile
                import pstats

                profile = cProfile.Profile()
                profile.enable()
                await run(client, calls)
                profile.disable()
                stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
                print(json.dumps({k: v / calls for k, v in _attributed(stats).items()}))
            else:  # cpu
                seconds = []
                for _ in range(5):
                    started = time.process_time()
                    await run(client, calls)
                    seconds.append((time.process_time() - started) / calls)
                print(json.dumps({"cpu": statistics.median(seconds)}))

    anyio.run(main, backend=loop)


def _ours(path: str) -> bool:
    return f"{os.sep}client{os.sep}" in path


def _attributed(stats: dict[Any, Any]) -> dict[str, float]:
    """Backend lookups and ``start_soon`` calls, in all and from the client's modules
    (a lookup is the client's when the anyio function that made it was called from
    there; split by calls when it has several callers)."""
    found = {"lookups": 0.0, "client lookups": 0.0, "tasks": 0.0, "client tasks": 0.0}
    for (path, _, name), (_, ncalls, _, _, callers) in stats.items():
        if "anyio" not in path or name not in ("get_async_backend", "start_soon"):
            continue
        kind = "lookups" if name == "get_async_backend" else "tasks"
        found[kind] += ncalls
        for caller, (_, caller_calls, *_) in callers.items():
            if _ours(caller[0]):
                found[f"client {kind}"] += caller_calls
                continue
            # An anyio function in between (current_time, Event.__new__ ...): its callers.
            total = stats[caller][1] or 1
            for upper, (_, upper_calls, *_) in stats[caller][4].items():
                if _ours(upper[0]):
                    found[f"client {kind}"] += caller_calls * upper_calls / total
    return found


def _child(tree: str | None, *args: str) -> list[str]:
    argv = [sys.executable, __file__, "--worker", *args]
    return argv if tree is None else [*argv, "--tree", tree]


def _env() -> dict[str, str]:
    """The environment of the children: ``benchmarks/`` importable (``bench_mrtr_app``)."""
    path = [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def instructions(tree: str | None, transport: str, loop: str, tool: str, calls: int) -> int:
    """One run's instructions; tried twice (under valgrind everything is ~50x slower,
    and a loaded machine now and then makes a run miss a bound)."""
    with tempfile.TemporaryDirectory() as tmp:
        for attempt in (1, 2):
            done = subprocess.run(
                [
                    "valgrind",
                    "--tool=callgrind",
                    f"--callgrind-out-file={tmp}/out",
                    *_child(tree, transport, loop, tool, str(calls), "count"),
                ],
                capture_output=True,
                text=True,
                env=_env(),
            )
            if done.returncode == 0:
                break
            if attempt == 2:
                sys.stderr.write(done.stderr[-4000:])
                done.check_returncode()
        with open(f"{tmp}/out") as out:
            for line in out:
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
    raise RuntimeError("no totals in the callgrind output")


def measured(
    tree: str | None, transport: str, loop: str, tool: str, calls: int, mode: str
) -> dict[str, float]:
    done = subprocess.run(
        _child(tree, transport, loop, tool, str(calls), mode),
        capture_output=True,
        text=True,
        check=True,
        env=_env(),
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", help="count this checkout instead of the installed one")
    parser.add_argument("--transport", choices=["memory", "stdio", "http"], action="append")
    parser.add_argument("--loop", choices=["trio", "asyncio"], action="append")
    parser.add_argument("--tool", choices=["greet", "plain"], action="append")
    parser.add_argument("--n1", type=int, default=50)
    parser.add_argument("--n2", type=int, default=250)
    parser.add_argument("--no-valgrind", action="store_true")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tree:
        _use_tree(os.path.abspath(args.tree))
    if args.worker:
        transport, loop, tool, calls, mode = args.worker
        worker(transport, loop, tool, int(calls), mode)
        return
    where = args.tree or "this checkout"
    print(f"# the client's cost per call ({where}; python {sys.version.split()[0]})")
    print(
        f"{'transport':9} {'loop':8} {'tool':6} {'instructions':>13} {'lookups (client)':>17} "
        f"{'tasks (client)':>15} {'cpu us':>7}"
    )
    for transport in args.transport or ["memory", "stdio", "http"]:
        for loop in args.loop or ["trio", "asyncio"]:
            for tool in args.tool or ["greet", "plain"]:
                row = (args.tree, transport, loop, tool)
                if args.no_valgrind:
                    per_call = "n/a"
                else:
                    low = instructions(*row, args.n1)
                    high = instructions(*row, args.n2)
                    per_call = f"{(high - low) / (args.n2 - args.n1):,.0f}"
                profile = measured(*row, args.n2, "profile")
                cpu = measured(*row, args.n2, "cpu")["cpu"]
                lookups = f"{profile['lookups']:.1f} ({profile['client lookups']:.1f})"
                tasks = f"{profile['tasks']:.1f} ({profile['client tasks']:.1f})"
                print(
                    f"{transport:9} {loop:8} {tool:6} {per_call:>13} {lookups:>17} "
                    f"{tasks:>15} {cpu * 1e6:>7.0f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
