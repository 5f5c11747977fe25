"""What one call costs the HTTP server, counted rather than timed (``mrtr serve --http``).

The server (``mrtr serve --http 127.0.0.1:0 --app bench_mrtr_app:app --loop LOOP``,
from this checkout or from ``--tree TREE``, e.g. a ``git worktree`` of an older
commit) runs in a subprocess; our client, in this process, makes ``N`` calls of
the tool after ``WARMUP`` ones, then the server is stopped.  Two figures per call,
each the difference of a run of ``N2`` calls and one of ``N1`` divided by
``N2 - N1`` (start-up, warm-up and shutdown cancel out):

* ``instructions``: the server process under ``valgrind --tool=callgrind``
  (deterministic, whatever the load on the machine);
* ``calls``: Python function calls in the server (``cProfile``'s total).

Only the server is counted: the client is the same for every tree.  No pass/fail.

Run: ``.venv/bin/python benchmarks/count_server.py [--tree TREE] [--loop trio|asyncio]
[--tool greet|plain] [--n1 N] [--n2 N] [--no-valgrind]``.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WARMUP = 20


def _server_argv(tree: str | None, loop: str) -> list[str]:
    serve = ["serve", "--app", "bench_mrtr_app:app", "--http", "127.0.0.1:0", "--loop", loop]
    if tree is None:
        return ["-m", "mrtr_transports", *serve]
    return [str(HERE / "_run_from_tree.py"), tree, "mrtr_transports", *serve]


def _env() -> dict[str, str]:
    path = [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _drive(url: str, tool: str, calls: int) -> None:
    """Warm up, then ``calls`` calls of ``tool`` (the answer to ``greet``'s question given)."""
    import anyio
    from mrtr_transports.client.http import open_http_client

    import mrtr_core as m

    async def answer(key: str, request: Any) -> Any:
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})

    async def main() -> None:
        async with open_http_client(url, answer=answer, era="modern") as client:
            for _ in range(WARMUP + calls):
                await client.call_tool(tool, {})

    anyio.run(main, backend="trio")


def run_server(
    wrapper: list[str], options: list[str], tree: str | None, loop: str, tool: str, calls: int
) -> None:
    """The server (``wrapper python options -m mrtr_transports serve ...``) while the
    client makes its calls; then stopped by SIGINT, as an operator would."""
    argv = [*wrapper, sys.executable, *options, *_server_argv(tree, loop)]
    server = subprocess.Popen(argv, env=_env(), stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "listening on http://" in line:
                break
        else:
            raise RuntimeError("the server never listened")
        _drive(line.split()[-1], tool, calls)
    finally:
        server.send_signal(signal.SIGINT)  # a graceful stop: cProfile writes its stats
        server.communicate(timeout=600)


def instructions(tree: str | None, loop: str, tool: str, calls: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/out"
        valgrind = ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={out}"]
        run_server(valgrind, [], tree, loop, tool, calls)
        with open(out) as lines:
            for line in lines:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise RuntimeError("no totals in the callgrind output")


def function_calls(tree: str | None, loop: str, tool: str, calls: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/prof"
        run_server([], ["-m", "cProfile", "-o", out], tree, loop, tool, calls)
        total: int = pstats.Stats(out).total_calls  # type: ignore[attr-defined]
        return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", help="count this checkout's server instead of the installed one")
    parser.add_argument("--loop", choices=["trio", "asyncio"], action="append")
    parser.add_argument("--tool", choices=["greet", "plain"], action="append")
    parser.add_argument("--n1", type=int, default=20)
    parser.add_argument("--n2", type=int, default=120)
    parser.add_argument("--no-valgrind", action="store_true")
    args = parser.parse_args()
    tree = os.path.abspath(args.tree) if args.tree else None
    print(f"# the HTTP server's cost per call ({args.tree or 'this checkout'})")
    print(f"{'loop':8} {'tool':6} {'instructions':>13} {'calls':>7}")
    span = args.n2 - args.n1
    for loop in args.loop or ["trio", "asyncio"]:
        for tool in args.tool or ["plain", "greet"]:
            row = (tree, loop, tool)
            per_call = "n/a"
            if not args.no_valgrind:
                low, high = instructions(*row, args.n1), instructions(*row, args.n2)
                per_call = f"{(high - low) / span:,.0f}"
            calls = (function_calls(*row, args.n2) - function_calls(*row, args.n1)) / span
            print(f"{loop:8} {tool:6} {per_call:>13} {calls:>7.0f}", flush=True)


if __name__ == "__main__":
    main()
