"""One TCP connection of the host: its HTTP/1.1 requests one after another, each an ASGI cycle.

For each request (keep-alive: many on one connection):

1. The head is read within the deadlines: ``idle_timeout`` to its first byte,
   then ``head_timeout`` for the whole of it (a byte trickled now and then does
   not extend it): past the second, 408.  A head larger than ``max_header_size``,
   or with too many fields or one too long (``bounds.head_refusal``), is 431, a
   malformed one h11's 400.  Until the whole request has arrived the
   connection is *waiting* and a newer one may evict it (``ConnectionSlots``):
   503 with ``Retry-After: 1`` when its request had begun (or it had none yet).
2. The app is called with an ``http`` scope.  ``receive()`` hands it the body
   as it arrives, within ``body_timeout`` from the end of the head (408) and
   ``max_body_size`` (413); once the body is whole the connection is *busy*
   and never evicted.  (An eviction that meets a request's last bytes in one
   step is too late to refuse it: the request is answered, with
   ``Connection: close``.)  After the body, ``receive()`` waits for the client to
   go (``http.disconnect``), or for the response to end.
3. ``send()`` writes the response: the head goes with the first body chunk (one
   write), a body without ``Content-Length`` is chunked (an SSE stream), a
   ``HEAD`` request's body is dropped.  A write is never cut in half: it
   completes, or the peer is given up on after ``write_timeout``
   (``ClientDisconnected``, an ``OSError``, for the ``send`` whose write failed;
   sends after the client is known gone are dropped).
4. The app returned: a response it never started is a 500; one it left
   unfinished, or a request body it left unread, ends the connection.

A response whose head the app marks ``connection: close`` ends its connection,
which leaves the connection slots as the head goes out: it will carry no other
request, and may last long (the MCP endpoint marks so its listen streams and
sessions' streams, which pools of its own bound).

A refusal written before the request was read closes the connection
lingeringly (``refusals.py``).  The app knows nothing of these bounds: it sees
an ordinary ASGI server.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
from typing import TYPE_CHECKING
from urllib.parse import unquote

import anyio
import anyio.abc
import h11
import sniffio
from anyio.abc import SocketAttribute

import mrtr_core as m

from .access import AccessRecord
from .asgi import ASGI_VERSION, ClientDisconnected, Message, Scope
from .bounds import TOO_LARGE, head_refusal
from .refusals import (
    SERVER_BUSY,
    STREAM_GONE,
    error_body,
    reason_phrase,
    write_refusal,
)
from .websocket import WebSocketCycle, is_websocket_upgrade

if TYPE_CHECKING:
    from .http import AsgiHost

__all__ = ["HostConnection", "RequestCycle"]

log = logging.getLogger("mrtr.host")

#: The most one read takes from the socket.
READ_SIZE = 65536
#: Seconds a connection closed between requests is watched for a request sent meanwhile.
LAST_LOOK = 0.005
#: The header by which the app ends the connection with its response (ASGI names are
#: lowercase); a long-lived stream says it, and so leaves the connection slots.
_CLOSE = (b"connection", b"close")


class HostConnection:
    """One TCP connection: HTTP/1.1 requests one after another (keep-alive)."""

    def __init__(
        self,
        host: AsgiHost,
        stream: anyio.abc.SocketStream,
        client: tuple[str, int] | None,
        server: tuple[str, int] | None,
    ) -> None:
        self.host = host
        self.bounds = host.bounds
        self.stream = stream
        self.client = client
        self.server = server
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=host.bounds.max_header_size)
        #: While a request (head or body) is awaited: cancelled to evict or to time out.
        self.wait_scope: anyio.CancelScope | None = None
        self.between_requests = False
        self.evicted = False
        #: A refusal went out before the request was read: close lingeringly (refusals.py).
        self.linger = False
        #: No request has arrived on this connection yet.
        self.fresh = True
        self.write_lock = anyio.Lock()
        #: The client stopped reading (a write outlived ``write_timeout``): the connection
        #: is reset, not closed, so what the kernel still holds for it is dropped rather
        #: than trickled out to a reader that may never come (``abort``).
        self.stalled = False
        #: The access line of the request being answered, while the host logs (access.py).
        self.record: AccessRecord | None = None
        #: A write the socket takes whole goes straight to it (``write``).  On asyncio
        #: only until a write goes through the stream: its transport may keep part of it
        #: buffered, and a direct write after that would overtake it.
        #: (``os.write`` on its descriptor: asyncio hands out a socket without ``send``; POSIX.)
        self._raw = stream.extra(SocketAttribute.raw_socket, None) if os.name == "posix" else None
        self._buffering_stream = sniffio.current_async_library() != "trio"
        #: The loop's clock and cancel scopes, looked up once for the host (anyio finds
        #: the backend again at each ``anyio.current_time()`` and ``anyio.CancelScope()``).
        assert host.loop is not None  # (made as the host begins to serve)
        self.now = host.loop.now
        self.cancel_scope = host.loop.cancel_scope

    @property
    def peer(self) -> str | None:
        return self.client[0] if self.client else None

    def shutdown(self) -> None:
        """The host is closing: an idle connection closes now, a busy one after its answer."""
        if self.between_requests and self.wait_scope is not None:
            self.wait_scope.cancel()

    def evict(self) -> None:
        """A newer connection took this one's slot: stop waiting for a request, close."""
        self.evicted = True
        if self.wait_scope is not None:
            self.wait_scope.cancel()

    async def serve(self) -> None:
        slots = self.host.slots
        while not self.host.closing:  # (evicted: _next_request says so, and ends it)
            try:
                request = await self._next_request()
            except h11.RemoteProtocolError as exc:
                await self.send_simple(exc.error_status_hint, f"bad request: {exc}")
                return
            if request is None:
                return
            cycle = RequestCycle(self, request)
            try:
                await cycle.run()
            except h11.RemoteProtocolError as exc:  # e.g. broken chunked encoding
                await self.send_simple(exc.error_status_hint, f"bad request: {exc}")
                return
            if self.h11.their_state is h11.SEND_BODY:
                self.linger = True  # answered before the body was read: it may still come
            if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
                if self.h11.trailing_data[0] or self.unread_input():
                    self.linger = True  # sent after a response that ended the connection
                return  # the body was not read, or the response ended the connection
            slots.waiting(self, self.now())
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                return

    # --- Reading ---

    async def receive_into_h11(self) -> int:
        """Feed h11 what the peer sent next; the number of bytes (0: the peer is gone)."""
        try:
            data = await self.stream.receive(READ_SIZE)
        except (anyio.EndOfStream, *STREAM_GONE):
            data = b""
        self.h11.receive_data(data)
        return len(data)

    async def _next_request(self) -> h11.Request | None:
        """The next request head; ``None`` when the client is gone, too slow or evicted.

        ``idle_timeout`` until its first byte, then ``head_timeout`` for the whole head:
        a deadline, so a head sent a byte at a time does not last longer.
        """
        host, bounds = self.host, self.bounds
        started = bool(self.h11.trailing_data[0])  # pipelined bytes: the head has begun
        if started:
            host.slots.arriving(self)
        timeout = bounds.head_timeout if started else bounds.idle_timeout
        self.wait_scope = scope = self.cancel_scope(deadline=self.now() + timeout)
        if self.evicted:  # before its wait began (admitted and evicted in one burst)
            scope.cancel()
        self.between_requests = True
        try:
            with scope:
                while True:
                    event = self.h11.next_event()
                    if event is h11.NEED_DATA:
                        if self.h11.their_state is h11.IDLE and host.closing:
                            return None
                        if await self.receive_into_h11() and not started:
                            started = True
                            host.slots.arriving(self)
                            scope.deadline = self.now() + bounds.head_timeout
                        continue
                    if isinstance(event, h11.Request):
                        self.fresh = False
                        return event
                    return None  # ConnectionClosed, or PAUSED after a close
        finally:
            self.wait_scope = None
            self.between_requests = False
        if self.evicted and (started or self.fresh):
            # A fresh connection is there to send a request: it is owed the reason too.
            self.linger = True
            await write_refusal(self.stream, 503, "connection evicted: retry", retry_after=1)
        elif started and host.closing:
            self.linger = True
            await write_refusal(self.stream, 503, "the server is shutting down: retry", 1)
        elif started:
            self.linger = True
            await write_refusal(
                self.stream, 408, f"the request head took longer than {bounds.head_timeout} s"
            )
        else:
            # Nothing of a request read (kept alive, or fresh and silent) as we close it
            # (idle too long, evicted, or shutting down): a request sent meanwhile may wait
            # in the kernel, and a plain close would reset it, unanswered.  One there is
            # answered (503: sent again elsewhere, it is safe), and the close lingers so
            # that the client reads it.  None there: a plain close (our FIN), and a request
            # that crosses it is never read: a client that sees the end before any status
            # line on a reused connection may send it again (the project's client does).
            if await self._request_came():
                self.linger = True
                reason = "the server is shutting down" if host.closing else "connection closed"
                await write_refusal(self.stream, 503, f"{reason}: retry", retry_after=1)
        return None

    def ends_after_response(self) -> bool:
        """Whether the response being written must say ``Connection: close``: the
        connection will carry no other request, and its client must not reuse it.

        Evicted: a newcomer took its slot after its request had been read (the eviction
        and the request's last bytes met in one step), so it is answered, and then
        closed; a response without the header would leave the client to send its next
        request on a connection about to close (lost, before any status line).  Every
        slot taken, or the host closing: no reuse is promised (``slots.py``)."""
        host = self.host
        return self.evicted or host.closing or host.slots.full

    # --- Writing ---

    async def write(self, data: bytes) -> None:
        """Write ``data`` whole, or give the peer up after ``write_timeout``
        (``ClientDisconnected``).  Shielded: a write cut in half would leave the client
        a broken message, and what the app has produced is owed to it.

        When no other write is under way and the socket takes it all at once (the usual
        case), it is written there and then: no lock, no scope, no wait."""
        lock = self.write_lock
        acquired = False
        raw = self._raw
        # (The descriptor is asked for each time: -1 once closed, never a reused number.)
        fd = raw.fileno() if raw is not None else -1
        if fd >= 0 and not lock.locked():
            try:
                sent = os.write(fd, data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise ClientDisconnected("the client is gone") from exc
            if sent == len(data):
                return
            data = data[sent:]
            lock.acquire_nowait()  # (free: nothing else ran since it was checked)
            acquired = True
        if self._buffering_stream:
            self._raw = None  # from now on, every write goes through the stream
        with self.cancel_scope(shield=True) as scope:
            scope.deadline = self.now() + self.bounds.write_timeout
            try:
                if not acquired:
                    await lock.acquire()
                    acquired = True
                await self.stream.send(data)
            except STREAM_GONE as exc:
                raise ClientDisconnected("the client is gone") from exc
            finally:
                if acquired:
                    lock.release()
        if scope.cancelled_caught:
            self.stalled = True
            raise ClientDisconnected(f"the client took nothing for {self.bounds.write_timeout} s")

    async def _request_came(self) -> bool:
        """Whether bytes of a request came as the connection is being closed: a last
        look, for ``LAST_LOOK`` seconds at most, at what the socket (or, on asyncio, the
        stream's buffer: a cancelled read leaves there what came) holds."""
        if self.unread_input():  # (the kernel's: seen at once, however late the loop runs)
            return True
        with self.cancel_scope(deadline=self.now() + LAST_LOOK):
            try:
                return bool(await self.stream.receive(READ_SIZE))
            except (anyio.EndOfStream, *STREAM_GONE):
                return False
        return False

    def unread_input(self) -> bool:
        """Whether the kernel holds bytes the client sent that nobody read (a close now
        would reset the connection).  POSIX; elsewhere ``False``."""
        raw = self.stream.extra(SocketAttribute.raw_socket, None) if os.name == "posix" else None
        fd = raw.fileno() if raw is not None else -1
        if fd < 0:
            return False
        # (asyncio hands out a socket without ``recv``: a socket object on the same
        # descriptor peeks, and lets it go again)
        peek = socket.socket(fileno=fd)
        try:
            return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:  # (BlockingIOError: nothing there)
            return False
        finally:
            peek.detach()

    def abort(self) -> None:
        """Make the coming close a reset (``SO_LINGER`` 0): the socket's unsent bytes,
        up to its whole send buffer (megabytes), are dropped at once."""
        raw = self.stream.extra(SocketAttribute.raw_socket, None)
        if raw is not None and raw.fileno() >= 0:
            with contextlib.suppress(OSError):
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    async def send_error(
        self,
        status: int,
        message: str,
        code: int = m.ErrorCode.INVALID_REQUEST,
        extra: list[tuple[bytes, bytes]] | None = None,
        *,
        head_only: bool = False,
    ) -> None:
        """A whole error response through h11, whose body is a JSON-RPC error."""
        body = error_body(message, code)
        if self.record is not None:
            self.record.wrote(status, 0 if head_only else len(body))
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *(extra or ()),
        ]
        if self.ends_after_response():
            headers.append((b"connection", b"close"))
        head = h11.Response(status_code=status, headers=headers, reason=reason_phrase(status))
        data = self.h11.send(head) or b""
        if not head_only:
            data += self.h11.send(h11.Data(data=body)) or b""
        data += self.h11.send(h11.EndOfMessage()) or b""
        await self.write(data)

    async def send_simple(self, status: int, message: str) -> None:
        """An error after an HTTP-level failure (h11's), when one can still be sent."""
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        if status == 431 and not message.startswith(TOO_LARGE):  # (h11's: "Receive buffer...")
            message = TOO_LARGE
        self.linger = True  # the client's request was not read through: it may still send
        with contextlib.suppress(ClientDisconnected, h11.LocalProtocolError):
            await self.send_error(status, message)


class RequestCycle:
    """One request, as the ASGI app sees it: its scope, ``receive`` and ``send``."""

    def __init__(self, connection: HostConnection, request: h11.Request) -> None:
        self.connection = connection
        self.request = request
        #: The header fields as ASGI has them (lowercase names), read from h11 once: the
        #: head's size is measured on them and the scope hands them on as they are.
        self.headers: list[tuple[bytes, bytes]] = list(request.headers)
        self.head_only = request.method == b"HEAD"
        self.body_deadline = connection.now() + connection.bounds.body_timeout
        self.chunks: list[bytes] = []
        self.received = 0
        self.body_done = False
        self.started = False  # the app sent http.response.start
        self.head: h11.Response | None = None
        self.complete = False  # the response has ended
        self.gone = False  # the client went away, or was refused: nothing more is sent
        #: ``receive()`` waiting for the client to go; cancelled when the response ends.
        self._disconnect_scope: anyio.CancelScope | None = None
        #: The last ``http.request`` (``more_body`` false) has gone to the app.
        self.body_handed = False
        #: A malformed body (h11's error), answered at the next ``receive()``.
        self.bad: h11.RemoteProtocolError | None = None
        #: Its access line, while the host logs (``access.py``).
        self.record: AccessRecord | None = None
        self.upgraded = False  # a WebSocket handshake

    # --- The cycle ---

    async def run(self) -> None:
        connection = self.connection
        if not connection.host.access_log:
            await self._run()
            return
        self.record = connection.record = AccessRecord()
        try:
            await self._run()
        finally:
            connection.record = None
            if not self.upgraded:  # (a WebSocket's requests are logged one by one)
                self.record.write_line(connection.peer, self.request)

    async def _run(self) -> None:
        connection = self.connection
        bounds = connection.bounds
        request = self.request
        # h11 bounds a head that arrives in pieces; one that arrives whole is measured here,
        # with its fields counted and each measured (the endpoint's rule too: bounds.py).
        too_large = head_refusal(len(request.target), self.headers, bounds.max_header_size)
        if too_large is not None:
            await connection.send_simple(431, too_large)
            return
        if request.http_version not in (b"1.0", b"1.1"):  # (h11 parses "PRI * HTTP/2.0")
            version = request.http_version.decode("latin-1")
            await connection.send_simple(505, f"HTTP/{version} is not served here: use HTTP/1.1")
            return
        self._take_body()  # what came with the head (usually all of it)
        if self.bad is not None:
            await connection.send_simple(self.bad.error_status_hint, f"bad request: {self.bad}")
            return
        if self.body_done and is_websocket_upgrade(request):
            self.upgraded = True
            scope = self.scope()
            scope.update(type="websocket", scheme="ws")
            del scope["method"]
            await WebSocketCycle(connection, request, scope).run()
            return
        try:
            await connection.host.app(self.scope(), self.receive, self.send)
        except Exception:
            if not self.gone:
                log.exception("the ASGI app failed on %s", request.target.decode("latin-1"))
            if not self.started and not self.gone:
                with contextlib.suppress(ClientDisconnected, h11.LocalProtocolError):
                    await connection.send_error(500, "internal server error")
                    self.complete = True
            return
        if not self.started and not self.gone:
            log.error("the ASGI app returned without a response")
            with contextlib.suppress(ClientDisconnected, h11.LocalProtocolError):
                await connection.send_error(500, "the app sent no response")
                self.complete = True

    def scope(self) -> Scope:
        connection = self.connection
        request = self.request
        raw_path, _, query = request.target.partition(b"?")
        scope: Scope = {
            "type": "http",
            "asgi": ASGI_VERSION,
            "http_version": request.http_version.decode("ascii"),
            "method": request.method.decode("ascii"),
            "scheme": "http",
            "path": unquote(raw_path.decode("latin-1")),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": connection.host.root_path,
            "headers": self.headers,
            "client": connection.client,
            "server": connection.server,
            "state": dict(connection.host.state),
        }
        if self.record is not None:
            self.record.extend(scope)
        return scope

    # --- receive ---

    def _take_body(self) -> None:
        """Take the body events h11 already has, without waiting."""
        h11c = self.connection.h11
        while not self.body_done and self.bad is None:
            try:
                event = h11c.next_event()
            except h11.RemoteProtocolError as exc:  # e.g. broken chunked encoding
                self.bad = exc
                return
            if event is h11.NEED_DATA:
                return
            if isinstance(event, h11.Data):
                self.chunks.append(bytes(event.data))
                self.received += len(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.body_done = True
                self.connection.host.slots.busy(self.connection)  # not evictable any more
            else:  # ConnectionClosed mid-body
                self.gone = True
                return

    async def receive(self) -> Message:
        limit = self.connection.bounds.max_body_size
        if self.gone:
            pass
        elif self.bad is not None:
            await self._refuse(self.bad.error_status_hint, f"bad request: {self.bad}")
        elif self.received > limit:
            await self._refuse(413, f"body larger than {limit} bytes")
        if self.gone:
            return {"type": "http.disconnect"}
        if self.chunks or (self.body_done and not self.body_handed):
            body = b"".join(self.chunks)
            self.chunks.clear()
            self.body_handed = self.body_done
            return {"type": "http.request", "body": body, "more_body": not self.body_done}
        if not self.body_done:
            return await self._receive_body()
        return await self._wait_disconnect()

    async def _receive_body(self) -> Message:
        """The next piece of the body, within its deadline; a disconnect when too late."""
        connection = self.connection
        if connection.h11.they_are_waiting_for_100_continue and not connection.evicted:
            with contextlib.suppress(ClientDisconnected):
                await connection.write(
                    connection.h11.send(h11.InformationalResponse(status_code=100, headers=[]))
                    or b""
                )
        connection.wait_scope = scope = connection.cancel_scope(deadline=self.body_deadline)
        try:
            with scope:
                if connection.evicted:
                    scope.cancel()
                while not (self.chunks or self.body_done or self.gone or self.bad):
                    await connection.receive_into_h11()  # (its end: h11 says what it means)
                    self._take_body()
        finally:
            connection.wait_scope = None
        if scope.cancelled_caught:
            if connection.evicted:
                await self._refuse(
                    503, "connection evicted: retry", SERVER_BUSY, [(b"retry-after", b"1")]
                )
            else:
                await self._refuse(
                    408, f"the request body took longer than {connection.bounds.body_timeout} s"
                )
        return await self.receive()

    async def _wait_disconnect(self) -> Message:
        """The body is in: wait for the client to go (the end of its input) or for the
        response to end.  What it sends meanwhile (a pipelined next request) is kept
        for the next cycle, up to one request's worth."""
        connection = self.connection
        limit = connection.bounds.request_bytes
        watched = 0
        if not self.complete:
            self._disconnect_scope = scope = connection.cancel_scope()
            try:
                with scope:
                    while watched <= limit:
                        received = await connection.receive_into_h11()
                        if not received:
                            self.gone = True
                            break
                        watched += received
                    else:
                        await anyio.sleep_forever()  # enough kept: until the response ends
            finally:
                self._disconnect_scope = None
        return {"type": "http.disconnect"}

    async def _refuse(
        self,
        status: int,
        message: str,
        code: int = m.ErrorCode.INVALID_REQUEST,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        """The host answers in the app's stead (a body too slow, too large, or evicted):
        the app gets ``http.disconnect`` from now on, and its response is dropped."""
        connection = self.connection
        self.gone = True
        connection.linger = True
        if connection.h11.our_state is not h11.SEND_RESPONSE:
            return  # the app's answer has begun: the close is all that is left
        self.head = None  # (an app's head not yet written gives way to the refusal)
        with contextlib.suppress(ClientDisconnected, h11.LocalProtocolError):
            await connection.send_error(status, message, code, extra, head_only=self.head_only)

    # --- send ---

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("http.response.start sent twice")
            self.started = True
            headers = list(message.get("headers", ()))
            if _CLOSE in headers:  # a long-lived stream: the app's pools bound it
                self.connection.host.slots.release(self.connection)
            elif self.connection.ends_after_response():
                headers.append((b"connection", b"close"))
            status = int(message["status"])
            if self.record is not None:
                self.record.wrote(status, 0)
            self.head = h11.Response(
                status_code=status, headers=headers, reason=reason_phrase(status)
            )
        elif kind == "http.response.body":
            if not self.started or self.complete:
                raise RuntimeError(f"{kind} out of turn (started={self.started})")
            body = bytes(message.get("body", b""))
            more = bool(message.get("more_body", False))
            if self.gone:
                self.complete = not more
                return  # the client is gone (or was refused): nothing more is sent
            h11c = self.connection.h11
            data = b""
            if self.head is not None:
                data = h11c.send(self.head) or b""
                self.head = None
            if body and not self.head_only:
                data += h11c.send(h11.Data(data=body)) or b""
                if self.record is not None:
                    self.record.wrote(None, len(body))
            if not more:
                data += h11c.send(h11.EndOfMessage()) or b""
                self.complete = True
            try:
                if data:
                    await self.connection.write(data)
            except ClientDisconnected:
                self.gone = True
                raise
            finally:
                # The response ended, or the client is gone: a ``receive()`` waiting for
                # the client to go says ``http.disconnect`` now.
                if (self.complete or self.gone) and self._disconnect_scope is not None:
                    self._disconnect_scope.cancel()
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} in an http scope")
