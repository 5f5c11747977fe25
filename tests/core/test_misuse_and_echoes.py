"""API misuse raises ``LocalProtocolError`` (never a foreign exception), and an error
quotes a peer's value clipped (issue 22, items 11 and 3)."""

from __future__ import annotations

from typing import Any

import pytest

import mrtr_core as m
from mrtr_core._errors import CLIPPED_CHARS, clip
from mrtr_core.server import StateSealer
from mrtr_core.server._sealing import params_digest
from mrtr_core.server._validation import compile_schema

NOT_MAPPINGS: list[Any] = [[1, 2], "result", 5, None, [("a", 1)]]


def _legacy_server_with_a_request() -> m.Connection:
    conn = m.Connection(m.SERVER, framing="messages")
    conn.receive_message(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        }
    )
    event = conn.next_event(0)
    assert isinstance(event, m.AutoReply)
    conn.send(event.reply)
    conn.receive_message({"jsonrpc": "2.0", "method": "notifications/initialized"})
    conn.next_event(0)
    conn.receive_message({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert isinstance(conn.next_event(0), m.Request)
    return conn


@pytest.mark.parametrize("result", NOT_MAPPINGS)
def test_a_result_that_is_not_a_mapping_is_api_misuse(result: Any) -> None:
    # Before: TypeError / ValueError from dict(result), deep in the server rules.
    conn = _legacy_server_with_a_request()
    with pytest.raises(m.LocalProtocolError, match="result is a mapping"):
        conn.send(m.ResultResponse(id=2, result=result))
    # Nothing was taken as sent: the request still waits for its (right) answer.
    assert conn.send(m.ResultResponse(id=2, result={"tools": []}))


def test_a_result_that_is_not_a_mapping_is_refused_whoever_sends_it() -> None:
    conn = m.Connection(m.SERVER, framing="messages")
    with pytest.raises(m.LocalProtocolError, match="result is a mapping"):
        conn.send(m.ResultResponse(id=None, result=[1]))  # type: ignore[arg-type]


@pytest.mark.parametrize("params", [[1], "name=x", 5, ("a", "b")])
def test_state_sealer_with_params_that_are_not_a_mapping_is_api_misuse(params: Any) -> None:
    # Before: AttributeError ('list' object has no attribute 'items').
    sealer = StateSealer({"a": b"A" * 32}, "a")
    token = sealer.seal({"step": 1}, method="tools/call", params={}, principal=None, now=0)
    with pytest.raises(m.LocalProtocolError, match="a mapping"):
        sealer.open(token, method="tools/call", params=params, principal=None, now=0)
    with pytest.raises(m.LocalProtocolError, match="a mapping"):
        sealer.open("not a token", method="tools/call", params=params, principal=None, now=0)
    with pytest.raises(m.LocalProtocolError, match="a mapping"):
        sealer.seal({"step": 1}, method="tools/call", params=params, principal=None, now=0)
    with pytest.raises(m.LocalProtocolError, match="a mapping"):
        params_digest(params)
    assert params_digest(None) == params_digest({})


# --- one helper quotes a peer's value ---


def test_clip_keeps_short_text_and_cuts_long_text_with_an_ellipsis() -> None:
    assert clip("get_weather") == "get_weather"
    assert clip("x" * CLIPPED_CHARS) == "x" * CLIPPED_CHARS
    long = clip("x" * 3_500_000)
    assert long == "x" * CLIPPED_CHARS + "…"
    assert clip("abcdef", 3) == "abc…"


def test_clip_keeps_scalars_and_describes_the_rest() -> None:
    assert [clip(3), clip(2.5), clip(True), clip(None)] == [3, 2.5, True, None]
    assert clip(1 << 200) == "<int of 201 bits>"
    assert clip(["a"] * 1000) == m._errors.describe(["a"] * 1000)
    shown = clip({"k": "v" * 10_000})
    assert isinstance(shown, str) and len(shown) <= 120


def test_a_schema_problem_quotes_the_peer_value_clipped() -> None:
    schema = compile_schema(
        {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}
    )
    wrong = schema.problem({"n": "x" * 1_000_000})
    assert wrong is not None and len(wrong.reason) <= CLIPPED_CHARS + 1
    extra = schema.problem({"k" * 1_000_000: 1})
    assert extra is not None
    assert len(extra.field) <= CLIPPED_CHARS + 1 and len(extra.reason) <= CLIPPED_CHARS + 1
