"""How the host says no before a request reaches the app, and how it closes a refused client.

Every refusal has a JSON-RPC error response as its body (``mrtr_core.http.
error_body``), so an MCP client always has a message
to show; one for lack of room carries ``Retry-After`` and the code
``SERVER_BUSY`` and is written before the request reaches the app, so the
client may send it again as it is.

A refusal is often written while the client is still sending.  Closing a socket
with unread input makes the kernel reset the connection, and the reset can
destroy the refusal on its way; so a refused connection is closed *lingeringly*
(``close_lingering``): our side ends (FIN), then what the client still sends is
read and dropped, for at most ``LINGER_SECONDS`` and one request's worth of
bytes.  (The host's and the WebSocket server's refusals, one rule for both.)
"""

from __future__ import annotations

import contextlib
import http

import anyio
import anyio.abc

import mrtr_core as m

__all__ = [
    "LINGER_SECONDS",
    "REFUSAL_WRITE_TIMEOUT",
    "SERVER_BUSY",
    "close_lingering",
    "error_body",
    "reason_phrase",
    "refusal_bytes",
    "refuse_busy",
    "write_refusal",
]

SERVER_BUSY = m.ErrorCode.SERVER_BUSY
error_body = m.http._post.error_body
#: Seconds a refusal written to a connection we are about to drop may take.
REFUSAL_WRITE_TIMEOUT = 1.0
#: Seconds a refused client may go on sending (read and dropped) before the close.
LINGER_SECONDS = 2.0
_LINGER_READ = 65536
#: What a dead or vanished peer raises on an anyio stream.
STREAM_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)


def reason_phrase(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def refusal_bytes(status: int, message: str, retry_after: int | None = None) -> bytes:
    """A whole ``Connection: close`` response with a JSON-RPC error body, as bytes: for a
    connection without a request h11 could answer (none yet, or a head still arriving)."""
    code = SERVER_BUSY if retry_after is not None else m.ErrorCode.INVALID_REQUEST
    body = error_body(message, code)
    head = [
        f"HTTP/1.1 {status} {reason_phrase(status).decode()}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    if retry_after is not None:
        head.append(f"retry-after: {retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def write_refusal(
    stream: anyio.abc.ByteStream, status: int, message: str, retry_after: int | None = None
) -> None:
    """Write ``refusal_bytes``, in at most ``REFUSAL_WRITE_TIMEOUT`` (the close follows)."""
    data = refusal_bytes(status, message, retry_after)
    with anyio.move_on_after(REFUSAL_WRITE_TIMEOUT), contextlib.suppress(*STREAM_GONE):
        await stream.send(data)


async def close_lingering(
    stream: anyio.abc.ByteStream, lingering: anyio.CapacityLimiter, max_bytes: int
) -> None:
    """Close a connection whose client may still be sending: end our side, read and drop
    what comes for at most ``LINGER_SECONDS`` and ``max_bytes``, then close.  At most
    ``lingering.total_tokens`` connections linger at once; past that, close at once."""
    try:
        lingering.acquire_nowait()
    except anyio.WouldBlock:  # a flood of refused connections: each costs only its close
        await anyio.aclose_forcefully(stream)
        return
    try:
        with anyio.move_on_after(LINGER_SECONDS):
            with contextlib.suppress(*STREAM_GONE, anyio.EndOfStream):
                await stream.send_eof()  # the refusal is complete: the client may read it all
                dropped = 0
                while dropped < max_bytes:
                    dropped += len(await stream.receive(_LINGER_READ))
    finally:
        lingering.release()
        await anyio.aclose_forcefully(stream)


async def refuse_busy(
    stream: anyio.abc.ByteStream, lingering: anyio.CapacityLimiter, max_bytes: int
) -> None:
    """Every connection slot is busy with a request: say so, and close lingeringly."""
    await write_refusal(stream, 503, "too many connections: retry later", retry_after=1)
    await close_lingering(stream, lingering, max_bytes)
