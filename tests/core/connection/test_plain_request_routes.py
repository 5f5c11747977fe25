"""A plain request's progress route lives exactly as long as the request, whatever token
the app picked; a cancellation names a request id or is refused."""

from __future__ import annotations

from typing import Any

import pytest

import mrtr_core as m

INFO = {"name": "me", "version": "1"}


def client_with_plain_request(token: Any) -> tuple[m.Connection, int]:
    client = m.Connection(m.CLIENT, era="modern", info=INFO)
    rid = client.new_request_id()
    params = {"name": "slow", "_meta": {"progressToken": token}}
    client.send(m.Request(id=rid, method="tools/list", params=params))
    return client, rid


def progress(token: Any) -> bytes:
    return (
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
        b'{"progressToken":%s,"progress":1}}\n' % (b'"%s"' % token.encode())
    )


def test_progress_for_a_token_other_than_the_id_is_routed_then_forgotten() -> None:
    client, rid = client_with_plain_request("tok-1")
    client.receive_data(progress("tok-1"))
    assert client.next_event() == m.Progress(request_id=rid, progress=1)
    client.receive_data(b'{"jsonrpc":"2.0","id":%d,"result":{"tools":[]}}\n' % rid)
    assert isinstance(client.next_event(), m.ResultResponse)
    # Regression: the route was keyed by the token but dropped by the id, so it leaked
    # and late progress for an answered request still came out.
    client.receive_data(progress("tok-1"))
    assert client.next_event() is m.NEED_DATA


@pytest.mark.parametrize("who", ["we", "the server"])
def test_a_cancelled_plain_request_forgets_its_route(who: str) -> None:
    client, rid = client_with_plain_request("tok-2")
    if who == "we":
        note = m.Notification(method="notifications/cancelled", params={"requestId": rid})
        client.send(note)
    else:
        client.receive_data(
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}\n'
            % rid
        )
        assert client.next_event() == m.RequestCancelled(request_id=rid)
    client.receive_data(progress("tok-2"))
    assert client.next_event() is m.NEED_DATA


@pytest.mark.parametrize("bad", [[1], {"id": 1}, None, True, 1.5])
def test_cancelling_something_that_is_not_a_request_id_is_misuse(bad: Any) -> None:
    # Regression: an unhashable requestId escaped the core as a TypeError.
    client, _ = client_with_plain_request("tok-3")
    note = m.Notification(method="notifications/cancelled", params={"requestId": bad})
    with pytest.raises(m.LocalProtocolError, match="needs the requestId of a request"):
        client.send(note)
