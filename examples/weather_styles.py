"""The weather tool of docs/server.md in all four handler styles, on one McpApp.

Each style is one ``@app.tool`` taking the same ``Context`` and serves the same
three-round flow (city, units, a sampled tone) to a 2026-07-28 client
``Connection``; only bytes pass between client and server.  A question the user
declines or cancels ends each of them the same way: ``accepted`` raises, and the
app turns the exception into a tool result with ``isError`` that says which
question was refused (the model reads it; nothing is built on a missing answer).
Run: ``.venv/bin/python examples/weather_styles.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio
from mrtr_transports import (
    Context,
    CreateMessageResult,
    ElicitResult,
    McpApp,
    Next,
    Steps,
    elicit_form,
    sample,
)

import mrtr_core as m  # the client Connection that drives the app below

CITY = elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = elicit_form("Units?", {"units": {"type": "string", "enum": ["C", "F"]}})
TONE = sample("Describe sunshine in three words", max_tokens=10)
CAPABILITIES: dict[str, Any] = {"elicitation": {}, "sampling": {}}
USER = {  # what the client's user (and its LLM) answer
    "city": ElicitResult(action="accept", content={"city": "Oslo"}),
    "units": ElicitResult(action="accept", content={"units": "C"}),
    "tone": CreateMessageResult(
        role="assistant", content={"type": "text", "text": "warm and bright"}, model="demo"
    ),
}

app = McpApp("weather", "1.0")


def forecast(city: str, units: str, tone: str) -> str:
    return f"{city}: 21 {units}, {tone}"


class Refused(Exception):
    """The user declined or cancelled a question: the tool ends with this message."""


def accepted(answer: ElicitResult, asked: m.wire.ElicitFormRequest, name: str) -> Any:
    """The accepted form's ``name``; a decline or a cancel ends the tool (``Refused``)."""
    if answer.action == "decline":
        raise Refused(f"No forecast: you declined to answer {asked.message!r}.")
    if answer.action == "cancel":
        raise Refused(f"No forecast: you dismissed {asked.message!r} without answering.")
    return (answer.content or {})[name]


def text(answer: CreateMessageResult) -> str:
    return str(answer.content["text"])


# --- 1. re-entrant: a plain function, re-run from the top on every leg -----------------


@app.tool("re-entrant")
def reentrant(ctx: Context) -> Any:
    state = ctx.state or {}
    if "city" not in state:
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})
        return ctx.ask({"units": UNITS}, state={"city": accepted(city, CITY, "city")})
    if "units" not in state:
        units = ctx.answer("units", UNITS)
        if units is None:
            return ctx.ask({"units": UNITS}, state=state)
        return ctx.ask({"tone": TONE}, state={**state, "units": accepted(units, UNITS, "units")})
    tone = ctx.answer("tone", TONE)
    if tone is None:
        return ctx.ask({"tone": TONE}, state=state)
    return forecast(state["city"], state["units"], text(tone))


# --- 2. once: a side effect in a re-entrant handler, at most once per flow ---------------

notified: list[str] = []


@app.tool("once")
def with_once(ctx: Context) -> Any:
    state = ctx.state or {}
    if "city" in state and ctx.once("notify"):
        notified.append(state["city"])  # e.g. tell a subscriber who asked about the city
    return reentrant(ctx)


# --- 3. Steps: named stages; the last one runs at most once -------------------------------

steps = Steps()  # its steps get the same Context


@steps.step("city")
def ask_city(ctx: Context, data: Any) -> Any:
    return Next({}, ask={"city": CITY})


@steps.step("units")
def ask_units(ctx: Context, data: Any) -> Any:
    city = ctx.answer("city", CITY)
    if city is None:
        return ctx.ask({"city": CITY})
    return Next({"city": accepted(city, CITY, "city")}, ask={"units": UNITS})


@steps.step("tone")
def ask_tone(ctx: Context, data: Any) -> Any:
    units = ctx.answer("units", UNITS)
    if units is None:
        return ctx.ask({"units": UNITS})
    return Next({**data, "units": accepted(units, UNITS, "units")}, ask={"tone": TONE})


@steps.step("read tone")
def read_tone(ctx: Context, data: Any) -> Any:
    tone = ctx.answer("tone", TONE)
    if tone is None:
        return ctx.ask({"tone": TONE})
    return Next({**data, "tone": text(tone)})  # no ask: straight on to the last step


@steps.step("forecast")
def final(ctx: Context, data: Any) -> Any:
    return {
        "content": [{"type": "text", "text": forecast(data["city"], data["units"], data["tone"])}]
    }


app.add_tool(steps, "steps", description="The weather, step by step")


# --- 4. continuation: a coroutine parked between rounds in the app's store (trio) --------


@app.tool("continuation", continuation=True)
async def suspending(ctx: Context) -> str:
    city = accepted(await ctx.wait_for_answer("city", CITY), CITY, "city")
    units = accepted(await ctx.wait_for_answer("units", UNITS), UNITS, "units")
    tone = await ctx.wait_for_answer("tone", TONE)
    return forecast(city, units, text(tone))


# --- the wire ------------------------------------------------------------------------------


class Silent:
    """The Outlet of a leg: these tools stream no progress or log lines."""

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        pass

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        pass

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        pass


async def serve_one_call(tool: str, user: Mapping[str, Any] = USER) -> tuple[str, int]:
    """A client Connection calls ``tool``, ``user`` answering; the app answers every leg
    through a server one.  The result's text (marked when it is a tool error) and legs."""
    client = m.Connection(m.CLIENT, era="modern", capabilities=CAPABILITIES)
    server = m.Connection(m.SERVER, info=app.info, capabilities=app.capabilities)
    call = client.call("tools/call", {"name": tool, "arguments": {}})
    legs = 0
    while True:
        while (event := client.next_event()) is not m.NEED_DATA:
            assert isinstance(event, m.CallEvent), event
            inner = event.event
            if isinstance(inner, (m.engine.SendRequest, m.engine.SendRetry)):
                server.receive_data(client.send(event))
                legs += 1
            elif isinstance(inner, m.engine.DispatchInput):
                client.provide(call, inner.key, user[inner.key])
            elif isinstance(inner, m.engine.Done):
                mark = "(tool error) " if inner.result.get("isError") else ""
                return mark + inner.result["content"][0]["text"], legs
            elif not isinstance(inner, m.engine.RoundStarted):
                raise SystemExit(f"the call failed: {inner}")
        while (request := server.next_event()) is not m.NEED_DATA:
            assert isinstance(request, m.Request), request
            try:
                result = await app.handle(request, server.request_info(request.id), Silent())
                reply: Any = m.ResultResponse(id=request.id, result=result)
            except m.MrtrError as exc:
                reply = m.error_response(request.id, exc)
            client.receive_data(server.send(reply))


async def main() -> None:
    for style in ("re-entrant", "once", "steps", "continuation"):
        result, legs = await serve_one_call(style)
        print(f"{style:<13} {legs} legs: {result}")
        assert result == "Oslo: 21 C, warm and bright" and legs == 4
    # The user declines the first question: every style ends there, with a tool error.
    declining = {**USER, "city": ElicitResult(action="decline")}
    for style in ("re-entrant", "once", "steps", "continuation"):
        result, legs = await serve_one_call(style, declining)
        print(f"{style:<13} {legs} legs: {result}")
        assert result == "(tool error) No forecast: you declined to answer 'Which city?'."
    assert notified == ["Oslo"], notified
    print("side effect of the once style ran", len(notified), "time")


if __name__ == "__main__":
    trio.run(main)
