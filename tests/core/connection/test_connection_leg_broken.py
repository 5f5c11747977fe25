"""``leg_broken`` only breaks a leg that is on the wire.

Issue 11: ``leg_broken(call)`` while no leg of the call was on the wire made
the engine re-issue anyway, so two legs of one call went out, and the answer
to the orphaned one raised ``KeyError`` from ``next_event`` once the call had
ended.  Now it is a ``LocalProtocolError`` that changes nothing (the engine's
table allows ``leg_broken`` only while a leg is out; the connection knows
whether that leg was sent), and a call never has two legs in flight.
"""

from __future__ import annotations

import json

import pytest
from support.pairing import drain, modern_pair

from mrtr_core import (
    CLIENT,
    NEED_DATA,
    CallEvent,
    Connection,
    InvalidMessage,
    LocalProtocolError,
    ResultResponse,
)
from mrtr_core._errors import INVALID_REQUEST
from mrtr_core.engine import (
    CancelLeg,
    DispatchInput,
    Done,
    RoundStarted,
    SendRequest,
    SendRetry,
    TimedOut,
)

pytestmark = pytest.mark.usefixtures("wire_variant")

NO_LEG = "has no leg on the wire to break"


def client() -> Connection:
    return Connection(CLIENT, era="modern", capabilities={"elicitation": {}})


def answer(rid: object, result: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n"


def test_a_leg_handed_out_but_not_sent_cannot_break() -> None:
    conn = client()
    call = conn.call("tools/call", {"name": "t"})
    with pytest.raises(LocalProtocolError, match=NO_LEG):
        conn.leg_broken(call, now=0.5)  # the leg is still inside the engine
    (leg,) = drain(conn)
    assert isinstance(leg.event, SendRequest) and not leg.event.reissue
    with pytest.raises(LocalProtocolError, match=NO_LEG):
        conn.leg_broken(call, now=1.0)  # handed out, not sent
    assert drain(conn) == []  # no second leg queued
    conn.send(leg)
    (rid,) = conn.outstanding
    conn.receive_data(answer(rid, {"content": []}))
    (done,) = drain(conn)
    assert done == CallEvent(call=call, event=Done(result={"content": []}))
    assert conn.outstanding == ()


def test_the_issue_reproduction_sends_one_leg_and_an_unknown_id_is_reported() -> None:
    # The old sequence: leg handed out, leg_broken, the leg sent, then whatever came next.
    conn = client()
    call = conn.call("tools/call", {"name": "t"})
    (leg,) = drain(conn)
    with pytest.raises(LocalProtocolError):
        conn.leg_broken(call)
    conn.send(leg)
    assert drain(conn) == []  # (it used to hand out a second leg here)
    (rid,) = conn.outstanding
    conn.receive_data(answer(rid, {"content": []}))
    # An answer to an id we never sent is what any unknown id is: reported, not a KeyError.
    conn.receive_data(answer(rid + 1, {"content": []}))
    done, bogus = drain(conn)
    assert isinstance(done.event, Done)
    assert isinstance(bogus, InvalidMessage) and bogus.error.code == INVALID_REQUEST
    assert bogus.error.request_id == rid + 1
    assert conn.next_event() is NEED_DATA  # the connection goes on


def test_a_broken_leg_is_reissued_once_and_the_reissue_must_be_sent_before_it_breaks() -> None:
    client_conn, server = modern_pair()
    call = client_conn.call("tools/call", {"name": "t"})
    (first,) = drain(client_conn)
    server.receive_data(client_conn.send(first))
    client_conn.leg_broken(call, now=1.0)
    (again,) = drain(client_conn)
    assert isinstance(again.event, SendRequest) and again.event.reissue
    with pytest.raises(LocalProtocolError, match=NO_LEG):
        client_conn.leg_broken(call, now=1.5)  # the re-issue is not on the wire yet
    assert drain(client_conn) == []
    server.receive_data(client_conn.send(again))
    assert len(client_conn.outstanding) == 1
    client_conn.leg_broken(call, now=2.0)  # now it is, and may break in turn
    (third,) = drain(client_conn)
    assert isinstance(third.event, SendRequest) and third.event.leg == 3


def test_no_leg_is_on_the_wire_while_the_call_waits_for_input() -> None:
    conn = client()
    call = conn.call("tools/call", {"name": "t"})
    (leg,) = drain(conn)
    conn.send(leg)
    (rid,) = conn.outstanding
    ask = {
        "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": {"type": "object"}},
    }
    conn.receive_data(answer(rid, {"resultType": "input_required", "inputRequests": {"k": ask}}))
    started, dispatch = drain(conn)
    assert isinstance(started.event, RoundStarted) and isinstance(dispatch.event, DispatchInput)
    with pytest.raises(LocalProtocolError, match=NO_LEG):
        conn.leg_broken(call)
    conn.provide(call, "k", {"action": "decline"})  # the call is unharmed
    (retry,) = drain(conn)
    assert isinstance(retry.event, SendRetry) and not retry.event.reissue


def test_a_timed_out_leg_cannot_break_and_its_cancel_still_names_it() -> None:
    conn = client()
    call = conn.call("tools/call", {"name": "t"}, leg_timeout=5.0)
    (leg,) = drain(conn)
    conn.send(leg)
    (rid,) = conn.outstanding
    conn.leg_timed_out(call, now=5.0)
    with pytest.raises(LocalProtocolError, match=NO_LEG):
        conn.leg_broken(call, now=5.5)  # the flow is over; its CancelLeg is not out yet
    cancel, timed_out = drain(conn)
    assert cancel == CallEvent(call=call, event=CancelLeg(leg=1))
    assert json.loads(conn.send(cancel))["params"] == {"requestId": rid}
    assert isinstance(timed_out.event, TimedOut)
    with pytest.raises(LocalProtocolError, match="no call"):
        conn.leg_broken(call)  # ended


def test_an_answer_for_a_leg_of_an_ended_call_is_dropped_not_a_key_error() -> None:
    client_conn, server = modern_pair()
    call = client_conn.call("tools/call", {"name": "t"})
    (first,) = drain(client_conn)
    server.receive_data(client_conn.send(first))
    (lost,) = drain(server)
    client_conn.leg_broken(call)
    (again,) = drain(client_conn)
    server.receive_data(client_conn.send(again))
    (request,) = drain(server)
    client_conn.receive_data(server.send(ResultResponse(id=request.id, result={"content": []})))
    (done,) = drain(client_conn)
    assert isinstance(done.event, Done)
    # The broken leg's answer after its call has ended: a late answer, dropped.
    client_conn.receive_data(server.send(ResultResponse(id=lost.id, result={"content": [1]})))
    assert drain(client_conn) == []


def _killed_with_a_leg_on_the_wire() -> tuple[Connection, object]:
    """A call whose leg is on the wire when misuse kills its engine (ERROR)."""
    conn = client()
    call = conn.call("tools/call", {"name": "t"})
    (leg,) = drain(conn)
    conn.send(leg)
    (rid,) = conn.outstanding
    with pytest.raises(LocalProtocolError):
        conn.provide(call, "nobody-asked", {"action": "accept"})  # no input is pending
    return conn, rid


def test_the_answer_to_a_leg_of_a_call_killed_by_misuse_is_dropped() -> None:
    conn, rid = _killed_with_a_leg_on_the_wire()
    conn.receive_data(answer(rid, {"content": []}))
    assert [e for e in drain(conn) if isinstance(e, CallEvent)] == []


def test_a_dropped_leg_of_a_call_killed_by_misuse_is_not_reissued() -> None:
    conn, rid = _killed_with_a_leg_on_the_wire()
    cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    cancelled["params"] = {"requestId": rid, "reason": "server shutting down"}
    conn.receive_data(json.dumps(cancelled).encode() + b"\n")
    assert [e for e in drain(conn) if isinstance(e, CallEvent)] == []
