"""The 2025-era side of the HTTP endpoint: sessions, their POSTs, GET streams, DELETE.

The model (the rules themselves are the core's: ``mrtr_core.protocol``'s
``read_legacy_headers``, ``SessionTable`` and ``ReplayBuffer``):

* A POSTed ``initialize`` (no 2026 ``_meta``) opens a session: a long-lived
  server connection (``session.py``) under a fresh ``Mcp-Session-Id``
  (``secrets.token_urlsafe``: 43 visible ASCII characters, unguessable), named
  in the response header.  Every later message of the client carries it:
  without it 400, for a session this server does not hold (never opened,
  expired, deleted, evicted) 404, after which the client initializes again.
* A POSTed request gets an SSE stream of its own: first a priming event (an
  id, empty data, and ``retry``), then whatever the request sends (progress,
  log lines, the legacy shim's questions), then its response, which ends the
  stream.  Every event has an id; a client that lost the stream sends a
  ``GET`` with ``Last-Event-ID`` and reads on from there (from the session's
  bounded replay buffer), to the end.  A request whose stream is cut runs on.
* A POSTed notification or response (an answer to one of the shim's
  questions, routed to the request waiting for it) gets 202.
* A ``GET`` without ``Last-Event-ID`` opens the session's standalone stream
  (one at a time: 409 for a second); a ``DELETE`` ends the session and
  cancels its requests (204).
* Sessions live at most ``max_sessions`` at once and end after
  ``session_idle_timeout`` seconds without work (a running request or an
  open stream is work); a newcomer past the bound ends the session idle the
  longest, or gets 503 when every session is busy.
* A session's requests and streams may last long (a person answering a
  question): they leave the connection slots for a pool of their own
  (``limits.SessionStreams``: ``max_session_streams`` in all,
  ``max_streams_per_session`` each; 503 with ``Retry-After`` past it, before
  the request is read), and their connections close with them.  A request
  holds its place until it ends, even when its client left its stream.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Mapping
from typing import Any

import h11
import trio

import mrtr_core as m
from mrtr_core.protocol import STANDALONE, Cursor, ReplayLost, SessionRefused, SessionTable

from ..driver import READ_SIZE
from .exchange import SSE_HEADERS, ExchangeHost, HttpConnection, _PeerGone
from .limits import SessionStreams
from .policy import Headers
from .refusals import SERVER_BUSY, STATUS_FOR_CODE
from .session import Session

__all__ = ["SSE_RETRY_MS", "SessionEndpoint"]

log = logging.getLogger("mrtr.server.http")

#: The ``retry`` (milliseconds) of each stream's priming event: how soon a client
#: whose stream was closed comes back with ``Last-Event-ID``.
SSE_RETRY_MS = 500
#: Bytes of an SSE session id (``secrets.token_urlsafe``: about 1.3 characters each).
SESSION_ID_BYTES = 32


class _Place:
    """A place in the session streams' pool, given back once."""

    def __init__(self, pool: SessionStreams, session_id: str) -> None:
        self.pool = pool
        self.session_id = session_id
        self.handed_over = False
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.pool.release(self.session_id)


class SessionEndpoint:
    """The sessions of one ``HttpServer`` and its answers to 2025-era requests."""

    def __init__(
        self,
        server: ExchangeHost,
        *,
        max_sessions: int,
        idle_timeout: float,
        replay_events: int,
        replay_bytes: int,
        legacy_answer_timeout: float,
        max_streams: int,
        max_streams_per_session: int,
        connection_options: Mapping[str, Any],
    ) -> None:
        self.server = server
        self.table = SessionTable(max_sessions, idle_timeout)
        self.replay_events = replay_events
        self.replay_bytes = replay_bytes
        self.legacy_answer_timeout = legacy_answer_timeout
        self.streams = SessionStreams(max_streams, max_streams_per_session)
        self.connection_options = dict(connection_options)
        self.sessions: dict[str, Session] = {}
        self.nursery: trio.Nursery | None = None

    # --- life cycle ---

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the sessions' tasks; end idle sessions as they expire."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            task_status.started()
            period = min(self.table.idle_timeout / 2, 30.0)
            while True:
                await trio.sleep(period)
                for session_id in self.table.expired(trio.current_time()):
                    log.info("session %s... expired", session_id[:8])
                    self.end(session_id)

    def end(self, session_id: str) -> None:
        self.table.remove(session_id)
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()

    def shutting_down(self) -> None:
        """Shutdown begins: standalone streams end now; requests get the grace time."""
        for session in self.sessions.values():
            session.cut(STANDALONE)

    def close_all(self) -> None:
        for session_id in list(self.sessions):
            self.end(session_id)

    def _on_work(self, session_id: str, started: bool) -> None:
        if started:
            self.table.begin(session_id)
        else:
            self.table.end(session_id, trio.current_time())

    def _lookup(self, headers: Headers, *, initialize: bool = False) -> tuple[Session | None, Any]:
        fields = headers.fields
        read = m.protocol.read_legacy_headers(fields, initialize=initialize)
        if initialize:
            return None, read
        assert read.session_id is not None
        session = self.sessions.get(read.session_id)
        try:
            self.table.lookup(read.session_id, trio.current_time())
        except SessionRefused:
            if session is not None:  # expired, not yet swept
                self.end(read.session_id)
            raise
        assert session is not None
        return session, read

    # --- POST ---

    async def post(
        self,
        connection: HttpConnection,
        headers: Headers,
        message: Mapping[str, Any],
        json_ok: bool,
        sse_ok: bool,
    ) -> None:
        initialize = message.get("method") == "initialize"
        try:
            session, _ = self._lookup(headers, initialize=initialize)
        except SessionRefused as exc:
            await connection._send_error(exc.status, exc.message, exc.code)
            return
        if session is None:
            await self._initialize(connection, message, json_ok)
            return
        # A request may wait long (a person answering a question): it holds a place in
        # the session streams' pool until it ends (its stream has left the connection
        # slots), and is refused, retryably, when there is none, before the session reads it.
        place: _Place | None = None
        if isinstance(message.get("method"), str) and "id" in message:
            refusal = self.streams.admit(session.id)
            if refusal is not None:
                await self._refuse_busy(connection, refusal)
                return
            place = _Place(self.streams, session.id)
        try:
            await self._session_message(connection, session, message, sse_ok, place)
        finally:
            if place is not None and not place.handed_over:
                place.release()

    async def _refuse_busy(self, connection: HttpConnection, message: str) -> None:
        log.warning("session stream refused: %s", message)
        await connection._send_error(503, message, SERVER_BUSY, extra=[(b"retry-after", b"1")])

    async def _session_message(
        self,
        connection: HttpConnection,
        session: Session,
        message: Mapping[str, Any],
        sse_ok: bool,
        place: _Place | None,
    ) -> None:
        conn = session.conn
        conn.receive_message(dict(message))
        now = trio.current_time()
        primary: m.Request | m.AutoReply | m.InvalidMessage | None = None
        while (event := conn.next_event(now)) is not m.NEED_DATA:  # (one message: few events)
            if isinstance(event, (m.Request, m.AutoReply, m.InvalidMessage)):
                primary = event  # what this POST is answered with
            elif isinstance(event, m.RequestCancelled):
                session.cancel(event.request_id)
            elif isinstance(event, (m.ResultResponse, m.ErrorResponse)) and not session.deliver(
                event
            ):
                log.info("session %s...: an answer nobody waits for", session.id[:8])
            # (SessionOpened and other notifications: nothing to do.)
        if isinstance(primary, m.Request):
            if not sse_ok:
                refused = m.MrtrError(
                    "Accept must include text/event-stream: a request's answer is a stream",
                    code=m.protocol.INVALID_REQUEST,
                )
                data = conn.send(m.error_response(primary.id, refused))  # releases the id
                await connection._send_body(406, data, b"application/json")
                return
            stream = session.buffer.open_stream()
            priming = session.buffer.record(stream, b"")
            if place is not None:  # the request holds it until it ends
                place.handed_over = True
            session.start_request(primary, stream, place.release if place else None)
            self.server.slots.release(connection)  # in the session streams' pool now
            connection.close_after = True
            await self._pump(connection, session, session.buffer.start(stream), priming)
            return
        if isinstance(primary, m.AutoReply):
            await self._send_reply(connection, primary.reply, conn.send(primary.reply))
            return
        if isinstance(primary, m.InvalidMessage):
            if primary.reply is not None:
                await self._send_reply(connection, primary.reply, conn.send(primary.reply))
            else:  # a notification or a response the session cannot take
                await connection._send_error(400, primary.error.message, primary.error.code)
            return
        await connection._write(
            h11.Response(
                status_code=202,
                headers=connection._response_headers(None, 0),
                reason=b"Accepted",
            ),
            h11.EndOfMessage(),
        )

    async def _send_reply(
        self,
        connection: HttpConnection,
        reply: m.ResultResponse | m.ErrorResponse,
        data: bytes,
        extra: list[Any] | None = None,
    ) -> None:
        status = 200
        if isinstance(reply, m.ErrorResponse):
            status = STATUS_FOR_CODE.get(reply.error.code, 200)
        await connection._send_body(status, data, b"application/json", extra or [])

    async def _initialize(
        self, connection: HttpConnection, message: Mapping[str, Any], json_ok: bool
    ) -> None:
        now = trio.current_time()
        conn = m.Connection(m.SERVER, framing="messages", **self.connection_options)
        conn.receive_message(dict(message))
        event = conn.next_event(now)
        reply = event.reply if isinstance(event, (m.AutoReply, m.InvalidMessage)) else None
        if reply is None:  # (an initialize is always answered; nothing to keep otherwise)
            await connection._send_error(400, "initialize was not accepted")
            return
        data = conn.send(reply)
        if isinstance(reply, m.ErrorResponse):  # (e.g. a server built without 2025 versions)
            # Always 400, whatever the code: the spec's versioning page has a 2026-only
            # HTTP server reject a 2025 initialize with 400 (the error names its versions).
            await connection._send_body(400, data, b"application/json", [])
            return
        if not json_ok:
            await connection._send_error(406, "Accept must include application/json")
            return
        ending = self.table.admit(now)  # only now: a refused initialize ends no session
        if ending is None:
            log.warning("every session is busy: initialize refused")
            await connection._send_error(
                503,
                f"the server holds max_sessions={self.table.max_sessions} busy sessions: "
                "retry later",
                SERVER_BUSY,
                extra=[(b"retry-after", b"1")],
            )
            return
        for session_id in ending:
            log.info("session %s... ended to make room", session_id[:8])
            self.end(session_id)
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        buffer = m.protocol.ReplayBuffer(self.replay_events, self.replay_bytes)
        session = Session(
            session_id,
            self.server.app,
            conn,
            buffer,
            legacy_answer_timeout=self.legacy_answer_timeout,
            on_work=self._on_work,
        )
        self.table.add(session_id, now)  # before any wait: the place admit() made is ours
        self.sessions[session_id] = session
        assert self.nursery is not None
        await self.nursery.start(session.run)
        extra = [(b"mcp-session-id", session_id.encode())]
        await self._send_reply(connection, reply, data, extra)

    # --- GET, DELETE ---

    async def get(self, connection: HttpConnection, headers: Headers, sse_ok: bool) -> None:
        """The standalone stream, or the rest of a stream after ``Last-Event-ID``."""
        if not sse_ok:
            await connection._send_error(406, "Accept must include text/event-stream")
            return
        priming: str | None = None
        try:
            session, read = self._lookup(headers)
            assert session is not None
            if read.last_event_id is not None:
                cursor = session.buffer.resume(read.last_event_id)
            elif STANDALONE in session.readers:
                await connection._send_error(
                    409, "this session's standalone stream is already open: one at a time"
                )
                return
            else:  # primed like a request's stream, so a cut one can resume from the start
                priming = session.buffer.record(STANDALONE, b"")
                cursor = session.buffer.tail(STANDALONE)
                if not session.standalone_opened:
                    session.standalone_opened = True
                    session.restart_listen()  # the app's announcements reach it from now on
        except (SessionRefused, ReplayLost) as exc:
            status = exc.status if isinstance(exc, SessionRefused) else 400
            await connection._send_error(status, exc.message, exc.code)
            return
        refusal = self.streams.admit(session.id)
        if refusal is not None:
            await self._refuse_busy(connection, refusal)
            return
        # Long-lived: out of the connection slots (the streams' pool), closed at its end.
        self.server.slots.release(connection)
        connection.close_after = True
        self._on_work(session.id, True)
        try:
            await self._pump(connection, session, cursor, priming)
        finally:
            self._on_work(session.id, False)
            self.streams.release(session.id)

    async def delete(self, connection: HttpConnection, headers: Headers) -> None:
        try:
            session, _ = self._lookup(headers)
        except SessionRefused as exc:
            await connection._send_error(exc.status, exc.message, exc.code)
            return
        assert session is not None
        log.info("session %s... deleted by its client", session.id[:8])
        self.end(session.id)
        await connection._write(
            h11.Response(
                status_code=204,
                headers=connection._response_headers(None, None),
                reason=b"No Content",
            ),
            h11.EndOfMessage(),
        )

    # --- one stream as one HTTP response ---

    async def _pump(
        self, connection: HttpConnection, session: Session, cursor: Cursor, priming: str | None
    ) -> None:
        """Write ``cursor``'s stream as an SSE response until it ends, the session
        ends, a newer reader takes the stream, or the client goes away."""
        me = object()
        if session.readers.get(cursor.stream) is not None:
            session.wake()  # the previous reader of this stream stops
        session.readers[cursor.stream] = me
        try:
            head = [*SSE_HEADERS, *connection._response_headers(None, None)]
            first: list[Any] = [h11.Response(status_code=200, headers=head, reason=b"OK")]
            if priming is not None:
                first.append(h11.Data(data=m.wire.encode_sse("", id=priming, retry=SSE_RETRY_MS)))
            await connection._write(*first)
            gone = False
            async with trio.open_nursery() as nursery:

                def peer_gone() -> None:
                    nonlocal gone
                    gone = True
                    nursery.cancel_scope.cancel()

                nursery.start_soon(self._watch_peer, connection, peer_gone)
                try:
                    cursor = await self._copy(connection, session, cursor, me)
                except _PeerGone:
                    gone = True
                nursery.cancel_scope.cancel()
            if gone:
                raise _PeerGone
            await connection._write(h11.EndOfMessage())
        finally:
            if session.readers.get(cursor.stream) is me:
                del session.readers[cursor.stream]

    async def _copy(
        self, connection: HttpConnection, session: Session, cursor: Cursor, me: object
    ) -> Cursor:
        interval = self.server.keepalive_interval
        while session.readers.get(cursor.stream) is me and not session.closed:
            changed = session.changed
            try:
                events, cursor, done = session.buffer.read(cursor)
            except ReplayLost as exc:
                log.warning("session %s...: %s", session.id[:8], exc.message)
                connection.close_after = True
                return cursor
            for event_id, data in events:
                if data:  # (a priming event is written once, by whoever opened the stream)
                    sse = m.wire.encode_sse(data.decode(), id=event_id)
                    await connection._write(h11.Data(data=sse))
            if done:
                return cursor
            with trio.move_on_after(interval if interval > 0 else math.inf) as waited:
                await changed.wait()
            if waited.cancelled_caught:
                await connection._write(h11.Data(data=m.wire.encode_sse_comment()))
        return cursor

    async def _watch_peer(self, connection: HttpConnection, peer_gone: Any) -> None:
        """While a stream is written: end of input from the client means it left."""
        received = 0
        limit = self.server.max_header_size + self.server.max_body_size
        while received <= limit:
            try:
                data = await connection.stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                peer_gone()
                return
            connection.h11.receive_data(data)  # a pipelined next request: kept
            received += len(data)
