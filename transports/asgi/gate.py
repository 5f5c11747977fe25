"""The endpoint's authorization gate (``McpAsgi(app, auth=ResourceAuth(...))``): the
ASGI side of ``mrtr_transports.auth.resource``.

* The protected-resource metadata is a side route (as the health check): matched on
  its path alone, before the Host/Origin rules (a browser-based client fetches it
  cross-origin: ``Access-Control-Allow-Origin: *``), ``GET``/``HEAD`` only.
* Every other request at the endpoint's path, POST, GET, DELETE and the WebSocket
  upgrade alike, needs a token the verifier accepts: 401 (or 400, 403) with the
  ``WWW-Authenticate`` challenge otherwise, before any MCP is read.
* A ``tools/call`` of a tool registered with ``scopes=`` whose token lacks one is
  403 with ``error="insufficient_scope", scope="<the tool's scopes>"`` before the app
  runs (``call_refusal``).  The app checks the same rule again
  (``InsufficientScope``, a JSON-RPC error) for transports that have no status to
  say it with (a WebSocket conversation): one rule, ``mrtr_core.auth._scopes``.
* A DPoP-bound token (``ResourceAuth(dpop=...)``) comes with a proof of the request:
  ``authenticate`` gives the resource server the ``DPoP`` header, the method and the
  path; a WebSocket upgrade's proof is for ``GET`` at the endpoint's http(s) URL, as
  a client signs it.
* The health check and the URL-elicitation callback stay outside the gate: a probe
  and a person's browser carry no token (the callback is bound by its own state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mrtr_core as m

from ..auth.identity import Identity
from ..auth.refusals import FORBIDDEN
from ..auth.resource import AuthFailure, ResourceAuth
from .routes import Page

__all__ = ["authenticate", "call_refusal", "failure_headers", "metadata_page", "tool_scopes"]

_METADATA_HEADERS = [
    (b"cache-control", b"max-age=300"),
    (b"access-control-allow-origin", b"*"),
]


def metadata_page(auth: ResourceAuth, method: str) -> Page:
    """``GET /.well-known/oauth-protected-resource[/path]``: the document; 405 else."""
    if method not in ("GET", "HEAD"):
        body = b'{"error":"use GET or HEAD"}'
        return Page(405, body, headers=[(b"allow", b"GET, HEAD")])
    return Page(200, auth.metadata_body, headers=_METADATA_HEADERS)


async def authenticate(auth: ResourceAuth, scope: Mapping[str, Any], headers: Any) -> Identity:
    """The identity of the request (or WebSocket upgrade) ``scope`` with ``headers``
    (``policy.Headers``), or ``AuthFailure``."""
    method = "GET" if scope["type"] == "websocket" else str(scope.get("method", "GET"))
    # The path as the client sent it: ASGI's ``path`` includes ``root_path`` (older
    # servers' did not).
    path, root = str(scope.get("path", "/")), str(scope.get("root_path", ""))
    path = path if path.startswith(root) else root + path
    secure = scope.get("scheme") in ("https", "wss")
    hosts = headers.get_all("host")
    reached = f"{'https' if secure else 'http'}://{hosts[0]}{path}" if len(hosts) == 1 else None
    return await auth.authenticate(
        headers.get_all("authorization"),
        proofs=headers.get_all("dpop"),
        method=method,
        urls=auth.request_urls(path, reached),
    )


def failure_headers(failure: AuthFailure) -> list[tuple[bytes, bytes]]:
    extra = [(name.lower().encode(), value.encode()) for name, value in failure.headers]
    return [(b"www-authenticate", failure.challenge.encode()), *extra]


def failure_code(failure: AuthFailure) -> int:
    """The JSON-RPC code of a refusal's body: -32600 for 400/401, -32003 for 403."""
    return FORBIDDEN if failure.status == 403 else m.ErrorCode.INVALID_REQUEST


def tool_scopes(app: Any, name: str) -> Sequence[str]:
    """The scopes tool ``name`` needs (``app.tool_scopes``; none from an app without it)."""
    method = getattr(app, "tool_scopes", None)
    found = None if method is None else method(name)
    return tuple(found or ())


def call_refusal(
    auth: ResourceAuth, app: Any, message: Any, identity: Identity
) -> AuthFailure | None:
    """403 for a ``tools/call`` whose token lacks a scope of the tool (a batch, a
    response, anything else: ``None``, the app decides)."""
    if not isinstance(message, Mapping) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    name = params.get("name") if isinstance(params, Mapping) else None
    if not isinstance(name, str):
        return None
    shortfall = auth.check_scopes(tool_scopes(app, name), identity)
    if shortfall is None:
        return None
    missing = " ".join(shortfall.missing)
    return AuthFailure(
        403, auth.scope_challenge(shortfall, identity), f"this call needs the scope(s) {missing}"
    )
