"""Handler styles of ``mrtr_core.server._handlers``, driven through real Connections.

Most tests run a whole call between a client ``Connection(CLIENT, era="modern")``
and a server ``Connection(SERVER)`` with nothing but bytes passing between them:
the server app (:class:`App`) hands each ``Request`` to ``run_handler`` and
answers with the result or ``error_response``; it counts handler invocations and
records every request it saw and every reply it wrote.  A ``tamper`` hook sits
on the wire between the two, so a test can play a client that drops, adds or
breaks answers.  ``App.raw`` writes a hand-made client line instead, to replay
tokens the way a hostile client would.

The weather tool asks three rounds (a city form, a units form, a sampled tone)
and then answers with the forecast; it is written three ways: re-entrant,
re-entrant with a ``once`` side effect, and ``Steps``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from support.pairing import CLIENT_INFO, SERVER_INFO, drain

from mrtr_core import (
    CLIENT,
    SERVER,
    CallEvent,
    Connection,
    InvalidMessage,
    LocalProtocolError,
    MrtrError,
    PeerError,
    Request,
    ResultResponse,
    error_response,
)
from mrtr_core._errors import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY
from mrtr_core.engine import DispatchInput, Done, Failed, RoundStarted, SendRequest, SendRetry
from mrtr_core.server import (
    Ask,
    CapabilityRequired,
    HandlerContext,
    InvalidAnswer,
    InvalidRequestState,
    MemoryNonceStore,
    Next,
    RequestInfo,
    StateSealer,
    Steps,
    elicit_form,
    elicit_url,
    list_roots,
    run_handler,
    sample,
)
from mrtr_core.server._sealing import OpenedState
from mrtr_core.wire import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    ElicitFormRequest,
)

MODERN = "2026-07-28"
CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}}
KEY = b"0123456789abcdef0123456789abcdef"
TTL = 600.0

CITY = elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = elicit_form("Units?", {"units": {"type": "string", "enum": ["C", "F"]}})
TONE = sample("Describe sunshine in three words", max_tokens=10)
ANSWERS: dict[str, Any] = {
    "city": {"action": "accept", "content": {"city": "Oslo"}},
    "units": {"action": "accept", "content": {"units": "C"}},
    "tone": {
        "role": "assistant",
        "content": {"type": "text", "text": "warm and bright"},
        "model": "test-model",
    },
}
BASE: dict[str, Any] = {"name": "weather", "arguments": {"day": "mon"}}
FORECAST = "Oslo: 21 C, warm and bright"


def new_sealer(*, store: bool = True) -> StateSealer:
    return StateSealer({"k1": KEY}, "k1", ttl=TTL, store=MemoryNonceStore() if store else None)


def forecast(city: str, units: str, tone: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"{city}: 21 {units}, {tone}"}]}


def text_of(result: Mapping[str, Any]) -> str:
    text = result["content"][0]["text"]
    assert isinstance(text, str)
    return text


# --- the server app and the driver ----------------------------------------------------------


Tamper = Callable[[int, dict[str, Any]], dict[str, Any]]


@dataclass
class Run:
    """One whole call: how it ended, and what the client was asked round by round."""

    outcome: Any  # Done or Failed
    rounds: list[tuple[str, ...]]
    app: App


class App:
    """The server side: a server Connection, ``run_handler``, and a record of everything."""

    def __init__(
        self,
        handler: Callable[[HandlerContext], Any],
        *,
        sealer: StateSealer | None,
        principal: str | None = "ada",
        now: float = 1000.0,
    ) -> None:
        self.handler = handler
        self.sealer = sealer
        self.principal = principal
        self.now = now
        self.conn = Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}, "prompts": {}})
        self.invocations = 0
        self.seen: list[Request] = []  # every request the server handed to the app
        self.wire: list[dict[str, Any]] = []  # every reply the server wrote, decoded
        self._raw_ids = itertools.count(1)

    def _handle(self, ctx: HandlerContext) -> Any:
        self.invocations += 1
        return self.handler(ctx)

    def receive(self, data: bytes) -> bytes:
        """Bytes from a client in, the server's bytes out (one leg at a time here)."""
        self.conn.receive_data(data)
        out: list[bytes] = []
        for event in drain(self.conn):
            if isinstance(event, InvalidMessage):  # pragma: no cover - a test bug if hit
                raise AssertionError(f"the server refused a request: {event.error!r}")
            assert isinstance(event, Request), event
            self.seen.append(event)
            info = self.conn.request_info(event.id)
            try:
                result = run_handler(
                    self._handle,
                    event,
                    info,
                    sealer=self.sealer,
                    principal=self.principal,
                    now=self.now,
                )
            except LocalProtocolError:
                raise  # an app bug: it must surface, not go out as an error response
            except MrtrError as exc:
                line = self.conn.send(error_response(event.id, exc))
            else:
                line = self.conn.send(ResultResponse(id=event.id, result=result))
            self.wire.append(json.loads(line))
            out.append(line)
        return b"".join(out)

    def raw(
        self,
        params: Mapping[str, Any],
        *,
        method: str = "tools/call",
        capabilities: Mapping[str, Any] = CAPS,
    ) -> dict[str, Any]:
        """A hand-written client line (a hostile or replaying client); the decoded reply."""
        meta = {
            META_PROTOCOL_VERSION: MODERN,
            META_CLIENT_CAPABILITIES: dict(capabilities),
            META_CLIENT_INFO: CLIENT_INFO,
        }
        message = {
            "jsonrpc": "2.0",
            "id": f"raw-{next(self._raw_ids)}",
            "method": method,
            "params": {**params, "_meta": meta},
        }
        reply = json.loads(self.receive(json.dumps(message).encode() + b"\n"))
        assert isinstance(reply, dict)
        return reply

    def leg(
        self,
        state: str | None = None,
        keys: tuple[str, ...] | list[str] = (),
        **changes: Any,
    ) -> dict[str, Any]:
        """A raw retry of BASE with ``state`` and the answers to ``keys``."""
        params: dict[str, Any] = {**BASE, **changes}
        if state is not None:
            params["requestState"] = state
        if keys:
            params["inputResponses"] = {key: ANSWERS[key] for key in keys}
        return self.raw(params)

    def walk(self, reply: dict[str, Any]) -> dict[str, Any]:
        """Answer whatever ``reply`` asks, leg after leg, until a result or an error."""
        for _ in range(10):
            if "error" in reply or reply["result"].get("resultType") != "input_required":
                return reply
            self.now += 1
            result = reply["result"]
            reply = self.leg(result.get("requestState"), list(result.get("inputRequests", {})))
        raise AssertionError("the flow never ended")  # pragma: no cover

    def exchange(
        self,
        *,
        capabilities: Mapping[str, Any] = CAPS,
        method: str = "tools/call",
        params: Mapping[str, Any] = BASE,
        tamper: Tamper | None = None,
        answers: Mapping[str, Any] = ANSWERS,
    ) -> Run:
        """A whole call from a real client Connection, bytes only, one clock tick per leg."""
        client = Connection(CLIENT, era="modern", info=CLIENT_INFO, capabilities=capabilities)
        call = client.call(method, dict(params))
        rounds: dict[int, list[str]] = {}
        legs = 0
        for _ in range(100):
            for event in drain(client):
                assert isinstance(event, CallEvent) and event.call == call, event
                inner = event.event
                if isinstance(inner, (SendRequest, SendRetry)):
                    legs += 1
                    data = client.send(event)
                    if tamper is not None:
                        data = (json.dumps(tamper(legs, json.loads(data))) + "\n").encode()
                    client.receive_data(self.receive(data))
                    self.now += 1
                elif isinstance(inner, RoundStarted):
                    rounds[inner.round] = []
                elif isinstance(inner, DispatchInput):
                    rounds[inner.round].append(inner.key)
                    client.provide(call, inner.key, answers[inner.key])
                else:
                    assert isinstance(inner, (Done, Failed)), inner
                    return Run(inner, [tuple(keys) for _, keys in sorted(rounds.items())], self)
        raise AssertionError("the call never ended")  # pragma: no cover

    def tokens(self) -> list[str]:
        """The requestState of every reply that carried one, in order."""
        return [
            r["result"]["requestState"] for r in self.wire if "requestState" in r.get("result", {})
        ]


def exchange(
    handler: Callable[[HandlerContext], Any], *, sealer: StateSealer | None, **options: Any
) -> Run:
    return App(handler, sealer=sealer).exchange(**options)


def reason_of(reply: dict[str, Any]) -> str:
    error = reply["error"]
    assert error["code"] == INVALID_PARAMS
    assert error["message"] == "Invalid or expired requestState"
    reason = error["data"]["reason"]
    assert isinstance(reason, str)
    return reason


def asked(reply: dict[str, Any]) -> list[str]:
    result = reply["result"]
    assert result["resultType"] == "input_required"
    return list(result.get("inputRequests", {}))


def peer_error(run: Run) -> PeerError:
    assert isinstance(run.outcome, Failed), run.outcome
    error = run.outcome.error
    assert isinstance(error, PeerError), error
    return error


def without_meta(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (params or {}).items() if k != "_meta"}


def check_legs(app: App, rounds: list[tuple[str, ...]]) -> None:
    """Every request the server saw is a correct leg: new id, the same salient params,
    this round's answers only, and the last requestState echoed byte for byte."""
    seen = app.seen
    assert len(seen) == len(rounds) + 1
    assert len({r.id for r in seen}) == len(seen)
    assert without_meta(seen[0].params) == BASE
    for n, request in enumerate(seen[1:], start=1):
        params = without_meta(request.params)
        assert request.method == "tools/call"
        assert {k: params[k] for k in BASE} == BASE
        assert sorted(params.get("inputResponses", {})) == sorted(rounds[n - 1])
        previous = app.wire[n - 1]["result"]
        assert params.get("requestState") == previous.get("requestState")


# --- the three styles -----------------------------------------------------------------------


def reentrant(effects: list[str] | None = None) -> Callable[[HandlerContext], Any]:
    """The weather tool as one re-entrant function; with ``effects`` it also notifies once.

    The guard line runs on every leg once a city is known (legs 3 and 4), so it is
    reached in more than one leg and must hold by itself.
    """

    def weather(ctx: HandlerContext) -> Any:
        state = ctx.state or {}
        if effects is not None and "city" in state and ctx.once("notify"):
            effects.append(state["city"])
        if "city" not in state:
            city = ctx.answer("city", CITY)
            if city is None:
                return ctx.ask({"city": CITY})
            return ctx.ask({"units": UNITS}, state={"city": city.content["city"]})
        if "units" not in state:
            units = ctx.answer("units", UNITS)
            if units is None:
                return ctx.ask({"units": UNITS}, state=state)  # missing: ask again
            return ctx.ask({"tone": TONE}, state={**state, "units": units.content["units"]})
        tone = ctx.answer("tone", TONE)
        if tone is None:
            return ctx.ask({"tone": TONE}, state=state)
        return forecast(state["city"], state["units"], tone.content["text"])

    return weather


def weather_steps(effects: list[str], ran: list[str] | None = None) -> Steps:
    """The weather tool as Steps: each step reads the answer the step before asked for.

    "mood" reads the tone and passes it on with a ``Next`` that asks nothing, so
    "forecast" (the last step, the one with the side effect) runs in the same leg.
    """
    steps = Steps()
    log = ran if ran is not None else []

    @steps.step("city")
    def ask_city(ctx: HandlerContext, data: Any) -> Any:
        log.append("city")
        return Next({}, ask={"city": CITY})

    @steps.step("units")
    def ask_units(ctx: HandlerContext, data: Any) -> Any:
        log.append("units")
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})  # stay on this step
        return Next({**data, "city": city.content["city"]}, ask={"units": UNITS})

    @steps.step("tone")
    def ask_tone(ctx: HandlerContext, data: Any) -> Any:
        log.append("tone")
        units = ctx.answer("units", UNITS)
        if units is None:
            return ctx.ask({"units": UNITS})
        return Next({**data, "units": units.content["units"]}, ask={"tone": TONE})

    @steps.step("mood")
    def read_tone(ctx: HandlerContext, data: Any) -> Any:
        log.append("mood")
        tone = ctx.answer("tone", TONE)
        if tone is None:
            return ctx.ask({"tone": TONE})
        return Next({**data, "tone": tone.content["text"]})  # no ask: on to the last step now

    @steps.step("forecast")
    def final(ctx: HandlerContext, data: Any) -> Any:
        log.append("forecast")
        effects.append(data["city"])
        return forecast(data["city"], data["units"], data["tone"])

    return steps


THREE_ROUNDS = [("city",), ("units",), ("tone",)]


def test_reentrant_handler_completes_three_rounds_through_connections() -> None:
    run = exchange(reentrant(), sealer=new_sealer())
    assert isinstance(run.outcome, Done)
    assert text_of(run.outcome.result) == FORECAST
    assert run.rounds == THREE_ROUNDS
    assert run.app.invocations == 4
    check_legs(run.app, run.rounds)
    # The tone was asked as sampling; every input_required carried a sealed state.
    assert run.app.wire[2]["result"]["inputRequests"]["tone"]["method"] == "sampling/createMessage"
    assert all(token.startswith("mrtr1.k1.") for token in run.app.tokens())
    assert len(run.app.tokens()) == 3


@pytest.mark.parametrize("store", [True, False], ids=["store", "no-store"])
def test_reentrant_handler_with_once_fires_its_side_effect_once(store: bool) -> None:
    effects: list[str] = []
    run = exchange(reentrant(effects), sealer=new_sealer(store=store))
    assert isinstance(run.outcome, Done)
    assert text_of(run.outcome.result) == FORECAST
    assert run.rounds == THREE_ROUNDS
    check_legs(run.app, run.rounds)
    assert run.app.invocations == 4
    assert effects == ["Oslo"]  # the guard line ran in legs 3 and 4, fired in leg 3


def test_steps_handler_completes_three_rounds_through_connections() -> None:
    effects: list[str] = []
    ran: list[str] = []
    run = exchange(weather_steps(effects, ran), sealer=new_sealer())
    assert isinstance(run.outcome, Done)
    assert text_of(run.outcome.result) == FORECAST
    assert run.rounds == THREE_ROUNDS
    check_legs(run.app, run.rounds)
    # Each step ran when the flow reached it; "mood" chained into "forecast" in leg 4.
    assert ran == ["city", "units", "tone", "mood", "forecast"]
    assert effects == ["Oslo"]
    states = [json_state(t) for t in run.app.tokens()]
    assert [s["v"]["step"] for s in states] == ["units", "tone", "mood"]
    assert len({s["f"] for s in states}) == 1  # one flow id across the legs


def test_steps_stays_on_a_step_when_its_answer_is_missing() -> None:
    """The client drops the units answer of leg 3: the "tone" step stays and asks again."""

    def drop_units(leg: int, message: dict[str, Any]) -> dict[str, Any]:
        if leg == 3:
            message["params"]["inputResponses"] = {"other": {"action": "decline"}}
        return message

    effects: list[str] = []
    ran: list[str] = []
    run = exchange(weather_steps(effects, ran), sealer=new_sealer(), tamper=drop_units)
    assert isinstance(run.outcome, Done)
    assert text_of(run.outcome.result) == FORECAST
    assert run.rounds == [("city",), ("units",), ("units",), ("tone",)]
    assert asked(run.app.wire[2]) == ["units"]  # a new input_required, not an error
    assert ran == ["city", "units", "tone", "tone", "mood", "forecast"]
    assert effects == ["Oslo"]
    assert json_state(run.app.tokens()[2])["v"] == {"step": "tone", "data": {"city": "Oslo"}}


def json_payload(token: str) -> dict[str, Any]:
    """A sealed token's readable payload."""
    import base64

    body = token.split(".")[2]
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert isinstance(payload, dict)
    return payload


def json_state(token: str) -> dict[str, Any]:
    """The app part ("s") of a sealed token's readable payload."""
    state = json_payload(token)["s"]
    assert isinstance(state, dict)
    return state


# --- 2. rejection before any handler code runs ----------------------------------------------


def started(handler: Callable[[HandlerContext], Any] | None = None) -> tuple[App, str]:
    """A re-entrant flow two legs in (the city answered); the token of leg 2's reply."""
    app = App(handler or reentrant(), sealer=new_sealer())
    assert asked(app.leg()) == ["city"]
    app.now += 1
    reply = app.leg(app.tokens()[-1], ["city"])
    assert asked(reply) == ["units"]
    app.now += 1
    return app, app.tokens()[-1]


def flip(token: str) -> str:
    """The token with one character of its payload changed."""
    version, key_id, body, mac = token.split(".")
    i = len(body) // 2
    body = body[:i] + ("A" if body[i] != "A" else "B") + body[i + 1 :]
    return ".".join((version, key_id, body, mac))


#: case -> the reason the server must give for it.
REJECTIONS = {
    "tampered": "bad_signature",
    "expired": "expired",
    "another-tool": "wrong_params",
    "other-arguments": "wrong_params",
    "no-arguments": "wrong_params",
    "other-principal": "wrong_principal",
    "no-principal": "wrong_principal",
    "prompts/get": "wrong_method",
    "not-a-string": "malformed",
    "garbage": "malformed",
}


def send_bad(case: str, app: App, token: str) -> dict[str, Any]:
    """Leg 3 of the flow (the units answer), broken the way ``case`` says."""
    if case == "tampered":
        return app.leg(flip(token), ["units"])
    if case == "expired":
        app.now += TTL + 1
        reply = app.leg(token, ["units"])
        app.now -= TTL + 1
        return reply
    if case == "another-tool":  # the same token sent with another tool name
        return app.leg(token, ["units"], name="stocks")
    if case == "other-arguments":
        return app.leg(token, ["units"], arguments={"day": "tue"})
    if case == "no-arguments":
        return app.raw({"name": "weather", "requestState": token})
    if case in ("other-principal", "no-principal"):
        app.principal = "eve" if case == "other-principal" else None
        reply = app.leg(token, ["units"])
        app.principal = "ada"
        return reply
    if case == "prompts/get":
        return app.raw({**BASE, "requestState": token}, method="prompts/get")
    if case == "not-a-string":
        return app.leg(None, ["units"], requestState=42)
    assert case == "garbage"
    return app.leg("not a token", ["units"])


@pytest.mark.parametrize("case", list(REJECTIONS))
def test_a_bad_state_is_refused_before_the_handler_runs(case: str) -> None:
    app, token = started()
    before = app.invocations
    assert before == 2
    reply = send_bad(case, app, token)
    assert reason_of(reply) == REJECTIONS[case]
    assert reply["error"]["data"] == {"reason": REJECTIONS[case]}
    assert app.invocations == before  # the handler never ran
    # The good token still works for the right request afterwards (nothing was spent).
    assert asked(app.leg(token, ["units"])) == ["tone"]
    assert app.invocations == before + 1


def test_expiry_is_inclusive_of_the_last_instant() -> None:
    app, token = started()
    issued = app.now - 1
    app.now = issued + TTL
    assert asked(app.leg(token, ["units"])) == ["tone"]
    app.now = issued + TTL + 0.001
    assert reason_of(app.leg(token, ["units"])) == "expired"


def test_a_tampered_state_ends_the_real_call_with_the_error() -> None:
    def forge(leg: int, message: dict[str, Any]) -> dict[str, Any]:
        if leg == 3:
            message["params"]["requestState"] = flip(message["params"]["requestState"])
        return message

    run = exchange(reentrant(), sealer=new_sealer(), tamper=forge)
    error = peer_error(run)
    assert error.code == INVALID_PARAMS and error.data == {"reason": "bad_signature"}
    assert run.app.invocations == 2  # legs 1 and 2 only
    assert len(run.app.seen) == 3


def test_a_state_sent_to_a_server_without_a_sealer_is_unknown_key() -> None:
    _, token = started()
    plain = App(reentrant(), sealer=None)
    assert reason_of(plain.leg(token, ["units"])) == "unknown_key"
    assert reason_of(plain.leg("anything", ["units"])) == "unknown_key"
    assert plain.invocations == 0


@pytest.mark.parametrize(
    "value",
    [
        {"x": 1},
        None,
        [1, 2],
        {"f": 7, "g": [], "v": None},
        {"f": "flow", "g": "notify", "v": None},
        {"f": "flow", "g": [1], "v": None},
        {"g": [], "v": None},
    ],
    ids=["other-dict", "null", "list", "flow-not-str", "guards-not-list", "guard-not-str", "no-f"],
)
def test_a_state_of_another_shape_sealed_by_the_same_key_is_malformed(value: Any) -> None:
    sealer = new_sealer()
    app = App(reentrant(), sealer=sealer)
    token = sealer.seal(value, method="tools/call", params=BASE, principal="ada", now=app.now)
    assert reason_of(app.leg(token, ["city"])) == "malformed"
    assert app.invocations == 0


def test_invalid_input_responses_object_is_refused_before_the_handler() -> None:
    app = App(reentrant(), sealer=new_sealer())
    reply = app.raw({**BASE, "inputResponses": ["not", "an", "object"]})
    assert reply["error"]["code"] == INVALID_PARAMS
    assert reply["error"]["data"] == {"key": None, "reason": "inputResponses must be an object"}
    assert app.invocations == 0


# --- 3. side effects never repeat -----------------------------------------------------------


def once_flow(*, store: bool) -> tuple[App, list[str], list[str]]:
    """A whole re-entrant flow with the notify guard, through raw legs.

    Returns the app, the effects, and the tokens T1 (round 1, before the guard),
    T2 (carried by leg 3, the leg in which the guard fired), T3 (after it).
    """
    effects: list[str] = []
    app = App(reentrant(effects), sealer=new_sealer(store=store))
    final = app.walk(app.leg())
    assert text_of(final["result"]) == FORECAST
    assert effects == ["Oslo"]
    tokens = app.tokens()
    assert len(tokens) == 3
    assert [json_state(t)["g"] for t in tokens] == [[], [], ["notify"]]
    return app, effects, tokens


def test_once_with_a_store_a_replayed_earlier_state_does_not_fire_again() -> None:
    """Every redeemed state is spent before the handler runs, so round 1's state,
    redeemed once in the flow, is refused as "replayed" before any handler code runs:
    no fresh chain of states can grow from it to reach the guard again."""
    app, effects, (t1, _, _) = once_flow(store=True)
    before = app.invocations
    app.now += 1
    assert reason_of(app.leg(t1, ["city"])) == "replayed"
    assert app.invocations == before  # refused before the handler
    assert effects == ["Oslo"]


def test_once_with_a_store_replaying_any_state_of_the_flow_is_replayed() -> None:
    app, effects, (_, t2, t3) = once_flow(store=True)
    before = app.invocations
    assert reason_of(app.leg(t2, ["units"])) == "replayed"  # the leg where the guard fired
    assert reason_of(app.leg(t3, ["tone"])) == "replayed"  # the leg after it
    assert app.invocations == before
    assert effects == ["Oslo"]


def test_a_store_spends_each_redeemed_state_until_that_state_expires() -> None:
    store = MemoryNonceStore()
    sealer = StateSealer({"k1": KEY}, "k1", ttl=TTL, store=store)
    app = App(reentrant([]), sealer=sealer)
    first = app.leg()
    assert len(store) == 0  # a leg without state spends nothing
    app.now += 1
    app.walk(first)
    assert len(store) == 3  # one entry per redeemed state
    # Each kept until its own state expires (not the flow's hour).
    assert sorted(store._expiry.values()) == [json_payload(t)["exp"] for t in app.tokens()]


def test_once_without_a_store_holds_in_a_normal_flow() -> None:
    _, effects, _ = once_flow(store=False)
    assert effects == ["Oslo"]


def test_once_without_a_store_an_older_state_can_fire_it_again() -> None:
    """The documented limitation: the guard lives in the sealed state, and a state
    sealed before it fired stays valid for its TTL.  Only a store stops this."""
    app, effects, (_, t2, _) = once_flow(store=False)
    app.now += 1
    assert asked(app.leg(t2, ["units"])) == ["tone"]
    assert effects == ["Oslo", "Oslo"]


def steps_flow(*, store: bool) -> tuple[App, list[str], list[str], list[str]]:
    effects: list[str] = []
    ran: list[str] = []
    app = App(weather_steps(effects, ran), sealer=new_sealer(store=store))
    final = app.walk(app.leg())
    assert text_of(final["result"]) == FORECAST
    assert effects == ["Oslo"]
    tokens = app.tokens()
    assert [json_state(t)["v"]["step"] for t in tokens] == ["units", "tone", "mood"]
    return app, effects, ran, tokens


def test_steps_final_step_runs_once_and_its_token_cannot_be_replayed() -> None:
    app, effects, ran, (_, _, t3) = steps_flow(store=True)
    assert ran.count("forecast") == 1
    ran.clear()
    reply = app.leg(t3, ["tone"])
    assert reason_of(reply) == "replayed"
    assert ran == []  # refused before any step ran
    assert effects == ["Oslo"]


def test_steps_walking_forward_again_from_an_earlier_token_does_not_rerun_the_final_step() -> None:
    app, effects, ran, (t1, _, _) = steps_flow(store=True)
    app.now += 1
    reply = app.walk(app.leg(t1, ["city"]))
    assert reason_of(reply) == "replayed"
    assert effects == ["Oslo"]
    assert ran.count("forecast") == 1


def test_steps_without_a_store_the_final_step_can_run_again_on_replay() -> None:
    """As for ``once``: without a store only the state guards, and old states stay valid."""
    app, effects, _, (_, _, t3) = steps_flow(store=False)
    assert text_of(app.leg(t3, ["tone"])["result"]) == FORECAST
    assert effects == ["Oslo", "Oslo"]


@pytest.mark.parametrize("style", ["once", "steps"])
def test_two_calls_are_two_flows_each_with_its_own_side_effect(style: str) -> None:
    effects: list[str] = []
    handler = reentrant(effects) if style == "once" else weather_steps(effects)
    app = App(handler, sealer=new_sealer(store=True))
    first = app.exchange()
    second = app.exchange()
    assert isinstance(first.outcome, Done) and isinstance(second.outcome, Done)
    assert effects == ["Oslo", "Oslo"]  # a new call (no state) is a new action
    flows = {json_state(t)["f"] for t in app.tokens()}
    assert len(flows) == 2


@pytest.mark.parametrize("style", ["once", "steps"])
def test_a_replay_chain_cannot_outlive_the_spent_guard(style: str) -> None:
    """The old hole: replaying an older state just before it expires made the server
    seal a fresh token of the same flow, which could outlive the spent guard.  Now
    the older state was spent when the flow redeemed it, and stays spent until it
    expires, so no fresh token can be had from it."""
    effects: list[str] = []
    handler = reentrant(effects) if style == "once" else weather_steps(effects)
    app = App(handler, sealer=new_sealer(store=True), now=0.0)
    app.walk(app.leg())
    assert effects == ["Oslo"]
    t1 = app.tokens()[0]  # sealed at t = 0, valid until t = 600
    app.now = 590.0
    assert reason_of(app.leg(t1, ["city"])) == "replayed"
    app.now = 700.0
    assert reason_of(app.leg(t1, ["city"])) == "expired"
    assert effects == ["Oslo"]


# --- 4. capability gating -------------------------------------------------------------------

FORM_ONLY: dict[str, Any] = {"elicitation": {}}


def test_asking_for_sampling_the_request_did_not_declare_is_32021() -> None:
    run = exchange(reentrant(), sealer=new_sealer(), capabilities=FORM_ONLY)
    error = peer_error(run)
    assert error.code == MISSING_CLIENT_CAPABILITY == -32021
    assert error.data == {"requiredCapabilities": {"sampling": {}}}
    assert run.rounds == [("city",), ("units",)]
    assert run.app.wire[-1]["error"]["code"] == -32021
    assert run.app.wire[-1]["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    # The request that failed declared form elicitation only, in its own _meta.
    meta = run.app.seen[-1].params["_meta"]
    assert meta[META_CLIENT_CAPABILITIES] == FORM_ONLY


def test_steps_next_asking_beyond_the_capabilities_is_32021() -> None:
    run = exchange(weather_steps([]), sealer=new_sealer(), capabilities=FORM_ONLY)
    error = peer_error(run)
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": {"sampling": {}}}


def test_ctx_ask_raises_capability_required_directly() -> None:
    def handler(ctx: HandlerContext) -> Any:
        return ctx.ask({"where": elicit_url("Sign in", "https://example.com/a"), "r": list_roots()})

    with pytest.raises(CapabilityRequired) as caught:
        leg(handler, BASE, sealer=None, capabilities=FORM_ONLY)
    assert caught.value.required == {"elicitation": {"url": {}}, "roots": {}}


def test_can_ask_reports_what_the_request_declared() -> None:
    seen: dict[str, bool] = {}

    def handler(ctx: HandlerContext) -> Any:
        seen["form"] = ctx.can_ask(CITY)
        seen["sampling"] = ctx.can_ask(TONE)
        seen["both"] = ctx.can_ask(CITY, TONE)
        seen["url"] = ctx.can_ask(elicit_url("Sign in", "https://example.com/a"))
        seen["roots"] = ctx.can_ask(list_roots())
        seen["nothing"] = ctx.can_ask()
        return {"content": []}

    leg(handler, BASE, sealer=None, capabilities=FORM_ONLY)
    assert seen == {
        "form": True,
        "sampling": False,
        "both": False,
        "url": False,
        "roots": False,
        "nothing": True,
    }
    leg(handler, BASE, sealer=None, capabilities={**CAPS, "roots": {}})
    assert seen == {
        "form": True,
        "sampling": True,
        "both": True,
        "url": False,
        "roots": True,
        "nothing": True,
    }


def falling_back(ctx: HandlerContext) -> Any:
    """Asks for a sampled tone only when it may; otherwise answers plainly."""
    state = ctx.state or {}
    if "city" not in state:
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})
        state = {"city": city.content["city"]}
        if ctx.can_ask(TONE):
            return ctx.ask({"tone": TONE}, state=state)
        return forecast(state["city"], "C", "plain")
    tone = ctx.answer("tone", TONE)
    return forecast(state["city"], "C", tone.content["text"] if tone else "plain")


@pytest.mark.parametrize(
    ("capabilities", "rounds", "text"),
    [
        (FORM_ONLY, [("city",)], "Oslo: 21 C, plain"),
        (CAPS, [("city",), ("tone",)], "Oslo: 21 C, warm and bright"),
    ],
    ids=["form-only", "form-and-sampling"],
)
def test_a_handler_that_falls_back_completes(
    capabilities: dict[str, Any], rounds: list[tuple[str, ...]], text: str
) -> None:
    run = exchange(falling_back, sealer=new_sealer(), capabilities=capabilities)
    assert isinstance(run.outcome, Done)
    assert text_of(run.outcome.result) == text
    assert run.rounds == rounds


# --- 5. answers -----------------------------------------------------------------------------


def test_a_missing_answer_is_asked_again_not_an_error() -> None:
    def drop_city(leg: int, message: dict[str, Any]) -> dict[str, Any]:
        if leg == 2:
            del message["params"]["inputResponses"]
        return message

    run = exchange(reentrant(), sealer=new_sealer(), tamper=drop_city)
    assert isinstance(run.outcome, Done)
    assert text_of(run.outcome.result) == FORECAST
    assert run.rounds == [("city",), ("city",), ("units",), ("tone",)]
    assert asked(run.app.wire[1]) == ["city"]
    assert "inputResponses" not in without_meta(run.app.seen[1].params)


def test_extra_answer_keys_are_ignored() -> None:
    def add_extra(leg: int, message: dict[str, Any]) -> dict[str, Any]:
        if leg > 1:
            message["params"]["inputResponses"]["bogus"] = {"anything": ["at", "all"]}
            message["params"]["inputResponses"]["units-typo"] = "x"
        return message

    run = exchange(reentrant(), sealer=new_sealer(), tamper=add_extra)
    assert isinstance(run.outcome, Done)
    assert text_of(run.outcome.result) == FORECAST
    assert run.rounds == THREE_ROUNDS
    assert "bogus" in run.app.seen[2].params["inputResponses"]


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("city", {"action": "maybe"}),
        ("city", "accept"),
        ("tone", {"role": "assistant"}),
    ],
    ids=["bad-action", "not-an-object", "sampling-missing-fields"],
)
def test_a_wrong_shape_answer_is_invalid_answer_to_the_client(key: str, bad: Any) -> None:
    leg_of = {"city": 2, "tone": 4}[key]

    def break_answer(leg: int, message: dict[str, Any]) -> dict[str, Any]:
        if leg == leg_of:
            message["params"]["inputResponses"][key] = bad
        return message

    run = exchange(reentrant(), sealer=new_sealer(), tamper=break_answer)
    error = peer_error(run)
    assert error.code == INVALID_PARAMS
    assert error.data["key"] == key
    assert key in error.data["reason"]
    assert len(run.app.seen) == leg_of


def test_invalid_answer_is_raised_from_ctx_answer() -> None:
    def handler(ctx: HandlerContext) -> Any:
        ctx.answer("city", CITY)
        raise AssertionError("not reached")  # pragma: no cover

    params = {**BASE, "inputResponses": {"city": {"action": "maybe"}}}
    with pytest.raises(InvalidAnswer) as caught:
        leg(handler, params, sealer=None)
    assert caught.value.key == "city"


# --- 6. misuse and edges --------------------------------------------------------------------


def info_for(method: str = "tools/call", capabilities: Mapping[str, Any] = CAPS) -> RequestInfo:
    return RequestInfo(
        id=1,
        method=method,
        era="modern",
        protocol_version=MODERN,
        capabilities=capabilities,
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )


def leg(
    handler: Callable[[HandlerContext], Any],
    params: Mapping[str, Any] | None,
    *,
    sealer: StateSealer | None,
    capabilities: Mapping[str, Any] = CAPS,
    method: str = "tools/call",
    principal: str | None = "ada",
    now: float = 10.0,
) -> dict[str, Any]:
    """One leg straight through run_handler (no connection): for misuse and unit edges."""
    request = Request(id=1, method=method, params=params)
    return run_handler(
        handler,
        request,
        info_for(method, capabilities),
        sealer=sealer,
        principal=principal,
        now=now,
    )


@pytest.mark.parametrize("returned", [None, "text", ["a"], 42], ids=["none", "str", "list", "int"])
def test_a_handler_returning_something_else_is_a_local_error(returned: Any) -> None:
    with pytest.raises(LocalProtocolError, match=type(returned).__name__):
        leg(lambda ctx: returned, BASE, sealer=new_sealer())


def test_steps_with_no_steps_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError, match="no steps"):
        leg(Steps(), BASE, sealer=new_sealer())


def test_steps_names_must_be_unique() -> None:
    steps = Steps()
    steps.step("a")(lambda ctx, data: Next())
    with pytest.raises(LocalProtocolError, match="'a' is defined twice"):
        steps.step("a")(lambda ctx, data: {})
    assert steps.names == ("a",)


def test_steps_last_step_returning_an_ask_is_a_local_error() -> None:
    steps = Steps()
    steps.step("only")(lambda ctx, data: ctx.ask({"city": CITY}))
    with pytest.raises(LocalProtocolError, match="last step 'only' must return the result"):
        leg(steps, BASE, sealer=new_sealer())


@pytest.mark.parametrize(
    "returned", [{"content": []}, None, "next"], ids=["mapping", "none", "str"]
)
def test_steps_non_last_step_must_return_next_or_ask(returned: Any) -> None:
    steps = Steps()
    steps.step("first")(lambda ctx, data: returned)
    steps.step("last")(lambda ctx, data: {"content": []})
    with pytest.raises(LocalProtocolError, match=r"step 'first' must return Next\(...\) or an Ask"):
        leg(steps, BASE, sealer=new_sealer())


def test_steps_staying_ask_with_state_is_a_local_error() -> None:
    steps = Steps()
    steps.step("first")(lambda ctx, data: ctx.ask({"city": CITY}, state={"mine": 1}))
    steps.step("last")(lambda ctx, data: {"content": []})
    with pytest.raises(LocalProtocolError, match="stays with the data"):
        leg(steps, BASE, sealer=new_sealer())


def test_an_ask_with_state_needs_a_sealer() -> None:
    with pytest.raises(LocalProtocolError, match="needs a StateSealer"):
        leg(lambda ctx: ctx.ask({"city": CITY}, state={"n": 1}), BASE, sealer=None)


def test_a_fired_guard_needs_a_sealer_to_carry_it() -> None:
    def handler(ctx: HandlerContext) -> Any:
        assert ctx.once("notify")
        return ctx.ask({"city": CITY})

    with pytest.raises(LocalProtocolError, match="needs a StateSealer"):
        leg(handler, BASE, sealer=None)


def test_steps_needs_a_sealer_to_move_on_across_a_round() -> None:
    with pytest.raises(LocalProtocolError, match="needs a StateSealer"):
        leg(weather_steps([]), BASE, sealer=None)


def test_an_ask_without_state_or_sealer_is_a_plain_input_required() -> None:
    result = leg(lambda ctx: ctx.ask({"city": CITY}), BASE, sealer=None)
    assert result == {
        "resultType": "input_required",
        "inputRequests": {
            "city": {
                "method": "elicitation/create",
                "params": {
                    "message": "Which city?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        },
    }
    # ... and a handler without a sealer completes once the answer comes back.
    answered = {**BASE, "inputResponses": {"city": ANSWERS["city"]}}

    def handler(ctx: HandlerContext) -> Any:
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})
        return {"content": [{"type": "text", "text": city.content["city"]}]}

    assert text_of(leg(handler, answered, sealer=None)) == "Oslo"


def test_an_empty_ask_without_a_sealer_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError, match="needs input requests or a state"):
        leg(lambda ctx: ctx.ask(), BASE, sealer=None)


def test_a_state_only_round_is_a_load_shedding_leg_through_connections() -> None:
    def busy(ctx: HandlerContext) -> Any:
        if ctx.state is None:
            return ctx.ask(state={"busy": True})  # nothing to ask: come straight back
        assert ctx.state == {"busy": True}
        return {"content": [{"type": "text", "text": "done"}]}

    run = exchange(busy, sealer=new_sealer())
    assert isinstance(run.outcome, Done)
    assert text_of(run.outcome.result) == "done"
    assert run.rounds == [()]
    assert run.app.wire[0]["result"].keys() >= {"requestState"}
    assert "inputRequests" not in run.app.wire[0]["result"]
    second = without_meta(run.app.seen[1].params)
    assert second["requestState"] == run.app.tokens()[0]
    assert "inputResponses" not in second


def test_a_steps_state_naming_an_unknown_step_is_malformed() -> None:
    sealer = new_sealer()
    ran: list[str] = []
    steps = weather_steps([], ran)
    value = {"f": "some-flow", "d": 10_000.0, "g": [], "v": {"step": "nope"}}
    token = sealer.seal(value, method="tools/call", params=BASE, principal="ada", now=10.0)
    with pytest.raises(InvalidRequestState) as caught:
        leg(steps, {**BASE, "requestState": token}, sealer=sealer)
    assert caught.value.reason == "malformed" and caught.value.data == {"reason": "malformed"}
    assert ran == []
    # Through a server the same goes out as -32602 with the reason (a token not spent yet).
    app = App(steps, sealer=sealer, now=10.0)
    token = sealer.seal(value, method="tools/call", params=BASE, principal="ada", now=10.0)
    assert reason_of(app.leg(token)) == "malformed"


def test_next_without_ask_chains_to_the_next_step_in_the_same_leg() -> None:
    ran: list[tuple[str, Any]] = []
    steps = Steps()

    @steps.step("a")
    def a(ctx: HandlerContext, data: Any) -> Any:
        ran.append(("a", data))
        return Next(1)

    @steps.step("b")
    def b(ctx: HandlerContext, data: Any) -> Any:
        ran.append(("b", data))
        return Next(data + 1, ask={})  # an empty ask asks nothing: chain on

    @steps.step("c")
    def c(ctx: HandlerContext, data: Any) -> Any:
        ran.append(("c", data))
        return {"content": [{"type": "text", "text": str(data)}]}

    assert steps.names == ("a", "b", "c")
    # No state is carried, so no sealer is needed; with a store, the last step is spent.
    assert text_of(leg(steps, BASE, sealer=None)) == "2"
    assert text_of(leg(steps, BASE, sealer=new_sealer())) == "2"
    assert ran == [("a", None), ("b", 1), ("c", 2)] * 2


def test_next_defaults() -> None:
    assert Next() == Next(None, ask=None)
    assert Next({"x": 1}).data == {"x": 1} and Next({"x": 1}).ask is None
    assert Ask() == Ask(requests={}, state=None)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (None, {}),
        ({"name": "weather"}, {}),
        ({"name": "weather", "arguments": ["not", "a", "mapping"]}, {}),
        ({"name": "weather", "arguments": {"day": "mon"}}, {"day": "mon"}),
    ],
    ids=["no-params", "absent", "not-a-mapping", "present"],
)
def test_ctx_arguments(params: dict[str, Any] | None, expected: dict[str, Any]) -> None:
    seen: list[Any] = []

    def handler(ctx: HandlerContext) -> Any:
        seen.append(ctx.arguments)
        return {"content": []}

    assert leg(handler, params, sealer=None) == {"content": []}
    assert seen == [expected]


def test_ctx_describes_the_leg_and_keeps_one_flow_id() -> None:
    contexts: list[dict[str, Any]] = []

    def handler(ctx: HandlerContext) -> Any:
        contexts.append(
            {
                "method": ctx.method,
                "principal": ctx.principal,
                "now": ctx.now,
                "capabilities": ctx.capabilities,
                "flow": ctx.flow,
                "opened": ctx.opened,
                "state": ctx.state,
                "has_answer": "city" in ctx.answers,
                "request_id": ctx.request.id,
                "info_id": ctx.info.id,
                "params": without_meta(ctx.params),
            }
        )
        if ctx.state is None:
            return ctx.ask({"city": CITY}, state=1)
        if ctx.state < 3:
            return ctx.ask({"city": CITY}, state=ctx.state + 1)
        return {"content": []}

    app = App(handler, sealer=new_sealer(), principal="ada", now=50.0)
    app.walk(app.leg())
    assert [c["state"] for c in contexts] == [None, 1, 2, 3]
    assert len({c["flow"] for c in contexts}) == 1
    assert contexts[0]["opened"] is None
    assert all(isinstance(c["opened"], OpenedState) for c in contexts[1:])
    assert [c["now"] for c in contexts] == [50.0, 51.0, 52.0, 53.0]
    assert all(c["method"] == "tools/call" and c["principal"] == "ada" for c in contexts)
    assert all(c["capabilities"] == CAPS for c in contexts)
    assert [c["has_answer"] for c in contexts] == [False, True, True, True]
    assert all(c["request_id"] == c["info_id"] for c in contexts)
    assert contexts[0]["params"] == BASE
    # Another call is another flow.
    app.walk(app.leg())
    assert contexts[4]["flow"] != contexts[0]["flow"]


def test_once_is_true_once_per_name_within_a_leg() -> None:
    fired: list[bool] = []

    def handler(ctx: HandlerContext) -> Any:
        fired.extend([ctx.once("a"), ctx.once("a"), ctx.once("b")])
        return {"content": []}

    leg(handler, BASE, sealer=None)  # no sealer: nothing is spent, the leg's record holds
    leg(handler, BASE, sealer=new_sealer(store=False))
    leg(handler, BASE, sealer=new_sealer(store=True))
    assert fired == [True, False, True] * 3


def test_a_flow_token_on_a_prompt_is_bound_to_prompts_get() -> None:
    """Input-required works the same for prompts/get; the state binds to that method."""

    def prompt(ctx: HandlerContext) -> Any:
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY}, state={"asked": True})
        assert ctx.state == {"asked": True} and ctx.method == "prompts/get"
        return {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}

    params = {"name": "weather", "arguments": {"day": "mon"}}
    run = App(prompt, sealer=new_sealer()).exchange(method="prompts/get", params=params)
    assert isinstance(run.outcome, Done)
    assert run.outcome.result["messages"][0]["content"]["text"] == "hi"
    assert [r.method for r in run.app.seen] == ["prompts/get", "prompts/get"]
    token = run.app.tokens()[0]
    assert reason_of(run.app.leg(token, ["city"])) == "wrong_method"


def test_elicit_form_request_type_is_the_typed_answer_key() -> None:
    """ctx.answer reads by the kind that was asked (ElicitResult for a form)."""
    got: list[Any] = []

    def handler(ctx: HandlerContext) -> Any:
        got.append(ctx.answer("city", CITY))
        return {"content": []}

    assert isinstance(CITY, ElicitFormRequest)
    leg(handler, {**BASE, "inputResponses": {"city": ANSWERS["city"]}}, sealer=None)
    assert got[0].action == "accept" and got[0].content == {"city": "Oslo"}


def test_no_state_of_a_flow_outlives_the_flow_deadline() -> None:
    sealer = new_sealer()
    ask_forever = lambda ctx: ctx.ask({"city": CITY}, state=ctx.now)  # noqa: E731
    params: dict[str, Any] = {"name": "t", "arguments": {}}
    first = run_handler(
        ask_forever,
        Request(id=1, method="tools/call", params=params),
        info_for(),
        sealer=sealer,
        principal=None,
        now=0.0,
        flow_ttl=10.0,
    )
    token = first["requestState"]
    assert json_state(token)["d"] == 10.0
    opened = sealer.open(token, method="tools/call", params=params, principal=None, now=0.0)
    assert opened.expires_at == 10.0  # capped by the flow, not the sealer's 600 s
    retry = {**params, "requestState": token}
    with pytest.raises(InvalidRequestState) as caught:  # still a valid token, but no time left
        run_handler(
            ask_forever,
            Request(id=2, method="tools/call", params=retry),
            info_for(),
            sealer=sealer,
            principal=None,
            now=10.0,
            flow_ttl=10.0,
        )
    assert caught.value.data == {"reason": "expired"}
