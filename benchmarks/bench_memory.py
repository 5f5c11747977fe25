"""Memory per in-flight flow, parked continuation, outstanding nonce and task.

What a long-lived process holds for each piece of multi round-trip state, with
``N`` of them alive at once (10,000; 2,000 with ``--quick``):

* client flow, leg out      -- one client ``Connection`` (2026 era) with ``N`` calls,
                               each with its first leg written (``call`` + ``send``);
* client flow, at input     -- the same calls, each answered with an ``input_required``
                               result (one form elicitation and a ``requestState``) and
                               drained to its ``DispatchInput``: parked waiting for the
                               user's answer;
* server parked continuation -- an ``McpApp`` with one continuation-style tool
                               (``continuation=True``) that awaits one answer: ``N``
                               first legs through ``app.handle``, each handler parked
                               in the app's ``ContinuationStore`` (a trio task, its
                               coroutine, its channels), their results dropped;
* outstanding nonce         -- ``N`` spent ``requestState`` nonces (``token_urlsafe(16)``,
                               as the sealer makes them) in the app's in-process
                               single-use store (``MemorySingleUse``), unexpired;
* task (SEP-2663)           -- ``N`` ``tools/call``s of an ``McpApp`` task tool, each a
                               task in its ``MemoryTaskStore``: its work asleep
                               (``working``), awaiting one form answer
                               (``input_required``), or done (``completed``: the record
                               alone, kept until its TTL).

Each scenario runs in a fresh interpreter, after a warm-up of 200 items (so the
imports, caches and first allocations of each type are outside the figure), and
is measured twice: with ``tracemalloc`` (Python allocations still alive after
``gc.collect()``, divided by ``N``) and as the growth of the process's resident
set size (``/proc/self/statm``; includes the allocator's slack, and is coarse,
in pages).  The holder (connection, app, store) is built before the baseline,
so only what each item adds is counted.  No pass/fail.

Run: ``.venv/bin/python benchmarks/bench_memory.py [--quick] [--n N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import secrets
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import machine

WARMUP = 200
METHOD = "tools/call"
PARAMS: dict[str, Any] = {"name": "book_table", "arguments": {"restaurant": "Casa Lisboa"}}
STATE = "v1.eyJzdGVwIjoxLCJ0b29sIjoiYm9va190YWJsZSJ9.c2lnbmF0dXJlLWJ5dGVz"
FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Book a table for 4 at 20:00?",
        "requestedSchema": {
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"],
        },
    },
}


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- the scenarios: each returns add(n), which makes n more items alive -----------------


def client_flows(at_input: bool) -> Callable[[int], Any]:
    import mrtr_core as m

    conn = m.Connection(
        m.CLIENT,
        era="modern",
        capabilities={"elicitation": {}},
        max_calls=10**7,
        max_outgoing=10**7,
    )

    def add(n: int) -> None:
        for _ in range(n):
            conn.call(METHOD, PARAMS)
            line = conn.send(conn.next_event())  # type: ignore[arg-type]
            if at_input:
                request_id = json.loads(line)["id"]
                conn.receive_data(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": request_id,
                            "result": {
                                "resultType": "input_required",
                                "inputRequests": {"confirm": FORM},
                                "requestState": STATE,
                            },
                        }
                    ).encode()
                    + b"\n"
                )
                event = conn.next_event()
                while not isinstance(getattr(event, "event", None), m.engine.DispatchInput):
                    if not isinstance(event, m.CallEvent):
                        raise SystemExit(f"no DispatchInput: {event!r}")
                    event = conn.next_event()

    add.keep = conn  # type: ignore[attr-defined]
    return add


def parked_continuations() -> Callable[[int], Any]:
    import trio
    from mrtr_transports.apps.context import Context
    from mrtr_transports.apps.continuations import ContinuationStore
    from mrtr_transports.apps.mcp_app import McpApp

    import mrtr_core as m

    class Outlet:
        async def progress(self, progress: float, total: Any = None, message: Any = None) -> None:
            pass

        async def log(self, level: str, data: Any, logger: Any = None) -> None:
            pass

        async def notify(self, method: str, params: Any = None) -> None:
            pass

    question = m.server.elicit_form("Confirm?", {"ok": {"type": "boolean"}}, required=["ok"])

    async def confirm(ctx: Context) -> str:
        answer = await ctx.wait_for_answer("ok", question)
        return str(answer)

    app = McpApp(
        "memory",
        "1.0",
        principal="ada",
        sealer=m.server.StateSealer({"k": b"k" * 32}, "k"),
        continuations=ContinuationStore(max_parked=10**7),
    )
    app.add_tool(confirm, "confirm", continuation=True)
    info = m.server.RequestInfo(
        id=1,
        method=METHOD,
        era="modern",
        protocol_version="2026-07-28",
        capabilities={"elicitation": {}},
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )
    outlet = Outlet()

    async def add(n: int) -> None:
        for i in range(n):
            request = m.Request(id=i, method=METHOD, params={"name": "confirm", "arguments": {}})
            result = await app.handle(request, info, outlet)
            assert result["resultType"] == "input_required"
        await trio.testing.wait_all_tasks_blocked()

    add.keep = app  # type: ignore[attr-defined]
    add.is_async = True  # type: ignore[attr-defined]
    add.count = lambda: len(app.continuations)  # type: ignore[attr-defined,arg-type]
    return add


def tasks(stage: str) -> Callable[[int], Any]:
    """``N`` tasks (SEP-2663) through ``app.handle``: each ``tools/call`` answered with a
    ``CreateTaskResult``, its work ``working`` (asleep), ``input_required`` (awaiting one
    form answer) or ``completed`` (a short text result, its record kept until its TTL)."""
    import anyio
    import trio
    from mrtr_transports.apps.context import Context
    from mrtr_transports.apps.mcp_app import McpApp
    from mrtr_transports.apps.task_runs import TaskContext
    from mrtr_transports.apps.task_store import MemoryTaskStore

    import mrtr_core as m

    class Outlet:
        async def progress(self, progress: float, total: Any = None, message: Any = None) -> None:
            pass

        async def log(self, level: str, data: Any, logger: Any = None) -> None:
            pass

        async def notify(self, method: str, params: Any = None) -> None:
            pass

    question = m.server.elicit_form("Confirm?", {"ok": {"type": "boolean"}}, required=["ok"])

    async def work(task: TaskContext) -> str:
        if stage == "working":
            await anyio.sleep_forever()
        if stage == "input":
            await task.wait_for_answer("ok", question)
        return "done"

    def job(ctx: Context) -> Any:
        return ctx.run_task(work)

    store = MemoryTaskStore(max_tasks=10**7, max_tasks_per_client=10**7)
    app = McpApp(
        "memory",
        "1.0",
        principal="ada",
        sealer=m.server.StateSealer({"k": b"k" * 32}, "k"),
        tasks=store,
    )
    app.add_tool(job, "job", task="optional")
    info = m.server.RequestInfo(
        id=1,
        method=METHOD,
        era="modern",
        protocol_version="2026-07-28",
        capabilities={"elicitation": {}, "extensions": {m.tasks.TASKS_EXTENSION: {}}},
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )
    outlet = Outlet()
    want = {"working": "working", "input": "input_required", "completed": "completed"}[stage]

    async def add(n: int) -> None:
        ids = []
        for i in range(n):
            request = m.Request(id=i, method=METHOD, params={"name": "job", "arguments": {}})
            result = await app.handle(request, info, outlet)
            assert result["resultType"] == "task", result
            ids.append(result["taskId"])
        await trio.testing.wait_all_tasks_blocked()
        for task_id in ids[:3]:
            record = await store.find(task_id, "ada", time.time())
            assert record.status == want, (record.status, want)

    add.keep = app  # type: ignore[attr-defined]
    add.is_async = True  # type: ignore[attr-defined]
    add.count = lambda: len(store)  # type: ignore[attr-defined]
    return add


def outstanding_nonces() -> Callable[[int], Any]:
    from mrtr_transports.apps.single_use import MemorySingleUse

    store = MemorySingleUse(max_entries=10**7)
    expires = time.time() + 3600.0

    def add(n: int) -> None:
        consume, now = store.nonces.consume, time.time()
        for _ in range(n):
            assert consume(secrets.token_urlsafe(16), expires, now)

    add.keep = store  # type: ignore[attr-defined]
    add.count = lambda: len(store)  # type: ignore[attr-defined]
    return add


SCENARIOS: dict[str, tuple[str, Callable[[], Callable[[int], Any]]]] = {
    "leg-out": ("client flow, leg out", lambda: client_flows(at_input=False)),
    "at-input": ("client flow, at DispatchInput", lambda: client_flows(at_input=True)),
    "continuation": ("server parked continuation", parked_continuations),
    "nonce": ("outstanding single-use nonce", outstanding_nonces),
    "task-working": ("task, working (its work asleep)", lambda: tasks("working")),
    "task-input": ("task, input_required (one form)", lambda: tasks("input")),
    "task-completed": ("task, completed (record kept)", lambda: tasks("completed")),
}


def measure_one(name: str, n: int) -> dict[str, Any]:
    """In this (fresh) process: bytes per item by tracemalloc, then by RSS."""
    add = SCENARIOS[name][1]()
    is_async = getattr(add, "is_async", False)
    figures: dict[str, Any] = {}

    if is_async:
        # The parked tasks live only as long as their trio run: measure inside one.
        import trio
        import trio.testing

        async def inside() -> None:
            await add(WARMUP)
            gc.collect()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            await add(n)
            gc.collect()
            figures["traced"] = (tracemalloc.get_traced_memory()[0] - before) / n
            tracemalloc.stop()
            gc.collect()
            start = rss()
            await add(n)
            gc.collect()
            figures["rss"] = (rss() - start) / n
            figures["alive"] = add.count()  # type: ignore[attr-defined]
            # End the run: the parked handlers are system tasks, cancelled at its end.

        trio.run(inside)
        return figures
    add(WARMUP)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    add(n)
    gc.collect()
    figures["traced"] = (tracemalloc.get_traced_memory()[0] - before) / n
    tracemalloc.stop()
    gc.collect()
    start = rss()
    add(n)
    gc.collect()
    figures["rss"] = (rss() - start) / n
    counter = getattr(add, "count", None)
    figures["alive"] = counter() if counter else len(add.keep._calls.calls)  # type: ignore[attr-defined]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer items (2,000)")
    parser.add_argument("--n", type=int, help="items alive at once (default 10,000)")
    parser.add_argument("--scenario", choices=SCENARIOS, help=argparse.SUPPRESS)
    options = parser.parse_args()
    n = options.n or (2_000 if options.quick else 10_000)
    if options.scenario:
        print(json.dumps(measure_one(options.scenario, n)))
        return

    print(machine(("mrtr", "trio", "orjson")))
    print(f"\n{n:,} items alive at once, each scenario in a fresh interpreter")
    print(f"  {'per item':<32} {'tracemalloc':>12} {'RSS growth':>12} {'alive':>8}")
    for name, (label, _) in SCENARIOS.items():
        child = subprocess.run(
            [sys.executable, __file__, "--scenario", name, "--n", str(n)],
            capture_output=True,
            text=True,
        )
        if child.returncode != 0:
            print(f"  {label:<32} FAILED:\n{child.stderr}")
            continue
        figures = json.loads(child.stdout.strip().splitlines()[-1])
        print(
            f"  {label:<32} {figures['traced']:>8,.0f} B  {figures['rss']:>8,.0f} B"
            f"  {figures['alive']:>8,}"
        )
    print(
        "\n(tracemalloc: Python allocations still alive, per item; RSS growth: the process's\n"
        " resident set, per item, allocator slack included. 'alive': items held at the end,\n"
        " warm-up and both measured batches: warm-up + 2 x N expected.)"
    )


if __name__ == "__main__":
    main()
