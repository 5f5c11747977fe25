"""The WebSocket rules of ``mrtr_core.websocket``: subprotocol, close codes, message size."""

from __future__ import annotations

import pytest

import mrtr_core as m
from mrtr_core.websocket import (
    CLOSE_CODES,
    SUBPROTOCOL,
    Fault,
    MessageAssembler,
    WebSocketViolation,
    check_subprotocol,
    choose_subprotocol,
    close_reason,
)
from mrtr_core.websocket._binding import CloseCode, describe_close


def test_the_subprotocol_is_selected_only_when_offered_exactly() -> None:
    assert SUBPROTOCOL == "mcp"
    assert choose_subprotocol(["chat", " mcp "]) == "mcp"
    assert choose_subprotocol([]) is None
    assert choose_subprotocol(["MCP", "mcp.v1"]) is None  # tokens are case-sensitive
    # A token smuggled as a subprotocol entry is never echoed back.
    assert choose_subprotocol(["mcp.auth.s3cret"]) is None


def test_a_client_refuses_a_server_that_did_not_select_mcp() -> None:
    check_subprotocol("mcp")
    for selected in (None, "chat"):
        with pytest.raises(m.RemoteProtocolError, match="not 'mcp'") as caught:
            check_subprotocol(selected)
        assert caught.value.code == m.ErrorCode.INVALID_REQUEST
    with pytest.raises(m.RemoteProtocolError, match="subprotocol none"):
        check_subprotocol(None)


def test_every_fault_has_one_close_code() -> None:
    assert set(CLOSE_CODES) == set(Fault)
    assert CLOSE_CODES[Fault.BINARY_MESSAGE] == 1003
    assert CLOSE_CODES[Fault.MESSAGE_TOO_BIG] == 1009
    assert CLOSE_CODES[Fault.INVALID_UTF8] == 1007
    assert CLOSE_CODES[Fault.BROKEN_FRAMING] == 1002
    assert CLOSE_CODES[Fault.POLICY] == 1008
    assert CLOSE_CODES[Fault.SHUTDOWN] == 1001
    assert CLOSE_CODES[Fault.DONE] == 1000
    assert CLOSE_CODES[Fault.KEEPALIVE_TIMEOUT] == 1011
    with pytest.raises(TypeError):
        CLOSE_CODES[Fault.DONE] = CloseCode.ABNORMAL  # type: ignore[index]


def test_closes_read_well() -> None:
    assert describe_close(1009, "too long") == "1009 (message too big): too long"
    assert describe_close(CloseCode.GOING_AWAY) == "1001 (going away)"
    assert describe_close(4001, "") == "4001 (application-defined)"
    assert describe_close(1234) == "1234 (unknown code)"
    assert describe_close(None) == "closed without a close frame"


def test_fragments_make_one_message_and_the_assembler_starts_over() -> None:
    assembler = MessageAssembler(max_message_size=16)
    assert assembler.receive_text('{"a":', message_finished=False) is None
    assert assembler.buffered == 5
    assert assembler.receive_text('"é"}', message_finished=True) == '{"a":"é"}'.encode()
    assert assembler.buffered == 0
    assert assembler.receive_text("", message_finished=True) == b""


def test_a_message_past_the_bound_is_refused_while_it_grows() -> None:
    assembler = MessageAssembler(max_message_size=8)
    assert assembler.receive_text("1234", message_finished=False) is None
    with pytest.raises(WebSocketViolation, match="more than 8 bytes") as caught:
        assembler.receive_text("é" * 3, message_finished=False)  # 10 bytes in UTF-8
    assert caught.value.close_code == CloseCode.MESSAGE_TOO_BIG
    assert caught.value.fault is Fault.MESSAGE_TOO_BIG
    assert isinstance(caught.value, m.RemoteProtocolError)
    assert assembler.buffered == 10 and assembler._parts == []  # nothing held
    with pytest.raises(m.LocalProtocolError, match="close the WebSocket"):
        assembler.receive_text("x", message_finished=True)


def test_the_bound_is_inclusive() -> None:
    assembler = MessageAssembler(max_message_size=3)
    assert assembler.receive_text("abc", message_finished=True) == b"abc"


def test_a_binary_message_is_refused() -> None:
    assembler = MessageAssembler()
    assembler.receive_text("{", message_finished=False)
    with pytest.raises(WebSocketViolation) as caught:
        assembler.receive_binary()
    assert caught.value.close_code == 1003
    assert assembler.buffered == 0
    with pytest.raises(m.LocalProtocolError):
        assembler.receive_binary()


def test_a_lone_surrogate_is_kept_for_the_json_decoder_to_refuse() -> None:
    data = MessageAssembler().receive_text('"\ud800"', message_finished=True)
    assert data == b'"\xed\xa0\x80"'
    conn = m.Connection(m.SERVER, framing="messages")
    conn.receive_data(data)
    event = conn.next_event()
    assert isinstance(event, m.InvalidMessage)
    assert event.error.code == m.ErrorCode.PARSE_ERROR


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "8"])
def test_the_bound_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(m.LocalProtocolError, match="max_message_size"):
        MessageAssembler(max_message_size=bad)  # type: ignore[arg-type]


def test_a_close_reason_fits_a_close_frame() -> None:
    assert close_reason("short") == "short"
    exact = "x" * m.websocket._binding.MAX_CLOSE_REASON
    assert close_reason(exact) == exact
    cut = close_reason("é" * 100)  # 200 bytes: cut between characters, never inside one
    assert cut.endswith("...") and len(cut.encode()) <= 123
    assert cut == "é" * 60 + "..."
