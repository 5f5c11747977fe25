"""The app of the load and fault tests (``tests/transports/load``) and ``benchmarks/load.py``.

Served as ``--app support.load_app:app`` (``tests/`` on ``PYTHONPATH``), over
stdio by the serve entry, over HTTP by :mod:`support.load_server` (which sets
the server's bounds).  Its sealing key is fixed: it comes from the
environment variable ``MRTR_LOAD_STATE_KEY`` (hex, 32 bytes) or, without it,
from a constant, so two processes started alike open each other's
``requestState`` -- what a server restarted between two rounds needs.  Its
single-use store (where every redeemed state is spent) is in memory, one per
process; ``support.load_app:unspent`` has the same tools and no store.

The tools, one per scenario:

* ``relay(n)``: three legs.  Each question names the flow (``"flow 7 leg 1"``)
  and the client's answer echoes it, so the result
  (``"flow 7: flow 7 leg 1 + flow 7 leg 2"``) proves every answer reached
  its own flow.  Stateless between rounds (the first answer rides in the
  sealed state).
* ``plan_trip``, ``deploy`` and ``weather``: the example app's tools, as they
  are (``deploy`` is the ``once`` style).
* ``checkout(item)``: a :class:`mrtr_core.server.Steps` tool (its last step runs once).
* ``tally``: the continuation style (parked in this process between rounds).
* ``streamed(n, guarded, steps, interval)``: asks ``go``, then streams
  ``steps`` progress notifications ``interval`` seconds apart before its
  result; ``guarded`` spends ``ctx.once("effect")`` before streaming.
* ``pause(seconds)``: a leg that keeps its connection busy for a while (a progress
  notification says it has started).
* ``flood(size)``: progress notifications of ``size`` characters, until cancelled.
* ``blob(size)``: a text result of ``size`` characters.
* ``stats``: what the handlers counted (started, finished, cancelled, running,
  effects) and the stores' sizes (states spent, continuations parked), as
  ``structuredContent``.
"""

from __future__ import annotations

import os
from typing import Any

import trio
from mrtr_transports.apps import example
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp

import mrtr_core as m

KEY_ENV = "MRTR_LOAD_STATE_KEY"
#: The key without ``MRTR_LOAD_STATE_KEY`` (test material, not a secret).
DEFAULT_KEY = bytes(range(32))


def state_key() -> bytes:
    value = os.environ.get(KEY_ENV)
    return bytes.fromhex(value) if value else DEFAULT_KEY


app = McpApp("mrtr-load", "1.0")
app.configure_state({"load": state_key()}, "load")  # and its own in-memory single-use store

#: What the handlers counted in this process.
counts = {"started": 0, "finished": 0, "cancelled": 0, "running": 0, "effects": 0}

for _name in ("plan_trip", "deploy", "weather"):
    _tool = example.app.tools[_name]
    app.add_tool(
        _tool.fn,
        _name,
        description=_tool.description,
        input_schema=_tool.input_schema,
        annotations=_tool.annotations,
    )

NUMBERED: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}


def question(text: str) -> m.wire.ElicitFormRequest:
    return m.server.elicit_form(text, {"echo": {"type": "string"}}, required=["echo"])


def echoed(answer: m.wire.InputResponse | None) -> str | None:
    """The ``echo`` field of an accepted form, or None."""
    if isinstance(answer, m.wire.ElicitResult) and answer.content:
        value = answer.content.get("echo")
        return value if isinstance(value, str) else None
    return None


@app.tool(input_schema=NUMBERED)
def relay(ctx: Context) -> Any:
    """Three legs: two questions naming the flow, then both echoed answers."""
    n = int(ctx.arguments.get("n", 0))
    first, second = question(f"flow {n} leg 1"), question(f"flow {n} leg 2")
    state = ctx.state or {}
    if "a" not in state:
        a = echoed(ctx.answer("a", first))
        if a is None:
            return ctx.ask({"a": first})
        return ctx.ask({"b": second}, state={"a": a})
    b = echoed(ctx.answer("b", second))
    if b is None:
        return ctx.ask({"b": second}, state=state)
    return f"flow {n}: {state['a']} + {b}"


checkout_steps = m.server.Steps()


@checkout_steps.step("confirm")
def _confirm(ctx: m.server.HandlerContext, data: Any) -> Any:
    item = str(ctx.arguments.get("item", "?"))
    return m.server.Next({"item": item}, ask={"confirm": question(f"buy {item}?")})


@checkout_steps.step("charge")
def _charge(ctx: m.server.HandlerContext, data: Any) -> Any:
    answer = echoed(ctx.answer("confirm", question(f"buy {data['item']}?")))
    counts["effects"] += 1
    return {"content": [{"type": "text", "text": f"bought {data['item']} ({answer})"}]}


app.add_tool(
    checkout_steps,
    "checkout",
    description="Steps: confirm, then charge (the last step runs at most once per flow).",
    input_schema={"type": "object", "properties": {"item": {"type": "string"}}},
)


@app.tool(continuation=True)
async def tally(ctx: Context) -> str:
    """Continuation style: two questions, the handler parked in this process between them."""
    first = await ctx.wait_for_answer("a", question("tally leg 1"))
    second = await ctx.wait_for_answer("b", question("tally leg 2"))
    return f"tally: {echoed(first)} + {echoed(second)}"


class _Running:
    """Counts a handler in ``counts`` while it runs, and how it ended."""

    def __enter__(self) -> None:
        counts["started"] += 1
        counts["running"] += 1

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        counts["running"] -= 1
        cancelled = kind is not None and issubclass(kind, trio.Cancelled)
        counts["cancelled" if cancelled else "finished"] += 1


@app.tool(
    input_schema={
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "guarded": {"type": "boolean"},
            "steps": {"type": "integer"},
            "interval": {"type": "number"},
        },
    }
)
async def streamed(ctx: Context) -> Any:
    """Asks ``go``; then streams progress notifications before its result."""
    n = int(ctx.arguments.get("n", 0))
    go = question(f"streamed {n}")
    if echoed(ctx.answer("go", go)) is None:
        return ctx.ask({"go": go})
    with _Running():
        if ctx.arguments.get("guarded") and ctx.once("effect"):
            counts["effects"] += 1
        steps = int(ctx.arguments.get("steps", 5))
        for step in range(1, steps + 1):
            await ctx.progress(step, steps, f"step {step} of flow {n}")
            await trio.sleep(float(ctx.arguments.get("interval", 0.1)))
        return f"streamed {n}"


@app.tool(input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}})
async def pause(ctx: Context) -> str:
    """Says it started (a progress notification), runs for ``seconds``, then answers:
    its connection is busy meanwhile."""
    with _Running():
        await ctx.progress(0, None, "pausing")
        await trio.sleep(float(ctx.arguments.get("seconds", 1.0)))
    return "paused"


@app.tool(input_schema={"type": "object", "properties": {"size": {"type": "integer"}}})
async def flood(ctx: Context) -> Any:
    """Progress notifications of ``size`` characters each, until cancelled."""
    chunk = "x" * int(ctx.arguments.get("size", 65536))
    with _Running():
        step = 0
        while True:
            step += 1
            await ctx.progress(step, None, chunk)
            await trio.sleep(0)


@app.tool(input_schema={"type": "object", "properties": {"size": {"type": "integer"}}})
def blob(ctx: Context) -> str:
    """A text result of ``size`` characters."""
    return "y" * int(ctx.arguments.get("size", 1024))


@app.tool()
def stats(ctx: Context) -> Any:
    """What the handlers counted, and the stores' sizes."""
    served = ctx.app
    parked = len(served.continuations) if served.continuations is not None else 0
    spent = getattr(served, "single_use", None)
    figures = {**counts, "spent": len(spent) if spent is not None else 0, "parked": parked}
    return {"content": [{"type": "text", "text": repr(figures)}], "structuredContent": figures}


#: The same tools with no single-use store: a redeemed state may be redeemed again
#: (``--app support.load_app:unspent``).
unspent = McpApp("mrtr-load-unspent", "1.0", single_use=None)
unspent.configure_state({"load": state_key()}, "load", single_use=None)
for _tool in app.tools.values():
    unspent.add_tool(
        _tool.fn,
        _tool.name,
        description=_tool.description,
        input_schema=_tool.input_schema,
        annotations=_tool.annotations,
        continuation=_tool.continuation,
    )
