"""A small shop served by the tests of the test client and its pytest plugin.

Written as a user would write one; the pytest plugin's tests copy this file into
the project they run pytest on.  ``buy_unsafe`` charges before it asks for
confirmation, so it charges again on every leg; ``buy`` guards the charge with
``ctx.once``.  ``leaky_app`` keeps no single-use record, so a replayed state is
served again; ``PlainStateApp`` hands out a state it never checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mrtr_transports.apps.mcp_app import McpApp

import mrtr_core as m

CHARGES: list[tuple[str, int]] = []


def charge_card(item: str, cents: int) -> None:
    """The side effect: in a real shop, a payment."""
    CHARGES.append((item, cents))


TRAVELLER = m.server.elicit_form(
    "Who is travelling?", {"name": {"type": "string"}}, required=["name"]
)
NIGHTS = m.server.elicit_form(
    "How many nights?", {"nights": {"type": "integer", "minimum": 1}}, required=["nights"]
)
CONFIRM = m.server.elicit_form("Buy it?", {"ok": {"type": "boolean"}}, required=["ok"])
TONE = m.server.sample("Describe the weather in one word", max_tokens=10)
ROOTS = m.server.list_roots()
PRICES = {"book": 1200, "lamp": 3400}


def _content(answer: Any) -> dict[str, Any]:
    if isinstance(answer, m.wire.ElicitResult) and answer.action == "accept":
        return dict(answer.content or {})
    return {}


def make_app(**options: Any) -> McpApp:
    app = McpApp("shop", "1.0", **options)

    @app.tool(input_schema={"type": "object", "properties": {"to": {"type": "string"}}})
    def plan_trip(ctx: Any) -> Any:
        """Two rounds: who travels, then how long."""
        state = ctx.state or {}
        if "name" not in state:
            traveller = ctx.answer("traveller", TRAVELLER)
            if traveller is None:
                return ctx.ask({"traveller": TRAVELLER})
            name = _content(traveller).get("name")
            if name is None:
                return "No trip: nobody is travelling."
            return ctx.ask({"nights": NIGHTS}, state={"name": name})
        nights = ctx.answer("nights", NIGHTS)
        if nights is None:
            return ctx.ask({"nights": NIGHTS}, state=state)
        count = _content(nights)["nights"]
        return f"Trip to {ctx.arguments['to']} for {state['name']}: {count} nights."

    @app.tool(input_schema={"type": "object", "properties": {"item": {"type": "string"}}})
    def buy_unsafe(ctx: Any) -> Any:
        """Charges, then asks: charges again on the retry."""
        item = ctx.arguments["item"]
        charge_card(item, PRICES[item])
        confirm = ctx.answer("confirm", CONFIRM)
        if confirm is None:
            return ctx.ask({"confirm": CONFIRM})
        return f"Bought {item}."

    @app.tool(input_schema={"type": "object", "properties": {"item": {"type": "string"}}})
    def buy(ctx: Any) -> Any:
        """Asks, then charges once."""
        item = ctx.arguments["item"]
        confirm = ctx.answer("confirm", CONFIRM)
        if confirm is None:
            return ctx.ask({"confirm": CONFIRM})
        if not _content(confirm).get("ok"):
            return "Not bought."
        if ctx.once("charge"):
            charge_card(item, PRICES[item])
        return f"Bought {item}."

    @app.tool()
    def weather(ctx: Any) -> Any:
        """Sampling and roots in one round."""
        tone = ctx.answer("tone", TONE)
        where = ctx.answer("where", ROOTS)
        if tone is None or where is None:
            return ctx.ask({"tone": TONE, "where": ROOTS})
        return f"{tone.content['text']} at {where.roots[0].uri}"

    @app.prompt(arguments=[{"name": "topic", "required": True}])
    def haiku(ctx: Any) -> Any:
        """A prompt that asks for a mood first."""
        mood = ctx.answer("mood", m.server.elicit_form("Mood?", {"mood": {"type": "string"}}))
        if mood is None:
            return ctx.ask({"mood": m.server.elicit_form("Mood?", {"mood": {"type": "string"}})})
        return f"A {_content(mood).get('mood')} haiku about {ctx.arguments['topic']}"

    @app.resource("shop://basket")
    def basket(ctx: Any) -> Any:
        """A resource that asks who is looking."""
        who = ctx.answer("who", TRAVELLER)
        if who is None:
            return ctx.ask({"who": TRAVELLER})
        return f"{_content(who).get('name')}'s basket is empty"

    @app.prompt()
    def broken(ctx: Any) -> Any:
        """A bug: raises."""
        return {"messages": [1 / 0]}

    return app


app = make_app()
#: No single-use store: a replayed state is served again.
leaky_app = make_app(single_use=None)


class PlainStateApp:
    """A ServerApp written by hand whose requestState is plain text it never checks."""

    info: Mapping[str, Any] = {"name": "plain", "version": "1"}
    capabilities: Mapping[str, Any] = {"tools": {}}
    instructions = None

    def __init__(self) -> None:
        self.clock = lambda: 0.0  # (never read: the state has no expiry)

    async def handle(self, request: m.Request, info: Any, outlet: Any) -> Mapping[str, Any]:
        params = request.params or {}
        if request.method == "tools/list":
            return {"tools": [{"name": "count", "inputSchema": {"type": "object"}}]}
        if request.method != "tools/call":
            raise m.MrtrError("no such method", code=m.ErrorCode.METHOD_NOT_FOUND)
        if "requestState" not in params:
            ask = {"n": m.server.elicit_form("A number?", {"n": {"type": "integer"}})}
            return m.server.input_required(ask, state="round-1")
        return {"content": [{"type": "text", "text": f"state {params['requestState']}"}]}


plain_app = PlainStateApp()
