"""The message-level variants: ``receive_message(value)`` and ``send_message(event)``.

An adapter that holds parsed messages already (a WebSocket library, an HTTP
framework that parsed the body) hands the decoded value to
``receive_message``, and takes the message object from ``send_message`` to
encode itself.  The modules marked ``wire_variant`` (pair, calls, versions,
input, session table) run a second time with :class:`support.twin.TwinConnection`,
which checks every step of them against these variants.  Here: invalid values
are refused exactly like invalid bytes, ``send_message`` returns what ``send``
encodes (or ``None``), a pair talking only through messages does what a pair
talking through bytes does, and values and bytes keep their arrival order.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.pairing import ALL_CAPS, CLIENT_INFO, SERVER_INFO, drain
from support.twin import normal

from mrtr_core import (
    CLIENT,
    NEED_DATA,
    SERVER,
    AutoReply,
    CallEvent,
    Connection,
    ConnectionClosed,
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
    SessionOpened,
)
from mrtr_core._errors import INVALID_REQUEST
from mrtr_core.engine import Cancelled, CancelLeg, DispatchInput, Done, SendRequest, SendRetry
from mrtr_core.wire import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    ElicitResult,
    message_to_json,
)

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}
TOOL = {"name": "weather", "arguments": {}}
ASK_CITY = {
    "method": "elicitation/create",
    "params": {
        "message": "Which city?",
        "requestedSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def modern_request(rid: Any, method: str = "tools/list", **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": META}}


# --- Invalid values are refused like invalid bytes ----------------------------------------------

INVALID_VALUES: list[Any] = [
    # not a message at all
    [modern_request(1)],
    [],
    42,
    "a string",
    None,
    True,
    3.5,
    # objects that are not JSON-RPC messages, with and without a usable id
    {"jsonrpc": "1.0", "id": 5, "method": "tools/list"},
    {"id": 5, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 5, "method": 42},
    {"jsonrpc": "2.0", "id": 5, "method": "x", "result": {}},
    {"jsonrpc": "2.0", "id": 5},
    {"jsonrpc": "2.0", "id": [5], "method": "tools/list"},
    {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": [1]},
    {"jsonrpc": "2.0", "method": "notifications/x", "params": "p"},
    # malformed responses: never answered
    {"jsonrpc": "2.0", "id": 7, "result": []},
    {"jsonrpc": "2.0", "result": {}},
    {"jsonrpc": "2.0", "id": 7, "error": {"code": "x", "message": "m"}},
    {"jsonrpc": "2.0", "id": 7, "error": []},
    {"jsonrpc": "2.0", "id": True, "error": {"code": 1, "message": "m"}},
    # well formed, refused by the connection
    {"jsonrpc": "2.0", "id": 8, "result": {}},  # an id we never used
    {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},  # no _meta, no initialize
    {"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"_meta": META}},
    modern_request(10, **{"_meta": {**META, META_PROTOCOL_VERSION: "2099-01-01"}}),
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": "x"}},
]


def _by_bytes(conn: Connection, value: Any) -> list[Any]:
    data = json.dumps(value).encode()
    conn.receive_data(data + b"\n" if conn.framing == "lines" else data)
    return drain(conn)


def _by_value(conn: Connection, value: Any) -> list[Any]:
    conn.receive_message(value)
    return drain(conn)


@pytest.mark.parametrize("role", [CLIENT, SERVER], ids=["client", "server"])
@pytest.mark.parametrize("framing", ["lines", "messages"])
@pytest.mark.parametrize("value", INVALID_VALUES, ids=[f"v{i}" for i in range(len(INVALID_VALUES))])
def test_an_invalid_value_is_refused_exactly_like_its_bytes(
    value: Any, framing: Any, role: Any
) -> None:
    options: dict[str, Any] = {"framing": framing}
    if role is CLIENT:
        options["era"] = "modern"
    by_bytes, by_value = Connection(role, **options), Connection(role, **options)
    expected = _by_bytes(by_bytes, value)
    events = _by_value(by_value, value)
    assert normal(events) == normal(expected)
    for seen, wanted in zip(events, expected, strict=True):
        if isinstance(wanted, InvalidMessage):
            assert by_value.send(seen) == by_bytes.send(wanted)  # the same reply, or none
    # ... and the connection goes on.
    after = _by_value(by_value, {"jsonrpc": "2.0", "method": "notifications/x"})
    assert after == [Notification(method="notifications/x")]


def test_a_server_answers_an_invalid_value_only_when_it_may_have_been_a_request() -> None:
    server = Connection(SERVER)
    (request_like,) = _by_value(server, {"jsonrpc": "1.0", "id": "r", "method": "tools/list"})
    assert request_like.reply is not None and request_like.reply.id == "r"
    assert request_like.error.code == INVALID_REQUEST
    (response_like,) = _by_value(server, {"jsonrpc": "2.0", "id": "s", "result": []})
    assert response_like.reply is None
    (not_an_object,) = _by_value(server, [1, 2])
    assert not_an_object.reply is not None and not_an_object.reply.id is None


def test_values_are_read_lazily_and_change_nothing_until_handed_out() -> None:
    server = Connection(SERVER, max_incoming=1)
    server.receive_message(modern_request(1))
    server.receive_message(modern_request(2))
    server.receive_message("garbage")  # not checked yet
    with pytest.raises(LocalProtocolError):  # nothing handed out: no request is waiting
        server.request_info(1)
    first = server.next_event()
    assert isinstance(first, Request) and server.request_info(1).era == "modern"
    busy = server.next_event()  # request 1 is unanswered: one in flight is the limit
    assert isinstance(busy, InvalidMessage) and busy.reply is not None and busy.reply.id == 2
    assert isinstance(server.next_event(), InvalidMessage)
    assert server.next_event() is NEED_DATA


# --- send_message ------------------------------------------------------------------------------


def test_send_message_returns_the_stamped_leg_that_send_would_encode() -> None:
    client = Connection(
        CLIENT, era="modern", info=CLIENT_INFO, capabilities=ALL_CAPS, log_level="info"
    )
    call = client.call("tools/call", TOOL, progress=True)
    (leg,) = drain(client)
    message = client.send_message(leg)
    assert isinstance(message, Request) and message.method == "tools/call"
    assert message.id in client.outstanding  # recorded as sent
    meta = message.params["_meta"]
    assert meta[META_PROTOCOL_VERSION] == MODERN
    assert meta[META_CLIENT_CAPABILITIES] == ALL_CAPS
    assert meta["progressToken"] == message.id
    with pytest.raises(LocalProtocolError):  # sent once: the call waits for its answer
        client.send_message(leg)
    progress = {"progressToken": message.id, "progress": 1}
    client.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}
    )
    client.receive_message({"jsonrpc": "2.0", "id": message.id, "result": {"content": []}})
    assert drain(client) == [
        Progress(request_id=message.id, progress=1, call=call),
        CallEvent(call=call, event=Done(result={"content": []})),
    ]


@pytest.mark.parametrize("framing", ["lines", "messages"])
def test_encode_of_send_message_is_exactly_what_send_writes(framing: Any) -> None:
    by_bytes = Connection(CLIENT, era="modern", info=CLIENT_INFO, framing=framing)
    by_message = Connection(CLIENT, era="modern", info=CLIENT_INFO, framing=framing)
    for conn in (by_bytes, by_message):
        conn.call("tools/call", TOOL)
    (leg,) = drain(by_bytes)
    (twin,) = drain(by_message)
    message = by_message.send_message(twin)
    assert message is not None
    data = by_bytes.send(leg)
    assert by_message.encode(message) == data
    assert data.endswith(b"\n") == (framing == "lines")
    assert json.loads(data) == message_to_json(message)


def test_send_message_returns_the_servers_completed_result() -> None:
    server = Connection(SERVER, info=SERVER_INFO, cache_ttl_ms=5)
    server.receive_message(modern_request("a"))
    (request,) = drain(server)
    message = server.send_message(ResultResponse(id=request.id, result={"tools": []}))
    assert isinstance(message, ResultResponse) and message.id == "a"
    assert message.result["resultType"] == "complete"
    assert (message.result["ttlMs"], message.result["cacheScope"]) == (5, "private")
    assert message.result["_meta"][META_SERVER_INFO] == SERVER_INFO
    with pytest.raises(LocalProtocolError):  # answered: the id is released
        server.send_message(ResultResponse(id="a", result={"tools": []}))


def test_send_message_gives_none_when_nothing_is_due() -> None:
    server = Connection(SERVER)
    assert server.send_message(InvalidMessage(error=RemoteProtocolError("bad"), reply=None)) is None
    server.receive_message(modern_request(1, "tools/call", name="t"))
    server.receive_message(modern_request(2, "tools/call", name="t"))
    drain(server)
    assert server.send_message(Progress(request_id=1, progress=1)) is None  # no token
    assert server.send_message(LogMessage(request_id=1, level="error", data="x")) is None
    server.receive_message(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    )
    assert drain(server) == [RequestCancelled(request_id=2)]
    assert server.send_message(ResultResponse(id=2, result={"content": []})) is None

    client = Connection(CLIENT, era="modern", cancellation="close_stream")
    call = client.call("tools/call", TOOL)
    (leg,) = drain(client)
    assert client.send_message(leg) is not None
    client.cancel(call)
    cancel, cancelled = drain(client)
    assert isinstance(cancel.event, CancelLeg) and cancelled.event == Cancelled()
    assert client.send_message(cancel) is None  # the transport closes the leg's stream


def test_send_message_refuses_what_send_refuses() -> None:
    client = Connection(CLIENT)  # era="auto": nothing may be sent before the era is known
    with pytest.raises(LocalProtocolError):
        client.send_message(Request(id=client.new_request_id(), method="tools/list"))
    with pytest.raises(LocalProtocolError, match="cannot send"):
        Connection(SERVER).send_message(
            SessionOpened(  # type: ignore[arg-type]
                era="modern", protocol_version=MODERN, peer_info=None, peer_capabilities={}
            )
        )


# --- A pair that talks only through messages ---------------------------------------------------


def _adapter_hop(message: Any) -> Any:
    """What an adapter does between two message-level ends: its own JSON, both ways."""
    return json.loads(json.dumps(message_to_json(message)))


def _sunny(city: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"Sunny in {city}."}]}


def _run_weather_call(client: Connection, server: Connection, *, messages: bool) -> list[Any]:
    """Drive one tool call that asks for a city (in 2026 with input_required, in a 2025
    session with elicitation/create); return every event either end handed out."""
    seen: list[Any] = []
    asked_for: dict[Any, Any] = {}  # the server's elicitation id -> the tool call's id

    def deliver(src: Connection, event: Any, dst: Connection) -> None:
        if messages:
            message = src.send_message(event)
            if message is not None:
                dst.receive_message(_adapter_hop(message))
        else:
            data = src.send(event)
            if data:
                dst.receive_data(data)

    call = client.call("tools/call", TOOL)
    oslo = {"action": "accept", "content": {"city": "Oslo"}}
    for _ in range(20):
        moved = False
        for event in drain(client):
            seen.append(("client", event))
            moved = True
            if isinstance(event, HandshakeStep):
                deliver(client, event.message, server)
            elif isinstance(event, AutoReply):
                deliver(client, event.reply, server)
            elif isinstance(event, Request):  # a 2025 server asks
                deliver(client, ResultResponse(id=event.id, result=oslo), server)
            elif isinstance(event, CallEvent) and isinstance(event.event, DispatchInput):
                client.provide(call, event.event.key, ElicitResult(**oslo))
            elif isinstance(event, CallEvent) and isinstance(
                event.event, (SendRequest, SendRetry, CancelLeg)
            ):
                deliver(client, event, server)
        for event in drain(server):
            seen.append(("server", event))
            moved = True
            if isinstance(event, (AutoReply, InvalidMessage)):
                deliver(server, event, client)
            elif isinstance(event, ResultResponse):  # the answer to our elicitation
                city = event.result["content"]["city"]
                deliver(server, ResultResponse(id=asked_for[event.id], result=_sunny(city)), client)
            elif isinstance(event, Request) and server.request_info(event.id).era == "legacy":
                ask = Request(id=server.new_request_id(), **ASK_CITY)
                asked_for[ask.id] = event.id
                deliver(server, ask, client)
            elif isinstance(event, Request):
                params = event.params or {}
                if "inputResponses" in params:
                    result = _sunny(params["inputResponses"]["city"]["content"]["city"])
                else:
                    result = {"resultType": "input_required", "inputRequests": {"city": ASK_CITY}}
                deliver(server, ResultResponse(id=event.id, result=result), client)
        if not moved:
            break
    for end, conn in (("client", client), ("server", server)):
        conn.receive_data(b"")
        seen.extend((end, event) for event in drain(conn))
    return seen


@pytest.mark.parametrize(
    ("client_options", "server_options"),
    [
        ({}, {}),  # the probe, then 2026-07-28
        ({}, {"versions": (LEGACY,)}),  # the probe refused, then initialize
        ({"era": "legacy"}, {}),
        ({"era": "modern"}, {}),
    ],
    ids=["auto-modern", "auto-fallback", "legacy", "modern"],
)
@pytest.mark.parametrize("framing", ["lines", "messages"])
def test_a_message_level_pair_does_what_a_byte_pair_does(
    framing: Any, client_options: dict[str, Any], server_options: dict[str, Any]
) -> None:
    def pair() -> tuple[Connection, Connection]:
        client = Connection(
            CLIENT, framing=framing, info=CLIENT_INFO, capabilities=ALL_CAPS, **client_options
        )
        server = Connection(
            SERVER, framing=framing, info=SERVER_INFO, capabilities={"tools": {}}, **server_options
        )
        return client, server

    by_bytes = _run_weather_call(*pair(), messages=False)
    by_messages = _run_weather_call(*pair(), messages=True)
    assert normal(by_messages) == normal(by_bytes)
    done = [e for end, e in by_messages if isinstance(e, CallEvent) and isinstance(e.event, Done)]
    assert [d.event.result["content"][0]["text"] for d in done] == ["Sunny in Oslo."]
    assert by_messages[-1] == ("server", ConnectionClosed())


# --- Arrival order, and the end of the input ---------------------------------------------------


def _ids(events: list[Any]) -> list[Any]:
    return [e.id if isinstance(e, Request) else type(e).__name__ for e in events]


def test_lines_a_value_comes_after_the_complete_lines_before_it() -> None:
    server = Connection(SERVER)
    line = json.dumps(modern_request("b1")).encode() + b"\n"
    partial = json.dumps(modern_request("b2")).encode()
    server.receive_data(line + partial[:10])  # one line and the start of the next
    server.receive_message(modern_request("v1"))
    server.receive_data(partial[10:] + b"\n")  # held behind the value, then framed
    server.receive_message(modern_request("v2"))
    server.receive_data(b"")
    assert _ids(drain(server)) == ["b1", "v1", "b2", "v2", "ConnectionClosed"]


def test_messages_values_and_bodies_keep_their_order() -> None:
    server = Connection(SERVER, framing="messages")
    body = json.dumps(modern_request("b1")).encode()
    server.receive_message(modern_request("v1"))
    server.receive_data(body)
    server.receive_data(b"  \n")  # a blank body: skipped, as ever
    server.receive_message(modern_request("v2"))
    server.receive_data(json.dumps(modern_request("b2")).encode())
    assert _ids(drain(server)) == ["v1", "b1", "v2", "b2"]


def test_a_body_over_the_bound_behind_a_value_is_reported_in_its_place() -> None:
    server = Connection(SERVER, framing="messages", max_message_size=64, max_buffer_size=64)
    server.receive_message(modern_request("v1"))
    server.receive_data(b"x" * 65)  # never held: only its size is remembered
    server.receive_message(modern_request("v2"))
    first, oversize, second = drain(server)
    assert (first.id, second.id) == ("v1", "v2")
    assert isinstance(oversize, InvalidMessage) and oversize.error.code == INVALID_REQUEST
    assert "65 bytes" in oversize.error.message


def test_a_value_is_not_bounded_by_max_message_size() -> None:
    server = Connection(SERVER, max_message_size=64, max_buffer_size=64)
    big = modern_request("big", "tools/call", name="x" * 1000)
    server.receive_message(big)
    assert _ids(drain(server)) == ["big"]


@pytest.mark.parametrize("framing", ["lines", "messages"])
def test_bytes_held_behind_a_value_count_against_max_buffer_size(framing: Any) -> None:
    server = Connection(SERVER, framing=framing, max_message_size=40, max_buffer_size=64)
    server.receive_data(b'{"jsonrpc":"2.0",')  # 17 bytes buffered (a partial line or a body)
    server.receive_message(modern_request("v"))
    server.receive_data(b" " * 40)  # 57 in all: held
    with pytest.raises(LocalProtocolError, match="max_buffer_size=64"):
        server.receive_data(b" " * 8)  # 65: refused, nothing buffered
    server.receive_data(b" " * 7)  # 64: still fits


def test_the_end_of_the_input_waits_behind_a_value() -> None:
    server = Connection(SERVER)
    server.receive_message(modern_request("v"))
    server.receive_data(b"")
    server.receive_data(b"")  # said twice: harmless
    with pytest.raises(LocalProtocolError, match="after feed_eof"):
        server.receive_data(b"{}\n")
    with pytest.raises(LocalProtocolError, match="after receive_data"):
        server.receive_message(modern_request("w"))
    assert _ids(drain(server)) == ["v", "ConnectionClosed"]


def test_a_value_after_the_end_of_the_input_is_misuse() -> None:
    client = Connection(CLIENT, era="modern")
    client.receive_data(b"")
    with pytest.raises(LocalProtocolError, match="after receive_data"):
        client.receive_message({"jsonrpc": "2.0", "method": "notifications/x"})
    assert drain(client) == [ConnectionClosed()]


@pytest.mark.parametrize("server_versions", [(MODERN,), (LEGACY,)], ids=["modern", "legacy"])
def test_what_the_handshake_settles_through_messages(server_versions: Any) -> None:
    client = Connection(CLIENT, framing="messages", info=CLIENT_INFO, capabilities=ALL_CAPS)
    server = Connection(
        SERVER,
        framing="messages",
        info=SERVER_INFO,
        capabilities={"tools": {}},
        versions=server_versions,
    )
    _run_weather_call(client, server, messages=True)
    era = "modern" if server_versions == (MODERN,) else "legacy"
    assert (client.era, client.protocol_version) == (era, server_versions[0])
    assert client.peer_info == SERVER_INFO and client.peer_capabilities == {"tools": {}}
    if era == "legacy":
        assert (server.era, server.protocol_version) == ("legacy", LEGACY)
        assert server.peer_info == CLIENT_INFO and server.peer_capabilities == ALL_CAPS
