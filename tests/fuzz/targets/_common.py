"""What every target shares: which exceptions are allowed out, chunking, the bounds and
identities of the connection targets, and driving a connection until it waits."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import mrtr_core as m

# --- What may come out -----------------------------------------------------------------


class KnownDeepNesting(Exception):
    """Stand-in for the RecursionError deep nesting still raises (see ``_known``)."""


def _known(exc: BaseException, data: bytes) -> bool:
    """An exception that is a known, tracked problem rather than a new find.

    TODO(depth bound): remove this allowance once the codec's depth bound lands
    (another branch is adding it); from then on deep nesting must surface as a
    ``RemoteProtocolError`` like any other bad input, and a RecursionError is a crash.
    """
    return isinstance(exc, RecursionError) and _nesting(data) >= 500


def _nesting(data: bytes) -> int:
    """How deep ``[``/``{`` nest in ``data`` (a cheap bound; strings are not skipped)."""
    depth = deepest = 0
    for byte in data:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}" and depth:
            depth -= 1
    return deepest


def guarded(data: bytes, action: Callable[[], Any]) -> Any:
    """``action()``; a documented error becomes ``None``, anything else propagates."""
    try:
        return action()
    except m.MrtrError:
        return None
    except RecursionError as exc:
        if _known(exc, data):
            raise KnownDeepNesting from exc
        raise


def run(target: Callable[[bytes], None], data: bytes) -> None:
    """Call ``target(data)`` the way the fuzzer does: a known problem is not a find."""
    with contextlib.suppress(KnownDeepNesting):
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


def feed_stream(
    conn: m.Connection, data: bytes, stream: bytes, sizes: bytes, *, parsed: bool = False
) -> Iterator[None]:
    """Feed ``stream`` as lines in chunks, or one message per line; yield after each feed.

    ``parsed``: each line goes through ``receive_message`` as the JSON value it holds
    (an adapter that decoded it already), or as its text when it is not JSON.
    """
    if conn.framing == "messages" or parsed:
        pieces: Iterator[bytes] = iter(stream.split(b"\n"))
    else:
        pieces = chunks(stream, sizes)
    for piece in pieces:
        if conn.framing == "messages" and not piece:
            continue  # b"" means the peer closed
        if parsed:
            value = guarded(data, lambda piece=piece: STDLIB.loads(piece))
            value = piece.decode("utf-8", "replace") if value is None else value
            guarded(data, lambda value=value: conn.receive_message(value))
        else:
            guarded(data, lambda piece=piece: conn.receive_data(piece))
        yield
