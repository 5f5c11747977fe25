"""``McpAsgi``: the 2026-07-28 Streamable HTTP endpoint of a ``ServerApp`` as an ASGI 3 app.

The model: the same endpoint as the trio server (``server/http/``), with the
bytes, connections and timeouts left to the ASGI server that runs it (uvicorn,
hypercorn, ...) and everything MCP taken from the same places: who may talk
(``AccessPolicy``), what a POST must be (``mrtr_core.protocol.post_refusal``),
the header mirrors (``check_request_headers``), a fresh server
``mrtr_core.Connection`` per POST, the app run by ``run_app``, the answer
through ``send_response``, the status of an error
(``mrtr_core.protocol.status_for_error``).  2026-07-28 has no sessions, so
nothing is shared between POSTs, and any number of worker processes may serve
one endpoint (state a handler needs between rounds travels sealed in
``requestState``).

For each HTTP request, in order:

1. ``Host`` and ``Origin`` against the allow-lists (403; the defaults and the
   settings are the trio server's: loopback only, ``allowed_hosts``,
   ``allowed_origins``, ``trusted_proxies`` for ``X-Forwarded-Host``).
2. The path (404), relative to where the app is mounted (the ASGI
   ``root_path``); ``path=None`` serves any path that reaches it.
3. The method: POST only (405 with ``Allow: POST``; a ``HEAD`` gets the
   headers alone).  2026-07-28 defines no GET on the endpoint, and 2025-era
   sessions (GET streams, DELETE) are not served here: use ``mrtr serve --http``
   for them.  A 2025-era message (an ``initialize``, an ``Mcp-Session-Id``, a
   2025 ``MCP-Protocol-Version``) gets 400 with -32022 naming 2026-07-28.
4. ``Accept`` (406), ``Content-Type`` (415; two, 400), the body size (413:
   the declared length, then the bytes as they arrive; ``max_body_size``).
5. The headers that mirror the body (400, -32020), then the connection reads
   the body: a notification gets 202; what the connection answers itself
   (``server/discover``, bad input, a missing ``_meta``) is sent as JSON; a
   request runs the app and is answered as JSON or as an SSE stream
   (``answer.py``).  ``ping`` and ``initialize`` are 404 with -32601.
6. ``subscriptions/listen`` takes a place in the listen pool
   (``max_listen_streams`` in all, ``max_listen_streams_per_client``; 429 or
   503 with ``Retry-After``) and ends gracefully after ``listen_lifetime``.

Bounds that belong to the ASGI server, not here: connections, header size,
keep-alive and read timeouts (uvicorn's ``--limit-concurrency``,
``--timeout-keep-alive``, ``--h11-max-incomplete-event-size``; hypercorn's
``--keep-alive``, ``h11_max_incomplete_size``): see docs/asgi.md.

Shutdown: ``shutdown()`` ends the app's open listen streams with their final
result (``close_subscriptions``) and refuses new ones (503).  Run directly by
the server, the app calls it at the ``lifespan`` shutdown event; uvicorn and
hypercorn send that only once their connections are done, so a listen stream
still open then is ended by the server's own grace period
(``--timeout-graceful-shutdown``, ``--graceful-timeout``): keep
``listen_lifetime`` short, or call ``shutdown()`` yourself when shutdown begins.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio

import mrtr_core as m

from ..server.app import ServerApp, run_app, tool_header_params
from ..server.driver import ConnectionOutlet, end_subscriptions, response_for, send_response
from ..server.http.limits import Lease, ListenPool, ListenRefusal, check_bounds
from ..server.http.policy import AccessPolicy, Headers
from .answer import Receive, Scope, Send, StreamingAnswer, send_whole

__all__ = ["McpAsgi"]

log = logging.getLogger("mrtr.server.asgi")

DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024
DEFAULT_KEEPALIVE_INTERVAL = 15.0
DEFAULT_WRITE_TIMEOUT = 60.0
DEFAULT_MAX_LISTEN_STREAMS = 256
DEFAULT_MAX_LISTEN_STREAMS_PER_CLIENT = 8
DEFAULT_LISTEN_LIFETIME = 600.0


class McpAsgi:
    """An ASGI 3 application serving ``app`` at the 2026-07-28 Streamable HTTP endpoint.

    ::

        from mrtr_transports.asgi import McpAsgi
        asgi = McpAsgi(app)            # uvicorn module:asgi  /  hypercorn -k trio module:asgi

    Options: ``path`` (``"/mcp"``; ``None``: any), the access policy
    (``allowed_hosts``, ``allowed_origins``, ``trusted_proxies``), ``max_body_size``,
    ``keepalive_interval``, ``write_timeout``, the listen pool
    (``max_listen_streams``, ``max_listen_streams_per_client``, ``listen_lifetime``),
    ``param_headers`` (as ``HttpServer``), and ``mrtr_core.Connection`` options.
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
        keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        max_listen_streams: int = DEFAULT_MAX_LISTEN_STREAMS,
        max_listen_streams_per_client: int = DEFAULT_MAX_LISTEN_STREAMS_PER_CLIENT,
        listen_lifetime: float = DEFAULT_LISTEN_LIFETIME,
        param_headers: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        **connection_options: Any,
    ) -> None:
        check_bounds(
            (
                ("max_body_size", max_body_size),
                ("max_listen_streams", max_listen_streams),
                ("max_listen_streams_per_client", max_listen_streams_per_client),
            ),
            (
                ("write_timeout", write_timeout),
                ("listen_lifetime", listen_lifetime),
            ),
        )
        self.app = app
        self.path = path
        self.policy = AccessPolicy(allowed_hosts, allowed_origins, trusted_proxies)
        self.max_body_size = max_body_size
        self.keepalive_interval = keepalive_interval
        self.write_timeout = write_timeout
        self.listens = ListenPool(
            max_listen_streams, max_listen_streams_per_client, listen_lifetime
        )
        self._fixed_header_params = param_headers
        versions = connection_options.pop("versions", m.protocol.MODERN_VERSIONS)
        self.connection_options: dict[str, Any] = {
            "info": app.info,
            "capabilities": app.capabilities,
            "instructions": app.instructions,
            **connection_options,
            "versions": tuple(v for v in versions if v in m.protocol.MODERN_VERSIONS),
        }
        m.Connection(m.SERVER, framing="messages", **self.connection_options)  # options fail now
        self.closing = False

    def shutdown(self) -> None:
        """The server is stopping: the app's listen streams end with their final result."""
        self.closing = True
        end_subscriptions(self.app)

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
        elif scope["type"] == "websocket":  # not an MCP transport here: refuse the handshake
            await send({"type": "websocket.close", "code": 1008})
        else:
            raise ValueError(f"unsupported ASGI scope type {scope['type']!r}")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope.get("headers", ()))
        client = scope.get("client")
        peer = str(client[0]) if client else None
        method = str(scope.get("method", "GET")).upper()
        head_only = method == "HEAD"

        async def refuse(
            status: int,
            message: str,
            code: int = m.protocol.INVALID_REQUEST,
            extra: list[tuple[bytes, bytes]] | None = None,
        ) -> None:
            body = m.protocol.error_body(message, code)
            await send_whole(send, status, body, extra=extra, head_only=head_only)

        refusal = self.policy.refusal(headers, peer)
        if refusal is not None:
            log.warning("refused: %s", refusal)
            await refuse(403, refusal)
            return
        path = _route_path(scope)
        if self.path is not None and path != self.path:
            await refuse(404, f"no MCP endpoint at {path!r}: use {self.path!r}")
            return
        if method != "POST":
            await refuse(
                405,
                f"{method} is not allowed here: POST a message (this endpoint serves "
                "MCP 2026-07-28, which has no GET stream and no sessions)",
                extra=[(b"allow", b"POST")],
            )
            return
        post = m.protocol.post_refusal(headers.fields, self.max_body_size)  # 406/415/413
        if post is not None:
            await refuse(post.status, post.message, post.code)
            return
        body = await _read_body(receive, self.max_body_size)
        if body is None:
            too_large = m.protocol.body_too_large(self.max_body_size)
            await refuse(too_large.status, too_large.message)
            return
        empty = m.protocol.body_refusal(body)
        if empty is not None:
            await refuse(empty.status, empty.message, empty.code)
            return
        json_ok, sse_ok = m.protocol.accepted_media(headers.get_all("accept"))
        await self._message(receive, send, headers, peer, body, json_ok, sse_ok)

    async def _message(
        self,
        receive: Receive,
        send: Send,
        headers: Headers,
        peer: str | None,
        body: bytes,
        json_ok: bool,
        sse_ok: bool,
    ) -> None:
        message = m.protocol.parse_posted(body)  # once: the headers, then the connection
        if m.protocol.is_legacy_message(headers.fields, message):
            await self._legacy_refused(send, message)
            return
        refused = m.protocol.header_refusal(headers.fields, message, self.header_params)
        if refused is not None:
            await send_whole(send, refused.status, m.wire.encode_message(refused.reply))
            return
        conn = m.Connection(m.SERVER, framing="messages", **self.connection_options)
        if message is None:
            conn.receive_data(body)
        else:
            conn.receive_message(message)
        event = conn.next_event(anyio.current_time())
        answer = StreamingAnswer(
            receive,
            send,
            json_ok=json_ok,
            sse_ok=sse_ok,
            keepalive=self.keepalive_interval,
            write_timeout=self.write_timeout,
        )
        if isinstance(event, m.Request) and event.method == m.protocol.LISTEN_METHOD:
            await self._listen(conn, event, answer, send, headers, peer)
        elif isinstance(event, m.Request):
            await self._answer(conn, event, answer)
        elif isinstance(event, m.AutoReply):
            reply = m.protocol.removed_method_reply(event.request) or event.reply
            await answer.finish(reply, conn.send(reply))
        elif isinstance(event, m.InvalidMessage):
            if event.reply is not None:
                await answer.finish(event.reply, conn.send(event.reply))
            else:  # a notification or a response we cannot take: no JSON-RPC answer is due
                body = m.protocol.error_body(event.error.message, event.error.code)
                await send_whole(send, 400, body)
        else:  # a notification (NEED_DATA: one the connection took)
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    async def _legacy_refused(self, send: Send, message: Any) -> None:
        """A 2025-era message: this endpoint has no sessions; say which version it speaks."""
        versions = self.connection_options["versions"]
        error = m.MrtrError(
            "this endpoint serves MCP 2026-07-28 only (no 2025-era sessions): send "
            "_meta.protocolVersion with each request",
            code=m.protocol.UNSUPPORTED_PROTOCOL_VERSION,
            data={"supported": list(versions)},
        )
        request_id = message.get("id") if isinstance(message, Mapping) else None
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            request_id = None
        data = m.wire.encode_message(m.error_response(request_id, error))
        await send_whole(send, 400, data)

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
        client = self.policy.client_of(headers, peer)
        lease: Lease | ListenRefusal = ListenRefusal(503, 1, "the server is shutting down")
        if not self.closing:
            lease = self.listens.admit(client, anyio.current_time())
        if isinstance(lease, ListenRefusal):
            log.warning("listen stream refused for %s: %s", client, lease.message)
            busy = m.MrtrError(
                lease.message,
                code=m.protocol.SERVER_BUSY,
                data={"retryAfterSeconds": lease.retry_after},
            )
            _, data = send_response(conn, m.error_response(request.id, busy))
            retry = [(b"retry-after", str(lease.retry_after).encode())]
            await send_whole(send, lease.status, data, extra=retry)
            return
        try:
            await self._answer(conn, request, answer, deadline=lease.deadline)
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
            outcome = m.protocol.listen_closure(request.id)
        response, data = send_response(conn, response_for(request.id, outcome))
        await answer.finish(response, data)


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
