"""LegacyShim: a multi round-trip handler serving a 2025-era client over real Connections."""

from __future__ import annotations

from typing import Any

import pytest
from support.pairing import drain

import mrtr_core as m

CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = m.server.elicit_form("Units?", {"units": {"type": "string"}})
TONE = m.server.sample("Three words for sunshine", max_tokens=10)
ROOTS = m.server.list_roots()
ANSWERS: dict[str, Any] = {
    "elicitation/create:Which city?": {"action": "accept", "content": {"city": "Oslo"}},
    "elicitation/create:Units?": {"action": "accept", "content": {"units": "C"}},
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "warm and bright"},
        "model": "m",
    },
    "roots/list": {"roots": [{"uri": "file:///home/ada"}]},
}
ALL = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


class Peer:
    """A 2025-era client Connection and a server Connection, a shim per tool call."""

    def __init__(
        self, handler: Any, capabilities: Any = ALL, *, app_runs: bool = False, **shim_options: Any
    ) -> None:
        # app_runs: the shim gets handler=None and hands out ShimRun; this peer runs the leg.
        self.app_runs = app_runs
        self.runs: list[m.Request] = []
        self.client = m.Connection(m.CLIENT, era="legacy", capabilities=capabilities)
        self.server = m.Connection(m.SERVER)
        self.handler = handler
        self.shim_options = {"sealer": None, "principal": None, **shim_options}
        self.shims: dict[Any, m.server.LegacyShim] = {}
        self.asked: list[m.Request] = []  # what the server asked the client
        self.waits: list[float] = []
        self.answer_with: dict[str, Any] = dict(ANSWERS)
        self.pump()
        assert self.client.session_state is m.SessionState.READY

    def pump(self, now: float = 0.0) -> list[Any]:
        """Move bytes both ways until quiet; return the client's call events."""
        seen: list[Any] = []
        for _ in range(200):
            moved = False
            for event in drain(self.client, now):
                moved = True
                if isinstance(event, m.HandshakeStep) or (
                    isinstance(event, m.CallEvent)
                    and isinstance(event.event, (m.engine.SendRequest, m.engine.SendRetry))
                ):
                    self.server.receive_data(self.client.send(event))
                elif isinstance(event, m.Request):
                    self.asked.append(event)
                    self.server.receive_data(self.client.send(self.client_answer(event)))
                elif isinstance(event, (m.CallEvent, m.RequestCancelled)):
                    seen.append(event)
            for event in drain(self.server, now):
                moved = True
                self.on_server_event(event, now)
            moved = self.run_shims(now) or moved
            if not moved:
                return seen
        raise AssertionError("no quiet point")

    def client_answer(self, request: m.Request) -> m.ResultResponse | m.ErrorResponse:
        key = request.method
        if key == "elicitation/create":
            key += ":" + request.params["message"]  # type: ignore[index]
        answer = self.answer_with[key]
        if isinstance(answer, m.ErrorObject):
            return m.ErrorResponse(id=request.id, error=answer)
        return m.ResultResponse(id=request.id, result=answer)

    def on_server_event(self, event: Any, now: float) -> None:
        if isinstance(event, m.AutoReply):
            self.client.receive_data(self.server.send(event))
        elif isinstance(event, m.Request):
            info = self.server.request_info(event.id)
            handler = None if self.app_runs else self.handler
            shim = m.server.LegacyShim(
                handler, event, info, new_id=self.server.new_request_id, **self.shim_options
            )
            self.shims[event.id] = shim
            shim.start(now)
        elif isinstance(event, (m.ResultResponse, m.ErrorResponse)):
            # An answer to a question a shim withdrew meanwhile has no taker: ignore it.
            for shim in [s for s in self.shims.values() if event.id in s.waiting_for]:
                shim.receive(event, now)
        elif isinstance(event, m.RequestCancelled):
            self.shims[event.request_id].cancel()
            self.server.send(m.ResultResponse(id=event.request_id, result={}))  # b"": released

    def run_shims(self, now: float) -> bool:
        moved = False
        for shim in self.shims.values():
            while not isinstance(event := shim.next_event(), m.Wait):
                moved = True
                if isinstance(event, m.server.ShimSend):
                    self.client.receive_data(self.server.send(event.message))
                elif isinstance(event, m.server.ShimWait):
                    self.waits.append(event.delay)
                    shim.resume(now + event.delay)
                elif isinstance(event, m.server.ShimRun):
                    self.runs.append(event.request)
                    shim.leg_done(self.run_leg(shim, event.request, now))
                else:
                    self.client.receive_data(self.server.send(event.response))
        return moved

    def run_leg(self, shim: m.server.LegacyShim, leg: m.Request, now: float) -> Any:
        """What an app that runs its own legs does: a result, or the MrtrError raised."""
        try:
            return m.server.run_handler(
                self.handler,
                leg,
                shim.info,
                sealer=self.shim_options["sealer"],
                principal=self.shim_options["principal"],
                now=now,
            )
        except m.MrtrError as exc:
            return exc

    def call(self, name: str = "weather", **params: Any) -> Any:
        handle = self.client.call("tools/call", {"name": name, "arguments": {}, **params})
        events = [e for e in self.pump() if isinstance(e, m.CallEvent) and e.call == handle]
        return events[-1].event


def weather_three_rounds(seen: list[Any]) -> Any:
    """Ask city, then units, then a sampled tone (three rounds), then answer."""

    def handler(ctx: m.server.HandlerContext) -> Any:
        seen.append(dict(ctx.params.get("inputResponses") or {}))
        state = ctx.state or {}
        if "city" not in state:
            city = ctx.answer("city", CITY)
            if city is None:
                return ctx.ask({"city": CITY})
            return ctx.ask({"units": UNITS}, state={"city": city.content["city"]})  # type: ignore[union-attr]
        if "units" not in state:
            units = ctx.answer("units", UNITS)
            assert units is not None
            return ctx.ask({"tone": TONE}, state={**state, "units": units.content["units"]})  # type: ignore[union-attr]
        tone = ctx.answer("tone", TONE)
        assert tone is not None
        text = f"{state['city']}: 21 {state['units']}, {tone.content['text']}"  # type: ignore[index]
        return {"content": [{"type": "text", "text": text}]}

    return handler


def _sealer() -> m.server.StateSealer:
    return m.server.StateSealer(
        {"k": m.server.StateSealer.new_key()}, "k", store=m.server.MemoryNonceStore()
    )


def test_a_three_round_flow_over_real_server_to_client_requests() -> None:
    seen: list[Any] = []
    peer = Peer(weather_three_rounds(seen), sealer=_sealer())
    done = peer.call()
    assert done == m.engine.Done(
        result={"content": [{"type": "text", "text": "Oslo: 21 C, warm and bright"}]}
    )
    assert [r.method for r in peer.asked] == [
        "elicitation/create",
        "elicitation/create",
        "sampling/createMessage",
    ]
    # Each run saw only its own round's answers: replaced, never accumulated.
    assert [sorted(answers) for answers in seen] == [[], ["city"], ["units"], ["tone"]]
    (shim,) = peer.shims.values()
    assert shim.rounds == 3 and shim.finished and shim.waiting_for == ()


def test_several_asks_in_one_round_are_all_sent_before_the_handler_runs_again() -> None:
    runs: list[Any] = []

    def handler(ctx: m.server.HandlerContext) -> Any:
        runs.append(sorted(ctx.params.get("inputResponses") or {}))
        asks = {"city": CITY, "tone": TONE, "where": ROOTS}
        if any(ctx.answer(key, ask) is None for key, ask in asks.items()):
            return ctx.ask(asks)
        roots = ctx.answer("where", ROOTS)
        return {"content": [{"type": "text", "text": roots.roots[0].uri}]}  # type: ignore[union-attr]

    peer = Peer(handler)
    assert peer.call() == m.engine.Done(
        result={"content": [{"type": "text", "text": "file:///home/ada"}]}
    )
    assert runs == [[], ["city", "tone", "where"]]
    assert len(peer.asked) == 3


def test_stale_round_fields_of_the_original_request_are_stripped() -> None:
    seen: list[Any] = []

    def handler(ctx: m.server.HandlerContext) -> Any:
        seen.append((ctx.params.get("requestState"), ctx.params.get("inputResponses")))
        return {"content": []}

    peer = Peer(handler)
    peer.call(requestState="forged", inputResponses={"city": {"action": "accept"}})
    assert seen == [(None, None)]


def test_url_elicitation_gets_an_elicitation_id_for_2025_clients() -> None:
    link = m.server.elicit_url("Sign in", "https://example.com/login")
    request = m.server._legacy_shim.legacy_request(5, link)
    assert request.method == "elicitation/create"
    assert request.params is not None
    assert request.params["mode"] == "url" and request.params["url"] == "https://example.com/login"
    assert isinstance(request.params["elicitationId"], str) and request.params["elicitationId"]
    assert m.server._legacy_shim.legacy_request(6, ROOTS) == m.Request(id=6, method="roots/list")


def test_the_round_cap_ends_the_request_with_an_error() -> None:
    def never_satisfied(ctx: m.server.HandlerContext) -> Any:
        return ctx.ask({"city": CITY})

    peer = Peer(never_satisfied, max_rounds=3)
    failed = peer.call()
    assert isinstance(failed, m.engine.Failed) and failed.error.code == -32603
    assert "more than 3 rounds" in failed.error.message
    assert len(peer.asked) == 3


def test_state_only_rounds_are_paced_and_the_pace_resets_after_a_round_that_asks() -> None:
    def slow(ctx: m.server.HandlerContext) -> Any:
        n = (ctx.state or 0) + 1
        if n in (1, 2, 3, 5, 6):
            return ctx.ask(state=n)  # "come back later"
        if n == 4:
            if ctx.answer("city", CITY) is None:
                return ctx.ask({"city": CITY}, state=n - 1)
            return ctx.ask(state=n)
        return {"content": [{"type": "text", "text": f"after {n} legs"}]}

    peer = Peer(slow, sealer=_sealer())
    done = peer.call()
    assert done == m.engine.Done(result={"content": [{"type": "text", "text": "after 7 legs"}]})
    # Three state-only rounds (growing), a round that asks (reset), three more.
    assert peer.waits == [0.05, 0.1, 0.2, 0.05, 0.1, 0.2]


def test_ten_state_only_rounds_do_not_use_up_the_rounds_of_input() -> None:
    # Regression: state-only rounds used to count against max_rounds, so ten of
    # them left no room for the one question that followed.
    def patient(ctx: m.server.HandlerContext) -> Any:
        n = ctx.state or 0
        if n < 10:
            return ctx.ask(state=n + 1)  # load shedding: "come back later", ten times
        if ctx.answer("city", CITY) is None:
            return ctx.ask({"city": CITY}, state=n)
        return {"content": [{"type": "text", "text": "served"}]}

    peer = Peer(patient, sealer=_sealer())
    assert peer.call() == m.engine.Done(result={"content": [{"type": "text", "text": "served"}]})
    assert len(peer.waits) == 10 and len(peer.asked) == 1
    (shim,) = peer.shims.values()
    assert (shim.rounds, shim.input_rounds, shim.state_only_rounds) == (11, 1, 10)


def test_a_handler_that_sheds_load_forever_is_stopped_by_the_state_only_bound() -> None:
    legs: list[Any] = []

    def forever(ctx: m.server.HandlerContext) -> Any:
        legs.append(ctx.state)
        return ctx.ask(state=(ctx.state or 0) + 1)

    peer = Peer(forever, sealer=_sealer())
    failed = peer.call()
    assert isinstance(failed, m.engine.Failed) and isinstance(failed.error, m.PeerError)
    assert failed.error.code == -32603
    assert failed.error.message == (
        "the tool returned more than 10 requestState-only rounds (max_state_only_rounds)"
    )
    assert len(legs) == 11 and len(peer.waits) == 10 and peer.asked == []


def test_a_round_that_asks_does_not_reset_the_state_only_count() -> None:
    # As RoundEngine's max_state_only_legs: the bound is over the whole request.
    def handler(ctx: m.server.HandlerContext) -> Any:
        n = ctx.state or 0
        if n == 1 and ctx.answer("city", CITY) is None:
            return ctx.ask({"city": CITY}, state=n)
        return ctx.ask(state=n + 1)

    peer = Peer(handler, sealer=_sealer(), max_state_only_rounds=2)
    failed = peer.call()
    assert (
        isinstance(failed, m.engine.Failed)
        and "more than 2 requestState-only" in failed.error.message
    )
    # state-only, a question, state-only, then the third state-only round is refused.
    assert len(peer.waits) == 2 and len(peer.asked) == 1


def test_no_state_only_round_at_all_with_a_bound_of_zero() -> None:
    peer = Peer(lambda ctx: ctx.ask(state=1), sealer=_sealer(), max_state_only_rounds=0)
    failed = peer.call()
    assert (
        isinstance(failed, m.engine.Failed)
        and "more than 0 requestState-only" in failed.error.message
    )
    assert peer.waits == []


def test_resume_outside_a_wait_is_misuse() -> None:
    peer = Peer(lambda ctx: ctx.ask({"city": CITY}))
    peer.client.call("tools/call", {"name": "x"})
    peer.server.receive_data(peer.client.send(peer.client.next_event()))
    request = peer.server.next_event()
    shim = m.server.LegacyShim(
        lambda ctx: ctx.ask({"city": CITY}),
        request,
        peer.server.request_info(request.id),
        new_id=peer.server.new_request_id,
        sealer=None,
        principal=None,
    )
    shim.start(0.0)
    with pytest.raises(m.LocalProtocolError, match="resume"):
        shim.resume(1.0)  # it is waiting for the client's answer, not for time
    with pytest.raises(m.LocalProtocolError, match="not a request of this shim"):
        shim.receive(m.ResultResponse(id=999, result={}), 1.0)
    with pytest.raises(m.LocalProtocolError, match="max_rounds"):
        m.server.LegacyShim(
            lambda ctx: {},
            request,
            peer.server.request_info(request.id),
            new_id=peer.server.new_request_id,
            sealer=None,
            principal=None,
            max_rounds=0,
        )
    for bad in (-1, True, 1.5):
        with pytest.raises(m.LocalProtocolError, match="max_state_only_rounds"):
            m.server.LegacyShim(
                lambda ctx: {},
                request,
                peer.server.request_info(request.id),
                new_id=peer.server.new_request_id,
                sealer=None,
                principal=None,
                max_state_only_rounds=bad,
            )


def test_a_handler_can_fall_back_when_the_client_lacks_a_capability() -> None:
    def handler(ctx: m.server.HandlerContext) -> Any:
        if not ctx.can_ask(TONE):
            return {"content": [{"type": "text", "text": "plain forecast"}]}
        return ctx.ask({"tone": TONE})

    peer = Peer(handler, capabilities={"elicitation": {}})
    assert peer.call() == m.engine.Done(
        result={"content": [{"type": "text", "text": "plain forecast"}]}
    )
    assert peer.asked == []


@pytest.mark.parametrize("how", ["ctx.ask", "raw result"])
def test_asking_what_the_client_lacks_is_a_32603_naming_the_capability(how: str) -> None:
    def handler(ctx: m.server.HandlerContext) -> Any:
        if how == "ctx.ask":
            return ctx.ask({"tone": TONE})
        return m.server.input_required({"tone": TONE})  # bypassing ctx.ask: still caught

    peer = Peer(handler, capabilities={"elicitation": {}})
    failed = peer.call()
    assert isinstance(failed, m.engine.Failed) and failed.error.code == -32603  # 2025 has no -32021
    assert failed.error.data == {"requiredCapabilities": {"sampling": {}}}
    assert peer.asked == []


def test_an_error_answer_from_the_client_ends_the_request_and_withdraws_the_rest() -> None:
    def handler(ctx: m.server.HandlerContext) -> Any:
        return ctx.ask({"tone": TONE, "city": CITY})

    peer = Peer(handler)
    peer.answer_with["sampling/createMessage"] = m.ErrorObject(code=-1, message="no model")
    failed = peer.call()
    assert isinstance(failed, m.engine.Failed) and failed.error.code == -32603
    assert failed.error.data == {"key": "tone", "clientError": -1}


def test_a_handler_error_is_sent_as_its_own_code() -> None:
    def handler(ctx: m.server.HandlerContext) -> Any:
        ctx.answer("city", CITY)  # a malformed answer raises InvalidAnswer (-32602)
        return ctx.ask({"city": CITY})

    peer = Peer(handler)
    peer.answer_with["elicitation/create:Which city?"] = {"action": "perhaps"}
    failed = peer.call()
    assert isinstance(failed, m.engine.Failed) and failed.error.code == -32602


def test_cancelling_the_original_request_withdraws_the_open_questions() -> None:
    peer = Peer(lambda ctx: ctx.ask({"city": CITY}))
    peer.answer_with = {}  # the user never answers
    handle = peer.client.call("tools/call", {"name": "weather"})
    peer.server.receive_data(peer.client.send(peer.client.next_event()))
    request = peer.server.next_event()
    peer.on_server_event(request, 0.0)
    (shim,) = peer.shims.values()
    (ask,) = [shim.next_event()]
    assert isinstance(ask, m.server.ShimSend)
    peer.client.receive_data(peer.server.send(ask.message))
    question = peer.client.next_event()
    assert question.method == "elicitation/create"

    peer.client.cancel(handle)
    for event in drain(peer.client):
        if isinstance(event, m.CallEvent) and isinstance(event.event, m.engine.CancelLeg):
            peer.server.receive_data(peer.client.send(event))
    cancelled = peer.server.next_event()
    assert cancelled == m.RequestCancelled(request_id=request.id)
    shim.cancel()
    shim.cancel()  # idempotent
    withdraw = shim.next_event()
    assert withdraw == m.server.ShimSend(
        message=m.Notification(method="notifications/cancelled", params={"requestId": question.id})
    )
    assert shim.next_event() is m.Wait.FINISHED and shim.finished
    peer.client.receive_data(peer.server.send(withdraw.message))
    assert peer.client.next_event() == m.RequestCancelled(request_id=question.id)


# --- the app runs its own legs (handler=None): ShimRun / leg_done -----------------------


@pytest.mark.parametrize("app_runs", [False, True])
def test_app_run_legs_give_the_same_flow_as_a_shim_run_handler(app_runs: bool) -> None:
    seen: list[Any] = []
    peer = Peer(weather_three_rounds(seen), sealer=_sealer(), app_runs=app_runs)
    done = peer.call()
    assert done == m.engine.Done(
        result={"content": [{"type": "text", "text": "Oslo: 21 C, warm and bright"}]}
    )
    assert [sorted(answers) for answers in seen] == [[], ["city"], ["units"], ["tone"]]
    if app_runs:
        # Each ShimRun leg carries this round's answers and the state sealed last round.
        assert [sorted(leg.params.get("inputResponses") or {}) for leg in peer.runs] == [
            [],
            ["city"],
            ["units"],
            ["tone"],
        ]
        assert "requestState" not in peer.runs[0].params
        assert all("requestState" in leg.params for leg in peer.runs[1:])
    else:
        assert peer.runs == []


def test_an_app_run_leg_that_raised_is_sent_as_its_own_error() -> None:
    def handler(ctx: m.server.HandlerContext) -> Any:
        raise m.server.InvalidAnswer("city", "no such city")

    peer = Peer(handler, app_runs=True)
    failed = peer.call()
    assert isinstance(failed, m.engine.Failed) and failed.error.code == -32602
    assert "no such city" in failed.error.message


def test_an_app_run_leg_asking_beyond_the_capabilities_is_a_32603() -> None:
    peer = Peer(lambda ctx: m.server.input_required({"tone": TONE}), capabilities={}, app_runs=True)
    failed = peer.call()
    assert isinstance(failed, m.engine.Failed) and failed.error.code == -32603
    assert failed.error.data == {"requiredCapabilities": {"sampling": {}}}


def _started_app_shim() -> tuple[m.server.LegacyShim, m.Request]:
    info = m.server.RequestInfo(
        id=7,
        method="tools/call",
        era="legacy",
        protocol_version="2025-11-25",
        capabilities=ALL,
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )
    request = m.Request(id=7, method="tools/call", params={"name": "weather"})
    ids = iter(range(100, 200))
    shim = m.server.LegacyShim(
        None, request, info, new_id=lambda: next(ids), sealer=None, principal=None
    )
    shim.start(0.0)
    run = shim.next_event()
    assert isinstance(run, m.server.ShimRun) and run.request == request
    return shim, run.request


def test_leg_done_without_a_shim_run_out_is_misuse() -> None:
    shim, _ = _started_app_shim()
    shim.leg_done({"content": []})
    assert shim.next_event() == m.server.ShimDone(
        response=m.ResultResponse(id=7, result={"content": []})
    )
    with pytest.raises(m.LocalProtocolError, match="answers a ShimRun"):
        shim.leg_done({"content": []})


def test_resume_while_the_app_runs_a_leg_is_misuse() -> None:
    shim, _ = _started_app_shim()
    with pytest.raises(m.LocalProtocolError, match="follows a ShimWait"):
        shim.resume(1.0)


def test_a_leg_that_finishes_after_a_cancel_sends_nothing() -> None:
    shim, _ = _started_app_shim()
    shim.cancel()
    shim.leg_done(m.server.input_required({"city": CITY}))  # the app's late outcome: dropped
    assert shim.next_event() is m.Wait.FINISHED and shim.finished and shim.waiting_for == ()


# --- what the shim waits for: one Wait member for each gap ------------------------------


def test_the_shim_says_what_it_waits_for_with_the_one_sentinel_type() -> None:
    shim, leg = _started_app_shim()
    assert shim.next_event() is m.Wait.NEED_RESULT  # the app runs the ShimRun's leg
    state_only = {"resultType": "input_required", "requestState": "s1"}
    shim.leg_done(state_only)
    assert isinstance(shim.next_event(), m.server.ShimWait)
    assert shim.next_event() is m.Wait.NEED_START  # resume() after the delay
    shim.resume(1.0)
    assert isinstance(shim.next_event(), m.server.ShimRun)
    shim.leg_done(m.server.input_required({"city": CITY}, state="s2"))
    ask = shim.next_event()
    assert isinstance(ask, m.server.ShimSend) and isinstance(ask.message, m.Request)
    assert shim.next_event() is m.Wait.NEED_INPUT  # the client's answer
    shim.receive(m.ResultResponse(id=ask.message.id, result={"action": "decline"}), 2.0)
    assert isinstance(shim.next_event(), m.server.ShimRun)
    shim.leg_done({"content": []})
    assert isinstance(shim.next_event(), m.server.ShimDone)
    assert shim.next_event() is m.Wait.FINISHED and shim.next_event() is m.Wait.FINISHED
    assert leg.id == 7
