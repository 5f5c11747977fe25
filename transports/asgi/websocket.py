"""MCP over an ASGI ``websocket`` scope (the SEP-1288 draft): the endpoint's WebSocket side.

The model.  A WebSocket is one long conversation, like stdio: each accepted
WebSocket gets one ``mrtr_core.Connection(framing="messages")``, driven by the
stdio server's driver (``server/driver.py``'s ``_StreamDriver``): one task per
request, ``notifications/cancelled`` cancels that request's handler (nothing is
sent for it), a 2025-era client that starts with ``initialize`` is served
through the legacy shim (its questions go out as requests on the same socket),
the outbox is bounded.  This module only moves ASGI messages between that
driver and the server; the rules of MCP over WebSocket (the ``mcp``
subprotocol, the message-size rule, close codes) are the core's
(``mrtr_core.websocket``).

For each ``websocket`` scope, in order (the HTTP side's order and statuses):

1. ``Host`` (one: 400) and ``Origin`` against the allow-lists (403: ``policy.py``);
   the path (404); a server shutting down (503 with ``Retry-After``); the
   subprotocol ``mcp`` must be offered (400); a client that holds
   ``max_websockets_per_client`` WebSockets gets 429, and when the endpoint holds
   ``max_websockets`` every newcomer gets 503 (``ClientShares``: a client is its
   address, behind ``trusted_proxies`` the one they report).  Each refusal is an HTTP response
   whose body is a JSON-RPC error without id, sent with the ASGI WebSocket
   denial-response extension (``websocket.http.response``; uvicorn, hypercorn
   and our host have it); a server without it can only say 403
   (``websocket.close`` before the accept).
2. Accept with the subprotocol ``mcp``.
3. Each text message is one JSON-RPC message: invalid JSON gets the
   connection's -32700 and the conversation goes on; a binary message closes
   with 1003, one past ``max_message_size`` with 1009.
4. The end: the peer's close ends the input (what still runs gets
   ``drain_timeout``; its answers have nowhere to go).  ``stop_reading()`` (the
   server drains) takes no more requests, lets what runs answer, then closes
   with 1001.

What the server that holds the socket owns (ASGI has no message for it): the
frames, pings and pongs (keep-alive), the close handshake, the message bound
while a message grows, the write timeout.  Our host (``host/websocket.py``)
takes them as ``HostBounds`` (``max_message_size``, ``ping_interval``,
``ping_timeout``, ``write_timeout``); under uvicorn or hypercorn set theirs
(docs/asgi.md).  ``max_message_size`` is checked here too, on whole messages,
so a foreign server with a larger bound still cannot hand the connection more.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

import mrtr_core as m
from mrtr_core.websocket import (
    CLOSE_CODES,
    Fault,
    MessageAssembler,
    WebSocketViolation,
    choose_subprotocol,
    close_reason,
)

from .._shares import CURRENT_CLIENT, ClientShares, client_key
from ..auth.identity import CURRENT_IDENTITY, Identity
from ..auth.resource import AuthFailure, ResourceAuth
from ..server.app import Outlet, ServerApp, tool_header_params
from ..server.driver import _StreamDriver
from .answer import Receive, Scope, Send
from .gate import authenticate, failure_headers
from .policy import AccessPolicy, Headers

__all__ = ["DEFAULT_MAX_WEBSOCKETS", "DEFAULT_MAX_WEBSOCKETS_PER_CLIENT", "WebSocketSide"]

log = logging.getLogger("mrtr.server.ws")

#: WebSockets open at once, and one client's share of them.
DEFAULT_MAX_WEBSOCKETS = 256
DEFAULT_MAX_WEBSOCKETS_PER_CLIENT = 16

#: The ASGI extension that lets an app refuse a handshake with a response of its own.
DENIAL_EXTENSION = "websocket.http.response"


class WebSocketSide:
    """The endpoint's WebSocket side: its handshake rules and one conversation per WebSocket."""

    def __init__(
        self,
        app: ServerApp,
        *,
        path: str | None,
        policy: AccessPolicy,
        max_message_size: int,
        legacy_answer_timeout: float | None,
        drain_timeout: float,
        connection_options: Mapping[str, Any],
        max_websockets: int = DEFAULT_MAX_WEBSOCKETS,
        max_websockets_per_client: int = DEFAULT_MAX_WEBSOCKETS_PER_CLIENT,
        auth: ResourceAuth | None = None,
    ) -> None:
        self.app = app
        #: The endpoint's authorization gate: the upgrade's ``Authorization`` header.
        self.auth = auth
        self.path = path
        self.policy = policy
        self.max_message_size = max_message_size
        self.legacy_answer_timeout = legacy_answer_timeout
        self.drain_timeout = drain_timeout
        self.connection_options = {**connection_options, "max_message_size": max_message_size}
        #: The conversations open now.
        self.conversations: set[Conversation] = set()
        #: Their places, and each client's share of them.
        self.shares = ClientShares(
            max_websockets,
            max_websockets_per_client,
            what="WebSockets",
            total_setting="max_websockets",
            per_client_setting="max_websockets_per_client",
        )
        self.stopping = False

    def stop_reading(self, grace: float | None = None) -> None:
        """The server drains: every conversation takes no more requests; what runs has
        ``grace`` seconds (``None``: ``drain_timeout``), then its WebSocket closes (1001)."""
        self.stopping = True
        for conversation in list(self.conversations):
            conversation.stop_reading(grace)

    async def serve(self, scope: Scope, receive: Receive, send: Send, path: str) -> None:
        """One ``websocket`` scope, whose path below the mount point is ``path``."""
        if (await receive())["type"] != "websocket.connect":
            return  # (the client left before its handshake reached us)
        headers = Headers(scope.get("headers", ()))
        client = scope.get("client")
        peer = str(client[0]) if client else None
        denial = (scope.get("extensions") or {}).get(DENIAL_EXTENSION) is not None

        async def refuse(
            status: int,
            message: str,
            retry_after: int | None = None,
            extra: list[tuple[bytes, bytes]] | None = None,
        ) -> None:
            await _refuse(send, denial, status, message, retry_after, extra)

        if len(headers.get_all("host")) > 1:
            await refuse(400, "multiple Host headers: a request names one host")
            return
        refusal = self.policy.refusal(headers, peer)
        if refusal is not None:
            log.warning("refused a WebSocket from %s: %s", peer, refusal)
            await refuse(403, refusal)
            return
        if self.path is not None and path != self.path:
            await refuse(404, f"no WebSocket endpoint at {path!r}: it is at the path {self.path!r}")
            return
        if self.stopping:
            await refuse(503, "the server is shutting down: retry", retry_after=1)
            return
        offered = [str(name) for name in scope.get("subprotocols", ())]
        subprotocol = choose_subprotocol(offered)
        if subprotocol is None:
            await refuse(
                400,
                f"the WebSocket must offer the subprotocol 'mcp' "
                f"(Sec-WebSocket-Protocol: mcp); offered: {', '.join(offered) or 'none'}",
            )
            return
        identity: Identity | None = None
        if self.auth is not None:
            try:
                identity = await authenticate(self.auth, scope, headers)
            except AuthFailure as failure:
                await refuse(failure.status, failure.message, extra=failure_headers(failure))
                return
        principal = identity.principal if identity is not None else None
        client = client_key(principal, self.policy.client_of(headers, peer))
        refused = self.shares.admit(client)
        if refused is not None:
            log.warning("refused a WebSocket from %s: %s", client, refused.message)
            await refuse(refused.status, refused.message, retry_after=1)
            return
        try:
            await self._converse(client, peer, subprotocol, receive, send, identity)
        finally:
            self.shares.release(client)

    async def _converse(
        self,
        client: str,
        peer: str | None,
        subprotocol: str,
        receive: Receive,
        send: Send,
        identity: Identity | None = None,
    ) -> None:
        try:
            await send({"type": "websocket.accept", "subprotocol": subprotocol})
        except OSError:  # the server's ClientDisconnected: gone before the 101
            return
        # The conversation's tasks (started below) inherit it: whose share their
        # handlers fill in the app's stores.
        CURRENT_CLIENT.set(client)
        CURRENT_IDENTITY.set(identity)  # (the whole conversation is the upgrade's caller)
        conversation = Conversation(self, peer, receive, send)
        self.conversations.add(conversation)
        try:
            async with anyio.create_task_group() as watch:
                if identity is not None and identity.expires_at is not None:
                    watch.start_soon(_end_when_expired, conversation, identity.expires_at)
                await conversation.run()
                watch.cancel_scope.cancel()
        finally:
            self.conversations.discard(conversation)


async def _end_when_expired(conversation: Conversation, expires_at: float) -> None:
    """A conversation lasts no longer than the token of its upgrade: then it takes no
    more requests, what runs gets the drain, and it closes 1008 (the client reconnects
    with a fresh token)."""
    await anyio.sleep(max(0.0, expires_at - time.time()))
    conversation.ending = (Fault.POLICY, "the token expired: connect again with a fresh one")
    conversation.stop_reading(None)


async def _refuse(
    send: Send,
    denial: bool,
    status: int,
    message: str,
    retry_after: int | None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Refuse the handshake: ``status`` with a JSON-RPC error body and ``Connection: close``
    (an upgrade refused is no HTTP connection to keep); without the denial extension the
    server can only say 403."""
    if not denial:
        await send({"type": "websocket.close", "code": 1008, "reason": close_reason(message)})
        return
    code = m.ErrorCode.SERVER_BUSY if retry_after is not None else m.ErrorCode.INVALID_REQUEST
    body = m.http._post.error_body(message, code)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    headers += extra or []
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


class Conversation:
    """One accepted WebSocket: its messages to the driver, the driver's to it, its close."""

    def __init__(self, side: WebSocketSide, peer: str | None, receive: Receive, send: Send) -> None:
        self.side = side
        self.peer = peer
        self._receive = receive
        self._send = send
        self.assembler = MessageAssembler(max_message_size=side.max_message_size)
        #: The WebSocket is closed: our close went out, or the peer's came (or it broke).
        self.closed = False
        #: The server drains: the driver reads the end of input.
        self.stopping = False
        self.read_scope: anyio.CancelScope | None = None
        self.driver: _StreamDriver | None = None
        #: How it closes once its input ends on our side (``stop_reading``).
        self.ending = (Fault.SHUTDOWN, "the server is shutting down")

    async def run(self) -> None:
        side = self.side
        conn = m.Connection(m.SERVER, framing="messages", **side.connection_options)
        self.driver = driver = _StreamDriver(
            _OneConversation(side.app),
            conn,
            _TextSender(self),
            side.legacy_answer_timeout,
            side.drain_timeout,
            where=f"ws {self.peer}",
        )
        if side.stopping:  # (the drain began while it was accepted)
            self.stop_reading(None)
        await driver.serve(_MessageReceiver(self))
        await self.close(*self.ending)  # (if still open)

    def stop_reading(self, grace: float | None) -> None:
        self.stopping = True
        if self.driver is not None and grace is not None:
            self.driver.drain_timeout = grace
        if self.read_scope is not None:
            self.read_scope.cancel()

    async def next_message(self) -> bytes:
        """The next whole message from the peer; ``b""`` once its input has ended."""
        while not self.closed and not self.stopping:
            with anyio.CancelScope() as self.read_scope:
                message = await self._receive()
            self.read_scope = None
            if self.stopping:
                break
            kind = message["type"]
            if kind == "websocket.disconnect":
                self.closed = True
                break
            if kind != "websocket.receive":
                continue
            text = message.get("text")
            try:
                if text is None:
                    self.assembler.receive_binary()  # (always refused: 1003)
                    continue
                data = self.assembler.receive_text(str(text), message_finished=True)
            except WebSocketViolation as exc:
                log.warning("WebSocket from %s: %s", self.peer, exc.message)
                await self.close(exc.fault, exc.message)
                break
            if data:  # (an empty message is no message: b"" would read as the end)
                return data
        return b""

    async def send_text(self, text: str) -> None:
        """One message to the peer; ``BrokenResourceError`` once the WebSocket is closed."""
        if self.closed:
            raise anyio.BrokenResourceError("the WebSocket is closed")
        try:
            await self._send({"type": "websocket.send", "text": text})
        except OSError as exc:  # the server's ClientDisconnected: the peer is gone
            self.closed = True
            raise anyio.BrokenResourceError("the WebSocket is closed") from exc

    async def close(self, fault: Fault, reason: str) -> None:
        """Our close frame for ``fault``, unless the WebSocket is closed already."""
        if self.closed:
            return
        self.closed = True
        close = {"type": "websocket.close", "code": int(CLOSE_CODES[fault])}
        with contextlib.suppress(OSError):  # gone meanwhile: nothing to close
            await self._send({**close, "reason": close_reason(reason)})


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


class _TextSender(anyio.abc.ByteSendStream):
    """The driver's output: each ``send`` is one whole message, sent as one text message."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation

    async def send(self, item: bytes) -> None:
        # Our connection encodes UTF-8 JSON.
        await self.conversation.send_text(bytes(item).decode("utf-8"))

    async def aclose(self) -> None:
        """The server closes the WebSocket."""


class _MessageReceiver(anyio.abc.ByteReceiveStream):
    """The driver's input: each ``receive`` is one whole message (``max_bytes`` is
    ignored: the connection reads ``framing="messages"``, already bounded);
    ``EndOfStream`` at the end."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation

    async def receive(self, max_bytes: int = 65536) -> bytes:
        message = await self.conversation.next_message()
        if not message:
            raise anyio.EndOfStream
        return message

    async def aclose(self) -> None:
        """The server closes the WebSocket."""
