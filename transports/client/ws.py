"""The WebSocket client (the SEP-1288 draft): one conversation on one socket, wsproto on anyio.

The model: like stdio, one long conversation.  :class:`WsLink` opens a TCP
connection to ``ws://HOST:PORT/PATH``, upgrades it offering the subprotocol
``mcp`` (and refuses a server that does not select it), then carries the
client's ``Connection(framing="messages")``: every message it hands over goes
out as one text message, in order, through one writer task (a bounded queue,
so the client's pump never blocks); every text message that comes in (its
fragments joined and bounded by the core's ``MessageAssembler``) is one
message for the connection.  Cancellation goes on the wire as
``notifications/cancelled`` (``cancellation="notify"``), as on stdio.

Failures are :class:`~mrtr_transports.client.errors.TransportError`: no
connection (``kind="connect"``, or ``"timeout"`` past ``connect_timeout``),
an upgrade refused (``"http"``, with the HTTP ``status`` and the server's
JSON-RPC message when its body has one), and a conversation that ends
(``"disconnect"``, naming the close code and reason the server sent, e.g.
``1001 (going away)``).  A binary message or a message past
``max_message_size`` from the server closes the socket (1003, 1009) and fails
every call in flight; a frame whose header announces more than that is closed
with 1009 at once, before its payload (``FrameLengths``).

The server pings (keep-alive); the client answers every ping and sends none
of its own.  Shutdown (``aclose``): what is queued is sent, then our close
(1000); the server's answer is awaited for at most ``close_timeout``.

With ``auth`` (an ``OAuthProvider``) the upgrade request carries its token; a
401 (or 403 ``insufficient_scope``) to the upgrade runs the provider's flow and
the upgrade goes again on a new connection (``oauth.authorized``: the rule
HTTP's POSTs follow, bounded the same way).

Out of scope: ``wss://`` (TLS).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, Unpack
from urllib.parse import urlsplit

import anyio
from anyio.abc import ByteStream, TaskGroup
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import RemoteProtocolError as WsHandshakeError

import mrtr_core as m
from mrtr_core.auth._client import resource_endpoint
from mrtr_core.websocket import (
    SUBPROTOCOL,
    Fault,
    MessageAssembler,
    WebSocketViolation,
    check_subprotocol,
    close_reason,
)
from mrtr_core.websocket._binding import describe_close

from .._ws_frames import FrameLengths
from .client import Client
from .errors import TransportError
from .http_connection import error_body_text
from .link import ClientOptions, LinkClient, Outbound
from .oauth.authorized import Challenged, send_authorized
from .oauth.provider import OAuthProvider
from .opening import open_client
from .person_time import PersonTime
from .tcp import STREAM_FAILURES, connect, connect_failure

__all__ = ["WsLink", "open_ws_client"]

READ_SIZE = 65536
#: Bytes of the server's refusal body kept for the error message.
MAX_REFUSAL_BODY = 16 * 1024


class WsLink:
    """A WebSocket to an MCP server as the client's link (see the module docstring)."""

    framing: Literal["lines", "messages"] = "messages"
    needs_messages = False
    wants_tool_list = False
    confirms_transmission = False  # one ordered queue to the socket: handed over is sent
    cancellation: Literal["notify", "close_stream"] = "notify"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        connect_timeout: float = 10.0,
        close_timeout: float = 2.0,
        max_message_size: int = m._connection._options.DEFAULT_MAX_MESSAGE_SIZE,
        max_queued: int = 4096,
        auth: OAuthProvider | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme == "wss":
            raise ValueError(f"{url!r}: wss:// (TLS) is not supported; use ws:// behind a proxy")
        if parts.scheme != "ws" or not parts.hostname:
            raise ValueError(f"{url!r}: expected ws://HOST[:PORT]/PATH")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or 80
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.authority = shown if parts.port is None else f"{shown}:{parts.port}"
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        pairs = headers.items() if isinstance(headers, Mapping) else (headers or ())
        #: The caller's headers (the cache's default principal is derived from them).
        self.extra_headers = tuple((str(name), str(value)) for name, value in pairs)
        self.headers = [
            (name.encode("latin-1"), value.encode("latin-1")) for name, value in self.extra_headers
        ]
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        #: The OAuth client that gives the upgrade its token and answers a 401/403 to it.
        self.auth = auth
        self.assembler = MessageAssembler(max_message_size=max_message_size)
        self.frames = FrameLengths(max_message_size)
        self._frames_behind_upgrade = b""  # what came after the 101: the first frames
        self.ws = WSConnection(ConnectionType.CLIENT)
        #: The server's close frame, (code, reason), once it came.
        self.close_received: tuple[int, str | None] | None = None
        self._stream: ByteStream | None = None
        self._send_lock = anyio.Lock()
        self._outgoing, self._queued = anyio.create_memory_object_stream[bytes](max_queued)
        self._max_queued = max_queued
        self._client: LinkClient | None = None
        self._closed = anyio.Event()
        self._lost = False
        self._conversing = False  # the upgrade succeeded: the reader and writer run

    # --- opening ---

    async def start(self, client: LinkClient, task_group: TaskGroup) -> None:
        self._client = client
        if self.auth is None:
            self._stream = await self._open()
        else:
            try:
                self._stream = await send_authorized(
                    self.auth, self._open, method="GET", url=resource_endpoint(self.url)
                )
            except Challenged as refused:  # (no new token would help)
                raise self._refused(refused.status, refused.body) from None
        self._conversing = True
        task_group.start_soon(self._write)
        task_group.start_soon(self._read)

    async def _open(self, authorization: Sequence[tuple[str, str]] = ()) -> ByteStream:
        """A TCP connection upgraded to the WebSocket, the request carrying the
        ``authorization`` headers (within ``connect_timeout``; each try of an OAuth
        flow gets its own, the flow itself, a person's browser included, none)."""
        self.ws = WSConnection(ConnectionType.CLIENT)  # (a refused try used the last one)
        headers = list(self.headers)
        for name, value in authorization:
            headers.append((name.encode("latin-1"), value.encode("latin-1")))
        stream: ByteStream | None = None
        with anyio.move_on_after(self.connect_timeout) as connecting:
            try:
                stream = await connect(self.host, self.port)
            except OSError as exc:
                raise TransportError(
                    f"could not connect to {self.url}: {connect_failure(exc)}", kind="connect"
                ) from exc
            try:
                await self._upgrade(stream, headers)
            except BaseException:
                await anyio.aclose_forcefully(stream)
                raise
        if connecting.cancelled_caught or stream is None:
            if stream is not None:
                await anyio.aclose_forcefully(stream)
            raise TransportError(
                f"no WebSocket to {self.url} within {self.connect_timeout:g} s", kind="timeout"
            )
        return stream

    async def _upgrade(self, stream: ByteStream, headers: list[tuple[bytes, bytes]]) -> None:
        request = Request(
            host=self.authority,
            target=self.target,
            subprotocols=[SUBPROTOCOL],
            extra_headers=headers,
        )
        status: int | None = None
        head: list[tuple[bytes, bytes]] = []
        body = b""
        try:
            await stream.send(self.ws.send(request))
        except STREAM_FAILURES as exc:
            raise self._broke_in_upgrade(exc) from exc
        received = b""
        while True:
            try:
                data = await stream.receive(READ_SIZE)
            except anyio.EndOfStream:
                data = b""
            except STREAM_FAILURES as exc:
                raise self._broke_in_upgrade(exc) from exc
            if b"\r\n\r\n" not in received:  # (the head, and what came in its last read)
                received += data
            try:
                self.ws.receive_data(data or None)
                events = list(self.ws.events())
            except WsHandshakeError as exc:
                raise TransportError(
                    f"{self.url}: not a WebSocket upgrade answer: {exc}", kind="http"
                ) from exc
            for event in events:
                if isinstance(event, AcceptConnection):
                    try:
                        check_subprotocol(event.subprotocol)
                    except m.RemoteProtocolError as exc:
                        raise TransportError(f"{self.url}: {exc.message}", kind="http") from exc
                    # The 101 has no body: what follows its head are the first frames.
                    self._frames_behind_upgrade = received.partition(b"\r\n\r\n")[2]
                    return
                if isinstance(event, RejectConnection):
                    status = event.status_code
                    head = list(event.headers)
                    if not event.has_body:
                        raise self._rejected(status, head, body)
                elif isinstance(event, RejectData):
                    if len(body) < MAX_REFUSAL_BODY:
                        body += event.data[: MAX_REFUSAL_BODY - len(body)]
                    if event.body_finished:
                        raise self._rejected(status, head, body)
            if not data:
                raise TransportError(
                    f"{self.url}: the server closed the connection during the upgrade",
                    kind="disconnect",
                )

    @property
    def person_time(self) -> PersonTime | None:
        """The OAuth provider's person at work, whose time the client's timers do not
        count (``None``: no provider)."""
        return None if self.auth is None else self.auth.person_time

    def _rejected(
        self, status: int | None, head: list[tuple[bytes, bytes]], body: bytes
    ) -> Exception:
        """A refused upgrade: for the OAuth provider to answer when it is a 401/403 and
        there is one (``Challenged``), else the refusal (``_refused``)."""
        if self.auth is not None and status in (401, 403):
            return Challenged.from_response(status, head, body)
        return self._refused(status, body)

    def _broke_in_upgrade(self, exc: Exception) -> TransportError:
        return TransportError(
            f"{self.url}: the connection broke during the upgrade: {exc}", kind="disconnect"
        )

    def _refused(self, status: int | None, body: bytes) -> TransportError:
        """An upgrade refusal, with the JSON-RPC message of its body when it has one."""
        message = f"{self.url}: the server refused the WebSocket (HTTP {status})"
        try:
            error = json.loads(body)["error"]
            message += f": {error_body_text(str(error['message']).encode())}"
        except (ValueError, KeyError, TypeError):
            text = error_body_text(body)  # (a proxy's page, say: its text, made safe)
            message += f": {text}" if text else ""
        return TransportError(message, kind="http", status=status)

    # --- the conversation ---

    def transmit(self, out: Outbound) -> None:
        try:
            self._outgoing.send_nowait(out.data)
        except anyio.WouldBlock:
            self._lose(
                f"the server is not reading its WebSocket ({self._max_queued} messages waiting)"
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # shutting down

    def close_stream(self, request_id: m.RequestId) -> None:
        """Nothing to close on a shared socket: the cancellation went out as a message."""

    def tools_listed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return tools  # no headers: x-mcp-header annotations may be ignored

    async def _send(self, event: Event) -> None:
        assert self._stream is not None
        async with self._send_lock:
            if self.ws.state is not ConnectionState.OPEN and not isinstance(event, CloseConnection):
                raise anyio.BrokenResourceError("the WebSocket is closing")
            await self._stream.send(self.ws.send(event))

    async def _write(self) -> None:
        try:
            async with self._queued:
                async for data in self._queued:
                    await self._send(TextMessage(data=data.decode("utf-8")))
            # aclose(): everything queued is out; now our close.
            if self.ws.state is ConnectionState.OPEN:
                await self._send(CloseConnection(code=1000))
        except STREAM_FAILURES:
            pass  # the reader reports how the conversation ended

    async def _read(self) -> None:
        assert self._stream is not None and self._client is not None
        stream = self._stream
        try:
            announced = self.frames.feed(self._frames_behind_upgrade)
            while self.ws.state is not ConnectionState.CLOSED and announced is None:
                try:
                    data = await stream.receive(READ_SIZE)
                except (anyio.EndOfStream, *STREAM_FAILURES):
                    data = b""
                announced = self.frames.feed(data)
                if announced is not None:
                    break  # (its payload is not read: the reader stops here)
                self.ws.receive_data(data or None)
                for event in self.ws.events():
                    await self._on_event(event)
            if announced is not None:
                limit = self.frames.limit
                why = f"a frame of {announced} bytes, over {limit}: max_message_size"
                await self._close(Fault.MESSAGE_TOO_BIG, why)
                self._lose(f"{self.url}: {why} (closed with 1009)")
                return
        finally:
            self._closed.set()
        ended = self.close_received
        why = (
            "the connection ended without a close frame"
            if ended is None or ended[0] == 1006
            else f"the server closed the WebSocket: {describe_close(*ended)}"
        )
        self._lose(why)

    async def _on_event(self, event: Event) -> None:
        assert self._client is not None
        try:
            if isinstance(event, TextMessage):
                message = self.assembler.receive_text(
                    event.data, message_finished=event.message_finished
                )
                if message:
                    self._client.receive_data(message)
                return
            if isinstance(event, BytesMessage):
                self.assembler.receive_binary()
        except WebSocketViolation as exc:
            await self._close(exc.fault, exc.message)
            self._lose(f"{self.url}: {exc.message} (closed with {int(exc.close_code)})")
            return
        if isinstance(event, Ping):
            with contextlib.suppress(*STREAM_FAILURES):
                await self._send(event.response())
        elif isinstance(event, CloseConnection):
            if self.ws.state is ConnectionState.OPEN:  # wsproto found broken frames
                fault = Fault.INVALID_UTF8 if event.code == 1007 else Fault.BROKEN_FRAMING
                await self._close(fault, event.reason or "")
                self._lose(f"{self.url}: {describe_close(event.code, event.reason)}")
                return
            self.close_received = (event.code, event.reason)
            if self.ws.state is ConnectionState.REMOTE_CLOSING:
                with contextlib.suppress(*STREAM_FAILURES):
                    await self._send(event.response())

    async def _close(self, fault: Fault, reason: str) -> None:
        if self.ws.state is ConnectionState.OPEN:
            code = m.websocket.CLOSE_CODES[fault]
            with contextlib.suppress(*STREAM_FAILURES):
                await self._send(CloseConnection(code=code, reason=close_reason(reason)))

    def _lose(self, message: str) -> None:
        if not self._lost and self._client is not None:
            self._lost = True
            self._client.link_lost(TransportError(message, kind="disconnect"))

    # --- shutdown ---

    async def aclose(self) -> None:
        self._outgoing.close()  # the writer sends what is queued, then our close
        stream = self._stream
        if stream is None or not self._conversing:
            return  # (a failed start closed its stream)
        with anyio.move_on_after(self.close_timeout):
            await self._closed.wait()  # the server's answer to our close (or its end)
        await anyio.aclose_forcefully(stream)


@asynccontextmanager
async def open_ws_client(
    url: str,
    *,
    headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
    connect_timeout: float = 10.0,
    close_timeout: float = 2.0,
    auth: OAuthProvider | None = None,
    **client_options: Unpack[ClientOptions],
) -> AsyncIterator[Client]:
    """A :class:`~mrtr_transports.client.client.Client` over a WebSocket to ``url``
    (``ws://HOST:PORT/PATH``), its era settled on entry.  ``headers`` go on the
    upgrade request (``Origin``, ``Authorization``); ``client.link`` is the
    :class:`WsLink`.  ``auth``: an :class:`~mrtr_transports.client.oauth.OAuthProvider`
    for the endpoint (its ``ws://`` URL; protected as its ``http://`` one): its token on
    the upgrade request; a 401 (or 403 ``insufficient_scope``) to the upgrade runs its
    flow, then the upgrade goes again on a new connection.  Other options go to the
    ``Client`` (:class:`~mrtr_transports.client.client.ClientOptions`: ``answer``,
    ``era``, ...)."""
    link = WsLink(
        url,
        headers=headers,
        connect_timeout=connect_timeout,
        close_timeout=close_timeout,
        auth=auth,
        max_message_size=client_options.get(
            "max_message_size", m._connection._options.DEFAULT_MAX_MESSAGE_SIZE
        ),
    )
    async with open_client(link, **client_options) as client:
        yield client
