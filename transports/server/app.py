"""What a server transport serves: a ``ServerApp``, and the ``Outlet`` its handlers write to.

The transports (stdio, Streamable HTTP) own the bytes and the concurrency; an
app only answers requests.  For each request the transport hands the app the
decoded ``Request``, the connection's ``RequestInfo`` for it (era, version,
this request's capabilities, log level, progress token, whether it is a
retry) and an ``Outlet`` for what the handler streams before its result:
progress, log messages, other notifications.  On stdio those are written at
once; on HTTP the first one turns the response into a request-scoped SSE
stream.

``handle`` returns the result mapping (complete, or ``input_required`` for
``tools/call``, ``prompts/get`` and ``resources/read``) or raises an
``mrtr_core.MrtrError``, which the transport sends with
``mrtr_core.error_response`` (so an unknown method is
``MrtrError(..., code=METHOD_NOT_FOUND)``, which HTTP maps to 404).  Any other
exception is a bug in the app: the transport answers -32603 and logs it.

A 2025-era request (after ``initialize``) reaches ``handle`` the same way: the
transport runs it through ``mrtr_core.server.LegacyShim(handler=None, ...)``, which
turns each ``input_required`` round into real server-to-client requests and
calls ``handle`` again with the answers, so one app serves both eras.

The Streamable HTTP transport also asks the app, for each ``tools/call``,
which arguments the client mirrors into ``Mcp-Param-*`` headers
(``tool_header_params``), and checks those headers against the body before
``handle`` runs.  An app without the method has none (see
:func:`tool_header_params`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import mrtr_core as m

log = logging.getLogger("mrtr.server")

#: What one leg of an app came to: its result mapping, or the ``MrtrError`` it raised.
Outcome = Mapping[str, Any] | m.MrtrError


class Outlet(Protocol):
    """Where one request's notifications go, before its result."""

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """``notifications/progress`` for this request (dropped without a progress token)."""

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """``notifications/message`` (dropped below the request's log level, or without one)."""

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Any other notification tied to this request (e.g. ``subscriptions/listen`` events)."""


class ServerApp(Protocol):
    """An MCP server application, whatever transport carries it.

    The transports only read ``info``, ``capabilities`` and ``instructions``, so each is
    a read-only property here: an app may hold them as plain attributes or compute them
    (``McpApp.capabilities`` follows what is registered) and match either way.
    """

    @property
    def info(self) -> Mapping[str, Any]:
        """``serverInfo``: ``{"name": ..., "version": ...}``."""
        ...

    @property
    def capabilities(self) -> Mapping[str, Any]:
        """The server capabilities advertised by ``server/discover`` and ``initialize``."""
        ...

    @property
    def instructions(self) -> str | None:
        """Optional instructions for ``server/discover`` / ``initialize``."""
        ...

    async def handle(
        self, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
    ) -> Mapping[str, Any]:
        """The result for ``request``, or raise ``MrtrError``."""
        ...

    def tool_header_params(self, name: str) -> Mapping[str, Sequence[str]] | None:
        """The ``Mcp-Param-*`` headers of tool ``name``: header name (after
        ``Mcp-Param-``) -> the property path of the argument it mirrors, as the
        ``x-mcp-header`` annotations of the tool's ``inputSchema`` say
        (``mrtr_core``'s ``schema_header_params`` reads and validates them);
        ``None`` for a tool the app does not know.

        The default (for a class that subclasses ``ServerApp``): none.
        """
        return None


def tool_header_params(app: ServerApp, name: str) -> Mapping[str, Sequence[str]] | None:
    """``app.tool_header_params(name)``; ``None`` from an app that has no such method
    (one written before it existed, matching ``ServerApp`` by shape)."""
    method = getattr(app, "tool_header_params", None)
    return None if method is None else method(name)


async def run_app(
    app: ServerApp, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
) -> Outcome:
    """One leg of ``app``: its result mapping, or the ``MrtrError`` it raised.

    Any other exception is logged and becomes -32603 "Internal error" (its
    text stays in the log: it may hold what the client should not see).
    Cancellation passes through.
    """
    try:
        result = await app.handle(request, info, outlet)
    except m.MrtrError as exc:
        return exc
    except Exception:
        log.exception("the app failed on %s (request id %r)", request.method, request.id)
        return m.MrtrError("Internal error", code=m.ErrorCode.INTERNAL_ERROR)
    if not isinstance(result, Mapping):
        log.error(
            "the app returned %s for %s (request id %r), not a result mapping",
            type(result).__name__,
            request.method,
            request.id,
        )
        return m.MrtrError("Internal error", code=m.ErrorCode.INTERNAL_ERROR)
    return result
