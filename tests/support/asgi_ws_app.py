"""What the WebSocket-under-ASGI tests serve: a small ``McpApp`` as ``McpAsgi``, bare, for
uvicorn (``--ws wsproto``).

``echo`` (a plain call, any size), ``trip`` (two rounds: a form, then the result),
``loop`` (an ``async def`` tool that awaits asyncio itself, so it runs only where the
server's loop is asyncio).  Origins other than ``ALLOWED_ORIGIN`` are refused; the
endpoint bounds a message at ``MAX_MESSAGE`` bytes (the server's own bound is set
larger on its command line, so each bound can be met on its own).
"""

from __future__ import annotations

import asyncio
from typing import Any

import sniffio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.asgi import McpAsgi

import mrtr_core as m

ALLOWED_ORIGIN = "https://app.example"
MAX_MESSAGE = 3000
CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])

mcp = McpApp("asgi-ws-test", "1.0")


@mcp.tool(description="Says the text back.")
def echo(ctx: Context) -> str:
    return str(ctx.arguments.get("text", ""))


@mcp.tool(description="Asks for a city, then plans the trip.")
def trip(ctx: Context) -> Any:
    city = ctx.answer("city", CITY)
    if city is None:
        return ctx.ask({"city": CITY})
    return f"Trip to {city.content['city']}"


@mcp.tool(description="Awaits asyncio itself; says which loop ran it.")
async def loop(ctx: Context) -> str:
    await asyncio.sleep(0.01)  # (fails outside an asyncio loop)
    return f"{sniffio.current_async_library()} {type(asyncio.get_running_loop()).__name__}"


app = McpAsgi(mcp, allowed_origins=[ALLOWED_ORIGIN], max_message_size=MAX_MESSAGE)
