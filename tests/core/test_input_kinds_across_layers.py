"""The input-kind registry as every layer uses it.

Each standard kind's 2025-era request (``legacy_request``) is one the server
rules accept exactly when its capability is declared, with the same check as
for ``input_required``; and a registry with one more entry (``CONFIRM``, built
in ``support.input_kinds``) is all the engine, the asking helpers, the legacy
shim and the server rules need to take a new kind.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.input_kinds import (
    CONFIRM,
    SAMPLE_REQUESTS,
    WITH_CONFIRM,
    ConfirmRequest,
    ConfirmResult,
)

import mrtr_core as m
from mrtr_core import AppResultRefused
from mrtr_core._connection._server_rules import (
    SERVER_REQUEST_METHODS,
    check_input_required,
    check_server_request,
    finish_result,
)
from mrtr_core.wire._inputs import INPUT_KINDS, InputKind

ASK = ConfirmRequest(message="Delete the draft?")
DANGER = ConfirmRequest(message="Drop the database?", danger=True)
ASK_WIRE = {"method": "confirmation/ask", "params": {"message": "Delete the draft?"}}
DECLARED: dict[str, Any] = {"confirmation": {}}


def _info(era: Any = "modern", capabilities: Any = DECLARED) -> m.server.RequestInfo:
    return m.server.RequestInfo(
        id=1,
        method="tools/call",
        era=era,
        protocol_version="2026-07-28" if era == "modern" else "2025-11-25",
        capabilities=capabilities,
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )


# --- the 2025-era mapping of every standard kind ---------------------------------------


@pytest.mark.parametrize("kind", INPUT_KINDS.kinds, ids=lambda k: k.name)
def test_every_kinds_2025_request_round_trips_through_the_server_rules(kind: InputKind) -> None:
    wire = SAMPLE_REQUESTS[kind.name]
    ask = m.wire.structure_input_request(wire)
    legacy = m.server._legacy_shim.legacy_request(9, ask)
    assert legacy.id == 9 and legacy.method == kind.legacy_method
    params = dict(legacy.params or {})
    if kind.legacy_id_param is not None:
        assert isinstance(params.pop(kind.legacy_id_param), str)
    assert params == wire["params"]
    needed = kind.needed_capabilities(wire["params"])
    check_server_request(legacy, needed)  # declared: sent
    with pytest.raises(AppResultRefused) as refused:
        check_server_request(legacy, {})
    assert refused.value.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
    assert refused.value.data == {"requiredCapabilities": needed}
    # The same check, on the same kind, for input_required.
    result = {"resultType": "input_required", "inputRequests": {"k": wire}}
    check_input_required(_info(capabilities=needed), result)
    with pytest.raises(AppResultRefused) as refused:
        check_input_required(_info(capabilities={}), result)
    assert refused.value.data == {"requiredCapabilities": needed}


def test_a_2025_sampling_request_with_tools_needs_sampling_tools() -> None:
    # Where the two checks used to disagree: the server-request check wanted
    # ``sampling`` alone; now it is the engine's rule for both (2025-11-25 already
    # says a server MUST NOT send tools without sampling.tools).
    params = {**SAMPLE_REQUESTS["sampling/createMessage"]["params"], "tools": []}
    request = m.Request(id=1, method="sampling/createMessage", params=params)
    with pytest.raises(AppResultRefused, match=r"sampling\.tools") as refused:
        check_server_request(request, {"sampling": {}})
    assert refused.value.data == {"requiredCapabilities": {"sampling": {"tools": {}}}}
    check_server_request(request, {"sampling": {"tools": {}}})


def test_a_2025_request_of_an_unknown_mode_is_refused() -> None:
    request = m.Request(id=1, method="elicitation/create", params={"mode": "popup"})
    with pytest.raises(AppResultRefused, match="unknown elicitation mode") as refused:
        check_server_request(request, {"elicitation": {"form": {}, "url": {}}})
    assert refused.value.code == m.ErrorCode.INTERNAL_ERROR
    assert INPUT_KINDS.legacy_methods | {"ping"} == SERVER_REQUEST_METHODS


# --- one more entry: a new kind end to end -----------------------------------------------


def test_the_default_registry_does_not_know_the_new_kind() -> None:
    with pytest.raises(m.RemoteProtocolError, match="unknown input request method"):
        m.wire.structure_input_request(ASK_WIRE)
    with pytest.raises(m.LocalProtocolError, match="not an input request"):
        m.server.input_required({"ok": ASK})  # type: ignore[dict-item]
    with pytest.raises(AppResultRefused, match="cannot send 'confirmation/ask'"):
        check_server_request(m.Request(id=1, method="confirmation/ask", params={}), DECLARED)


def test_structuring_takes_the_new_kind_and_keeps_unknown_keys() -> None:
    wire = {"method": "confirmation/ask", "params": {"message": "Sure?", "later": 1}}
    request = m.wire.structure_input_request(wire, WITH_CONFIRM)
    assert request == ConfirmRequest(message="Sure?", extra={"later": 1})  # type: ignore[comparison-overlap]
    assert m.wire._convert.unstructure_input_request(request) == wire
    assert m.engine._events.input_kind(request, WITH_CONFIRM) == "confirmation/ask"
    answer = m.wire.structure({"confirmed": True, "note": "x"}, ConfirmResult)
    assert m.wire.unstructure(answer) == {"confirmed": True, "note": "x"}


def _engine(capabilities: Any) -> m.engine.RoundEngine:
    engine = m.engine.RoundEngine(
        "tools/call", {"name": "cleanup"}, capabilities=capabilities, input_kinds=WITH_CONFIRM
    )
    engine.start(0.0)
    assert isinstance(engine.next_event(), m.engine.SendRequest)
    return engine


def test_the_engine_dispatches_the_new_kind_and_sends_its_answer() -> None:
    engine = _engine(DECLARED)
    engine.receive_result({"resultType": "input_required", "inputRequests": {"ok": ASK_WIRE}}, 1.0)
    started = engine.next_event()
    assert isinstance(started, m.engine.RoundStarted) and started.kinds == ("confirmation/ask",)
    assert engine.next_event() == m.engine.DispatchInput(key="ok", request=ASK, round=1)  # type: ignore[arg-type]
    # Survives a snapshot, given the same registry.
    engine = m.engine.RoundEngine.restore(engine.snapshot(2.0), 2.0, input_kinds=WITH_CONFIRM)
    assert isinstance(engine.next_event(), m.engine.RoundStarted)
    assert engine.next_event() == m.engine.DispatchInput(key="ok", request=ASK, round=1)  # type: ignore[arg-type]
    with pytest.raises(m.LocalProtocolError, match="not a valid ConfirmResult"):
        _answered_badly()
    engine.provide("ok", ConfirmResult(confirmed=True), 3.0)  # type: ignore[arg-type]
    retry = engine.next_event()
    assert isinstance(retry, m.engine.SendRetry)
    assert retry.params["inputResponses"] == {"ok": {"confirmed": True}}


def _answered_badly() -> None:
    engine = _engine(DECLARED)
    engine.receive_result({"resultType": "input_required", "inputRequests": {"ok": ASK_WIRE}}, 1.0)
    engine.provide("ok", {"confirmed": "yes"}, 2.0)


@pytest.mark.parametrize(
    ("capabilities", "ask", "required"),
    [
        ({}, ASK_WIRE, {"confirmation": {}}),
        (
            DECLARED,
            {"method": "confirmation/ask", "params": {"message": "Drop?", "danger": True}},
            {"confirmation": {"dangerous": {}}},
        ),
    ],
)
def test_the_engine_gates_the_new_kind_on_its_capability(
    capabilities: Any, ask: Any, required: Any
) -> None:
    engine = _engine(capabilities)
    engine.receive_result({"resultType": "input_required", "inputRequests": {"ok": ask}}, 1.0)
    failed = engine.next_event()
    assert isinstance(failed, m.engine.Failed) and isinstance(
        failed.error, m.engine.MissingCapability
    )
    assert failed.error.required == required and "(confirmation/ask)" in failed.error.message


def test_the_asking_helpers_take_the_new_kind() -> None:
    asks: Any = {"ok": ASK}
    assert m.server.input_required(asks, input_kinds=WITH_CONFIRM) == {
        "resultType": "input_required",
        "inputRequests": {"ok": ASK_WIRE},
    }
    assert m.server.required_capabilities(asks, {}, WITH_CONFIRM) == {"confirmation": {}}
    assert m.server.required_capabilities(asks, DECLARED, WITH_CONFIRM) == {}
    assert m.engine.missing_capability(DANGER, DECLARED, WITH_CONFIRM) == {  # type: ignore[arg-type]
        "confirmation": {"dangerous": {}}
    }
    answers = m.server.Answers(
        {"inputResponses": {"ok": {"confirmed": False}}}, input_kinds=WITH_CONFIRM
    )
    assert answers.get("ok", ASK) == ConfirmResult(confirmed=False)  # type: ignore[arg-type, comparison-overlap]
    with pytest.raises(m.server.InvalidAnswer):
        m.server.Answers({"inputResponses": {"ok": {}}}, input_kinds=WITH_CONFIRM).get("ok", ASK)  # type: ignore[arg-type]


def _confirming_handler(seen: list[Any]) -> Any:
    # A handler written as for any kind: the shim hands its registry to the context.
    def handler(ctx: m.server.HandlerContext) -> Any:
        answer: Any = ctx.answer("ok", ASK)  # type: ignore[arg-type]
        seen.append(answer)
        if answer is None:
            return ctx.ask({"ok": ASK})  # type: ignore[dict-item]
        return {"content": [{"type": "text", "text": f"confirmed={answer.confirmed}"}]}

    return handler


def _shim(capabilities: Any, seen: list[Any]) -> m.server.LegacyShim:
    ids = iter(range(100, 200))
    shim = m.server.LegacyShim(
        _confirming_handler(seen),
        m.Request(id=1, method="tools/call", params={"name": "cleanup"}),
        _info(era="legacy", capabilities=capabilities),
        new_id=lambda: next(ids),
        sealer=None,
        principal=None,
        input_kinds=WITH_CONFIRM,
    )
    shim.start(0.0)
    return shim


def test_the_legacy_shim_asks_a_2025_client_the_new_kind() -> None:
    seen: list[Any] = []
    shim = _shim(DECLARED, seen)
    send = shim.next_event()
    assert isinstance(send, m.server.ShimSend) and isinstance(send.message, m.Request)
    question = send.message
    assert question.method == "confirmation/ask" and question.id == 100
    assert question.params is not None and question.params["message"] == "Delete the draft?"
    assert isinstance(question.params["confirmationId"], str)  # the 2025 id param
    check_server_request(question, DECLARED, WITH_CONFIRM)  # the server rules let it out
    with pytest.raises(AppResultRefused) as refused:
        check_server_request(question, {}, WITH_CONFIRM)
    assert refused.value.data == {"requiredCapabilities": {"confirmation": {}}}
    shim.receive(m.ResultResponse(id=100, result={"confirmed": True}), 1.0)
    done = shim.next_event()
    assert isinstance(done, m.server.ShimDone)
    assert done.response == m.ResultResponse(
        id=1, result={"content": [{"type": "text", "text": "confirmed=True"}]}
    )
    assert seen == [None, ConfirmResult(confirmed=True)]


def test_the_legacy_shim_refuses_the_new_kind_without_its_capability() -> None:
    shim = _shim({}, [])
    done = shim.next_event()
    assert isinstance(done, m.server.ShimDone) and isinstance(done.response, m.ErrorResponse)
    assert done.response.error.code == m.ErrorCode.INTERNAL_ERROR  # 2025 has no -32021
    assert done.response.error.data == {"requiredCapabilities": {"confirmation": {}}}


def test_the_server_rules_take_the_new_kind() -> None:
    result = {"resultType": "input_required", "inputRequests": {"ok": ASK_WIRE}}
    check_input_required(_info(), result, WITH_CONFIRM)
    finished = finish_result(
        _info(),
        result,
        server_info=None,
        cache_ttl_ms=0,
        cache_scope="private",
        input_kinds=WITH_CONFIRM,
    )
    assert finished == result
    with pytest.raises(AppResultRefused) as refused:
        check_input_required(_info(capabilities={}), result, WITH_CONFIRM)
    assert refused.value.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
    with pytest.raises(AppResultRefused, match="malformed input_required"):
        check_input_required(_info(), result)  # the default registry does not know it
    no_id = m.Request(id=1, method="confirmation/ask", params={"message": "Sure?"})
    with pytest.raises(AppResultRefused, match="needs an confirmationId string"):
        check_server_request(no_id, DECLARED, WITH_CONFIRM)
    assert CONFIRM.legacy_id_param == "confirmationId"
