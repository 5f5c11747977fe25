"""Serve a ``ServerApp`` over Streamable HTTP: 2026-07-28, and 2025-era sessions (trio + h11).

The model: one endpoint (``/mcp``) for both eras at once.  A 2026-07-28 client
only POSTs: every POST carries one JSON-RPC message and gets a fresh server
``mrtr_core.Connection`` (``framing="messages"``): 2026-07-28 has no sessions,
so nothing is shared between POSTs and the ids of different clients can never
collide.  A 2025-era client (its POST is an ``initialize``, names an
``Mcp-Session-Id`` or says a 2025 ``MCP-Protocol-Version``, and carries no 2026
``_meta``) gets a session: a long-lived connection of its own, SSE streams
with event ids and ``Last-Event-ID`` resumption, the legacy shim's questions
on each request's own stream, a standalone ``GET`` stream and ``DELETE``
(the endpoint's ``asgi/sessions.py``, ``asgi/session.py``, reached through
``sessions.py``; the rules: ``mrtr_core.protocol``).  For
each 2026-07-28 POST, in order:

1. ``Host`` and ``Origin`` are checked against allow-lists (DNS rebinding):
   by default only ``localhost``, ``127.0.0.1`` and ``[::1]`` on any port
   (``allowed_hosts`` adds names, ``name`` or ``name:port``; ``allowed_origins``
   adds exact origins, ``scheme://host[:port]``; ``"*"`` allows any).  A
   request without ``Origin`` is allowed, one with two is not.
   ``X-Forwarded-Host`` is believed only from ``trusted_proxies`` (addresses
   or networks).  A refusal is a 403 whose message names the setting to
   change.  (More than one ``Host`` is h11's 400.)
2. The path (404), the method (GET and DELETE without a session id, PUT, ...
   -> 405 with ``Allow: GET, POST, DELETE``),
   ``Accept`` (it must take ``application/json`` or ``text/event-stream``,
   else 406), ``Content-Type`` (JSON, else 415; more than one, 400) and the
   body size (413).
3. The headers that mirror the body are checked against it:
   ``MCP-Protocol-Version`` (= ``_meta`` protocolVersion), ``Mcp-Method``,
   ``Mcp-Name`` (tools/call, prompts/get: ``params.name``; resources/read:
   ``params.uri``) and ``Mcp-Param-*`` for the tool arguments annotated
   ``x-mcp-header`` in the tool's ``inputSchema``: the app says which
   (``ServerApp.tool_header_params``, as ``McpApp`` has; an app without it
   has none), or they are given as ``param_headers``.  Values in
   ``=?base64?...?=`` are decoded first.  Any mismatch, missing, repeated or
   malformed header is a 400 with JSON-RPC error -32020.
4. The connection reads the body.  A notification gets 202 with no body.
   What the connection answers itself (``server/discover``; bad input; a
   missing or malformed ``_meta``, -32602; an unsupported version, -32022) is
   sent as JSON.  A request runs the app.
5. The answer is ``application/json``, unless the handler streams: its first
   progress, log line or notification (one the connection actually sends)
   turns the response into a request-scoped SSE stream (``text/event-stream``,
   ``Cache-Control: no-cache``, ``X-Accel-Buffering: no``, never compressed),
   with a keep-alive comment every ``keepalive_interval`` seconds; the final
   response is the last event and ends the stream.  A client that accepts
   only ``text/event-stream`` always gets a stream; one that accepts only JSON
   never does (its notifications are dropped).

URL elicitation (``callback.py``, ``docs/url-elicitation.md``): an app with
``url_flows`` (every ``McpApp``) also gets ``GET {path}/{callback_path}``
(default ``/mcp/auth/callback``), where a provider sends the user's browser
back; ``public_url`` is the URL browsers reach the server at (behind a proxy),
from which the callback's absolute URL is made (default: the listening address).

HTTP status of a JSON error answer: -32601 -> 404; -32700, -32600, -32602,
-32020, -32021, -32022 -> 400; -32603 -> 500; any other code -> 200.
``ping`` and ``initialize`` carrying 2026 ``_meta`` are 2025-era methods in a
2026-07-28 request: 404 with -32601.

Cancellation: a client that closes the connection (or the SSE stream) while
its request runs cancels the handler, and nothing more is sent for it.

Bounds (every one an ``HttpServer`` option; why each default: docs/transports.md):

* ``max_body_size`` (4 MiB) per POST (413); ``max_header_size`` (16 KiB, h11's
  limit on a request head: 431 past it).
* ``max_connections`` (256) connections carrying requests.  A connection
  without a whole request yet (a fresh one, a head or body still arriving,
  a kept-alive one between requests) is *waiting*; when every slot is taken,
  a newcomer evicts the connection that has waited longest, one kept alive
  between requests before the others (a 503 with ``Retry-After`` if its
  request had begun or it had had none yet, else just the close).  A connection whose request
  runs is never evicted; only when every slot runs one is the newcomer
  refused: 503, ``Retry-After: 1``, a JSON-RPC error with code
  ``SERVER_BUSY`` (-32000).  Both refusals come before the request reaches
  the app, so a client may send it again as it is; both close the connection
  lingeringly (``refusals.py``), so a client still sending reads its 503.
* ``idle_timeout`` (60 s) for the first byte of a request, ``head_timeout``
  (10 s) from it to the end of the head, ``body_timeout`` (60 s) for the
  body (408 past either): deadlines, not timers a trickled byte resets.
  ``write_timeout`` (60 s) for the peer to take each write.
* ``subscriptions/listen`` streams live in their own pool, out of the
  connection slots: ``max_listen_streams`` (256) in all,
  ``max_listen_streams_per_client`` (8) for one client (its address; behind
  ``trusted_proxies``, the nearest untrusted ``X-Forwarded-For`` hop), each
  for ``listen_lifetime`` (600 s), after which the stream ends as the spec's
  graceful closure (the result ``{"_meta": {subscriptionId}}``) and the
  client opens a new one.  Past the share: 429, past the pool: 503, both with
  ``Retry-After`` (when the oldest stream in the way ends) and a JSON-RPC
  error (``SERVER_BUSY``, ``data.retryAfterSeconds``).  A listen stream's
  connection closes with the stream.

HTTP/1.1 keep-alive: many POSTs, one after another, on one connection.
``HEAD`` gets the status and headers a ``GET`` would (a 405 with
``Allow: POST`` at the endpoint), never a body.  Every error the server
writes (4xx, 5xx) has a JSON-RPC error response as its body (with the
request's id when it was read).

Health (``routes.py``): ``GET /healthz`` (``health_path``; ``None``: none) answers
``200 {"status":"ok"}``, or 503 once closing, before the Host, Origin and Accept
rules (a load balancer's probe meets none of them).  Access log (``access.py``):
with the logger ``mrtr.server.access`` at INFO when the server is made, each
request leaves a line; otherwise not one instruction more per request.

Shutdown: ``HttpServer.aclose(grace)`` stops taking requests (a new connection
gets 503 with ``Retry-After`` and ``Connection: close`` before its request is
read, so a client or balancer retries elsewhere), asks the app to end
its ``subscriptions/listen`` streams (``close_subscriptions()``, when the app
has it, as ``McpApp`` does: each stream gets its final result, not a cut),
closes idle connections, lets running handlers finish for ``grace`` seconds
(their responses are written, then their connections closed), then cancels
the rest.
A response the connection has produced is always written out (bounded by
``write_timeout``).  Cancelling ``serve`` cancels everything at once.

Run it: ``mrtr serve --http 127.0.0.1:0 --app MODULE:ATTR``
prints ``listening on http://127.0.0.1:PORT/mcp`` on stderr when ready.

2025-era sessions are bounded too: ``max_sessions`` (256) live at once (a
newcomer ends the one idle longest, or gets 503 when all are busy), each ending
after ``session_idle_timeout`` (1800 s) without work, each with a replay
buffer of ``replay_buffer_events`` (256) and ``replay_buffer_bytes`` (256 KiB);
a question of the legacy shim waits ``legacy_answer_timeout`` (300 s) for its
answer.  Sessions' SSE streams (a request's, a GET's) live out of the
connection slots in a pool of their own: ``max_session_streams`` (256) in all,
``max_streams_per_session`` (16) for one session (503 with ``Retry-After``).
A request without 2026 ``_meta`` that is none of the 2025-era kinds
gets the connection's -32602 naming the 2026 version to use.

The parts: ``limits.py`` (connection slots), ``exchange.py`` (one TCP
connection's h11 requests and their answers), ``sessions.py`` (the way into
the endpoint's 2025-era side), ``routes.py`` (the health check and the URL
callback written with h11), ``refusals.py`` (refusals written to a connection),
this module (the server object, ``serve_http``).  What is the endpoint's has its
home in ``mrtr_transports.asgi`` (``McpAsgi``'s package): who may talk
(``policy.py``), the listen and session pools (``pools.py``), the sessions,
the health and callback pages; the header and session rules are the core's
(``mrtr_core.protocol``).  This server goes once ``mrtr serve --http`` runs the
endpoint on the project's ASGI host.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import trio

import mrtr_core as m

from ...asgi.sessions import SessionEndpoint
from ..access import access_enabled
from ..app import ServerApp, tool_header_params
from ..driver import end_subscriptions
from ..legacy import DEFAULT_LEGACY_ANSWER_TIMEOUT
from .callback import CURRENT_CALLBACK_URL, DEFAULT_CALLBACK_PATH, callback_route
from .exchange import HttpConnection
from .limits import ConnectionSlots, ListenPool, check_bounds
from .policy import AccessPolicy
from .refusals import close_lingering, refuse_busy, write_refusal
from .routes import DEFAULT_HEALTH_PATH, CallbackAdapter, HealthRoute, SideRoute

__all__ = ["DEFAULT_MAX_BODY_SIZE", "HttpServer", "serve_http"]

log = logging.getLogger("mrtr.server.http")

DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024
DEFAULT_MAX_HEADER_SIZE = 16 * 1024
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_KEEPALIVE_INTERVAL = 15.0
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_HEAD_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 60.0
DEFAULT_WRITE_TIMEOUT = 60.0
DEFAULT_MAX_LISTEN_STREAMS = 256
DEFAULT_MAX_LISTEN_STREAMS_PER_CLIENT = 8
DEFAULT_LISTEN_LIFETIME = 600.0
DEFAULT_SHUTDOWN_GRACE = 10.0
DEFAULT_MAX_SESSIONS = 256
DEFAULT_SESSION_IDLE_TIMEOUT = 1800.0
DEFAULT_REPLAY_EVENTS = 256
DEFAULT_REPLAY_BYTES = 256 * 1024
DEFAULT_MAX_SESSION_STREAMS = 256
DEFAULT_MAX_STREAMS_PER_SESSION = 16


async def serve_http(
    app: ServerApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    **options: Any,
) -> None:
    """Serve ``app`` at ``http://host:port/path`` until cancelled.

    ``task_status.started()`` reports the bound ``(host, port)`` (useful with
    ``port=0``).  ``options``: the ``HttpServer`` settings (``path``,
    ``allowed_hosts``, ``max_body_size``, ``idle_timeout``, ...) and
    ``mrtr_core.Connection`` options.
    """
    server = HttpServer(app, **options)
    await server.serve(host, port, task_status=task_status)


class HttpServer:
    """The Streamable HTTP endpoint for one app; ``serve`` it, ``aclose`` it.

    ::

        server = HttpServer(app)
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        ...
        await server.aclose(grace=5.0)  # serve() returns
    """

    def __init__(
        self,
        app: ServerApp,
        *,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
        trusted_proxies: Iterable[str] = (),
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        head_timeout: float = DEFAULT_HEAD_TIMEOUT,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        max_listen_streams: int = DEFAULT_MAX_LISTEN_STREAMS,
        max_listen_streams_per_client: int = DEFAULT_MAX_LISTEN_STREAMS_PER_CLIENT,
        listen_lifetime: float = DEFAULT_LISTEN_LIFETIME,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
        replay_buffer_events: int = DEFAULT_REPLAY_EVENTS,
        replay_buffer_bytes: int = DEFAULT_REPLAY_BYTES,
        legacy_answer_timeout: float = DEFAULT_LEGACY_ANSWER_TIMEOUT,
        max_session_streams: int = DEFAULT_MAX_SESSION_STREAMS,
        max_streams_per_session: int = DEFAULT_MAX_STREAMS_PER_SESSION,
        param_headers: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        public_url: str | None = None,
        callback_path: str = DEFAULT_CALLBACK_PATH,
        health_path: str | None = DEFAULT_HEALTH_PATH,
        **connection_options: Any,
    ) -> None:
        check_bounds(
            (
                ("max_body_size", max_body_size),
                ("max_header_size", max_header_size),
                ("max_connections", max_connections),
                ("max_listen_streams", max_listen_streams),
                ("max_listen_streams_per_client", max_listen_streams_per_client),
                ("max_sessions", max_sessions),
                ("replay_buffer_events", replay_buffer_events),
                ("replay_buffer_bytes", replay_buffer_bytes),
                ("max_session_streams", max_session_streams),
                ("max_streams_per_session", max_streams_per_session),
            ),
            (
                ("idle_timeout", idle_timeout),
                ("head_timeout", head_timeout),
                ("body_timeout", body_timeout),
                ("write_timeout", write_timeout),
                ("listen_lifetime", listen_lifetime),
                ("session_idle_timeout", session_idle_timeout),
                ("legacy_answer_timeout", legacy_answer_timeout),
            ),
        )
        self.app = app
        self.path = path
        self.policy = AccessPolicy(allowed_hosts, allowed_origins, trusted_proxies)
        self.max_body_size = max_body_size
        self.max_header_size = max_header_size
        self.keepalive_interval = keepalive_interval
        self.idle_timeout = idle_timeout
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.write_timeout = write_timeout
        versions = connection_options.pop("versions", m.ALL_VERSIONS)
        common: dict[str, Any] = {
            "info": app.info,
            "capabilities": app.capabilities,
            "instructions": app.instructions,
            **connection_options,
        }
        #: Each 2026-07-28 POST's connection: initialize is a session's (sessions.py).
        self.connection_options = {
            **common,
            "versions": tuple(v for v in versions if v in m.MODERN_VERSIONS),
        }
        m.Connection(m.SERVER, framing="messages", **self.connection_options)  # options fail now
        #: The connection of each 2025-era session (its initialize negotiates the version).
        session_versions = tuple(versions)
        self.sessions = SessionEndpoint(
            app,
            max_sessions=max_sessions,
            idle_timeout=session_idle_timeout,
            replay_events=replay_buffer_events,
            replay_bytes=replay_buffer_bytes,
            legacy_answer_timeout=legacy_answer_timeout,
            max_streams=max_session_streams,
            max_streams_per_session=max_streams_per_session,
            keepalive_interval=keepalive_interval,
            write_timeout=write_timeout,
            connection_options={**common, "versions": session_versions},
        )
        self.address: tuple[str, int] | None = None
        self.closing = False
        self.slots = ConnectionSlots(max_connections)
        #: Refused connections closing lingeringly (refusals.py): as many as the slots.
        self.lingering = trio.CapacityLimiter(max_connections)
        self.listens = ListenPool(
            max_listen_streams, max_listen_streams_per_client, listen_lifetime
        )
        self._connections: set[HttpConnection] = set()
        self._all_closed = trio.Event()
        self._all_closed.set()
        self._stopped = trio.Event()
        self._accept_scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._fixed_header_params = param_headers
        # URL elicitation (callback.py): the app's callback route, if it has URL flows.
        self.public_url = public_url
        self.callback = callback_route(
            app,
            endpoint=path,
            callback_path=callback_path,
            allowed_hosts=allowed_hosts,
            trusted_proxies=trusted_proxies,
            public_url=public_url,
        )
        #: The absolute callback URL (known once serving: from ``public_url`` or the address).
        self.callback_url: str | None = None
        #: Paths beside the endpoint, with rules of their own (``routes.py``).
        self.routes: dict[bytes, SideRoute] = {}
        if self.callback is not None:
            self.routes[self.callback.path.encode("latin-1")] = CallbackAdapter(self.callback)
        if health_path is not None:
            if not health_path.startswith("/") or health_path == path:
                raise ValueError(f"health_path must be a path of its own, not {health_path!r}")
            self.routes[health_path.encode("latin-1")] = HealthRoute(self)
        #: The access log's connection class while it is on (``access.py``), else the plain one.
        self.connection_class = HttpConnection
        if access_enabled():
            from .access import LoggedHttpConnection

            self.connection_class = LoggedHttpConnection

    # --- Life cycle ---

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` and serve until ``aclose`` or cancellation."""
        if self._nursery is not None or self._stopped.is_set():
            raise RuntimeError("an HttpServer serves once")
        listeners = await trio.open_tcp_listeners(port, host=host)
        if port == 0:  # each address family would get its own free port: keep one
            for extra in listeners[1:]:
                await extra.aclose()
            listeners = listeners[:1]
        bound = listeners[0].socket.getsockname()
        self.address = (str(bound[0]), int(bound[1]))
        if self.callback is not None:
            self.callback_url = self._base_url() + self.callback.path
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.sessions.run)
                nursery.start_soon(self._accept, listeners, nursery)
                task_status.started(self.address)
        finally:
            self._stopped.set()

    async def _accept(self, listeners: list[trio.SocketListener], nursery: trio.Nursery) -> None:
        with self._accept_scope:
            await trio.serve_listeners(self._serve_connection, listeners, handler_nursery=nursery)

    async def aclose(self, grace: float = DEFAULT_SHUTDOWN_GRACE) -> None:
        """Stop accepting; end the app's listen streams (``close_subscriptions``);
        give running requests ``grace`` seconds; cancel the rest."""
        if not self.closing:
            self.closing = True  # newcomers get 503 (_serve_connection) until the end
            end_subscriptions(self.app)  # open listen streams get their final result
            self.sessions.shutting_down()  # their standalone streams end
            for connection in list(self._connections):
                connection.shutdown()  # idle ones close now
            with trio.move_on_after(grace):
                await self._all_closed.wait()
            self.sessions.close_all()  # what 2025-era sessions still run is cancelled
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()
        if self._nursery is not None:
            await self._stopped.wait()

    def _base_url(self) -> str:
        """``public_url`` (its scheme and authority), else the listening address."""
        if self.public_url is not None:
            return self.public_url.rstrip("/").removesuffix(self.path.rstrip("/"))
        assert self.address is not None
        host, port = self.address
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # reachable from here
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        if self.closing:  # draining: a client or balancer is told to go elsewhere
            await write_refusal(stream, 503, "the server is shutting down: retry", retry_after=1)
            await close_lingering(stream, self.lingering, self._request_bytes())
            return
        CURRENT_CALLBACK_URL.set(self.callback_url)  # this connection's task: its handlers
        connection = self.connection_class(self, stream)
        if not self.slots.admit(connection):  # (a waiting connection may be evicted for it)
            log.warning("every connection is busy: refused %s", connection.peer)
            await refuse_busy(stream, self.lingering, self._request_bytes())
            return
        self._connections.add(connection)
        if self._all_closed.is_set():
            self._all_closed = trio.Event()
        try:
            await connection.serve()
        except Exception:  # a bug here must not take the other connections down
            log.exception("connection from %s failed", connection.peer)
        finally:
            self._connections.discard(connection)
            self.slots.release(connection)
            if not self._connections:
                self._all_closed.set()
            if connection.linger:  # refused while its client was still sending
                await close_lingering(stream, self.lingering, self._request_bytes())
            else:
                await trio.aclose_forcefully(stream)

    def _request_bytes(self) -> int:
        """The most a lingering close reads: one request's worth."""
        return self.max_header_size + self.max_body_size

    # --- x-mcp-header annotations ---

    def header_params(self, tool: str) -> Mapping[str, Sequence[str]] | None:
        """The ``Mcp-Param-*`` headers of ``tool`` (header name -> argument path): the
        ``param_headers`` given for it, else the app's ``tool_header_params``."""
        if self._fixed_header_params is not None:
            return self._fixed_header_params.get(tool)
        return tool_header_params(self.app, tool)
