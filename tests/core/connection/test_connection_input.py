"""Bad input and bounds: what a Connection does with bytes it cannot accept.

Every reader test feeds its bytes the three ways of ``tests/pairing.py``
(whole, byte by byte, and with an incomplete next message behind it), so
nothing depends on where the reads happen to split.  The connection must
report each bad message once, answer it when (and only when) it may have been
a request, and keep serving the stream.  A hypothesis test at the end throws
arbitrary bytes at a server.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.budget import examples
from support.pairing import ALL_CAPS, CLIENT_INFO, FEED_MODES, SERVER_INFO, drain, feed, handshake

from mrtr_core import (
    CLIENT,
    NEED_DATA,
    SERVER,
    AutoReply,
    CallEvent,
    Connection,
    ConnectionClosed,
    ErrorObject,
    ErrorResponse,
    HandshakeStep,
    InvalidMessage,
    LocalProtocolError,
    LogMessage,
    Notification,
    Progress,
    RemoteProtocolError,
    Request,
    RequestCancelled,
    ResultResponse,
    SessionFailed,
    SessionOpened,
    SessionState,
)
from mrtr_core._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from mrtr_core.engine import (
    CancelInputs,
    Cancelled,
    CancelLeg,
    DispatchInput,
    Done,
    Failed,
    RoundStarted,
    SendRequest,
    TimedOut,
)
from mrtr_core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, Codec, ElicitFormRequest

pytestmark = pytest.mark.usefixtures("wire_variant")

MODERN = "2026-07-28"
BACKENDS = ("stdlib", "orjson")


def raw(message: Any) -> bytes:
    """A hand-written peer's line."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def modern_request(rid: Any, method: str = "tools/list", **params: Any) -> dict[str, Any]:
    meta = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": meta}}


def server(**options: Any) -> Connection:
    return Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}}, **options)


def modern_client(**options: Any) -> Connection:
    return Connection(CLIENT, era="modern", info=CLIENT_INFO, capabilities=ALL_CAPS, **options)


def legacy_pair(**client_options: Any) -> tuple[Connection, Connection]:
    client = Connection(
        CLIENT, era="legacy", info=CLIENT_INFO, capabilities=ALL_CAPS, **client_options
    )
    srv = server()
    handshake(client, srv)
    assert client.session_state is SessionState.READY and srv.session_state is SessionState.READY
    return client, srv


def one_invalid(events: list[Any]) -> InvalidMessage:
    assert len(events) == 1 and isinstance(events[0], InvalidMessage), events
    invalid = events[0]
    assert isinstance(invalid.error, RemoteProtocolError)
    return invalid


def wire_json(conn: Connection, event: Any) -> dict[str, Any]:
    data = conn.send(event)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    decoded = json.loads(data)
    assert isinstance(decoded, dict)
    return decoded


def assert_reply_without_id(conn: Connection, invalid: InvalidMessage, code: int) -> None:
    """A server's reply for a message whose id could not be used: no "id" key at all."""
    assert invalid.error.code == code
    assert isinstance(invalid.reply, ErrorResponse)
    assert invalid.reply.id is None and invalid.reply.error.code == code
    data = conn.send(invalid.reply)
    decoded = json.loads(data)
    assert "id" not in decoded and b'"id"' not in data
    assert decoded["error"]["code"] == code


def assert_served(conn: Connection, mode: str, rid: Any = "next") -> None:
    """A good request after the bad input is handed out as usual."""
    events = feed(conn, raw(modern_request(rid)), mode)
    assert len(events) == 1 and isinstance(events[0], Request) and events[0].id == rid, events


# --- parse errors ---------------------------------------------------------------------------

GARBAGE = [
    b"not json",
    b'{"jsonrpc":"2.0","id":1,"method":"ping"',  # cut short
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}}',  # trailing garbage
    b"{'jsonrpc':'2.0'}",
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1e400}}',
    b'{"jsonrpc":"2.0","id":1}{"jsonrpc":"2.0","id":2}',
    b"[" * 5000 + b"]" * 5000,  # nesting deep enough to break either parser
    b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}',  # invalid UTF-8
    b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}',  # overlong encoding
    b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',  # an encoded surrogate
    b'{"jsonrpc":"2.0","id":1,"method":"caf\xe9"}',  # latin-1, not UTF-8
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("line", GARBAGE, ids=[f"garbage{i}" for i in range(len(GARBAGE))])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_unparseable_line_is_a_parse_error_answered_without_id(
    mode: str, line: bytes, backend: Any
) -> None:
    conn = server(json=backend)
    invalid = one_invalid(feed(conn, line + b"\n", mode))
    assert_reply_without_id(conn, invalid, PARSE_ERROR)
    assert invalid.error.request_id is None
    assert_served(conn, mode)


@pytest.mark.parametrize("mode", FEED_MODES)
def test_client_reports_unparseable_input_and_never_answers_it(mode: str) -> None:
    client = modern_client()
    invalid = one_invalid(feed(client, b"garbage\n", mode))
    assert invalid.error.code == PARSE_ERROR and invalid.reply is None
    events = feed(client, raw({"jsonrpc": "2.0", "method": "notifications/x"}), mode)
    assert events == [Notification(method="notifications/x")]


# --- invalid JSON-RPC -----------------------------------------------------------------------

NOT_A_MESSAGE = [
    [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],  # a batch
    [],
    42,
    "a string",
    None,
    True,
]


@pytest.mark.parametrize("value", NOT_A_MESSAGE, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("mode", FEED_MODES)
def test_batch_or_non_object_is_an_invalid_request_answered_without_id(
    mode: str, value: Any
) -> None:
    conn = server()
    invalid = one_invalid(feed(conn, raw(value), mode))
    assert_reply_without_id(conn, invalid, INVALID_REQUEST)
    assert_served(conn, mode)


def test_a_batch_is_named_as_such() -> None:
    conn = server()
    invalid = one_invalid(feed(conn, raw([modern_request(1)]), "whole"))
    assert "batch" in invalid.error.message


BAD_REQUESTS = [
    ({"jsonrpc": "1.0", "id": 3, "method": "tools/list"}, INVALID_REQUEST),
    ({"id": 3, "method": "tools/list"}, INVALID_REQUEST),  # no jsonrpc
    ({"jsonrpc": 2.0, "id": 3, "method": "tools/list"}, INVALID_REQUEST),
    ({"jsonrpc": "2.0", "id": 3, "method": 42}, INVALID_REQUEST),
    ({"jsonrpc": "2.0", "id": 3, "method": None}, INVALID_REQUEST),
    ({"jsonrpc": "2.0", "id": 3, "method": "x", "result": {}}, INVALID_REQUEST),
    ({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": [1]}, INVALID_PARAMS),
    ({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": "p"}, INVALID_PARAMS),
    ({"jsonrpc": "2.0", "id": 3}, INVALID_REQUEST),  # neither method, result nor error
]


@pytest.mark.parametrize(("message", "code"), BAD_REQUESTS)
@pytest.mark.parametrize("mode", FEED_MODES)
@pytest.mark.parametrize("rid", [3, "three"])
def test_invalid_request_with_a_readable_id_is_answered_under_that_id(
    mode: str, message: dict[str, Any], code: int, rid: Any
) -> None:
    conn = server()
    invalid = one_invalid(feed(conn, raw({**message, "id": rid}), mode))
    assert invalid.error.code == code and invalid.error.request_id == rid
    assert invalid.reply == ErrorResponse(
        id=rid, error=ErrorObject(code=code, message=invalid.error.message)
    )
    assert wire_json(conn, invalid.reply)["id"] == rid
    with pytest.raises(LocalProtocolError):
        conn.send(invalid.reply)  # owed once, not twice
    assert_served(conn, mode)


@pytest.mark.parametrize("bad_id", [1.5, True, None, [1], {"a": 1}])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_request_with_an_unusable_id_is_answered_without_id(mode: str, bad_id: Any) -> None:
    conn = server()
    message = {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"}
    invalid = one_invalid(feed(conn, raw(message), mode))
    assert_reply_without_id(conn, invalid, INVALID_REQUEST)
    assert_served(conn, mode)


@pytest.mark.parametrize("mode", FEED_MODES)
def test_invalid_request_reusing_an_outstanding_id_is_answered_without_id(mode: str) -> None:
    conn = server()
    (request,) = feed(conn, raw(modern_request(7)), mode)
    assert isinstance(request, Request)
    invalid = one_invalid(feed(conn, raw({"jsonrpc": "2.0", "id": 7, "method": 42}), mode))
    assert invalid.error.request_id == 7
    # Answering under id 7 would answer the real request 7, which the client still awaits.
    assert_reply_without_id(conn, invalid, INVALID_REQUEST)
    # Request 7 is untouched and is answered normally.
    assert conn.request_info(7).method == "tools/list"
    assert wire_json(conn, ResultResponse(id=7, result={"tools": []}))["id"] == 7


@pytest.mark.parametrize("mode", FEED_MODES)
def test_invalid_request_reusing_an_id_whose_error_is_still_owed_is_answered_without_id(
    mode: str,
) -> None:
    conn = server()
    first = one_invalid(feed(conn, raw({"jsonrpc": "2.0", "id": 9, "method": 1}), mode))
    assert first.reply is not None and first.reply.id == 9
    second = one_invalid(feed(conn, raw({"jsonrpc": "2.0", "id": 9, "method": 2}), mode))
    assert second.reply is not None and second.reply.id is None
    assert wire_json(conn, first.reply)["id"] == 9
    assert "id" not in wire_json(conn, second.reply)


MALFORMED_NOT_REQUESTS = [
    {"jsonrpc": "2.0", "id": 1, "result": "not an object"},
    {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}},
    {"jsonrpc": "2.0", "result": {}},  # a result without id
    {"jsonrpc": "2.0", "id": 1.5, "result": {}},
    {"jsonrpc": "2.0", "id": 1, "error": "bad"},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": 1}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}},
    {"jsonrpc": "2.0", "id": [1], "error": {"code": 1, "message": "m"}},
    {"jsonrpc": "1.0", "id": 1, "result": {}},
    {"jsonrpc": "2.0", "method": 5},  # a notification
    {"jsonrpc": "2.0", "method": "notifications/x", "params": [1]},
    {"jsonrpc": "1.0", "method": "notifications/x"},
    {"method": "notifications/x"},
]


@pytest.mark.parametrize("role", [SERVER, CLIENT], ids=["server", "client"])
@pytest.mark.parametrize("message", MALFORMED_NOT_REQUESTS)
@pytest.mark.parametrize("mode", FEED_MODES)
def test_malformed_response_or_notification_gets_no_reply(
    mode: str, message: dict[str, Any], role: Any
) -> None:
    conn = server() if role is SERVER else modern_client()
    invalid = one_invalid(feed(conn, raw(message), mode))
    assert invalid.reply is None
    assert invalid.error.code in (INVALID_REQUEST, INVALID_PARAMS)
    note = raw({"jsonrpc": "2.0", "method": "notifications/x"})
    assert feed(conn, note, mode) == [Notification(method="notifications/x")]


@pytest.mark.parametrize(("message", "code"), BAD_REQUESTS)
def test_client_never_answers_even_request_shaped_garbage(
    message: dict[str, Any], code: int
) -> None:
    client = modern_client()
    invalid = one_invalid(feed(client, raw(message), "whole"))
    assert invalid.error.code == code and invalid.reply is None


# --- oversize lines -------------------------------------------------------------------------

SMALL = 64  # max_message_size for the bound tests; every good line below fits
GOOD = raw({"jsonrpc": "2.0", "method": "notifications/x"})
assert len(GOOD) - 1 <= SMALL


def _padded_line(size: int) -> bytes:
    """A valid notification of exactly ``size`` bytes (without its newline)."""
    base = b'{"jsonrpc":"2.0","method":"n","params":{"p":""}}'
    assert size >= len(base)
    line = base[:-3] + b"x" * (size - len(base)) + base[-3:]
    assert len(line) == size and json.loads(line)
    return line


def _bounded_server(**options: Any) -> Connection:
    return server(max_message_size=SMALL, max_buffer_size=SMALL * 32, **options)


@pytest.mark.parametrize("size", [SMALL + 1, SMALL * 3, SMALL * 15])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_oversize_line_is_reported_once_and_the_next_line_works(mode: str, size: int) -> None:
    conn = _bounded_server()
    events = feed(conn, _padded_line(size) + b"\n" + GOOD, mode)
    invalid, note = events
    assert isinstance(invalid, InvalidMessage) and invalid.error.code == INVALID_REQUEST
    assert str(SMALL) in invalid.error.message
    assert_reply_without_id(conn, invalid, INVALID_REQUEST)
    assert note == Notification(method="notifications/x")


@pytest.mark.parametrize("chunk", [1, 7, SMALL - 1, SMALL, SMALL + 1, 100])
def test_oversize_line_arriving_in_pieces_is_reported_once(chunk: int) -> None:
    conn = _bounded_server()
    data = _padded_line(SMALL * 5) + b"\r\n" + GOOD
    events: list[Any] = []
    for i in range(0, len(data), chunk):
        conn.receive_data(data[i : i + chunk])
        events.extend(drain(conn))
    assert [type(e) for e in events] == [InvalidMessage, Notification]


def test_oversize_line_is_reported_as_soon_as_the_bound_is_passed() -> None:
    conn = _bounded_server()
    line = _padded_line(SMALL * 4)
    conn.receive_data(line[: SMALL + 1])  # no newline yet
    invalid = one_invalid(drain(conn))
    assert invalid.error.code == INVALID_REQUEST
    conn.receive_data(line[SMALL + 1 :])
    assert drain(conn) == []  # the rest is discarded quietly
    conn.receive_data(b"\n" + GOOD)
    assert drain(conn) == [Notification(method="notifications/x")]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_a_line_of_exactly_max_message_size_is_accepted(mode: str, ending: bytes) -> None:
    conn = _bounded_server()
    events = feed(conn, _padded_line(SMALL) + ending, mode)
    assert len(events) == 1 and isinstance(events[0], Notification)
    events = feed(conn, _padded_line(SMALL + 1) + ending, mode)
    assert one_invalid(events).error.code == INVALID_REQUEST


@pytest.mark.parametrize("mode", FEED_MODES)
def test_client_reports_an_oversize_line_without_reply(mode: str) -> None:
    client = modern_client(max_message_size=SMALL, max_buffer_size=SMALL * 16)
    events = feed(client, _padded_line(SMALL * 2) + b"\n" + GOOD, mode)
    assert [type(e) for e in events] == [InvalidMessage, Notification]
    assert events[0].reply is None


# --- max_buffer_size ------------------------------------------------------------------------


def test_max_buffer_size_exceeded_raises_and_loses_nothing() -> None:
    conn = server(max_message_size=SMALL, max_buffer_size=SMALL * 2)
    lines = [raw({"jsonrpc": "2.0", "method": f"notifications/{i}"}) for i in range(3)]
    assert all(len(line) <= SMALL for line in lines)
    assert sum(map(len, lines[:2])) <= SMALL * 2 < sum(map(len, lines))
    conn.receive_data(lines[0] + lines[1])
    with pytest.raises(LocalProtocolError) as exc:
        conn.receive_data(lines[2])
    assert "max_buffer_size" in exc.value.message
    # Nothing buffered was lost, and the refused chunk can be fed again once drained.
    assert [e.method for e in drain(conn)] == ["notifications/0", "notifications/1"]
    conn.receive_data(lines[2])
    assert [e.method for e in drain(conn)] == ["notifications/2"]


def test_max_buffer_size_counts_memoryview_bytes() -> None:
    conn = server(max_message_size=SMALL, max_buffer_size=SMALL * 2)
    wide = memoryview(bytes(SMALL * 2 + 4)).cast("I")  # few items, many bytes
    assert len(wide) < SMALL * 2 < wide.nbytes
    with pytest.raises(LocalProtocolError):
        conn.receive_data(wide)
    conn.receive_data(memoryview(GOOD))
    conn.receive_data(bytearray(GOOD))
    assert drain(conn) == [Notification(method="notifications/x")] * 2


def test_max_buffer_size_in_message_framing_raises_and_loses_nothing() -> None:
    conn = server(framing="messages", max_message_size=SMALL, max_buffer_size=SMALL + 10)
    first = raw({"jsonrpc": "2.0", "method": "notifications/0"}).strip()
    second = raw({"jsonrpc": "2.0", "method": "notifications/1"}).strip()
    conn.receive_data(first)
    with pytest.raises(LocalProtocolError):
        conn.receive_data(second)
    assert [e.method for e in drain(conn)] == ["notifications/0"]
    conn.receive_data(second)
    assert [e.method for e in drain(conn)] == ["notifications/1"]


# --- message framing ------------------------------------------------------------------------


def test_message_framing_each_receive_data_is_one_message() -> None:
    conn = server(framing="messages", max_message_size=SMALL * 4, max_buffer_size=SMALL * 16)
    pretty = json.dumps(modern_request("p"), indent=2).encode()
    assert b"\n" in pretty
    conn.receive_data(pretty)  # newlines inside one message are fine
    conn.receive_data(b'{"jsonrpc":"2.0","method":"notifications/x"}\n')  # a trailing one too
    conn.receive_data(b"   ")  # blank: ignored
    conn.receive_data(b"\r\n\t ")
    conn.receive_data(_padded_line(SMALL * 4 + 1))  # oversize
    conn.receive_data(b'{"jsonrpc":"2.0","id":1}{"jsonrpc":"2.0","id":2}')  # two in one
    request, note, oversize, parse = drain(conn)
    assert isinstance(request, Request) and request.id == "p"
    assert note == Notification(method="notifications/x")
    assert isinstance(oversize, InvalidMessage) and oversize.error.code == INVALID_REQUEST
    assert oversize.reply is not None and oversize.reply.id is None
    assert isinstance(parse, InvalidMessage) and parse.error.code == PARSE_ERROR
    out = conn.send(ResultResponse(id="p", result={"tools": []}))
    assert not out.endswith(b"\n") and json.loads(out)["id"] == "p"
    assert not conn.send(oversize.reply).endswith(b"\n")
    conn.receive_data(b"")
    assert drain(conn) == [ConnectionClosed()]
    with pytest.raises(LocalProtocolError):
        conn.receive_data(b"{}")


def test_message_framing_a_partial_message_is_not_completed_by_the_next() -> None:
    conn = server(framing="messages")
    line = raw(modern_request(1)).strip()
    conn.receive_data(line[:10])
    conn.receive_data(line[10:])
    first, second = drain(conn)
    assert one_invalid([first]).error.code == PARSE_ERROR
    assert one_invalid([second]).error.code == PARSE_ERROR


# --- end of stream --------------------------------------------------------------------------


@pytest.mark.parametrize("final_ending", [b"", b"\r"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_eof_hands_out_a_final_unterminated_line_then_closes_for_ever(
    mode: str, final_ending: bytes
) -> None:
    conn = server()
    assert feed(conn, GOOD, mode) == [Notification(method="notifications/x")]
    final = json.dumps(modern_request("last")).encode() + final_ending
    if mode == "bytewise":
        for i in range(len(final)):
            conn.receive_data(final[i : i + 1])
            assert conn.next_event() is NEED_DATA
    else:
        conn.receive_data(final)
        assert conn.next_event() is NEED_DATA  # not yet: its newline may still come
    conn.receive_data(b"")
    request = conn.next_event()
    assert isinstance(request, Request) and request.id == "last"
    closed = ConnectionClosed()
    assert [conn.next_event() for _ in range(3)] == [closed, closed, closed]
    assert server_can_still_answer(conn, "last")


def server_can_still_answer(conn: Connection, rid: Any) -> bool:
    return bool(conn.send(ResultResponse(id=rid, result={"tools": []})))


@pytest.mark.parametrize(
    ("final", "kind"),
    [(b"garbage", InvalidMessage), (_padded_line(SMALL * 3), InvalidMessage), (b"  \r", None)],
)
def test_eof_after_a_bad_or_blank_final_line(final: bytes, kind: Any) -> None:
    conn = _bounded_server()
    conn.receive_data(final)
    conn.receive_data(b"")
    events = drain(conn)
    expected = [kind, ConnectionClosed] if kind else [ConnectionClosed]
    assert [type(e) for e in events] == expected
    assert conn.next_event() == ConnectionClosed()


@pytest.mark.parametrize("framing", ["lines", "messages"])
@pytest.mark.parametrize("data", [b"{}", b"\n", bytearray(b"x")])
def test_receive_data_after_eof_is_misuse(framing: Any, data: bytes) -> None:
    conn = server(framing=framing)
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        conn.receive_data(data)
    assert drain(conn) == [ConnectionClosed()]


@pytest.mark.parametrize("mode", FEED_MODES)
def test_eof_fails_live_calls_first_then_lists_unanswered_plain_requests(mode: str) -> None:
    client = modern_client()
    call_sent = client.call("tools/call", {"name": "a"})
    (leg,) = drain(client)
    client.send(leg)
    call_held = client.call("tools/call", {"name": "b"})
    (held,) = drain(client)  # its leg is due but never sent
    assert isinstance(held, CallEvent) and held.call == call_held
    open_one = Request(id=client.new_request_id(), method="tools/list")
    answered = Request(id=client.new_request_id(), method="prompts/list")
    cancelled = Request(id=client.new_request_id(), method="resources/list")
    for request in (open_one, answered, cancelled):
        client.send(request)
    cancel = Notification(method="notifications/cancelled", params={"requestId": cancelled.id})
    client.send(cancel)
    # The answer arrives in the same read as the end of the stream: it is handed out first.
    events = feed(client, raw({"jsonrpc": "2.0", "id": answered.id, "result": {}}), mode)
    assert events == [ResultResponse(id=answered.id, result={})]
    client.receive_data(b"")
    events = drain(client)
    *failed, closed = events
    assert sorted(e.call for e in failed) == [call_sent, call_held]
    assert all(isinstance(e, CallEvent) and isinstance(e.event, Failed) for e in failed)
    assert closed == ConnectionClosed(unanswered=(open_one.id,))
    assert client.next_event() == closed
    with pytest.raises(LocalProtocolError):
        client.call("tools/call", {"name": "c"})


def test_eof_lists_a_legacy_servers_own_unanswered_requests() -> None:
    _, srv = legacy_pair()
    ping = Request(id=srv.new_request_id(), method="ping")
    srv.send(ping)
    srv.receive_data(b"")
    assert drain(srv) == [ConnectionClosed(unanswered=(ping.id,))]
    assert srv.session_state is SessionState.CLOSED


# --- bounds on requests in flight -----------------------------------------------------------


@pytest.mark.parametrize("mode", FEED_MODES)
def test_max_incoming_refuses_the_request_past_the_bound_until_one_is_answered(
    mode: str,
) -> None:
    conn = server(max_incoming=2)
    first, ping = feed(
        conn, raw(modern_request(1)) + raw(modern_request(2, "server/discover")), mode
    )
    assert isinstance(first, Request) and isinstance(ping, AutoReply)
    invalid = one_invalid(feed(conn, raw(modern_request(3)), mode))
    assert invalid.error.code == INTERNAL_ERROR and "max_incoming" in invalid.error.message
    assert invalid.reply is not None and invalid.reply.id == 3
    with pytest.raises(LocalProtocolError):
        conn.request_info(3)  # never handed out
    assert wire_json(conn, invalid.reply)["id"] == 3
    # Answering frees a place (an auto reply counts until it is sent).
    conn.send(ping.reply)
    (fourth,) = feed(conn, raw(modern_request(4)), mode)
    assert isinstance(fourth, Request) and fourth.id == 4
    assert one_invalid(feed(conn, raw(modern_request(5)), mode)).reply is not None
    conn.send(ResultResponse(id=1, result={"tools": []}))
    assert_served(conn, mode, rid=3)  # the refused id may come again


def test_max_outgoing_is_local_misuse_that_keeps_the_session() -> None:
    client = modern_client(max_outgoing=1)
    first = Request(id=client.new_request_id(), method="tools/list")
    client.send(first)
    second = Request(id=client.new_request_id(), method="tools/list")
    with pytest.raises(LocalProtocolError) as exc:
        client.send(second)
    assert "max_outgoing" in exc.value.message
    assert client.session_state is SessionState.MODERN
    call = client.call("tools/call", {"name": "t"})
    (leg,) = drain(client)
    with pytest.raises(LocalProtocolError):
        client.send(leg)
    assert client.outstanding == (first.id,)
    feed(client, raw({"jsonrpc": "2.0", "id": first.id, "result": {}}), "whole")
    assert client.send(leg)  # room again
    assert len(client.outstanding) == 1 and call == leg.call


def test_max_outgoing_bounds_a_legacy_servers_requests() -> None:
    bounded = Connection(SERVER, max_outgoing=1)
    client = Connection(CLIENT, era="legacy", capabilities=ALL_CAPS)
    handshake(client, bounded)
    bounded.send(Request(id=bounded.new_request_id(), method="ping"))
    with pytest.raises(LocalProtocolError):
        bounded.send(Request(id=bounded.new_request_id(), method="ping"))
    assert bounded.session_state is SessionState.READY


def test_max_calls_is_local_misuse_and_frees_when_a_call_ends() -> None:
    client = modern_client(max_calls=1)
    first = client.call("tools/call", {"name": "a"})
    with pytest.raises(LocalProtocolError) as exc:
        client.call("tools/call", {"name": "b"})
    assert "max_calls" in exc.value.message
    client.cancel(first)
    assert isinstance(drain(client)[-1].event, Cancelled)
    second = client.call("tools/call", {"name": "b"})
    assert second != first


# --- ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", FEED_MODES)
def test_duplicate_in_flight_incoming_id_is_invalid_without_reply(mode: str) -> None:
    conn = server()
    (request,) = feed(conn, raw(modern_request("dup")), mode)
    assert isinstance(request, Request)
    invalid = one_invalid(feed(conn, raw(modern_request("dup", "prompts/list")), mode))
    assert invalid.reply is None and invalid.error.code == INVALID_REQUEST
    assert invalid.error.request_id == "dup"
    assert conn.request_info("dup").method == "tools/list"  # the first one stands
    conn.send(ResultResponse(id="dup", result={"tools": []}))
    assert_served(conn, mode, rid="dup")  # free again once answered


def test_duplicate_server_request_id_at_a_legacy_client_is_invalid_without_reply() -> None:
    client, _ = legacy_pair()
    roots = raw({"jsonrpc": "2.0", "id": 5, "method": "roots/list"})
    (request,) = feed(client, roots, "whole")
    assert isinstance(request, Request)
    invalid = one_invalid(feed(client, roots, "whole"))
    assert invalid.reply is None and invalid.error.request_id == 5


@pytest.mark.parametrize("mode", FEED_MODES)
def test_request_reusing_an_id_whose_refusal_is_still_owed_is_refused_without_reply(
    mode: str,
) -> None:
    # docs/connection.md, section 4: "a request reusing the id of a request still
    # unanswered -> -32600, no reply".  A refused request whose error reply has been
    # handed out but not yet sent is still unanswered on the wire (the bad-input rules
    # already treat its id as taken: "or of another refused one").
    conn = server()
    bad = raw({"jsonrpc": "2.0", "id": 5, "method": 42})
    refused, again = feed(conn, bad + raw(modern_request(5)), mode)
    assert isinstance(refused, InvalidMessage) and refused.reply is not None
    assert refused.reply.id == 5
    assert isinstance(again, InvalidMessage), again
    assert again.reply is None and again.error.request_id == 5


def test_a_cancelled_request_holds_its_place_until_the_app_sends_for_it() -> None:
    # The contract as built: after RequestCancelled the app still "sends" its answer
    # (which becomes b"") and only that frees the id and the max_incoming place.
    conn = server(max_incoming=1)
    feed(conn, raw(modern_request(1)), "whole")
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    assert feed(conn, raw(note), "whole") == [RequestCancelled(request_id=1)]
    busy = one_invalid(feed(conn, raw(modern_request(2)), "whole"))
    assert busy.error.code == INTERNAL_ERROR
    assert conn.send(ResultResponse(id=1, result={"tools": []})) == b""
    conn.send(busy.reply)
    assert_served(conn, "whole", rid=2)


@pytest.mark.parametrize("role", [SERVER, CLIENT], ids=["server", "client"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_response_to_an_unknown_id_is_invalid_without_reply(mode: str, role: Any) -> None:
    conn = server() if role is SERVER else modern_client()
    if role is SERVER:
        (_request,) = feed(conn, raw(modern_request(1)), mode)  # an id the peer uses, not ours
    for response in (
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": "nope", "error": {"code": -1, "message": "m"}},
    ):
        invalid = one_invalid(feed(conn, raw(response), mode))
        assert invalid.reply is None and invalid.error.code == INVALID_REQUEST
        assert invalid.error.request_id == response["id"]


@pytest.mark.parametrize("mode", FEED_MODES)
def test_late_response_after_cancel_is_dropped_silently(mode: str) -> None:
    client = modern_client()
    plain = Request(id=client.new_request_id(), method="tools/list")
    client.send(plain)
    client.send(Notification(method="notifications/cancelled", params={"requestId": plain.id}))
    assert client.outstanding == ()
    assert feed(client, raw({"jsonrpc": "2.0", "id": plain.id, "result": {}}), mode) == []
    # A call's leg: cancelled, then the server's answer crosses the cancellation.
    call = client.call("tools/call", {"name": "t"})
    (leg,) = drain(client)
    client.send(leg)
    (leg_id,) = client.outstanding
    client.cancel(call)
    events = drain(client)
    assert [type(e.event) for e in events] == [CancelLeg, Cancelled]
    assert json.loads(client.send(events[0]))["params"] == {"requestId": leg_id}
    late_error = {"jsonrpc": "2.0", "id": leg_id, "error": {"code": -32603, "message": "x"}}
    assert feed(client, raw(late_error), mode) == []
    assert client.new_request_id() not in (plain.id, leg_id)


def test_late_response_after_a_leg_timeout_is_dropped_silently() -> None:
    client = modern_client()
    call = client.call("tools/call", {"name": "t"}, leg_timeout=5.0)
    (leg,) = drain(client)
    client.send(leg)
    (leg_id,) = client.outstanding
    client.leg_timed_out(call, now=6.0)
    events = drain(client)
    assert [type(e.event) for e in events] == [CancelLeg, TimedOut]
    assert feed(client, raw({"jsonrpc": "2.0", "id": leg_id, "result": {}}), "whole") == []


def test_finished_id_memory_is_bounded() -> None:
    client = modern_client(max_finished_ids=2)
    ids = []
    for _ in range(3):
        request = Request(id=client.new_request_id(), method="tools/list")
        client.send(request)
        ids.append(request.id)
    for rid in ids:
        client.send(Notification(method="notifications/cancelled", params={"requestId": rid}))
    oldest, middle, newest = ids
    invalid = one_invalid(
        feed(client, raw({"jsonrpc": "2.0", "id": oldest, "result": {}}), "whole")
    )
    assert invalid.error.request_id == oldest and "unknown" in invalid.error.message
    for rid in (middle, newest):
        assert feed(client, raw({"jsonrpc": "2.0", "id": rid, "result": {}}), "whole") == []
    # Each abandoned id is forgiven once: a second late answer is bogus.
    one_invalid(feed(client, raw({"jsonrpc": "2.0", "id": newest, "result": {}}), "whole"))


@pytest.mark.parametrize("with_key", [True, False], ids=["id-null", "no-id"])
@pytest.mark.parametrize("role", [SERVER, CLIENT], ids=["server", "client"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_error_response_without_id_from_the_peer_is_handed_out_as_is(
    mode: str, role: Any, with_key: bool
) -> None:
    conn = server() if role is SERVER else modern_client()
    message: dict[str, Any] = {
        "jsonrpc": "2.0",
        "error": {"code": PARSE_ERROR, "message": "Parse error", "data": {"at": 3}},
    }
    if with_key:
        message["id"] = None
    events = feed(conn, raw(message), mode)
    assert events == [
        ErrorResponse(
            id=None, error=ErrorObject(code=PARSE_ERROR, message="Parse error", data={"at": 3})
        )
    ]


# --- notifications with bad params ----------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [None, {}, {"requestId": None}, {"requestId": True}, {"requestId": 1.5}, {"requestId": [1]}],
)
@pytest.mark.parametrize("role", [SERVER, CLIENT], ids=["server", "client"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_cancelled_without_a_usable_request_id_is_invalid(
    mode: str, role: Any, params: Any
) -> None:
    conn = server() if role is SERVER else modern_client()
    note: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    if params is not None:
        note["params"] = params
    invalid = one_invalid(feed(conn, raw(note), mode))
    assert invalid.reply is None and invalid.error.code == INVALID_PARAMS


@pytest.mark.parametrize("mode", FEED_MODES)
def test_cancelled_for_an_unknown_or_answered_id_is_ignored(mode: str) -> None:
    conn = server()
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 42}}
    assert feed(conn, raw(note), mode) == []
    (_request,) = feed(conn, raw(modern_request(42)), mode)
    (cancelled,) = feed(conn, raw(note), mode)
    assert cancelled == RequestCancelled(request_id=42)
    assert feed(conn, raw(note), mode) == []  # a second cancellation: nothing new


@pytest.mark.parametrize(
    "params",
    [
        {"progressToken": 1},
        {"progressToken": 1, "progress": "50"},
        {"progressToken": 1, "progress": True},
        {"progressToken": 1, "progress": None},
        {"progressToken": 1, "progress": [1]},
        {"progressToken": 1, "progress": 1, "total": "10"},
        {"progressToken": 1, "progress": 1, "total": False},
        {"progressToken": 1, "progress": 1, "message": 5},
    ],
)
@pytest.mark.parametrize("mode", FEED_MODES)
def test_progress_with_bad_values_is_invalid(mode: str, params: Any) -> None:
    client = modern_client()
    call = client.call("tools/call", {"name": "t"}, progress=True)
    (leg,) = drain(client)
    client.send(leg)
    (leg_id,) = client.outstanding
    note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {**params}}
    note["params"]["progressToken"] = leg_id
    invalid = one_invalid(feed(client, raw(note), mode))
    assert invalid.reply is None and invalid.error.code == INVALID_PARAMS
    good = {"progressToken": leg_id, "progress": 0.5, "total": 1}
    events = feed(client, raw({**note, "params": good}), mode)
    assert events == [Progress(request_id=leg_id, progress=0.5, total=1, call=call)]


def test_progress_for_an_unknown_token_is_dropped() -> None:
    client = modern_client()
    note = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 9, "progress": 1},
    }
    assert feed(client, raw(note), "whole") == []


# --- constructor options --------------------------------------------------------------------

BAD_OPTIONS: list[tuple[Any, dict[str, Any]]] = [
    ("client", {}),
    (None, {}),
    (CLIENT, {"framing": "lines2"}),
    (SERVER, {"framing": None}),
    (CLIENT, {"era": "new"}),
    (SERVER, {"era": None}),
    *[
        (role, {name: value})
        for role in (CLIENT, SERVER)
        for name in ("max_outgoing", "max_incoming", "max_calls", "max_finished_ids")
        for value in (0, -1, True, 1.5, "8", None)
    ],
    (SERVER, {"max_message_size": 0}),
    (SERVER, {"max_message_size": True}),
    (SERVER, {"max_buffer_size": 1.5}),
    (SERVER, {"max_message_size": 100, "max_buffer_size": 99}),
    (SERVER, {"framing": "messages", "max_message_size": 100, "max_buffer_size": 99}),
    (CLIENT, {"log_level": "verbose"}),
    (CLIENT, {"log_level": "INFO"}),
    (SERVER, {"log_level": 3}),
    (SERVER, {"cache_scope": "shared"}),
    (SERVER, {"cache_scope": None}),
    (SERVER, {"cache_ttl_ms": -1}),
    (SERVER, {"cache_ttl_ms": True}),
    (SERVER, {"cache_ttl_ms": 1.5}),
    (SERVER, {"cache_ttl_ms": "0"}),
    (SERVER, {"versions": ()}),
    (SERVER, {"versions": ("1999-01-01",)}),
    (CLIENT, {"versions": (MODERN, "2025-13-01")}),
    (CLIENT, {"versions": MODERN}),  # a string, not a sequence of them
    (CLIENT, {"versions": (None,)}),
    (CLIENT, {"era": "modern", "versions": ("2025-11-25",)}),
    (CLIENT, {"era": "legacy", "versions": (MODERN,)}),
    (CLIENT, {"json": "simplejson"}),
]


@pytest.mark.parametrize(("role", "options"), BAD_OPTIONS, ids=repr)
def test_constructor_rejects_bad_options(role: Any, options: dict[str, Any]) -> None:
    with pytest.raises(LocalProtocolError):
        Connection(role, **options)


@pytest.mark.parametrize(
    "options",
    [
        {"max_outgoing": 1, "max_incoming": 1, "max_calls": 1, "max_finished_ids": 1},
        {"max_message_size": 1, "max_buffer_size": 1},
        {"log_level": "emergency", "cache_scope": "public", "cache_ttl_ms": 0},
        {"versions": ("2024-11-05",), "era": "auto"},
        {"versions": [MODERN], "era": "modern"},
        # an explicit id: a Codec's repr holds its address, which differs between xdist workers
        pytest.param({"json": Codec("stdlib"), "framing": "messages"}, id="json=Codec('stdlib')"),
    ],
    ids=repr,
)
def test_constructor_accepts_edge_options(options: dict[str, Any]) -> None:
    Connection(CLIENT, **options)
    Connection(SERVER, **{k: v for k, v in options.items() if k != "era"})


# --- send() misuse --------------------------------------------------------------------------

ASK = ElicitFormRequest(message="?", requested_schema={"type": "object", "properties": {}})

NOT_SENDABLE = [
    {"jsonrpc": "2.0", "method": "x"},
    b'{"jsonrpc":"2.0","method":"x"}',
    "x",
    None,
    42,
    ErrorObject(code=1, message="m"),
    SessionOpened(era="modern", protocol_version=MODERN, peer_info=None, peer_capabilities={}),
    SessionFailed(error=RemoteProtocolError("x")),
    ConnectionClosed(),
    RequestCancelled(request_id=1),
    SendRequest(params={}, timeout=None, leg=1),  # a bare engine event, not a CallEvent
    NEED_DATA,
]

APP_ONLY = [
    Done(result={}),
    Failed(error=RemoteProtocolError("x")),
    Cancelled(),
    TimedOut(elapsed=1.0, budget=1.0, limit="leg"),
    RoundStarted(round=1, keys=("k",), kinds=("elicitation/create",), input_timeout=None),
    DispatchInput(key="k", request=ASK, round=1),
    CancelInputs(keys=("k",)),
]


@pytest.mark.parametrize("role", [SERVER, CLIENT], ids=["server", "client"])
@pytest.mark.parametrize("event", NOT_SENDABLE, ids=lambda e: type(e).__name__)
def test_send_rejects_what_is_not_sendable(role: Any, event: Any) -> None:
    conn = server() if role is SERVER else modern_client()
    with pytest.raises(LocalProtocolError):
        conn.send(event)


def test_events_that_carry_a_message_are_sent_as_that_message() -> None:
    client = Connection(CLIENT, info=CLIENT_INFO, capabilities=ALL_CAPS)
    (step,) = drain(client)
    assert isinstance(step, HandshakeStep)
    assert json.loads(client.send(step))["method"] == "server/discover"
    assert client.session_state is SessionState.DISCOVERING
    conn = server()
    ping, bad = feed(conn, raw(modern_request(1, "server/discover")) + b"garbage\n", "whole")
    assert isinstance(ping, AutoReply) and isinstance(bad, InvalidMessage)
    assert json.loads(conn.send(ping))["id"] == 1
    assert json.loads(conn.send(bad))["error"]["code"] == PARSE_ERROR
    assert conn.send(InvalidMessage(error=RemoteProtocolError("x"))) == b""  # no reply due
    with pytest.raises(LocalProtocolError):
        conn.send(ping)  # answered already


@pytest.mark.parametrize("event", APP_ONLY, ids=lambda e: type(e).__name__)
def test_send_rejects_app_only_engine_events(event: Any) -> None:
    client = modern_client()
    call = client.call("tools/call", {"name": "t"})
    with pytest.raises(LocalProtocolError):
        client.send(CallEvent(call=call, event=event))
    assert client.outstanding == ()


def test_send_rejects_a_leg_that_is_not_the_one_due() -> None:
    client = modern_client()
    call = client.call("tools/call", {"name": "t"})
    (leg,) = drain(client)
    with pytest.raises(LocalProtocolError):
        client.send(CallEvent(call=call, event=SendRequest(params={}, timeout=None, leg=1)))
    with pytest.raises(LocalProtocolError):
        client.send(CallEvent(call=call + 1, event=leg.event))  # no such call
    client.send(leg)
    with pytest.raises(LocalProtocolError):
        client.send(leg)  # already sent
    assert len(client.outstanding) == 1


def test_call_api_misuse() -> None:
    with pytest.raises(LocalProtocolError):
        server().call("tools/call", {"name": "t"})  # only a client makes calls
    client = modern_client()
    for misuse in (
        lambda: client.cancel(1),
        lambda: client.provide(1, "k", {}),
        lambda: client.leg_timed_out(1),
        lambda: client.leg_broken(1),
    ):
        with pytest.raises(LocalProtocolError):
            misuse()  # no call 1 yet
    call = client.call("tools/call", {"name": "t"})
    client.cancel(call)
    drain(client)
    client.cancel(call)  # ended: a no-op
    assert drain(client) == []
    with pytest.raises(LocalProtocolError):
        client.provide(call, "k", {})  # ended: no longer in flight
    request = Request(id=client.new_request_id() + 1, method="tools/list")  # the app's own id
    client.send(request)
    with pytest.raises(LocalProtocolError):
        client.send(request)  # its id is in flight
    assert client.new_request_id() != request.id  # skipped, not handed out twice
    with pytest.raises(LocalProtocolError):
        server().request_info("never")


def test_a_leg_handed_out_cannot_be_sent_once_the_session_is_in_error() -> None:
    client = modern_client()
    call = client.call("tools/call", {"name": "t"})
    (leg,) = drain(client)
    with pytest.raises(LocalProtocolError):
        client.send(Notification(method="notifications/initialized"))  # not in 2026
    assert client.session_state is SessionState.ERROR
    with pytest.raises(LocalProtocolError):
        client.send(leg)
    assert leg.call == call and client.outstanding == ()


def test_log_message_misuse() -> None:
    with pytest.raises(LocalProtocolError):
        modern_client().send(LogMessage(request_id=1, level="info", data="x"))
    with pytest.raises(LocalProtocolError):
        server().send(LogMessage(request_id=1, level="loud", data="x"))


@pytest.mark.parametrize("role", [SERVER, CLIENT], ids=["server", "client"])
@pytest.mark.parametrize(
    "response",
    [
        ResultResponse(id=1, result={}),
        ErrorResponse(id="x", error=ErrorObject(code=-32603, message="m")),
    ],
)
def test_sending_a_response_for_an_id_never_received_is_misuse(role: Any, response: Any) -> None:
    conn = server() if role is SERVER else modern_client()
    with pytest.raises(LocalProtocolError):
        conn.send(response)


def test_answering_a_request_twice_is_misuse() -> None:
    conn = server()
    feed(conn, raw(modern_request(1)), "whole")
    conn.send(ResultResponse(id=1, result={"tools": []}))
    for again in (
        ResultResponse(id=1, result={"tools": []}),
        ErrorResponse(id=1, error=ErrorObject(code=-32603, message="m")),
    ):
        with pytest.raises(LocalProtocolError):
            conn.send(again)


@pytest.mark.parametrize("era", ["auto", "legacy"])
def test_client_send_before_the_session_is_open_is_misuse(era: Any) -> None:
    client = Connection(CLIENT, era=era, info=CLIENT_INFO, capabilities=ALL_CAPS)
    (step,) = drain(client)
    assert isinstance(step, HandshakeStep)
    with pytest.raises(LocalProtocolError):
        client.send(Request(id=client.new_request_id(), method="tools/list"))
    assert client.session_state is SessionState.ERROR
    assert client.outstanding == ()


# --- fuzz -----------------------------------------------------------------------------------

FINAL_ID = "fuzz-final-\u00e9"
FINAL = raw(modern_request(FINAL_ID))
FRAGMENTS = [
    b"\n",
    b"\r\n",
    b"{",
    b"}",
    b'{"jsonrpc":"2.0",',
    b'"id":1,',
    b'"method":"tools/list"',
    b'"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    b'"io.modelcontextprotocol/clientCapabilities":{}}}}',
    b'"result":{}}',
    b'"error":{"code":-1,"message":"m"}}',
    raw(modern_request(1)),
    raw(modern_request(2, "ping")),
    raw({"jsonrpc": "2.0", "id": 3, "method": "initialize"}),
    raw({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    raw({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    raw({"jsonrpc": "2.0", "id": 1, "result": {}}),
    b"\xff",
    b"x" * 300,
]
FUZZ_MAX_MESSAGE = 256
FUZZ_MAX_BUFFER = 2048

fuzz_bytes = st.one_of(
    st.binary(max_size=3000),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=20)), max_size=40).map(
        b"".join
    ),
)


def _check_event(conn: Connection, event: Any) -> None:
    assert isinstance(
        event,
        (
            Request,
            Notification,
            ResultResponse,
            ErrorResponse,
            InvalidMessage,
            AutoReply,
            RequestCancelled,
            SessionOpened,
            ConnectionClosed,
        ),
    ), event
    if isinstance(event, InvalidMessage):
        assert isinstance(event.error, RemoteProtocolError)
        assert type(event.error.code) is int
        if event.reply is not None:
            assert isinstance(event.reply, ErrorResponse)
            assert event.reply.error.code == event.error.code
            assert conn.send(event.reply)  # the reply it hands out can always be sent
    elif isinstance(event, AutoReply):
        assert conn.send(event.reply)


def _drain_checked(conn: Connection) -> list[Any]:
    events = drain(conn)
    for event in events:
        _check_event(conn, event)
    return events


@settings(
    deadline=None, max_examples=examples(times=3), suppress_health_check=[HealthCheck.too_slow]
)
@given(
    data=fuzz_bytes,
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=30),
    drain_between=st.lists(st.booleans(), min_size=31, max_size=31),
    framing=st.sampled_from(["lines", "messages"]),
)
def test_fuzz_arbitrary_bytes_never_break_a_server(
    data: bytes, cuts: list[int], drain_between: list[bool], framing: Any
) -> None:
    conn = server(
        framing=framing, max_message_size=FUZZ_MAX_MESSAGE, max_buffer_size=FUZZ_MAX_BUFFER
    )
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    # At most max_buffer_size - max_message_size - 1 bytes a read (see _framing.py).
    step = FUZZ_MAX_BUFFER - FUZZ_MAX_MESSAGE - 1
    chunks = [
        data[i : min(i + step, b)] for a, b in itertools.pairwise(points) for i in range(a, b, step)
    ]
    for index, chunk in enumerate(chunks):
        drain_now = drain_between[index % len(drain_between)]
        try:
            conn.receive_data(chunk)
        except LocalProtocolError:
            # Too much buffered: drain, and the same chunk must then fit (nothing lost).
            _drain_checked(conn)
            conn.receive_data(chunk)
        if drain_now:
            _drain_checked(conn)
    _drain_checked(conn)
    # A well-formed request afterwards is still served.
    conn.receive_data(b"\n" + FINAL if framing == "lines" else FINAL)
    events = _drain_checked(conn)
    requests = [e for e in events if isinstance(e, Request)]
    assert requests and requests[-1].id == FINAL_ID, events
    assert conn.request_info(FINAL_ID).era == "modern"
    conn.receive_data(b"")
    assert isinstance(_drain_checked(conn)[-1], ConnectionClosed)


@pytest.mark.parametrize("method", ["ping", "initialize"])
def test_methods_removed_in_2026_are_32601_for_a_2026_request(method: str) -> None:
    conn = server()
    invalid = one_invalid(feed(conn, raw(modern_request(9, method)), "whole"))
    assert (
        invalid.error.code == METHOD_NOT_FOUND and "removed in 2026-07-28" in invalid.error.message
    )
    assert wire_json(conn, invalid.reply)["id"] == 9


def test_a_ping_without_2026_meta_is_still_answered() -> None:
    conn = server()
    (ping,) = feed(conn, raw({"jsonrpc": "2.0", "id": 3, "method": "ping"}), "whole")
    assert isinstance(ping, AutoReply)
    assert wire_json(conn, ping.reply) == {"jsonrpc": "2.0", "id": 3, "result": {}}
