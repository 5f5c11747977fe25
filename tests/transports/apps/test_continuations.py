"""The continuation store: handlers that really suspend between rounds (trio, MockClock)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from mrtr_transports.apps.continuations import ContinuationStore, SuspendingContext, TooManyParked
from support.pairing import drain

import mrtr_core as m

CITY = m.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = m.elicit_form("Units?", {"units": {"type": "string"}})
TONE = m.sample("Three words for sunshine", max_tokens=10)
ANSWERS: dict[str, Any] = {
    "city": {"action": "accept", "content": {"city": "Oslo"}},
    "units": {"action": "accept", "content": {"units": "C"}},
    "tone": {"role": "assistant", "content": {"type": "text", "text": "warm"}, "model": "x"},
}
CAPS = {"elicitation": {}, "sampling": {}}


def info(capabilities: Any = CAPS) -> m.RequestInfo:
    return m.RequestInfo(
        id=1,
        method="tools/call",
        era="modern",
        protocol_version="2026-07-28",
        capabilities=capabilities,
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )


def sealer() -> m.StateSealer:
    return m.StateSealer({"k": b"k" * 32}, "k")


def weather(log: list[str]) -> Any:
    async def handler(ctx: SuspendingContext) -> dict[str, Any]:
        log.append("started")  # runs once: the coroutine is resumed, not re-run
        try:
            city = await ctx.elicit("city", CITY)
            units = await ctx.elicit("units", UNITS)
            tone = await ctx.elicit("tone", TONE)
        except trio.Cancelled:
            log.append("cancelled")
            raise
        text = f"{city.content['city']}: 21 {units.content['units']}, {tone.content['text']}"  # type: ignore[union-attr]
        log.append("done")
        return {"content": [{"type": "text", "text": text}]}

    return handler


PARAMS = {"name": "weather", "arguments": {}}


async def leg(store: ContinuationStore, handler: Any, params: Any, caps: Any = CAPS) -> Any:
    request = m.Request(id=1, method="tools/call", params=params)
    return await store.handle(handler, request, info(caps), principal="ada")


def retry_of(result: Any, answers: Any = ANSWERS) -> dict[str, Any]:
    keys = result["inputRequests"]
    return {
        **PARAMS,
        "requestState": result["requestState"],
        "inputResponses": {key: answers[key] for key in keys},
    }


async def test_a_three_round_flow_suspends_one_coroutine() -> None:
    log: list[str] = []
    handler = weather(log)
    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer())
        result = await leg(store, handler, PARAMS)
        rounds = 0
        while result.get("resultType") == "input_required":
            rounds += 1
            assert len(store) == 1  # parked between rounds
            result = await leg(store, handler, retry_of(result))
        assert rounds == 3
        assert result == {"content": [{"type": "text", "text": "Oslo: 21 C, warm"}]}
        assert log == ["started", "done"]
        await trio.testing.wait_all_tasks_blocked()
        assert len(store) == 0


async def test_a_three_round_flow_over_real_connections() -> None:
    log: list[str] = []
    handler = weather(log)
    client = m.Connection(m.CLIENT, era="modern", capabilities=CAPS)
    server = m.Connection(m.SERVER)
    call = client.call("tools/call", PARAMS)
    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer())
        done = None
        for _ in range(20):
            for event in drain(client):
                inner = event.event
                if isinstance(inner, (m.SendRequest, m.SendRetry)):
                    server.receive_data(client.send(event))
                elif isinstance(inner, m.DispatchInput):
                    client.provide(call, inner.key, ANSWERS[inner.key])
                elif isinstance(inner, m.Done):
                    done = inner.result
            if done is not None:
                break
            for request in drain(server):
                result = await store.handle(
                    handler, request, server.request_info(request.id), principal=None
                )
                client.receive_data(server.send(m.ResultResponse(id=request.id, result=result)))
        assert done is not None and done["content"][0]["text"] == "Oslo: 21 C, warm"
        assert log == ["started", "done"]


async def test_past_the_cap_a_new_flow_is_refused_clearly() -> None:
    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer(), max_parked=2)
        first = await leg(store, weather([]), PARAMS)
        await leg(store, weather([]), PARAMS)
        with pytest.raises(TooManyParked, match="max_parked") as caught:
            await leg(store, weather([]), PARAMS)
        assert caught.value.code == -32603
        # A parked flow still goes on, and when it ends there is room again.
        result = first
        while result.get("resultType") == "input_required":
            result = await leg(store, weather([]), retry_of(result))
        await trio.testing.wait_all_tasks_blocked()
        assert len(store) == 1
        await leg(store, weather([]), PARAMS)
        nursery.cancel_scope.cancel()


async def test_an_idle_parked_handler_is_cancelled_and_evicted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer(), idle_timeout=30.0)
        first = await leg(store, weather(log), PARAMS)
        await trio.sleep(29.0)
        second = await leg(store, weather(log), retry_of(first))  # in time: the timer resets
        await trio.sleep(29.0)
        assert len(store) == 1 and log == ["started"]
        await trio.sleep(2.0)  # 31 s idle: evicted
        assert len(store) == 0 and log == ["started", "cancelled"]
        with pytest.raises(m.InvalidRequestState) as caught:
            await leg(store, weather(log), retry_of(second))
        assert caught.value.data == {"reason": "unknown_continuation"}


async def test_an_older_rounds_state_is_refused_and_a_busy_one_too() -> None:
    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer())
        first = await leg(store, weather([]), PARAMS)
        await leg(store, weather([]), retry_of(first))  # now in round 2
        with pytest.raises(m.InvalidRequestState) as caught:
            await leg(store, weather([]), retry_of(first))  # round 1's state, replayed
        assert caught.value.data == {"reason": "replayed"}
        tampered = {**retry_of(first), "requestState": first["requestState"] + "x"}
        with pytest.raises(m.InvalidRequestState):
            await leg(store, weather([]), tampered)
        # A state of the right key but not of this store.
        other = sealer().seal(
            {"nothing": 1},
            method="tools/call",
            params=PARAMS,
            principal="ada",
            now=trio.current_time(),
        )
        with pytest.raises(m.InvalidRequestState) as caught:
            await leg(store, weather([]), {**PARAMS, "requestState": other})
        assert caught.value.data == {"reason": "unknown_continuation"}
        nursery.cancel_scope.cancel()


async def test_a_duplicate_leg_while_the_handler_runs_is_refused() -> None:
    release = trio.Event()

    async def slow(ctx: SuspendingContext) -> dict[str, Any]:
        await ctx.elicit("city", CITY)
        await release.wait()
        return {"content": []}

    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer())
        first = await leg(store, slow, PARAMS)
        results: list[Any] = []

        async def retry() -> None:
            results.append(await leg(store, slow, retry_of(first)))

        nursery.start_soon(retry)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(m.InvalidRequestState) as caught:
            await leg(store, slow, retry_of(first))
        assert caught.value.data == {"reason": "unknown_continuation"}
        release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert results == [{"content": []}]


async def test_a_leg_cancelled_while_the_handler_runs_cancels_the_handler() -> None:
    log: list[str] = []

    async def slow(ctx: SuspendingContext) -> dict[str, Any]:
        await ctx.elicit("city", CITY)
        try:
            await trio.sleep_forever()
        finally:
            log.append("handler cancelled")
        return {}  # pragma: no cover

    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer())
        first = await leg(store, slow, PARAMS)
        with trio.move_on_after(1):  # the leg's stream closes: the transport cancels handle()
            await leg(store, slow, retry_of(first))
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["handler cancelled"] and len(store) == 0
        with pytest.raises(m.InvalidRequestState) as caught:
            await leg(store, slow, retry_of(first))  # the re-issued leg: start over
        assert caught.value.data == {"reason": "unknown_continuation"}


async def test_handler_errors_reach_the_client_and_never_the_nursery() -> None:
    async def needs_sampling(ctx: SuspendingContext) -> dict[str, Any]:
        if not ctx.can_ask(TONE):
            await ctx.ask({"tone": TONE})  # asks anyway: -32021
        return {"content": []}  # pragma: no cover

    async def buggy(ctx: SuspendingContext) -> dict[str, Any]:
        return {"x": 1 / len(ctx.arguments)}

    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer())
        with pytest.raises(m.CapabilityRequired) as caught:
            await leg(store, needs_sampling, PARAMS, caps={"elicitation": {}})
        assert caught.value.data == {"requiredCapabilities": {"sampling": {}}}
        with pytest.raises(m.MrtrError, match="ZeroDivisionError") as failed:
            await leg(store, buggy, PARAMS)
        assert failed.value.code == -32603
        await trio.testing.wait_all_tasks_blocked()
        assert len(store) == 0


async def test_context_helpers_and_bounds() -> None:
    seen: dict[str, Any] = {}

    async def peek(ctx: SuspendingContext) -> dict[str, Any]:
        seen["arguments"] = dict(ctx.arguments)
        seen["can_ask"] = (ctx.can_ask(CITY), ctx.can_ask(m.list_roots()))
        seen["principal"] = ctx.principal
        return {"content": []}

    async with trio.open_nursery() as nursery:
        store = ContinuationStore(nursery, sealer())
        await leg(store, peek, {"name": "t"})
        assert seen == {"arguments": {}, "can_ask": (True, False), "principal": "ada"}
        for bad in ({"max_parked": 0}, {"idle_timeout": 0}):
            with pytest.raises(m.LocalProtocolError):
                ContinuationStore(nursery, sealer(), **bad)
