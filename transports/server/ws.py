"""Serve a ``ServerApp`` over WebSocket: the one endpoint (``McpAsgi``) on the ASGI host.

``WsServer`` and ``serve_ws`` build what ``mrtr serve --ws`` runs: the app's
``McpAsgi`` endpoint, refusing plain HTTP (``websocket_only``: MCP over
WebSocket, ``asgi/websocket.py``), on an ``AsgiHost`` (``host/``) that holds
the connections, on trio or asyncio (whichever loop runs it).  The MCP rules
(the ``mcp`` subprotocol, Host and Origin, refusals, message size, close codes)
are the endpoint's; the socket's (connections, the handshake's deadline, frames,
keep-alive pings, writes, the close handshake) are the host's.  So the options
split:

* to the endpoint: ``path``, ``allowed_hosts``, ``allowed_origins``,
  ``trusted_proxies``, ``max_websockets_per_client`` (16: one client's share of
  the WebSockets; 429 past it), ``max_message_size``, ``drain_timeout`` (what runs when a
  conversation's input ends), ``legacy_answer_timeout`` and the
  ``mrtr_core.Connection`` options;
* to the host: ``max_connections`` (256; a newcomer past them gets 503 with
  ``Retry-After``), ``max_message_size`` (4 MiB: 1009 while a message grows
  past it), ``ping_interval`` and ``ping_timeout`` (20 s each: 1011 without a
  pong), ``handshake_timeout`` (10 s for the upgrade request's first byte, then
  10 s for all of it: 408; the host's ``idle_timeout`` and ``head_timeout``),
  ``write_timeout`` (60 s for the peer to take a write).

Shutdown: cancelling ``serve`` closes every WebSocket with 1001.  ``aclose(grace)``
(``mrtr serve`` on SIGTERM or Ctrl-C) stops reading requests, lets what runs
answer for ``grace`` seconds, then closes with 1001; newcomers get 503 with
``Connection: close``.

Out of scope: ``wss://`` (TLS: put a TLS-terminating proxy in front, and list it
in ``trusted_proxies``), the draft's session resumption (``mcpSessionId``) and
its ``mcp.auth.<token>`` subprotocol entries (never selected, never echoed).

Run it: ``mrtr serve --ws 127.0.0.1:0`` prints
``listening on ws://127.0.0.1:PORT/mcp`` on stderr when ready.
"""

from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import Any

import anyio
import anyio.abc

from mrtr_core.websocket._binding import DEFAULT_MAX_WEBSOCKET_MESSAGE

from ..asgi.endpoint import McpAsgi
from ..asgi.websocket import DEFAULT_MAX_WEBSOCKETS_PER_CLIENT
from ..host.bounds import (
    DEFAULT_HEAD_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PING_INTERVAL,
    DEFAULT_PING_TIMEOUT,
    DEFAULT_WRITE_TIMEOUT,
    check_bounds,
)
from ..host.http import AsgiHost
from .app import ServerApp
from .driver import DEFAULT_DRAIN_TIMEOUT
from .legacy import DEFAULT_LEGACY_ANSWER_TIMEOUT

__all__ = ["WsServer", "serve_ws"]

DEFAULT_PATH = "/mcp"


class WsServer:
    """An MCP server over WebSocket: ``McpAsgi`` on ``AsgiHost`` (see the module docstring)."""

    def __init__(
        self,
        app: ServerApp,
        *,
        path: str = DEFAULT_PATH,
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
        trusted_proxies: Iterable[str] = (),
        max_message_size: int = DEFAULT_MAX_WEBSOCKET_MESSAGE,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_websockets_per_client: int = DEFAULT_MAX_WEBSOCKETS_PER_CLIENT,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        ping_timeout: float = DEFAULT_PING_TIMEOUT,
        handshake_timeout: float = DEFAULT_HEAD_TIMEOUT,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        legacy_answer_timeout: float = DEFAULT_LEGACY_ANSWER_TIMEOUT,
        **connection_options: Any,
    ) -> None:
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/', got {path!r}")
        # (The endpoint's WebSockets are the host's connections: named as the host's bound.)
        check_bounds((("max_connections", max_connections),))
        self.app = app
        self.endpoint = McpAsgi(
            app,
            path=path,
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            trusted_proxies=trusted_proxies,
            max_message_size=max_message_size,
            write_timeout=write_timeout,
            drain_timeout=drain_timeout,
            legacy_answer_timeout=legacy_answer_timeout,
            health_path=None,
            websocket_only=True,
            max_websockets=max_connections,
            max_websockets_per_client=max_websockets_per_client,
            **connection_options,
        )
        self.host = AsgiHost(
            self.endpoint,
            on_drain=self.endpoint.shutdown,
            max_connections=max_connections,
            max_message_size=max_message_size,
            ping_interval=ping_interval,
            ping_timeout=ping_timeout,
            idle_timeout=handshake_timeout,  # (from the connect, as the whole handshake's)
            head_timeout=handshake_timeout,
            write_timeout=write_timeout,
        )

    @property
    def address(self) -> tuple[str, int] | None:
        """The bound ``(host, port)`` once serving."""
        return self.host.address

    @property
    def connections(self) -> Sized:
        """The connections open now (WebSockets, or upgrade requests still arriving)."""
        return self.host.slots

    async def serve(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` and serve until ``aclose`` or cancellation (then every
        WebSocket gets 1001)."""
        await self.host.serve(host, port, task_status=task_status)

    async def aclose(self, grace: float) -> None:
        """Stop gracefully: refuse newcomers (503), stop reading requests, give the
        running ones ``grace`` seconds to answer, close every WebSocket (1001)."""
        self.endpoint.websockets.stop_reading(grace)
        await self.host.aclose(grace)


async def serve_ws(
    app: ServerApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    **options: Any,
) -> None:
    """Serve ``app`` over WebSocket on ``host:port`` until cancelled.

    ``task_status.started()`` reports the bound ``(host, port)``; ``options``
    are :class:`WsServer`'s (``path``, the allow-lists, the bounds) and
    ``mrtr_core.Connection``'s.
    """
    await WsServer(app, **options).serve(host, port, task_status=task_status)
