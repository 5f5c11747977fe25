"""What the ASGI tests serve: a small ``McpApp`` as ``McpAsgi``, mounted in Starlette beside
another route (``/health``), for uvicorn (asyncio) and hypercorn (trio) alike.

Its handlers use anyio (``anyio.sleep``), so the same app runs on either loop:
``greet`` (a plain call), ``trip`` (two rounds: a form, then the result),
``steps`` (progress notes, so the answer is an SSE stream), ``pause`` (a
note, then a pause longer than the keep-alive interval), ``sleep`` (runs
until cancelled; ``cancelled`` counts how many were).  ``app`` mounts the
endpoint twice (``/mcp`` and ``/api/mcp``) beside ``/health`` and ``/stats``;
``bare`` is the endpoint alone.  Starlette runs the lifespan itself, so it enters the
``/mcp`` endpoint's (``McpAsgi.lifespan``: where 2025-era sessions live); the one under
``/api`` is left without it (2026-07-28 only there).
"""

from __future__ import annotations

from typing import Any

import anyio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.asgi import McpAsgi
from mrtr_transports.asgi.uvicorn_protocol import with_head_timeout
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route

import mrtr_core as m

#: A small bound, so the too-large test sends little.
MAX_BODY = 64 * 1024
CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
CITY_SCHEMA = {"type": "object", "properties": {"days": {"type": "integer"}}}

mcp = McpApp("asgi-test", "1.0")
cancelled = 0


@mcp.tool(description="Says hello.")
def greet(ctx: Context) -> str:
    return f"hello, {ctx.arguments.get('name', 'world')}"


@mcp.tool(description="Asks for a city, then plans the trip.", input_schema=CITY_SCHEMA)
def trip(ctx: Context) -> Any:
    city = ctx.answer("city", CITY)
    if city is None:
        return ctx.ask({"city": CITY})
    return f"Trip to {city.content['city']} for {ctx.arguments.get('days', 1)} days"


@mcp.tool(description="Three progress notes, then a result.")
async def steps(ctx: Context) -> str:
    for step in (1, 2, 3):
        await ctx.progress(step, 3, f"step {step}")
        await anyio.sleep(0.01)
    return "done in 3 steps"


@mcp.tool(description="One progress note, then a pause of 0.7 s: keep-alives meanwhile.")
async def pause(ctx: Context) -> str:
    await ctx.progress(1, 2, "started")
    await anyio.sleep(0.7)
    return "paused"


@mcp.tool(description="Runs until cancelled.")
async def sleep(ctx: Context) -> str:
    global cancelled
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        cancelled += 1
        raise
    return "woke up"


async def health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def stats(request: Request) -> JSONResponse:
    return JSONResponse({"cancelled": cancelled})


endpoint = McpAsgi(mcp, max_body_size=MAX_BODY, keepalive_interval=0.2)

#: The MCP endpoint beside other routes: ``POST /mcp``, ``GET /health``, ``GET /stats``.
app = Starlette(
    lifespan=endpoint.lifespan,
    routes=[
        Route("/health", health),
        Route("/stats", stats),
        Route("/mcp", endpoint),
        # mounted under a prefix: the endpoint's path is below the mount (root_path)
        Mount("/api", app=McpAsgi(mcp, path="/mcp", max_body_size=MAX_BODY)),
    ],
)

#: The endpoint alone, run by the server itself (its own 404s and lifespan), with a
#: small listen pool: one stream per client, each for a second.
bare = McpAsgi(mcp, max_body_size=MAX_BODY, listen_lifetime=1.0, max_listen_streams_per_client=1)

#: The endpoint alone with a short body deadline (the bounds tests trickle a body).
strict = McpAsgi(mcp, body_timeout=2.0)

#: uvicorn's h11 protocol with a 2 s head deadline (``--http support.asgi_apps:head_2s``).
head_2s = with_head_timeout(2.0)
