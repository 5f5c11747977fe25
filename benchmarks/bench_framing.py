"""Framing throughput: NDJSON lines and SSE events in, decoded messages out.

Two streams of realistic JSON-RPC messages (a mix of an ``input_required``
result, its retry request, a progress notification and a tool result; about
600 bytes on average), each processed whole, per JSON backend (stdlib ``json``,
``orjson``), in one run:

NDJSON (stdio, TCP: ``mrtr_core.wire.LineFramer``)

* floor         -- ``data.split(b"\\n")`` on the whole stream, ``loads`` of each line
                   (stdlib: ``json.loads(line.decode())``, its cheapest bare read):
                   the least any reader of newline-delimited JSON must spend;
* framer 64K    -- the stream fed in 64 KiB reads to a ``LineFramer`` (bounds as a
                   ``Connection`` sets them), every frame pulled out with
                   ``next_frame()`` and parsed with ``Codec.loads`` (the depth check
                   included): what a connection pays below its message structuring;
* framer 64K, bare loads -- the same with the bare library's ``loads``: the framer's
                   own cost, apart from the codec's;
* framer 512    -- 512-byte reads (a pipe read that ends mid-message most times).

SSE (Streamable HTTP responses: ``mrtr_core.http.SseDecoder``)

* floor         -- ``data.split(b"\\n\\n")``, the ``data: `` prefix cut, ``loads``;
* decoder 64K / 512 -- the stream (``encode_sse`` of each message, as our server
                   writes it) fed in reads of that size, every event pulled out with
                   ``next_event()`` and its ``data`` parsed with ``Codec.loads``.

Each row: the median of ``repeats`` passes over the whole stream (after a warm-up
pass) with its spread, as MB/s and messages/s, and ``ours/floor`` (how many times
longer than the floor with the same library).  Before timing it checks that every
path decodes the same messages.  No pass/fail.

Run: ``.venv/bin/python benchmarks/bench_framing.py [--quick]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Stats, machine, measure, ratio

from mrtr_core.http import SseDecoder, encode_sse
from mrtr_core.http._sse import SseEvent
from mrtr_core.wire import Codec, LineFramer
from mrtr_core.wire._codec import json_backend

MAX_MESSAGE = 16 * 1024 * 1024  # a Connection's default bounds
MAX_BUFFER = 64 * 1024 * 1024

_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0.1.0"},
}
STATE = "v1.eyJzdGVwIjoxLCJ0b29sIjoiYm9va190YWJsZSJ9.c2lnbmF0dXJlLWJ5dGVz"


def messages(count: int) -> list[dict[str, Any]]:
    """``count`` messages: the four kinds in turn, each with its own id."""
    kinds = itertools.cycle(range(4))
    out: list[dict[str, Any]] = []
    for i in range(count):
        kind = next(kinds)
        if kind == 0:
            out.append(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "result": {
                        "resultType": "input_required",
                        "inputRequests": {
                            "confirm": {
                                "method": "elicitation/create",
                                "params": {
                                    "message": "Book a table for 4 at 20:00?",
                                    "requestedSchema": {
                                        "type": "object",
                                        "properties": {"ok": {"type": "boolean"}},
                                        "required": ["ok"],
                                    },
                                },
                            }
                        },
                        "requestState": STATE,
                    },
                }
            )
        elif kind == 1:
            out.append(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {
                        "name": "book_table",
                        "arguments": {"restaurant": "Casa Lisboa", "party": 4},
                        "inputResponses": {
                            "confirm": {"action": "accept", "content": {"ok": True}}
                        },
                        "requestState": STATE,
                        "_meta": _META,
                    },
                }
            )
        elif kind == 2:
            out.append(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": i, "progress": i % 100, "total": 100},
                }
            )
        else:
            text = "Booked: Casa Lisboa, 4 people, 20:00. " * 24  # about 1 KB of text
            out.append(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "result": {
                        "content": [{"type": "text", "text": f"{text}(#{i})"}],
                        "isError": False,
                    },
                }
            )
    return out


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


Pass = Callable[[], list[Any]]


def stdlib_bare_loads(data: bytes) -> Any:
    """The cheapest bare stdlib read of UTF-8 bytes: ``json.loads`` of bytes would first
    guess their encoding and decode with ``surrogatepass``, which costs more."""
    return json.loads(data.decode())


# -- NDJSON ---------------------------------------------------------------------------


def ndjson_floor(data: bytes, loads: Callable[[bytes], Any]) -> Pass:
    def run() -> list[Any]:
        return [loads(line) for line in data.split(b"\n") if line]

    return run


def ndjson_framer(parts: list[bytes], loads: Callable[[bytes], Any]) -> Pass:
    def run() -> list[Any]:
        framer = LineFramer(max_message_size=MAX_MESSAGE, max_buffer_size=MAX_BUFFER)
        feed, next_frame = framer.feed, framer.next_frame
        out = []
        append = out.append
        for part in parts:
            feed(part)
            while type(frame := next_frame()) is bytes:
                append(loads(frame))
        framer.feed_eof()
        assert next_frame() is not None  # END_OF_STREAM: nothing left behind
        return out

    return run


# -- SSE ------------------------------------------------------------------------------


def sse_floor(data: bytes, loads: Callable[[bytes], Any]) -> Pass:
    def run() -> list[Any]:
        return [loads(block[6:]) for block in data.split(b"\n\n") if block]

    return run


def sse_decoder(parts: list[bytes], loads: Callable[[str], Any]) -> Pass:
    def run() -> list[Any]:
        decoder = SseDecoder(max_event_size=MAX_MESSAGE)
        feed, next_event = decoder.feed, decoder.next_event
        out = []
        append = out.append
        for part in parts:
            feed(part)
            while type(event := next_event()) is SseEvent:
                append(loads(event.data))
        return out

    return run


# -- the run ----------------------------------------------------------------------------


def timed(run: Pass, passes: int, repeats: int) -> Stats:
    def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            run()
        return time.perf_counter() - start

    return measure(batch, passes, repeats, warmup=1)


def row(label: str, stats: Stats, count: int, size: int, floor: Stats | None) -> str:
    mbs = size / stats.median / 1e6
    rate = count / stats.median
    versus = f"{ratio(stats, floor):6.2f}x" if floor is not None else "     — "
    return f"  {label:<28} {mbs:8.1f} MB/s {rate:12,.0f} msg/s  {stats.spread:>11}  {versus}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short, noisier run")
    parser.add_argument("--messages", type=int, help="messages per stream (default 20,000)")
    options = parser.parse_args()
    count = options.messages or (4_000 if options.quick else 20_000)
    passes, repeats = (1, 3) if options.quick else (2, 7)

    print(machine())
    values = messages(count)
    backends = [json_backend("stdlib")]
    if json_backend("auto").name == "orjson":
        backends.append(json_backend("orjson"))

    for backend in backends:
        codec = Codec(backend)
        lines = b"".join(backend.dumps(v) + b"\n" for v in values)
        events = b"".join(encode_sse(backend.dumps(v).decode()) for v in values)
        bare = stdlib_bare_loads if backend.name == "stdlib" else backend.loads
        cases: list[tuple[str, str, Pass, int]] = [
            ("ndjson", "floor (split + loads)", ndjson_floor(lines, bare), len(lines)),
            (
                "ndjson",
                "framer 64K + Codec.loads",
                ndjson_framer(chunks(lines, 65536), codec.loads),
                len(lines),
            ),
            (
                "ndjson",
                "framer 64K + bare loads",
                ndjson_framer(chunks(lines, 65536), bare),
                len(lines),
            ),
            (
                "ndjson",
                "framer 512 + Codec.loads",
                ndjson_framer(chunks(lines, 512), codec.loads),
                len(lines),
            ),
            ("sse", "floor (split + loads)", sse_floor(events, bare), len(events)),
            (
                "sse",
                "decoder 64K + Codec.loads",
                sse_decoder(chunks(events, 65536), codec.loads),
                len(events),
            ),
            (
                "sse",
                "decoder 512 + Codec.loads",
                sse_decoder(chunks(events, 512), codec.loads),
                len(events),
            ),
        ]
        for _, label, run, _ in cases:
            if run() != values:
                raise SystemExit(f"{backend.name} {label}: decoded messages differ")
        print(
            f"\n{backend.name}: {count:,} messages, {len(lines) / 1e6:.1f} MB as NDJSON, "
            f"{len(events) / 1e6:.1f} MB as SSE; median of {repeats} x {passes} passes"
        )
        floors: dict[str, Stats] = {}
        for kind, label, run, size in cases:
            stats = timed(run, passes, repeats)
            floor = floors.get(kind)
            if floor is None:
                floors[kind] = stats
                print(f" {kind}")
            print(row(label, stats, count, size, floor))
    print("\n(ours/floor: how many times longer than the floor with the same JSON library)")


if __name__ == "__main__":
    main()
