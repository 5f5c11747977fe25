"""mrtr_transports: MCP multi round-trip requests (SEP-2322) over trio: servers and clients
on stdio, Streamable HTTP and WebSocket, an app framework, and the ``mrtr`` command.

Every transport here is a thin adapter: the protocol (framing, rounds, sealed
``requestState``, both eras) lives in the sans-IO :mod:`mrtr_core`, and these modules
only move its bytes and run its timers on trio.  Install them with
``pip install 'mrtr[transports]'`` (``pip install mrtr`` is the core alone).

The parts, one subpackage each:

* :mod:`mrtr_transports.apps`: ``McpApp`` (tools, resources, prompts from decorated
  functions, in every handler style), the ``Context`` a handler gets, the continuation
  store, the example app that ``mrtr serve`` runs by default;
* :mod:`mrtr_transports.server`: what a server transport serves (``ServerApp``,
  ``Outlet``), the driver every server shares, stdio, Streamable HTTP, WebSocket;
* :mod:`mrtr_transports.client`: the ``Client`` (calls through every round, input
  handlers, timeouts from trio's clock) over a stdio child, an HTTP endpoint or a
  WebSocket;
* :mod:`mrtr_transports.stores`: what several server processes share (sealing keys,
  a Redis single-use store);
* :mod:`mrtr_transports.cli`: the ``mrtr`` command (``serve``, ``call``, ``state inspect``),
  the one command line that starts a server;
* :mod:`mrtr_transports.testing`: testing an app in memory (``TestClient``, a pytest plugin).

The names below are the ones most programs need; each is loaded on first use, so
``import mrtr_transports`` stays cheap for a command that needs only one side.

A tool that asks the user a question, then answers (save it as ``greet.py``)::

    import mrtr_core as m
    from mrtr_transports import Context, McpApp

    app = McpApp("greeter", "1.0")
    NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])


    @app.tool(description="Greets the user by the name they give.")
    def greet(ctx: Context) -> str | m.server.Ask:
        answer = ctx.answer("name", NAME)
        if answer is None:  # the first leg: ask; the client calls again with the answer
            return ctx.ask({"name": NAME})
        if not isinstance(answer, m.wire.ElicitResult) or answer.action != "accept":
            return "Hello, whoever you are."
        return f"Hello, {(answer.content or {}).get('name')}!"

Serve it and call it (``--answer`` answers the question; without it ``mrtr call`` asks
at the terminal)::

    mrtr serve --http 127.0.0.1:8000 --app greet.py:app
    mrtr call http://127.0.0.1:8000/mcp greet \\
        --answer 'name={"action": "accept", "content": {"name": "Ada"}}'

See ``docs/transports.md`` (the adapters), ``docs/server.md`` (handler styles) and
``docs/cli.md`` (the command).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mrtr_core import __version__ as __version__

    from .apps.context import Context
    from .apps.continuations import ContinuationStore
    from .apps.mcp_app import McpApp
    from .cli.exit_codes import ExitCode
    from .client.client import Client
    from .client.errors import (
        CallError,
        CallTimeout,
        ClientError,
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
    "ExitCode": "cli.exit_codes",
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
    if name == "__version__":  # one version for the distribution, kept by mrtr_core
        return importlib.import_module("mrtr_core").__version__
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mrtr_transports' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
