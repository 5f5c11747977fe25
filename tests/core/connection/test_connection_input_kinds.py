"""A connection built with a registry of more input kinds carries them end to end: the
server lets the app ask one, the client's call dispatches it and retries with its answer."""

from __future__ import annotations

from typing import Any

import pytest
from support.input_kinds import WITH_CONFIRM, ConfirmRequest, ConfirmResult
from support.pairing import drain

import mrtr_core as m

INFO = {"name": "me", "version": "1"}
ASKED = {
    "resultType": "input_required",
    "inputRequests": {"ok": {"method": "confirmation/ask", "params": {"message": "Deploy?"}}},
}


def pair(kinds: Any) -> tuple[m.Connection, m.Connection]:
    client = m.Connection(
        m.CLIENT, era="modern", info=INFO, capabilities={"confirmation": {}}, input_kinds=kinds
    )
    server = m.Connection(m.SERVER, info=INFO, input_kinds=kinds)
    return client, server


def test_a_new_kind_travels_through_a_pair_built_with_its_registry() -> None:
    client, server = pair(WITH_CONFIRM)
    call = client.call("tools/call", {"name": "deploy"})
    (leg,) = drain(client)
    server.receive_data(client.send(leg))
    request = server.next_event()
    assert isinstance(request, m.Request)
    client.receive_data(server.send(m.ResultResponse(id=request.id, result=ASKED)))
    events = drain(client)
    dispatch = next(e.event for e in events if isinstance(e.event, m.engine.DispatchInput))
    assert dispatch.request == ConfirmRequest(message="Deploy?")
    client.provide(call, "ok", ConfirmResult(confirmed=True))
    (retry,) = drain(client)
    server.receive_data(client.send(retry))
    again = server.next_event()
    assert isinstance(again, m.Request)
    assert again.params["inputResponses"] == {"ok": {"confirmed": True}}


def test_the_default_registry_refuses_the_kind_it_does_not_know() -> None:
    client, server = pair(m.wire.INPUT_KINDS)
    client.call("tools/call", {"name": "deploy"})
    (leg,) = drain(client)
    server.receive_data(client.send(leg))
    request = server.next_event()
    with pytest.raises(m.AppResultRefused, match="malformed input_required"):
        server.send(m.ResultResponse(id=request.id, result=ASKED))


def test_input_kinds_must_be_a_registry() -> None:
    with pytest.raises(m.LocalProtocolError, match="input_kinds must be an InputRegistry"):
        m.Connection(m.SERVER, input_kinds=["confirmation/ask"])  # type: ignore[arg-type]
