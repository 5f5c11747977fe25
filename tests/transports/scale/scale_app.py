"""What the scale-out workers serve: the example app plus two more styles.

``--app scale_app:app`` (this folder on PYTHONPATH) is the example app, in its
own worker process, with two tools registered on it here: ``book_room``, a
``mrtr_core.server.Steps`` flow (two rounds, then a last step that runs at most
once per flow), and ``interview``, a continuation-style tool (parked in the
worker's memory between rounds: it needs sticky routing).
"""

from __future__ import annotations

from typing import Any

from mrtr_transports.apps.context import Context
from mrtr_transports.apps.example import app

import mrtr_core as m

__all__ = ["app"]

GUESTS = m.server.elicit_form(
    "How many guests?", {"guests": {"type": "integer", "minimum": 1}}, required=["guests"]
)
NIGHTS = m.server.elicit_form(
    "How many nights?", {"nights": {"type": "integer", "minimum": 1}}, required=["nights"]
)
NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])
ROLE = m.server.elicit_form("Your role?", {"role": {"type": "string"}}, required=["role"])


def _field(answer: Any, name: str) -> Any:
    content = getattr(answer, "content", None) or {}
    return content.get(name)


book_room = m.server.Steps()


@book_room.step("guests")
def ask_guests(ctx: Any, data: Any) -> Any:
    return m.server.Next({}, ask={"guests": GUESTS})


@book_room.step("nights")
def ask_nights(ctx: Any, data: Any) -> Any:
    guests = ctx.answer("guests", GUESTS)
    if guests is None:
        return ctx.ask({"guests": GUESTS})
    return m.server.Next({"guests": _field(guests, "guests")}, ask={"nights": NIGHTS})


@book_room.step("book")
def book(ctx: Any, data: Any) -> Any:  # the last step: spent in the single-use store first
    nights = _field(ctx.answer("nights", NIGHTS), "nights")
    text = f"Booked a room for {data['guests']} guests, {nights} nights."
    return {"content": [{"type": "text", "text": text}]}


app.add_tool(book_room, "book_room", description="Books a room in steps (Steps style).")


@app.tool(
    description="Asks a name, then a role (continuation style: needs sticky routing).",
    continuation=True,
)
async def interview(ctx: Context) -> str:
    name = _field(await ctx.wait_for_answer("name", NAME), "name")
    role = _field(await ctx.wait_for_answer("role", ROLE), "role")
    return f"{name} joins as {role}."
