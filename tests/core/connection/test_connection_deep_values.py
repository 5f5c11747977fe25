"""Deep and odd peer values through the connection: refused at the door, or shown bounded.

A message nested deeper than ``max_depth`` (128 by default) is a -32700
``InvalidMessage`` on both JSON backends, whichever way it arrives (bytes or a
decoded value), and the connection reads the next message as if nothing had
happened.  With the bound raised out of the way, the reproductions of issue 11
(values about a thousand deep in ``resultType``, an input request's ``method``
and ``mode``, the ``protocolVersion`` an ``initialize`` result picks) end the
call or the session with a short message instead of raising ``RecursionError``
out of ``next_event``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from support.pairing import ALL_CAPS, CLIENT_INFO, SERVER_INFO, drain

from mrtr_core import (
    CLIENT,
    SERVER,
    CallEvent,
    Connection,
    ErrorObject,
    ErrorResponse,
    HandshakeStep,
    InvalidMessage,
    LocalProtocolError,
    LogMessage,
    Progress,
    RemoteProtocolError,
    Request,
    ResultResponse,
    SessionFailed,
)
from mrtr_core._errors import PARSE_ERROR
from mrtr_core.engine import Failed, SendRequest
from mrtr_core.wire import Codec
from mrtr_core.wire._depth import DEFAULT_MAX_DEPTH

T = TypeVar("T")
BACKENDS = ("stdlib", "orjson")
APP_STACK = 100  # frames between a transport's parse and the app's next_event


def nested_text(depth: int) -> bytes:
    return b"[" * depth + b"0" + b"]" * depth


def nested_list(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def at_stack_depth(frames: int, action: Callable[[], T]) -> T:
    return action() if frames == 0 else at_stack_depth(frames - 1, action)


def repr_fails_there(value: Any) -> bool:
    try:
        at_stack_depth(APP_STACK, lambda: repr(value))
    except RecursionError:
        return True
    return False


def tool_call(rid: int, arguments: bytes = b"{}") -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"t","arguments":%s,'
        b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        b'"io.modelcontextprotocol/clientCapabilities":{}}}}\n' % (rid, arguments)
    )


def server(**options: Any) -> Connection:
    return Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}}, **options)


# --- the depth bound --------------------------------------------------------------------


def _refused(event: Any, max_depth: int) -> None:
    assert isinstance(event, InvalidMessage), event
    assert event.error.code == PARSE_ERROR
    assert event.error.message == (
        f"parse error: the message nests deeper than max_depth={max_depth}"
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("framing", ["lines", "messages"])
def test_a_message_deeper_than_max_depth_is_a_parse_error_and_the_next_one_is_read(
    backend: str, framing: str
) -> None:
    conn = server(json=backend, framing=framing)
    # The request is 2 deep (envelope, params) around the arguments.
    fits = tool_call(1, nested_text(DEFAULT_MAX_DEPTH - 2))
    too_deep = tool_call(2, nested_text(DEFAULT_MAX_DEPTH - 1))
    after = tool_call(3)
    if framing == "lines":
        conn.receive_data(fits + too_deep + after)
        first, refused, last = drain(conn)
    else:
        first, refused, last = [
            event for data in (fits, too_deep, after) for event in feed_message(conn, data)
        ]
    assert isinstance(first, Request) and first.id == 1
    _refused(refused, DEFAULT_MAX_DEPTH)
    # Parsed before its depth was measured, so the refusal is addressed to its id.
    answer = json.loads(conn.send(refused))
    assert answer["error"]["code"] == PARSE_ERROR and answer["id"] == 2
    assert isinstance(last, Request) and last.id == 3  # nothing lost, nothing held


def feed_message(conn: Connection, data: bytes) -> list[Any]:
    conn.receive_data(data.rstrip(b"\n"))
    return drain(conn)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("depth", [129, 1000, 1024, 1025, 100_000])
def test_every_depth_past_the_bound_is_refused_by_both_backends(backend: str, depth: int) -> None:
    conn = server(json=backend)
    conn.receive_data(tool_call(1, nested_text(depth)) + tool_call(2))
    refused, after = drain(conn)
    assert isinstance(refused, InvalidMessage) and refused.error.code == PARSE_ERROR
    assert len(refused.error.message) < 200
    assert isinstance(after, Request) and after.id == 2


def test_a_decoded_value_deeper_than_max_depth_is_refused_as_its_bytes_would_be() -> None:
    conn = server(max_depth=10)
    deep = json.loads(tool_call(1, nested_text(9)))  # 11 deep
    conn.receive_message(deep)
    conn.receive_message(json.loads(tool_call(2, nested_text(8))))  # 10 deep: fits
    loop: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/x"}
    loop["params"] = {"again": loop}  # only an app can hand over a value that contains itself
    conn.receive_message(loop)
    conn.receive_data(tool_call(3, nested_text(9)))
    first, second, third, fourth = drain(conn)
    _refused(first, 10)
    assert isinstance(second, Request) and second.id == 2
    _refused(third, 10)
    _refused(fourth, 10)
    assert first.reply is not None and fourth.reply is not None
    # The same answer, whichever way it came, each under the id it could be read with.
    answers = [json.loads(conn.send(event)) for event in (first, fourth)]
    assert [a.pop("id") for a in answers] == [1, 3]
    assert answers[0] == answers[1]


def test_max_depth_comes_from_the_option_or_the_given_codec() -> None:
    line = b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":[[]]}}\n'  # 4 deep
    for options, refused in (
        ({"max_depth": 3}, True),
        ({"max_depth": 4}, False),
        ({"json": Codec("stdlib", max_depth=3)}, True),
        ({"json": Codec("orjson", max_depth=3), "max_depth": 4}, False),
        ({"json": Codec("orjson", max_depth=30), "max_depth": 3}, True),
        ({}, False),
    ):
        conn = server(**options)
        conn.receive_data(line)
        (event,) = drain(conn)
        assert isinstance(event, InvalidMessage) is refused, options


@pytest.mark.parametrize("bad", [0, -5, 2.5, False, "64"])
def test_max_depth_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(LocalProtocolError, match="max_depth must be a positive integer"):
        server(max_depth=bad)
    with pytest.raises(LocalProtocolError, match="max_depth must be a positive integer"):
        server(json=Codec("stdlib"), max_depth=bad)


# --- the reproductions of issue 11, with the bound out of the way ------------------------


def client_with_leg_out(backend: str) -> tuple[Connection, int]:
    client = Connection(
        CLIENT,
        era="modern",
        info=CLIENT_INFO,
        capabilities=ALL_CAPS,
        json=backend,
        max_depth=10_000,
    )
    client.call("tools/call", {"name": "t"})
    (leg,) = drain(client)
    client.send(leg)
    (rid,) = client.outstanding
    assert isinstance(rid, int)
    return client, rid


def deep_results(backend: str, result_template: bytes) -> Iterator[tuple[bytes, int]]:
    """(``result_template`` with ``%s`` nested 600..1100 deep, the depth) for each depth."""
    for depth in range(600, 1100, 10):
        yield result_template % nested_text(depth), depth


def feed_both_ways(
    backend: str, result_template: bytes, pick: Callable[[Any], Any], expected: str
) -> None:
    """Each deep result as bytes (receive_data), and as a transport decodes it
    (Codec.loads, then receive_message) with next_event called from an app's stack,
    deeper than the parse."""
    codec = Codec(backend, max_depth=10_000)  # type: ignore[arg-type]
    risky = 0
    for result, _depth in deep_results(backend, result_template):
        for way in ("bytes", "decoded"):
            client, rid = client_with_leg_out(backend)
            line = b'{"jsonrpc":"2.0","id":%d,"result":%s}' % (rid, result)
            try:
                value = codec.loads(line)
            except RemoteProtocolError:
                value = None  # deeper than this backend parses: a -32700 either way
            if way == "bytes":
                client.receive_data(line + b"\n")
            elif value is not None:
                client.receive_message(value)
            else:
                continue
            frames = APP_STACK if way == "decoded" else 0
            (event,) = at_stack_depth(frames, lambda c=client: drain(c))  # type: ignore[misc]
            if isinstance(event, InvalidMessage):
                # Deeper than the backend parses at that stack: a -32700, as it should.
                assert way == "bytes" and event.error.code == PARSE_ERROR, event
                continue
            assert isinstance(event, CallEvent) and isinstance(event.event, Failed), event
            assert event.event.error.message == expected
            risky += repr_fails_there(pick(value["result"]))
    assert risky, "no value deep enough to have broken repr: the test shows nothing"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deep_result_type_fails_the_call_not_next_event(backend: str) -> None:
    feed_both_ways(
        backend,
        b'{"resultType":%s}',
        lambda result: result["resultType"],
        "unknown resultType list [[[…]]]",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deep_input_request_method_fails_the_call_not_next_event(backend: str) -> None:
    feed_both_ways(
        backend,
        b'{"resultType":"input_required","inputRequests":{"k":{"method":%s}}}',
        lambda result: result["inputRequests"]["k"]["method"],
        "input request 'k' (list [[[…]]]): unknown input request method list [[[…]]]",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deep_elicitation_mode_fails_the_call_not_next_event(backend: str) -> None:
    feed_both_ways(
        backend,
        b'{"resultType":"input_required","inputRequests":'
        b'{"k":{"method":"elicitation/create","params":{"mode":%s}}}}',
        lambda result: result["inputRequests"]["k"]["params"]["mode"],
        "input request 'k' ('elicitation/create'): unknown elicitation mode list [[[…]]]",
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deep_protocol_version_fails_the_session_not_next_event(backend: str) -> None:
    codec = Codec(backend, max_depth=10_000)  # type: ignore[arg-type]
    risky = 0
    for depth in range(600, 1100, 10):
        client = Connection(CLIENT, era="legacy", json=backend, max_depth=10_000)
        (step,) = drain(client)
        assert isinstance(step, HandshakeStep)
        client.send(step)
        line = b'{"jsonrpc":"2.0","id":%d,"result":{"protocolVersion":%s,"capabilities":{}}}' % (
            step.message.id,
            nested_text(depth),
        )
        try:
            value = codec.loads(line)
        except RemoteProtocolError:
            continue  # deeper than this backend parses: a -32700, tested above
        client.receive_message(value)
        (event,) = at_stack_depth(APP_STACK, lambda c=client: drain(c))  # type: ignore[misc]
        assert isinstance(event, SessionFailed), event
        assert event.error.message == (
            "the server chose protocol version list [[[…]]], which we do not speak"
        )
        risky += repr_fails_there(value["result"]["protocolVersion"])
    assert risky, "no value deep enough to have broken repr: the test shows nothing"


# --- long strings are cut ------------------------------------------------------------------


def test_a_huge_protocol_version_in_meta_is_cut_in_the_error() -> None:
    conn = server()
    version = "v" * 1_000_000
    conn.receive_data(
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":'
        b'{"io.modelcontextprotocol/protocolVersion":"%s",'
        b'"io.modelcontextprotocol/clientCapabilities":{}}}}\n' % version.encode()
    )
    (event,) = drain(conn)
    assert isinstance(event, InvalidMessage)
    assert event.error.message == "unsupported protocol version '" + "v" * 40 + "'…"
    assert event.error.data["requested"] == version  # the data keeps it, for the peer


def test_an_answer_to_a_huge_unknown_id_is_reported_with_the_id_cut() -> None:
    client, _ = client_with_leg_out("stdlib")
    rid = "r" * 1_000_000
    client.receive_data(b'{"jsonrpc":"2.0","id":"%s","result":{}}\n' % rid.encode())
    (event,) = drain(client)
    assert isinstance(event, InvalidMessage) and event.error.request_id == rid
    assert event.error.message == "response for unknown request id '" + "r" * 40 + "'…"


def test_a_server_request_with_a_huge_method_outside_a_legacy_session_is_cut() -> None:
    client, _ = client_with_leg_out("stdlib")
    method = "m" * 1_000_000
    client.receive_data(b'{"jsonrpc":"2.0","id":5,"method":"%s"}\n' % method.encode())
    (event,) = drain(client)
    assert isinstance(event, InvalidMessage)
    assert event.error.message == (
        "a server sent a '" + "m" * 40 + "'… request outside a 2025-era session"
    )
    assert event.error.request_id == 5


def test_a_reused_huge_request_id_is_cut_in_the_error() -> None:
    conn = server()
    rid = "q" * 1_000_000
    line = tool_call(0).replace(b'"id":0', b'"id":"%s"' % rid.encode())
    conn.receive_data(line + line)
    first, second = drain(conn)
    assert isinstance(first, Request)
    assert isinstance(second, InvalidMessage)
    assert second.error.message.startswith("request id '" + "q" * 40 + "'… is already in use")
    assert second.error.request_id == rid


# --- the app's handles of the wrong type ------------------------------------------------


def test_handles_of_the_wrong_type_are_local_protocol_errors_not_type_errors() -> None:
    unhashable: Any = nested_list(3)
    client = Connection(CLIENT, era="modern")
    conn = server()
    leg = SendRequest(params={}, timeout=None, leg=1)
    for misuse in (
        lambda: client.cancel(unhashable),
        lambda: client.cancel("1"),
        lambda: client.provide(unhashable, "k", {}),
        lambda: client.leg_broken(unhashable),
        lambda: client.send(CallEvent(call=unhashable, event=leg)),
        lambda: client.send(Request(id=unhashable, method="tools/list")),
        lambda: client.send(Request(id=True, method="tools/list")),
        lambda: conn.request_info(unhashable),
        lambda: conn.send(ResultResponse(id=unhashable, result={})),
        lambda: conn.send(ErrorResponse(id=unhashable, error=ErrorObject(code=1, message="x"))),
    ):
        with pytest.raises(LocalProtocolError):
            misuse()
    # What is a no-op for an unknown id is one for these too.
    conn.response_stream_closed(unhashable)
    assert conn.send(Progress(request_id=unhashable, progress=1)) == b""
    assert conn.send(LogMessage(request_id=unhashable, level="info", data="x")) == b""
    assert drain(conn) == [] and client.outstanding == ()


# --- an answer that cannot be read ends what it answers ------------------------------


def _client_with_a_leg_out(backend: str = "orjson") -> tuple[Connection, int]:
    conn = Connection(CLIENT, era="modern", info=CLIENT_INFO, json=backend)  # type: ignore[arg-type]
    call = conn.call("tools/call", {"name": "t"})
    leg = conn.next_event()
    assert isinstance(leg, CallEvent) and isinstance(leg.event, SendRequest)
    conn.send(leg)
    return conn, call


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "answer",
    [
        b'{"jsonrpc":"2.0","id":1,"result":{"deep":' + nested_text(DEFAULT_MAX_DEPTH) + b"}}",
        b'{"jsonrpc":"2.0","id":1,"result":5}',  # readable JSON, not a result
        b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":1}}',  # not an error object
    ],
)
def test_an_answer_to_a_leg_that_cannot_be_read_fails_the_call_at_once(
    backend: str, answer: bytes
) -> None:
    # Found through `mrtr call` against a server whose result was too deep: the answer
    # was reported as unreadable and the call waited forever for the answer it had had.
    conn, call = _client_with_a_leg_out(backend)
    conn.receive_data(answer + b"\n")
    (event,) = drain(conn)
    assert isinstance(event, CallEvent) and event.call == call, event
    assert isinstance(event.event, Failed)
    assert "unreadable answer" in str(event.event.error)
    assert conn.outstanding == ()


def test_an_unreadable_answer_to_a_plain_request_is_its_error_response() -> None:
    conn = Connection(CLIENT, era="modern", info=CLIENT_INFO)
    conn.send(Request(id=5, method="tools/list", params={}))
    conn.receive_data(b'{"jsonrpc":"2.0","id":5,"result":[]}\n')
    (event,) = drain(conn)
    assert isinstance(event, ErrorResponse) and event.id == 5
    assert event.error.message.startswith("unreadable answer: ")


def test_an_unreadable_answer_to_an_id_we_never_sent_is_only_reported() -> None:
    conn, _ = _client_with_a_leg_out()
    conn.receive_data(b'{"jsonrpc":"2.0","id":9,"result":5}\n')
    (event,) = drain(conn)
    assert isinstance(event, InvalidMessage) and event.error.request_id == 9
    assert conn.outstanding == (1,)  # the call's leg still waits for its own answer
