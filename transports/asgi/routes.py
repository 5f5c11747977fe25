"""Paths beside the MCP endpoint, each with rules of its own: the health check (and the
shape of every such answer, ``Page``; the URL-elicitation callback is ``callback.py``).

The model.  The endpoint's rules (Host and Origin allow-lists, ``Accept``,
``Content-Type``, the JSON-RPC body) protect MCP traffic from other sites;
a load balancer or an orchestrator probing the server is no such traffic.  It
sends ``GET /healthz`` with whatever ``Host`` it dials (a pod's address, not
``localhost``), no ``Origin`` and often no ``Accept``, and reads the status.  So
the health check is matched on its path alone, before the endpoint's rules,
and answers with a fixed, tiny body that names nothing about the server:

* ``200 {"status":"ok"}`` while the server serves;
* ``503 {"status":"draining"}`` (``Retry-After: 1``) once it stops, so the
  balancer takes it out of rotation while the calls in flight finish.

Only ``GET`` and ``HEAD`` (405 otherwise); it never touches the app.  Its path
is ``/healthz`` by default, outside the endpoint path, so that a proxy that
forwards only ``/mcp`` does not expose it, and the convention most probes
default to; ``health_path=None`` (``mrtr serve --health-path off``) leaves it out.

A route answers with a ``Page`` (status, body, headers): no I/O here; the
endpoint writes it.
"""

from __future__ import annotations

import attrs

__all__ = ["DEFAULT_HEALTH_PATH", "Page", "health_page"]

DEFAULT_HEALTH_PATH = "/healthz"

HEALTH_HEADERS = [(b"cache-control", b"no-store")]
OK = b'{"status":"ok"}'
DRAINING = b'{"status":"draining"}'
NOT_ALLOWED = b'{"error":"use GET or HEAD"}'


@attrs.frozen
class Page:
    """A whole answer of a side route: its status, body, content type, other headers."""

    status: int
    body: bytes
    content_type: bytes = b"application/json"
    headers: list[tuple[bytes, bytes]] = attrs.field(factory=list)


def health_page(method: str, closing: bool) -> Page:
    """``GET /healthz``: 200 while serving, 503 while draining; 405 for other methods."""
    if method not in ("GET", "HEAD"):
        return Page(405, NOT_ALLOWED, headers=[*HEALTH_HEADERS, (b"allow", b"GET, HEAD")])
    if closing:
        return Page(503, DRAINING, headers=[*HEALTH_HEADERS, (b"retry-after", b"1")])
    return Page(200, OK, headers=HEALTH_HEADERS)
