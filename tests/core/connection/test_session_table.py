"""The session tables of ``mrtr_core/_session.py``, walked pair by pair, then lived through.

Part 1 drives :class:`Session` directly over EVERY (state, input) pair of both
tables: a pair in the table moves to its target; a missing local input is API
misuse (``LocalProtocolError``, the session enters ``ERROR`` unless it is
already terminal); a missing remote input is refused (``False``, state kept).

Part 2 drives real :class:`Connection` objects through each handshake path and
checks ``conn.session_state`` after every step, so the tables are known to be
the ones the connection actually follows.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import pytest
from support.pairing import (
    ALL_CAPS,
    CLIENT_INFO,
    FEED_MODES,
    SERVER_INFO,
    drain,
    feed,
    replies,
)

import mrtr_core._connection._connection as connection_module
import mrtr_core._connection._options as options_module
from mrtr_core import (
    CLIENT,
    LEGACY_VERSIONS,
    SERVER,
    AutoReply,
    CallEvent,
    Connection,
    ConnectionClosed,
    ErrorResponse,
    HandshakeStep,
    InvalidMessage,
    LocalProtocolError,
    Notification,
    PeerError,
    RemoteProtocolError,
    Request,
    ResultResponse,
    SessionFailed,
    SessionOpened,
    SessionState,
    error_response,
)
from mrtr_core._connection._session import (
    CLIENT_TRANSITIONS,
    LOCAL_INPUTS,
    REMOTE_INPUTS,
    SERVER_TRANSITIONS,
    TERMINAL_STATES,
    Session,
    SessionInput,
)
from mrtr_core._errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from mrtr_core.engine import Failed
from mrtr_core.wire import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

pytestmark = pytest.mark.usefixtures("wire_variant")

S = SessionState
I = SessionInput  # noqa: E741
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
FUTURE = "2099-01-01"
TABLES: dict[str, Mapping[tuple[SessionState, SessionInput], SessionState]] = {
    "client": CLIENT_TRANSITIONS,
    "server": SERVER_TRANSITIONS,
}
#: Every (table, state, input) triple: 2 x 9 x 20.
ALL_PAIRS = [
    pytest.param(name, state, given, id=f"{name}-{state.value}-{given.value}")
    for name in TABLES
    for state in SessionState
    for given in SessionInput
]


# --- Part 1: the tables, pair by pair -------------------------------------------------------


@pytest.mark.parametrize(("table_name", "state", "given"), ALL_PAIRS)
def test_every_pair_of_both_tables(table_name: str, state: S, given: I) -> None:
    table = TABLES[table_name]
    session = Session(table, state)
    target = table.get((state, given))
    assert session.allows(given) is (target is not None)
    if given in LOCAL_INPUTS:
        if target is not None:
            assert session.local(given) is None
            assert session.state is target
        else:
            with pytest.raises(LocalProtocolError) as exc:
                session.local(given)
            assert given.value in exc.value.message and state.value in exc.value.message
            assert session.state is (state if state in TERMINAL_STATES else S.ERROR)
    else:
        assert given in REMOTE_INPUTS
        if target is not None:
            assert session.remote(given) is True
            assert session.state is target
        else:
            assert session.remote(given) is False
            assert session.state is state
    assert session.table is table


@pytest.mark.parametrize("table_name", list(TABLES))
def test_every_target_is_a_session_state(table_name: str) -> None:
    table = TABLES[table_name]
    assert table, "an empty table"
    for (state, given), target in table.items():
        assert isinstance(state, SessionState)
        assert isinstance(given, SessionInput)
        assert isinstance(target, SessionState)


@pytest.mark.parametrize("table_name", list(TABLES))
def test_terminal_states_have_only_close_or_self_transitions(table_name: str) -> None:
    table = TABLES[table_name]
    for (state, given), target in table.items():
        if state in TERMINAL_STATES:
            assert given is I.CLOSE or target is state, (state, given, target)
            assert target in TERMINAL_STATES  # nothing leaves the terminal states


@pytest.mark.parametrize("table_name", list(TABLES))
def test_close_is_allowed_everywhere_and_error_survives_it(table_name: str) -> None:
    table = TABLES[table_name]
    for state in SessionState:
        expected = S.ERROR if state is S.ERROR else S.CLOSED
        assert table[(state, I.CLOSE)] is expected


def test_local_and_remote_inputs_partition_all_inputs() -> None:
    assert frozenset(SessionInput) == LOCAL_INPUTS | REMOTE_INPUTS
    assert not LOCAL_INPUTS & REMOTE_INPUTS
    assert I.CLOSE in REMOTE_INPUTS
    assert all(i.value.startswith("send_") for i in LOCAL_INPUTS)
    assert all(not i.value.startswith("send_") for i in REMOTE_INPUTS)
    assert {S.FAILED, S.CLOSED, S.ERROR} == TERMINAL_STATES


def test_each_table_only_uses_its_own_roles_inputs() -> None:
    client_only = {
        I.START_MODERN,
        I.RECV_LEGACY_SIGNAL_NO_FALLBACK,
        I.SEND_DISCOVER,
        I.SEND_INITIALIZE,
        I.SEND_INITIALIZED,
        I.RECV_DISCOVER_RESULT,
        I.RECV_VERSION_ERROR,
        I.RECV_MODERN_ERROR,
        I.RECV_LEGACY_SIGNAL,
        I.RECV_INITIALIZE_RESULT,
        I.RECV_INITIALIZE_ERROR,
        I.RECV_SERVER_REQUEST,
        I.SEND_REQUEST,
    }
    server_only = {
        I.RECV_INITIALIZE,
        I.RECV_INITIALIZED,
        I.RECV_LEGACY_REQUEST,
        I.SEND_INITIALIZE_RESULT,
        I.SEND_INITIALIZE_ERROR,
        I.SEND_SERVER_REQUEST,
    }
    assert client_only | server_only | {I.CLOSE} == set(SessionInput)
    assert {given for _, given in CLIENT_TRANSITIONS} == client_only | {I.CLOSE}
    assert {given for _, given in SERVER_TRANSITIONS} == server_only | {I.CLOSE}
    # A server never discovers, never holds a modern session, never fails a handshake.
    assert {target for target in SERVER_TRANSITIONS.values()} == {
        S.NEW,
        S.INITIALIZING,
        S.INITIALIZED,
        S.READY,
        S.CLOSED,
        S.ERROR,
    }


REACHABLE = {
    "client": {
        S.NEW,
        S.DISCOVERING,
        S.MODERN,
        S.INITIALIZING,
        S.INITIALIZED,
        S.READY,
        S.FAILED,
        S.CLOSED,
    },
    "server": {S.NEW, S.INITIALIZING, S.INITIALIZED, S.READY, S.CLOSED},
}


@pytest.mark.parametrize("table_name", list(TABLES))
def test_states_reachable_from_new_through_the_table(table_name: str) -> None:
    table = TABLES[table_name]
    seen = {S.NEW}
    frontier = [S.NEW]
    while frontier:
        state = frontier.pop()
        for (source, _), target in table.items():
            if source is state and target not in seen:
                seen.add(target)
                frontier.append(target)
    # ERROR is reached only by misuse (a missing local pair), never through an entry.
    assert seen == REACHABLE[table_name]


def test_a_local_input_in_error_raises_and_stays_in_error() -> None:
    session = Session(CLIENT_TRANSITIONS)
    with pytest.raises(LocalProtocolError):
        session.local(I.SEND_REQUEST)  # nothing open yet
    assert session.state is S.ERROR
    with pytest.raises(LocalProtocolError):
        session.local(I.SEND_DISCOVER)
    assert session.state is S.ERROR
    assert session.remote(I.RECV_DISCOVER_RESULT) is False
    assert session.remote(I.CLOSE) is True and session.state is S.ERROR


# --- Part 2: the connection follows the tables ------------------------------------------------


def raw(message: Mapping[str, Any]) -> bytes:
    """A hand-written peer's line."""
    return json.dumps(message).encode() + b"\n"


def _auto_client(**options: Any) -> Connection:
    return Connection(CLIENT, info=CLIENT_INFO, capabilities=ALL_CAPS, **options)


def _legacy_client(**options: Any) -> Connection:
    return Connection(CLIENT, era="legacy", info=CLIENT_INFO, capabilities=ALL_CAPS, **options)


def _server(**options: Any) -> Connection:
    return Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}}, **options)


def _step(conn: Connection, method: str) -> Any:
    """The one event due is a HandshakeStep for ``method``; its message."""
    events = drain(conn)
    assert len(events) == 1 and isinstance(events[0], HandshakeStep), events
    message = events[0].message
    assert message.method == method
    return message


def _send_probe(client: Connection) -> tuple[Request, bytes]:
    """Take the server/discover step out and send it: NEW -> DISCOVERING."""
    probe = _step(client, "server/discover")
    assert isinstance(probe, Request)
    assert client.session_state is S.NEW  # handed out, not yet sent
    data = client.send(probe)
    assert client.session_state is S.DISCOVERING
    return probe, data


def _error_line(rid: Any, code: int, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": "refused"}
    if data is not None:
        error["data"] = data
    return raw({"jsonrpc": "2.0", "id": rid, "error": error})


def _result_line(rid: Any, result: Mapping[str, Any]) -> bytes:
    return raw({"jsonrpc": "2.0", "id": rid, "result": result})


def _types(events: list[Any]) -> list[type]:
    return [type(e) for e in events]


def _one_failed_call(events: list[Any], call: int) -> Failed:
    failed = [e for e in events if isinstance(e, CallEvent)]
    assert len(failed) == 1 and failed[0].call == call, events
    assert isinstance(failed[0].event, Failed)
    return failed[0].event


def _initialize_line(rid: Any = 1, params: Any = None) -> bytes:
    if params is None:
        params = {"protocolVersion": LEGACY, "capabilities": ALL_CAPS, "clientInfo": CLIENT_INFO}
    return raw({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params})


INITIALIZED_LINE = raw({"jsonrpc": "2.0", "method": "notifications/initialized"})
TOOL = {"name": "t", "arguments": {}}


# --- client: era="auto" ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", FEED_MODES)
def test_client_auto_new_then_discovering_then_modern(mode: str) -> None:
    client, server = _auto_client(), _server()
    assert client.session_state is S.NEW
    call = client.call("tools/call", TOOL)
    _, data = _send_probe(client)
    assert drain(client) == []  # the leg waits for the era
    (auto,) = feed(server, data, mode)
    assert isinstance(auto, AutoReply)
    assert server.session_state is S.NEW  # server/discover needs no session
    opened, leg = feed(client, server.send(auto.reply), mode)
    assert isinstance(opened, SessionOpened) and opened.era == "modern"
    assert isinstance(leg, CallEvent) and leg.call == call
    assert client.session_state is S.MODERN and client.era == "modern"
    client.send(leg)
    client.send(Request(id=client.new_request_id(), method="tools/list"))
    assert client.session_state is S.MODERN  # (MODERN, SEND_REQUEST) -> MODERN
    client.handshake_timed_out()  # no step in flight: a no-op
    assert client.session_state is S.MODERN and drain(client) == []


@pytest.mark.parametrize("mode", FEED_MODES)
def test_client_auto_falls_back_on_32601_new_initializing_initialized_ready(mode: str) -> None:
    client, server = _auto_client(), _server(versions=LEGACY_VERSIONS)
    call = client.call("tools/call", TOOL)
    _, data = _send_probe(client)
    (refusal,) = replies(feed(server, data, mode))
    assert isinstance(refusal, ErrorResponse) and refusal.error.code == METHOD_NOT_FOUND
    assert server.session_state is S.NEW
    (step,) = feed(client, server.send(refusal), mode)
    assert isinstance(step, HandshakeStep) and step.message.method == "initialize"
    assert client.session_state is S.NEW  # (DISCOVERING, RECV_LEGACY_SIGNAL) -> NEW
    init = client.send(step.message)
    assert client.session_state is S.INITIALIZING
    (auto,) = feed(server, init, mode)
    assert isinstance(auto, AutoReply) and server.session_state is S.INITIALIZING
    answer = server.send(auto.reply)
    assert server.session_state is S.INITIALIZED
    (note,) = feed(client, answer, mode)
    assert isinstance(note, HandshakeStep)
    assert note.message == Notification(method="notifications/initialized")
    assert client.session_state is S.INITIALIZED
    assert drain(client) == []  # the leg still waits
    initialized = client.send(note.message)
    assert client.session_state is S.READY
    opened, leg = drain(client)
    assert isinstance(opened, SessionOpened) and opened.era == "legacy"
    assert opened.protocol_version == LEGACY and client.era == "legacy"
    assert isinstance(leg, CallEvent) and leg.call == call
    (server_opened,) = feed(server, initialized, mode)
    assert isinstance(server_opened, SessionOpened)
    assert server.session_state is S.READY
    client.send(Request(id=client.new_request_id(), method="tools/list"))
    assert client.session_state is S.READY  # (READY, SEND_REQUEST) -> READY


@pytest.mark.parametrize("late", ["before-initialize-is-sent", "after-initialize-is-sent"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_client_auto_discover_timeout_falls_back_and_drops_the_late_answer(
    mode: str, late: str
) -> None:
    client, server = _auto_client(), _server()
    probe, data = _send_probe(client)
    (auto,) = feed(server, data, mode)
    client.handshake_timed_out()
    assert client.session_state is S.NEW
    assert client.outstanding == ()
    init = _step(client, "initialize")
    late_answer = server.send(auto.reply)
    if late == "after-initialize-is-sent":
        server.receive_data(client.send(init))
        assert client.session_state is S.INITIALIZING
        assert feed(client, late_answer, mode) == []  # dropped silently
        assert client.session_state is S.INITIALIZING
    else:
        assert feed(client, late_answer, mode) == []  # dropped silently
        assert client.session_state is S.NEW
        server.receive_data(client.send(init))
        assert client.session_state is S.INITIALIZING
    (auto_init,) = drain(server)
    (note,) = feed(client, server.send(auto_init.reply), mode)
    assert client.session_state is S.INITIALIZED
    server.receive_data(client.send(note.message))
    assert client.session_state is S.READY and client.era == "legacy"
    assert _types(drain(client)) == [SessionOpened]
    assert _types(drain(server)) == [SessionOpened] and server.session_state is S.READY
    assert probe.id not in client.outstanding


def test_client_initialize_timeout_fails_the_session_and_its_calls() -> None:
    client = _legacy_client()
    call = client.call("tools/call", TOOL)
    init = _step(client, "initialize")
    client.send(init)
    assert client.session_state is S.INITIALIZING
    client.handshake_timed_out()
    assert client.session_state is S.FAILED
    events = drain(client)
    failed = _one_failed_call(events, call)
    assert isinstance(failed.error, RemoteProtocolError)
    assert client.outstanding == ()
    # The late answer is dropped, the state kept, and nothing more can start.
    assert feed(client, _result_line(init.id, {"protocolVersion": LEGACY}), "whole") == []
    assert client.session_state is S.FAILED
    with pytest.raises(LocalProtocolError):
        client.call("tools/call", TOOL)
    client.handshake_timed_out()  # no step in flight any more: a no-op
    assert client.session_state is S.FAILED and drain(client) == []


def test_client_initialize_timeout_hands_out_session_failed() -> None:
    # Every other way a handshake fails ends with a SessionFailed event; a timed-out
    # initialize must too, or an app waiting for SessionOpened/SessionFailed hangs.
    client = _legacy_client()
    init = _step(client, "initialize")
    client.send(init)
    client.handshake_timed_out()
    events = drain(client)
    assert [type(e) for e in events] == [SessionFailed], events
    assert client.session_state is S.FAILED


@pytest.mark.parametrize("mode", FEED_MODES)
def test_client_initialize_error_fails_the_session_and_live_calls(mode: str) -> None:
    client = _legacy_client()
    call = client.call("tools/call", TOOL)
    init = _step(client, "initialize")
    client.send(init)
    events = feed(client, _error_line(init.id, -32603), mode)
    (session_failed,) = [e for e in events if isinstance(e, SessionFailed)]
    assert isinstance(session_failed.error, PeerError) and session_failed.error.code == -32603
    assert _one_failed_call(events, call).error is session_failed.error
    assert len(events) == 2
    assert client.session_state is S.FAILED
    with pytest.raises(LocalProtocolError):
        client.call("tools/call", TOOL)
    with pytest.raises(LocalProtocolError):
        client.send(Request(id=client.new_request_id(), method="tools/list"))
    assert client.session_state is S.FAILED  # terminal: misuse does not turn it into ERROR
    client.receive_data(b"")
    assert drain(client) == [ConnectionClosed()]
    assert client.session_state is S.CLOSED  # (FAILED, CLOSE) -> CLOSED


def test_client_initialize_result_with_a_version_we_do_not_speak_fails() -> None:
    client = _legacy_client()
    init = _step(client, "initialize")
    client.send(init)
    result = {"protocolVersion": "1999-01-01", "capabilities": {}, "serverInfo": SERVER_INFO}
    (failed,) = feed(client, _result_line(init.id, result), "whole")
    assert isinstance(failed, SessionFailed)
    assert client.session_state is S.FAILED and client.era is None


def test_client_version_error_naming_our_version_retries_the_probe_once_then_fails() -> None:
    # A -32022 naming the version the probe used: the server may have refused for
    # another reason first, so the probe goes once more with it, and a second refusal fails.
    client = _auto_client()
    probe, _ = _send_probe(client)
    data = {"supported": [MODERN], "requested": MODERN}
    events = feed(client, _error_line(probe.id, -32022, data), "whole")
    assert _types(events) == [HandshakeStep]
    assert events[0].message.method == "server/discover" and events[0].message.id != probe.id
    client.send(events[0])
    events = feed(client, _error_line(events[0].message.id, -32022, data), "whole")
    assert _types(events) == [SessionFailed]
    assert events[0].error.code == -32022
    assert client.session_state is S.FAILED and client.outstanding == ()


@pytest.fixture
def future_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend a newer per-request version exists (as tests/test_connection_versions.py)."""
    monkeypatch.setattr(options_module, "MODERN_VERSIONS", (FUTURE, MODERN))


def _future_client() -> Connection:
    return _auto_client(versions=(FUTURE, MODERN, *LEGACY_VERSIONS))


@pytest.mark.usefixtures("future_version")
@pytest.mark.parametrize("mode", FEED_MODES)
def test_client_version_error_with_a_usable_version_retries_discover_once(mode: str) -> None:
    client, server = _future_client(), _server(versions=(MODERN,))
    _, data = _send_probe(client)
    (refusal,) = replies(feed(server, data, mode))
    assert refusal.error.code == -32022
    (again,) = feed(client, server.send(refusal), mode)
    assert isinstance(again, HandshakeStep) and again.message.method == "server/discover"
    assert client.session_state is S.DISCOVERING  # (DISCOVERING, RECV_VERSION_ERROR)
    retry = client.send(again.message)
    assert client.session_state is S.DISCOVERING  # (DISCOVERING, SEND_DISCOVER)
    (auto,) = feed(server, retry, mode)
    assert isinstance(auto, AutoReply)
    (opened,) = feed(client, server.send(auto.reply), mode)
    assert isinstance(opened, SessionOpened) and opened.protocol_version == MODERN
    assert client.session_state is S.MODERN


@pytest.mark.usefixtures("future_version")
def test_client_second_version_error_fails_without_fallback() -> None:
    client = _future_client()
    probe, _ = _send_probe(client)
    data = {"supported": [MODERN], "requested": FUTURE}
    again = feed(client, _error_line(probe.id, -32022, data), "whole")
    assert _types(again) == [HandshakeStep]
    client.send(again[0].message)
    data = {"supported": [FUTURE], "requested": MODERN}
    events = feed(client, _error_line(again[0].message.id, -32022, data), "whole")
    assert _types(events) == [SessionFailed]
    assert client.session_state is S.FAILED


@pytest.mark.parametrize(
    ("code", "data"),
    [
        (-32020, None),
        (-32021, {"requiredCapabilities": {"sampling": {}}}),
        (-32022, {"supported": [FUTURE], "requested": MODERN}),
        (-32022, None),
    ],
)
def test_client_recognised_modern_error_on_discover_fails_and_never_initializes(
    code: int, data: Any
) -> None:
    client = _auto_client()
    call = client.call("tools/call", TOOL)
    probe, _ = _send_probe(client)
    events = feed(client, _error_line(probe.id, code, data), "whole")
    assert not any(isinstance(e, HandshakeStep) for e in events)
    (session_failed,) = [e for e in events if isinstance(e, SessionFailed)]
    assert isinstance(session_failed.error, PeerError) and session_failed.error.code == code
    assert _one_failed_call(events, call).error is session_failed.error
    assert client.session_state is S.FAILED
    assert client.outstanding == () and drain(client) == []


@pytest.mark.parametrize("code", [METHOD_NOT_FOUND, INVALID_REQUEST, INVALID_PARAMS, -32603, -1])
def test_client_unrecognised_error_on_discover_falls_back(code: int) -> None:
    client = _auto_client()
    probe, _ = _send_probe(client)
    (step,) = feed(client, _error_line(probe.id, code), "whole")
    assert isinstance(step, HandshakeStep) and step.message.method == "initialize"
    assert client.session_state is S.NEW


def test_client_fallback_with_legacy_disabled_fails_the_session() -> None:
    client = _auto_client(versions=(MODERN,))
    call = client.call("tools/call", TOOL)
    probe, _ = _send_probe(client)
    events = feed(client, _error_line(probe.id, METHOD_NOT_FOUND), "whole")
    assert not any(isinstance(e, HandshakeStep) for e in events)
    assert len([e for e in events if isinstance(e, SessionFailed)]) == 1
    _one_failed_call(events, call)
    assert client.session_state is S.FAILED


def test_client_discover_timeout_with_legacy_disabled_fails_the_session() -> None:
    client = _auto_client(versions=(MODERN,))
    _send_probe(client)
    client.handshake_timed_out()
    assert _types(drain(client)) == [SessionFailed]
    assert client.session_state is S.FAILED


@pytest.mark.parametrize(
    "offered", [[LEGACY], ["1999-01-01", "2024-11-05"], ["2025-06-18", "2099-01-01"]]
)
def test_client_discover_result_without_a_modern_but_with_a_legacy_version_initializes(
    offered: list[str],
) -> None:
    client = _auto_client()
    probe, _ = _send_probe(client)
    result = {"supportedVersions": offered, "capabilities": {}}
    (step,) = feed(client, _result_line(probe.id, result), "whole")
    assert isinstance(step, HandshakeStep) and step.message.method == "initialize"
    assert client.session_state is S.NEW
    client.send(step.message)
    assert client.session_state is S.INITIALIZING


@pytest.mark.parametrize(
    "result",
    [
        {},  # a 2025 server that answers any request it does not know with {}
        {"capabilities": {}},
        {"supportedVersions": MODERN},  # a string, not a list
    ],
)
def test_client_probe_answered_by_no_discover_result_falls_back_to_initialize(
    result: Any,
) -> None:
    client = _auto_client()
    probe, _ = _send_probe(client)
    (step,) = feed(client, _result_line(probe.id, result), "whole")
    assert isinstance(step, HandshakeStep) and step.message.method == "initialize"
    client.send(step.message)
    assert client.session_state is S.INITIALIZING


@pytest.mark.parametrize(
    "result",
    [
        {"supportedVersions": ["1999-01-01"], "capabilities": {}},
        {"supportedVersions": [], "capabilities": {}},
        {"supportedVersions": [{"v": MODERN}]},
    ],
)
def test_client_discover_result_without_any_common_version_fails(result: Any) -> None:
    client = _auto_client()
    call = client.call("tools/call", TOOL)
    probe, _ = _send_probe(client)
    events = feed(client, _result_line(probe.id, result), "whole")
    assert not any(isinstance(e, HandshakeStep) for e in events)
    (session_failed,) = [e for e in events if isinstance(e, SessionFailed)]
    assert _one_failed_call(events, call).error is session_failed.error
    assert client.session_state is S.FAILED and client.era is None


def test_client_discover_result_with_only_legacy_versions_fails_when_legacy_is_disabled() -> None:
    client = _auto_client(versions=(MODERN,))
    probe, _ = _send_probe(client)
    result = {"supportedVersions": [LEGACY], "capabilities": {}}
    assert _types(feed(client, _result_line(probe.id, result), "whole")) == [SessionFailed]
    assert client.session_state is S.FAILED


# --- client: other eras, server requests, misuse, EOF ------------------------------------------


def test_client_modern_era_starts_modern_and_legacy_era_starts_with_initialize() -> None:
    modern = Connection(CLIENT, era="modern")
    assert modern.session_state is S.MODERN and drain(modern) == []
    legacy = _legacy_client()
    assert legacy.session_state is S.NEW
    legacy.send(_step(legacy, "initialize"))
    assert legacy.session_state is S.INITIALIZING
    auto_legacy_only = _auto_client(versions=LEGACY_VERSIONS)
    assert auto_legacy_only.session_state is S.NEW
    auto_legacy_only.send(_step(auto_legacy_only, "initialize"))  # no probe at all
    assert auto_legacy_only.session_state is S.INITIALIZING


def _ping_line(rid: Any) -> bytes:
    return raw({"jsonrpc": "2.0", "id": rid, "method": "ping"})


def test_client_answers_pings_during_the_2025_handshake_and_keeps_its_state() -> None:
    client = _legacy_client()
    init = _step(client, "initialize")
    client.send(init)
    (auto,) = feed(client, _ping_line("p1"), "whole")
    assert isinstance(auto, AutoReply) and client.session_state is S.INITIALIZING
    assert json.loads(client.send(auto.reply)) == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": SERVER_INFO}
    (note,) = feed(client, _result_line(init.id, result), "whole")
    assert client.session_state is S.INITIALIZED
    (auto,) = feed(client, _ping_line("p2"), "whole")
    assert isinstance(auto, AutoReply) and client.session_state is S.INITIALIZED
    client.send(auto.reply)
    client.send(note.message)
    assert client.session_state is S.READY
    assert _types(drain(client)) == [SessionOpened]
    roots = raw({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"})
    (request,) = feed(client, roots, "whole")
    assert request == Request(id="r1", method="roots/list")
    assert client.session_state is S.READY


@pytest.mark.parametrize("state", ["new", "discovering", "modern"])
def test_client_refuses_server_requests_outside_a_2025_session_and_keeps_its_state(
    state: str,
) -> None:
    if state == "modern":
        client = Connection(CLIENT, era="modern")
    else:
        client = _auto_client()
        if state == "discovering":
            _send_probe(client)
        else:
            _step(client, "server/discover")  # handed out, not sent
    before = client.session_state
    assert before.value == state
    (invalid,) = feed(client, _ping_line(7), "whole")
    assert isinstance(invalid, InvalidMessage) and invalid.reply is None
    assert invalid.error.code == INVALID_REQUEST and invalid.error.request_id == 7
    assert client.session_state is before


@pytest.mark.parametrize("state", ["new", "discovering", "initialized"])
def test_client_request_before_the_session_is_open_is_misuse_and_enters_error(state: str) -> None:
    client = _auto_client(versions=LEGACY_VERSIONS) if state == "initialized" else _auto_client()
    if state == "discovering":
        _send_probe(client)
    elif state == "initialized":
        init = _step(client, "initialize")
        client.send(init)
        result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": SERVER_INFO}
        (note,) = feed(client, _result_line(init.id, result), "whole")
    assert client.session_state.value == state
    with pytest.raises(LocalProtocolError):
        client.send(Request(id=client.new_request_id(), method="tools/list"))
    assert client.session_state is S.ERROR
    with pytest.raises(LocalProtocolError):
        client.call("tools/call", TOOL)
    if state == "initialized":
        with pytest.raises(LocalProtocolError):
            client.send(note.message)  # (ERROR, SEND_INITIALIZED) is missing too
    client.receive_data(b"")
    closed = drain(client)[-1]
    assert isinstance(closed, ConnectionClosed)
    assert client.session_state is S.ERROR  # (ERROR, CLOSE) -> ERROR


@pytest.mark.parametrize("state", ["new", "discovering", "modern", "initializing", "failed"])
def test_client_end_of_stream_closes_the_session(state: str) -> None:
    client = Connection(CLIENT, era="modern") if state == "modern" else _auto_client()
    if state == "new":
        _step(client, "server/discover")  # handed out, never sent
    elif state in ("discovering", "failed"):
        probe, _ = _send_probe(client)
        if state == "failed":
            feed(client, _error_line(probe.id, -32020), "whole")
    elif state == "initializing":
        probe, _ = _send_probe(client)
        client.handshake_timed_out()
        client.send(_step(client, "initialize"))
    assert client.session_state.value == state
    expected = tuple(client.outstanding)
    client.receive_data(b"")
    assert drain(client) == [ConnectionClosed(unanswered=expected)]
    assert client.session_state is S.CLOSED
    assert client.next_event() == ConnectionClosed(unanswered=expected)


# --- server ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", FEED_MODES)
def test_server_handshake_new_initializing_initialized_ready(mode: str) -> None:
    server = _server()
    assert server.session_state is S.NEW
    (auto,) = feed(server, _initialize_line("init"), mode)
    assert isinstance(auto, AutoReply) and auto.request.id == "init"
    assert server.session_state is S.INITIALIZING
    assert isinstance(auto.reply, ResultResponse)
    assert auto.reply.result["protocolVersion"] == LEGACY
    server.send(auto.reply)
    assert server.session_state is S.INITIALIZED
    (opened,) = feed(server, INITIALIZED_LINE, mode)
    assert opened == SessionOpened(
        era="legacy", protocol_version=LEGACY, peer_info=CLIENT_INFO, peer_capabilities=ALL_CAPS
    )
    assert server.session_state is S.READY
    assert feed(server, INITIALIZED_LINE, mode) == []  # a duplicate is ignored
    assert server.session_state is S.READY


@pytest.mark.parametrize("state", ["initializing", "initialized", "ready"])
@pytest.mark.parametrize("mode", FEED_MODES)
def test_server_second_initialize_is_refused_and_the_state_kept(mode: str, state: str) -> None:
    server = _server()
    (auto,) = feed(server, _initialize_line(1), mode)
    if state != "initializing":
        server.send(auto.reply)
    if state == "ready":
        feed(server, INITIALIZED_LINE, mode)
    assert server.session_state.value == state
    (invalid,) = feed(server, _initialize_line(2), mode)
    assert isinstance(invalid, InvalidMessage) and invalid.error.code == INVALID_REQUEST
    assert invalid.reply == error_response(2, invalid.error)
    assert server.session_state.value == state
    assert json.loads(server.send(invalid.reply))["id"] == 2
    assert server.session_state.value == state


@pytest.mark.parametrize("mode", FEED_MODES)
def test_server_initialized_before_initialize_is_invalid(mode: str) -> None:
    server = _server()
    (invalid,) = feed(server, INITIALIZED_LINE, mode)
    assert isinstance(invalid, InvalidMessage) and invalid.reply is None
    assert invalid.error.code == INVALID_REQUEST
    assert server.session_state is S.NEW
    feed(server, _initialize_line(1), mode)
    # Before the initialize result went out: still too early.
    (invalid,) = feed(server, INITIALIZED_LINE, mode)
    assert isinstance(invalid, InvalidMessage) and invalid.reply is None
    assert server.session_state is S.INITIALIZING


@pytest.mark.parametrize("mode", FEED_MODES)
def test_server_legacy_request_before_initialize_is_refused_with_32602_invalid_params(
    mode: str,
) -> None:
    server = _server()
    line = raw({"jsonrpc": "2.0", "id": "r1", "method": "tools/list"})
    (invalid,) = feed(server, line, mode)
    assert isinstance(invalid, InvalidMessage) and invalid.reply is not None
    assert invalid.error.code == INVALID_PARAMS and invalid.reply.error.code == INVALID_PARAMS
    assert invalid.reply.id == "r1"
    assert server.session_state is S.NEW
    # While initialize is unanswered it is still refused with -32602 ...
    (auto,) = feed(server, _initialize_line(1), mode)
    (invalid,) = feed(server, raw({"jsonrpc": "2.0", "id": "r2", "method": "tools/list"}), mode)
    assert isinstance(invalid, InvalidMessage) and invalid.error.code == INVALID_PARAMS
    assert server.session_state is S.INITIALIZING
    # ... and handed out once the result went out (before notifications/initialized).
    server.send(auto.reply)
    (request,) = feed(server, raw({"jsonrpc": "2.0", "id": "r3", "method": "tools/list"}), mode)
    assert request == Request(id="r3", method="tools/list")
    assert server.session_state is S.INITIALIZED
    assert server.request_info("r3").era == "legacy"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"capabilities": {}, "clientInfo": CLIENT_INFO},
        {"protocolVersion": 20251125, "capabilities": {}, "clientInfo": CLIENT_INFO},
        {"protocolVersion": LEGACY, "capabilities": [], "clientInfo": CLIENT_INFO},
        {"protocolVersion": LEGACY, "capabilities": {}},
        {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": "me"},
    ],
)
def test_server_initialize_with_bad_params_is_refused_with_32602(params: Any) -> None:
    server = _server()
    (invalid,) = feed(server, _initialize_line("bad", params), "whole")
    assert isinstance(invalid, InvalidMessage) and invalid.error.code == INVALID_PARAMS
    assert invalid.reply is not None and invalid.reply.id == "bad"
    assert server.session_state is S.NEW
    server.send(invalid.reply)
    (auto,) = feed(server, _initialize_line("good"), "whole")  # the client may try again
    assert isinstance(auto, AutoReply) and server.session_state is S.INITIALIZING


def test_server_initialize_without_params_is_refused_with_32602() -> None:
    server = _server()
    line = raw({"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    (invalid,) = feed(server, line, "whole")
    assert isinstance(invalid, InvalidMessage) and invalid.error.code == INVALID_PARAMS
    assert server.session_state is S.NEW


@pytest.mark.parametrize("mode", FEED_MODES)
def test_server_speaking_only_2026_answers_initialize_with_32601(mode: str) -> None:
    server = _server(versions=(MODERN,))
    (invalid,) = feed(server, _initialize_line(1), mode)
    assert isinstance(invalid, InvalidMessage)
    assert invalid.error.code == METHOD_NOT_FOUND
    assert invalid.reply is not None and invalid.reply.error.code == METHOD_NOT_FOUND
    assert invalid.reply.id == 1
    assert server.session_state is S.NEW


def test_server_app_refusing_initialize_goes_back_to_new() -> None:
    server = _server()
    (auto,) = feed(server, _initialize_line(1), "whole")
    assert server.session_state is S.INITIALIZING
    # The app sends an error instead of the auto reply: (INITIALIZING, SEND_INITIALIZE_ERROR).
    server.send(error_response(1, RemoteProtocolError("not you", code=-32000)))
    assert server.session_state is S.NEW
    (auto,) = feed(server, _initialize_line(2), "whole")
    assert isinstance(auto, AutoReply) and server.session_state is S.INITIALIZING


def test_server_modern_requests_do_not_touch_the_session() -> None:
    server = _server()
    params = {"_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}}
    line = raw({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params})
    (request,) = feed(server, line, "whole")
    assert isinstance(request, Request)
    server.send(ResultResponse(id=1, result={"tools": []}))
    assert server.session_state is S.NEW


@pytest.mark.parametrize("state", ["new", "initializing", "initialized"])
def test_server_request_to_the_client_before_ready_is_misuse_and_enters_error(state: str) -> None:
    server = _server()
    if state != "new":
        (auto,) = feed(server, _initialize_line(1), "whole")
        if state == "initialized":
            server.send(auto.reply)
    assert server.session_state.value == state
    with pytest.raises(LocalProtocolError):
        server.send(Request(id=server.new_request_id(), method="ping"))
    assert server.session_state is S.ERROR
    assert server.outstanding == ()
    server.receive_data(b"")
    assert drain(server) == [ConnectionClosed()]
    assert server.session_state is S.ERROR


def test_server_request_to_the_client_when_ready_keeps_ready() -> None:
    server = _server()
    (auto,) = feed(server, _initialize_line(1), "whole")
    server.send(auto.reply)
    feed(server, INITIALIZED_LINE, "whole")
    ping = Request(id=server.new_request_id(), method="ping")
    assert json.loads(server.send(ping))["method"] == "ping"
    assert server.session_state is S.READY and server.outstanding == (ping.id,)


@pytest.mark.parametrize("state", ["new", "initializing", "ready"])
def test_server_end_of_stream_closes_the_session(state: str) -> None:
    server = _server()
    if state != "new":
        (auto,) = feed(server, _initialize_line(1), "whole")
        if state == "ready":
            server.send(auto.reply)
            feed(server, INITIALIZED_LINE, "whole")
    assert server.session_state.value == state
    server.receive_data(b"")
    assert drain(server) == [ConnectionClosed()]
    assert server.session_state is S.CLOSED
    with pytest.raises(LocalProtocolError):
        server.send(Request(id=server.new_request_id(), method="ping"))
    assert server.session_state is S.CLOSED  # terminal: misuse leaves it as it is


@pytest.mark.parametrize(
    "path", ["discover-timeout-legacy-disabled", "32601-legacy-disabled", "initialize-timeout"]
)
def test_session_failed_comes_before_the_calls_failed_events(path: str) -> None:
    # docs/connection.md: "SessionFailed(error) ... every live call fails (its
    # CallEvent(Failed) follows)".
    if path == "initialize-timeout":
        client = _legacy_client()
        client.send(_step(client, "initialize"))
    else:
        client = _auto_client(versions=(MODERN,))
        probe, _ = _send_probe(client)
    call = client.call("tools/call", TOOL)
    if path == "32601-legacy-disabled":
        client.receive_data(_error_line(probe.id, METHOD_NOT_FOUND))
    else:
        client.handshake_timed_out()
    events = drain(client)
    assert _types(events) == [SessionFailed, CallEvent], events
    assert _one_failed_call(events, call).error is events[0].error


# --- Nothing moves the session but its table ---------------------------------------------------

_STATE_SLOT = Session.__dict__["state"]


class _TracedSession(Session):
    """A Session that fails the test when its state is set from outside its own methods."""

    __slots__ = ()

    @property  # type: ignore[override]
    def state(self) -> SessionState:
        return _STATE_SLOT.__get__(self, Session)  # type: ignore[no-any-return]

    @state.setter
    def state(self, value: SessionState) -> None:
        setter = sys._getframe(1).f_code.co_name
        assert setter in ("__init__", "local", "remote"), f"state set by {setter}()"
        _STATE_SLOT.__set__(self, value)


@pytest.fixture
def traced_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_module, "Session", _TracedSession)


def test_the_walk_covers_every_pair() -> None:
    assert len(ALL_PAIRS) == len(TABLES) * len(SessionState) * len(SessionInput) == 360


def test_the_traced_session_catches_a_direct_assignment(traced_sessions: None) -> None:
    client = Connection(CLIENT, era="modern")
    assert isinstance(client._session, _TracedSession)
    with pytest.raises(AssertionError, match="state set by"):
        client._session.state = S.FAILED


@pytest.mark.usefixtures("traced_sessions")
def test_client_era_modern_opens_through_start_modern() -> None:
    client = Connection(CLIENT, era="modern")
    assert client.session_state is S.MODERN  # (NEW, START_MODERN) -> MODERN
    assert (S.NEW, I.START_MODERN) in CLIENT_TRANSITIONS


@pytest.mark.usefixtures("traced_sessions")
@pytest.mark.parametrize("signal", ["32601", "32602", "timeout"])
def test_client_without_legacy_fails_through_no_fallback(signal: str) -> None:
    client = _auto_client(versions=(MODERN,))
    call = client.call("tools/call", TOOL)
    probe, _ = _send_probe(client)
    if signal == "timeout":
        client.handshake_timed_out()
    else:
        client.receive_data(_error_line(probe.id, -int(signal)))
    events = drain(client)
    # (DISCOVERING, RECV_LEGACY_SIGNAL_NO_FALLBACK) -> FAILED, never NEW on the way.
    assert client.session_state is S.FAILED
    assert _types(events) == [SessionFailed, CallEvent]
    assert "legacy is disabled" in events[0].error.message
    _one_failed_call(events, call)


@pytest.mark.usefixtures("traced_sessions")
@pytest.mark.parametrize("mode", FEED_MODES)
def test_every_handshake_path_moves_only_through_the_tables(mode: str) -> None:
    # Both eras end to end, a fallback, a retry and a failure, with sessions that
    # refuse any state change made outside Session.local/remote.
    for client_options, server_options in [
        ({}, {}),
        ({}, {"versions": LEGACY_VERSIONS}),
        ({"era": "legacy"}, {}),
    ]:
        client, server = _auto_client(**client_options), _server(**server_options)
        to_server = drain(client)
        while to_server:  # every step and every reply (a refusal included) delivered
            to_client = []
            for event in to_server:
                if isinstance(event, HandshakeStep):
                    to_client += feed(server, client.send(event), mode)
            to_server = []
            for event in to_client:
                if isinstance(event, (AutoReply, InvalidMessage)):
                    to_server += feed(client, server.send(event), mode)
        assert client.session_state in (S.MODERN, S.READY)
        assert server.session_state in (S.NEW, S.READY)
    client = _legacy_client()
    client.send(_step(client, "initialize"))
    client.handshake_timed_out()
    assert client.session_state is S.FAILED
    client = _auto_client()
    probe, _ = _send_probe(client)
    feed(client, _error_line(probe.id, -32020), mode)
    assert client.session_state is S.FAILED
    client.receive_data(b"")
    drain(client)
    assert client.session_state is S.CLOSED
