"""The request records of ``mrtr_core/_connection/_requests.py``: kinds, the incoming lifecycle
table walked pair by pair, and the connection living through it.

Part 1 drives :class:`Incoming` over EVERY (state, input) pair of
``INCOMING_LIFECYCLE``: a pair in the table moves to its target; a missing
pair is refused (``allows`` is false, and ``move`` cannot apply it).  Part 2
drives real connections through each way a request of the peer's ends.
Part 3 checks the source: no state is moved outside its own table.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from support.pairing import drain, handshake

import mrtr_core._connection as connection_package
from mrtr_core import (
    CLIENT,
    SERVER,
    Connection,
    InvalidMessage,
    LocalProtocolError,
    LogMessage,
    Notification,
    Progress,
    Request,
    RequestCancelled,
    ResultResponse,
    error_response,
)
from mrtr_core._connection._requests import (
    INCOMING_LIFECYCLE,
    BoundedSet,
    Incoming,
    IncomingInput,
    IncomingKind,
    IncomingState,
    OutgoingKind,
    OutgoingTable,
)
from mrtr_core._errors import INVALID_REQUEST
from mrtr_core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

IS = IncomingState
II = IncomingInput
MODERN = "2026-07-28"
META = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}

#: Every (state, input) pair: 4 x 5.
ALL_PAIRS = [
    pytest.param(state, given, id=f"{state.value}-{given.value}")
    for state in IncomingState
    for given in IncomingInput
]


# --- Part 1: the lifecycle table, pair by pair ----------------------------------------------


@pytest.mark.parametrize(("state", "given"), ALL_PAIRS)
def test_every_pair_of_the_lifecycle(state: IS, given: II) -> None:
    incoming = Incoming(IncomingKind.APP, "tools/call")
    assert incoming.state is IS.HANDED_OUT  # where every request starts
    incoming.state = state
    target = INCOMING_LIFECYCLE.get((state, given))
    assert incoming.allows(given) is (target is not None)
    if target is not None:
        incoming.move(given)
        assert incoming.state is target
    else:
        with pytest.raises(KeyError):
            incoming.move(given)
        assert incoming.state is state


def test_the_walk_covers_every_pair() -> None:
    assert len(ALL_PAIRS) == len(IncomingState) * len(IncomingInput) == 20


def test_answered_is_final_and_every_other_state_can_reach_it() -> None:
    assert not any(state is IS.ANSWERED for state, _ in INCOMING_LIFECYCLE)
    for state in (IS.HANDED_OUT, IS.CANCELLED, IS.REFUSED):
        assert any(
            source is state and target is IS.ANSWERED
            for (source, _), target in INCOMING_LIFECYCLE.items()
        ), state


def test_the_lifecycle_rules() -> None:
    # Only a request that is still handed out can be cancelled, or get progress and logs.
    assert {s for s, i in INCOMING_LIFECYCLE if i is II.PEER_CANCELLED} == {IS.HANDED_OUT}
    assert {s for s, i in INCOMING_LIFECYCLE if i is II.SEND_NOTICE} == {IS.HANDED_OUT}
    # A refused request owes exactly its error reply.
    assert {i for s, i in INCOMING_LIFECYCLE if s is IS.REFUSED} == {II.SEND_ERROR}
    assert INCOMING_LIFECYCLE[(IS.HANDED_OUT, II.SEND_NOTICE)] is IS.HANDED_OUT
    assert INCOMING_LIFECYCLE[(IS.HANDED_OUT, II.PEER_CANCELLED)] is IS.CANCELLED


def test_kinds_are_enums_with_their_wire_names() -> None:
    assert [k.value for k in OutgoingKind] == ["plain", "leg", "discover", "initialize"]
    assert [k.value for k in IncomingKind] == ["app", "auto", "initialize"]


def test_bounded_set_forgets_the_oldest() -> None:
    seen = BoundedSet(2)
    for rid in (1, "two", 3):
        seen.add(rid)
    assert 1 not in seen and "two" in seen and 3 in seen
    assert seen.discard(3) and not seen.discard(3)


def test_outgoing_table_skips_ids_in_use_or_abandoned() -> None:
    table = OutgoingTable(max_outgoing=2, max_finished_ids=4)
    table.add(1, OutgoingKind.PLAIN, "tools/list")
    table.abandon(2)
    assert table.new_id() == 3
    table.add(3, OutgoingKind.PLAIN, "tools/list")
    with pytest.raises(LocalProtocolError, match="max_outgoing=2"):
        table.check_room()
    table.abandon(1)
    assert list(table.requests) == [3] and 1 in table.finished
    table.check_room()


# --- Part 2: the connection follows the lifecycle --------------------------------------------


def _server() -> Connection:
    return Connection(SERVER)


def _receive(server: Connection, rid: Any, method: str = "tools/call", **meta: Any) -> Any:
    params = {"name": "t", "_meta": {**META, **meta}}
    line = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    server.receive_data(json.dumps(line).encode() + b"\n")
    (event,) = drain(server)
    return event


def _state(conn: Connection, rid: Any) -> IncomingState | None:
    incoming = conn._peer.requests.get(rid)
    return None if incoming is None else incoming.state


@pytest.mark.parametrize("answer", ["result", "error"])
def test_handed_out_then_answered(answer: str) -> None:
    server = _server()
    _receive(server, 1, progressToken="p")
    assert _state(server, 1) is IS.HANDED_OUT
    assert server.send(Progress(request_id=1, progress=1))  # (HANDED_OUT, SEND_NOTICE)
    assert _state(server, 1) is IS.HANDED_OUT
    if answer == "result":
        assert server.send(ResultResponse(id=1, result={"content": []}))
    else:
        assert server.send(error_response(1, LocalProtocolError("no")))
    assert _state(server, 1) is None  # ANSWERED: the record and its id are released
    with pytest.raises(LocalProtocolError, match="no request 1"):
        server.send(ResultResponse(id=1, result={"content": []}))


@pytest.mark.parametrize("how", ["notification", "response stream closed"])
def test_handed_out_then_cancelled_then_answered_with_nothing(how: str) -> None:
    server = _server()
    _receive(server, 1, progressToken="p", **{"io.modelcontextprotocol/logLevel": "debug"})
    if how == "notification":
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        server.receive_data(json.dumps(note).encode() + b"\n")
    else:
        server.response_stream_closed(1)
    (cancelled,) = drain(server)
    assert isinstance(cancelled, RequestCancelled)
    assert _state(server, 1) is IS.CANCELLED
    server.response_stream_closed(1)  # (CANCELLED, PEER_CANCELLED) is refused: ignored
    assert drain(server) == []
    assert server.send(Progress(request_id=1, progress=1)) == b""  # no SEND_NOTICE pair
    assert server.send(LogMessage(request_id=1, level="error", data="x")) == b""
    assert _state(server, 1) is IS.CANCELLED
    assert server.send(ResultResponse(id=1, result={"content": []})) == b""
    assert _state(server, 1) is None


def test_refused_then_its_error_reply_once() -> None:
    server = _server()
    line = {"jsonrpc": "1.0", "id": 7, "method": "tools/list"}
    server.receive_data(json.dumps(line).encode() + b"\n")
    (refused,) = drain(server)
    assert isinstance(refused, InvalidMessage) and refused.reply is not None
    assert _state(server, 7) is None  # never handed out: owed an error reply only
    assert server.send(refused.reply)  # (REFUSED, SEND_ERROR) -> ANSWERED
    with pytest.raises(LocalProtocolError):
        server.send(refused.reply)


def test_refused_cannot_be_answered_with_a_result() -> None:
    server = _server()
    line = {"jsonrpc": "1.0", "id": 7, "method": "tools/list"}
    server.receive_data(json.dumps(line).encode() + b"\n")
    (refused,) = drain(server)
    assert refused.error.code == INVALID_REQUEST
    with pytest.raises(LocalProtocolError):  # (REFUSED, SEND_RESULT) is missing
        server.send(ResultResponse(id=7, result={}))


@pytest.mark.parametrize("cancelled_first", [False, True])
def test_a_2026_request_ended_by_the_server(cancelled_first: bool) -> None:
    server = _server()
    _receive(server, "listen", "subscriptions/listen")
    if cancelled_first:
        server.response_stream_closed("listen")
        drain(server)
    note = Notification(method="notifications/cancelled", params={"requestId": "listen"})
    assert server.send(note)  # (HANDED_OUT or CANCELLED, END) -> ANSWERED
    assert _state(server, "listen") is None


def test_auto_replies_are_not_cancelled_by_the_peer() -> None:
    server = _server()
    server.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    (auto,) = drain(server)
    server.response_stream_closed(1)  # an AUTO request: the app never saw it
    assert drain(server) == []
    assert server.send(auto.reply) and _state(server, 1) is None


def test_a_client_answers_a_2025_servers_request_through_the_same_table() -> None:
    client = Connection(CLIENT, era="legacy", capabilities={"roots": {}})
    server = Connection(SERVER)
    handshake(client, server)
    client.receive_data(server.send(Request(id=server.new_request_id(), method="roots/list")))
    (ask,) = drain(client)
    assert _state(client, ask.id) is IS.HANDED_OUT
    assert client.send(ResultResponse(id=ask.id, result={"roots": []}))
    assert _state(client, ask.id) is None


# --- Part 3: no state moves outside its table ---------------------------------------------------

CONNECTION_DIR = Path(connection_package.__file__).resolve().parent
TABLE_OWNERS = {"_session.py", "_requests.py"}


@pytest.mark.parametrize(
    "path",
    sorted(p for p in CONNECTION_DIR.glob("*.py") if p.name not in TABLE_OWNERS),
    ids=lambda p: p.name,
)
def test_only_the_table_modules_assign_a_state(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, (ast.AugAssign, ast.AnnAssign))
            else []
        )
        for target in targets:
            assert not (isinstance(target, ast.Attribute) and target.attr == "state"), (
                f"{path.name}:{node.lineno} assigns .state outside its table"
            )
