"""The 2025 Streamable HTTP session rules a client follows (mrtr_core.http._client_sessions)."""

from __future__ import annotations

import pytest

import mrtr_core as m
from mrtr_core.http import StreamResumption, check_session_id, session_headers
from mrtr_core.http._client_sessions import (
    MAX_PEER_EVENT_ID_LENGTH,
    MAX_PEER_SESSION_ID_LENGTH,
    MAX_RETRY_MS,
)


def test_a_session_id_is_visible_ascii_and_bounded() -> None:
    assert check_session_id(b"abc-123_~!") == "abc-123_~!"
    assert check_session_id("x" * MAX_PEER_SESSION_ID_LENGTH) == "x" * MAX_PEER_SESSION_ID_LENGTH
    for bad in (b"", b"has space", b"tab\there", "caf\u00e9", b"\x7f", "x" * 1025, "a" * 5000):
        with pytest.raises(m.RemoteProtocolError) as caught:
            check_session_id(bad)
        assert "Mcp-Session-Id" in caught.value.message
        assert len(caught.value.message) < 300  # a huge id is not echoed whole


def test_session_headers_stay_off_initialize() -> None:
    assert session_headers("s1", "2025-11-25", method="initialize") == []
    assert session_headers("s1", "2025-11-25", method="tools/call") == [
        ("Mcp-Session-Id", "s1"),
        ("MCP-Protocol-Version", "2025-11-25"),
    ]
    assert session_headers(None, None, method="GET") == []


def test_resumption_needs_an_id_and_is_bounded() -> None:
    stream = StreamResumption(max_attempts=2)
    assert stream.next_delay() is None  # no event id: nothing to resume from
    stream.saw("ev-1", None)
    assert stream.last_event_id == "ev-1"
    assert stream.next_delay() == 1.0  # the default retry
    stream.saw(None, 250)  # a retry field alone: no progress
    assert stream.next_delay() == 0.25
    assert stream.next_delay() is None  # two attempts in a row without a new event
    stream.saw("ev-1", None)  # the same id again is no progress either
    assert stream.next_delay() is None
    stream.saw("ev-2", None)  # a new event: the attempts start again
    assert stream.next_delay() == 0.25


def test_resumption_ignores_ids_it_could_not_send_and_caps_the_delay() -> None:
    stream = StreamResumption()
    stream.saw("bad id", 10**9)
    stream.saw("x" * (MAX_PEER_EVENT_ID_LENGTH + 1), None)
    stream.saw("", None)
    assert stream.last_event_id is None
    assert stream.retry_ms == MAX_RETRY_MS
    with pytest.raises(m.LocalProtocolError):
        StreamResumption(max_attempts=-1)
