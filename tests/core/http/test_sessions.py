"""2025-era session rules: which message is 2025-era, the headers, the session table."""

from __future__ import annotations

from typing import Any

import pytest

import mrtr_core as m
from mrtr_core.http import SessionRefused, SessionTable, is_legacy_message, read_legacy_headers
from mrtr_core.http._sessions import valid_session_id

MODERN_META = {"_meta": {m.wire.META_PROTOCOL_VERSION: "2026-07-28"}}


def fields(**values: Any) -> dict[str, list[str]]:
    """Header fields by lower-case name; a list value is the header repeated."""
    return {
        name.replace("_", "-").lower(): value if isinstance(value, list) else [value]
        for name, value in values.items()
    }


@pytest.mark.parametrize(
    ("headers", "message", "legacy"),
    [
        ({}, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, True),
        ({}, {"id": 1, "method": "initialize", "params": MODERN_META}, False),
        (fields(mcp_session_id="abc"), {"id": 1, "method": "tools/list"}, True),
        (fields(mcp_session_id="abc"), {"id": 1, "method": "x", "params": MODERN_META}, False),
        (fields(mcp_session_id="abc"), {"id": 1, "result": {}}, True),
        (fields(mcp_protocol_version="2025-06-18"), {"id": 1, "method": "ping"}, True),
        (fields(mcp_protocol_version="2026-07-28"), {"id": 1, "method": "ping"}, False),
        ({}, {"id": 1, "method": "tools/list", "params": {"_meta": "no"}}, False),
        ({}, {"id": 1, "method": "tools/list"}, False),
        ({}, [{"id": 1, "method": "initialize"}], False),
        ({}, None, False),
    ],
)
def test_which_messages_are_2025_era(headers: Any, message: Any, legacy: bool) -> None:
    assert is_legacy_message(headers, message) is legacy


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("a", True),
        ("!~" * 64, True),
        ("", False),
        ("x" * 129, False),
        ("a b", False),
        ("é", False),
        ("a\x7f", False),
    ],
)
def test_session_ids_are_visible_ascii_and_bounded(value: str, valid: bool) -> None:
    assert valid_session_id(value) is valid


def test_headers_of_a_request_in_a_session() -> None:
    read = read_legacy_headers(
        fields(mcp_session_id=" s1 ", mcp_protocol_version="2025-11-25", last_event_id="3-4")
    )
    assert (read.session_id, read.protocol_version, read.last_event_id) == (
        "s1",
        "2025-11-25",
        "3-4",
    )


def test_an_absent_version_header_means_2025_03_26() -> None:
    assert read_legacy_headers(fields(mcp_session_id="s")).protocol_version == "2025-03-26"


def test_initialize_needs_no_session_and_any_version_header() -> None:
    read = read_legacy_headers(
        fields(mcp_session_id="old", mcp_protocol_version="1999-01-01"), initialize=True
    )
    assert read.session_id is None and read.protocol_version == "1999-01-01"


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({}, 400, "missing Mcp-Session-Id"),
        (fields(mcp_session_id=["a", "b"]), 400, "more than one Mcp-Session-Id"),
        (fields(mcp_session_id="a b"), 400, "malformed"),
        (fields(mcp_session_id="s", mcp_protocol_version="2024-01-01"), 400, "unsupported"),
        (fields(mcp_session_id="s", mcp_protocol_version="2026-07-28"), 400, "unsupported"),
        (fields(mcp_session_id="s", last_event_id="1" * 65), 400, "too long"),
        (fields(mcp_session_id="s", last_event_id=["1-1", "1-2"]), 400, "more than one"),
    ],
)
def test_refused_headers(headers: Any, status: int, says: str) -> None:
    with pytest.raises(SessionRefused, match=says) as caught:
        read_legacy_headers(headers)
    assert caught.value.status == status
    assert caught.value.code == m.ErrorCode.INVALID_REQUEST


def test_the_table_knows_its_sessions_and_ends_idle_ones() -> None:
    table = SessionTable(max_sessions=4, idle_timeout=10.0)
    assert table.admit(0.0) == []
    table.add("a", 0.0)
    assert "a" in table and len(table) == 1
    table.lookup("a", 5.0)  # used: the idle clock starts again
    assert table.expired(14.0) == []
    assert table.expired(15.0) == ["a"]
    with pytest.raises(SessionRefused) as caught:
        table.lookup("a", 15.0)
    assert caught.value.status == 404
    with pytest.raises(SessionRefused, match="unknown or expired"):
        table.lookup("nope", 0.0)
    table.remove("a")
    table.remove("a")  # idempotent
    assert "a" not in table


def test_work_keeps_a_session_alive() -> None:
    table = SessionTable(max_sessions=1, idle_timeout=1.0)
    table.add("a", 0.0)
    table.begin("a")
    table.begin("unknown")  # (a session ended meanwhile: nothing to count)
    assert table.expired(100.0) == []
    table.lookup("a", 100.0)  # busy: never expired
    assert table.admit(100.0) is None  # full, and the only session is busy
    table.end("a", 100.0)
    table.end("a", 100.0)  # more ends than begins change nothing
    table.end("unknown", 100.0)
    assert table.expired(100.5) == []
    assert table.expired(101.0) == ["a"]


def test_a_full_table_ends_the_expired_then_the_longest_idle() -> None:
    table = SessionTable(max_sessions=2, idle_timeout=10.0)
    table.add("old", 0.0)
    table.add("new", 1.0)
    assert table.admit(5.0) == ["old"]  # nothing expired: the one idle longest goes
    table.lookup("old", 6.0)  # now "new" is the least recently used
    assert table.admit(7.0) == ["new"]
    assert table.admit(11.5) == ["new"]  # the expired one (and that is enough)
    assert table.admit(30.0) == ["new", "old"]  # every expired one goes
    table.begin("new")
    table.begin("old")
    assert table.admit(8.0) is None


def test_the_idle_longest_of_a_clients_own_sessions() -> None:
    # (issue 22: a client past its share ends one of its own sessions, never another's)
    table = SessionTable(max_sessions=4, idle_timeout=10.0)
    for n, session_id in enumerate(["victim", "mine-1", "mine-2"]):
        table.add(session_id, float(n))
    assert table.idle_longest() == "victim"
    assert table.idle_longest(among={"mine-1", "mine-2"}) == "mine-1"
    table.begin("mine-1")
    assert table.idle_longest(among={"mine-1", "mine-2"}) == "mine-2"
    table.begin("mine-2")
    assert table.idle_longest(among={"mine-1", "mine-2"}) is None
    assert table.idle_longest(among=()) is None
    table.touch("victim", 20.0)  # a GET stream of it ended: used now, and idle anew
    assert table.idle_longest() == "victim"
    assert table.expired(25.0) == [] and table.expired(30.0) == ["victim"]
    table.touch("gone", 1.0)  # (unknown: nothing to do)


def test_table_misuse() -> None:
    with pytest.raises(m.LocalProtocolError):
        SessionTable(0, 1.0)
    with pytest.raises(m.LocalProtocolError):
        SessionTable(1, 0.0)
    table = SessionTable(1, 1.0)
    with pytest.raises(m.LocalProtocolError):
        table.add("a b", 0.0)
    table.add("a", 0.0)
    with pytest.raises(m.LocalProtocolError):
        table.add("a", 0.0)
    with pytest.raises(m.LocalProtocolError, match="full"):
        table.add("b", 0.0)
