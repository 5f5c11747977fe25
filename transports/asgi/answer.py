"""One request's answer over ASGI: JSON, or a request-scoped SSE stream once the handler streams.

The answer is ``application/json`` unless the handler streams; its first progress,
log line or notification that the connection actually sends turns the response
into an SSE stream (``SSE_RESPONSE_HEADERS``), with a keep-alive comment every
``keepalive_interval`` seconds while the handler runs, and the final response
as its last event.  A client that accepts only ``text/event-stream`` always gets
a stream; one that accepts only JSON never does (its notifications are dropped).

While the handler runs, a watcher waits on ``receive()``: an
``http.disconnect`` (the client closed the connection or the stream) cancels the
handler, and nothing more is sent for it.

Why anyio: waiting for the client's disconnect while the handler runs, and
sending keep-alives on a timer, need a task group, a cancel scope and a sleep;
anyio gives exactly those on asyncio (uvicorn) and on trio (hypercorn's trio
worker) alike, and the ASGI stack already stands on it (Starlette, the
official SDK).  Everything else (reading the body, the checks, running the
app) needs no event loop feature at all.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, MutableMapping
from typing import Any, TypeVar, cast

import anyio
import anyio.abc

import mrtr_core as m

__all__ = [
    "LONG_LIVED",
    "SSE_HEADERS",
    "Receive",
    "Scope",
    "Send",
    "Sender",
    "StreamingAnswer",
    "send_whole",
]

log = logging.getLogger("mrtr.server.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

T = TypeVar("T")

SSE_HEADERS = [(k.encode(), v.encode()) for k, v in m.http._post.SSE_RESPONSE_HEADERS]
#: What a long-lived response (a listen stream, a session's stream) adds to its head: its
#: connection ends with it, so a host that bounds connections takes it out of its slots
#: at once (the endpoint's own pools bound these streams instead: ``pools.py``).
LONG_LIVED = [(b"connection", b"close")]


async def send_whole(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: bytes = b"application/json",
    extra: list[tuple[bytes, bytes]] | None = None,
    head_only: bool = False,
) -> None:
    """A whole response; to a ``HEAD`` request its headers only (RFC 9110, 9.3.2)."""
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        *(extra or ()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head_only else body})


class Sender:
    """A response's ASGI messages, one at a time (keep-alives and events take turns),
    each never cut by a cancellation; a client that does not take one within
    ``write_timeout``, or is gone, only loses it: ``gone`` is set and ``on_lost()``
    called (the caller stops, as for a disconnect)."""

    def __init__(
        self, send: Send, write_timeout: float, on_lost: Callable[[], None] | None = None
    ) -> None:
        self._send = send
        self.write_timeout = write_timeout
        self.on_lost = on_lost
        self.gone = False
        #: Made at the first write: most answers are JSON, sent without a Sender.
        self._lock: anyio.Lock | None = None

    async def __call__(self, message: Message) -> None:
        if self.gone:
            return
        if self._lock is None:
            self._lock = anyio.Lock()
        with anyio.CancelScope(shield=True) as scope:
            scope.deadline = anyio.current_time() + self.write_timeout
            async with self._lock:
                try:
                    await self._send(message)
                except OSError:  # (uvicorn's ClientDisconnected)
                    self.lost()
        if scope.cancelled_caught:
            self.lost()

    def lost(self) -> None:
        """The client went away (a disconnect, a write it did not take)."""
        if not self.gone:
            self.gone = True
            if self.on_lost is not None:
                self.on_lost()

    async def start_stream(self) -> None:
        """A session's stream: long-lived."""
        headers = SSE_HEADERS + LONG_LIVED
        await self({"type": "http.response.start", "status": 200, "headers": headers})

    async def body(self, data: bytes, *, more: bool) -> None:
        await self({"type": "http.response.body", "body": data, "more_body": more})


@types.coroutine
def run_inline(
    coro: Coroutine[Any, Any, T], on_wait: Callable[[], object]
) -> Generator[Any, Any, T]:
    """``await coro``, calling ``on_wait()`` just before it first waits on the event loop
    (yields to it); never, when it finishes at once.

    Why: a concurrent task (the disconnect watcher) costs a spawn and several
    scheduler steps per request; most handlers answer without waiting, and one
    that never waits cannot be cancelled either.  ``coro`` runs in the caller's
    task and cancel scopes throughout, as ``await coro`` would run it.
    """
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    try:
        on_wait()
    except BaseException:
        coro.close()
        raise
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # a cancellation, delivered into the handler
            try:
                yielded = coro.throw(exc)
            except StopIteration as done:
                return cast(T, done.value)
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as done:
                return cast(T, done.value)


async def watch_disconnect(receive: Receive, sender: Sender) -> None:
    """While a response is written: the client's ``http.disconnect`` is ``sender.lost()``."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            sender.lost()
            return


class StreamingAnswer:
    """The response to one request: JSON, or an SSE stream once the handler streams.

    ``run(handler)`` runs the handler with the disconnect watcher (and, once
    streaming, the keep-alives) beside it; ``finish(...)`` sends the final answer.
    """

    def __init__(
        self,
        receive: Receive,
        send: Send,
        *,
        json_ok: bool,
        sse_ok: bool,
        keepalive: float,
        write_timeout: float,
        long_lived: bool = False,
        helpers: anyio.abc.TaskGroup | None = None,
        cancel_scope: Callable[..., anyio.CancelScope] = anyio.CancelScope,
    ) -> None:
        self._receive = receive
        self._send = send
        self.json_ok = json_ok
        self.sse_ok = sse_ok
        self.keepalive = keepalive
        self.write_timeout = write_timeout
        self.streaming = False
        #: A listen stream: its head says ``LONG_LIVED``.
        self.extra_headers = LONG_LIVED if long_lived else []
        self._sender = Sender(send, write_timeout, self._lost)
        self._tasks: anyio.abc.TaskGroup | None = None
        self._spawned = False  # a task was started in ``_tasks``
        self._handler_scope: anyio.CancelScope | None = None
        #: A task group that outlives the request (the endpoint's, while its lifespan
        #: runs), where the watcher and the keep-alives run: a request whose handler
        #: answers at once then costs no task group of its own (a nursery per request
        #: was a tenth of a plain call's CPU on trio).
        self._helpers = helpers
        #: ``anyio.CancelScope``, or the backend's own class (no backend lookup).
        self._cancel_scope = cancel_scope
        self._helper_scopes: list[anyio.CancelScope] = []
        self._running = False  # the handler runs: helpers may start
        #: Helpers spawned and not yet ended, and the event of their end: ``run`` returns
        #: only after them, as a task group would (the watcher reads what the next
        #: request on the connection reads).
        self._live_helpers = 0
        self._helpers_ended: anyio.Event | None = None

    async def run(
        self, handler: Callable[[], Coroutine[Any, Any, Any]], deadline: float
    ) -> tuple[Any, bool]:
        """``await handler()`` until it returns, the client disconnects (cancelled:
        ``gone``) or ``deadline`` passes; (its value or ``None``, whether the deadline
        cut it)."""
        value: Any = None
        returned = False
        if self._helpers is not None:  # helpers beside, in the long-lived group
            with self._cancel_scope(deadline=deadline) as scope:
                self._handler_scope = scope
                self._running = True
                try:
                    value = await run_inline(handler(), lambda: self._spawn(self._watch))
                    returned = True
                finally:
                    self._running = False
                    self._handler_scope = None
                    for helper in self._helper_scopes:
                        helper.cancel()
            if self._helpers_ended is not None:
                await self._helpers_ended.wait()
            return value, not returned and not self.gone
        # The task group's own scope is the handler's (one scope less per request): a
        # disconnect or the deadline ends the handler, the watcher and the keep-alives.
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            self._handler_scope = tasks.cancel_scope
            tasks.cancel_scope.deadline = deadline
            self._running = True
            # The watcher only once the handler waits: one that answers at once (no
            # await reached the loop) could not have been cancelled anyway.
            try:
                value = await run_inline(handler(), lambda: self._spawn(self._watch))
                returned = True
            finally:
                self._running = False
                self._tasks = self._handler_scope = None
            if self._spawned:  # (a cancel is a scheduler trip of its own on asyncio)
                tasks.cancel_scope.cancel()  # the watcher and the keep-alives
        return value, not returned and not self.gone

    def _spawn(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._spawned = True
        if self._helpers is not None:
            if not self._live_helpers:  # (one may have ended already: a new event)
                self._helpers_ended = anyio.Event()
            self._live_helpers += 1
            self._helpers.start_soon(self._helper, task)
        else:
            assert self._tasks is not None
            self._tasks.start_soon(task)

    async def _helper(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """``task`` in the long-lived group, until the handler is done; a failure is
        this request's (the client is given up), never the group's."""
        try:
            with anyio.CancelScope() as scope:
                if not self._running:  # the handler finished before this task began
                    return
                self._helper_scopes.append(scope)
                await task()
        except Exception:
            log.exception("a response's helper task failed")
            self._sender.lost()
        finally:
            self._live_helpers -= 1
            if not self._live_helpers and self._helpers_ended is not None:
                self._helpers_ended.set()

    @property
    def gone(self) -> bool:
        """The client went away (``http.disconnect``, a write it did not take)."""
        return self._sender.gone

    async def _watch(self) -> None:
        """While the handler runs: the client's disconnect is its cancellation."""
        await watch_disconnect(self._receive, self._sender)

    async def notify(self, data: bytes) -> None:
        """The outlet's write: the first notification opens the stream."""
        if not data or self.gone or not self.sse_ok:
            return  # nothing due, nobody listening, or a client that takes JSON only
        if not self.streaming:
            await self._start()
        await self._body(m.http.encode_sse(data.decode()), more=True)

    async def _start(self) -> None:
        self.streaming = True
        headers = SSE_HEADERS + self.extra_headers
        await self._write({"type": "http.response.start", "status": 200, "headers": headers})
        if self._running and self.keepalive > 0:
            self._spawn(self._keepalives)

    async def _keepalives(self) -> None:
        while True:
            await anyio.sleep(self.keepalive)
            await self._body(m.http._sse.encode_sse_comment(), more=True)

    async def finish(self, response: m.ResultResponse | m.ErrorResponse, data: bytes) -> None:
        """The final response: the stream's last event, or a JSON body (its status by
        the error code), or a one-event stream for a client that takes only SSE."""
        if not self.streaming and self.json_ok:
            status = 200
            if isinstance(response, m.ErrorResponse):
                status = m.http.status_for_error(response.error.code)
            await send_whole(self._send, status, data, extra=self.extra_headers)
            return
        if not self.streaming:
            await self._start()
        await self._body(m.http.encode_sse(data.decode()), more=False)

    async def _body(self, data: bytes, *, more: bool) -> None:
        await self._write({"type": "http.response.body", "body": data, "more_body": more})

    async def _write(self, message: Message) -> None:
        await self._sender(message)

    def _lost(self) -> None:
        if self._handler_scope is not None:
            self._handler_scope.cancel()
