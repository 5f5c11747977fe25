"""One HTTP/1.1 connection of the HTTP client, and how a failed exchange on it reads.

A POST on a pooled connection can fail three ways that the link treats apart:
:class:`Broken` (the connection failed under the request), :class:`Stale` (a
kept-alive connection failed before any byte of a response: the server closed it
unread, so the request may go again elsewhere), and :class:`Refused` (HTTP 503 with
``Retry-After`` and a ``SERVER_BUSY`` JSON-RPC error: refused before it was
processed, so it may go again after the delay).  ``transports/client/http.py``
decides what to do about each.  :func:`error_body_text` is what a failure's
message quotes of an error body.
"""

from __future__ import annotations

import re
import select
from collections.abc import Sequence
from typing import Any

import anyio
import h11
from anyio.abc import ByteStream, SocketAttribute, SocketStream

import mrtr_core as m

from .errors import TransportError
from .tcp import STREAM_FAILURES

READ_SIZE = 65536
SERVER_BUSY = m.ErrorCode.SERVER_BUSY


class Broken(Exception):
    """The connection failed under a request (after it was sent, or while sending)."""


class Stale(Exception):
    """A kept-alive connection failed before any byte of a response: the server closed
    it unread, so the request may go again on another connection."""


class Refused(Exception):
    """HTTP 503 + ``Retry-After`` + ``SERVER_BUSY``: refused before it was processed."""

    def __init__(self, retry_after: int, message: str) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.message = message


class Failed(Exception):
    """The exchange failed for good: ``error`` for the caller, ``broken`` when the
    connection cannot be used again."""

    def __init__(self, error: TransportError, *, broken: bool) -> None:
        super().__init__(error.message)
        self.error = error
        self.broken = broken


class HttpConnection:
    """One HTTP/1.1 connection: an anyio byte stream and its h11 state."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.received = False  # any byte of a response on this cycle
        #: The socket's descriptor, for ``stale``'s poll (looked up once: anyio's
        #: typed-attribute lookup costs more than the poll); ``None`` for TLS.
        self._fileno: int | None = None
        if isinstance(stream, SocketStream):
            self._fileno = stream.extra(SocketAttribute.raw_socket).fileno()

    async def send(self, *events: Any) -> None:
        """Send h11 events in one write (a request's head, body and end: one segment)."""
        data = b"".join(self.h11.send(event) or b"" for event in events)
        if data:
            try:
                await self.stream.send(data)
            except STREAM_FAILURES as exc:
                raise Broken(f"sending failed: {exc}") from exc

    async def next_event(self) -> Any:
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise Broken(f"bad HTTP from the server: {exc}") from exc
            if event is h11.NEED_DATA:
                try:
                    data = await self.stream.receive(READ_SIZE)
                except anyio.EndOfStream:
                    data = b""  # (h11 reads the end as the server's close)
                except STREAM_FAILURES as exc:
                    raise Broken(f"the connection broke: {exc}") from exc
                if data:
                    self.received = True
                try:
                    self.h11.receive_data(bytes(data))
                except h11.RemoteProtocolError as exc:
                    raise Broken(f"bad HTTP from the server: {exc}") from exc
                continue
            if isinstance(event, h11.ConnectionClosed):
                raise Broken("the server closed the connection")
            return event

    def reusable(self) -> bool:
        return self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE

    def stale(self) -> bool:
        """An idle connection with something to read: the server's close (or bytes it
        had no business sending).  Either way, not one to send a request on.  (Plain
        TCP only: TLS may have session tickets to read, which are no reason to drop it.)"""
        fileno = self._fileno
        if fileno is None:
            return False
        try:
            if hasattr(select, "poll"):
                poller = select.poll()
                poller.register(fileno, select.POLLIN)
                return bool(poller.poll(0))
            readable, _, _ = select.select([fileno], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def aclose(self) -> None:
        await anyio.aclose_forcefully(self.stream)


def check_refusal(
    status: int, headers: Sequence[tuple[bytes, bytes]], content_type: str, body: bytes | None
) -> None:
    """Raise ``Refused`` if this is a refusal before processing: HTTP 503, ``Retry-After``
    in whole seconds and a JSON-RPC error of code ``SERVER_BUSY``."""
    if status != 503 or not body or not content_type.endswith("json"):
        return
    retry_after = next((v for k, v in headers if k == b"retry-after"), b"").strip()
    if not retry_after.isdigit() or len(retry_after) > 6:  # (an HTTP date: not ours)
        return
    try:
        value = m.wire._codec.default_codec.loads(body)
    except m.MrtrError:
        return
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and error.get("code") == SERVER_BUSY:
        message = error.get("message")
        raise Refused(int(retry_after), message if isinstance(message, str) else "busy")


#: How much of an error body a failure's message quotes.
MAX_ERROR_TEXT = 300
#: The reason phrases worth saying with a failure's status (a person reads the status).
REASONS = {
    400: " Bad Request",
    401: " Unauthorized",
    403: " Forbidden",
    404: " Not Found",
    405: " Method Not Allowed",
    406: " Not Acceptable",
    415: " Unsupported Media Type",
    429: " Too Many Requests",
    500: " Internal Server Error",
    501: " Not Implemented",
    502: " Bad Gateway",
    503: " Service Unavailable",
    504: " Gateway Timeout",
}
_TAG = re.compile(rb"<[^<>]{0,1000}>")
#: Terminal escape sequences (CSI: colours, clearing the screen), dropped whole.
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def error_body_text(body: bytes, limit: int = MAX_ERROR_TEXT) -> str:
    """What a person should see of an error body: its text on one line, HTML tags
    dropped, terminal escape sequences dropped, other control characters (newlines
    too) turned into spaces,
    whitespace collapsed, at most ``limit`` characters (the server chose every byte)."""
    text = _TAG.sub(b" ", body[: 16 * limit]).decode("utf-8", "replace")
    text = " ".join(_CONTROL.sub(" ", _ESCAPE.sub("", text)).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
