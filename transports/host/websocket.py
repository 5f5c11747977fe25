"""A WebSocket on one of the host's connections: the ASGI ``websocket`` scope, frames by wsproto.

An HTTP/1.1 ``GET`` with ``Upgrade: websocket`` (its head read within the same
deadlines and bounds as any request, ``connection.py``) is handed to the app as
a ``websocket`` scope.  The app's first ``receive()`` is ``websocket.connect``;
it answers ``websocket.accept`` (the host writes the 101, with the subprotocol
the app chose, and no extensions: a compressed frame could expand past any
bound) or ``websocket.close`` before accepting (a 403, whose body is a JSON-RPC
error as every refusal of the host), or a denial response of its own
(``websocket.http.response.*``: the scope lists the extension).  A handshake
without ``Sec-WebSocket-Key`` or with a version other than 13 gets 400 (426)
from the host.

Once accepted, one task reads the socket for the WebSocket's life: messages
(their fragments joined) go to the app through a small queue (a client cannot
send faster than the app reads), pings get their pongs, the peer's close is
answered and is the app's ``websocket.disconnect`` (a dropped connection's code
is 1006); broken frames are closed with 1002 and invalid UTF-8 with 1007
(wsproto's verdicts), and reading stops there.  Bounds (``bounds.py``): a
message past ``max_message_size`` is refused while it grows (1009), and a frame
whose header announces more than that at once, before its payload (``FrameLengths``); every
``ping_interval`` the host pings (ASGI has no ping: keep-alive is the host's),
and a peer without a pong within ``ping_timeout`` is closed with 1011; a write
waits at most ``write_timeout``.  When the app returns, an open WebSocket is closed
(1000), and when the host's grace runs out, with 1001 (going away); the peer's
close frame is awaited at most ``CLOSE_TIMEOUT`` seconds.  ``send()`` on a
WebSocket that is closed raises ``ClientDisconnected`` (an ``OSError``).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import h11
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    TextMessage,
)
from wsproto.events import (
    Message as WsMessage,
)
from wsproto.utilities import RemoteProtocolError, generate_accept_token

from .._ws_frames import FrameLengths
from .asgi import ClientDisconnected, Message, Scope
from .refusals import STREAM_GONE, reason_phrase

if TYPE_CHECKING:
    from .connection import HostConnection

__all__ = ["CLOSE_TIMEOUT", "WebSocketCycle", "is_websocket_upgrade"]

log = logging.getLogger("mrtr.host")

#: Seconds the peer's close frame is awaited after ours.
CLOSE_TIMEOUT = 2.0
#: App messages read ahead of the app: past them, the reader waits (and so does the peer).
INBOX_SIZE = 16
#: Close codes (RFC 6455, 7.4.1).
NORMAL, GOING_AWAY, TOO_BIG, INTERNAL_ERROR, ABNORMAL = 1000, 1001, 1009, 1011, 1006


def is_websocket_upgrade(request: h11.Request) -> bool:
    """A ``GET`` that asks to upgrade to a WebSocket (RFC 6455, 4.2.1)."""
    if request.method != b"GET":
        return False
    upgrade = connection = False
    for name, value in request.headers:
        if name == b"upgrade":
            upgrade = upgrade or b"websocket" in value.lower()
        elif name == b"connection":
            connection = connection or b"upgrade" in value.lower()
    return upgrade and connection


class WebSocketCycle:
    """One WebSocket, as the ASGI app sees it: its scope, ``receive`` and ``send``."""

    def __init__(self, connection: HostConnection, request: h11.Request, scope: Scope) -> None:
        self.connection = connection
        self.request = request
        self.scope = scope
        self.bounds = connection.bounds
        self.ws: Connection | None = None  # once accepted
        self.connect_sent = False
        self.accepted = False
        self.responded = False  # a 101, a 403 or a denial response went out
        self.closed = False  # our close frame went out (or the socket is gone)
        self._headers = {name: value for name, value in request.headers}
        send: MemoryObjectSendStream[Message]
        inbox: MemoryObjectReceiveStream[Message]
        send, inbox = anyio.create_memory_object_stream[Message](INBOX_SIZE)
        self._to_app, self._inbox = send, inbox
        self._tasks: anyio.abc.TaskGroup | None = None
        self._pong = anyio.Event()
        self._peer_closed = anyio.Event()
        self._disconnect_delivered = False
        self._trailing = b""  # what came behind the upgrade request: the first frames

    # --- The cycle ---

    async def run(self) -> None:
        connection = self.connection
        key = self._headers.get(b"sec-websocket-key")
        if self._headers.get(b"sec-websocket-version") != b"13":
            await connection.send_error(
                426, "a WebSocket of version 13 only", extra=[(b"sec-websocket-version", b"13")]
            )
            return
        if not key:
            await connection.send_error(400, "a WebSocket handshake needs Sec-WebSocket-Key")
            return
        offered = self._headers.get(b"sec-websocket-protocol", b"").decode("latin-1")
        self.scope["subprotocols"] = [p.strip() for p in offered.split(",") if p.strip()]
        self.scope["extensions"] = {"websocket.http.response": {}}  # denial responses
        try:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                code = NORMAL
                try:
                    await connection.host.app(self.scope, self.receive, self.send)
                except Exception:
                    code = INTERNAL_ERROR
                    if not self.closed:
                        log.exception("the ASGI app failed on a WebSocket")
                if not self.responded:
                    if code == NORMAL:
                        log.error("the ASGI app returned without accepting the WebSocket")
                    with contextlib.suppress(ClientDisconnected, h11.LocalProtocolError):
                        await connection.send_error(500 if code != NORMAL else 403, "not accepted")
                await self._close(code)
                if self.accepted:  # the peer's close frame, briefly (the reader takes it)
                    with anyio.move_on_after(CLOSE_TIMEOUT):
                        await self._peer_closed.wait()
                tasks.cancel_scope.cancel()
        finally:
            if self.accepted and not self.closed:  # cancelled: the host is going away
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT):
                    await self._close(GOING_AWAY, "the server is shutting down")

    # --- receive ---

    async def receive(self) -> Message:
        if not self.connect_sent:
            self.connect_sent = True
            return {"type": "websocket.connect"}
        if not self.accepted:
            raise RuntimeError("receive() before websocket.accept")
        try:
            return await self._inbox.receive()
        except anyio.EndOfStream:
            return {"type": "websocket.disconnect", "code": ABNORMAL}

    async def _deliver(self, message: Message) -> None:
        """A message for the app; after its disconnect, nothing more."""
        if not self._disconnect_delivered:
            self._disconnect_delivered = message["type"] == "websocket.disconnect"
            await self._to_app.send(message)

    async def _read(self) -> None:
        """The WebSocket's reader, for its life: frames in, pings and closes answered;
        after our close, it reads on until the peer's close (or the end)."""
        assert self.ws is not None
        ws = self.ws
        parts: list[Any] = []
        size = 0
        # Frames that came right behind the upgrade request (wsproto holds them) are
        # read before the socket is waited on: a client may send its first message so.
        data: bytes | None = b""
        behind_the_upgrade = True
        lengths = FrameLengths(self.bounds.max_message_size)
        async with self._to_app:
            while not self._peer_closed.is_set():
                if behind_the_upgrade:
                    behind_the_upgrade = False
                    announced = lengths.feed(self._trailing)
                else:
                    try:
                        data = await self.connection.stream.receive(65536)
                    except (anyio.EndOfStream, *STREAM_GONE):
                        data = None
                    announced = lengths.feed(data) if data and not self.closed else None
                if announced is not None:
                    # Refused from its header, not as its bytes arrive; its payload is all
                    # the peer would send before a close of its own: not waited for.
                    limit = self.bounds.max_message_size
                    why = f"a frame of {announced} bytes, over {limit}: max_message_size"
                    await self._close(TOO_BIG, why[:120])
                    self._peer_closed.set()
                    await self._deliver({"type": "websocket.disconnect", "code": TOO_BIG})
                    break
                try:
                    ws.receive_data(data)
                    events = list(ws.events())
                except RemoteProtocolError as exc:  # broken frames, invalid UTF-8: its verdict
                    code = int(getattr(exc.event_hint, "code", None) or 1002)
                    await self._close(code, str(exc)[:120])
                    await self._deliver({"type": "websocket.disconnect", "code": code})
                    continue
                for event in events:
                    if isinstance(event, WsMessage) and not self.closed:
                        size += len(event.data)
                        if size > self.bounds.max_message_size:  # refused while it grows
                            limit = self.bounds.max_message_size
                            why = f"a message of more than {limit} bytes: max_message_size"
                            await self._close(TOO_BIG, why)
                            await self._deliver({"type": "websocket.disconnect", "code": TOO_BIG})
                            continue
                        parts.append(event.data)
                        if event.message_finished:
                            await self._deliver(_app_message(event, parts))
                            parts, size = [], 0
                    elif isinstance(event, Ping):
                        with contextlib.suppress(ClientDisconnected):
                            await self._write_frame(event.response())
                    elif isinstance(event, Pong):
                        self._pong.set()
                    elif isinstance(event, CloseConnection) and ws.state is ConnectionState.OPEN:
                        # Not the peer's close: wsproto's verdict on broken frames (1002) or
                        # invalid UTF-8 (1007).  Ours says so; nothing after it is readable.
                        await self._close(event.code, (event.reason or "")[:120])
                        self._peer_closed.set()
                        await self._deliver({"type": "websocket.disconnect", "code": event.code})
                        break
                    elif isinstance(event, CloseConnection):
                        if ws.state is ConnectionState.REMOTE_CLOSING:  # theirs first: answer
                            with contextlib.suppress(ClientDisconnected):
                                await self._write_frame(event.response())
                        self.closed = True
                        self._peer_closed.set()
                        disconnect = {"type": "websocket.disconnect", "code": event.code}
                        await self._deliver({**disconnect, "reason": event.reason or ""})
                if data is None:
                    self.closed = True
                    self._peer_closed.set()
                    await self._deliver({"type": "websocket.disconnect", "code": ABNORMAL})

    async def _ping(self) -> None:
        """Every ``ping_interval``: a ping, and a close (1011) without a pong in time."""
        with contextlib.suppress(ClientDisconnected):
            while not self.closed:
                await anyio.sleep(self.bounds.ping_interval)
                self._pong = anyio.Event()
                await self._write_frame(Ping(payload=b"mrtr"))
                with anyio.move_on_after(self.bounds.ping_timeout):
                    await self._pong.wait()
                if not self._pong.is_set() and not self.closed:
                    timeout = self.bounds.ping_timeout
                    await self._close(INTERNAL_ERROR, f"no pong within {timeout:g} s")
                    await self._deliver({"type": "websocket.disconnect", "code": INTERNAL_ERROR})
                    self._peer_closed.set()  # not waited for: the peer is not answering
                    return

    # --- send ---

    async def send(self, message: Message) -> None:
        kind = message["type"]
        connection = self.connection
        if kind == "websocket.accept":
            if self.responded:
                raise RuntimeError("websocket.accept after a response")
            await self._accept(message)
        elif kind == "websocket.send":
            if not self.accepted:
                raise RuntimeError("websocket.send before websocket.accept")
            if self.closed:
                raise ClientDisconnected("the WebSocket is closed")
            if message.get("bytes") is not None:
                await self._write_frame(BytesMessage(data=bytes(message["bytes"])))
            else:
                await self._write_frame(TextMessage(data=str(message.get("text") or "")))
        elif kind == "websocket.close":
            if not self.responded:  # a refusal before the handshake: 403
                self.responded = self.closed = True
                await connection.send_error(403, "the WebSocket was refused")
                return
            if self.closed:
                raise ClientDisconnected("the WebSocket is closed")
            await self._close(int(message.get("code") or NORMAL), str(message.get("reason") or ""))
        elif kind == "websocket.http.response.start":
            if self.responded:
                raise RuntimeError(f"{kind} after a response")
            self.responded = self.closed = True
            status = int(message["status"])
            headers = list(message.get("headers", ()))
            head = h11.Response(status_code=status, headers=headers, reason=reason_phrase(status))
            await connection.write(connection.h11.send(head) or b"")
        elif kind == "websocket.http.response.body":
            data = b""
            if message.get("body"):
                data += connection.h11.send(h11.Data(data=bytes(message["body"]))) or b""
            if not message.get("more_body", False):
                data += connection.h11.send(h11.EndOfMessage()) or b""
            await connection.write(data)
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} in a websocket scope")

    async def _accept(self, message: Message) -> None:
        connection = self.connection
        key = self._headers[b"sec-websocket-key"]
        headers = [
            (b"upgrade", b"websocket"),
            (b"connection", b"Upgrade"),
            (b"sec-websocket-accept", generate_accept_token(key)),
        ]
        if message.get("subprotocol"):
            headers.append((b"sec-websocket-protocol", str(message["subprotocol"]).encode()))
        headers += [(bytes(name), bytes(value)) for name, value in message.get("headers", ())]
        switch = h11.InformationalResponse(
            status_code=101, headers=headers, reason=b"Switching Protocols"
        )
        await connection.write(connection.h11.send(switch) or b"")
        self.responded = self.accepted = True
        trailing, _ = connection.h11.trailing_data
        self._trailing = bytes(trailing)
        self.ws = Connection(ConnectionType.SERVER, trailing_data=self._trailing)
        assert self._tasks is not None
        self._tasks.start_soon(self._read)
        self._tasks.start_soon(self._ping)

    async def _write_frame(self, event: Any) -> None:
        assert self.ws is not None
        try:
            data = self.ws.send(event)
        except Exception as exc:  # wsproto's LocalProtocolError: the WebSocket is closing
            raise ClientDisconnected("the WebSocket is closed") from exc
        try:
            await self.connection.write(data)
        except ClientDisconnected:
            self.closed = True
            raise

    async def _close(self, code: int, reason: str = "") -> None:
        """Our close frame, once (the reader then waits for the peer's)."""
        if self.closed or self.ws is None or self.ws.state is not ConnectionState.OPEN:
            self.closed = True
            return
        self.closed = True
        with contextlib.suppress(ClientDisconnected):
            await self.connection.write(self.ws.send(CloseConnection(code=code, reason=reason)))


def _app_message(event: WsMessage[Any], parts: list[Any]) -> Message:
    if isinstance(event, TextMessage):
        return {"type": "websocket.receive", "text": "".join(parts)}
    return {"type": "websocket.receive", "bytes": b"".join(parts)}
