"""Rounds scaling: the cost of one round through a client ``Connection``, per flow length.

A flow of R rounds is R times the round step of ``bench_round_step.py`` on one
call: one ``input_required`` line in (a form elicitation and a new
``requestState`` each round), its ``DispatchInput`` answered, the retry line
out.  For flows of 1, 2, 5, 10, 20 and 50 rounds this times the R rounds of
many calls (each call built, and its first leg written, before the timer; its
final complete answer read after it) and reports the cost per round: median
batch and spread, through ``_harness.measure``, for each JSON backend.

What it shows: per-round cost should not depend on how many rounds came before
(nothing copies or scans state that grows with the flow).  ``vs 1 round`` is
the per-round median against the one-round flow's, in the same run.
Run: ``.venv/bin/python benchmarks/bench_rounds.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from _harness import Stats, machine, measure, ratio

import mrtr_core as m

ROUNDS = (1, 2, 5, 10, 20, 50)
METHOD = "tools/call"
PARAMS: dict[str, Any] = {
    "name": "plan_trip",
    "arguments": {"from": "Lisbon", "to": "Porto", "travellers": 2},
}
FORM = {
    "method": "elicitation/create",
    "params": {
        "message": "Which option?",
        "requestedSchema": {
            "type": "object",
            "properties": {"option": {"type": "integer"}},
            "required": ["option"],
        },
    },
}
ANSWER = m.wire.ElicitResult(action="accept", content={"option": 1})


def round_line(leg_id: int, round_no: int) -> bytes:
    """The server's input_required answer to leg ``leg_id``, as one framed line."""
    result = {
        "resultType": "input_required",
        "inputRequests": {"choice": FORM},
        "requestState": f"v1.round-{round_no}.c2lnbmF0dXJl",
    }
    message = {"jsonrpc": "2.0", "id": leg_id, "result": result}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def done_line(leg_id: int) -> bytes:
    result = {"content": [{"type": "text", "text": "booked"}]}
    return json.dumps({"jsonrpc": "2.0", "id": leg_id, "result": result}).encode() + b"\n"


def started_call(codec: m.wire.Codec) -> tuple[m.Connection, int]:
    """A client connection whose call has its first leg (id 1) written."""
    conn = m.Connection(m.CLIENT, era="modern", json=codec, capabilities={"elicitation": {}})
    call = conn.call(METHOD, PARAMS, max_rounds=max(ROUNDS))
    conn.send(conn.next_event())  # type: ignore[arg-type]
    return conn, call


def one_round(conn: m.Connection, call: int, line: bytes) -> bytes:
    conn.receive_data(line)
    event = conn.next_event()
    while not isinstance(event.event, m.engine.DispatchInput):  # type: ignore[union-attr]
        event = conn.next_event()
    conn.provide(call, event.event.key, ANSWER)  # type: ignore[union-attr]
    return conn.send(conn.next_event())  # type: ignore[arg-type]


def finish(conn: m.Connection, leg_id: int) -> None:
    conn.receive_data(done_line(leg_id))
    event = conn.next_event()
    assert isinstance(event, m.CallEvent) and isinstance(event.event, m.engine.Done), event


def check(codec: m.wire.Codec, rounds: int) -> None:
    """Each retry carries this round's answer and requestState, nothing accumulated."""
    conn, call = started_call(codec)
    for k in range(1, rounds + 1):
        out = json.loads(one_round(conn, call, round_line(k, k)))
        params = out["params"]
        assert out["id"] == k + 1, out
        assert params["requestState"] == f"v1.round-{k}.c2lnbmF0dXJl"
        assert params["inputResponses"] == {
            "choice": {"action": "accept", "content": {"option": 1}}
        }
        assert params["arguments"] == PARAMS["arguments"]
    finish(conn, rounds + 1)


def rounds_batch(codec: m.wire.Codec, rounds: int) -> Callable[[int], float]:
    """A batch of ``n`` rounds: ``n // rounds`` calls of ``rounds`` rounds each."""
    lines = [round_line(k, k) for k in range(1, rounds + 1)]

    def batch(n: int) -> float:
        calls = [started_call(codec) for _ in range(max(n // rounds, 1))]
        start = time.perf_counter()
        for conn, call in calls:
            for line in lines:
                one_round(conn, call, line)
        elapsed = time.perf_counter() - start
        for conn, _ in calls:
            finish(conn, rounds + 1)
        # Seconds for n rounds (the calls made may round n down: scale to it).
        return elapsed * n / (len(calls) * rounds)

    return batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (noisier figures)")
    args = parser.parse_args()
    n, repeats = (500, 5) if args.quick else (5_000, 9)

    names = ["stdlib"]
    try:
        import orjson  # noqa: F401
    except ImportError:
        print("orjson is not installed: its rows are skipped (pip install 'mrtr[speedups]')")
    else:
        names.append("orjson")

    print(machine())
    print(f"median of {repeats} batches x {n} rounds per flow length (spread: fastest/slowest)")
    print(f"{'backend':<8} {'rounds':>6} {'us/round':>9} {'spread':>11} {'vs 1 round':>10}")
    for name in names:
        codec = m.wire.Codec(name)  # type: ignore[arg-type]
        first: Stats | None = None
        for rounds in ROUNDS:
            check(codec, rounds)
            stats = measure(rounds_batch(codec, rounds), n, repeats)
            if first is None:
                first = stats
            print(
                f"{name:<8} {rounds:>6} {stats.us():>9.2f} {stats.spread:>11} "
                f"{ratio(stats, first):>9.2f}x"
            )
    print("flat: every 'vs 1 round' near 1.00x (the issue's scaling target)")


if __name__ == "__main__":
    main()
