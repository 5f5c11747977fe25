"""The hot round step: one input_required line in, one retry line out.

For each JSON backend (stdlib ``json``, ``orjson``) this measures, in one run:

* floor      -- ``loads(line_in)`` + ``dumps(retry_request)`` with the bare library:
                the least any client must spend on this step;
* per call   -- a fresh ``RoundEngine`` built and started, then the step below
                (what the first round of a real call costs);
* step only  -- the step alone, on engines built and started outside the timer:
                ``codec.decode(line)`` -> ``receive_result`` -> ``next_event()``
                up to ``DispatchInput`` -> ``provide`` -> ``next_event()``
                (``SendRetry``) -> ``codec.encode(Request(...))`` with a fresh id.
* connection -- the same step through a client ``Connection`` whose call has its
                first leg on the wire (built outside the timer):
                ``receive_data(line)`` -> ``next_event()`` up to ``DispatchInput``
                -> ``provide`` -> ``next_event()`` (``SendRetry``) -> ``send`` (the
                connection picks the id, stamps ``_meta``, frames the line).

Timing goes through ``_harness.measure``: a warm-up, then ``repeats`` batches
of ``n`` steps with the collector paused inside each; the median batch is
reported with its spread, and each ratio is taken between medians of the same
run.  No pass/fail: it prints the machine line, steps/s, µs per step with the
spread, and the ratio of each path to its floor.
Run: ``.venv/bin/python benchmarks/bench_round_step.py [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

from _harness import Stats, machine, measure, ratio

import mrtr_core as m

METHOD = "tools/call"
ORIGINAL_PARAMS: dict[str, Any] = {
    "name": "book_table",
    "arguments": {"restaurant": "Casa Lisboa", "party": 4},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0.1.0"},
    },
}
REQUEST_STATE = "v1.eyJzdGVwIjoxLCJ0b29sIjoiYm9va190YWJsZSJ9.c2lnbmF0dXJlLWJ5dGVz"
INPUT_REQUIRED_RESPONSE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "resultType": "input_required",
        "inputRequests": {
            "confirm": {
                "method": "elicitation/create",
                "params": {
                    "message": "Book a table for 4 at 20:00?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "confirm": {"type": "boolean"},
                            "note": {"type": "string"},
                        },
                        "required": ["confirm"],
                    },
                },
            }
        },
        "requestState": REQUEST_STATE,
    },
}
ANSWER_CONTENT = {"confirm": True, "note": "window seat"}


def line_in() -> bytes:
    """The input_required response as one wire line (no newline), compact JSON."""
    return json.dumps(INPUT_REQUIRED_RESPONSE, separators=(",", ":")).encode()


def retry_request() -> dict[str, Any]:
    """The retry request our path writes, as a plain object (for the floor)."""
    params = m.engine.build_retry_params(
        ORIGINAL_PARAMS,
        {"confirm": {"action": "accept", "content": ANSWER_CONTENT}},
        REQUEST_STATE,
    )
    return {"jsonrpc": "2.0", "id": 2, "method": METHOD, "params": params}


def started_engine() -> m.engine.RoundEngine:
    engine = m.engine.RoundEngine(METHOD, ORIGINAL_PARAMS)
    engine.start(0.0)
    event = engine.next_event()
    assert isinstance(event, m.engine.SendRequest)
    return engine


def make_step(codec: m.wire.Codec) -> Callable[[m.engine.RoundEngine, bytes, int], bytes]:
    """Our path for one step on a started engine, returning the retry line."""

    def step(engine: m.engine.RoundEngine, line: bytes, request_id: int) -> bytes:
        message = codec.decode(line)
        assert isinstance(message, m.ResultResponse)
        engine.receive_result(message.result, 0.001)
        event = engine.next_event()
        while not isinstance(event, m.engine.DispatchInput):
            event = engine.next_event()
        engine.provide(
            event.key, m.wire.ElicitResult(action="accept", content=ANSWER_CONTENT), 0.002
        )
        retry = engine.next_event()
        assert isinstance(retry, m.engine.SendRetry)
        return codec.encode(m.Request(id=request_id, method=METHOD, params=retry.params))

    return step


def floor_batch(loads: Callable[[bytes], Any], dumps: Callable[[Any], bytes], line: bytes):
    obj = retry_request()

    def batch(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            loads(line)
            dumps(obj)
        return time.perf_counter() - t0

    return batch


def per_call_batch(codec: m.wire.Codec, line: bytes):
    step = make_step(codec)

    def batch(n: int) -> float:
        ids = itertools.count(2)
        t0 = time.perf_counter()
        for _ in range(n):
            engine = m.engine.RoundEngine(METHOD, ORIGINAL_PARAMS)
            engine.start(0.0)
            engine.next_event()  # SendRequest: writing the original leg is not part of the step
            step(engine, line, next(ids))
        return time.perf_counter() - t0

    return batch


def step_only_batch(codec: m.wire.Codec, line: bytes):
    step = make_step(codec)

    def batch(n: int) -> float:
        engines = [started_engine() for _ in range(n)]
        ids = itertools.count(2)
        t0 = time.perf_counter()
        for engine in engines:
            step(engine, line, next(ids))
        return time.perf_counter() - t0

    return batch


def connection_with_leg_out(codec: m.wire.Codec) -> tuple[m.Connection, int]:
    """A client connection whose call's first leg (id 1) has been written."""
    conn = m.Connection(m.CLIENT, era="modern", json=codec)
    call = conn.call(METHOD, ORIGINAL_PARAMS)
    conn.send(conn.next_event())
    return conn, call


def connection_step(conn: m.Connection, call: int, line: bytes) -> bytes:
    conn.receive_data(line)
    event = conn.next_event()
    while not isinstance(event.event, m.engine.DispatchInput):  # type: ignore[union-attr]
        event = conn.next_event()
    key = event.event.key  # type: ignore[union-attr]
    conn.provide(call, key, m.wire.ElicitResult(action="accept", content=ANSWER_CONTENT), 0.002)
    return conn.send(conn.next_event())  # type: ignore[arg-type]


def connection_batch(codec: m.wire.Codec, line: bytes):
    framed = line + b"\n"

    def batch(n: int) -> float:
        ready = [connection_with_leg_out(codec) for _ in range(n)]
        t0 = time.perf_counter()
        for conn, call in ready:
            connection_step(conn, call, framed)
        return time.perf_counter() - t0

    return batch


def check_output(codec: m.wire.Codec, line: bytes) -> None:
    """Our paths write the retry the floor writes (same JSON value, fresh id)."""
    out = make_step(codec)(started_engine(), line, 2)
    assert json.loads(out) == retry_request(), out
    conn, call = connection_with_leg_out(codec)
    out = connection_step(conn, call, line + b"\n")
    assert out.endswith(b"\n") and json.loads(out) == retry_request(), out


def stdlib_dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (noisier figures)")
    args = parser.parse_args()
    n, repeats = (2_000, 5) if args.quick else (20_000, 9)

    line = line_in()
    backends: list[tuple[str, Callable[[bytes], Any], Callable[[Any], bytes]]] = [
        ("stdlib", json.loads, stdlib_dumps)
    ]
    try:
        import orjson
    except ImportError:
        print("orjson is not installed: its rows are skipped (pip install 'mrtr[speedups]')")
    else:
        backends.append(("orjson", orjson.loads, orjson.dumps))

    print(machine())
    print(
        f"{len(line)}-byte line in, {len(stdlib_dumps(retry_request()))}-byte line out; "
        f"median of {repeats} batches x {n} steps (spread: fastest/slowest batch)"
    )
    print(
        f"{'backend':<8} {'path':<10} {'steps/s':>10} {'us/step':>8} {'spread':>11} "
        f"{'ours/floor':>10}"
    )
    for name, loads, dumps in backends:
        codec = m.wire.Codec(name)  # type: ignore[arg-type]
        check_output(codec, line)
        rows = [
            ("floor", floor_batch(loads, dumps, line)),
            ("per call", per_call_batch(codec, line)),
            ("step only", step_only_batch(codec, line)),
            ("connection", connection_batch(codec, line)),
        ]
        floor: Stats | None = None
        for path, batch in rows:
            stats = measure(batch, n, repeats)
            if floor is None:
                floor = stats
            # "ours/floor" is a time ratio: how many times longer than the floor.
            shown = "-" if path == "floor" else f"{ratio(stats, floor):.2f}x"
            print(
                f"{name:<8} {path:<10} {stats.rate:>10,.0f} {stats.us():>8.2f} "
                f"{stats.spread:>11} {shown:>10}"
            )
    print("target (issue 13): connection <= 1.5x the stdlib floor and <= 2.5x the orjson floor")


if __name__ == "__main__":
    main()
