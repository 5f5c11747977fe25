"""What every target shares: which exceptions are allowed out, chunking, the bounds and
identities of the connection targets, and driving a connection until it waits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import mrtr_core as m

# --- What may come out -----------------------------------------------------------------


def guarded(action: Callable[[], Any]) -> Any:
    """``action()``; a documented error becomes ``None``, anything else propagates.

    Deep nesting is no exception: the codec's depth bound (``max_depth``) makes it a
    ``RemoteProtocolError`` like any other bad input, so a ``RecursionError`` is a crash.
    """
    try:
        return action()
    except m.MrtrError:
        return None


def run(target: Callable[[bytes], None], data: bytes) -> None:
    """Call ``target(data)`` the way the fuzzer does (kept as the one entry point)."""
    target(data)


def chunks(data: bytes, sizes: bytes) -> Iterator[bytes]:
    """``data`` cut into pieces whose sizes cycle through ``sizes`` (1..64 each)."""
    if not sizes:
        sizes = b"\x00"
    start = index = 0
    while start < len(data):
        size = 1 + sizes[index % len(sizes)] % 64
        yield data[start : start + size]
        start += size
        index += 1


STDLIB = m.wire.Codec("stdlib")
OVERSIZE = "oversize"

MAX_MESSAGE = 1024
MAX_BUFFER = 4096
ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
CLIENT_INFO = {"name": "fuzz-client", "version": "1"}
SERVER_INFO = {"name": "fuzz-server", "version": "1"}
MODERN = "2026-07-28"
LEGACY = "2025-06-18"


def drain(conn: m.Connection, on_event: Callable[[Any], None]) -> None:
    """Hand every event to ``on_event`` until NEED_DATA; a loop is a crash."""
    for _ in range(10_000):
        event = conn.next_event()
        if event is m.NEED_DATA:
            return
        on_event(event)
        if isinstance(event, m.ConnectionClosed):
            return
    raise AssertionError("next_event never returned NEED_DATA")


def feed_line(conn: m.Connection, line: bytes, sizes: bytes, *, parsed: bool) -> Iterator[None]:
    """Feed one line (its ``\\n`` included, if it has one), yielding after each feed: as
    raw bytes cut by ``sizes`` (whole for whole-message framing), or through
    ``receive_message`` as the JSON value it holds (an adapter that decoded it
    already), or as its text when it is not JSON."""
    body = line.rstrip(b"\n")
    if parsed:
        if body:
            value = guarded(lambda: STDLIB.loads(body))
            value = body.decode("utf-8", "replace") if value is None else value
            guarded(lambda: conn.receive_message(value))
            yield
    elif conn.framing == "messages":
        if body:  # b"" would mean the peer closed
            guarded(lambda: conn.receive_data(body))
            yield
    else:
        for piece in chunks(line, sizes):
            guarded(lambda piece=piece: conn.receive_data(piece))
            yield


def lines_of(stream: bytes) -> list[bytes]:
    """``stream``'s lines, each with its ``\\n`` (the last one, unterminated, without)."""
    parts = stream.split(b"\n")
    return [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
