"""Paths beside the MCP endpoint on the trio server: the health check and the URL callback,
whose answers are the endpoint's (``mrtr_transports.asgi.routes``, ``.callback``), written
here with h11.  Both are looked up in one table (``HttpServer.routes``), one dictionary
lookup per request, before the endpoint's rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import h11

from ...asgi.callback import CallbackRoute
from ...asgi.policy import Headers
from ...asgi.routes import DEFAULT_HEALTH_PATH, Page, health_page

if TYPE_CHECKING:
    from .exchange import HttpConnection

__all__ = ["DEFAULT_HEALTH_PATH", "CallbackAdapter", "HealthRoute", "SideRoute"]


class SideRoute(Protocol):
    """A path served by rules of its own, before the endpoint's."""

    async def serve(
        self, connection: HttpConnection, request: h11.Request, headers: Headers
    ) -> None: ...


class Closing(Protocol):
    closing: bool


async def _write(connection: HttpConnection, page: Page) -> None:
    await connection._send_body(page.status, page.body, page.content_type, page.headers)


class HealthRoute:
    """``GET /healthz``: 200 while serving, 503 while draining."""

    def __init__(self, server: Closing) -> None:
        self.server = server

    async def serve(
        self, connection: HttpConnection, request: h11.Request, headers: Headers
    ) -> None:
        page = health_page(request.method.decode("latin-1"), self.server.closing)
        await _write(connection, page)


class CallbackAdapter:
    """The URL-elicitation callback (``CallbackRoute``) on an h11 connection."""

    def __init__(self, route: CallbackRoute) -> None:
        self.route = route

    async def serve(
        self, connection: HttpConnection, request: h11.Request, headers: Headers
    ) -> None:
        query = request.target.partition(b"?")[2]
        method = request.method.decode("latin-1")
        await _write(connection, await self.route.answer(method, query, headers, connection.peer))
