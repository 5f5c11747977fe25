"""Serve a ``ServerApp`` over WebSocket (the SEP-1288 draft), on anyio with wsproto.

The model.  A WebSocket is one long conversation, like stdio: the server runs
one ``mrtr_core.Connection(framing="messages")`` per WebSocket and drives it
with the stdio server's driver (``driver._StreamDriver``): one task per
request, ``notifications/cancelled`` cancels that request's handler (and
nothing is sent for it), 2025-era clients that start with ``initialize`` are
served through the legacy shim (their questions go out as real requests on
the same socket), the outbox is bounded.  This module only moves messages
between that driver and the socket; the rules of MCP over WebSocket (the
``mcp`` subprotocol, close codes, the message-size rule) are the core's
(``mrtr_core.websocket``), and the frames are wsproto's.

For each TCP connection, in order:

1. The upgrade request (``GET /mcp``) is read with h11, at most
   ``MAX_HANDSHAKE_SIZE`` bytes, within ``handshake_timeout``.  Another path
   gets 404; ``Host`` and ``Origin`` are checked exactly as on HTTP
   (``http/policy.py``'s ``AccessPolicy``: 403); a request that is not a
   WebSocket upgrade gets 400; so does one that does not offer the
   subprotocol ``mcp`` (``Sec-WebSocket-Protocol``).  Every refusal has a
   JSON-RPC error (without id) as its body, as on HTTP.
2. The server accepts with subprotocol ``mcp`` and no extensions (no
   compression: a compressed frame could expand past any bound).
3. Each text message (its fragments joined by the core's
   ``MessageAssembler``) is one JSON-RPC message for the connection.  Invalid
   JSON gets the connection's -32700 error and the conversation goes on; a
   binary message closes with 1003, a message past ``max_message_size``
   with 1009 (refused while it grows: never held whole), invalid UTF-8 with
   1007 and broken frames with 1002 (wsproto's verdicts).  Pings are
   answered with pongs.
4. Keep-alive: every ``ping_interval`` seconds the server pings; a peer that
   has not answered (with any pong) within ``ping_timeout`` is closed with
   1011 and dropped.  (Pongs are read with the requests, so a peer that
   fills every request slot without reading its answers is dropped too.)
5. End: the client's close frame ends its input; the server answers the
   close at once, so the answers still running are dropped (a WebSocket
   cannot carry them after the close) and their handlers cancelled.  When
   the server shuts down (cancellation: Ctrl-C or SIGTERM for ``mrtr serve``)
   every open WebSocket gets 1001 (going away).  A graceful stop
   (``WsServer.aclose(grace)``: ``mrtr serve`` on SIGTERM or Ctrl-C) first stops
   reading: no new request is taken, what runs gets ``grace`` seconds and its
   answers go out, newcomers get 503 with ``Connection: close``; then 1001.
   After a close the server
   waits at most ``close_timeout`` for the peer's own close frame, then
   closes the TCP connection.

Bounds: ``max_connections`` (256) WebSockets at once, a newcomer past them
gets 503 with ``Retry-After`` (as HTTP's refusal); ``max_message_size``
(4 MiB, the HTTP body bound) per message, both ways the connection's own
bound too; ``write_timeout`` (60 s) for the peer to take each write (past
it the peer is dropped).  Every other bound is the connection's and the
driver's (1024 requests in flight, 64 messages queued for the writer).

Out of scope: ``wss://`` (TLS: put a TLS-terminating proxy in front, and
list it in ``trusted_proxies``), the draft's session resumption
(``mcpSessionId``): a WebSocket that breaks loses its requests, and the
client starts a new conversation; and the draft's ``mcp.auth.<token>``
subprotocol entries (never selected, never echoed).

Run it: ``mrtr serve --ws 127.0.0.1:0`` prints
``listening on ws://127.0.0.1:PORT/mcp`` on stderr when ready.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc
import h11
from anyio.abc import SocketAttribute
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    Request,
    TextMessage,
)
from wsproto.utilities import RemoteProtocolError as WsHandshakeError

import mrtr_core as m
from mrtr_core.websocket import (
    CLOSE_CODES,
    Fault,
    MessageAssembler,
    WebSocketViolation,
    choose_subprotocol,
    close_reason,
)
from mrtr_core.websocket._binding import DEFAULT_MAX_WEBSOCKET_MESSAGE

from .app import Outlet, ServerApp, tool_header_params
from .driver import DEFAULT_DRAIN_TIMEOUT, _StreamDriver
from .http.policy import AccessPolicy, Headers
from .http.refusals import close_lingering, refuse_busy, write_refusal
from .legacy import DEFAULT_LEGACY_ANSWER_TIMEOUT

__all__ = ["WsServer", "serve_ws"]

log = logging.getLogger("mrtr.server.ws")

DEFAULT_PATH = "/mcp"
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_PING_INTERVAL = 20.0
DEFAULT_PING_TIMEOUT = 20.0
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
DEFAULT_CLOSE_TIMEOUT = 2.0
DEFAULT_WRITE_TIMEOUT = 60.0
_OPEN_STATE = frozenset({ConnectionState.OPEN})
_CLOSE_STATES = frozenset({ConnectionState.OPEN, ConnectionState.REMOTE_CLOSING})
#: Bytes of the upgrade request head (h11's bound on it).
MAX_HANDSHAKE_SIZE = 16 * 1024
READ_SIZE = 65536
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError)


class WsServer:
    """An MCP server over WebSocket (see the module docstring for the model and bounds)."""

    def __init__(
        self,
        app: ServerApp,
        *,
        path: str = DEFAULT_PATH,
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
        trusted_proxies: Iterable[str] = (),
        max_message_size: int = DEFAULT_MAX_WEBSOCKET_MESSAGE,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        ping_timeout: float = DEFAULT_PING_TIMEOUT,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        legacy_answer_timeout: float | None = DEFAULT_LEGACY_ANSWER_TIMEOUT,
        **connection_options: Any,
    ) -> None:
        for name, value in (
            ("max_message_size", max_message_size),
            ("max_connections", max_connections),
            ("ping_interval", ping_interval),
            ("ping_timeout", ping_timeout),
            ("handshake_timeout", handshake_timeout),
            ("close_timeout", close_timeout),
            ("write_timeout", write_timeout),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name} must be a number more than 0, got {value!r}")
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/', got {path!r}")
        self.app = app
        self.path = path
        self.policy = AccessPolicy(allowed_hosts, allowed_origins, trusted_proxies)
        self.max_message_size = int(max_message_size)
        self.max_connections = int(max_connections)
        self.ping_interval = float(ping_interval)
        self.ping_timeout = float(ping_timeout)
        self.handshake_timeout = float(handshake_timeout)
        self.close_timeout = float(close_timeout)
        self.write_timeout = float(write_timeout)
        self.drain_timeout = drain_timeout
        self.legacy_answer_timeout = legacy_answer_timeout
        self.connection_options = connection_options
        #: The bound ``(host, port)`` once serving.
        self.address: tuple[str, int] | None = None
        #: The conversations open now (accepted or still in their handshake).
        self.connections: set[WsConnection] = set()
        self.lingering = anyio.CapacityLimiter(self.max_connections)
        #: ``aclose`` began: newcomers are refused, the open ones drain.
        self.closing = False
        self._nursery: anyio.abc.TaskGroup | None = None
        self._all_closed = anyio.Event()

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` and serve until cancelled (then every WebSocket gets 1001)."""
        # (With port 0 anyio gives every address family the same free port.)
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
        bound = listener.listeners[0].extra(SocketAttribute.local_address)
        assert isinstance(bound, tuple)
        self.address = (str(bound[0]), int(bound[1]))
        async with listener, anyio.create_task_group() as nursery:
            self._nursery = nursery
            nursery.start_soon(listener.serve, self._serve_connection, nursery)
            task_status.started(self.address)

    async def aclose(self, grace: float) -> None:
        """Stop gracefully: refuse newcomers (503), stop reading requests, give the
        running ones ``grace`` seconds to answer, close every WebSocket (1001)."""
        self.closing = True
        for connection in list(self.connections):
            connection.stop_reading(grace)
        if self.connections:
            self._all_closed = anyio.Event()
            with anyio.move_on_after(grace + self.close_timeout):
                await self._all_closed.wait()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        if self.closing:
            await write_refusal(stream, 503, "the server is shutting down: retry", retry_after=1)
            await close_lingering(stream, self.lingering, MAX_HANDSHAKE_SIZE)
            return
        if len(self.connections) >= self.max_connections:
            log.warning("%d WebSockets open: refused a newcomer", len(self.connections))
            await refuse_busy(stream, self.lingering, MAX_HANDSHAKE_SIZE)
            return
        connection = WsConnection(self, stream)
        self.connections.add(connection)
        try:
            await connection.serve()
        except Exception:  # a bug here must not take the other connections down
            log.exception("WebSocket from %s failed", connection.peer)
        finally:
            self.connections.discard(connection)
            if not self.connections:
                self._all_closed.set()
            await anyio.aclose_forcefully(stream)


async def serve_ws(
    app: ServerApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    **options: Any,
) -> None:
    """Serve ``app`` over WebSocket on ``host:port`` until cancelled.

    ``task_status.started()`` reports the bound ``(host, port)``; ``options``
    are :class:`WsServer`'s (``path``, the allow-lists, the bounds) and
    ``mrtr_core.Connection``'s.
    """
    await WsServer(app, **options).serve(host, port, task_status=task_status)


class _OneConversation:
    """The app as one WebSocket's driver sees it.

    The driver ends the app's listen streams (``close_subscriptions``) when its
    input ends, because on stdio the app serves that one connection.  Here the
    app serves every WebSocket at once: one client leaving must not end the
    others' streams, so this view has no ``close_subscriptions`` (its own
    streams end with its handlers).
    """

    def __init__(self, app: ServerApp) -> None:
        self.app = app
        self.info = app.info
        self.capabilities = app.capabilities
        self.instructions = app.instructions

    async def handle(
        self, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
    ) -> Mapping[str, Any]:
        return await self.app.handle(request, info, outlet)

    def tool_header_params(self, name: str) -> Mapping[str, Sequence[str]] | None:
        return tool_header_params(self.app, name)


class WsConnection:
    """One WebSocket: its handshake, its conversation, its close."""

    def __init__(self, server: WsServer, stream: anyio.abc.SocketStream) -> None:
        self.server = server
        self.stream = stream
        try:
            self.peer: str | None = str(stream.extra(SocketAttribute.remote_address)[0])
        except (OSError, anyio.TypedAttributeLookupError):
            self.peer = None
        self.ws = WSConnection(ConnectionType.SERVER)
        self.assembler = MessageAssembler(max_message_size=server.max_message_size)
        self.send_lock = anyio.Lock()
        self.write_broken = False
        self.pong_seen = anyio.Event()
        self.input_ended = False
        #: The close we sent: (code, reason); None until then.
        self.sent_close: tuple[int, str] | None = None
        #: The peer's close frame: (code, reason); None until then.
        self.received_close: tuple[int, str | None] | None = None
        #: The server stops: the driver reads the end of input (``stop_reading``).
        self.stopping = False
        self.read_scope: anyio.CancelScope | None = None
        self.driver: _StreamDriver | None = None

    async def serve(self) -> None:
        try:
            accepted = False
            with anyio.move_on_after(self.server.handshake_timeout):
                accepted = await self.handshake()
            if accepted:
                await self.converse()
        finally:
            with anyio.CancelScope(shield=True) as cleanup:
                cleanup.deadline = anyio.current_time() + self.server.close_timeout
                if self.ws.state is ConnectionState.OPEN:  # we are shutting down
                    await self.close(Fault.SHUTDOWN, "the server is shutting down")
                await self.await_peer_close()

    # --- 1. The handshake ---

    async def handshake(self) -> bool:
        """Read the upgrade request and accept it (True) or refuse it (False)."""
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HANDSHAKE_SIZE)
        while True:
            try:
                event = http.next_event()
            except h11.RemoteProtocolError as exc:
                await self.refuse(exc.error_status_hint, f"a bad upgrade request: {exc}")
                return False
            if event is h11.NEED_DATA:
                try:
                    data = await self.stream.receive(READ_SIZE)
                except (anyio.EndOfStream, *_GONE):
                    return False
                http.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                break
            return False  # (the peer closed before a whole request)
        target = event.target.decode("ascii", "replace")
        if target.partition("?")[0] != self.server.path:
            await self.refuse(
                404, f"no WebSocket endpoint at {target!r}: it is at the path {self.server.path!r}"
            )
            return False
        refusal = self.server.policy.refusal(Headers(event.headers), self.peer)
        if refusal is not None:
            log.warning("refused a WebSocket from %s: %s", self.peer, refusal)
            await self.refuse(403, refusal)
            return False
        try:
            self.ws.initiate_upgrade_connection(list(event.headers), event.target)
            request = next(iter(self.ws.events()))
        except WsHandshakeError as exc:
            await self.refuse(400, f"not a WebSocket upgrade: {exc}")
            return False
        assert isinstance(request, Request)
        subprotocol = choose_subprotocol(request.subprotocols)
        if subprotocol is None:
            offered = ", ".join(request.subprotocols) or "none"
            await self.refuse(
                400,
                f"the WebSocket must offer the subprotocol 'mcp' "
                f"(Sec-WebSocket-Protocol: mcp); offered: {offered}",
            )
            return False
        try:
            await self.stream.send(self.ws.send(AcceptConnection(subprotocol=subprotocol)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        trailing, _ = http.trailing_data  # frames the client sent right behind its request
        if trailing:
            self.ws.receive_data(trailing)
        return True

    async def refuse(self, status: int, message: str) -> None:
        await write_refusal(self.stream, status, message)
        await close_lingering(self.stream, self.server.lingering, MAX_HANDSHAKE_SIZE)

    # --- 2. The conversation ---

    async def converse(self) -> None:
        server = self.server
        options: dict[str, Any] = {
            "info": server.app.info,
            "capabilities": server.app.capabilities,
            "instructions": server.app.instructions,
            "max_message_size": server.max_message_size,
            **server.connection_options,
        }
        conn = m.Connection(m.SERVER, framing="messages", **options)
        self.driver = driver = _StreamDriver(
            _OneConversation(server.app),
            conn,
            _TextSender(self),
            server.legacy_answer_timeout,
            server.drain_timeout,
            where=f"ws {self.peer}",
        )
        async with anyio.create_task_group() as nursery:
            nursery.start_soon(self.keepalive)
            await driver.serve(_MessageReceiver(self))
            nursery.cancel_scope.cancel()

    def stop_reading(self, grace: float) -> None:
        """The server stops: take no more requests; what runs has ``grace`` seconds."""
        self.stopping = True
        if self.driver is not None:
            self.driver.drain_timeout = grace
        if self.read_scope is not None:
            self.read_scope.cancel()

    async def next_message(self) -> bytes:
        """The next whole message from the peer; ``b""`` once its input has ended."""
        while not self.input_ended and not self.stopping:
            for event in self.ws.events():
                message = await self.on_event(event)
                if message:  # (an empty message is no message: b"" would read as the end)
                    return message
                if self.input_ended:
                    break
            else:
                data: bytes | None = None
                with anyio.CancelScope() as self.read_scope:
                    try:
                        data = await self.stream.receive(READ_SIZE)
                    except (anyio.EndOfStream, *_GONE):
                        data = b""
                self.read_scope = None
                if self.stopping:
                    break
                if self.ws.state is ConnectionState.CLOSED:
                    self.input_ended = True
                else:  # (wsproto reads None as a connection lost without a close frame)
                    self.ws.receive_data(data or None)
        return b""

    async def on_event(self, event: Event) -> bytes | None:
        try:
            if isinstance(event, TextMessage):
                return self.assembler.receive_text(
                    event.data, message_finished=event.message_finished
                )
            if isinstance(event, BytesMessage):
                self.assembler.receive_binary()
        except WebSocketViolation as exc:
            log.warning("WebSocket from %s: %s", self.peer, exc.message)
            await self.close(exc.fault, exc.message)
            self.input_ended = True
            return None
        if isinstance(event, Ping):
            await self.send(event.response())
        elif isinstance(event, Pong):
            self.pong_seen.set()
        elif isinstance(event, CloseConnection):
            self.input_ended = True
            if self.ws.state is ConnectionState.OPEN:
                # Not the peer's close: wsproto found broken frames (1002) or invalid
                # UTF-8 (1007) and names the code we close with.
                log.warning("WebSocket from %s: %s", self.peer, event.reason)
                fault = Fault.INVALID_UTF8 if event.code == 1007 else Fault.BROKEN_FRAMING
                await self.close(fault, event.reason or "")
            else:
                self.received_close = (event.code, event.reason)
                if self.ws.state is ConnectionState.REMOTE_CLOSING:
                    await self.send_quietly(event.response())  # the close handshake's answer
        return None

    async def keepalive(self) -> None:
        """Ping every ``ping_interval``; no pong within ``ping_timeout``: close (1011) and drop."""
        count = 0
        while True:
            await anyio.sleep(self.server.ping_interval)
            count += 1
            self.pong_seen = anyio.Event()
            with anyio.move_on_after(self.server.ping_timeout):
                try:
                    await self.send(Ping(payload=b"%d" % count))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the conversation is ending anyway
                await self.pong_seen.wait()
                continue
            timeout = self.server.ping_timeout
            log.warning("WebSocket from %s: no pong within %g s: dropped", self.peer, timeout)
            await self.close(Fault.KEEPALIVE_TIMEOUT, f"no pong within {timeout:g} s")
            self.input_ended = True
            await anyio.aclose_forcefully(self.stream)  # the reader sees the end at once
            return

    # --- 3. Writing and closing ---

    async def send(self, event: Event) -> None:
        """Write ``event``'s frames (one writer at a time, in order); a peer that does
        not take them within ``write_timeout`` is dropped.  ``BrokenResourceError``
        when the event may no longer be sent: after a close (only the close handshake's
        answer may follow the peer's close), or after a write cut short."""
        async with self.send_lock:
            allowed = _CLOSE_STATES if isinstance(event, CloseConnection) else _OPEN_STATE
            if self.write_broken or self.ws.state not in allowed:
                raise anyio.BrokenResourceError("the WebSocket is closing")
            data = self.ws.send(event)
            written = False
            try:
                with anyio.move_on_after(self.server.write_timeout):
                    await self.stream.send(data)
                    written = True
            finally:
                # A write cut short (the timeout, a cancellation) leaves half a frame on
                # the wire: nothing may follow it, not even a close frame.
                self.write_broken = not written
            if not written:
                log.warning("WebSocket from %s: a write took too long: dropped", self.peer)
                await anyio.aclose_forcefully(self.stream)
                raise anyio.BrokenResourceError("the peer does not read its WebSocket")

    async def send_quietly(self, event: Event) -> None:
        with anyio.move_on_after(self.server.close_timeout):
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await self.send(event)

    async def close(self, fault: Fault, reason: str) -> None:
        """Send our close frame for ``fault`` (at most ``close_timeout``)."""
        if self.ws.state is not ConnectionState.OPEN:
            return
        code = CLOSE_CODES[fault]
        self.sent_close = (int(code), close_reason(reason))
        await self.send_quietly(CloseConnection(code=code, reason=self.sent_close[1]))

    async def await_peer_close(self) -> None:
        """After our close: read (and drop) until the peer's close frame, or its end."""
        while self.ws.state is ConnectionState.LOCAL_CLOSING:
            try:
                data: bytes | None = await self.stream.receive(READ_SIZE)
            except anyio.EndOfStream:
                data = None
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            self.ws.receive_data(data)
            for event in self.ws.events():
                if isinstance(event, CloseConnection):
                    self.received_close = (event.code, event.reason)


class _TextSender(anyio.abc.ByteSendStream):
    """The driver's output: each ``send`` is one whole message, sent as one text message."""

    def __init__(self, connection: WsConnection) -> None:
        self.connection = connection

    async def send(self, item: bytes) -> None:
        # Our connection encodes UTF-8 JSON; after a close nothing more may go out.
        await self.connection.send(TextMessage(data=bytes(item).decode("utf-8")))

    async def aclose(self) -> None:
        """The connection closes the socket."""


class _MessageReceiver(anyio.abc.ByteReceiveStream):
    """The driver's input: each ``receive`` is one whole message (``max_bytes`` is
    ignored: the connection reads ``framing="messages"``, already bounded);
    ``EndOfStream`` at the end."""

    def __init__(self, connection: WsConnection) -> None:
        self.connection = connection

    async def receive(self, max_bytes: int = READ_SIZE) -> bytes:
        message = await self.connection.next_message()
        if not message:
            raise anyio.EndOfStream
        return message

    async def aclose(self) -> None:
        """The connection closes the socket."""
