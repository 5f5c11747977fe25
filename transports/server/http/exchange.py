"""One TCP connection of the Streamable HTTP server: its h11 requests, one after another.

For each request (HTTP/1.1 keep-alive: many POSTs on one connection), in order:

1. ``Host`` and ``Origin`` go to the server's ``AccessPolicy`` (403).
2. The path (404), the method (one dispatch: POST here; GET and DELETE with
   an ``Mcp-Session-Id`` to the server's 2025-era side, ``sessions.py``; any
   other -> 405 with ``Allow: GET, POST, DELETE``), ``Accept`` (it must take
   ``application/json`` or ``text/event-stream``, else 406), ``Content-Type``
   (JSON, else 415; more than one, 400) and the body size (413).  A POSTed
   2025-era message (``mrtr_core.http.is_legacy_message``) goes to the
   session side too, before step 3.
3. The headers that mirror the body are checked against it by the core rule
   (``mrtr_core.http.check_request_headers``), the
   ``Mcp-Param-*`` ones with the called tool's header params, from the app
   (``ServerApp.tool_header_params``): any mismatch, missing, repeated or
   malformed header is a 400 with JSON-RPC error -32020.
4. A fresh server ``mrtr_core.Connection`` reads the body and the app answers
   (JSON, or a request-scoped SSE stream once the handler streams).  A
   ``subscriptions/listen`` request first takes a place in the server's listen
   pool (429 or 503 with ``Retry-After`` when there is none), leaves the
   connection slots, and is ended gracefully after the pool's lifetime.

Timing: ``idle_timeout`` for the first byte of a request, ``head_timeout``
from that byte to the end of the head, ``body_timeout`` for the body; each a
deadline, not an idle timer that every byte resets.  Until its whole request
has arrived a connection may be evicted by a newer one (``limits.py``).  A
write is never cut in half: it completes, or the peer is given up on after
``write_timeout``.  A ``HEAD`` request gets the headers a ``GET`` would, no body.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import h11
import trio

import mrtr_core as m

from ...asgi.sessions import SessionEndpoint
from ..app import ServerApp, run_app
from ..driver import READ_SIZE, ConnectionOutlet, response_for, send_response
from .limits import ConnectionSlots, ListenPool, ListenRefusal
from .policy import AccessPolicy, Headers
from .refusals import (
    SERVER_BUSY,
    STATUS_FOR_CODE,
    error_body,
    reason_phrase,
    write_refusal,
)
from .routes import SideRoute
from .sessions import serve_session


class ExchangeHost(Protocol):
    """The server an exchange serves, as the exchange sees it (``HttpServer`` is one)."""

    app: ServerApp
    path: str
    policy: AccessPolicy
    max_body_size: int
    max_header_size: int
    keepalive_interval: float
    idle_timeout: float
    head_timeout: float
    body_timeout: float
    write_timeout: float
    connection_options: dict[str, Any]
    closing: bool
    slots: ConnectionSlots
    listens: ListenPool
    routes: dict[bytes, SideRoute]  # by path: URL callback, health check (routes.py)

    #: The 2025-era side: the endpoint's ``SessionEndpoint`` (``post``, ``get``, ``delete``).
    sessions: SessionEndpoint

    def header_params(self, tool: str) -> Mapping[str, Sequence[str]] | None: ...


__all__ = ["ExchangeHost", "HttpConnection"]

log = logging.getLogger("mrtr.server.http")

SSE_HEADERS = [(k.encode(), v.encode()) for k, v in m.http.SSE_RESPONSE_HEADERS]


class _PeerGone(ConnectionError):
    """The client closed the connection (an ``OSError``, as the endpoint's ASGI writers
    expect of a ``send`` that cannot go out: ``sessions.py``)."""


class _Body:
    """A request body as it is read: its chunks, their size, and whether it went
    over ``limit``."""

    __slots__ = ("chunks", "limit", "size", "too_large")

    def __init__(self, limit: int) -> None:
        self.chunks: list[bytes] = []
        self.limit = limit
        self.size = 0
        self.too_large = False

    def value(self) -> bytes | None:
        """The whole body, or ``None`` past the limit."""
        return None if self.too_large else b"".join(self.chunks)


class HttpConnection:
    """One TCP connection: HTTP/1.1 requests one after another (keep-alive)."""

    def __init__(self, server: ExchangeHost, stream: trio.SocketStream) -> None:
        self.server = server
        self.stream = stream
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=server.max_header_size)
        self.write_lock = trio.Lock()
        #: While a request (head or body) is awaited: cancelled to evict or to time out.
        self.wait_scope: trio.CancelScope | None = None
        self.between_requests = False
        self.evicted = False
        #: The connection closes after this answer (a listen stream: it left the slots).
        self.close_after = False
        #: A refusal went out before the request was read: close lingeringly (refusals.py).
        self.linger = False
        #: No request has arrived on this connection yet.
        self.fresh = True
        self.method = b""
        try:
            self.peer: str | None = str(stream.socket.getpeername()[0])
        except OSError:
            self.peer = None
        #: Writes that need not wait go straight to the socket (``_write``; POSIX).
        self._direct_writes = os.name == "posix"
        # The watcher (``_watch``): one task for the connection's life, armed while a
        # handler runs, rather than a nursery and a task per request.
        self._nursery: trio.Nursery | None = None
        self._watched: _Exchange | None = None
        self._watch_wakeup = trio.Event()
        self._watch_scope: trio.CancelScope | None = None
        self._watch_idle = trio.Event()  # set while the watcher does not read
        self._watch_idle.set()
        self._watcher_started = False

    def shutdown(self) -> None:
        """The server is closing: an idle connection closes now, a busy one after its answer."""
        if self.between_requests and self.wait_scope is not None:
            self.wait_scope.cancel()

    def evict(self) -> None:
        """A newer connection took this one's slot: stop waiting for a request, close."""
        self.evicted = True
        if self.wait_scope is not None:
            self.wait_scope.cancel()

    async def serve(self) -> None:
        async with trio.open_nursery() as nursery:  # the watcher's and keep-alives' tasks
            self._nursery = nursery
            try:
                await self._serve_requests()
            finally:
                nursery.cancel_scope.cancel()

    async def _serve_requests(self) -> None:
        slots = self.server.slots
        while not self.server.closing:  # (evicted: _next_request says so, and ends it)
            try:
                request = await self._next_request()
            except h11.RemoteProtocolError as exc:
                await self._send_simple(exc.error_status_hint, f"bad request: {exc}")
                return
            if request is None:
                return
            try:
                await self._handle(request)
            except h11.RemoteProtocolError as exc:  # e.g. broken chunked encoding
                await self._send_simple(exc.error_status_hint, f"bad request: {exc}")
                return
            except _PeerGone:
                return
            if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                return  # the body was not read, or the response ended the connection
            slots.waiting(self)
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                return

    # --- Reading ---

    async def _receive(self) -> int:
        """Feed h11 what the peer sent next; the number of bytes (0: the peer is gone)."""
        try:
            data = await self.stream.receive_some(READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        self.h11.receive_data(data)
        return len(data)

    async def _next_request(self) -> h11.Request | None:
        """The next request head; ``None`` when the client is gone, too slow or evicted.

        ``idle_timeout`` until its first byte, then ``head_timeout`` for the whole head:
        a deadline, so a head sent a byte at a time does not last longer.
        """
        server = self.server
        self.method = b""
        started = bool(self.h11.trailing_data[0])  # pipelined bytes: the head has begun
        if started:
            server.slots.arriving(self)
        timeout = server.head_timeout if started else server.idle_timeout
        self.wait_scope = scope = trio.CancelScope(deadline=trio.current_time() + timeout)
        if self.evicted:  # before its wait began (e.g. admitted and evicted in one burst)
            scope.cancel()
        self.between_requests = True
        try:
            with scope:
                while True:
                    event = self.h11.next_event()
                    if event is h11.NEED_DATA:
                        if self.h11.their_state is h11.IDLE and server.closing:
                            return None
                        if await self._receive() and not started:
                            started = True
                            server.slots.arriving(self)
                            scope.deadline = trio.current_time() + server.head_timeout
                        continue
                    if isinstance(event, h11.Request):
                        self.fresh = False
                        return event
                    return None  # ConnectionClosed, or PAUSED after a close
        finally:
            self.wait_scope = None
            self.between_requests = False
        if self.evicted and (started or self.fresh):
            # A fresh connection is there to send a request: it is owed the reason too
            # (a kept-alive one between requests is just closed, as any idle one may be).
            self.linger = True
            await write_refusal(self.stream, 503, "connection evicted: retry", retry_after=1)
        elif started and not server.closing:
            self.linger = True
            await write_refusal(
                self.stream, 408, f"the request head took longer than {server.head_timeout} s"
            )
        return None  # idle too long, evicted, or shutting down

    async def _read_body(self, limit: int) -> bytes | None:
        """The whole body, or ``None`` past ``limit`` bytes; within ``body_timeout``."""
        if self.h11.their_state in (h11.DONE, h11.MUST_CLOSE):
            return b""  # no body at all (its end was read with the head)
        if self.h11.they_are_waiting_for_100_continue and not self.evicted:
            await self._write(h11.InformationalResponse(status_code=100, headers=[]))
        body = _Body(limit)
        if self._take_body(body):  # usually the whole body came with the head: no deadline
            return body.value()
        self.wait_scope = trio.CancelScope(deadline=trio.current_time() + self.server.body_timeout)
        try:
            with self.wait_scope:
                if self.evicted:  # while the head was being checked
                    self.wait_scope.cancel()
                while True:
                    await self._receive()
                    if self._take_body(body):
                        return body.value()
        finally:
            self.wait_scope = None
        if self.evicted:
            await self._send_error(
                503, "connection evicted: retry", SERVER_BUSY, extra=[(b"retry-after", b"1")]
            )
        else:
            await self._send_error(
                408, f"the request body took longer than {self.server.body_timeout} s"
            )
        raise _PeerGone

    def _take_body(self, body: _Body) -> bool:
        """Take the body events h11 already has; whether the body is complete (or over
        its limit, when the rest need not be read)."""
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                return False
            if isinstance(event, h11.Data):
                body.size += len(event.data)
                if body.size > body.limit:
                    body.too_large = True
                    return True
                body.chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return True
            else:  # ConnectionClosed mid-body
                raise _PeerGone

    # --- Writing ---

    async def _write(self, *events: Any, unless: Any = None) -> None:
        """Send h11 events (one buffer, one write), waiting at most ``write_timeout``
        for the peer to take them; not at all if ``unless()`` is true by the time the
        write may go (a keep-alive after the final answer).

        Shielded from cancellation: a write cut in half would leave the client a
        broken message (and what the connection has produced is owed to it).  When
        no other write is under way and the socket takes the whole buffer at once
        (the usual case), it is written there and then: no lock, no scope, no wait.
        """
        lock = self.write_lock
        acquired = False
        rest = b""
        # (The descriptor is asked for each time: -1 once closed, never a reused number.)
        fd = self.stream.socket.fileno() if self._direct_writes else -1
        if not lock.locked() and fd >= 0:
            if unless is not None and unless():
                return
            data = self._serialize(events)
            try:
                sent = os.write(fd, data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise _PeerGone from exc
            if sent == len(data):
                return
            rest = data[sent:]
            lock.acquire_nowait()  # (free: nothing else ran since it was checked)
            acquired = True
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self.server.write_timeout
            try:
                if not acquired:
                    await lock.acquire()
                    acquired = True
                    if unless is not None and unless():
                        return
                    rest = self._serialize(events)
                await self.stream.send_all(rest)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise _PeerGone from exc
            finally:
                if acquired:
                    lock.release()
        if scope.cancelled_caught:
            raise _PeerGone  # the peer stopped reading

    def _serialize(self, events: Sequence[Any]) -> bytes:
        return b"".join(self.h11.send(event) or b"" for event in events)

    def _response_headers(self, content_type: bytes | None, length: int | None) -> list[Any]:
        headers: list[Any] = []
        if content_type is not None:
            headers.append((b"content-type", content_type))
        if length is not None:
            headers.append((b"content-length", str(length).encode()))
        if (
            self.server.closing
            or self.evicted
            or self.close_after
            or self.h11.their_state not in (h11.DONE, h11.MUST_CLOSE)  # the body is left unread
        ):
            headers.append((b"connection", b"close"))
        return headers

    async def _send_body(
        self, status: int, body: bytes, content_type: bytes, extra: Sequence[Any] = ()
    ) -> None:
        """A whole response; to a ``HEAD`` request, its headers only (RFC 9110, 9.3.2)."""
        headers = [*self._response_headers(content_type, len(body)), *extra]
        head = h11.Response(status_code=status, headers=headers, reason=reason_phrase(status))
        if self.h11.their_state is h11.SEND_BODY:
            self.linger = True  # answered before the body was read: the client may be sending it
        if self.method == b"HEAD":
            await self._write(head, h11.EndOfMessage())
        else:
            await self._write(head, h11.Data(data=body), h11.EndOfMessage())

    async def _send_error(
        self,
        status: int,
        message: str,
        code: int = m.INVALID_REQUEST,
        extra: Sequence[Any] = (),
    ) -> None:
        """An HTTP error whose body is a JSON-RPC error response without id."""
        await self._send_body(status, error_body(message, code), b"application/json", extra)

    async def _send_simple(self, status: int, message: str) -> None:
        """An error after an HTTP-level failure (h11's), when one can still be sent."""
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        with contextlib.suppress(_PeerGone, h11.LocalProtocolError):
            await self._send_error(status, message)

    # --- One HTTP request ---

    async def _handle(self, request: h11.Request) -> None:
        server = self.server
        self.method = request.method
        # h11 bounds a head that arrives in pieces; one that arrives whole is measured here.
        head_size = len(request.target) + sum(len(k) + len(v) + 4 for k, v in request.headers)
        if head_size > server.max_header_size:
            await self._send_simple(431, "request header fields too large")
            return
        headers = Headers(request.headers)
        if (
            headers.get("content-length") in (None, "0")
            and headers.get("transfer-encoding") is None
        ):
            self.h11.next_event()  # the EndOfMessage of an empty body: keep-alive after a refusal
        route = server.routes.get(request.target.split(b"?", 1)[0])
        if route is not None:  # the URL callback, the health check: rules of their own
            await route.serve(self, request, headers)
            return
        refusal = server.policy.refusal(headers, self.peer)
        if refusal is not None:
            log.warning("refused: %s", refusal)
            await self._send_error(403, refusal)
            return
        path = request.target.split(b"?", 1)[0].decode("latin-1")
        if path != server.path:
            await self._send_error(404, f"no MCP endpoint at {path!r}: use {server.path!r}")
            return
        json_ok, sse_ok = m.http._headers.accepted_media(headers.get_all("accept"))
        if request.method in (b"GET", b"DELETE") and headers.get_all("mcp-session-id"):
            sessions = server.sessions
            if request.method == b"GET":  # a 2025-era session's stream
                gone = await serve_session(self, lambda r, s: sessions.get(r, s, headers, sse_ok))
            else:
                gone = await serve_session(self, lambda r, s: sessions.delete(s, headers))
            if gone:
                raise _PeerGone
            return
        if request.method != b"POST":
            await self._send_error(
                405,
                f"{request.method.decode('latin-1')} is not allowed here: POST a message "
                "(GET and DELETE are for a 2025-era session: send its Mcp-Session-Id)",
                extra=[(b"allow", b"GET, POST, DELETE")],
            )
            return
        post = m.http.post_refusal(headers.fields, server.max_body_size)  # 406/415/413
        if post is not None:
            await self._send_error(post.status, post.message)
            return
        body = await self._read_body(server.max_body_size)
        if body is None:
            await self._send_error(413, f"body larger than {server.max_body_size} bytes")
            return
        server.slots.busy(self)  # the whole request is here: no longer evictable
        await self._handle_message(headers, body, json_ok, sse_ok)

    async def _handle_message(
        self, headers: Headers, body: bytes, json_ok: bool, sse_ok: bool
    ) -> None:
        server = self.server
        empty = m.http.body_refusal(body)
        if empty is not None:
            await self._send_error(empty.status, empty.message, empty.code)
            return
        message = m.http.parse_posted(body)  # once: the headers, then the connection
        if m.http.is_legacy_message(headers.fields, message):  # a session's: sessions.py
            assert isinstance(message, Mapping)
            sessions = server.sessions
            if await serve_session(
                self, lambda r, s: sessions.post(r, s, headers, message, json_ok, sse_ok)
            ):
                raise _PeerGone
            return
        refused = m.http.header_refusal(headers.fields, message, server.header_params)
        if refused is not None:
            await self._send_json(m.wire.encode_message(refused.reply), refused.status)
            return
        conn = m.Connection(m.SERVER, framing="messages", **server.connection_options)
        if message is None:
            conn.receive_data(body)
        else:
            conn.receive_message(message)
        event = conn.next_event(trio.current_time())
        if isinstance(event, m.Request) and event.method == m.http._post.LISTEN_METHOD:
            await self._listen(conn, event, headers, json_ok, sse_ok)
        elif isinstance(event, m.Request):
            await self._answer(conn, event, json_ok, sse_ok)
        elif isinstance(event, m.AutoReply):
            reply = m.http._post.removed_method_reply(event.request) or event.reply
            await self._send_final(reply, conn.send(reply), json_ok, sse_ok)
        elif isinstance(event, m.InvalidMessage):
            if event.reply is not None:
                await self._send_final(event.reply, conn.send(event.reply), json_ok, sse_ok)
            else:  # a notification or a response we cannot take: no JSON-RPC answer is due
                await self._send_error(400, event.error.message, event.error.code)
        else:  # a notification (NEED_DATA: one the connection took, e.g. a late cancel)
            await self._write(
                h11.Response(
                    status_code=202, headers=self._response_headers(None, 0), reason=b"Accepted"
                ),
                h11.EndOfMessage(),
            )

    async def _send_json(self, data: bytes, status: int) -> None:
        await self._send_body(status, data, b"application/json")

    async def _send_final(
        self,
        response: m.ResultResponse | m.ErrorResponse,
        data: bytes,
        json_ok: bool,
        sse_ok: bool,
        exchange: _Exchange | None = None,
    ) -> None:
        if exchange is not None and exchange.streaming:
            await exchange.finish(data)
        elif json_ok:
            status = 200
            if isinstance(response, m.ErrorResponse):
                status = STATUS_FOR_CODE.get(response.error.code, 200)
            await self._send_json(data, status)
        else:  # the client takes only a stream
            exchange = exchange or _Exchange(self, sse_ok=True)
            await exchange.start()
            await exchange.finish(data)

    async def _listen(
        self, conn: m.Connection, request: m.Request, headers: Headers, json_ok: bool, sse_ok: bool
    ) -> None:
        """A ``subscriptions/listen`` stream: a place in the listen pool, or a refusal
        that says when to retry; the stream ends gracefully at the pool's lifetime."""
        server = self.server
        client = server.policy.client_of(headers, self.peer)
        lease = server.listens.admit(client, trio.current_time())
        if isinstance(lease, ListenRefusal):
            log.warning("listen stream refused for %s: %s", client, lease.message)
            busy = m.MrtrError(
                lease.message, code=SERVER_BUSY, data={"retryAfterSeconds": lease.retry_after}
            )
            _, data = send_response(conn, m.error_response(request.id, busy))
            retry = [(b"retry-after", str(lease.retry_after).encode())]
            await self._send_body(lease.status, data, b"application/json", retry)
            return
        # Long-lived: out of the connection slots (the pool bounds it), closed at its end.
        server.slots.release(self)
        self.close_after = True
        try:
            await self._answer(conn, request, json_ok, sse_ok, deadline=lease.deadline)
        finally:
            server.listens.release(lease)

    async def _answer(
        self,
        conn: m.Connection,
        request: m.Request,
        json_ok: bool,
        sse_ok: bool,
        deadline: float = math.inf,
    ) -> None:
        """Run the app on ``request``; cancel it if the client goes away meanwhile.

        At ``deadline`` (a listen stream's lifetime) the handler is cancelled and
        the request gets the graceful end of a subscription: a result whose
        ``_meta`` names it, after which the client opens a new stream.
        """
        info = conn.request_info(request.id)
        handler_scope = trio.CancelScope(deadline=deadline)
        exchange = _Exchange(self, sse_ok=sse_ok)
        outlet = ConnectionOutlet(conn, request.id, exchange.notify)
        outcome: m.MrtrError | Mapping[str, Any] = m.MrtrError("cancelled")
        exchange.on_gone = handler_scope.cancel
        exchange.keepalives = True
        self._arm(exchange)
        try:
            with handler_scope:
                outcome = await run_app(self.server.app, request, info, outlet)
        finally:
            exchange.stop_keepalives()  # none for the final answer alone
            await self._disarm()
        if exchange.gone:
            conn.response_stream_closed(request.id)
            send_response(conn, response_for(request.id, outcome))  # b"": releases the id
            raise _PeerGone
        if handler_scope.cancelled_caught:  # the lifetime is over: end it gracefully
            outcome = m.http._post.listen_closure(request.id)
        response, data = send_response(conn, response_for(request.id, outcome))
        await self._send_final(response, data, json_ok, sse_ok, exchange)

    # --- The watcher ---

    def _arm(self, exchange: _Exchange) -> None:
        """A handler runs for ``exchange``: the watcher reads the connection meanwhile."""
        self._watched = exchange
        if not self._watcher_started:
            assert self._nursery is not None
            self._watcher_started = True
            self._nursery.start_soon(self._watch)
        else:
            self._watch_wakeup.set()

    async def _disarm(self) -> None:
        """The handler is done: the watcher stops reading before this task reads again.
        (A handler that never waited is done before the watcher even ran: no wait.)"""
        self._watched = None
        if not self._watch_idle.is_set():
            if self._watch_scope is not None:
                self._watch_scope.cancel()
            await self._watch_idle.wait()

    async def _watch(self) -> None:
        """The connection's watcher, for its life: each armed exchange watched once."""
        served: _Exchange | None = None
        while True:
            exchange = self._watched
            if exchange is None or exchange is served:
                self._watch_wakeup = trio.Event()
                await self._watch_wakeup.wait()
                continue
            served = exchange
            self._watch_idle = trio.Event()
            try:
                with trio.CancelScope() as self._watch_scope:
                    await self._watch_peer(exchange)
            finally:
                self._watch_scope = None
                self._watch_idle.set()

    async def _watch_peer(self, exchange: _Exchange) -> None:
        """While a handler runs: end of input from the client is its cancellation."""
        received = 0
        limit = self.server.max_header_size + self.server.max_body_size
        while received <= limit:
            try:
                data = await self.stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                exchange.peer_gone()
                return
            # A pipelined next request: kept for the next cycle (up to one request's worth).
            self.h11.receive_data(data)
            received += len(data)


class _Exchange:
    """The response to one request: JSON, or an SSE stream once the handler streams."""

    def __init__(self, connection: HttpConnection, *, sse_ok: bool) -> None:
        self.connection = connection
        self.sse_ok = sse_ok
        self.streaming = False
        self.gone = False
        #: While the handler runs: a stream it opens gets keep-alive comments.
        self.keepalives = False
        self._keepalive_scope: trio.CancelScope | None = None
        self.on_gone: Any = None

    def peer_gone(self) -> None:
        if not self.gone:
            self.gone = True
            if self.on_gone is not None:
                self.on_gone()

    async def notify(self, data: bytes) -> None:
        """The Outlet's write: the first notification opens the stream."""
        if not data or self.gone or not self.sse_ok:
            return  # nothing due, nobody listening, or a client that takes JSON only
        try:
            if not self.streaming:
                await self.start()
            await self.connection._write(h11.Data(data=m.http.encode_sse(data.decode())))
        except _PeerGone:
            self.peer_gone()

    async def start(self) -> None:
        self.streaming = True
        headers = [*SSE_HEADERS, *self.connection._response_headers(None, None)]
        await self.connection._write(h11.Response(status_code=200, headers=headers, reason=b"OK"))
        nursery = self.connection._nursery
        if (
            self.keepalives
            and nursery is not None
            and self.connection.server.keepalive_interval > 0
        ):
            self._keepalive_scope = trio.CancelScope()
            nursery.start_soon(self._keepalive, self._keepalive_scope)

    def stop_keepalives(self) -> None:
        self.keepalives = False
        if self._keepalive_scope is not None:
            self._keepalive_scope.cancel()

    def _keepalives_over(self) -> bool:
        return not self.keepalives

    async def _keepalive(self, scope: trio.CancelScope) -> None:
        interval = self.connection.server.keepalive_interval
        with scope:
            while True:
                await trio.sleep(interval)
                try:
                    await self.connection._write(
                        h11.Data(data=m.http.encode_sse_comment()), unless=self._keepalives_over
                    )
                except _PeerGone:
                    self.peer_gone()
                    return

    async def finish(self, data: bytes) -> None:
        """The final response as the last event; the stream ends."""
        last = h11.Data(data=m.http.encode_sse(data.decode()))
        await self.connection._write(last, h11.EndOfMessage())
