"""mrtr_transports: trio adapters that drive the sans-IO ``mrtr_core``, an app framework,
and the ``mrtr`` command.

The parts, one subpackage each:

* :mod:`mrtr_transports.server`: what a server transport serves (``ServerApp``,
  ``Outlet``), the driver every server shares, stdio and Streamable HTTP;
* :mod:`mrtr_transports.client`: the ``Client`` (calls through every round, input
  handlers, timeouts from trio's clock) over a stdio child or an HTTP endpoint;
* :mod:`mrtr_transports.apps`: ``McpApp`` (tools, resources, prompts from decorated
  functions, every handler style), the continuation store, the example app;
* :mod:`mrtr_transports.cli`: the ``mrtr`` command;
* :mod:`mrtr_transports.testing`: the client the official conformance suite runs.

The names below are the ones most programs need; each is loaded on first use, so
``import mrtr_transports`` stays cheap for a command that needs only one side.
See ``docs/transports.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .apps.context import Context
    from .apps.continuations import ContinuationStore
    from .apps.mcp_app import McpApp
    from .client.client import Client
    from .client.errors import (
        CallError,
        CallTimeout,
        ClientError,
        ExitCode,
        InputUnavailable,
        RoundCapExceeded,
        TransportError,
    )
    from .client.http import open_http_client
    from .client.stdio import open_stdio_client
    from .server.app import Outlet, ServerApp
    from .server.http.server import HttpServer, serve_http
    from .server.stdio import serve_stdio

#: Where each public name lives (the module is imported when the name is first used).
_HOMES = {
    "Context": "apps.context",
    "ContinuationStore": "apps.continuations",
    "McpApp": "apps.mcp_app",
    "Client": "client.client",
    "CallError": "client.errors",
    "CallTimeout": "client.errors",
    "ClientError": "client.errors",
    "ExitCode": "client.errors",
    "InputUnavailable": "client.errors",
    "RoundCapExceeded": "client.errors",
    "TransportError": "client.errors",
    "open_http_client": "client.http",
    "open_stdio_client": "client.stdio",
    "Outlet": "server.app",
    "ServerApp": "server.app",
    "HttpServer": "server.http.server",
    "serve_http": "server.http.server",
    "serve_stdio": "server.stdio",
}

__all__ = [
    "CallError",
    "CallTimeout",
    "Client",
    "ClientError",
    "Context",
    "ContinuationStore",
    "ExitCode",
    "HttpServer",
    "InputUnavailable",
    "McpApp",
    "Outlet",
    "RoundCapExceeded",
    "ServerApp",
    "TransportError",
    "open_http_client",
    "open_stdio_client",
    "serve_http",
    "serve_stdio",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mrtr_transports' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
