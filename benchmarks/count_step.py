"""Where the client's round step spends its instructions, phase by phase.

Timings move with the machine's load; instruction counts do not.  This runs
``bench_round_step``'s client step (one ``input_required`` line in through a
``Connection``, one retry line out) under ``valgrind --tool=callgrind`` with
the step cut after each phase, ``N`` steps per run, and prints the
instructions each phase adds per step, beside the JSON floors (``loads`` +
``dumps`` of the same two messages) counted the same way:

* ``receive_data``            -- the line buffered;
* ``next_event: read``        -- framed, parsed, depth-checked, classified;
* ``next_event: round``       -- the answer routed to its call and read by the
                                 engine (shape, typed input requests, capabilities),
                                 its round opened;
* ``next_event: RoundStarted``-- the first event handed out;
* ``next_event: DispatchInput``
* ``provide``                 -- the typed answer checked and written in wire form;
* ``next_event: SendRetry``   -- the retry's params built;
* ``send``                    -- id picked, spliced, encoded, framed.

Then what one typed object costs to build (``--objects``), beside a tuple and a
plain slotted class with the same fields: the step builds eight (the response,
the typed input request, ``RoundStarted``, ``DispatchInput``, ``SendRetry`` and
three ``CallEvent``), and the typed events are the API the issue keeps.

Each figure is the difference of two whole runs (the same set-up, one phase
more), divided by ``N``; the interpreter's start-up cancels out.  Needs
valgrind (on PATH); takes a few minutes.  No pass/fail.
Run: ``.venv/bin/python benchmarks/count_step.py [--json orjson|stdlib] [-n N] [--objects]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# (label, the phase the run stops after); "read" and "round" split the first next_event.
PHASES = (
    ("receive_data", "buffered"),
    ("next_event: read", "read"),
    ("next_event: round", "round"),
    ("next_event: RoundStarted", "started"),
    ("next_event: DispatchInput", "dispatch"),
    ("provide", "provided"),
    ("next_event: SendRetry", "retry"),
    ("send", "sent"),
)
STOPS = ("none", *(stop for _, stop in PHASES))


def child(backend: str, n: int, stop: str) -> None:
    """Set up ``n`` connections with their first leg out, then run each to ``stop``."""
    import gc

    import bench_round_step as b

    import mrtr_core as m

    codec = m.wire.Codec(backend)  # type: ignore[arg-type]
    line = b.line_in() + b"\n"
    answer = m.wire.ElicitResult(action="accept", content=b.ANSWER_CONTENT)
    upto = STOPS.index(stop)

    def step(conn: m.Connection, call: int, upto: int) -> None:
        if upto < 1:
            return
        conn.receive_data(line)
        if upto < 2:
            return
        # The first next_event, in its two halves (what Connection.next_event does for
        # the usual answer to a leg), then the event it hands out.
        message = conn._inbox.next_message()
        if upto < 3:
            return
        conn._ours.on_response(message, 0.0)  # type: ignore[arg-type]
        if upto < 4:
            return
        conn.next_event()  # RoundStarted
        if upto < 5:
            return
        event = conn.next_event()  # DispatchInput
        if upto < 6:
            return
        conn.provide(call, event.event.key, answer, 0.002)  # type: ignore[union-attr]
        if upto < 7:
            return
        retry = conn.next_event()  # SendRetry
        if upto < 8:
            return
        conn.send(retry)  # type: ignore[arg-type]

    for conn, call in [b.connection_with_leg_out(codec) for _ in range(50)]:
        step(conn, call, len(STOPS) - 1)  # warm: every path taken once
    ready = [b.connection_with_leg_out(codec) for _ in range(n)]
    gc.disable()
    for conn, call in ready:
        step(conn, call, upto)


def floor_child(backend: str, n: int, stop: str) -> None:
    """The floor: ``loads`` of the line and ``dumps`` of the retry, ``n`` times."""
    import json

    import bench_round_step as b

    line, retry = b.line_in(), b.retry_request()
    loads: Callable[[bytes], Any]
    dumps: Callable[[Any], bytes]
    if backend == "orjson":
        import orjson

        loads, dumps = orjson.loads, orjson.dumps
    else:

        def loads(raw: bytes) -> Any:
            return json.loads(raw.decode())

        def dumps(obj: Any) -> bytes:
            return json.dumps(obj, separators=(",", ":")).encode()

    for _ in range(50):
        loads(line), dumps(retry)
    for _ in range(n if stop == "sent" else 0):
        loads(line), dumps(retry)


def objects_child(n: int, stop: str) -> None:
    """Build the object named ``stop`` (``none``: nothing) ``n`` times."""
    import mrtr_core as m
    from mrtr_core._connection._events import CallEvent

    class Plain:
        __slots__ = ("input_timeout", "keys", "kinds", "round")

        def __init__(self, *, round: int, keys: Any, kinds: Any, input_timeout: Any) -> None:
            self.round, self.keys, self.kinds = round, keys, kinds
            self.input_timeout = input_timeout

    keys, kinds = ("confirm",), ("elicitation/create",)
    request = m.wire.ElicitFormRequest(message="Book?", requested_schema={})
    started = m.engine.RoundStarted(round=1, keys=keys, kinds=kinds, input_timeout=None)
    builders: dict[str, Callable[[], object]] = {
        "none": lambda: None,
        "tuple of 4": lambda: (1, keys, kinds, None),
        "plain slotted class, 4 fields": lambda: Plain(
            round=1, keys=keys, kinds=kinds, input_timeout=None
        ),
        "RoundStarted": lambda: m.engine.RoundStarted(
            round=1, keys=keys, kinds=kinds, input_timeout=None
        ),
        "DispatchInput": lambda: m.engine.DispatchInput(key="confirm", request=request, round=1),
        "SendRetry": lambda: m.engine.SendRetry(
            params={}, timeout=None, delay=0.0, round=1, leg=2, reissue=False
        ),
        "CallEvent": lambda: CallEvent(call=1, event=started),
    }
    build = builders[stop]
    for _ in range(50):
        build()
    for _ in range(n):
        build()


OBJECTS = (
    "tuple of 4",
    "plain slotted class, 4 fields",
    "RoundStarted",
    "DispatchInput",
    "SendRetry",
    "CallEvent",
)


def instructions(args: list[str]) -> int:
    """Instructions of one whole run of this script as a child, under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/out",
                sys.executable,
                __file__,
                *args,
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}"},
        )
    found = re.search(r"Collected : (\d+)", out.stderr) or re.search(
        r"refs:\s+([\d,]+)", out.stderr
    )
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", choices=("orjson", "stdlib"), default="orjson")
    parser.add_argument("-n", type=int, default=1000, help="steps per run (default 1000)")
    parser.add_argument(
        "--objects", action="store_true", help="also count what one typed event costs to build"
    )
    parser.add_argument("--child", choices=("step", "floor", "objects"), help=argparse.SUPPRESS)
    parser.add_argument("--stop", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "objects":
        return objects_child(args.n, args.stop)
    if args.child == "step":
        return child(args.json, args.n, args.stop)
    if args.child == "floor":
        return floor_child(args.json, args.n, args.stop)
    if shutil.which("valgrind") is None:
        raise SystemExit("count_step.py needs valgrind on PATH (Debian: apt-get install valgrind)")
    print(machine(["orjson"]))
    n, backend = args.n, args.json
    print(f"instructions per step, {backend}, {n} steps per run (callgrind)")
    counts = {
        stop: instructions(["--child", "step", "--json", backend, "-n", str(n), "--stop", stop])
        for stop in STOPS
    }
    floor = {}
    for name in ("orjson", "stdlib"):
        base = instructions(["--child", "floor", "--json", name, "-n", str(n), "--stop", "none"])
        full = instructions(["--child", "floor", "--json", name, "-n", str(n), "--stop", "sent"])
        floor[name] = (full - base) / n
    total = (counts["sent"] - counts["none"]) / n
    previous = counts["none"]
    for label, stop in PHASES:
        each = (counts[stop] - previous) / n
        previous = counts[stop]
        print(f"  {label:<27} {each:>9,.0f}  {each / total:6.1%}")
    print(f"  {'the whole step':<27} {total:>9,.0f}")
    for name, value in floor.items():
        mine = f"  (the step = {total / value:.1f}x)" if name == backend else ""
        print(f"  floor, {name:<20} {value:>9,.0f}{mine}")
    if args.objects:
        print("instructions to build one object")
        base = instructions(["--child", "objects", "-n", str(n), "--stop", "none"])
        for name in OBJECTS:
            each = instructions(["--child", "objects", "-n", str(n), "--stop", name]) - base
            print(f"  {name:<30} {each / n:>9,.0f}")


if __name__ == "__main__":
    main()
