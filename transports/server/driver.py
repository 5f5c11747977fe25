"""The shared server driver: a ``mrtr_core.Connection`` served for a ``ServerApp`` on anyio
(trio or asyncio: an ``async def`` handler runs on the loop that hosts it).

The model.  A server transport owns bytes; the connection owns the protocol;
the app owns answers.  This module is the piece in between that every server
transport shares:

* ``run_app`` runs the app on one request (one leg) and turns whatever it
  does into an outcome: its result mapping, or the ``MrtrError`` it raised.
  Any other exception is a bug in the app: it is logged with its traceback and
  the client gets -32603, never the exception text.
* ``send_response`` sends that outcome through the connection.  The
  connection checks every result on its way out; when it refuses one (an
  ``input_required`` asking for what the request did not declare: -32021, or a
  malformed one: -32603) the request is still outstanding, so the client gets
  the error the connection named instead.
* ``ConnectionOutlet`` is the ``Outlet`` a handler writes its progress, log
  lines and notifications to: each goes through ``conn.send`` (which honours
  the request's progress token, log level and cancellation) and then to the
  transport's ``write``.
* ``serve_stream`` drives one connection over a byte stream (stdio, TCP): it
  reads lines, sends what the connection answers by itself (``AutoReply``,
  the replies of ``InvalidMessage``), runs each request in its own task,
  cancels a handler when ``notifications/cancelled`` names its request (no
  response goes out for it), and serves 2025-era clients through
  ``mrtr_core.server.LegacyShim`` (``legacy.py``): each ``input_required`` round of the app becomes
  real server-to-client requests, whose answers the driver routes back to the
  waiting request.

Concurrency and bounds: each request runs at once in the task that read it,
as far as it goes without waiting; a request that has to wait keeps that task
(a new one takes over reading), so in effect one task per waiting request, and
none at all for the legs most apps answer straight away.  A request holds one
of ``max_incoming`` (1024) slots from the moment it is read until its response
is handed to the writer, not merely until the connection has encoded it.
Writes are whole messages in the order the connection produced them: written
to a pipe at once while nothing is queued, otherwise (and what a full pipe did
not take, first in line) through one writer task (at most ``OUTBOX_SIZE``, 64,
wait; then senders wait): a handler cancelled while it hands over its bytes can
never cut a line in half, and what the connection produced reaches the peer.  So when the peer
stops reading our output, answered requests wait in their slots, and once
every slot is taken the read loop waits for one before it reads on: the
backpressure reaches the peer through its own input pipe, and memory stays
bounded (at most ``max_incoming`` requests and ``OUTBOX_SIZE`` messages).
While the slots are held by handlers still running, the connection itself
refuses requests past ``max_incoming`` (-32603) and reading goes on, so a
``notifications/cancelled`` for one of them still gets through.
Reads are at most ``READ_SIZE`` bytes at a time, and the connection is drained
to ``NEED_DATA`` before each read, so its ``max_buffer_size`` is never hit.

End of input: the peer closed its side, so no more requests and no more
answers to our questions can come.  First the app may end its long-lived
requests gracefully: ``end_subscriptions`` calls its ``close_subscriptions()``
when it has one (``McpApp`` does), so each open ``subscriptions/listen``
stream returns its final result instead of being cancelled.  (That is every
stream of the app: ``serve_stream`` expects one connection per app, as stdio
has.)  Legacy requests waiting for the client's answers are withdrawn at once;
handlers still running get ``drain_timeout`` seconds (1 s by default) to
finish and have their answers written, then they are cancelled and their
answers dropped.  Nothing waits longer than that: the drain time starts when
the end of input is read, so it covers what the read loop still has to say
too (say, the error reply to a last line cut off without its newline, which
waits for the writer like any other message).
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import logging
import os
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio

import mrtr_core as m
from mrtr_core import AppResultRefused

from .access import access_enabled, log_rpc
from .app import Outcome, Outlet, ServerApp, run_app
from .fdstream import FdStream
from .legacy import DEFAULT_LEGACY_ANSWER_TIMEOUT, LegacyFlow, run_legacy

__all__ = [
    "READ_SIZE",
    "ConnectionOutlet",
    "end_subscriptions",
    "run_app",
    "send_response",
    "serve_stream",
]

log = logging.getLogger("mrtr.server")

#: Bytes read from the peer at a time.
READ_SIZE = 65536
#: How long handlers may run on once the peer has closed its input (seconds).
DEFAULT_DRAIN_TIMEOUT = 1.0
#: Messages waiting for the writer before senders wait.
OUTBOX_SIZE = 64

Write = Callable[[bytes], Awaitable[None]]


# --- One request ---------------------------------------------------------------------


class ConnectionOutlet(Outlet):
    """The ``Outlet`` of one request: through ``conn.send``, then ``write``.

    ``conn.send`` returns ``b""`` for what is not due (no progress token, below
    the request's log level, the request cancelled), and ``write`` skips empty
    data, so a handler may call these freely.
    """

    def __init__(self, conn: m.Connection, request_id: m.RequestId, write: Write) -> None:
        self._conn = conn
        self._id = request_id
        self._write = write

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        event = m.Progress(request_id=self._id, progress=progress, total=total, message=message)
        await self._write(self._conn.send(event))

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        event = m.LogMessage(request_id=self._id, level=level, data=data, logger=logger)
        await self._write(self._conn.send(event))

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        note = m.Notification(method=method, params=dict(params) if params is not None else None)
        await self._write(self._conn.send(note))


def response_for(request_id: m.RequestId, outcome: Outcome) -> m.ResultResponse | m.ErrorResponse:
    if isinstance(outcome, m.MrtrError):
        return m.error_response(request_id, outcome)
    return m.ResultResponse(id=request_id, result=dict(outcome))


def send_response(
    conn: m.Connection, response: m.ResultResponse | m.ErrorResponse
) -> tuple[m.ResultResponse | m.ErrorResponse, bytes]:
    """Send ``response``; if the connection refuses it, the error it names instead.

    Returns the response actually sent and its bytes (``b""`` when nothing is
    due, e.g. the request was cancelled).
    """
    try:
        return response, conn.send(response)
    except (AppResultRefused, m.LocalProtocolError) as exc:
        # Refused: -32021 (asked beyond the request's capabilities), -32603 (a malformed
        # input_required, ...); or a value JSON cannot carry.  Still owed an answer.
        if isinstance(response, m.ResultResponse):
            log.warning("result for request %r refused: %s", response.id, exc.message)
        refusal = m.error_response(response.id, exc)
        return refusal, conn.send(refusal)


# --- A connection over a byte stream -------------------------------------------------


@types.coroutine
def _carry_on(
    context: contextvars.Context, coro: Coroutine[Any, Any, None], trap: Any
) -> Generator[Any, Any, None]:
    """Carry on running ``coro`` (which yielded ``trap`` to the run loop) in the task
    that awaits this: the loop's answers to its traps (trio's, or asyncio's futures) go
    back into it, in ``context``."""
    while True:
        try:
            answer = yield trap
        except BaseException as exc:  # (the loop throws its cancellation into the task)
            try:
                trap = context.run(coro.throw, exc)
            except StopIteration:
                return
        else:
            try:
                trap = context.run(coro.send, answer)
            except StopIteration:
                return


def _receiver(stream: anyio.abc.ByteReceiveStream) -> Callable[[], Awaitable[bytes]]:
    """The next bytes from ``stream`` (``b""`` at its end); a pipe (``FdStream``) is read
    directly.

    A stream's ``receive`` yields to the scheduler before every read, even when
    bytes wait; per message that is a pass of the run loop.  Here a pipe's read yields
    only by waiting for the pipe, or by one checkpoint when it found bytes without
    waiting twice in a row (so a flood of input still lets the request tasks run).
    """
    if not isinstance(stream, FdStream):

        async def receive_stream() -> bytes:
            try:
                return await stream.receive(READ_SIZE)
            except anyio.EndOfStream:
                return b""

        return receive_stream
    waited = True

    async def receive() -> bytes:
        nonlocal waited
        while True:
            try:
                data = os.read(stream.fileno(), READ_SIZE)  # (-1 once closed: EBADF)
            except BlockingIOError:
                waited = True
                await stream.wait_readable()
                continue
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise anyio.ClosedResourceError() from exc
                raise anyio.BrokenResourceError() from exc
            if not waited:  # bytes twice in a row without waiting: let the others run first
                await anyio.lowlevel.checkpoint()
            waited = False
            return data

    return receive


class RequestScope(Protocol):
    """A request's cancel scope: ``anyio.CancelScope``, or trio's own on trio."""

    def cancel(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: types.TracebackType | None,
        /,
    ) -> bool | None: ...


def loop_primitives() -> tuple[Callable[[], float], Callable[[], RequestScope]]:
    """The running loop's clock and cancel scopes, looked up once per connection.

    ``anyio.current_time`` looks the loop up on every call, and an anyio scope on
    trio wraps a trio scope; the read loop asks for the time per message and makes a
    scope per request, so on trio these are trio's own (the same scopes anyio's trio
    backend runs on underneath)."""
    if sniffio.current_async_library() == "trio":
        import trio  # (only on trio)

        return trio.current_time, trio.CancelScope
    return asyncio.get_running_loop().time, anyio.CancelScope


def end_subscriptions(app: ServerApp) -> None:
    """Shutdown: let an app that can (``close_subscriptions()``, as ``McpApp`` has)
    end its open listen streams with their final result."""
    close_subscriptions = getattr(app, "close_subscriptions", None)
    if close_subscriptions is not None:
        close_subscriptions()


async def serve_stream(
    app: ServerApp,
    receive_stream: anyio.abc.ByteReceiveStream,
    send_stream: anyio.abc.ByteSendStream,
    *,
    drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
    legacy_answer_timeout: float | None = DEFAULT_LEGACY_ANSWER_TIMEOUT,
    **connection_options: Any,
) -> None:
    """Serve ``app`` on one newline-delimited connection until the peer closes its input.

    ``connection_options`` go to ``mrtr_core.Connection`` (bounds, ``json``,
    ``cache_ttl_ms``, ...).  ``legacy_answer_timeout`` bounds how long a
    2025-era request waits for the client to answer one of our questions
    (``DEFAULT_LEGACY_ANSWER_TIMEOUT``, 300 s; ``None``: until the client answers
    or cancels); past it the question is withdrawn and the request gets -32603.
    Returns once everything is answered or cancelled; never closes the streams
    (their owner does).
    """
    options: dict[str, Any] = {
        "info": app.info,
        "capabilities": app.capabilities,
        "instructions": app.instructions,
        **connection_options,
    }
    conn = m.Connection(m.SERVER, framing="lines", **options)
    driver = _StreamDriver(app, conn, send_stream, legacy_answer_timeout, drain_timeout)
    await driver.serve(receive_stream)


class _StreamDriver:
    def __init__(
        self,
        app: ServerApp,
        conn: m.Connection,
        send_stream: anyio.abc.ByteSendStream,
        legacy_answer_timeout: float | None,
        drain_timeout: float,
        where: str = "stdio",
    ) -> None:
        self.app = app
        #: Where access lines say requests came from; ``None``: no access log (access.py).
        self.access_where = where if access_enabled() else None
        self.conn = conn
        self.send_stream = send_stream
        self.legacy_answer_timeout = legacy_answer_timeout
        self.drain_timeout = drain_timeout
        # A request holds a slot from when it is read until its response is handed to
        # the writer; with every slot taken the read loop stops reading (backpressure).
        self.slots = anyio.Semaphore(conn.max_incoming)
        # Both bounded by the connection's max_incoming / max_outgoing.
        self.running: dict[m.RequestId, RequestScope] = {}
        self.questions: dict[m.RequestId, LegacyFlow] = {}  # our request id -> its flow
        self.legacy_waits: set[anyio.CancelScope] = set()
        # Bytes go out through one writer task, in the order the connection produced
        # them; a request cancelled while it hands over its bytes can never cut a line
        # in half.  At most OUTBOX_SIZE messages wait (then writers wait: backpressure).
        self.outbox, self.outgoing = anyio.create_memory_object_stream[bytes](OUTBOX_SIZE)
        # Messages handed to the outbox and not yet written to the end.  While it is 0 a
        # pipe's bytes go out at once (``os.write``, no hop through the writer task);
        # whatever the pipe does not take goes to the outbox, so the order holds.
        self.queued = 0
        self.out_pipe = send_stream if isinstance(send_stream, FdStream) else None
        self.output_broken = False
        self.input_closed = False
        self.draining = False  # the end of input was read: the drain time runs
        self.nursery: anyio.abc.TaskGroup | None = None  # the request tasks
        self.receive: Callable[[], Awaitable[bytes]] | None = None
        self.input_ended = anyio.Event()  # the read loop has ended (whichever task ran it)
        self.everything: anyio.CancelScope | None = None
        self.clock, self.new_scope = loop_primitives()

    async def write(self, data: bytes) -> None:
        """Hand ``data`` (whole messages) to the writer; a checkpoint, like any stream send."""
        await anyio.lowlevel.checkpoint_if_cancelled()
        await self.put(data)
        await anyio.lowlevel.cancel_shielded_checkpoint()

    async def put(self, data: bytes) -> None:
        """Hand ``data`` over without a checkpoint when it can go at once (the last thing
        a request task does): written to a pipe directly while nothing is queued, else
        queued for the writer (waiting while ``OUTBOX_SIZE`` messages are queued)."""
        if not data or self.output_broken:
            return
        if self.queued == 0 and self.out_pipe is not None:
            try:
                written = os.write(self.out_pipe.fileno(), data)  # (-1 once closed: EBADF)
            except BlockingIOError:
                written = 0
            except OSError as exc:
                self.output_lost(exc)
                return
            if written == len(data):
                return
            # The rest goes first in line, at once: a cancellation can never cut it off.
            self.queued += 1
            self.outbox.send_nowait(data[written:])
            return
        self.queued += 1
        try:
            self.outbox.send_nowait(data)  # (no checkpoint while the outbox has room)
        except anyio.WouldBlock:
            try:
                await self.outbox.send(data)
            except BaseException:
                self.queued -= 1
                raise

    def output_lost(self, exc: BaseException) -> None:
        # The peer stopped reading: nobody can get an answer any more.
        if isinstance(exc, OSError) and exc.errno == errno.EBADF:
            exc = anyio.ClosedResourceError()
        self.output_broken = True
        log.info("output closed by the peer: stopping (%r)", exc)
        assert self.everything is not None
        self.everything.cancel()

    async def writer(self) -> None:
        async for data in self.outgoing:
            try:
                if not self.output_broken:
                    await self.send_stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                self.output_lost(exc)
            finally:
                self.queued -= 1

    async def serve(self, receive_stream: anyio.abc.ByteReceiveStream) -> None:
        async with anyio.create_task_group() as outer:
            self.everything = outer.cancel_scope
            outer.start_soon(self.writer)
            async with anyio.create_task_group() as nursery:
                self.nursery = nursery
                self.receive = _receiver(receive_stream)
                nursery.start_soon(self.read_loop)
                await self.input_ended.wait()
                # End of input: no answers to our questions can come any more, and
                # what still runs (and the writing of its answers) gets drain_timeout.
                self.start_draining()
                self.input_closed = True
                end_subscriptions(self.app)
                for scope in self.legacy_waits:
                    scope.cancel()
            await self.outbox.aclose()  # every request has ended: the writer flushes and ends

    def start_draining(self) -> None:
        """Everything left (the read loop's last replies included) gets ``drain_timeout``."""
        if not self.draining:
            self.draining = True
            assert self.everything is not None
            self.everything.deadline = self.clock() + self.drain_timeout

    async def read_loop(self) -> None:
        """Read and dispatch until the input ends (then set ``input_ended``), unless this
        task became a request's (``start_request``): a new task has taken over reading."""
        conn = self.conn
        assert self.receive is not None
        receive = self.receive
        handed_over = False
        try:
            while not self.output_broken:
                event = conn.next_event(self.clock())
                if event is m.NEED_DATA:
                    try:
                        data = await receive()
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        data = b""
                    if not data:
                        # The drain time starts now, not when the connection says it is
                        # closed: replying to what is left (a last line without its
                        # newline) waits for the writer, which may never get to write.
                        self.start_draining()
                    conn.receive_data(data)
                    continue
                if isinstance(event, m.ConnectionClosed):
                    return
                if isinstance(event, m.Request):
                    handed_over = await self.start_request(event)
                    if handed_over:
                        return
                    continue
                await self.dispatch(event)
        finally:
            if not handed_over:
                self.input_ended.set()

    async def start_request(self, request: m.Request) -> bool:
        """Run ``request`` at once in this task, as far as it goes without waiting; True
        when it had to wait: this task then carries it to its end and a new task reads on.

        Most legs never wait (the app answers, the answer goes straight to the pipe), and
        running them here saves a task and a pass of the run loop each.  The request runs
        in a copy of the context, as a task of its own would; it enters its cancel scope
        itself, so a ``notifications/cancelled`` finds it whichever task carries it.
        """
        assert self.nursery is not None
        # Every slot taken means answered requests wait for the writer: the peer is not
        # reading.  Stop reading too (its requests wait in the pipe) until one is handed
        # over.  (While the slots are held by handlers still running, the connection
        # refuses requests past max_incoming and never gets here.)
        try:
            self.slots.acquire_nowait()  # (no checkpoint: the read loop has its own)
        except anyio.WouldBlock:
            await self.slots.acquire()
        # Registered now, so a cancellation that arrives before it runs counts.
        self.running[request.id] = self.new_scope()
        context = contextvars.copy_context()
        coro = self.run_request(request)
        try:
            trap = context.run(coro.send, None)
        except StopIteration:
            return False
        self.nursery.start_soon(self.read_loop)
        await _carry_on(context, coro, trap)
        return True

    async def dispatch(self, event: Any) -> None:
        conn = self.conn
        if isinstance(event, m.AutoReply):
            started = time.perf_counter()
            data = conn.send(event.reply)
            await self.put(data)
            if self.access_where is not None:  # (server/discover, ping: answered by conn)
                log_rpc(self.access_where, event.request, event.reply, bool(data), started)
        elif isinstance(event, m.InvalidMessage):
            log.warning("bad input: %s", event.error.message)
            if event.reply is not None:
                await self.put(conn.send(event.reply))
        elif isinstance(event, m.RequestCancelled):
            scope = self.running.get(event.request_id)
            if scope is not None:
                scope.cancel()
        elif isinstance(event, (m.ResultResponse, m.ErrorResponse)):
            flow = self.questions.pop(event.id, None) if event.id is not None else None
            if flow is not None:
                flow.deliver(event)
            else:
                log.warning("the client could not read one of our messages: %s", event)
        elif isinstance(event, m.SessionOpened):
            log.info(
                "2025-era session opened: %s, client %s", event.protocol_version, event.peer_info
            )
        # Other notifications: nothing for an app to do with them.

    async def run_request(self, request: m.Request) -> None:
        conn = self.conn
        info = conn.request_info(request.id)
        outlet = ConnectionOutlet(conn, request.id, self.write)
        scope = self.running[request.id]
        started = time.perf_counter() if self.access_where is not None else 0.0
        response: m.ResultResponse | m.ErrorResponse | None = None
        data = b""
        try:
            if info.era == "legacy" and request.method in m._meta.MRTR_METHODS:
                response = await run_legacy(
                    self.app,
                    conn,
                    request,
                    info,
                    outlet,
                    scope,
                    questions=self.questions,
                    write=self.write,
                    next_answer=self.wait_for_answer,
                    unanswered=self.unanswered,
                )
                response, data = send_response(conn, response)
                await self.put(data)
                return
            outcome: Outcome = m.MrtrError("cancelled by the client")
            with scope:
                outcome = await run_app(self.app, request, info, outlet)
            # Cancelled by the client: the connection sends nothing for it (b""), but
            # sending the outcome releases the request's id.
            response, data = send_response(conn, response_for(request.id, outcome))
            await self.put(data)
        finally:
            if self.access_where is not None:
                log_rpc(self.access_where, request, response, bool(data), started)
            del self.running[request.id]
            self.slots.release()  # its response is with the writer (or never will be)

    def unanswered(self) -> str:
        return "closed its input" if self.input_closed else "did not answer in time"

    async def wait_for_answer(self, flow: LegacyFlow) -> m.ResultResponse | m.ErrorResponse | None:
        """The next answer; ``None`` at the end of input or past ``legacy_answer_timeout``."""
        if self.input_closed and not flow.inbox:
            return None
        waiting = anyio.CancelScope()
        if self.legacy_answer_timeout is not None:
            waiting.deadline = self.clock() + self.legacy_answer_timeout
        self.legacy_waits.add(waiting)
        try:
            with waiting:
                return await flow.next_answer()
            return None
        finally:
            self.legacy_waits.discard(waiting)
