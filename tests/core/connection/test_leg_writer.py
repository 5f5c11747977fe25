"""How ``send()`` writes a call's legs: the part every leg repeats encoded once, the
round fields joined on, the same bytes as ``encode(send_message(...))``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mrtr_core import CLIENT, CallEvent, Connection, LocalProtocolError, Request
from mrtr_core._connection._calls import LegWriter
from mrtr_core.engine import DispatchInput, SendRequest, SendRetry
from mrtr_core.wire import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    Codec,
    ElicitResult,
    JsonBackend,
)
from mrtr_core.wire._codec import json_backend, writes_compact

FORM = {
    "method": "elicitation/create",
    "params": {"message": "Sure?", "requestedSchema": {"type": "object"}},
}


def _input_required(rid: int, *, asks: bool, state: str | None) -> bytes:
    result: dict[str, Any] = {"resultType": "input_required"}
    if asks:
        result["inputRequests"] = {"ok": FORM}
    if state is not None:
        result["requestState"] = state
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n"


def _pair(params: dict[str, Any], **options: Any) -> tuple[list[Connection], list[int]]:
    """Two client connections making the same call: one writes with send(), the
    other builds the message with send_message() and encodes it."""
    options.setdefault("capabilities", {"elicitation": {}})
    conns = [Connection(CLIENT, era="modern", **options) for _ in range(2)]
    calls = [conn.call("tools/call", params) for conn in conns]
    return conns, calls


def _send_both(conns: list[Connection], event: Any, twin: Any) -> tuple[bytes, Request]:
    line = conns[0].send(event)
    message = conns[1].send_message(twin)
    assert isinstance(message, Request)
    assert line == conns[1].encode(message)
    return line, message


def _leg(conn: Connection) -> CallEvent:
    """The call's next leg to send, answering its input requests on the way."""
    for _ in range(10):
        event = conn.next_event()
        if isinstance(event, CallEvent) and isinstance(event.event, (SendRequest, SendRetry)):
            return event
        if isinstance(event, CallEvent) and isinstance(event.event, DispatchInput):
            conn.provide(event.call, event.event.key, ElicitResult(action="accept"))
    raise AssertionError(f"no leg to send: {event!r}")


def _run_flow(params: dict[str, Any], **options: Any) -> list[dict[str, Any]]:
    """Three legs (a round with an input request, then a requestState-only round),
    written both ways; returns each leg's params as written."""
    conns, _ = _pair(params, **options)
    written = []
    ids = []
    replies = [
        None,
        lambda rid: _input_required(rid, asks=True, state="s1"),
        lambda rid: _input_required(rid, asks=False, state="s2"),
    ]
    for reply in replies:
        if reply is not None:
            for conn in conns:
                conn.receive_data(reply(ids[-1]))
        events = [_leg(conn) for conn in conns]
        line, message = _send_both(conns, events[0], events[1])
        value = json.loads(line)
        assert value == {
            "jsonrpc": "2.0",
            "id": message.id,
            "method": "tools/call",
            "params": message.params,
        }
        ids.append(value["id"])
        written.append(value["params"])
    return written


@pytest.mark.parametrize(
    "params",
    [
        {"name": "book", "arguments": {"party": 4}},
        {"_meta": {"trace": "t"}, "name": "book"},
        {"name": "book", "requestState": "stale", "inputResponses": {"x": {}}},
        {},
    ],
)
def test_every_leg_carries_the_params_with_meta_and_this_rounds_fields(
    params: dict[str, Any],
) -> None:
    first, second, third = _run_flow(params)
    base = {k: v for k, v in params.items() if k not in ("requestState", "inputResponses")}
    for written in (first, second, third):
        meta = written["_meta"]
        assert meta[META_PROTOCOL_VERSION] == "2026-07-28"
        assert META_CLIENT_CAPABILITIES in meta
        assert meta.get("trace") == params.get("_meta", {}).get("trace")
        assert (
            {k: v for k, v in written.items() if k not in ("_meta",)} | {"_meta": params["_meta"]}
            if "_meta" in params
            else True
        )
    assert {k: v for k, v in first.items() if k != "_meta"} == {
        k: v for k, v in base.items() if k != "_meta"
    }
    assert second["inputResponses"] == {"ok": {"action": "accept"}}
    assert second["requestState"] == "s1"
    assert "inputResponses" not in third and third["requestState"] == "s2"
    assert {k: v for k, v in third.items() if k != "requestState"} == {
        k: v for k, v in first.items()
    }


def test_without_a_newline_for_whole_messages() -> None:
    conn = Connection(CLIENT, era="modern", framing="messages", capabilities={"elicitation": {}})
    conn.call("tools/call", {"name": "x"})
    line = conn.send(_leg(conn))
    assert not line.endswith(b"\n")
    conn.receive_data(_input_required(json.loads(line)["id"], asks=True, state="s"))
    retry = conn.send(_leg(conn))
    assert not retry.endswith(b"\n")
    assert json.loads(retry)["params"]["requestState"] == "s"


def _spaced(obj: Any) -> bytes:
    return b" " + json.dumps(obj, separators=(", ", ": ")).encode()


def test_a_backend_of_the_apps_own_writes_whole_messages() -> None:
    codec = Codec(JsonBackend("spaced", json.loads, _spaced))
    assert not writes_compact(codec.backend)
    assert writes_compact(Codec("stdlib").backend) and writes_compact(json_backend("auto"))
    params = {"name": "x", "arguments": {"a": 1}}
    _, second, third = _run_flow(params, json=codec)  # (send() == encode(send_message()))
    assert second["inputResponses"] == {"ok": {"action": "accept"}}
    assert second["requestState"] == "s1" and third["requestState"] == "s2"
    assert second["arguments"] == {"a": 1} and "_meta" in second


def test_a_leg_writer_given_parts_it_cannot_join_encodes_the_whole_request() -> None:
    codec = Codec(JsonBackend("spaced", json.loads, _spaced))
    conn = Connection(CLIENT, era="modern", json=codec)
    conn.call("tools/call", {"name": "x"})
    event = _leg(conn)
    call = conn._calls.calls[event.call]
    call.meta = {"m": 1}
    writer = LegWriter(codec, b"\n")
    params = {"name": "x", "requestState": "s"}
    line = writer.write(call, 7, params)
    expected = Request(
        id=7, method="tools/call", params={"name": "x", "_meta": {"m": 1}, "requestState": "s"}
    )
    assert line == codec.encode(expected) + b"\n"
    assert line.startswith(b" ")  # (the backend's own writing, not joined parts)


def test_a_leg_with_progress_carries_its_own_token() -> None:
    conns, _ = _pair({"name": "x"})
    for conn in conns:
        conn._calls.calls[1].progress = True  # as call(progress=True) sets it
    tokens = []
    events = [_leg(conn) for conn in conns]
    line, _ = _send_both(conns, events[0], events[1])
    tokens.append(json.loads(line)["params"]["_meta"]["progressToken"])
    for conn in conns:
        conn.receive_data(_input_required(tokens[-1], asks=True, state="s"))
    events = [_leg(conn) for conn in conns]
    line, _ = _send_both(conns, events[0], events[1])
    tokens.append(json.loads(line)["params"]["_meta"]["progressToken"])
    assert tokens[0] != tokens[1]


def test_an_unencodable_leg_is_not_recorded_as_sent() -> None:
    conn = Connection(CLIENT, era="modern")
    conn.call("tools/call", {"name": "x", "arguments": {"bad": object()}})
    event = _leg(conn)
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        conn.send(event)
    assert conn.outstanding == ()
    # Nothing was kept from the failed attempt: the same leg fails the same way.
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        conn.send(event)


def test_what_a_call_keeps_of_its_encoded_legs_is_sized_to_them() -> None:
    # orjson writes into a 4 KiB buffer that its bytes keep: held for a call's life,
    # that took a call with its first leg out from about 3 KiB to 12 KiB.
    import tracemalloc

    conn = Connection(CLIENT, era="modern", json=Codec("orjson"), max_calls=10_000)
    params = {"name": "greet", "arguments": {"city": "Lisbon"}}
    for _ in range(10):  # warm: hooks, caches
        conn.call("tools/call", params)
        conn.send(conn.next_event())  # type: ignore[arg-type]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            conn.call("tools/call", params)
            conn.send(conn.next_event())  # type: ignore[arg-type]
        per_call = (tracemalloc.get_traced_memory()[0] - before) / 1000
    finally:
        tracemalloc.stop()
    assert per_call < 8_000, per_call
