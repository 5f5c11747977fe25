"""Paths beside the MCP endpoint, each with rules of its own: the health check.

The model.  The endpoint's rules (Host and Origin allow-lists, ``Accept``,
``Content-Type``, the JSON-RPC body) protect MCP traffic from other sites;
a load balancer or an orchestrator probing the server is no such traffic.  It
sends ``GET /healthz`` with whatever ``Host`` it dials (a pod's address, not
``localhost``), no ``Origin`` and often no ``Accept``, and reads the status.  So
the health check is matched on its path alone, before the endpoint's rules,
and answers with a fixed, tiny body that names nothing about the server:

* ``200 {"status":"ok"}`` while the server serves;
* ``503 {"status":"draining"}`` (``Retry-After: 1``, ``Connection: close``) once
  it stops (``HttpServer.aclose``: SIGTERM or Ctrl-C for ``mrtr serve``), so the
  balancer takes it out of rotation while the calls in flight finish.  (A new
  connection during the drain gets its 503 before its request is even read:
  ``HttpServer``.)

Only ``GET`` and ``HEAD`` (405 otherwise); it never touches the app.  Its path
is ``/healthz`` by default, outside the endpoint path, so that a proxy that
forwards only ``/mcp`` does not expose it, and the convention most probes
default to; ``HttpServer(health_path=None)`` (``mrtr serve --health-path off``)
leaves it out.  The URL-elicitation callback (``callback.py``) is the other
route with rules of its own; both are looked up in one table
(``HttpServer.routes``), one dictionary lookup per request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import h11

from .policy import Headers

if TYPE_CHECKING:
    from .exchange import HttpConnection

__all__ = ["DEFAULT_HEALTH_PATH", "HealthRoute", "SideRoute"]

DEFAULT_HEALTH_PATH = "/healthz"

HEALTH_HEADERS = [(b"cache-control", b"no-store")]
OK = b'{"status":"ok"}'
DRAINING = b'{"status":"draining"}'
NOT_ALLOWED = b'{"error":"use GET or HEAD"}'


class SideRoute(Protocol):
    """A path served by rules of its own, before the endpoint's."""

    async def serve(
        self, connection: HttpConnection, request: h11.Request, headers: Headers
    ) -> None: ...


class Closing(Protocol):
    closing: bool


class HealthRoute:
    """``GET /healthz``: 200 while serving, 503 while draining."""

    def __init__(self, server: Closing) -> None:
        self.server = server

    async def serve(
        self, connection: HttpConnection, request: h11.Request, headers: Headers
    ) -> None:
        if request.method not in (b"GET", b"HEAD"):
            extra = [*HEALTH_HEADERS, (b"allow", b"GET, HEAD")]
            await connection._send_body(405, NOT_ALLOWED, b"application/json", extra)
        elif self.server.closing:
            extra = [*HEALTH_HEADERS, (b"retry-after", b"1")]
            await connection._send_body(503, DRAINING, b"application/json", extra)
        else:
            await connection._send_body(200, OK, b"application/json", HEALTH_HEADERS)
