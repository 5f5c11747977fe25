"""What fuzzing found, each as the smallest reproduction, next to the target that found it.

Every input committed under ``corpus/`` also runs through its target here, so a
seed that starts to crash fails ``make test`` in-process (with its traceback)
even before the fuzzer reaches it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import mrtr_core as m

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import targets  # noqa: E402


def line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def test_a_leg_reissued_before_it_went_out_leaves_one_leg_on_the_wire() -> None:
    # Found by the client target (a 2025-era client told leg_broken while its legs were
    # held for the handshake): both the held leg and its re-issue went out, and the
    # answer to the second, after the first ended the call, raised KeyError in the core.
    # leg_broken with no leg on the wire is now refused (a LocalProtocolError that
    # changes nothing), so exactly one leg goes and its answer ends the call.
    conn = m.Connection(m.CLIENT, era="modern")
    call = conn.call("tools/call", {"name": "t"})
    with pytest.raises(m.LocalProtocolError):
        conn.leg_broken(call)  # before its leg was even handed out
    events = []
    while (event := conn.next_event()) is not m.NEED_DATA:
        events.append(event)
        conn.send(event)
    assert [e.event.reissue for e in events] == [False]  # one leg went
    assert conn.outstanding == (1,)
    for rid in (1, 2):  # the server answers it, and an id we never sent
        conn.receive_data(line({"jsonrpc": "2.0", "id": rid, "result": {"content": []}}))
    out = []
    while (event := conn.next_event()) is not m.NEED_DATA:
        out.append(event)
    assert out[0] == m.CallEvent(call=call, event=m.engine.Done(result={"content": []}))
    assert len(out) == 2 and isinstance(out[1], m.InvalidMessage)  # the unknown id, reported


def test_a_call_killed_by_misuse_before_the_era_settled_still_ends_with_failed() -> None:
    # Found by the client target: a call whose engine was killed by API misuse while
    # its leg was held for the era (era="auto") was "ended", when the stream closed,
    # with its moot SendRequest instead of a terminal event: the app lost the call.
    conn = m.Connection(m.CLIENT, era="auto")
    call = conn.call("tools/call", {"name": "t"})
    with pytest.raises(m.LocalProtocolError):
        conn.input_timed_out(call)  # misuse: the call is not in an input round
    conn.receive_data(b"")
    events = []
    while not isinstance(event := conn.next_event(), m.ConnectionClosed):
        events.append(event)
    (end,) = [e for e in events if isinstance(e, m.CallEvent)]
    assert end.call == call and isinstance(end.event, m.engine.Failed), end


def test_the_server_answering_the_leg_of_a_call_killed_by_misuse_is_a_late_answer() -> None:
    # Found by the client target: once API misuse killed a call's engine, the server's
    # answer to (or cancellation of) its leg still on the wire made next_event raise
    # LocalProtocolError, blaming the app for the peer's message.  It is dropped now.
    for note in (False, True):
        conn = m.Connection(m.CLIENT, era="modern")
        call = conn.call("tools/call", {"name": "t"})
        conn.send(conn.next_event())  # the leg, id 1
        with pytest.raises(m.LocalProtocolError):
            conn.input_timed_out(call)  # misuse: the call is not in an input round
        if note:
            cancel = {"method": "notifications/cancelled", "params": {"requestId": 1}}
            conn.receive_data(line({"jsonrpc": "2.0", **cancel}))
        else:
            conn.receive_data(line({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}))
        assert conn.next_event() is m.NEED_DATA
        conn.receive_data(b"")
        events = []
        while not isinstance(event := conn.next_event(), m.ConnectionClosed):
            events.append(event)
        assert [type(e.event) for e in events] == [m.engine.Failed]


def test_a_line_framer_may_hold_a_whole_message_and_its_carriage_return() -> None:
    # Found by the framing target: the documented read size (max_buffer_size -
    # max_message_size) overflowed the buffer by one byte when a line of exactly
    # max_message_size bytes and its "\r" were held waiting for the "\n".  The read
    # size the docs give is now one less, and it holds.
    framer = m.wire.LineFramer(max_message_size=4, max_buffer_size=10)
    framer.feed(b"abcd\r")
    assert framer.next_frame() is m.NEED_DATA
    assert framer.buffered == 5  # max_message_size + 1
    with pytest.raises(m.LocalProtocolError):
        framer.feed(b"\n" * (10 - 4))  # max_buffer_size - max_message_size: too much
    framer.feed(b"\nxy\n\n\n"[: 10 - 4 - 1])  # one less fits
    assert framer.next_frame() == b"abcd"
    assert framer.next_frame() == b"xy"


def test_a_form_whose_required_names_are_not_strings_is_refused_as_misuse() -> None:
    # Found by the schemas target: elicit_form(..., required=[{}]) raised TypeError
    # (unhashable dict) out of the builder; a builder lets out only LocalProtocolError.
    fields = {"city": {"type": "string"}}
    for required in ([{}], [5], ["city", ["city"]]):
        with pytest.raises(m.LocalProtocolError, match="named by strings"):
            m.server.elicit_form("Which city?", fields, required=required)
    asked = m.server.elicit_form("Which city?", fields, required=["city"])
    assert asked.requested_schema["required"] == ["city"]


def test_a_form_field_whose_format_is_not_a_string_is_refused_as_misuse() -> None:
    # Found by the schemas target: a string field's "format" given as a list or an
    # object raised TypeError (unhashable) from the builder's keyword check.
    for bad in ([{"const": "a", "title": "A"}], {"email": True}, 5, "ipv4"):
        with pytest.raises(m.LocalProtocolError, match="format must be one of"):
            m.server.elicit_form("Mail?", {"to": {"type": "string", "format": bad}})
    asked = m.server.elicit_form("Mail?", {"to": {"type": "string", "format": "email"}})
    assert asked.requested_schema["properties"]["to"]["format"] == "email"


def test_a_last_event_id_with_a_digit_int_refuses_is_not_an_event_id() -> None:
    # Found by the http_sessions target's seeds: a Last-Event-ID of "\xb2-1" (a latin-1
    # header byte, as the HTTP server decodes it) passed str.isdigit(), then int("²")
    # raised ValueError out of ReplayBuffer.resume.  Event ids are ASCII now.
    read = m.http.read_legacy_headers({"mcp-session-id": ["s"], "last-event-id": ["\xb2-1"]})
    assert read.last_event_id == "\u00b2-1"
    buffer = m.http.ReplayBuffer(max_events=4, max_bytes=64)
    assert buffer.record(buffer.open_stream(), b"x") == "1-1"
    for bad in (read.last_event_id, "1-\u00b9", "\u0661-1"):
        with pytest.raises(m.http.ReplayLost, match="not an event id"):
            buffer.resume(bad)
    assert buffer.resume("1-1") == m.http._replay.Cursor(1, 1)


@pytest.mark.parametrize("target", list(targets.TARGETS))
def test_every_seed_passes_its_target(target: str) -> None:
    paths = sorted((HERE / "corpus" / target).iterdir())
    assert len(paths) >= 5, f"the {target} corpus is missing: run tests/fuzz/make_corpus.py"
    for path in paths:
        targets.run(targets.TARGETS[target], path.read_bytes())
