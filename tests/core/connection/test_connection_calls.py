"""Call legs on the connection: broken streams, cancel bookkeeping, server-side cancellation."""

from __future__ import annotations

import json

import pytest
from support.pairing import drain, modern_pair

from mrtr_core import (
    CLIENT,
    SERVER,
    CallEvent,
    Connection,
    LocalProtocolError,
    Notification,
    Request,
    RequestCancelled,
    ResultResponse,
    SessionOpened,
)
from mrtr_core.engine import Cancelled, CancelLeg, Done, SendRequest, SendRetry

pytestmark = pytest.mark.usefixtures("wire_variant")


def _answer(rid: int, result: str = "{}") -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"result":%s}\n' % (rid, result.encode())


def test_a_broken_leg_is_reissued_with_a_new_id_and_its_late_answer_is_dropped() -> None:
    client, server = modern_pair()
    call = client.call("tools/call", {"name": "slow"})
    (first,) = drain(client)
    server.receive_data(client.send(first))
    (lost,) = drain(server)
    assert isinstance(lost, Request)

    client.leg_broken(call, now=1.0)  # e.g. the HTTP response stream closed early
    (again,) = drain(client)
    assert isinstance(again.event, SendRequest) and again.event.reissue
    server.receive_data(client.send(again))
    (request,) = drain(server)
    assert request.id != lost.id and request.params == lost.params

    client.receive_data(server.send(ResultResponse(id=lost.id, result={"content": []})))
    assert drain(client) == []  # the broken leg's answer, if it ever comes, is not wanted
    client.receive_data(server.send(ResultResponse(id=request.id, result={"content": [1]})))
    (done,) = drain(client)
    assert isinstance(done.event, Done) and done.event.result["content"] == [1]


def test_cancel_targets_are_bounded_by_max_finished_ids() -> None:
    client = Connection(CLIENT, era="modern", max_finished_ids=1)
    calls = [client.call("tools/call", {"name": f"t{i}"}) for i in range(2)]
    for event in drain(client):
        client.send(event)
    legs = client.outstanding
    for call in calls:
        client.cancel(call)
    events = drain(client)
    cancels = [e for e in events if isinstance(e, CallEvent) and isinstance(e.event, CancelLeg)]
    assert [e.call for e in cancels] == calls
    assert [e.event for e in events if e not in cancels] == [Cancelled(), Cancelled()]
    # Only the newest unsent cancellation is remembered; the older one is forgotten.
    assert client.send(cancels[0]) == b""
    note = json.loads(client.send(cancels[1]))
    assert note == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": legs[1]},
    }
    assert client.send(cancels[1]) == b""  # sent once


def test_a_server_cancelling_a_plain_request_ends_it_for_the_client() -> None:
    client, _ = modern_pair()
    rid = client.new_request_id()
    client.send(Request(id=rid, method="subscriptions/listen", params={}))
    client.receive_data(
        b'{"jsonrpc":"2.0","method":"notifications/cancelled",'
        b'"params":{"requestId":%d,"reason":"server shutting down"}}\n' % rid
    )
    assert drain(client) == [RequestCancelled(request_id=rid, reason="server shutting down")]
    assert client.outstanding == ()
    client.receive_data(_answer(rid))
    assert drain(client) == []  # a late answer to it is dropped, not reported as bogus


def test_a_server_cancelling_a_call_leg_makes_the_client_reissue_it() -> None:
    client, _ = modern_pair()
    call = client.call("tools/call", {"name": "t"})
    (send,) = drain(client)
    client.send(send)
    (leg,) = client.outstanding
    client.receive_data(
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}\n' % leg
    )
    (again,) = drain(client)
    assert again.call == call and isinstance(again.event, SendRequest) and again.event.reissue


def test_a_server_ends_a_listen_stream_with_notifications_cancelled() -> None:
    client, server = modern_pair()
    rid = client.new_request_id()
    server.receive_data(client.send(Request(id=rid, method="subscriptions/listen", params={})))
    (listen,) = drain(server)
    assert isinstance(listen, Request)
    note = Notification(method="notifications/cancelled", params={"requestId": rid})
    data = server.send(note)
    client.receive_data(data)
    assert drain(client) == [RequestCancelled(request_id=rid, reason=None)]
    # The listen request is over on the server too: no answer may follow.
    with pytest.raises(LocalProtocolError, match="no request"):
        server.send(ResultResponse(id=rid, result={}))
    # For an id it does not know, the notification still goes out and changes nothing.
    assert Connection(SERVER).send(note) == data


def test_a_paced_retry_sent_after_its_call_was_cancelled_writes_nothing() -> None:
    client, _ = modern_pair()
    call = client.call("tools/call", {"name": "busy"})
    (first,) = drain(client)
    client.send(first)
    (leg,) = client.outstanding
    client.receive_data(_answer(leg, '{"resultType":"input_required","requestState":"later"}'))
    events = drain(client)
    retry = events[-1]
    assert isinstance(retry.event, SendRetry) and retry.event.delay > 0  # the app sleeps now
    client.cancel(call)  # ... and the user gives up meanwhile
    assert [e.event for e in drain(client)] == [CancelLeg(leg=2), Cancelled()]
    assert client.send(retry) == b""  # the sleeping driver wakes up: nothing goes out
    assert client.outstanding == ()


def test_a_call_cancelled_before_its_first_leg_comes_out_never_sends_it() -> None:
    client, _ = modern_pair()
    call = client.call("tools/call", {"name": "x"})
    client.cancel(call)
    events = drain(client)
    assert [e.event for e in events] == [CancelLeg(leg=1), Cancelled()]
    assert [client.send(e) for e in events[:1]] == [b""]


def test_a_closed_response_stream_cancels_the_request_for_the_server_app() -> None:
    client = Connection(CLIENT, era="modern", framing="messages")
    server = Connection(SERVER, framing="messages")
    rid = client.new_request_id()
    server.receive_data(client.send(Request(id=rid, method="tools/list", params={})))
    (request,) = drain(server)
    server.response_stream_closed(request.id)  # the HTTP client went away
    server.response_stream_closed(request.id)  # reported once only
    server.response_stream_closed("never-seen")  # unknown ids are ignored
    assert drain(server) == [RequestCancelled(request_id=rid, reason="response stream closed")]
    assert server.send(ResultResponse(id=rid, result={"tools": []})) == b""
    with pytest.raises(LocalProtocolError):  # its place is released by that send
        server.send(ResultResponse(id=rid, result={"tools": []}))


def test_a_2025_server_cancelling_its_own_answered_request_leaves_the_clients_alone() -> None:
    # Request ids of each direction share one number space: a 2025-era server's
    # notifications/cancelled names its own request, never the client's request 2.
    client = Connection(CLIENT, era="legacy", capabilities={"roots": {}})
    server = Connection(SERVER)
    for _ in range(2):
        for event in drain(client):
            server.receive_data(client.send(event))
        for event in drain(server):
            if not isinstance(event, SessionOpened):
                client.receive_data(server.send(event))
    client.send(Request(id=client.new_request_id(), method="tools/call", params={}))
    server.receive_data(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}\n')
    (call,) = drain(server)
    ask = Request(id=server.new_request_id(), method="roots/list")
    assert ask.id == 1
    server.send(ask)
    server.send(Request(id=2, method="roots/list"))
    server.receive_data(b'{"jsonrpc":"2.0","id":2,"result":{"roots":[]}}\n')
    assert drain(server) == [ResultResponse(id=2, result={"roots": []})]
    server.send(Notification(method="notifications/cancelled", params={"requestId": 2}))
    assert server.send(ResultResponse(id=call.id, result={"content": []}))  # still waiting
