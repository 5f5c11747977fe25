"""Tools that await their own loop's library: asyncio's on asyncio, trio's on trio.

``nap`` awaits ``asyncio.sleep`` (or ``trio.sleep``) and says which loop ran it;
``greet`` asks the user's name (a second round), naps, then greets; ``greet_twice``
does it twice in the continuation style (parked between rounds); ``echo`` answers
at once; ``hang`` naps for a minute and counts how it ended (``counts``: started, cancelled).
"""

from __future__ import annotations

import asyncio
from typing import Any

import sniffio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp

import mrtr_core as m

app = McpApp("loop-test", "1.0")
NAME = m.server.elicit_form("What is your name?", {"name": {"type": "string"}}, required=["name"])
COUNTS = {"started": 0, "cancelled": 0}


async def native_sleep(seconds: float) -> str:
    """Sleep with the running loop's own library (no anyio in between): an asyncio-only
    call fails on trio, and a trio call fails on asyncio."""
    library = sniffio.current_async_library()
    if library == "asyncio":
        await asyncio.sleep(seconds)
    else:
        import trio

        await trio.sleep(seconds)
    return library


@app.tool()
async def nap(ctx: Context) -> str:
    """Naps on the loop's own sleep; says which loop that was."""
    return f"napped on {await native_sleep(0.01)}"


@app.tool()
async def echo(ctx: Context) -> str:
    """Answers at once: ``text``, and which loop ran it."""
    return f"{ctx.arguments.get('text')} on {sniffio.current_async_library()}"


@app.tool()
async def greet(ctx: Context) -> Any:
    """Asks the user's name, naps, then greets."""
    answer = ctx.answer("name", NAME)
    if answer is None:
        return ctx.ask({"name": NAME})
    library = await native_sleep(0.01)
    return f"Hello, {answer.content.get('name')}! ({library})"  # type: ignore[union-attr]


@app.tool(continuation=True)
async def greet_twice(ctx: Context) -> str:
    """Continuation style: the coroutine waits, parked, for each answer, napping between."""
    first = await ctx.wait_for_answer("first", NAME)
    library = await native_sleep(0.01)
    second = await ctx.wait_for_answer("second", NAME)
    names = [answer.content.get("name") for answer in (first, second)]  # type: ignore[union-attr]
    return f"Hello, {' and '.join(names)}! ({library})"


@app.tool()
async def hang(ctx: Context) -> str:
    """Naps for a minute, unless cancelled first."""
    COUNTS["started"] += 1
    try:
        await native_sleep(60)
    except BaseException:
        COUNTS["cancelled"] += 1
        raise
    return "woke up"


@app.tool()
def counts(ctx: Context) -> dict[str, int]:
    """How many ``hang`` calls started, and how many were cancelled."""
    return dict(COUNTS)
