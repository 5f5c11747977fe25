"""The weather tool of docs/server.md in all four handler styles, over real Connections.

Each style serves the same three-round flow (city, units, a sampled tone) to a
2026-07-28 client ``Connection``; only bytes pass between client and server.
Run: ``.venv/bin/python examples/weather_styles.py``.
"""

from __future__ import annotations

from typing import Any

import trio
from mrtr_transports.apps.continuations import ContinuationStore, SuspendingContext

import mrtr_core as m

CITY = m.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = m.elicit_form("Units?", {"units": {"type": "string", "enum": ["C", "F"]}})
TONE = m.sample("Describe sunshine in three words", max_tokens=10)
CAPABILITIES = {"elicitation": {}, "sampling": {}}
USER = {  # what the client's user (and its LLM) answer
    "city": m.ElicitResult(action="accept", content={"city": "Oslo"}),
    "units": m.ElicitResult(action="accept", content={"units": "C"}),
    "tone": m.CreateMessageResult(
        role="assistant", content={"type": "text", "text": "warm and bright"}, model="demo"
    ),
}


def forecast(city: str, units: str, tone: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"{city}: 21 {units}, {tone}"}]}


def text(answer: Any) -> str:
    return str(answer.content["text"])


# --- 1. re-entrant: a plain function, re-run from the top on every leg -----------------


def reentrant(ctx: m.HandlerContext) -> Any:
    state = ctx.state or {}
    if "city" not in state:
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})
        return ctx.ask({"units": UNITS}, state={"city": city.content["city"]})  # type: ignore[union-attr]
    if "units" not in state:
        units = ctx.answer("units", UNITS)
        if units is None:
            return ctx.ask({"units": UNITS}, state=state)
        return ctx.ask({"tone": TONE}, state={**state, "units": units.content["units"]})  # type: ignore[union-attr]
    tone = ctx.answer("tone", TONE)
    if tone is None:
        return ctx.ask({"tone": TONE}, state=state)
    return forecast(state["city"], state["units"], text(tone))


# --- 2. once: a side effect in a re-entrant handler, at most once per flow ---------------

notified: list[str] = []


def with_once(ctx: m.HandlerContext) -> Any:
    state = ctx.state or {}
    if "city" in state and ctx.once("notify"):
        notified.append(state["city"])  # e.g. tell a subscriber who asked about the city
    return reentrant(ctx)


# --- 3. Steps: named stages; the last one runs at most once -------------------------------

steps = m.Steps()


@steps.step("city")
def ask_city(ctx: m.HandlerContext, data: Any) -> Any:
    return m.Next({}, ask={"city": CITY})


@steps.step("units")
def ask_units(ctx: m.HandlerContext, data: Any) -> Any:
    city = ctx.answer("city", CITY)
    if city is None:
        return ctx.ask({"city": CITY})
    return m.Next({"city": city.content["city"]}, ask={"units": UNITS})  # type: ignore[union-attr]


@steps.step("tone")
def ask_tone(ctx: m.HandlerContext, data: Any) -> Any:
    units = ctx.answer("units", UNITS)
    if units is None:
        return ctx.ask({"units": UNITS})
    return m.Next({**data, "units": units.content["units"]}, ask={"tone": TONE})  # type: ignore[union-attr]


@steps.step("read tone")
def read_tone(ctx: m.HandlerContext, data: Any) -> Any:
    tone = ctx.answer("tone", TONE)
    if tone is None:
        return ctx.ask({"tone": TONE})
    return m.Next({**data, "tone": text(tone)})  # no ask: straight on to the last step


@steps.step("forecast")
def final(ctx: m.HandlerContext, data: Any) -> Any:
    return forecast(data["city"], data["units"], data["tone"])


# --- 4. continuation store: a coroutine suspended between rounds (trio) -------------------


async def suspending(ctx: SuspendingContext) -> dict[str, Any]:
    city = await ctx.elicit("city", CITY)
    units = await ctx.elicit("units", UNITS)
    tone = await ctx.elicit("tone", TONE)
    return forecast(city.content["city"], units.content["units"], text(tone))  # type: ignore[union-attr]


# --- the wire ------------------------------------------------------------------------------


async def serve_one_call(answer: Any) -> tuple[str, int]:
    """A client Connection calls the tool; ``answer(request, info)`` is the server app."""
    client = m.Connection(m.CLIENT, era="modern", capabilities=CAPABILITIES)
    server = m.Connection(m.SERVER, info={"name": "weather", "version": "1.0"})
    call = client.call("tools/call", {"name": "weather", "arguments": {}})
    legs = 0
    while True:
        while (event := client.next_event()) is not m.NEED_DATA:
            assert isinstance(event, m.CallEvent), event
            inner = event.event
            if isinstance(inner, (m.SendRequest, m.SendRetry)):
                server.receive_data(client.send(event))
                legs += 1
            elif isinstance(inner, m.DispatchInput):
                client.provide(call, inner.key, USER[inner.key])
            elif isinstance(inner, m.Done):
                return inner.result["content"][0]["text"], legs
            elif not isinstance(inner, m.RoundStarted):
                raise SystemExit(f"the call failed: {inner}")
        while (request := server.next_event()) is not m.NEED_DATA:
            assert isinstance(request, m.Request), request
            try:
                result = await answer(request, server.request_info(request.id))
                reply: Any = m.ResultResponse(id=request.id, result=result)
            except m.MrtrError as exc:
                reply = m.error_response(request.id, exc)
            client.receive_data(server.send(reply))


async def main() -> None:
    sealer = m.StateSealer({"k1": m.StateSealer.new_key()}, "k1", store=m.MemoryNonceStore())

    def sans_io(handler: Any) -> Any:
        async def answer(request: m.Request, info: m.RequestInfo) -> dict[str, Any]:
            now = trio.current_time()
            return m.run_handler(handler, request, info, sealer=sealer, principal=None, now=now)

        return answer

    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer)

        async def parked(request: m.Request, info: m.RequestInfo) -> dict[str, Any]:
            return await store.handle(suspending, request, info, principal=None)

        for name, answer in [
            ("re-entrant", sans_io(reentrant)),
            ("once", sans_io(with_once)),
            ("steps", sans_io(steps)),
            ("continuation", parked),
        ]:
            result, legs = await serve_one_call(answer)
            print(f"{name:<13} {legs} legs: {result}")
            assert result == "Oslo: 21 C, warm and bright" and legs == 4
    assert notified == ["Oslo"], notified
    print("side effect of the once style ran", len(notified), "time")


if __name__ == "__main__":
    trio.run(main)
