"""Serve a ``ServerApp`` over Streamable HTTP: the MCP endpoint on the project's hardened host.

``HttpServer(app, **options)`` is the one HTTP server of the project, the one
``mrtr serve --http`` runs on every loop (trio, asyncio): the endpoint
(``McpAsgi``, ``mrtr_transports.asgi``: both eras, who may talk, the header
mirrors, listen streams, 2025-era sessions, the health check and the
URL-elicitation callback) served by the ASGI host (``AsgiHost``,
``mrtr_transports.host``: connections, keep-alive, the head and body deadlines,
slots with eviction, lingering refusals).  Nothing here but the assembly: each
option goes to the side whose rule it is (``split_options``; ``max_body_size``
and ``write_timeout`` to both), and the host's drain starts the endpoint's
(``on_drain=McpAsgi.shutdown``).  The rules themselves, in the order a request
meets them, are in ``asgi/endpoint.py`` and ``host/connection.py``; what each
bound bounds and why its default: ``docs/transports.md``.

::

    server = HttpServer(app)
    host, port = await task_group.start(server.serve, "127.0.0.1", 0)
    ...
    await server.aclose(grace=5.0)  # serve() returns

Shutdown: ``aclose(grace)`` stops taking requests (a new connection gets 503
with ``Retry-After`` and ``Connection: close`` before its request is read), ends
the app's ``subscriptions/listen`` streams with their final result and the
sessions' standalone streams, turns the health check to 503, closes idle
connections, lets running requests finish for ``grace`` seconds, then cancels
the rest and ends every 2025-era session.  Cancelling ``serve`` cancels
everything at once.

Access log: with the logger ``mrtr.server.access`` at INFO when the server is
made, each HTTP request leaves a line (``server/access.py``; the host writes it,
the endpoint names the MCP method).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from ..asgi.callback import DEFAULT_CALLBACK_PATH
from ..asgi.endpoint import (
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_LISTEN_LIFETIME,
    DEFAULT_MAX_LISTEN_STREAMS,
    DEFAULT_MAX_LISTEN_STREAMS_PER_CLIENT,
    DEFAULT_MAX_SESSION_STREAMS,
    DEFAULT_MAX_SESSION_STREAMS_PER_CLIENT,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_CLIENT,
    DEFAULT_MAX_STREAMS_PER_SESSION,
    DEFAULT_REPLAY_BYTES,
    DEFAULT_REPLAY_EVENTS,
    DEFAULT_SESSION_IDLE_TIMEOUT,
    DEFAULT_SESSION_STREAM_LIFETIME,
    McpAsgi,
)
from ..asgi.pools import ListenPool
from ..asgi.routes import DEFAULT_HEALTH_PATH
from ..asgi.sessions import SessionEndpoint
from ..host.bounds import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEAD_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BODY_SIZE,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_WRITE_TIMEOUT,
    ENDPOINT_ON_HOST,
    split_options,
)
from ..host.http import AsgiHost
from ..host.slots import ConnectionSlots
from .app import ServerApp
from .legacy import DEFAULT_LEGACY_ANSWER_TIMEOUT

__all__ = ["DEFAULT_MAX_BODY_SIZE", "HttpServer", "serve_http"]


async def serve_http(
    app: ServerApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
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
    """The Streamable HTTP endpoint for one app on the project's host; ``serve`` it,
    ``aclose`` it.  Every option is the endpoint's (``McpAsgi``) or the host's
    (``HostBounds``); the defaults are theirs."""

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
        max_sessions_per_client: int = DEFAULT_MAX_SESSIONS_PER_CLIENT,
        max_session_streams_per_client: int = DEFAULT_MAX_SESSION_STREAMS_PER_CLIENT,
        session_stream_lifetime: float = DEFAULT_SESSION_STREAM_LIFETIME,
        param_headers: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        public_url: str | None = None,
        callback_path: str = DEFAULT_CALLBACK_PATH,
        health_path: str | None = DEFAULT_HEALTH_PATH,
        **connection_options: Any,
    ) -> None:
        # Every keyword above, by name (one list of them: the signature), for the split.
        options = {
            name: value
            for name, value in locals().items()
            if name not in ("self", "app", "connection_options")
        }
        host_options, endpoint_options = split_options(options)
        self.app = app
        self.endpoint = McpAsgi(app, **endpoint_options, **ENDPOINT_ON_HOST, **connection_options)
        self.host = AsgiHost(self.endpoint, on_drain=self.endpoint.shutdown, **host_options)

    # --- What tests and operators look at ---

    @property
    def address(self) -> tuple[str, int] | None:
        """The bound ``(host, port)`` once serving."""
        return self.host.address

    @property
    def closing(self) -> bool:
        return self.host.closing

    @property
    def slots(self) -> ConnectionSlots:
        """The host's connection slots."""
        return self.host.slots

    @property
    def listens(self) -> ListenPool:
        """The endpoint's pool of ``subscriptions/listen`` streams."""
        return self.endpoint.listens

    @property
    def sessions(self) -> SessionEndpoint:
        """The endpoint's 2025-era side."""
        return self.endpoint.sessions

    # --- Life cycle ---

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` and serve until ``aclose`` or cancellation."""
        await self.host.serve(host, port, task_status=task_status)

    async def aclose(self, grace: float = DEFAULT_SHUTDOWN_GRACE) -> None:
        """Stop accepting; end the app's listen streams (``close_subscriptions``);
        give running requests ``grace`` seconds; cancel the rest."""
        await self.host.aclose(grace)
