"""How the HTTP server says no: the status of a JSON-RPC error, error bodies, and the
refusals written by hand to a connection h11 cannot answer (no request read yet).

Every error the server writes has a JSON-RPC error response as its body, so a
client always has a message to show; a refusal for lack of room carries
``Retry-After`` and the code ``SERVER_BUSY``.
"""

from __future__ import annotations

import contextlib
import http
from typing import Any

import trio

import mrtr_core as m

__all__ = [
    "SERVER_BUSY",
    "STATUS_FOR_CODE",
    "error_body",
    "reason_phrase",
    "refuse_busy",
    "write_refusal",
]

#: The HTTP status of a JSON error answer, by JSON-RPC code (any other code: 200).
STATUS_FOR_CODE = {
    m.protocol.METHOD_NOT_FOUND: 404,
    m.protocol.PARSE_ERROR: 400,
    m.protocol.INVALID_REQUEST: 400,
    m.protocol.INVALID_PARAMS: 400,
    m.protocol.HEADER_MISMATCH: 400,
    m.protocol.MISSING_CLIENT_CAPABILITY: 400,
    m.protocol.UNSUPPORTED_PROTOCOL_VERSION: 400,
    m.protocol.INTERNAL_ERROR: 500,
}
#: JSON-RPC code of a "come back later" refusal (no place for a listen stream, no free
#: connection): implementation-defined, as the spec leaves -32000 to -32019 to servers.
SERVER_BUSY = -32000
#: Seconds a refusal written to a connection we are about to drop may take.
REFUSAL_WRITE_TIMEOUT = 1.0


def reason_phrase(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def error_body(message: str, code: int, data: Any = None) -> bytes:
    """A JSON-RPC error response without id (the request was not read, or not readable)."""
    error = m.ErrorResponse(id=None, error=m.ErrorObject(code=code, message=message, data=data))
    return m.wire.encode_message(error)


async def write_refusal(
    stream: trio.SocketStream, status: int, message: str, retry_after: int | None = None
) -> None:
    """An error for a connection without a request h11 can answer (none yet, or a head
    still arriving), written as bytes and followed by the close; at most a second."""
    code = SERVER_BUSY if retry_after is not None else m.protocol.INVALID_REQUEST
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
    with trio.move_on_after(REFUSAL_WRITE_TIMEOUT):
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.send_all(data)


async def refuse_busy(stream: trio.SocketStream) -> None:
    """Every connection slot is busy with a request: say so and close, unread."""
    await write_refusal(stream, 503, "too many connections: retry later", retry_after=1)
    await trio.aclose_forcefully(stream)
