"""The trio server's way into the endpoint's 2025-era side (``mrtr_transports.asgi.sessions``).

The sessions, their rules and their streams have one home, the endpoint's
``SessionEndpoint``, which speaks ASGI.  ``serve_session`` hands it one request
of an h11 connection as the ASGI messages it expects: ``send`` writes the
response with h11 (a session's SSE stream leaves the connection slots for the
sessions' own pool, and its connection closes with it), ``receive`` waits for
the client to go away (a pipelined next request is kept for h11, up to one
request's worth).  The connection ends when the client went away.  (Until
``mrtr serve --http`` runs on the host and the endpoint: then this goes.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import h11
import trio

from ...asgi.answer import Receive, Send
from ..driver import READ_SIZE
from .refusals import reason_phrase

if TYPE_CHECKING:
    from .exchange import HttpConnection

__all__ = ["serve_session"]

Message = MutableMapping[str, Any]
SSE = (b"content-type", b"text/event-stream")


class _H11Exchange:
    """One session request of an h11 connection, as ASGI ``receive`` and ``send``."""

    def __init__(self, connection: HttpConnection) -> None:
        self.connection = connection
        self.gone = False

    async def receive(self) -> Message:
        connection = self.connection
        received = 0
        limit = connection.server.max_header_size + connection.server.max_body_size
        while received <= limit:
            try:
                data = await connection.stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.gone = True
                return {"type": "http.disconnect"}
            connection.h11.receive_data(data)  # a pipelined next request: kept
            received += len(data)
        await trio.sleep_forever()  # more than a request's worth: stop reading
        raise AssertionError("unreachable")

    async def send(self, message: Message) -> None:
        connection = self.connection
        try:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if SSE in headers:  # a session's stream: out of the connection slots
                    connection.server.slots.release(connection)
                    connection.close_after = True
                status = int(message["status"])
                headers += connection._response_headers(None, None)
                await connection._write(
                    h11.Response(status_code=status, headers=headers, reason=reason_phrase(status))
                )
            elif message["type"] == "http.response.body":
                events: list[Any] = []
                if message.get("body"):
                    events.append(h11.Data(data=bytes(message["body"])))
                if not message.get("more_body", False):
                    events.append(h11.EndOfMessage())
                await connection._write(*events)
        except ConnectionError:  # (the connection's _PeerGone): the endpoint's writer stops
            self.gone = True
            raise


async def serve_session(
    connection: HttpConnection, call: Callable[[Receive, Send], Awaitable[None]]
) -> bool:
    """``await call(receive, send)`` (a ``SessionEndpoint`` method) on ``connection``;
    whether the client went away meanwhile (the connection then ends)."""
    exchange = _H11Exchange(connection)
    try:
        await call(exchange.receive, exchange.send)
    except ConnectionError:  # a whole response the client did not take
        return True
    return exchange.gone
