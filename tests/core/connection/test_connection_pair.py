"""A client Connection and a server Connection talking through bytes only (h11-style).

Every test moves what one end's ``send`` returns into the other end's
``receive_data`` and checks that the receiving end hands out the same thing:
a Request the client sends comes out of the server as an equal Request (plus
the stamped 2026 ``_meta``), a result the server sends comes out of the client
as the call's ``Done`` or as a ``ResultResponse``.  Where a real peer of another
kind is needed (a 2025 server answering ``server/discover`` with -32601), its
bytes are written by hand.  The full exchanges run in every feed mode of
``tests/pairing.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pytest
from support.pairing import (
    ALL_CAPS,
    CLIENT_INFO,
    FEED_MODES,
    SERVER_INFO,
    drain,
    feed,
    handshake,
    modern_pair,
    replies,
    send_all,
)

from mrtr_core import (
    CLIENT,
    LEGACY_VERSIONS,
    SERVER,
    AppResultRefused,
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
    PeerError,
    Progress,
    Request,
    RequestCancelled,
    ResultResponse,
    SessionFailed,
    SessionOpened,
    SessionState,
    error_response,
)
from mrtr_core._errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mrtr_core.engine import (
    CancelInputs,
    Cancelled,
    CancelLeg,
    DispatchInput,
    Done,
    Failed,
    InputFailed,
    RoundStarted,
    SendRequest,
    SendRetry,
    TimedOut,
)
from mrtr_core.wire import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    ElicitFormRequest,
    ListRootsRequest,
)
from mrtr_core.wire import CreateMessageRequest as SamplingRequest

pytestmark = pytest.mark.usefixtures("wire_variant")

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TOOL: dict[str, Any] = {"name": "book_trip", "arguments": {"city": "Lisbon", "nights": 3}}

# What the server asks and what the client answers (plain wire shapes).
ASK_FORM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Which dates?",
        "requestedSchema": {"type": "object", "properties": {"dates": {"type": "string"}}},
    },
}
ASK_SAMPLING: dict[str, Any] = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 50,
    },
}
ASK_ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}
ASK_CONFIRM: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "message": "Book it?",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    },
}
ANSWER_FORM: dict[str, Any] = {"action": "accept", "content": {"dates": "May 1-4"}}
ANSWER_SAMPLING: dict[str, Any] = {
    "role": "assistant",
    "content": {"type": "text", "text": "hello"},
    "model": "tiny-1",
}
ANSWER_ROOTS: dict[str, Any] = {"roots": [{"uri": "file:///home/ada", "name": "home"}]}
ANSWER_CONFIRM: dict[str, Any] = {"action": "accept", "content": {"ok": True}}

# Opaque states with characters an encoder might be tempted to touch.
STATE_1 = 'v1.eyJrIjoiXHUwMDQxIn0=+/é"\\\u2028.sig'
STATE_2 = "v1.round-two/\u00fc\U0001f600=="


# --- small helpers ------------------------------------------------------------------------


def through(
    src: Connection, events: Iterable[Any], dst: Connection, mode: str = "whole"
) -> list[Any]:
    """``src`` sends ``events``; the bytes (which must not be empty) reach ``dst``."""
    data = send_all(src, events)
    assert data, "nothing went on the wire"
    return feed(dst, data, mode)


def wire(events: Iterable[Any]) -> list[Any]:
    """The call events that go back through ``send`` (the rest are for the app)."""
    return [
        e
        for e in events
        if isinstance(e, CallEvent) and isinstance(e.event, (SendRequest, SendRetry, CancelLeg))
    ]


def raw(message: Mapping[str, Any]) -> bytes:
    """A hand-written peer's line."""
    return json.dumps(message).encode() + b"\n"


def inner(events: Iterable[Any], call: int | None = None) -> list[Any]:
    """The engine events of ``CallEvent``s (of ``call`` when given); nothing else may be there."""
    out = []
    for event in events:
        assert isinstance(event, CallEvent), event
        if call is not None:
            assert event.call == call
        out.append(event.event)
    return out


def without_meta(params: Mapping[str, Any] | None) -> dict[str, Any]:
    assert params is not None
    return {k: v for k, v in params.items() if k != "_meta"}


def assert_full_meta(request: Request, capabilities: Mapping[str, Any] = ALL_CAPS) -> None:
    assert request.params is not None
    meta = request.params["_meta"]
    assert meta[META_PROTOCOL_VERSION] == MODERN
    assert meta[META_CLIENT_CAPABILITIES] == capabilities
    assert meta[META_CLIENT_INFO] == CLIENT_INFO


def input_required(requests: Mapping[str, Any] | None, state: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = dict(requests)
    if state is not None:
        result["requestState"] = state
    return result


def one_request(events: list[Any]) -> Request:
    assert len(events) == 1 and isinstance(events[0], Request), events
    return events[0]


def start_call(
    client: Connection,
    server: Connection,
    method: str = "tools/call",
    params: Any = TOOL,
    **kw: Any,
) -> tuple[int, Request]:
    """Start a call on an open client and carry its first leg to the server."""
    call = client.call(method, params, **kw)
    events = drain(client)
    (send,) = inner(events, call)
    assert isinstance(send, SendRequest)
    return call, one_request(through(client, events, server))


def legacy_pair(**server_options: Any) -> tuple[Connection, Connection]:
    """A 2025-11-25 session, open on both ends."""
    client = Connection(CLIENT, era="legacy", info=CLIENT_INFO, capabilities=ALL_CAPS)
    server = Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}}, **server_options)
    client_seen, server_seen = handshake(client, server)
    assert [type(e) for e in client_seen] == [SessionOpened]
    assert [type(e) for e in server_seen] == [SessionOpened]
    return client, server


# --- 1. the full 2026-07-28 MRTR exchange -------------------------------------------------


@pytest.mark.parametrize("mode", FEED_MODES)
def test_modern_exchange_discover_then_two_rounds_then_done(mode: str) -> None:
    client = Connection(CLIENT, info=CLIENT_INFO, capabilities=ALL_CAPS)  # era="auto"
    server = Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}})

    # Discovery: the probe carries the 2026 _meta; the server answers it itself.
    (step,) = drain(client)
    assert isinstance(step, HandshakeStep) and isinstance(step.message, Request)
    assert step.message.method == "server/discover"
    assert_full_meta(step.message)
    (auto,) = through(client, [step.message], server, mode)
    assert isinstance(auto, AutoReply) and auto.request == step.message
    assert isinstance(auto.reply, ResultResponse) and auto.reply.id == step.message.id
    # The call waits for the era: no leg comes out before SessionOpened.
    call = client.call("tools/call", TOOL)
    assert drain(client) == []
    opened, *first = through(server, [auto.reply], client, mode)
    assert opened == SessionOpened(
        era="modern",
        protocol_version=MODERN,
        peer_info=SERVER_INFO,
        peer_capabilities={"tools": {}},
    )
    assert client.era == "modern" and client.protocol_version == MODERN
    seen_ids = {step.message.id}

    # Leg 1: the original request.
    (send,) = inner(first, call)
    assert isinstance(send, SendRequest) and send.params == TOOL
    leg1 = one_request(through(client, first, server, mode))
    assert leg1.method == "tools/call" and leg1.id not in seen_ids
    seen_ids.add(leg1.id)
    assert without_meta(leg1.params) == TOOL
    assert_full_meta(leg1)
    info = server.request_info(leg1.id)
    assert (info.era, info.protocol_version, info.retry) == ("modern", MODERN, False)
    assert info.capabilities == ALL_CAPS and info.client_info == CLIENT_INFO

    # Round 1: elicitation (form) + sampling + roots in one input_required.
    asks = {"dates": ASK_FORM, "draft": ASK_SAMPLING, "where": ASK_ROOTS}
    round1 = through(
        server, [ResultResponse(id=leg1.id, result=input_required(asks, STATE_1))], client, mode
    )
    started, *dispatches = inner(round1, call)
    assert started == RoundStarted(
        round=1,
        keys=("dates", "draft", "where"),
        kinds=("elicitation/create", "sampling/createMessage", "roots/list"),
        input_timeout=None,
    )
    assert [(d.key, d.round, type(d.request)) for d in dispatches] == [
        ("dates", 1, ElicitFormRequest),
        ("draft", 1, SamplingRequest),
        ("where", 1, ListRootsRequest),
    ]
    assert dispatches[0].request.message == "Which dates?"
    client.provide(call, "where", ANSWER_ROOTS)
    client.provide(call, "dates", ANSWER_FORM)
    assert drain(client) == []  # one answer still missing: no retry yet
    client.provide(call, "draft", ANSWER_SAMPLING)
    retry_events = drain(client)
    (retry,) = inner(retry_events, call)
    assert isinstance(retry, SendRetry) and retry.round == 1

    # Leg 2: exactly this round's answers and the byte-exact state, a fresh id, full _meta.
    leg2 = one_request(through(client, retry_events, server, mode))
    assert leg2.method == "tools/call" and leg2.id not in seen_ids
    seen_ids.add(leg2.id)
    assert_full_meta(leg2)
    assert without_meta(leg2.params) == {
        **TOOL,
        "inputResponses": {"dates": ANSWER_FORM, "draft": ANSWER_SAMPLING, "where": ANSWER_ROOTS},
        "requestState": STATE_1,
    }
    assert server.request_info(leg2.id).retry is True

    # Round 2: one more elicitation and a new state.
    round2 = through(
        server,
        [ResultResponse(id=leg2.id, result=input_required({"confirm": ASK_CONFIRM}, STATE_2))],
        client,
        mode,
    )
    started, dispatch = inner(round2, call)
    assert isinstance(started, RoundStarted) and started.round == 2
    assert started.keys == ("confirm",)
    assert isinstance(dispatch, DispatchInput) and dispatch.key == "confirm"
    client.provide(call, "confirm", ANSWER_CONFIRM)
    leg3 = one_request(through(client, drain(client), server, mode))
    assert leg3.id not in seen_ids
    assert_full_meta(leg3)
    # Not accumulated: round 1's answers are gone, the state is round 2's.
    assert without_meta(leg3.params) == {
        **TOOL,
        "inputResponses": {"confirm": ANSWER_CONFIRM},
        "requestState": STATE_2,
    }

    # The complete result.
    final = {"content": [{"type": "text", "text": "Booked."}], "isError": False}
    (done,) = inner(through(server, [ResultResponse(id=leg3.id, result=final)], client, mode), call)
    assert isinstance(done, Done)
    assert done.result == {
        **final,
        "resultType": "complete",
        "_meta": {META_SERVER_INFO: SERVER_INFO},
    }
    assert client.outstanding == () and server.outstanding == ()
    with pytest.raises(LocalProtocolError):
        server.request_info(leg3.id)  # answered: no longer waiting
    client.cancel(call)  # a no-op once the call has ended
    assert drain(client) == [] and drain(server) == []


def test_modern_exchange_requests_and_results_survive_the_trip_as_equal_objects() -> None:
    client, server = modern_pair()
    rid = client.new_request_id()
    params = {"cursor": "c1", "_meta": {"trace": "abc"}}
    (got,) = through(client, [Request(id=rid, method="tools/list", params=params)], server)
    assert isinstance(got, Request) and (got.id, got.method) == (rid, "tools/list")
    assert without_meta(got.params) == {"cursor": "c1"}
    assert got.params is not None and got.params["_meta"]["trace"] == "abc"  # app _meta kept
    assert_full_meta(got)
    result = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    (answer,) = through(server, [ResultResponse(id=rid, result=result)], client)
    assert isinstance(answer, ResultResponse) and answer.id == rid
    assert {k: answer.result[k] for k in result} == result
    assert client.outstanding == ()


# --- 2. the 2025-11-25 exchange -------------------------------------------------------------


def _legacy_handshake(client: Connection, server: Connection, mode: str, start: str) -> None:
    """Drive the 2025 handshake step by step, checking what each end hands out."""
    (step,) = drain(client)
    if start == "auto-fallback":
        # A 2025 server does not know server/discover: it answers -32601.
        assert step.message.method == "server/discover"
        probe = json.loads(client.send(step.message))
        assert probe["method"] == "server/discover"
        refusal = {
            "jsonrpc": "2.0",
            "id": probe["id"],
            "error": {"code": METHOD_NOT_FOUND, "message": "Method not found"},
        }
        (step,) = feed(client, raw(refusal), mode)
    assert isinstance(step, HandshakeStep) and step.message.method == "initialize"
    assert step.message.params == {
        "protocolVersion": LEGACY,
        "capabilities": ALL_CAPS,
        "clientInfo": CLIENT_INFO,
    }
    (auto,) = through(client, [step.message], server, mode)
    assert isinstance(auto, AutoReply) and auto.request == step.message
    (initialized,) = through(server, [auto.reply], client, mode)
    assert initialized == HandshakeStep(message=Notification(method="notifications/initialized"))
    server_side = through(client, [initialized.message], server, mode)
    assert drain(client) == [
        SessionOpened(
            era="legacy",
            protocol_version=LEGACY,
            peer_info=SERVER_INFO,
            peer_capabilities={"tools": {}},
        )
    ]
    assert server_side == [
        SessionOpened(
            era="legacy", protocol_version=LEGACY, peer_info=CLIENT_INFO, peer_capabilities=ALL_CAPS
        )
    ]


@pytest.mark.parametrize("start", ["legacy", "auto-fallback"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_legacy_exchange_with_server_to_client_requests(mode: str, start: str) -> None:
    era: Any = "legacy" if start == "legacy" else "auto"
    client = Connection(CLIENT, era=era, info=CLIENT_INFO, capabilities=ALL_CAPS)
    server = Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}})
    _legacy_handshake(client, server, mode, start)
    assert (client.era, client.protocol_version) == ("legacy", LEGACY)

    call, leg = start_call(client, server)
    assert leg.params == TOOL  # no 2026 _meta on a 2025 session
    info = server.request_info(leg.id)
    assert (info.era, info.protocol_version) == ("legacy", LEGACY)
    assert info.capabilities == ALL_CAPS and info.client_info == CLIENT_INFO
    assert info.log_level is None and info.retry is False

    # The tool asks through real server-to-client requests on the same connection.
    asks = [
        Request(id=server.new_request_id(), method=ask["method"], params=ask["params"])
        for ask in (ASK_FORM, ASK_SAMPLING, ASK_ROOTS)
    ]
    assert through(server, asks, client, mode) == asks
    answers = [
        ResultResponse(id=asks[2].id, result=ANSWER_ROOTS),
        ResultResponse(id=asks[0].id, result=ANSWER_FORM),
        ResultResponse(id=asks[1].id, result=ANSWER_SAMPLING),
    ]
    assert through(client, answers, server, mode) == answers
    assert server.outstanding == ()

    final = {"content": [{"type": "text", "text": "Booked."}]}
    (done,) = inner(through(server, [ResultResponse(id=leg.id, result=final)], client, mode), call)
    assert done == Done(result=final)  # a 2025 result goes out as the app wrote it
    assert client.outstanding == () and drain(server) == []


def test_legacy_server_pings_and_the_client_answers_itself() -> None:
    client, server = legacy_pair()
    ping = Request(id=server.new_request_id(), method="ping")
    (auto,) = through(server, [ping], client)
    assert isinstance(auto, AutoReply) and auto.request == ping
    assert through(client, [auto.reply], server) == [ResultResponse(id=ping.id, result={})]


def test_legacy_server_requests_are_capability_checked() -> None:
    client = Connection(CLIENT, era="legacy", info=CLIENT_INFO, capabilities={"roots": {}})
    server = Connection(SERVER, info=SERVER_INFO)
    handshake(client, server)
    assert server.session_state is SessionState.READY
    roots = Request(id=server.new_request_id(), method="roots/list")
    assert through(server, [roots], client) == [roots]
    for method in ("sampling/createMessage", "elicitation/create"):
        with pytest.raises(AppResultRefused) as exc:
            server.send(Request(id=server.new_request_id(), method=method, params={}))
        assert exc.value.code == MISSING_CLIENT_CAPABILITY


def test_auto_client_gets_32022_without_a_known_modern_version_and_does_not_fall_back() -> None:
    client = Connection(CLIENT, info=CLIENT_INFO, capabilities=ALL_CAPS)
    call = client.call("tools/call", TOOL)
    (step,) = drain(client)
    probe = json.loads(client.send(step.message))
    error = {
        "jsonrpc": "2.0",
        "id": probe["id"],
        "error": {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2099-01-01"], "requested": MODERN},
        },
    }
    events = feed(client, raw(error), "whole")
    assert not any(isinstance(e, HandshakeStep) for e in events)  # no initialize
    (session_failed,) = [e for e in events if not isinstance(e, CallEvent)]
    (failed,) = inner([e for e in events if isinstance(e, CallEvent)], call)
    assert isinstance(failed, Failed) and failed.error is session_failed.error
    assert isinstance(session_failed, SessionFailed)
    assert isinstance(session_failed.error, PeerError)
    assert session_failed.error.code == UNSUPPORTED_PROTOCOL_VERSION
    assert client.outstanding == ()
    with pytest.raises(LocalProtocolError):
        client.call("tools/call", TOOL)


def test_auto_client_against_a_server_that_only_speaks_2025_falls_back_to_initialize() -> None:
    # A server configured without 2026-07-28 should look like a 2025 server to a dual-era
    # client: however it refuses server/discover, the client must end up initializing.
    client = Connection(CLIENT, info=CLIENT_INFO, capabilities=ALL_CAPS)
    server = Connection(SERVER, info=SERVER_INFO, versions=LEGACY_VERSIONS)
    (probe,) = drain(client)
    refusal = replies(through(client, [probe.message], server))
    assert len(refusal) == 1 and isinstance(refusal[0], ErrorResponse)
    (step,) = through(server, refusal, client)
    assert isinstance(step, HandshakeStep), step
    assert step.message.method == "initialize"


# --- 3. cancellation ------------------------------------------------------------------------


def _late_answer_and_bogus_answer(client: Connection, late_id: Any) -> None:
    """A late response to the abandoned leg is dropped; one for a never-used id is reported."""
    late = {"jsonrpc": "2.0", "id": late_id, "result": {"content": []}}
    assert feed(client, raw(late), "whole") == []
    bogus = {"jsonrpc": "2.0", "id": 987654, "result": {"content": []}}
    (invalid,) = feed(client, raw(bogus), "whole")
    assert isinstance(invalid, InvalidMessage) and invalid.reply is None
    assert invalid.error.request_id == 987654


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_cancel_while_the_leg_is_in_flight(era: str, mode: str) -> None:
    client, server = modern_pair() if era == "modern" else legacy_pair()
    call, leg = start_call(client, server)
    client.cancel(call)
    events = drain(client)
    assert inner(events, call) == [CancelLeg(leg=1), Cancelled()]
    (cancelled,) = through(client, wire(events), server, mode)
    assert cancelled == RequestCancelled(request_id=leg.id)
    # Nothing further goes out for that id.
    assert server.send(Progress(request_id=leg.id, progress=1)) == b""
    assert server.send(LogMessage(request_id=leg.id, level="error", data="x")) == b""
    assert server.send(ResultResponse(id=leg.id, result={"content": []})) == b""
    assert client.outstanding == ()
    _late_answer_and_bogus_answer(client, leg.id)


def test_cancel_while_awaiting_input_puts_nothing_on_the_wire() -> None:
    client, server = modern_pair()
    call, leg = start_call(client, server)
    asks = {"dates": ASK_FORM, "where": ASK_ROOTS}
    result = input_required(asks, STATE_1)
    round1 = through(server, [ResultResponse(id=leg.id, result=result)], client)
    assert [type(e) for e in inner(round1, call)] == [RoundStarted, DispatchInput, DispatchInput]
    client.provide(call, "dates", ANSWER_FORM)
    client.cancel(call)
    events = drain(client)
    assert inner(events, call) == [CancelInputs(keys=("where",)), Cancelled()]
    for event in events:
        with pytest.raises(LocalProtocolError):
            client.send(event)  # app events: there is nothing to write
    assert client.outstanding == () and server.outstanding == ()
    with pytest.raises(LocalProtocolError):
        client.provide(call, "where", ANSWER_ROOTS)  # the call is gone


def test_legacy_cancel_while_the_server_is_asking_the_client() -> None:
    client, server = legacy_pair()
    call, leg = start_call(client, server)
    ask = Request(
        id=server.new_request_id(), method="elicitation/create", params=ASK_FORM["params"]
    )
    assert through(server, [ask], client) == [ask]
    # The user stops the call: the tool request is cancelled on the wire.
    client.cancel(call)
    (cancelled,) = through(client, wire(drain(client)), server)
    assert cancelled == RequestCancelled(request_id=leg.id)
    # The tool gives up on its question too; the client stops waiting on it.
    note = Notification(method="notifications/cancelled", params={"requestId": ask.id})
    assert through(server, [note], client) == [RequestCancelled(request_id=ask.id)]
    assert client.send(ResultResponse(id=ask.id, result=ANSWER_FORM)) == b""
    assert server.send(ResultResponse(id=leg.id, result={"content": []})) == b""


def test_legacy_server_cancelling_its_own_request_forgets_it() -> None:
    client, server = legacy_pair()
    ask = Request(id=server.new_request_id(), method="roots/list")
    assert through(server, [ask], client) == [ask]
    # The client's answer crosses the server's cancellation on the wire: the client has
    # already answered, so the cancellation is nothing to it.
    answer = client.send(ResultResponse(id=ask.id, result=ANSWER_ROOTS))
    note = Notification(method="notifications/cancelled", params={"requestId": ask.id})
    assert through(server, [note], client) == []
    assert server.outstanding == ()  # abandoned: not waiting for an answer any more
    assert feed(server, answer, "whole") == []  # the late answer is dropped quietly


def test_progress_and_logs_after_the_client_cancelled_are_not_sent() -> None:
    client = Connection(CLIENT, era="modern", info=CLIENT_INFO, log_level="debug")
    server = Connection(SERVER, info=SERVER_INFO)
    call, leg = start_call(client, server, progress=True)
    assert server.send(Progress(request_id=leg.id, progress=0.5)) != b""
    assert server.send(LogMessage(request_id=leg.id, level="info", data="x")) != b""
    client.cancel(call)
    through(client, wire(drain(client)), server)
    assert server.send(Progress(request_id=leg.id, progress=0.7)) == b""
    assert server.send(LogMessage(request_id=leg.id, level="info", data="x")) == b""


# --- 4. progress ----------------------------------------------------------------------------


def test_progress_follows_the_call_across_its_legs() -> None:
    client, server = modern_pair()
    call, leg1 = start_call(client, server, progress=True)
    assert leg1.params is not None and leg1.params["_meta"]["progressToken"] == leg1.id
    assert server.request_info(leg1.id).progress_token == leg1.id
    sent = Progress(request_id=leg1.id, progress=1, total=3, message="looking")
    assert through(server, [sent], client) == [
        Progress(request_id=leg1.id, progress=1, total=3, message="looking", call=call)
    ]
    result = input_required({"confirm": ASK_CONFIRM}, None)
    through(server, [ResultResponse(id=leg1.id, result=result)], client)
    client.provide(call, "confirm", ANSWER_CONFIRM)
    leg2 = one_request(through(client, drain(client), server))
    assert leg2.id != leg1.id
    assert leg2.params is not None and leg2.params["_meta"]["progressToken"] == leg2.id
    assert through(server, [Progress(request_id=leg2.id, progress=2, total=3)], client) == [
        Progress(request_id=leg2.id, progress=2, total=3, call=call)
    ]
    (done,) = inner(through(server, [ResultResponse(id=leg2.id, result={"content": []})], client))
    assert isinstance(done, Done)
    # After the call ended its progress is stale: dropped, not reported.
    stale = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": leg2.id, "progress": 3},
    }
    assert feed(client, raw(stale), "whole") == []


def test_progress_for_a_plain_request_with_a_token() -> None:
    client, server = modern_pair()
    rid = client.new_request_id()
    request = Request(id=rid, method="tools/list", params={"_meta": {"progressToken": "tok"}})
    one_request(through(client, [request], server))
    assert through(server, [Progress(request_id=rid, progress=5)], client) == [
        Progress(request_id=rid, progress=5)
    ]


def test_no_progress_for_a_request_without_a_token() -> None:
    client, server = modern_pair()
    _, leg = start_call(client, server)  # progress=False
    assert leg.params is not None and "progressToken" not in leg.params["_meta"]
    assert server.send(Progress(request_id=leg.id, progress=1)) == b""
    assert server.send(Progress(request_id="never-seen", progress=1)) == b""


# --- 5. logs --------------------------------------------------------------------------------


def test_log_messages_follow_the_requests_log_level() -> None:
    client = Connection(CLIENT, era="modern", info=CLIENT_INFO, log_level="warning")
    server = Connection(SERVER, info=SERVER_INFO)
    _, leg = start_call(client, server)
    assert leg.params is not None and leg.params["_meta"][META_LOG_LEVEL] == "warning"
    assert server.request_info(leg.id).log_level == "warning"
    assert server.send(LogMessage(request_id=leg.id, level="info", data="quiet")) == b""
    assert server.send(LogMessage(request_id=leg.id, level="debug", data="quiet")) == b""
    logs = [
        LogMessage(request_id=leg.id, level="warning", data={"disk": "low"}, logger="fs"),
        LogMessage(request_id=leg.id, level="error", data="boom"),
    ]
    assert through(server, logs, client) == [
        Notification(
            method="notifications/message",
            params={"level": "warning", "data": {"disk": "low"}, "logger": "fs"},
        ),
        Notification(method="notifications/message", params={"level": "error", "data": "boom"}),
    ]


def test_no_log_messages_without_a_log_level() -> None:
    client, server = modern_pair()
    _, leg = start_call(client, server)
    assert leg.params is not None and META_LOG_LEVEL not in leg.params["_meta"]
    for level in ("debug", "warning", "error", "emergency"):
        assert server.send(LogMessage(request_id=leg.id, level=level, data="x")) == b""


def test_raw_log_notification_needs_a_legacy_session() -> None:
    client, server = modern_pair()
    start_call(client, server)
    with pytest.raises(LocalProtocolError):
        server.send(Notification(method="notifications/message", params={"level": "error"}))
    with pytest.raises(LocalProtocolError):
        server.send(Notification(method="notifications/progress", params={"progress": 1}))


def test_legacy_log_messages_always_go_out() -> None:
    client, server = legacy_pair()
    _, leg = start_call(client, server)
    log = LogMessage(request_id=leg.id, level="debug", data="d")
    assert through(server, [log], client) == [
        Notification(method="notifications/message", params={"level": "debug", "data": "d"})
    ]
    raw_note = Notification(method="notifications/message", params={"level": "info", "data": 1})
    assert through(server, [raw_note], client) == [raw_note]


# --- 6. caching -----------------------------------------------------------------------------


def _plain(client: Connection, server: Connection, method: str, params: Any = None) -> Request:
    request = Request(id=client.new_request_id(), method=method, params=params)
    return one_request(through(client, [request], server))


def test_tools_list_gets_the_servers_cache_defaults() -> None:
    client, server = modern_pair(cache_ttl_ms=60_000, cache_scope="public")
    got = _plain(client, server, "tools/list")
    (answer,) = through(server, [ResultResponse(id=got.id, result={"tools": []})], client)
    assert answer == ResultResponse(
        id=got.id,
        result={
            "tools": [],
            "resultType": "complete",
            "ttlMs": 60_000,
            "cacheScope": "public",
            "_meta": {META_SERVER_INFO: SERVER_INFO},
        },
    )


def test_cache_fields_set_by_the_app_are_kept_and_defaults_are_private_zero() -> None:
    client, server = modern_pair()
    got = _plain(client, server, "prompts/list")
    result = {"prompts": [], "ttlMs": 5, "cacheScope": "public"}
    (answer,) = through(server, [ResultResponse(id=got.id, result=result)], client)
    assert answer.result["ttlMs"] == 5 and answer.result["cacheScope"] == "public"
    got = _plain(client, server, "resources/list")
    (answer,) = through(server, [ResultResponse(id=got.id, result={"resources": []})], client)
    assert answer.result["ttlMs"] == 0 and answer.result["cacheScope"] == "private"
    # Not a cacheable method: no cache fields at all.
    got = _plain(client, server, "completion/complete", {"ref": {}, "argument": {}})
    (answer,) = through(server, [ResultResponse(id=got.id, result={"completion": {}})], client)
    assert "ttlMs" not in answer.result and "cacheScope" not in answer.result


def test_resources_read_retry_leg_result_is_never_cached() -> None:
    client, server = modern_pair(cache_ttl_ms=60_000, cache_scope="public")
    params = {"uri": "file:///secret.txt"}
    # A first-leg complete result takes the defaults...
    call, leg = start_call(client, server, "resources/read", params)
    contents = {"contents": [{"uri": params["uri"], "text": "hi"}]}
    (done,) = inner(through(server, [ResultResponse(id=leg.id, result=contents)], client), call)
    assert isinstance(done, Done)
    assert (done.result["ttlMs"], done.result["cacheScope"]) == (60_000, "public")
    # ...a retry leg's result is private and not cacheable, whatever the app set.
    call, leg = start_call(client, server, "resources/read", params)
    asked = input_required({"ok": ASK_CONFIRM}, "s")
    through(server, [ResultResponse(id=leg.id, result=asked)], client)
    client.provide(call, "ok", ANSWER_CONFIRM)
    retry = one_request(through(client, drain(client), server))
    assert server.request_info(retry.id).retry is True
    result = {**contents, "ttlMs": 99_999, "cacheScope": "public"}
    (done,) = inner(through(server, [ResultResponse(id=retry.id, result=result)], client), call)
    assert isinstance(done, Done)
    assert (done.result["ttlMs"], done.result["cacheScope"]) == (0, "private")
    assert done.result["resultType"] == "complete"


def test_server_discover_result() -> None:
    client = Connection(CLIENT, info=CLIENT_INFO, capabilities=ALL_CAPS)
    server = Connection(
        SERVER,
        info=SERVER_INFO,
        capabilities={"tools": {"listChanged": True}},
        instructions="be kind",
        cache_ttl_ms=1000,
        cache_scope="public",
    )
    (step,) = drain(client)
    (auto,) = through(client, [step.message], server)
    assert auto.reply.result == {
        "supportedVersions": [MODERN],
        "capabilities": {"tools": {"listChanged": True}},
        "instructions": "be kind",
        "resultType": "complete",
        "ttlMs": 1000,
        "cacheScope": "public",
        "_meta": {META_SERVER_INFO: SERVER_INFO},
    }
    (opened,) = through(server, [auto.reply], client)
    assert opened == SessionOpened(
        era="modern",
        protocol_version=MODERN,
        peer_info=SERVER_INFO,
        peer_capabilities={"tools": {"listChanged": True}},
        instructions="be kind",
    )


# --- 7. the server's checks on input_required ------------------------------------------------


def test_input_required_for_prompts_list_is_refused_and_the_request_stays_open() -> None:
    client, server = modern_pair()
    got = _plain(client, server, "prompts/list")
    with pytest.raises(AppResultRefused) as exc:
        server.send(ResultResponse(id=got.id, result=input_required({"c": ASK_CONFIRM}, "s")))
    assert exc.value.code == INTERNAL_ERROR
    assert server.request_info(got.id).method == "prompts/list"  # still outstanding
    (answer,) = through(server, [error_response(got.id, exc.value)], client)
    assert answer == ErrorResponse(
        id=got.id, error=ErrorObject(code=INTERNAL_ERROR, message=exc.value.message)
    )
    assert client.outstanding == () and server.outstanding == ()


def test_input_required_without_requests_or_state_is_refused() -> None:
    client, server = modern_pair()
    call, leg = start_call(client, server)
    with pytest.raises(AppResultRefused) as exc:
        server.send(ResultResponse(id=leg.id, result={"resultType": "input_required"}))
    assert exc.value.code == INTERNAL_ERROR
    (failed,) = inner(through(server, [error_response(leg.id, exc.value)], client), call)
    assert isinstance(failed, Failed) and isinstance(failed.error, PeerError)
    assert failed.error.code == INTERNAL_ERROR


def test_asking_for_an_undeclared_capability_is_refused_with_32021() -> None:
    client, server = modern_pair()
    call, leg = start_call(client, server, capabilities={"elicitation": {}})
    assert server.request_info(leg.id).capabilities == {"elicitation": {}}
    with pytest.raises(AppResultRefused) as exc:
        server.send(ResultResponse(id=leg.id, result=input_required({"d": ASK_SAMPLING}, None)))
    assert exc.value.code == MISSING_CLIENT_CAPABILITY
    assert exc.value.data == {"requiredCapabilities": {"sampling": {}}}
    (failed,) = inner(through(server, [error_response(leg.id, exc.value)], client), call)
    assert isinstance(failed, Failed)
    assert (failed.error.code, failed.error.data) == (
        MISSING_CLIENT_CAPABILITY,
        {"requiredCapabilities": {"sampling": {}}},
    )


def test_capabilities_are_checked_per_request() -> None:
    client, server = modern_pair()
    rich, rich_leg = start_call(client, server)  # ALL_CAPS
    poor, poor_leg = start_call(client, server, capabilities={"elicitation": {"form": {}}})
    ask = input_required({"d": ASK_SAMPLING}, None)
    # The earlier request's sampling capability does not carry over to the later one.
    with pytest.raises(AppResultRefused) as exc:
        server.send(ResultResponse(id=poor_leg.id, result=ask))
    assert exc.value.code == MISSING_CLIENT_CAPABILITY
    events = through(server, [ResultResponse(id=rich_leg.id, result=ask)], client)
    assert [type(e) for e in inner(events, rich)] == [RoundStarted, DispatchInput]
    # The refused one can still be answered properly.
    (done,) = inner(
        through(server, [ResultResponse(id=poor_leg.id, result={"content": []})], client), poor
    )
    assert isinstance(done, Done)


# --- 8. unsupported protocol version (-32022) ----------------------------------------------


def test_a_32022_naming_only_our_version_is_retried_once_then_fails_the_call() -> None:
    client, server = modern_pair()
    call, leg = start_call(client, server)

    def refusal(rid: Any) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "error": {
                "code": UNSUPPORTED_PROTOCOL_VERSION,
                "message": "Unsupported protocol version",
                "data": {"supported": [MODERN], "requested": "x"},
            },
        }

    (again,) = inner(feed(client, raw(refusal(leg.id)), "whole"), call)
    assert isinstance(again, SendRequest)
    client.send(CallEvent(call=call, event=again))
    (second,) = client.outstanding
    assert second != leg.id
    (failed,) = inner(feed(client, raw(refusal(second)), "whole"), call)
    assert isinstance(failed, Failed) and isinstance(failed.error, PeerError)
    assert failed.error.code == UNSUPPORTED_PROTOCOL_VERSION
    assert drain(client) == [] and client.outstanding == ()


def test_server_answers_an_unknown_version_with_32022() -> None:
    server = Connection(SERVER, info=SERVER_INFO)
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            **TOOL,
            "_meta": {META_PROTOCOL_VERSION: "2099-01-01", META_CLIENT_CAPABILITIES: {}},
        },
    }
    (invalid,) = feed(server, raw(request), "whole")
    assert isinstance(invalid, InvalidMessage) and invalid.reply is not None
    reply = json.loads(server.send(invalid.reply))
    assert reply["id"] == 7
    assert reply["error"]["code"] == UNSUPPORTED_PROTOCOL_VERSION
    assert reply["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}
    assert server.outstanding == ()
    with pytest.raises(LocalProtocolError):
        server.request_info(7)


# --- 9. parallel calls ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", FEED_MODES)
def test_parallel_calls_keep_their_rounds_apart(mode: str) -> None:
    client, server = modern_pair()
    a = client.call("tools/call", {"name": "a"})
    b = client.call("prompts/get", {"name": "b"})
    first = drain(client)
    leg_a, leg_b = through(client, first, server, mode)
    assert (leg_a.method, leg_b.method) == ("tools/call", "prompts/get")
    # Both get a round at once; answers come in crossed order.
    results = [
        ResultResponse(id=leg_b.id, result=input_required({"kb": ASK_CONFIRM}, "B1")),
        ResultResponse(id=leg_a.id, result=input_required({"ka": ASK_FORM, "kr": ASK_ROOTS}, "A1")),
    ]
    events = through(server, results, client, mode)
    by_call: dict[int, list[Any]] = {a: [], b: []}
    for event in events:
        by_call[event.call].append(event.event)
    assert [e.key for e in by_call[a] if isinstance(e, DispatchInput)] == ["ka", "kr"]
    assert [e.key for e in by_call[b] if isinstance(e, DispatchInput)] == ["kb"]
    client.provide(a, "ka", ANSWER_FORM)
    client.provide(b, "kb", ANSWER_CONFIRM)
    retry_b = one_request(through(client, drain(client), server, mode))
    assert without_meta(retry_b.params) == {
        "name": "b",
        "inputResponses": {"kb": ANSWER_CONFIRM},
        "requestState": "B1",
    }
    client.provide(a, "kr", ANSWER_ROOTS)
    retry_a = one_request(through(client, drain(client), server, mode))
    assert without_meta(retry_a.params) == {
        "name": "a",
        "inputResponses": {"ka": ANSWER_FORM, "kr": ANSWER_ROOTS},
        "requestState": "A1",
    }
    # Round 2 for a only, b completes in between.
    results = [
        ResultResponse(id=retry_a.id, result=input_required({"kb": ASK_CONFIRM}, "A2")),
        ResultResponse(id=retry_b.id, result={"messages": []}),
    ]
    events = through(server, results, client, mode)
    assert [(e.call, type(e.event)) for e in events] == [
        (a, RoundStarted),
        (a, DispatchInput),
        (b, Done),
    ]
    client.provide(a, "kb", {"action": "decline"})
    retry_a2 = one_request(through(client, drain(client), server, mode))
    assert without_meta(retry_a2.params) == {
        "name": "a",
        "inputResponses": {"kb": {"action": "decline"}},
        "requestState": "A2",
    }
    (done,) = through(server, [ResultResponse(id=retry_a2.id, result={"content": []})], client)
    assert done.call == a and isinstance(done.event, Done)
    assert len({leg_a.id, leg_b.id, retry_a.id, retry_b.id, retry_a2.id}) == 5


# --- timers, broken legs, end of stream, whole-message framing -------------------------------


def test_leg_timeout_cancels_the_leg_on_the_wire() -> None:
    client, server = modern_pair()
    call, leg = start_call(client, server, leg_timeout=5.0)
    client.leg_timed_out(call, now=5.0)
    events = drain(client)
    cancel_leg, timed_out = inner(events, call)
    assert cancel_leg == CancelLeg(leg=1) and timed_out.limit == "leg"
    assert through(client, wire(events), server) == [RequestCancelled(request_id=leg.id)]
    assert server.send(ResultResponse(id=leg.id, result={"content": []})) == b""
    late: dict[str, Any] = {"jsonrpc": "2.0", "id": leg.id, "result": {"content": []}}
    assert feed(client, raw(late), "whole") == []


def test_server_cancelling_a_leg_makes_the_client_reissue_it_with_a_new_id() -> None:
    client, server = modern_pair()
    call, leg = start_call(client, server)
    note = Notification(method="notifications/cancelled", params={"requestId": leg.id})
    events = through(server, [note], client)
    (reissue,) = inner(events, call)
    assert isinstance(reissue, SendRequest) and reissue.reissue is True
    again = one_request(through(client, events, server))
    assert again.id != leg.id and without_meta(again.params) == without_meta(leg.params)
    assert_full_meta(again)
    assert server.outstanding == () and client.outstanding == (again.id,)
    (done,) = inner(through(server, [ResultResponse(id=again.id, result={"content": []})], client))
    assert isinstance(done, Done)


def test_failing_an_input_fails_the_call_with_nothing_on_the_wire() -> None:
    client, server = modern_pair()
    call, leg = start_call(client, server)
    result = input_required({"dates": ASK_FORM, "where": ASK_ROOTS}, None)
    through(server, [ResultResponse(id=leg.id, result=result)], client)
    client.fail_input(call, "dates", "the user closed the window")
    cancel_inputs, failed = inner(drain(client), call)
    assert cancel_inputs == CancelInputs(keys=("where",))
    assert isinstance(failed, Failed) and isinstance(failed.error, InputFailed)
    assert failed.error.key == "dates"
    assert client.outstanding == ()


def test_input_timeout_ends_the_call() -> None:
    client, server = modern_pair()
    call, leg = start_call(client, server, input_timeout=30.0)
    result = input_required({"confirm": ASK_CONFIRM}, "s")
    started, _ = inner(through(server, [ResultResponse(id=leg.id, result=result)], client))
    assert started.input_timeout == 30.0
    client.input_timed_out(call, now=30.0)
    cancel_inputs, timed_out = inner(drain(client), call)
    assert cancel_inputs == CancelInputs(keys=("confirm",)) and timed_out.limit == "input"


def test_end_of_stream_fails_live_calls_and_lists_unanswered_requests() -> None:
    client, server = modern_pair()
    call, _ = start_call(client, server)
    plain = _plain(client, server, "tools/list")
    client.receive_data(b"")
    failed, closed = drain(client)
    assert failed.call == call and isinstance(failed.event, Failed)
    assert closed == ConnectionClosed(unanswered=(plain.id,))
    server.receive_data(b"")
    assert drain(server) == [ConnectionClosed()]


def test_discover_timeout_falls_back_and_the_late_answer_is_dropped() -> None:
    client = Connection(CLIENT, info=CLIENT_INFO, capabilities=ALL_CAPS)
    server = Connection(SERVER, info=SERVER_INFO)
    (probe,) = drain(client)
    (auto,) = through(client, [probe.message], server)
    client.handshake_timed_out()  # the server was too slow
    (step,) = drain(client)
    assert isinstance(step, HandshakeStep) and step.message.method == "initialize"
    assert through(server, [auto.reply], client) == []  # late: dropped quietly
    server.receive_data(client.send(step.message))
    client_seen, server_seen = handshake(client, server)
    assert [type(e) for e in client_seen] == [SessionOpened] and client.era == "legacy"
    assert [type(e) for e in server_seen] == [SessionOpened]


def test_legacy_client_against_a_modern_only_server_fails_the_session() -> None:
    client = Connection(CLIENT, era="legacy", info=CLIENT_INFO, capabilities=ALL_CAPS)
    server = Connection(SERVER, info=SERVER_INFO, versions=("2026-07-28",))
    call = client.call("tools/call", TOOL)
    (step,) = drain(client)
    (invalid,) = through(client, [step.message], server)
    assert isinstance(invalid, InvalidMessage) and invalid.reply is not None
    events = through(server, [invalid.reply], client)
    (session_failed,) = [e for e in events if isinstance(e, SessionFailed)]
    assert session_failed.error.code == METHOD_NOT_FOUND
    (failed,) = inner([e for e in events if isinstance(e, CallEvent)], call)
    assert isinstance(failed, Failed)


def test_a_2025_request_before_initialize_is_refused() -> None:
    server = Connection(SERVER, info=SERVER_INFO)
    bare = {"jsonrpc": "2.0", "id": "r1", "method": "tools/list"}
    (invalid,) = feed(server, raw(bare), "whole")
    assert invalid.reply is not None and invalid.reply.id == "r1"
    assert json.loads(server.send(invalid.reply))["error"]["data"] == {"supported": [MODERN]}


def _hop(src: Connection, events: Iterable[Any], dst: Connection) -> list[Any]:
    """Whole-message framing: every message is its own receive_data."""
    out: list[Any] = []
    for event in events:
        data = src.send(event)
        if data:
            assert not data.endswith(b"\n")
            dst.receive_data(data)
            out.extend(drain(dst))
    return out


@pytest.mark.parametrize("cancellation", ["close_stream", "notify"])
def test_message_framing_round_and_cancel(cancellation: Any) -> None:
    client = Connection(
        CLIENT,
        framing="messages",
        cancellation=cancellation,
        era="modern",
        info=CLIENT_INFO,
        capabilities=ALL_CAPS,
    )
    server = Connection(SERVER, framing="messages", info=SERVER_INFO)
    call = client.call("tools/call", TOOL)
    (leg,) = _hop(client, drain(client), server)
    result = input_required({"confirm": ASK_CONFIRM}, STATE_1)
    _hop(server, [ResultResponse(id=leg.id, result=result)], client)
    client.provide(call, "confirm", ANSWER_CONFIRM)
    (retry,) = _hop(client, drain(client), server)
    assert retry.params["requestState"] == STATE_1
    client.cancel(call)
    events = drain(client)
    assert [type(e) for e in inner(events, call)] == [CancelLeg, Cancelled]
    if cancellation == "close_stream":
        # On HTTP cancelling is closing the leg's stream: nothing to write.
        assert [client.send(e) for e in wire(events)] == [b""]
    else:
        # Message framing alone (a WebSocket) has no stream to close: the leg is
        # cancelled on the wire, and the server hears it.
        assert _hop(client, wire(events), server) == [RequestCancelled(request_id=retry.id)]
        assert client.outstanding == ()


def test_message_framing_cancels_a_leg_on_the_wire_by_default() -> None:
    client = Connection(CLIENT, framing="messages", era="modern")
    assert client.cancellation == "notify"
    call = client.call("tools/call", TOOL)
    (leg,) = drain(client)
    request = json.loads(client.send(leg))
    client.cancel(call)
    cancel_leg, cancelled = drain(client)
    assert cancel_leg == CallEvent(call=call, event=CancelLeg(leg=1))
    assert json.loads(client.send(cancel_leg)) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request["id"]},
    }
    assert cancelled == CallEvent(call=call, event=Cancelled())


@pytest.mark.parametrize("framing", ["lines", "messages"])
def test_close_stream_cancellation_sends_nothing_whatever_the_framing(framing: Any) -> None:
    for variant in ("send", "send_message"):
        client = Connection(CLIENT, framing=framing, cancellation="close_stream", era="modern")
        call = client.call("tools/call", TOOL, leg_timeout=1.0)
        (leg,) = drain(client)
        assert getattr(client, variant)(leg)
        client.leg_timed_out(call, now=1.0)
        cancel_leg, timed_out = drain(client)
        assert isinstance(cancel_leg.event, CancelLeg) and isinstance(timed_out.event, TimedOut)
        assert getattr(client, variant)(cancel_leg) in (b"", None)
        assert client.outstanding == ()  # a late answer is dropped all the same


@pytest.mark.parametrize("cancellation", ["", "stream", None, "NOTIFY"])
def test_an_unknown_cancellation_mode_is_misuse(cancellation: Any) -> None:
    with pytest.raises(LocalProtocolError, match="cancellation"):
        Connection(CLIENT, cancellation=cancellation)
