"""SSE event ids and the replay buffer of a 2025-era session."""

from __future__ import annotations

import pytest

import mrtr_core as m
from mrtr_core.http import ReplayBuffer, ReplayLost
from mrtr_core.http._replay import STANDALONE, Cursor, parse_event_id


def test_events_are_read_per_stream_in_order() -> None:
    buffer = ReplayBuffer(max_events=10, max_bytes=1000)
    one, two = buffer.open_stream(), buffer.open_stream()
    assert (one, two) == (1, 2)
    first = buffer.record(one, b"a")
    buffer.record(two, b"x")
    buffer.record(one, b"b")
    events, cursor, done = buffer.read(buffer.start(one))
    assert [data for _, data in events] == [b"a", b"b"] and not done
    assert events[0][0] == first == "1-1"
    assert cursor == Cursor(one, 3)
    assert buffer.read(cursor) == ([], cursor, False)  # nothing new
    buffer.finish(one)
    assert buffer.read(cursor) == ([], cursor, True)
    assert buffer.size == (3, 3)


def test_resuming_after_an_event_id() -> None:
    buffer = ReplayBuffer(max_events=10, max_bytes=1000)
    stream = buffer.open_stream()
    priming = buffer.record(stream, b"")
    buffer.record(stream, b"late answer")
    buffer.finish(stream)
    events, _, done = buffer.read(buffer.resume(priming))
    assert [data for _, data in events] == [b"late answer"] and done


@pytest.mark.parametrize("bad", ["", "1", "a-1", "1-b", "-1", "1-", "1" * 30 + "-" + "1" * 30])
def test_ids_that_are_not_ours(bad: str) -> None:
    with pytest.raises(ReplayLost, match="not an event id"):
        parse_event_id(bad)


@pytest.mark.parametrize("bad", ["\u00b2-1", "1-\u00b9", "\u0661-1", "1-\uff11"])
def test_ids_with_digits_that_are_not_ascii_are_not_ours(bad: str) -> None:
    # U+00B2 (a latin-1 header byte) is a digit to str.isdigit() but not to int(): it
    # raised ValueError; Arabic-Indic and fullwidth digits are digits to both, and were
    # read as ids we never sent.
    with pytest.raises(ReplayLost, match="not an event id"):
        parse_event_id(bad)
    buffer = ReplayBuffer(max_events=10, max_bytes=1000)
    buffer.record(buffer.open_stream(), b"a")  # (stream 1, seq 1 exists)
    with pytest.raises(ReplayLost, match="not an event id"):
        buffer.resume(bad)


def test_unknown_or_future_ids_cannot_be_resumed() -> None:
    buffer = ReplayBuffer(max_events=10, max_bytes=1000)
    stream = buffer.open_stream()
    buffer.record(stream, b"a")
    with pytest.raises(ReplayLost, match="no such stream"):
        buffer.resume("9-1")  # never opened
    with pytest.raises(ReplayLost, match="no such stream"):
        buffer.resume(f"{stream}-99")  # not issued yet
    assert parse_event_id("12-34") == (12, 34)


def test_the_count_bound_drops_the_oldest_and_a_gap_is_reported() -> None:
    buffer = ReplayBuffer(max_events=2, max_bytes=1000)
    stream = buffer.open_stream()
    first = buffer.record(stream, b"1")
    buffer.record(stream, b"2")
    buffer.record(stream, b"3")
    assert buffer.size == (2, 2)
    with pytest.raises(ReplayLost, match="no longer held"):
        buffer.resume(f"{stream}-0")
    events, _, _ = buffer.read(buffer.resume(first))  # right after the dropped one: no gap
    assert [data for _, data in events] == [b"2", b"3"]
    with pytest.raises(ReplayLost, match="dropped before being read"):
        buffer.read(buffer.start(stream))


def test_the_byte_bound_counts_every_event() -> None:
    # (Changed by issue 22: the newest event was kept "however large", so one 7 MB
    # event per session held 7 MB where max_bytes said 256 KiB.  Now an event larger
    # than max_event_bytes is never kept, and what is kept stays under max_bytes.)
    buffer = ReplayBuffer(max_events=100, max_bytes=10, max_event_bytes=5)
    stream = buffer.open_stream()
    buffer.record(stream, b"12345")
    buffer.record(stream, b"67890")
    assert buffer.size == (2, 10)
    buffer.record(stream, b"abc")  # the oldest goes: 8 bytes
    assert buffer.size == (2, 8)
    too_large = buffer.record(stream, b"x" * 50)  # no live reader: lost, not kept
    assert buffer.size == (2, 8) and buffer.passing_bytes == 0
    with pytest.raises(ReplayLost, match="too large"):
        buffer.resume(f"{stream}-3")  # resuming past it cannot be gapless
    assert buffer.resume(too_large) == Cursor(stream, 4)  # after it: fine


def test_the_event_bound_is_a_quarter_of_the_bytes_unless_told() -> None:
    assert ReplayBuffer(10, 256 * 1024).max_event_bytes == 64 * 1024
    assert ReplayBuffer(10, 2).max_event_bytes == 1
    with pytest.raises(m.LocalProtocolError, match="max_event_bytes"):
        ReplayBuffer(10, 100, max_event_bytes=101)
    with pytest.raises(m.LocalProtocolError, match="max_event_bytes"):
        ReplayBuffer(10, 100, max_event_bytes=0)


def test_an_event_too_large_to_keep_reaches_a_live_reader_once() -> None:
    buffer = ReplayBuffer(max_events=10, max_bytes=100, max_event_bytes=10)
    stream = buffer.open_stream()
    cursor = buffer.start(stream)
    priming = buffer.record(stream, b"", live=True)
    buffer.record(stream, b"small", live=True)
    large = buffer.record(stream, b"L" * 1000, live=True)
    assert buffer.size == (2, 5) and buffer.passing_bytes == 1000
    buffer.finish(stream)
    events, cursor, done = buffer.read(cursor)
    assert [data for _, data in events] == [b"", b"small", b"L" * 1000] and done
    assert events[-1][0] == large and cursor.seq == 3
    assert buffer.passing_bytes == 0
    # Handed over once: a client resuming before it is told it cannot have it.
    with pytest.raises(ReplayLost, match="no longer held"):
        buffer.resume(priming)


def test_an_event_passing_to_a_reader_that_leaves_is_lost() -> None:
    buffer = ReplayBuffer(max_events=10, max_bytes=100, max_event_bytes=10)
    stream = buffer.open_stream()
    buffer.record(stream, b"L" * 1000, live=True)
    buffer.finish(stream)  # (kept known while its event passes)
    buffer.reader_gone(stream)
    assert buffer.passing_bytes == 0
    with pytest.raises(ReplayLost, match="no such stream"):
        buffer.resume(f"{stream}-0")  # finished, nothing held: forgotten
    other = buffer.open_stream()
    buffer.record(other, b"A" * 20, live=True)
    buffer.record(other, b"B" * 20, live=True)  # one at a time: A is lost
    assert buffer.passing_bytes == 20
    with pytest.raises(ReplayLost, match="dropped"):
        buffer.read(buffer.start(other))
    buffer.reader_gone(other)
    buffer.reader_gone(other)  # (nothing passing: nothing to do)
    assert buffer.passing_bytes == 0


def test_a_finished_stream_is_forgotten_with_its_last_event() -> None:
    buffer = ReplayBuffer(max_events=1, max_bytes=1000)
    done = buffer.open_stream()
    last = buffer.record(done, b"response")
    buffer.finish(done)
    other = buffer.open_stream()
    buffer.record(other, b"next")  # pushes out done's only event
    with pytest.raises(ReplayLost, match="no such stream"):
        buffer.resume(last)
    with pytest.raises(ReplayLost, match="dropped"):
        buffer.read(Cursor(done, 0))
    empty = buffer.open_stream()
    buffer.finish(empty)  # nothing recorded: forgotten at once
    with pytest.raises(ReplayLost):
        buffer.resume(f"{empty}-1")
    buffer.finish(12345)  # unknown: nothing to do


def test_the_standalone_stream_never_finishes() -> None:
    buffer = ReplayBuffer(max_events=1, max_bytes=1000)
    cursor = buffer.tail(STANDALONE)
    buffer.record(STANDALONE, b"note")
    buffer.finish(STANDALONE)
    events, cursor, done = buffer.read(cursor)
    assert [data for _, data in events] == [b"note"] and not done
    stream = buffer.open_stream()
    buffer.record(stream, b"x")  # drops the standalone event: the stream stays known
    assert buffer.resume(events[0][0]) == Cursor(STANDALONE, cursor.seq)


def test_misuse() -> None:
    with pytest.raises(m.LocalProtocolError):
        ReplayBuffer(0, 1)
    buffer = ReplayBuffer(1, 1)
    with pytest.raises(m.LocalProtocolError, match="not open"):
        buffer.record(7, b"x")
    stream = buffer.open_stream()
    buffer.record(stream, b"x")
    buffer.finish(stream)
    with pytest.raises(m.LocalProtocolError, match="not open"):
        buffer.record(stream, b"y")


def test_what_the_buffer_holds_is_bounded_by_the_bytes_it_counts() -> None:
    # orjson's output keeps a 4 KiB buffer behind a few dozen bytes: held as given,
    # 256 small events took about 1 MiB where max_bytes said 64 KiB.
    import tracemalloc

    import orjson

    buffer = ReplayBuffer(max_events=256, max_bytes=64 * 1024)
    stream = buffer.open_stream()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(256):
            buffer.record(stream, orjson.dumps({"jsonrpc": "2.0", "method": "ping", "n": n}))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 256 * 200, held
    assert buffer.size[0] == 256
