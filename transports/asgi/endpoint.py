"""``McpAsgi``: the Streamable HTTP endpoint of a ``ServerApp`` as an ASGI 3 app (both eras).

The model: one endpoint for 2026-07-28 and 2025-11-25 clients at once, with the
bytes, connections and timeouts left to the ASGI server that runs it (uvicorn,
hypercorn, the project's own host) and everything MCP taken from one place each:
who may talk (``policy.py``), what a POST must be
(``mrtr_core.http._post.post_refusal``), the header mirrors
(``header_refusal``), a fresh server ``mrtr_core.Connection`` per 2026-07-28
POST, the app run by ``run_app``, the answer (``answer.py``), the status of an
error (``mrtr_core.http.status_for_error``).  2026-07-28 has no sessions, so
nothing is shared between its POSTs, and any number of worker processes may
serve them (state a handler needs between rounds travels sealed in
``requestState``).  A 2025-era client (an ``initialize``, an
``Mcp-Session-Id``, a 2025 ``MCP-Protocol-Version``, no 2026 ``_meta``) gets a
session (``sessions.py``, ``session.py``): SSE streams with event ids,
``Last-Event-ID`` resumption, the legacy shim's questions, a GET stream and
DELETE; sessions live in one process, in the task group the ASGI ``lifespan``
holds (``McpAsgi.lifespan()`` for a framework that runs the lifespan itself;
without it, an ``initialize`` gets 400 with -32022 naming 2026-07-28).

For each HTTP request, in order:

1. The head's size (431 past ``max_header_size``, more than 256 fields or one
   over 8 KiB: ``host.bounds.head_refusal``, the host's rule; what the server let
   through, not measured again where the server says it did, ``server_checks_head``).
2. Paths with rules of their own, matched on the path alone: the health check
   (``health_path``, ``/healthz``: ``routes.py``) and the URL-elicitation
   callback (``{path}/{callback_path}`` for an app with ``url_flows``:
   ``callback.py``).
3. ``Host`` (one: 400 for more) and ``Origin`` against the allow-lists (403; loopback only by
   default, ``allowed_hosts``, ``allowed_origins``, ``trusted_proxies`` for
   ``X-Forwarded-Host``).
4. The path (404), relative to where the app is mounted (the ASGI
   ``root_path``); ``path=None`` serves any path that reaches it.  With
   ``auth=`` (``gate.py``, ``docs/auth.md``): the bearer token (401/400/403 with
   ``WWW-Authenticate``); its identity is the request's principal and client; a 2025
   session of another principal is 404.  (The protected-resource metadata is a side
   route of step 2.)
5. The method: ``GET`` and ``DELETE`` with an ``Mcp-Session-Id`` go to the
   session side; any other but POST gets 405 with ``Allow: GET, POST, DELETE``
   (a ``HEAD`` gets the headers alone).
6. ``Accept`` (406), ``Content-Type`` (415; two, 400), the body size (413:
   the declared length, then the bytes as they arrive; ``max_body_size``) and
   time (408 past ``body_timeout``, a deadline a trickled byte does not reset).
   A 2025-era message goes to the session side.
7. The headers that mirror the body (400, -32020), then the connection reads
   the body: a notification gets 202; what the connection answers itself
   (``server/discover``, bad input, a missing ``_meta``) is sent as JSON; a
   request runs the app and is answered as JSON or as an SSE stream.
   ``ping`` and ``initialize`` with 2026 ``_meta`` are 404 with -32601.
8. ``subscriptions/listen`` takes a place in the listen pool
   (``max_listen_streams`` in all, ``max_listen_streams_per_client``; 429 or
   503 with ``Retry-After``) and ends gracefully after ``listen_lifetime``.

A ``websocket`` scope at the path is MCP over WebSocket, one conversation per
WebSocket, both eras (``websocket.py``: the same Host/Origin/path rules and
statuses, then the ``mcp`` subprotocol).

Bounds that belong to the server that holds the connections, not here:
connections, head and read deadlines, keep-alive, trickling clients: see
docs/asgi.md for what uvicorn and hypercorn do and the settings that give each.

Shutdown: ``shutdown()`` ends the app's open listen streams with their final
result (``close_subscriptions``), ends sessions' standalone streams, refuses new
listen streams (503) and turns the health check to 503.  The lifespan calls it
at the shutdown event, then ends every session; uvicorn and hypercorn send that
only once their connections are done, so a stream still open then is ended by
the server's own grace period (``--timeout-graceful-shutdown``,
``--graceful-timeout``): keep ``listen_lifetime`` short, or call ``shutdown()``
yourself when shutdown begins.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

import mrtr_core as m

from .._loop import LoopTools
from .._shares import CURRENT_CLIENT, client_key
from ..auth.identity import CURRENT_IDENTITY
from ..auth.resource import AuthFailure, ResourceAuth
from ..host.bounds import check_bounds, head_refusal
from ..server.access import note_message
from ..server.app import ServerApp, run_app, tool_header_params
from ..server.driver import (
    DEFAULT_DRAIN_TIMEOUT,
    ConnectionOutlet,
    end_subscriptions,
    response_for,
    send_response,
)
from ..server.legacy import DEFAULT_LEGACY_ANSWER_TIMEOUT
from .answer import Receive, Scope, Send, StreamingAnswer, send_whole
from .callback import CURRENT_CALLBACK_URL, DEFAULT_CALLBACK_PATH, callback_route
from .gate import authenticate, call_refusal, failure_code, failure_headers, metadata_page
from .policy import AccessPolicy, Headers
from .pools import Lease, ListenPool, ListenRefusal
from .routes import DEFAULT_HEALTH_PATH, Page, health_page
from .sessions import SessionEndpoint
from .websocket import (
    DEFAULT_MAX_WEBSOCKETS,
    DEFAULT_MAX_WEBSOCKETS_PER_CLIENT,
    WebSocketSide,
)

__all__ = ["McpAsgi"]

log = logging.getLogger("mrtr.server.http")

DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024
DEFAULT_MAX_HEADER_SIZE = 16 * 1024
DEFAULT_KEEPALIVE_INTERVAL = 15.0
DEFAULT_WRITE_TIMEOUT = 60.0
DEFAULT_BODY_TIMEOUT = 60.0
DEFAULT_MAX_LISTEN_STREAMS = 256
DEFAULT_MAX_LISTEN_STREAMS_PER_CLIENT = 8
DEFAULT_LISTEN_LIFETIME = 600.0
DEFAULT_MAX_SESSIONS = 256
DEFAULT_SESSION_IDLE_TIMEOUT = 1800.0
DEFAULT_REPLAY_EVENTS = 256
DEFAULT_REPLAY_BYTES = 256 * 1024
DEFAULT_MAX_SESSION_STREAMS = 256
DEFAULT_MAX_STREAMS_PER_SESSION = 16
DEFAULT_MAX_SESSIONS_PER_CLIENT = 16
DEFAULT_MAX_SESSION_STREAMS_PER_CLIENT = 32
DEFAULT_SESSION_STREAM_LIFETIME = 600.0
DEFAULT_MAX_MESSAGE_SIZE = m.websocket._binding.DEFAULT_MAX_WEBSOCKET_MESSAGE
#: Callback URLs kept (``McpAsgi._callback_url``): one per address served, and then some.
_MAX_KEPT_URLS = 64


class McpAsgi:
    """An ASGI 3 application serving ``app`` at the Streamable HTTP endpoint (both eras).

    ::

        from mrtr_transports.asgi import McpAsgi
        asgi = McpAsgi(app)            # uvicorn module:asgi  /  hypercorn -k trio module:asgi

    Options: ``path`` (``"/mcp"``; ``None``: any), the access policy
    (``allowed_hosts``, ``allowed_origins``, ``trusted_proxies``), ``max_body_size``,
    ``max_header_size``, ``body_timeout``, ``keepalive_interval``, ``write_timeout``,
    the listen pool
    (``max_listen_streams``, ``max_listen_streams_per_client``, ``listen_lifetime``),
    2025-era sessions (``max_sessions``, ``max_sessions_per_client``,
    ``session_idle_timeout``, ``replay_buffer_events``, ``replay_buffer_bytes``,
    ``legacy_answer_timeout``, ``max_session_streams``, ``max_streams_per_session``,
    ``max_session_streams_per_client``, ``session_stream_lifetime``), the side routes
    (``public_url``, ``callback_path``, ``health_path``), ``param_headers`` (as
    ``HttpServer``), and ``mrtr_core.Connection`` options (``versions``: both eras
    by default).  Every default is ``HttpServer``'s (``mrtr serve --http``'s).

    A ``websocket`` scope at the path is MCP over WebSocket (``websocket.py``):
    ``max_websockets`` open at once, ``max_websockets_per_client`` of one client
    (429 past it), ``max_message_size`` bounds each message, ``drain_timeout`` is what a
    conversation's running requests get once its input ends;
    ``websocket_only=True`` refuses plain HTTP at the path (400), as
    ``mrtr serve --ws`` does.  ``server_checks_head=True``: the ASGI server
    already refuses a head larger than ``max_header_size`` (431), as the
    project's host does (``head_refusal``), so the endpoint does not measure it again.
    ``auth``: a ``mrtr_transports.auth.ResourceAuth``: every request at the path needs a
    token its verifier accepts, the metadata is published (``gate.py``, ``docs/auth.md``).
    """

    def __init__(
        self,
        app: ServerApp,
        *,
        path: str | None = "/mcp",
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
        trusted_proxies: Iterable[str] = (),
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
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
        max_sessions_per_client: int = DEFAULT_MAX_SESSIONS_PER_CLIENT,
        max_session_streams_per_client: int = DEFAULT_MAX_SESSION_STREAMS_PER_CLIENT,
        session_stream_lifetime: float = DEFAULT_SESSION_STREAM_LIFETIME,
        param_headers: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        public_url: str | None = None,
        callback_path: str = DEFAULT_CALLBACK_PATH,
        health_path: str | None = DEFAULT_HEALTH_PATH,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        websocket_only: bool = False,
        server_checks_head: bool = False,
        max_websockets: int = DEFAULT_MAX_WEBSOCKETS,
        max_websockets_per_client: int = DEFAULT_MAX_WEBSOCKETS_PER_CLIENT,
        auth: ResourceAuth | None = None,
        **connection_options: Any,
    ) -> None:
        check_bounds(
            (
                ("max_body_size", max_body_size),
                ("max_header_size", max_header_size),
                ("max_listen_streams", max_listen_streams),
                ("max_listen_streams_per_client", max_listen_streams_per_client),
                ("max_sessions", max_sessions),
                ("replay_buffer_events", replay_buffer_events),
                ("replay_buffer_bytes", replay_buffer_bytes),
                ("max_session_streams", max_session_streams),
                ("max_streams_per_session", max_streams_per_session),
                ("max_sessions_per_client", max_sessions_per_client),
                ("max_session_streams_per_client", max_session_streams_per_client),
                ("max_message_size", max_message_size),
                ("max_websockets", max_websockets),
                ("max_websockets_per_client", max_websockets_per_client),
            ),
            (
                ("write_timeout", write_timeout),
                ("body_timeout", body_timeout),
                ("listen_lifetime", listen_lifetime),
                ("session_idle_timeout", session_idle_timeout),
                ("legacy_answer_timeout", legacy_answer_timeout),
                ("session_stream_lifetime", session_stream_lifetime),
            ),
        )
        self.app = app
        self.path = path
        #: The authorization gate (``gate.py``): ``None`` serves whoever reaches the path.
        self.auth = auth
        self.policy = AccessPolicy(allowed_hosts, allowed_origins, trusted_proxies)
        self.max_body_size = max_body_size
        self.max_header_size = max_header_size
        self.server_checks_head = server_checks_head
        self.keepalive_interval = keepalive_interval
        self.write_timeout = write_timeout
        self.body_timeout = body_timeout
        self.listens = ListenPool(
            max_listen_streams, max_listen_streams_per_client, listen_lifetime
        )
        self._fixed_header_params = param_headers
        versions = connection_options.pop("versions", m.ALL_VERSIONS)
        common: dict[str, Any] = {
            "info": app.info,
            "capabilities": app.capabilities,
            "instructions": app.instructions,
            **connection_options,
        }
        #: Each 2026-07-28 POST's connection: initialize is a session's (sessions.py).
        self.connection_options: dict[str, Any] = {
            **common,
            "versions": tuple(v for v in versions if v in m.MODERN_VERSIONS),
        }
        m.Connection(m.SERVER, framing="messages", **self.connection_options)  # options fail now
        #: The 2025-era side; each session's connection negotiates its version at initialize.
        self.sessions = SessionEndpoint(
            app,
            max_sessions=max_sessions,
            max_sessions_per_client=max_sessions_per_client,
            idle_timeout=session_idle_timeout,
            replay_events=replay_buffer_events,
            replay_bytes=replay_buffer_bytes,
            legacy_answer_timeout=legacy_answer_timeout,
            max_streams=max_session_streams,
            max_streams_per_session=max_streams_per_session,
            max_streams_per_client=max_session_streams_per_client,
            stream_lifetime=session_stream_lifetime,
            keepalive_interval=keepalive_interval,
            write_timeout=write_timeout,
            connection_options={**common, "versions": tuple(versions)},
        )
        #: MCP over WebSocket (websocket.py): one conversation per WebSocket, both eras.
        self.websockets = WebSocketSide(
            app,
            path=path,
            policy=self.policy,
            max_message_size=max_message_size,
            legacy_answer_timeout=legacy_answer_timeout,
            drain_timeout=drain_timeout,
            connection_options={**common, "versions": tuple(versions)},
            max_websockets=max_websockets,
            max_websockets_per_client=max_websockets_per_client,
            auth=auth,
        )
        #: Plain HTTP at the path is refused (400): ``mrtr serve --ws``.
        self.websocket_only = websocket_only
        self.closing = False
        #: While the lifespan runs: the task group answers' watchers and keep-alives
        #: run in (``StreamingAnswer``), so that a request needs none of its own.
        self._helpers: anyio.abc.TaskGroup | None = None
        #: While the lifespan runs: the loop's clock and cancel scopes, looked up once
        #: (every request runs on the lifespan's loop); without it, anyio's, each time.
        self._loop: LoopTools | None = None
        #: The callback URL of each address requests came to (``_callback_url``).
        self._callback_urls: dict[tuple[Any, ...], str] = {}
        # URL elicitation (callback.py): the app's callback route, if it has URL flows.
        self.public_url = public_url
        self.callback = callback_route(
            app,
            endpoint=path or "",
            callback_path=callback_path,
            allowed_hosts=allowed_hosts,
            trusted_proxies=trusted_proxies,
            public_url=public_url,
        )
        if health_path is not None and (not health_path.startswith("/") or health_path == path):
            raise ValueError(f"health_path must be a path of its own, not {health_path!r}")
        self.health_path = health_path

    def shutdown(self) -> None:
        """The server is stopping: the app's listen streams end with their final result,
        sessions' standalone streams end; the health check says ``draining``."""
        if not self.closing:
            self.closing = True
            end_subscriptions(self.app)
            self.sessions.shutting_down()
            self.websockets.stop_reading()

    @asynccontextmanager
    async def lifespan(self, *_: Any) -> AsyncIterator[None]:
        """Where 2025-era sessions live while it is entered: the ASGI ``lifespan`` enters
        it; so may a framework that runs the lifespan itself (Starlette's ``lifespan=``
        takes it as it is).  On exit, ``shutdown()`` and every session ends."""
        async with anyio.create_task_group() as tasks:
            await tasks.start(self.sessions.run)
            self._helpers = tasks
            self._loop = LoopTools()
            try:
                yield
            finally:
                self._helpers = None
                self._loop = None
                self.shutdown()
                self.sessions.close_all()
                tasks.cancel_scope.cancel()

    def header_params(self, tool: str) -> Mapping[str, Sequence[str]] | None:
        """The ``Mcp-Param-*`` headers of ``tool``: ``param_headers``, else the app's."""
        if self._fixed_header_params is not None:
            return self._fixed_header_params.get(tool)
        return tool_header_params(self.app, tool)

    # --- ASGI ---

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "websocket":
            await self.websockets.serve(scope, receive, send, _route_path(scope))
        else:
            raise ValueError(f"unsupported ASGI scope type {scope['type']!r}")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":  # (the protocol starts with startup)
            return
        async with self.lifespan():
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
        await send({"type": "lifespan.shutdown.complete"})

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope.get("headers", ()))
        client = scope.get("client")
        peer = str(client[0]) if client else None
        # As it came: ASGI servers uppercase it, ours does not (a method is case-sensitive:
        # ``post`` is not POST, RFC 9110 9.1).
        method = str(scope.get("method", "GET"))
        head_only = method == "HEAD"
        # (a kept-alive connection's next request may run in the same task: reset)
        CURRENT_IDENTITY.set(None)

        async def refuse(
            status: int,
            message: str,
            code: int = m.ErrorCode.INVALID_REQUEST,
            extra: list[tuple[bytes, bytes]] | None = None,
        ) -> None:
            body = m.http._post.error_body(message, code)
            await send_whole(send, status, body, extra=extra, head_only=head_only)

        if not self.server_checks_head:  # (a foreign server may let any head through)
            fields = scope.get("headers", ())
            head_too_large = head_refusal(_target_size(scope), fields, self.max_header_size)
            if head_too_large is not None:
                await refuse(431, head_too_large)
                return
        path = _route_path(scope)
        page = await self._side_route(scope, method, path, headers, peer)
        if page is not None:  # the health check, the URL callback: rules of their own
            await send_whole(
                send,
                page.status,
                page.body,
                content_type=page.content_type,
                extra=page.headers,
                head_only=head_only,
            )
            return
        if len(headers.get_all("host")) > 1:  # (h11 refuses it first; not every parser does)
            await refuse(400, "multiple Host headers: a request names one host")
            return
        refusal = self.policy.refusal(headers, peer)
        if refusal is not None:
            log.warning("refused: %s", refusal)
            await refuse(403, refusal)
            return
        # Whose share of every pool this request fills (the app's stores read it as
        # Context.client; a 2025 session's tasks inherit it).
        client = client_key(None, self.policy.client_of(headers, peer))
        CURRENT_CLIENT.set(client)
        if self.path is not None and path != self.path:
            await refuse(404, f"no MCP endpoint at {path!r}: use {self.path!r}")
            return
        if self.websocket_only:  # (an upgrade refused is no HTTP connection to keep)
            close = [(b"connection", b"close")]
            message = "not a WebSocket upgrade: MCP is served over WebSocket here"
            await refuse(400, message, extra=close)
            return
        if self.auth is not None:
            try:
                identity = await authenticate(self.auth, scope, headers)
            except AuthFailure as failure:
                code = failure_code(failure)
                await refuse(failure.status, failure.message, code, failure_headers(failure))
                return
            # Who is calling: the principal of everything bound to one, and its share.
            CURRENT_IDENTITY.set(identity)
            client = client_key(identity.principal, self.policy.client_of(headers, peer))
            CURRENT_CLIENT.set(client)
            if self._foreign_session(headers, client):
                # Another principal's 2025 session reads as one this server does not hold.
                await refuse(404, "unknown or expired session: send initialize to start one")
                return
        if method in ("GET", "DELETE") and headers.get_all("mcp-session-id"):
            if method == "GET":  # a 2025-era session's stream
                _, sse_ok = m.http._headers.accepted_media(headers.get_all("accept"))
                await self.sessions.get(receive, send, headers, sse_ok, client)
            else:
                await self.sessions.delete(send, headers)
            return
        if method != "POST":
            await refuse(
                405,
                f"{method} is not allowed here: POST a message "
                "(GET and DELETE are for a 2025-era session: send its Mcp-Session-Id)",
                extra=[(b"allow", b"GET, POST, DELETE")],
            )
            return
        post = m.http._post.post_refusal(headers.fields, self.max_body_size)  # 406/415/413
        if post is not None:
            await refuse(post.status, post.message, post.code)
            return
        body: bytes | None = b""
        if self.body_timeout == math.inf:  # (the server keeps the deadline: our host)
            body = await _read_body(receive, self.max_body_size)
        else:
            with anyio.move_on_after(self.body_timeout) as reading:  # a deadline: trickles too
                body = await _read_body(receive, self.max_body_size)
            if reading.cancelled_caught:
                await refuse(408, f"the request body took longer than {self.body_timeout} s")
                return
        if body is None:
            too_large = m.http._post.body_too_large(self.max_body_size)
            await refuse(too_large.status, too_large.message)
            return
        empty = m.http._post.body_refusal(body)
        if empty is not None:
            await refuse(empty.status, empty.message, empty.code)
            return
        json_ok, sse_ok = m.http._headers.accepted_media(headers.get_all("accept"))
        await self._message(scope, receive, send, headers, peer, body, json_ok, sse_ok)

    async def _message(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: Headers,
        peer: str | None,
        body: bytes,
        json_ok: bool,
        sse_ok: bool,
    ) -> None:
        message = m.http._post.parse_posted(body)  # once: the headers, then the connection
        note_message(scope, message)  # (for the host's access line, if it writes one)
        identity = CURRENT_IDENTITY.get()
        if self.auth is not None and identity is not None:
            refused_call = call_refusal(self.auth, self.app, message, identity)
            if refused_call is not None:
                body = m.http._post.error_body(refused_call.message, failure_code(refused_call))
                await send_whole(send, 403, body, extra=failure_headers(refused_call))
                return
        if m.http.is_legacy_message(headers.fields, message):  # a session's: sessions.py
            assert isinstance(message, Mapping)
            client = CURRENT_CLIENT.get()  # (set by _http, for this request)
            await self.sessions.post(receive, send, headers, message, json_ok, sse_ok, client)
            return
        refused = m.http._post.header_refusal(headers.fields, message, self.header_params)
        if refused is not None:
            await send_whole(send, refused.status, m.wire._codec.encode_message(refused.reply))
            return
        conn = m.Connection(m.SERVER, framing="messages", **self.connection_options)
        if message is None:
            conn.receive_data(body)
        else:
            conn.receive_message(message)
        loop = self._loop
        event = conn.next_event(loop.now() if loop is not None else anyio.current_time())
        listen = isinstance(event, m.Request) and event.method == m.http._post.LISTEN_METHOD
        answer = StreamingAnswer(
            receive,
            send,
            json_ok=json_ok,
            sse_ok=sse_ok,
            keepalive=self.keepalive_interval,
            write_timeout=self.write_timeout,
            long_lived=listen,
            helpers=self._helpers,
            cancel_scope=loop.cancel_scope if loop is not None else anyio.CancelScope,
        )
        if listen:
            assert isinstance(event, m.Request)
            await self._listen(conn, event, answer, send, headers, peer)
        elif isinstance(event, m.Request):
            await self._answer(conn, event, answer)
        elif isinstance(event, m.AutoReply):
            reply = m.http._post.removed_method_reply(event.request) or event.reply
            await answer.finish(reply, conn.send(reply))
        elif isinstance(event, m.InvalidMessage):
            if event.reply is not None:
                await answer.finish(event.reply, conn.send(event.reply))
            else:  # a notification or a response we cannot take: no JSON-RPC answer is due
                body = m.http._post.error_body(event.error.message, event.error.code)
                await send_whole(send, 400, body)
        else:  # a notification (NEED_DATA: one the connection took)
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    def _foreign_session(self, headers: Headers, client: str) -> bool:
        """Whether the request names a 2025 session that another principal started (its
        owner is the ``client_key`` of its ``initialize``: the principal's, with auth)."""
        named = headers.get_all("mcp-session-id")
        owner = self.sessions.owners.get(named[0]) if len(named) == 1 else None
        return owner is not None and owner != client

    async def _side_route(
        self, scope: Scope, method: str, path: str, headers: Headers, peer: str | None
    ) -> Page | None:
        """The page of a path beside the endpoint (``routes.py``, ``callback.py``), or
        ``None`` for the endpoint's own; sets the callback URL the request's handlers see."""
        if path == self.health_path:
            return health_page(method, self.closing)
        if self.auth is not None and path in self.auth.metadata_paths:
            return metadata_page(self.auth, method)
        if self.callback is None:
            return None
        if path == self.callback.path:
            query = bytes(scope.get("query_string", b""))
            return await self.callback.answer(method, query, headers, peer)
        CURRENT_CALLBACK_URL.set(self._callback_url(scope, self.callback.path))
        return None

    def _callback_url(self, scope: Scope, path: str) -> str:
        """``_base_url`` + ``path``, kept per address the requests came to (a server has
        few); one named by the request's ``Host`` header alone is not kept."""
        server = scope.get("server")
        if server is None or server[1] is None:
            return self._base_url(scope) + path
        key = (scope.get("scheme"), server[0], server[1], scope.get("root_path"))
        url = self._callback_urls.get(key)
        if url is None:
            if len(self._callback_urls) >= _MAX_KEPT_URLS:
                self._callback_urls.clear()
            url = self._callback_urls[key] = self._base_url(scope) + path
        return url

    def _base_url(self, scope: Scope) -> str:
        """``public_url`` (its scheme and authority), else the address the request came
        to, with the ASGI ``root_path`` the endpoint is mounted below."""
        if self.public_url is not None:
            return self.public_url.rstrip("/").removesuffix((self.path or "").rstrip("/"))
        scheme = str(scope.get("scheme", "http"))
        server = scope.get("server")
        if server is None or server[1] is None:
            authority = Headers(scope.get("headers", ())).get("host") or "localhost"
        else:
            host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(str(server[0]), str(server[0]))
            host = f"[{host}]" if ":" in host else host
            authority = f"{host}:{server[1]}"
        return f"{scheme}://{authority}{scope.get('root_path', '')}"

    async def _listen(
        self,
        conn: m.Connection,
        request: m.Request,
        answer: StreamingAnswer,
        send: Send,
        headers: Headers,
        peer: str | None,
    ) -> None:
        """A ``subscriptions/listen`` stream: a place in the pool, or a refusal that says
        when to retry; the stream ends gracefully at the pool's lifetime."""
        client = CURRENT_CLIENT.get()  # (set by _http: the principal's, else the peer's)
        lease: Lease | ListenRefusal = ListenRefusal(503, 1, "the server is shutting down")
        if not self.closing:
            lease = self.listens.admit(client, anyio.current_time())
        if isinstance(lease, ListenRefusal):
            log.warning("listen stream refused for %s: %s", client, lease.message)
            busy = m.MrtrError(
                lease.message,
                code=m.ErrorCode.SERVER_BUSY,
                data={"retryAfterSeconds": lease.retry_after},
            )
            _, data = send_response(conn, m.error_response(request.id, busy))
            retry = [(b"retry-after", str(lease.retry_after).encode())]
            await send_whole(send, lease.status, data, extra=retry)
            return
        deadline = lease.deadline
        identity = CURRENT_IDENTITY.get()
        if identity is not None and identity.expires_at is not None:
            # A stream lasts no longer than the token that opened it (its graceful end:
            # the client listens again, with a fresh token).
            deadline = min(deadline, anyio.current_time() + identity.expires_at - time.time())
        try:
            await self._answer(conn, request, answer, deadline=deadline)
        finally:
            self.listens.release(lease)

    async def _answer(
        self,
        conn: m.Connection,
        request: m.Request,
        answer: StreamingAnswer,
        deadline: float = float("inf"),
    ) -> None:
        """Run the app on ``request``; cancelled if the client goes away meanwhile.  At
        ``deadline`` (a listen stream's lifetime) the request gets the graceful end of
        a subscription: a result whose ``_meta`` names it."""
        info = conn.request_info(request.id)
        outlet = ConnectionOutlet(conn, request.id, answer.notify)

        async def handler() -> Any:
            return await run_app(self.app, request, info, outlet)

        outcome, expired = await answer.run(handler, deadline)
        if answer.gone:
            conn.response_stream_closed(request.id)
            send_response(conn, response_for(request.id, m.MrtrError("cancelled")))  # releases
            return
        if expired:
            outcome = m.http._post.listen_closure(request.id)
        response, data = send_response(conn, response_for(request.id, outcome))
        await answer.finish(response, data)


def _target_size(scope: Scope) -> int:
    """The request target's size as the host measures it (path and query)."""
    target = len(scope.get("raw_path") or str(scope.get("path", "")).encode())
    return target + len(scope.get("query_string", b""))


def _route_path(scope: Scope) -> str:
    """The request's path below where the app is mounted (ASGI ``root_path``), as
    Starlette's ``Mount`` and a server's ``--root-path`` set it."""
    path = str(scope.get("path", "/"))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or ``None`` once it is longer than ``limit`` bytes (the rest is
    left unread: the server closes or drains it)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
