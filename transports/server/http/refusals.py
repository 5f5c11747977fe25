"""How the HTTP server says no: the status of a JSON-RPC error, error bodies, and the
refusals written by hand to a connection h11 cannot answer (no request read yet).

Every error the server writes has a JSON-RPC error response as its body, so a
client always has a message to show; a refusal for lack of room carries
``Retry-After`` and the code ``SERVER_BUSY``, and is always written before the
request reaches the app (at accept, or to a connection evicted while its
request was still arriving): a client may send that request again as it is.

A refusal is often written while the client is still sending its request.
Closing a socket with unread input makes the kernel reset the connection, and
a reset can destroy the refusal on its way (the client sees "connection reset"
instead of the 503).  So a connection refused before its request was read is
closed *lingeringly* (``close_lingering``): our side ends (FIN), then what the
client still sends is read and dropped, for at most ``LINGER_SECONDS`` and a
request's worth of bytes, before the close.

The connection is a ``trio.SocketStream`` (the HTTP server) or an anyio byte
stream (the WebSocket server, on trio or asyncio); the few calls that differ go
through ``_send_all``, ``_receive_some`` and ``_close_now``, until both servers are
on anyio.
"""

from __future__ import annotations

import contextlib
import http
from typing import Any

import anyio
import trio

import mrtr_core as m

__all__ = [
    "LINGER_SECONDS",
    "SERVER_BUSY",
    "STATUS_FOR_CODE",
    "close_lingering",
    "error_body",
    "reason_phrase",
    "refuse_busy",
    "write_refusal",
]

#: The HTTP status of a JSON error answer, by JSON-RPC code (its one home: the core).
STATUS_FOR_CODE = m.http._post.STATUS_FOR_CODE
#: JSON-RPC code of a "come back later" refusal (no place for a listen stream, no free
#: connection); its one home is the core's list of codes.
SERVER_BUSY = m.SERVER_BUSY
#: A JSON-RPC error response without id (its one home: the core).
error_body = m.http.error_body
#: Seconds a refusal written to a connection we are about to drop may take.
REFUSAL_WRITE_TIMEOUT = 1.0
#: Seconds a refused client may go on sending (read and dropped) before the close.
LINGER_SECONDS = 2.0
_LINGER_READ = 65536


#: A closed or broken connection, on either kind of stream a refusal is written to (the
#: trio HTTP server's ``trio.SocketStream``, the WebSocket server's anyio stream).
_GONE = (
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
)


async def _send_all(stream: Any, data: bytes) -> None:
    send_all = getattr(stream, "send_all", None)  # (trio's name; anyio's is ``send``)
    await (send_all(data) if send_all is not None else stream.send(data))


async def _receive_some(stream: Any, max_bytes: int) -> bytes:
    """Bytes, ``b""`` at the end (trio's way; anyio raises ``EndOfStream``)."""
    if hasattr(stream, "receive_some"):
        return bytes(await stream.receive_some(max_bytes))
    try:
        return bytes(await stream.receive(max_bytes))
    except anyio.EndOfStream:
        return b""


async def _close_now(stream: Any) -> None:
    if isinstance(stream, trio.abc.AsyncResource):
        await trio.aclose_forcefully(stream)
    else:
        await anyio.aclose_forcefully(stream)


def reason_phrase(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


async def write_refusal(
    stream: Any, status: int, message: str, retry_after: int | None = None
) -> None:
    """An error for a connection without a request h11 can answer (none yet, or a head
    still arriving), written as bytes and followed by the close; at most a second."""
    code = SERVER_BUSY if retry_after is not None else m.INVALID_REQUEST
    body = error_body(message, code)
    head = [
        f"HTTP/1.1 {status} {reason_phrase(status).decode()}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if retry_after is not None:
        head.append(f"retry-after: {retry_after}")
    data = ("\r\n".join(head) + "\r\n\r\n").encode() + body
    with anyio.move_on_after(REFUSAL_WRITE_TIMEOUT):
        with contextlib.suppress(*_GONE):
            await _send_all(stream, data)


async def close_lingering(stream: Any, lingering: Any, max_bytes: int) -> None:
    """Close a connection whose client may still be sending: end our side, read and drop
    what comes for at most ``LINGER_SECONDS`` and ``max_bytes``, then close.  At most
    ``lingering.total_tokens`` connections linger at once; past that, close at once."""
    try:
        lingering.acquire_nowait()
    except (trio.WouldBlock, anyio.WouldBlock):  # a flood of refusals: each costs its close
        await _close_now(stream)
        return
    try:
        with anyio.move_on_after(LINGER_SECONDS):
            with contextlib.suppress(*_GONE):
                await stream.send_eof()  # the refusal is complete: the client may read it all
                dropped = 0
                while dropped < max_bytes:
                    data = await _receive_some(stream, _LINGER_READ)
                    if not data:
                        break  # the client has read its refusal and closed
                    dropped += len(data)
    finally:
        lingering.release()
        await _close_now(stream)


async def refuse_busy(stream: Any, lingering: Any, max_bytes: int) -> None:
    """Every connection slot is busy with a request: say so, and close lingeringly."""
    await write_refusal(stream, 503, "too many connections: retry later", retry_after=1)
    await close_lingering(stream, lingering, max_bytes)
