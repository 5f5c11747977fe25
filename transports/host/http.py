"""The host: an ASGI 3 server on anyio and h11 that bounds every connection.

``serve_asgi(app, host, port)`` serves any ASGI 3 application over HTTP/1.1 on
trio or asyncio (whichever loop runs it) until cancelled; ``AsgiHost`` is the
same as an object that can also be closed gracefully.  It knows HTTP/1.1 and
ASGI (``http``, ``websocket`` and ``lifespan`` scopes, request bodies as they
arrive, streaming responses, ``http.disconnect``), not MCP: the MCP endpoint
is the app (``mrtr_transports.asgi.McpAsgi``).

What it adds to a plain ASGI server is the bounds of ``mrtr serve --http``
(``bounds.py``, with that server's defaults): connection slots with eviction of
waiting connections (``ConnectionSlots``), deadlines for the head and the body
from the first byte (so a trickled head is cut at ``head_timeout``), a head
size (431), a body size (413), a write timeout, and a lingering close for a
refused client (``refusals.py``).  The requests of one connection:
``connection.py``; a WebSocket upgrade (message size, pings): ``websocket.py``.

Shutdown: ``aclose(grace)`` stops taking requests (a new connection gets 503
with ``Retry-After`` before its request is read), calls ``on_drain`` (for an
MCP endpoint, ``McpAsgi.shutdown``: its listen streams end with their final
result rather than a cut), closes idle connections, lets running requests
finish for ``grace`` seconds (their responses say ``Connection: close``),
cancels the rest, then sends the app ``lifespan.shutdown`` (the ASGI order:
after the connections).  Cancelling ``serve`` cancels everything at once.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from .._loop import LoopTools
from ..server.access import access_enabled
from .asgi import AsgiApp
from .bounds import DEFAULT_SHUTDOWN_GRACE, HostBounds
from .connection import HostConnection
from .lifespan import Lifespan, LifespanFailure
from .refusals import close_lingering, refuse_busy, write_refusal
from .slots import ConnectionSlots

__all__ = ["AsgiHost", "serve_asgi"]

log = logging.getLogger("mrtr.host")

#: accept() errors that mean "out of resources now", not "the listener is broken":
#: wait a little and accept again (as trio's serve_listeners does).
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_ACCEPT_PAUSE = 0.1


async def serve_asgi(
    app: AsgiApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    **options: Any,
) -> None:
    """Serve ``app`` on ``http://host:port`` until cancelled.

    ``task_status.started()`` reports the bound ``(host, port)`` (useful with
    ``port=0``).  ``options``: the bounds (``max_connections``, ``max_header_size``,
    ``max_body_size``, ``idle_timeout``, ``head_timeout``, ``body_timeout``,
    ``write_timeout``; for WebSockets ``max_message_size``, ``ping_interval``,
    ``ping_timeout``: ``HostBounds``), ``root_path`` and ``on_drain``.
    """
    server = AsgiHost(app, **options)
    await server.serve(host, port, task_status=task_status)


class AsgiHost:
    """The host for one ASGI app; ``serve`` it, ``aclose`` it.

    ::

        host = AsgiHost(McpAsgi(app), on_drain=...)
        address = await task_group.start(host.serve, "127.0.0.1", 0)
        ...
        await host.aclose(grace=5.0)  # serve() returns
    """

    def __init__(
        self,
        app: AsgiApp,
        *,
        root_path: str = "",
        on_drain: Callable[[], object] | None = None,
        **bounds: Any,
    ) -> None:
        self.app = app
        self.bounds = HostBounds(**bounds)
        self.root_path = root_path
        self.on_drain = on_drain
        self.slots = ConnectionSlots(self.bounds.max_connections)
        #: Whether each request leaves an access line (``access.py``): decided now.
        self.access_log = access_enabled()
        #: Refused connections closing lingeringly (refusals.py): as many as the slots.
        self.lingering = anyio.CapacityLimiter(self.bounds.max_connections)
        self.closing = False
        self.address: tuple[str, int] | None = None
        #: What the app's lifespan startup left in its state: copied into each scope.
        self.state: dict[str, Any] = {}
        self._lifespan = Lifespan(app)
        self._connections: set[HostConnection] = set()
        self._all_closed = anyio.Event()
        self._all_closed.set()
        self._drained = anyio.Event()
        self._stopped = anyio.Event()
        self._serving = False
        #: The loop's clock and cancel scopes, looked up once (``serve``, inside the loop).
        self.loop: LoopTools | None = None

    # --- Life cycle ---

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` and serve until ``aclose`` or cancellation."""
        if self._serving:
            raise RuntimeError("an AsgiHost serves once")
        self._serving = True
        self.loop = LoopTools()
        failure: str | None = None
        try:
            async with anyio.create_task_group() as tasks:
                failure = await self._lifespan.startup(tasks)
                if failure is not None:
                    tasks.cancel_scope.cancel()
                    return
                self.state = self._lifespan.state
                listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
                async with listener:
                    bound = listener.extra(SocketAttribute.local_address)
                    self.address = (str(bound[0]), int(bound[1]))
                    async with anyio.create_task_group() as connections:
                        for one in listener.listeners:
                            assert isinstance(one, anyio.abc.SocketListener)
                            connections.start_soon(self._accept, one, connections)
                        task_status.started(self.address)
                        await self._drained.wait()
                        connections.cancel_scope.cancel()
                await self._lifespan.shutdown()
                tasks.cancel_scope.cancel()
        finally:
            self._stopped.set()
            if failure is not None:
                raise LifespanFailure(failure)

    async def aclose(self, grace: float = DEFAULT_SHUTDOWN_GRACE) -> None:
        """Stop taking requests; ``on_drain()``; give running requests ``grace`` seconds;
        cancel the rest; the app's lifespan shutdown."""
        if not self.closing:
            self.closing = True  # newcomers get 503 (_serve_connection) until the end
            if self.on_drain is not None:
                self.on_drain()
            for connection in list(self._connections):
                connection.shutdown()  # idle ones close now
            with anyio.move_on_after(grace):
                await self._all_closed.wait()
            self._drained.set()
        if self._serving:
            await self._stopped.wait()

    async def _accept(
        self, listener: anyio.abc.SocketListener, connections: anyio.abc.TaskGroup
    ) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                    raise
                log.error("accept: %s (waiting %s s)", exc, _ACCEPT_PAUSE)
                await anyio.sleep(_ACCEPT_PAUSE)
                continue
            connections.start_soon(self._serve_connection, stream)

    async def _serve_connection(self, stream: anyio.abc.SocketStream) -> None:
        request_bytes = self.bounds.request_bytes
        if self.closing:  # draining: a client or balancer is told to go elsewhere
            await write_refusal(stream, 503, "the server is shutting down: retry", retry_after=1)
            await close_lingering(stream, self.lingering, request_bytes)
            return
        connection = HostConnection(self, stream, _address(stream, True), _address(stream, False))
        assert self.loop is not None
        # (a waiting connection may be evicted for it)
        if not self.slots.admit(connection, self.loop.now()):
            log.warning("every connection is busy: refused %s", connection.peer)
            await refuse_busy(stream, self.lingering, request_bytes)
            return
        self._connections.add(connection)
        if self._all_closed.is_set():
            self._all_closed = anyio.Event()
        try:
            await connection.serve()
        except Exception:  # a bug here must not take the other connections down
            log.exception("connection from %s failed", connection.peer)
        finally:
            self._connections.discard(connection)
            self.slots.release(connection)
            if not self._connections:
                self._all_closed.set()
            with anyio.CancelScope(shield=True):
                if connection.stalled:  # it stopped reading: no more of our memory
                    connection.abort()
                    await anyio.aclose_forcefully(stream)
                elif connection.linger:  # refused while its client was still sending
                    await close_lingering(stream, self.lingering, request_bytes)
                else:
                    await anyio.aclose_forcefully(stream)


def _address(stream: anyio.abc.SocketStream, remote: bool) -> tuple[str, int] | None:
    """The peer's (``remote``) or our address of ``stream``, as ASGI's ``client``/``server``."""
    attribute = SocketAttribute.remote_address if remote else SocketAttribute.local_address
    try:
        address = stream.extra(attribute)
    except (OSError, anyio.TypedAttributeLookupError):
        return None
    if isinstance(address, tuple):
        return (str(address[0]), int(address[1]))
    return None
