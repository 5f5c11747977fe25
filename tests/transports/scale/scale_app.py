"""What the scale-out workers serve: the example app plus two more styles.

``--app scale_app:app`` (this folder on PYTHONPATH) is the example app, in its
own worker process, with three tools registered on it here: ``book_room``, a
``mrtr_core.server.Steps`` flow (two rounds, then a last step that runs at most
once per flow), ``interview``, a continuation-style tool (parked in the
worker's memory between rounds: it needs sticky routing), and ``chore``, work
handed to a task (SEP-2663) that runs ``seconds`` long and then, if ``ask``, asks a
name through the task (its work runs on the worker that created it; the task is
served by any worker with ``--task-store``, by that one with routing).

The tasks' bounds are small, so a test can meet them (a share of 2 tasks per
client, records kept 120 s; ``--task-store`` carries them over to Redis), and the
app's principal is ``$MRTR_SCALE_PRINCIPAL`` (a worker of another principal).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.example import app
from mrtr_transports.apps.task_runs import TaskContext
from mrtr_transports.apps.task_store import MemoryTaskStore

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


CHORE_SCHEMA = {
    "type": "object",
    "properties": {
        "seconds": {"type": "number", "minimum": 0, "maximum": 600},
        "ask": {"type": "boolean"},
    },
}


def chore(ctx: Context) -> Any:
    """Works ``seconds`` in a task, then (``ask``) asks a name through the task."""
    seconds = float(ctx.arguments.get("seconds", 0))
    return ctx.run_task(_chore, seconds, bool(ctx.arguments.get("ask", False)))


async def _chore(task: TaskContext, seconds: float, ask: bool) -> str:
    await task.status(f"working for {seconds:g} s")
    await anyio.sleep(seconds)
    if not ask:
        return "chore done"
    name = _field(await task.wait_for_answer("name", NAME), "name")
    return f"chore done for {name}"


app.add_tool(chore, "chore", input_schema=CHORE_SCHEMA, task="optional")

app.use_task_store(MemoryTaskStore(max_tasks=50, max_tasks_per_client=2, ttl=120))
app.principal = os.environ.get("MRTR_SCALE_PRINCIPAL") or None
