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

One place to import from: everything an app author needs to write a tool (``McpApp``,
``Context``), ask (``elicit_form``, ``elicit_url``, ``sample``, ``list_roots``; ``Ask``,
``Steps``, ``Next``), read the answers (``ElicitResult``, ``CreateMessageResult``,
``ListRootsResult``: ``ctx.answer(key, asked)`` is typed by the ask), return an error
(``tool_error``, ``MrtrError``), test (``TestClient``, ``accept``, ``decline``,
``cancel``, ``sampled``, ``roots``), serve (``serve_stdio``, ``serve_http``/``HttpServer``,
``serve_ws``/``WsServer``, ``McpAsgi``) and call (``Client``, ``open_stdio_client``,
``open_http_client``, ``open_ws_client``, and their errors).  Each name is loaded on
first use, so ``import mrtr_transports`` stays cheap for a command that needs only one
side; the protocol's own names stay in :mod:`mrtr_core`.

A tool that asks the user a question, then answers (save it as ``greet.py``)::

    from mrtr_transports import Ask, Context, McpApp, elicit_form

    app = McpApp("greeter", "1.0")
    NAME = elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])


    @app.tool(description="Greets the user by the name they give.")
    def greet(ctx: Context) -> str | Ask:
        answer = ctx.answer("name", NAME)  # an ElicitResult: NAME is a form
        if answer is None:  # the first leg: ask; the client calls again with the answer
            return ctx.ask({"name": NAME})
        if answer.action != "accept":
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
    from mrtr_core import MrtrError
    from mrtr_core import __version__ as __version__
    from mrtr_core.server import (
        Ask,
        Next,
        Steps,
        elicit_form,
        elicit_url,
        list_roots,
        sample,
    )
    from mrtr_core.wire import CreateMessageResult, ElicitResult, ListRootsResult

    from .apps.context import Context
    from .apps.continuations import ContinuationStore
    from .apps.mcp_app import McpApp
    from .apps.results import tool_error
    from .apps.task_runs import TaskContext
    from .apps.task_store import MemoryTaskStore
    from .asgi.endpoint import McpAsgi
    from .cli.exit_codes import ExitCode
    from .client.client import Client
    from .client.errors import (
        CallError,
        CallTimeout,
        ClientError,
        InputUnavailable,
        RoundCapExceeded,
        TaskCancelled,
        TransportError,
    )
    from .client.http import open_http_client
    from .client.stdio import open_stdio_client
    from .client.tasks import TaskHandle
    from .client.ws import open_ws_client
    from .server.app import Outlet, ServerApp
    from .server.http import HttpServer, serve_http
    from .server.stdio import serve_stdio
    from .server.ws import WsServer, serve_ws
    from .testing.answers import accept, cancel, decline, roots, sampled
    from .testing.client import TestClient

#: Where each public name lives, by what it is for (its module is imported when the name
#: is first used).  The core's names come from its public modules: ``mrtr_transports`` is
#: one place to import from, never a second home for them.
_HOMES = {
    # writing a tool
    "McpApp": "mrtr_transports.apps.mcp_app",
    "Context": "mrtr_transports.apps.context",
    "ContinuationStore": "mrtr_transports.apps.continuations",
    "TaskContext": "mrtr_transports.apps.task_runs",
    "MemoryTaskStore": "mrtr_transports.apps.task_store",
    # asking, and reading the answers
    "elicit_form": "mrtr_core.server",
    "elicit_url": "mrtr_core.server",
    "sample": "mrtr_core.server",
    "list_roots": "mrtr_core.server",
    "Ask": "mrtr_core.server",
    "Steps": "mrtr_core.server",
    "Next": "mrtr_core.server",
    "ElicitResult": "mrtr_core.wire",
    "CreateMessageResult": "mrtr_core.wire",
    "ListRootsResult": "mrtr_core.wire",
    # results and errors
    "tool_error": "mrtr_transports.apps.results",
    "MrtrError": "mrtr_core",
    # testing
    "TestClient": "mrtr_transports.testing.client",
    "accept": "mrtr_transports.testing.answers",
    "decline": "mrtr_transports.testing.answers",
    "cancel": "mrtr_transports.testing.answers",
    "sampled": "mrtr_transports.testing.answers",
    "roots": "mrtr_transports.testing.answers",
    # serving
    "ServerApp": "mrtr_transports.server.app",
    "Outlet": "mrtr_transports.server.app",
    "serve_stdio": "mrtr_transports.server.stdio",
    "HttpServer": "mrtr_transports.server.http",
    "serve_http": "mrtr_transports.server.http",
    "WsServer": "mrtr_transports.server.ws",
    "serve_ws": "mrtr_transports.server.ws",
    "McpAsgi": "mrtr_transports.asgi.endpoint",
    # calling
    "Client": "mrtr_transports.client.client",
    "open_stdio_client": "mrtr_transports.client.stdio",
    "open_http_client": "mrtr_transports.client.http",
    "open_ws_client": "mrtr_transports.client.ws",
    "CallError": "mrtr_transports.client.errors",
    "CallTimeout": "mrtr_transports.client.errors",
    "ClientError": "mrtr_transports.client.errors",
    "ExitCode": "mrtr_transports.cli.exit_codes",
    "InputUnavailable": "mrtr_transports.client.errors",
    "RoundCapExceeded": "mrtr_transports.client.errors",
    "TaskCancelled": "mrtr_transports.client.errors",
    "TaskHandle": "mrtr_transports.client.tasks",
    "TransportError": "mrtr_transports.client.errors",
}

__all__ = [
    "Ask",
    "CallError",
    "CallTimeout",
    "Client",
    "ClientError",
    "Context",
    "ContinuationStore",
    "CreateMessageResult",
    "ElicitResult",
    "ExitCode",
    "HttpServer",
    "InputUnavailable",
    "ListRootsResult",
    "McpApp",
    "McpAsgi",
    "MemoryTaskStore",
    "MrtrError",
    "Next",
    "Outlet",
    "RoundCapExceeded",
    "ServerApp",
    "Steps",
    "TaskCancelled",
    "TaskContext",
    "TaskHandle",
    "TestClient",
    "TransportError",
    "WsServer",
    "accept",
    "cancel",
    "decline",
    "elicit_form",
    "elicit_url",
    "list_roots",
    "open_http_client",
    "open_stdio_client",
    "open_ws_client",
    "roots",
    "sample",
    "sampled",
    "serve_http",
    "serve_stdio",
    "serve_ws",
    "tool_error",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # one version for the distribution, kept by mrtr_core
        return importlib.import_module("mrtr_core").__version__
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mrtr_transports' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
