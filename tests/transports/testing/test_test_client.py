"""The in-memory test client: both eras, scripted answers, the record of each round,
the request-state attacks and the run-twice detector, against a real ``McpApp``."""

from __future__ import annotations

from typing import Any

import pytest
import shop_app
from mrtr_transports.client.errors import CallError, InputUnavailable
from mrtr_transports.testing.answers import accept, decline, roots, sampled
from mrtr_transports.testing.attacks import StateAttacks, tampered
from mrtr_transports.testing.client import TestClient
from mrtr_transports.testing.effects import SideEffects

TRIP_ANSWERS = {"traveller": accept(name="Ada"), "nights": accept(nights=3)}


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_a_modern_call_records_each_round() -> None:
    async with TestClient(shop_app.app) as client:
        result = await client.call_tool("plan_trip", {"to": "Lisbon"}, answers=TRIP_ANSWERS)
        assert client.era == "modern"
    assert text_of(result) == "Trip to Lisbon for Ada: 3 nights."
    call = client.last_call
    assert call.result == result and call.error is None
    assert [list(r.input_requests) for r in call.rounds] == [["traveller"], ["nights"]]
    assert call.rounds[0].input_requests["traveller"]["params"]["message"] == "Who is travelling?"
    assert call.rounds[0].answers == {"traveller": accept(name="Ada")}
    assert call.rounds[1].answers == {"nights": accept(nights=3)}
    first_state, second_state = (r.request_state for r in call.rounds)
    assert first_state and second_state and first_state != second_state
    # three legs: the first, then one per round, each echoing that round's state
    assert [leg.get("requestState") for leg in call.legs] == [None, first_state, second_state]


async def test_a_legacy_session_answers_the_servers_own_requests() -> None:
    def by_message(request: Any) -> dict[str, Any]:
        if request.message == "Who is travelling?":
            return accept(name="Grace")
        return accept(nights=2)

    async with TestClient(shop_app.app, era="legacy") as client:
        assert client.era == "legacy"
        result = await client.call_tool(
            "plan_trip", {"to": "Porto"}, answers={"elicitation/create": by_message}
        )
        weather = await client.call_tool(
            "weather",
            answers={
                "sampling/createMessage": sampled("Sunny"),
                "roots/list": roots("file:///home/ada"),
            },
        )
    assert text_of(result) == "Trip to Porto for Grace: 2 nights."
    rounds = client.calls[0].rounds
    assert [list(r.input_requests) for r in rounds] == [["elicitation/create"]] * 2
    assert rounds[0].answers == {"elicitation/create": accept(name="Grace")}
    assert all(r.request_state is None for r in rounds)
    assert text_of(weather) == "Sunny at file:///home/ada"
    assert {key for r in client.calls[1].rounds for key in r.input_requests} == {
        "sampling/createMessage",
        "roots/list",
    }


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_prompts_resources_and_lists(era: Any) -> None:
    async with TestClient(
        shop_app.app, era=era, answers={"*": accept(name="Ada", mood="calm")}
    ) as client:
        prompt = await client.get_prompt("haiku", {"topic": "rain"})
        resource = await client.read_resource("shop://basket")
        tools = {tool["name"] for tool in await client.list_tools()}
        prompts = {prompt["name"] for prompt in await client.list_prompts()}
        resources = {resource["uri"] for resource in await client.list_resources()}
    assert prompt["messages"][0]["content"]["text"] == "A calm haiku about rain"
    assert resource["contents"][0]["text"] == "Ada's basket is empty"
    assert {"plan_trip", "buy", "buy_unsafe", "weather"} <= tools
    assert prompts == {"haiku", "broken"} and resources == {"shop://basket"}


async def test_a_question_without_a_scripted_answer_fails_the_call_by_its_key() -> None:
    async with TestClient(shop_app.app) as client:
        with pytest.raises(
            InputUnavailable, match="no scripted answer for the input request 'nights'"
        ):
            await client.call_tool(
                "plan_trip", {"to": "Oslo"}, answers={"traveller": accept(name="A")}
            )
    assert client.last_call.error is not None


async def test_answers_in_a_list_are_used_one_per_ask_and_a_decline_is_an_answer() -> None:
    async with TestClient(shop_app.app, answers={"traveller": [decline()]}) as client:
        declined = await client.call_tool("plan_trip", {"to": "Rome"})
        with pytest.raises(InputUnavailable, match="used up"):
            await client.call_tool("plan_trip", {"to": "Rome"})
    assert text_of(declined) == "No trip: nobody is travelling."


async def test_the_apps_own_exception_is_raised_instead_of_internal_error() -> None:
    async with TestClient(shop_app.app) as client:
        with pytest.raises(ZeroDivisionError) as caught:
            await client.get_prompt("broken")
        assert isinstance(caught.value.__cause__, CallError)
    async with TestClient(shop_app.app, raise_app_errors=False) as client:
        with pytest.raises(CallError) as error:
            await client.get_prompt("broken")
        assert error.value.code == -32603
        assert isinstance(client.app_errors[0], ZeroDivisionError)


async def test_a_sealed_state_is_refused_tampered_expired_and_replayed() -> None:
    async with TestClient(shop_app.app) as client:
        await client.call_tool("plan_trip", {"to": "Lisbon"}, answers=TRIP_ANSWERS)
        call = client.last_call
        attacks = StateAttacks(client)
        reasons = []
        for round_ in (1, 2):
            for error in (
                await attacks.assert_tampered_refused(call, round_),
                await attacks.assert_expired_refused(call, round_),
                await attacks.assert_replay_refused(call, round_),
            ):
                reasons.append(error.data["reason"])
    assert reasons == ["bad_signature", "expired", "replayed"] * 2


async def test_attacks_fail_on_a_server_that_accepts_the_state() -> None:
    async with TestClient(shop_app.leaky_app) as client:
        await client.call_tool("plan_trip", {"to": "Lisbon"}, answers=TRIP_ANSWERS)
        call = client.last_call
        attacks = StateAttacks(client)
        await attacks.assert_tampered_refused()
        with pytest.raises(AssertionError, match=r"replayed requestState .* should be refused"):
            await attacks.assert_replay_refused(call)
    async with TestClient(shop_app.plain_app, answers={"n": accept(n=1)}) as client:
        await client.call_tool("count")
        call = client.last_call
        attacks = StateAttacks(client)
        outcome = await attacks.tampered(call)
        assert not outcome.refused and outcome.result is not None
        assert text_of(outcome.result) == f"state {tampered('round-1')}"
        with pytest.raises(AssertionError, match=r"tampered requestState .* accepted"):
            await attacks.assert_tampered_refused(call)
        with pytest.raises(AssertionError, match="expired"):
            await attacks.assert_expired_refused(call)


async def test_no_state_no_attack() -> None:
    async with TestClient(shop_app.app, era="legacy", answers={"*": accept(ok=True)}) as client:
        await client.call_tool("buy", {"item": "book"})
        call = client.last_call
        with pytest.raises(AssertionError, match="carried no requestState in any of its 1 rounds"):
            await StateAttacks(client).assert_replay_refused(call)
        with pytest.raises(RuntimeError, match="2026-07-28"):
            await client.send_leg("tools/call", call.params)


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_the_run_twice_detector_names_an_effect_before_the_question(era: Any) -> None:
    effects = SideEffects()
    effects.watch(shop_app, "charge_card")
    try:
        async with TestClient(shop_app.app, era=era, answers={"*": accept(ok=True)}) as client:
            await client.call_tool("buy_unsafe", {"item": "book"})
            await client.call_tool("buy", {"item": "lamp"})
    finally:
        effects.restore()
    assert (
        shop_app.charge_card.__name__ == "charge_card"
        and effects.count("shop_app.charge_card") == 3
    )
    repeats = effects.repeated()
    assert [repeat.signature for repeat in repeats] == ["shop_app.charge_card('book', 1200)"]
    if era == "modern":
        assert repeats[0].legs == [1, 2]
    with pytest.raises(
        AssertionError,
        match=r"charge_card\('book', 1200\) ran 2 times in one tools/call of 'buy_unsafe'",
    ):
        effects.assert_each_once()


async def test_callable_answers_get_the_request_or_the_key_and_may_be_async() -> None:
    seen: list[str] = []

    async def by_key(key: str, request: Any) -> dict[str, Any]:
        seen.append(key)
        return accept(name="Ada") if key == "traveller" else accept(nights=1)

    async with TestClient(shop_app.app, answers=by_key) as client:
        result = await client.call_tool("plan_trip", {"to": "Nice"})
        weather = await client.call_tool(
            "weather",
            answers={
                "sampling/createMessage": lambda request: sampled(str(request.max_tokens)),
                "roots/list": roots("file:///srv"),
            },
        )
    assert seen == ["traveller", "nights"]
    assert text_of(result) == "Trip to Nice for Ada: 1 nights."
    assert text_of(weather) == "10 at file:///srv"
    assert [key for key, _ in client.answers.asked] == ["traveller", "nights"]
