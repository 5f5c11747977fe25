"""A server app for the client's every-loop tests (tests/transports/client/test_every_loop.py).

``trip`` asks a name, then a city (two ``input_required`` rounds, the name carried in
``requestState``); ``nap`` is an ``async def`` tool that sleeps (a call's timeout);
``add_tool`` adds a tool (listen streams get ``tools/list_changed``); ``listening``
says how many listen streams are open.

Served with ``mrtr serve --stdio|--http|--ws ... --app support.loops_app:app``.
"""

from __future__ import annotations

from typing import Any

import anyio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp

import mrtr_core as m

NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])
CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])

app = McpApp("every-loop", "1")
added = [0]


def _accepted(answer: m.wire.InputResponse, field: str) -> Any:
    content = answer.content if isinstance(answer, m.wire.ElicitResult) else None
    return (content or {}).get(field)


@app.tool()
def trip(ctx: Context) -> Any:
    """Asks a name, then a city: two rounds."""
    state = ctx.state or {}
    if "name" not in state:
        name = ctx.answer("name", NAME)
        if name is None:
            return ctx.ask({"name": NAME})
        return ctx.ask({"city": CITY}, state={"name": _accepted(name, "name")})
    city = ctx.answer("city", CITY)
    if city is None:
        return ctx.ask({"city": CITY}, state=state)
    return f"{state['name']} in {_accepted(city, 'city')}"


@app.tool()
async def nap(ctx: Context, seconds: float) -> str:
    """Sleeps ``seconds``."""
    await anyio.sleep(seconds)
    return "rested"


def _extra(ctx: Context) -> str:
    return "extra"


@app.tool()
def add_tool(ctx: Context) -> str:
    """Adds a tool named extra_N (listen streams get tools/list_changed)."""
    added[0] += 1
    app.add_tool(_extra, name=f"extra_{added[0]}")
    return f"extra_{added[0]}"


@app.tool()
def listening(ctx: Context) -> str:
    """How many subscriptions/listen streams are open."""
    return str(app.subscription_count)
