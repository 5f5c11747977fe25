"""A server app that counts what it serves, for the client's cache and listen tests.

Lists and reads are public and fresh for a minute; ``test://private`` is private;
``test://short`` is fresh for :data:`SHORT_TTL_MS`; ``test://asks`` asks a
question first (an MRTR resource read); the tool ``seen`` tells how many
requests of each method the app handled (so a stdio test can ask the server
itself); ``add_tool`` adds a tool (listen streams get ``tools/list_changed``);
``touch`` changes ``test://public`` (``resources/updated``).

Served over stdio with ``mrtr serve --stdio --app support.cache_app:app``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.server.app import Outlet

import mrtr_core as m

SHORT_TTL_MS = 150
NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])


class CountingApp(McpApp):
    """``McpApp`` that counts the requests it handles, by method."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: Counter[str] = Counter()

    async def handle(
        self, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
    ) -> Mapping[str, Any]:
        self.seen[request.method] += 1
        return await super().handle(request, info, outlet)


def make_app() -> CountingApp:
    app = CountingApp("cache-test", "1", cache_ttl_ms=60_000, cache_scope="public")
    revision = {"public": 0, "tools": 0}

    @app.resource("test://public", name="public", ttl_ms=60_000, cache_scope="public")
    def public(ctx: Context) -> str:
        return f"public revision {revision['public']}"

    @app.resource("test://private", name="private", ttl_ms=60_000, cache_scope="private")
    def private(ctx: Context) -> str:
        return "private to you"

    @app.resource("test://short", name="short", ttl_ms=SHORT_TTL_MS, cache_scope="public")
    def short(ctx: Context) -> str:
        return "short-lived"

    @app.resource("test://asks", name="asks", ttl_ms=60_000, cache_scope="public")
    def asks(ctx: Context) -> Any:
        name = ctx.answer("name", NAME)
        if name is None:
            return ctx.ask({"name": NAME})
        return "hello"

    @app.resource_template("test://item/{id}", name="item")
    def item(ctx: Context) -> str:
        return f"item {ctx.uri_params['id']}"

    @app.prompt()
    def greet(ctx: Context) -> str:
        """A greeting."""
        return "Hello"

    @app.tool()
    def seen(ctx: Context) -> str:
        """How many requests of each method the app handled (JSON)."""
        import json

        return json.dumps(dict(app.seen), sort_keys=True)

    def extra(ctx: Context) -> str:
        return "extra"

    @app.tool()
    def add_tool(ctx: Context) -> str:
        """Adds a tool named extra_N (listen streams get tools/list_changed)."""
        revision["tools"] += 1
        app.add_tool(extra, name=f"extra_{revision['tools']}")
        return f"extra_{revision['tools']}"

    @app.tool()
    def listening(ctx: Context) -> str:
        """How many subscriptions/listen streams are open."""
        return str(app.subscription_count)

    @app.tool()
    def touch(ctx: Context) -> str:
        """Changes test://public (resources/updated for its subscribers)."""
        revision["public"] += 1
        app.notify_resource_updated("test://public")
        return "touched"

    return app


app = make_app()
