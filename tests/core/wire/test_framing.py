"""Framing: LineFramer (newline-delimited byte streams) and MessageFramer.

Every LineFramer reading test runs three ways through the ``reader`` fixture:

* ``whole``: each part of the input in a single ``feed``;
* ``bytewise``: one byte per ``feed``, draining ``next_frame`` after each byte;
* ``trailing``: like ``whole``, plus an incomplete extra line fed right after the
  last complete line of the input (before any unterminated tail, which would
  otherwise swallow it); it must stay buffered until completed and then come out.

The frames must be the same every way.  The one allowed difference is
``Oversize.size`` ("bytes seen when the bound was passed"), which depends on
chunking: it is compared exactly for ``whole`` and ``trailing`` (whose extra split
sits on a line boundary) and only checked to exceed the bound for ``bytewise``.
"""

from __future__ import annotations

import dataclasses
import itertools
from array import array
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.budget import examples

import mrtr_core as m
from mrtr_core import LocalProtocolError
from mrtr_core.wire._framing import (
    END_OF_STREAM,
    NEED_DATA,
    EndOfStream,
    Frame,
    LineFramer,
    MessageFramer,
    NoFrame,
    Oversize,
)

M = 16  # max_message_size used by most tests
B = 4096  # max_buffer_size used by most tests

# The incomplete line of the "trailing" way, its completion, and the frame it makes.
TRAIL = (b'{"trail":', b"1}\r\n", b'{"trail":1}')
SHORT_TRAIL = (b"{", b"\r\n", b"{")  # for bounds too small for TRAIL

WAYS = ("whole", "bytewise", "trailing")
DRAIN_LIMIT = 100_000  # guards against a framer that never says NEED_DATA


def drain(framer: LineFramer | MessageFramer, out: list[Frame]) -> NoFrame:
    """Append frames to ``out`` until ``next_frame`` returns a signal; return it."""
    for _ in range(DRAIN_LIMIT):
        frame = framer.next_frame()
        if frame is NEED_DATA or frame is END_OF_STREAM:
            return frame
        assert isinstance(frame, bytes | Oversize), frame
        assert not isinstance(frame, bytearray)
        out.append(frame)
    raise AssertionError("next_frame never returned a signal")


@dataclasses.dataclass
class Run:
    way: str
    framer: LineFramer
    #: frames handed out after each part was fed (plus a last group after feed_eof, if any)
    groups: list[list[Frame]]
    #: ``framer.buffered`` after each part was fed and drained
    buffered: list[int]

    @property
    def frames(self) -> list[Frame]:
        return [frame for group in self.groups for frame in group]

    def expect(self, *groups: Sequence[Frame]) -> None:
        """Check the frames of each part (and of ``feed_eof``)."""
        assert len(self.groups) == len(groups), (self.groups, groups)
        for actual, expected in zip(self.groups, groups, strict=True):
            self.expect_frames(actual, expected)

    def expect_flat(self, *expected: Frame) -> None:
        """Check every frame handed out, ignoring after which part it came."""
        self.expect_frames(self.frames, expected)

    def expect_frames(self, actual: Sequence[Frame], expected: Sequence[Frame]) -> None:
        assert len(actual) == len(expected), (actual, expected)
        for got, want in zip(actual, expected, strict=True):
            if isinstance(want, Oversize):
                assert isinstance(got, Oversize), (actual, expected)
                if self.way == "bytewise":
                    assert got.size > self.framer.max_message_size, (actual, expected)
                else:
                    assert got == want, (actual, expected)
            else:
                assert type(got) is bytes, (actual, expected)
                assert got == want, (actual, expected)


class Reader:
    """Runs a LineFramer over some input in one of the three WAYS."""

    def __init__(self, way: str) -> None:
        self.way = way

    def run(
        self,
        *parts: bytes,
        eof: bool = False,
        drain_before_eof: bool = True,
        max_message_size: int = M,
        max_buffer_size: int = B,
    ) -> Run:
        assert parts
        framer = LineFramer(max_message_size=max_message_size, max_buffer_size=max_buffer_size)
        run = Run(self.way, framer, [], [])
        # Where the trailing line goes: just after the last newline of the input.
        trail_part, trail_at = 0, 0
        for i, part in enumerate(parts):
            if b"\n" in part:
                trail_part, trail_at = i, part.rfind(b"\n") + 1
        for i, part in enumerate(parts):
            drain_after = drain_before_eof or i < len(parts) - 1 or not eof
            out: list[Frame] = []
            if self.way == "trailing" and i == trail_part:
                trail_open, trail_close, trail_msg = (
                    TRAIL if len(TRAIL[2]) <= max_message_size else SHORT_TRAIL
                )
                self._feed(framer, part[:trail_at] + trail_open, out, drain=True)
                assert framer.buffered == len(trail_open)
                assert framer.next_frame() is NEED_DATA
                framer.feed(trail_close)
                assert framer.next_frame() == trail_msg
                assert framer.next_frame() is NEED_DATA
                assert framer.buffered == 0
                if part[trail_at:]:
                    self._feed(framer, part[trail_at:], out, drain=drain_after)
            else:
                self._feed(framer, part, out, drain=drain_after)
            run.groups.append(out)
            run.buffered.append(framer.buffered)
            assert not framer.eof
        if eof:
            framer.feed_eof()
            assert framer.eof
            out = []
            assert drain(framer, out) is END_OF_STREAM
            run.groups.append(out)
            # ... for ever, and nothing is left.
            for _ in range(3):
                assert framer.next_frame() is END_OF_STREAM
            assert framer.buffered == 0
            assert framer.eof
            for data in (b"{}\n", b""):
                with pytest.raises(LocalProtocolError, match="after feed_eof"):
                    framer.feed(data)
            assert framer.next_frame() is END_OF_STREAM
        return run

    def _feed(self, framer: LineFramer, data: bytes, out: list[Frame], *, drain: bool) -> None:
        chunks = [data[i : i + 1] for i in range(len(data))] if self.way == "bytewise" else [data]
        for n, chunk in enumerate(chunks, 1):
            framer.feed(chunk)
            if drain or n < len(chunks):
                self._drain(framer, out)

    @staticmethod
    def _drain(framer: LineFramer, out: list[Frame]) -> None:
        assert drain(framer, out) is NEED_DATA
        assert framer.next_frame() is NEED_DATA  # asking again changes nothing
        # What is left is (part of) one line: never more than the bound, plus a
        # trailing \r that may belong to the line ending.
        assert framer.buffered <= framer.max_message_size + 1


@pytest.fixture(params=WAYS)
def reader(request: pytest.FixtureRequest) -> Reader:
    return Reader(request.param)


def over(n: int) -> Oversize:
    return Oversize(size=n)


# --- LineFramer: lines -------------------------------------------------------


def test_single_line(reader: Reader) -> None:
    run = reader.run(b'{"a":1}\n')
    run.expect([b'{"a":1}'])
    assert run.buffered == [0]


def test_multiple_lines(reader: Reader) -> None:
    reader.run(b'{"a":1}\n{"b":2}\n{"c":3}\n').expect([b'{"a":1}', b'{"b":2}', b'{"c":3}'])


def test_lines_across_parts(reader: Reader) -> None:
    run = reader.run(b'{"a":1}\n{"b', b'":2}\n{"c":3}\n{', b'"d":4}\n')
    run.expect([b'{"a":1}'], [b'{"b":2}', b'{"c":3}'], [b'{"d":4}'])
    assert run.buffered == [3, 1, 0]


def test_crlf(reader: Reader) -> None:
    reader.run(b'{"a":1}\r\n{"b":2}\r\n{"c":3}\n').expect([b'{"a":1}', b'{"b":2}', b'{"c":3}'])


def test_crlf_split_between_parts(reader: Reader) -> None:
    run = reader.run(b'{"a":1}\r', b'\n{"b":2}\r', b"\n")
    run.expect([], [b'{"a":1}'], [b'{"b":2}'])
    assert run.buffered == [8, 8, 0]


def test_only_one_cr_before_newline_is_dropped(reader: Reader) -> None:
    reader.run(b"x\r\r\n{}\r\r\r\n").expect([b"x\r", b"{}\r\r"])


def test_cr_inside_a_line_is_kept(reader: Reader) -> None:
    reader.run(b'{"a":\r1}\n\rx\n').expect([b'{"a":\r1}', b"\rx"])


def test_blank_and_whitespace_only_lines_are_skipped(reader: Reader) -> None:
    data = b'\n\r\n \n\t\n \t\r\n\r\r\n   \r\n{"a":1}\n\n  \t \n{"b":2}\r\n\r\n'
    reader.run(data).expect([b'{"a":1}', b'{"b":2}'])


def test_only_blank_lines(reader: Reader) -> None:
    run = reader.run(b"\n\n \r\n\t\n", b"  \r\n")
    run.expect([], [])
    assert run.buffered == [0, 0]


def test_surrounding_whitespace_and_non_json_lines_are_kept(reader: Reader) -> None:
    # The framer frames; judging the JSON is the codec's job.
    reader.run(b'  {"a":1} \t\r\n\tx\n[1]\n"s"\n').expect([b'  {"a":1} \t', b"\tx", b"[1]", b'"s"'])


def test_line_of_exactly_max_message_size(reader: Reader) -> None:
    line = b'{"k":"' + b"v" * (M - 8) + b'"}'
    assert len(line) == M
    run = reader.run(line + b"\n" + line + b"\r\n", line, b"\r", b"\n")
    run.expect([line, line], [], [], [line])
    assert run.buffered == [0, M, M + 1, 0]


def test_max_plus_one_is_oversize_once_then_next_line_works(reader: Reader) -> None:
    big = b"x" * (M + 1)
    reader.run(big + b'\n{"a":1}\n').expect([over(M + 1), b'{"a":1}'])


def test_max_plus_one_with_crlf(reader: Reader) -> None:
    big = b"{" * (M + 1)
    reader.run(big + b'\r\n{"a":1}\r\n').expect([over(M + 1), b'{"a":1}'])


def test_kept_cr_counts_towards_the_bound(reader: Reader) -> None:
    # The line is M bytes plus the \r that is not part of the line ending.
    run = reader.run(b"x" * M + b'\r\r\n{"a":1}\n')
    run.expect([over(M + 1), b'{"a":1}'])


def test_oversize_whitespace_line_is_still_oversize(reader: Reader) -> None:
    reader.run(b" " * (M + 4) + b"\n{}\n").expect([over(M + 4), b"{}"])


def test_consecutive_oversize_lines_each_reported_once(reader: Reader) -> None:
    data = b"a" * (M + 1) + b"\n" + b"b" * (3 * M) + b"\r\n{}\n" + b"c" * (M + 2) + b"\n\n"
    reader.run(data).expect([over(M + 1), over(3 * M), b"{}", over(M + 2)])


def test_oversize_line_in_pieces(reader: Reader) -> None:
    first = b'{"big":"' + b"x" * M
    run = reader.run(first, b"x" * 40, b"x" * 40, b'"}\r\n{"a":1}\n')
    # Reported as soon as the bound is passed, before its newline; then discarded.
    run.expect([over(len(first))], [], [], [b'{"a":1}'])
    assert run.buffered == [0, 0, 0, 0]


def test_oversize_tail_after_complete_lines(reader: Reader) -> None:
    run = reader.run(b'{"a":1}\n' + b"y" * (M + 3), b"y" * 5 + b'\n{"b":2}\n')
    run.expect([b'{"a":1}', over(M + 3)], [b'{"b":2}'])


def test_oversize_rest_ends_with_the_next_line_in_the_same_part(reader: Reader) -> None:
    run = reader.run(b"z" * (M + 1), b"zz\n{}\n" + b"w" * (M + 2), b"\n{}\n")
    run.expect([over(M + 1)], [b"{}", over(M + 2)], [b"{}"])


def test_trailing_cr_is_not_counted_until_its_newline_shows(reader: Reader) -> None:
    # M bytes and a \r: the \r may be the line ending, so nothing is decided yet.
    run = reader.run(b"x" * M + b"\r", b"\n{}\n")
    run.expect([], [b"x" * M, b"{}"])
    assert run.buffered == [M + 1, 0]


def test_cr_followed_by_more_bytes_makes_the_line_oversize(reader: Reader) -> None:
    run = reader.run(b"x" * M + b"\r", b"y\n{}\n")
    run.expect([], [over(M + 2), b"{}"])


def test_second_cr_makes_the_line_oversize(reader: Reader) -> None:
    run = reader.run(b"x" * M + b"\r", b"\r", b"\n{}\n")
    run.expect([], [over(M + 2)], [b"{}"])
    assert run.buffered == [M + 1, 0, 0]


def test_tiny_bound(reader: Reader) -> None:
    run = reader.run(b"a\nbb\n\r\n{\r\n", max_message_size=1, max_buffer_size=64)
    run.expect([b"a", over(2), b"{"])


# --- LineFramer: end of stream ----------------------------------------------


def test_eof_hands_out_the_final_line_without_newline(reader: Reader) -> None:
    run = reader.run(b'{"a":1}\n{"b":2}', eof=True)
    run.expect([b'{"a":1}'], [b'{"b":2}'])


def test_eof_final_line_drops_a_trailing_cr(reader: Reader) -> None:
    reader.run(b'{"a":1}\r\n{"b":2}\r', eof=True).expect([b'{"a":1}'], [b'{"b":2}'])


def test_eof_final_non_json_line(reader: Reader) -> None:
    reader.run(b"\n  x \r", eof=True).expect([], [b"  x "])


def test_eof_final_line_of_exactly_max(reader: Reader) -> None:
    line = b"{" + b"m" * (M - 1)
    reader.run(line, eof=True).expect([], [line])
    reader.run(line + b"\r", eof=True).expect([], [line])


def test_eof_final_line_over_max(reader: Reader) -> None:
    run = reader.run(b"{}\n" + b"m" * (M + 1), eof=True)
    run.expect([b"{}", over(M + 1)], [])


def test_eof_before_an_oversize_line_was_looked_at(reader: Reader) -> None:
    # feed, feed_eof, and only then next_frame: the whole rest is the last line.
    run = reader.run(b"{}\n" + b"m" * (M + 5), eof=True, drain_before_eof=False)
    run.expect_flat(b"{}", over(M + 5))


def test_eof_before_draining_several_lines(reader: Reader) -> None:
    run = reader.run(b'{"a":1}\n\n{"b":2}\r\n  \n{"c"', eof=True, drain_before_eof=False)
    run.expect_flat(b'{"a":1}', b'{"b":2}', b'{"c"')


def test_eof_while_discarding(reader: Reader) -> None:
    run = reader.run(b"{}\n" + b"x" * (M + 3), b"xxx", eof=True)
    run.expect([b"{}", over(M + 3)], [], [])


def test_eof_while_discarding_not_yet_drained(reader: Reader) -> None:
    run = reader.run(b"x" * (M + 3), b"xxx", eof=True, drain_before_eof=False)
    run.expect_flat(over(M + 3))


def test_eof_after_discarding_then_newline_and_last_line(reader: Reader) -> None:
    run = reader.run(b"x" * (M + 3), b"xx\n{}", eof=True, drain_before_eof=False)
    run.expect_flat(over(M + 3), b"{}")


def test_eof_with_only_blanks(reader: Reader) -> None:
    reader.run(b" \t\r\n\n  \r", eof=True).expect([], [])
    reader.run(b"   ", eof=True).expect([], [])
    reader.run(b"\r", eof=True, drain_before_eof=False).expect_flat()


def test_eof_with_nothing(reader: Reader) -> None:
    reader.run(b"", eof=True).expect([], [])


def test_eof_after_complete_lines(reader: Reader) -> None:
    reader.run(b'{"a":1}\n', eof=True).expect([b'{"a":1}'], [])


# --- LineFramer: buffer bound, properties, bounds ---------------------------


def test_buffer_bound_applies_to_what_is_left(reader: Reader) -> None:
    run = reader.run(b'{"a":1}\n{"b":2}\n{"d":', max_buffer_size=32)
    run.expect([b'{"a":1}', b'{"b":2}'])
    framer = run.framer
    assert framer.buffered == 5
    with pytest.raises(LocalProtocolError, match="max_buffer_size=32"):
        framer.feed(b"1" * 28)
    assert framer.buffered == 5
    assert framer.next_frame() is NEED_DATA
    framer.feed(b"4}\n" + b" " * 15 + b'\n{"e":5}\n')  # exactly up to the bound
    assert framer.buffered == 32
    assert framer.next_frame() == b'{"d":4}'
    assert framer.next_frame() == b'{"e":5}'
    assert framer.next_frame() is NEED_DATA
    assert framer.buffered == 0


def test_buffer_bound_loses_nothing() -> None:
    framer = LineFramer(max_message_size=16, max_buffer_size=32)
    framer.feed(b'{"a":1}\n{"b":2}\n{"c":3}\n')  # 24 bytes, not yet framed
    assert framer.buffered == 24
    for data in (b"x" * 9, bytearray(b"x" * 9), memoryview(b"x" * 40)):
        with pytest.raises(LocalProtocolError, match="max_buffer_size"):
            framer.feed(data)
        assert framer.buffered == 24
    framer.feed(b"{" * 8)  # exactly max_buffer_size
    assert framer.buffered == 32
    with pytest.raises(LocalProtocolError):
        framer.feed(b"\n")
    frames: list[Frame] = []
    assert drain(framer, frames) is NEED_DATA
    assert frames == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert framer.buffered == 8
    framer.feed(b"}\n")
    assert framer.next_frame() == b"{" * 8 + b"}"
    assert framer.next_frame() is NEED_DATA
    assert framer.buffered == 0


def test_buffer_bound_counts_bytes_not_items() -> None:
    # A memoryview's len() counts items; the bound is in bytes.
    framer = LineFramer(max_message_size=8, max_buffer_size=8)
    wide = memoryview(array("I", [0x41414141, 0x42424242, 0x43434343]))
    assert len(wide) == 3 and wide.nbytes == 12
    with pytest.raises(LocalProtocolError, match="max_buffer_size"):
        framer.feed(wide)
    assert framer.buffered == 0
    framer.feed(memoryview(array("I", [0x41414141, 0x0A424242])))
    assert framer.buffered == 8
    assert framer.next_frame() == b"AAAABBB"


def test_feed_accepts_bytes_like() -> None:
    framer = LineFramer(max_message_size=M, max_buffer_size=B)
    source = bytearray(b'{"a":1}\n')
    framer.feed(source)
    framer.feed(memoryview(b'xx{"b":2}\n')[2:])
    source[:] = b"garbage\n"  # the framer copied what it was fed
    assert framer.next_frame() == b'{"a":1}'
    assert framer.next_frame() == b'{"b":2}'
    assert framer.next_frame() is NEED_DATA


def test_buffered_and_eof_properties() -> None:
    framer = LineFramer(max_message_size=M, max_buffer_size=B)
    assert framer.buffered == 0
    assert framer.eof is False
    assert framer.max_message_size == M
    assert framer.max_buffer_size == B
    framer.feed(b'{"a":1}\n{"b"')
    assert framer.buffered == 12
    assert framer.next_frame() == b'{"a":1}'
    assert framer.buffered == 4
    assert framer.next_frame() is NEED_DATA
    assert framer.buffered == 4
    framer.feed_eof()
    assert framer.eof is True
    assert framer.buffered == 4
    assert framer.next_frame() == b'{"b"'
    assert framer.buffered == 0
    assert framer.next_frame() is END_OF_STREAM
    assert framer.eof is True


def test_feed_after_eof_raises() -> None:
    framer = LineFramer(max_message_size=M, max_buffer_size=B)
    framer.feed(b"{}")
    framer.feed_eof()
    with pytest.raises(LocalProtocolError, match="after feed_eof"):
        framer.feed(b"\n")
    assert framer.buffered == 2
    assert framer.next_frame() == b"{}"
    assert framer.next_frame() is END_OF_STREAM


def test_no_quadratic_rescan() -> None:
    # White-box: bytes already searched for a newline are not searched again.
    framer = LineFramer(max_message_size=1000, max_buffer_size=2000)
    assert framer._scanned == 0
    seen = 0
    for chunk in (b'{"a":"', b"x" * 50, b"y" * 7, b"", b"z"):
        framer.feed(chunk)
        seen += len(chunk)
        assert framer.next_frame() is NEED_DATA
        assert framer._scanned == seen == framer.buffered
    framer.feed(b'"}\n{"b"')
    assert framer.next_frame() == b'{"a":"' + b"x" * 50 + b"y" * 7 + b'z"}'
    assert framer._scanned == 0
    assert framer.next_frame() is NEED_DATA
    assert framer._scanned == 4 == framer.buffered
    # A newline right at the scanned offset is still found.
    framer.feed(b"\n")
    assert framer.next_frame() == b'{"b"'
    assert framer._scanned == 0


def test_scan_offset_reset_after_oversize_and_discard() -> None:
    framer = LineFramer(max_message_size=4, max_buffer_size=64)
    framer.feed(b"{abc")
    assert framer.next_frame() is NEED_DATA
    assert framer._scanned == 4
    framer.feed(b"d")
    assert framer.next_frame() == Oversize(size=5)
    assert framer._scanned == 0 and framer.buffered == 0
    framer.feed(b"eee")
    assert framer.next_frame() is NEED_DATA
    assert framer._scanned == 0 and framer.buffered == 0
    framer.feed(b"e\n{x}")
    assert framer.next_frame() is NEED_DATA
    assert framer._scanned == 3 == framer.buffered
    framer.feed(b"\n")
    assert framer.next_frame() == b"{x}"


BAD_BOUNDS: list[tuple[Any, Any]] = [
    ("16", 64),
    (16, "64"),
    (16.0, 64),
    (16, 64.0),
    (None, 64),
    (16, None),
    (True, 64),
    (1, True),
    (False, 64),
    (0, 64),
    (16, 0),
    (-1, 64),
    (16, -64),
    (64, 63),
    (2, 1),
]


@pytest.mark.parametrize("cls", [LineFramer, MessageFramer])
@pytest.mark.parametrize(("max_message_size", "max_buffer_size"), BAD_BOUNDS)
def test_bad_bounds(
    cls: type[LineFramer | MessageFramer], max_message_size: Any, max_buffer_size: Any
) -> None:
    with pytest.raises(LocalProtocolError):
        cls(max_message_size=max_message_size, max_buffer_size=max_buffer_size)


@pytest.mark.parametrize("cls", [LineFramer, MessageFramer])
def test_bad_bound_messages(cls: type[LineFramer | MessageFramer]) -> None:
    with pytest.raises(LocalProtocolError, match="max_message_size must be a positive integer"):
        cls(max_message_size=0, max_buffer_size=8)
    with pytest.raises(LocalProtocolError, match="max_buffer_size must be a positive integer"):
        cls(max_message_size=8, max_buffer_size=True)
    with pytest.raises(LocalProtocolError, match="at least max_message_size"):
        cls(max_message_size=8, max_buffer_size=7)


@pytest.mark.parametrize("cls", [LineFramer, MessageFramer])
@pytest.mark.parametrize(("max_message_size", "max_buffer_size"), [(1, 1), (8, 8), (1, 10**9)])
def test_good_bounds(
    cls: type[LineFramer | MessageFramer], max_message_size: int, max_buffer_size: int
) -> None:
    framer = cls(max_message_size=max_message_size, max_buffer_size=max_buffer_size)
    assert framer.max_message_size == max_message_size
    assert framer.max_buffer_size == max_buffer_size
    assert framer.next_frame() is NEED_DATA


def test_signals_and_oversize() -> None:
    assert NEED_DATA is m.Wait.NEED_DATA  # the one sentinel type of every layer
    assert END_OF_STREAM is EndOfStream.END_OF_STREAM
    assert len({NEED_DATA, END_OF_STREAM}) == 2
    assert Oversize(size=5) == Oversize(size=5) != Oversize(size=6)
    with pytest.raises(TypeError):
        Oversize(5)  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        Oversize(size=5).size = 6  # type: ignore[misc]


# --- MessageFramer ------------------------------------------------------------


def message_framer(max_message_size: int = M, max_buffer_size: int = B) -> MessageFramer:
    return MessageFramer(max_message_size=max_message_size, max_buffer_size=max_buffer_size)


def test_message_each_feed_is_one_message() -> None:
    framer = message_framer()
    assert framer.next_frame() is NEED_DATA
    framer.feed(b'{"a":\n1}')  # a newline does not split it
    framer.feed(bytearray(b'{"b":2}\r\n'))  # nor is any line ending stripped
    framer.feed(memoryview(b'..{"c":3}')[2:])
    assert framer.buffered == 8 + 9 + 7
    frames: list[Frame] = []
    assert drain(framer, frames) is NEED_DATA
    assert frames == [b'{"a":\n1}', b'{"b":2}\r\n', b'{"c":3}']
    assert all(type(f) is bytes for f in frames)
    assert framer.buffered == 0
    assert framer.next_frame() is NEED_DATA


def test_message_is_copied() -> None:
    framer = message_framer()
    source = bytearray(b'{"a":1}')
    framer.feed(source)
    source[:] = b"changed"
    assert framer.next_frame() == b'{"a":1}'


def test_message_buffered_counts_down_as_frames_go() -> None:
    framer = message_framer()
    framer.feed(b"{1}")
    framer.feed(b"{22}")
    assert framer.buffered == 7
    assert framer.next_frame() == b"{1}"
    assert framer.buffered == 4
    assert framer.next_frame() == b"{22}"
    assert framer.buffered == 0


def test_message_of_exactly_max_message_size() -> None:
    framer = message_framer(max_message_size=4, max_buffer_size=4)
    framer.feed(b"{12}")
    assert framer.buffered == 4
    assert framer.next_frame() == b"{12}"


def test_message_oversize_is_reported_and_never_held() -> None:
    framer = message_framer(max_message_size=4, max_buffer_size=8)
    framer.feed(b"{1}")
    framer.feed(b"{123}")
    assert framer.buffered == 3
    framer.feed(b"x" * 1000)  # far past max_buffer_size too, but never held
    assert framer.buffered == 3
    framer.feed(b"    \n")  # a blank one is still oversize
    framer.feed(b"{2}")
    assert framer.buffered == 6
    frames: list[Frame] = []
    assert drain(framer, frames) is NEED_DATA
    assert frames == [b"{1}", Oversize(size=5), Oversize(size=1000), Oversize(size=5), b"{2}"]
    assert framer.buffered == 0


def test_message_oversize_counts_bytes_not_items() -> None:
    framer = message_framer(max_message_size=4, max_buffer_size=8)
    framer.feed(memoryview(array("I", [0x7B7B7B7B, 0x7D7D7D7D])))  # 2 items, 8 bytes
    assert framer.buffered == 0
    assert framer.next_frame() == Oversize(size=8)
    framer = message_framer(max_message_size=8, max_buffer_size=8)
    framer.feed(memoryview(array("I", [0x7B7B7B7B, 0x7D7D7D7D])))
    assert framer.buffered == 8
    assert framer.next_frame() == b"{{{{}}}}"
    assert framer.buffered == 0


@pytest.mark.parametrize("blank", [b"", b" ", b"\t", b"\r\n", b"\n", b" \t\r\n \n"])
def test_message_blank_is_skipped(blank: bytes) -> None:
    framer = message_framer()
    framer.feed(blank)
    assert framer.buffered == len(blank)
    assert framer.next_frame() is NEED_DATA
    assert framer.buffered == 0
    framer.feed(blank)
    framer.feed(b"x")
    framer.feed(blank)
    assert framer.next_frame() == b"x"
    assert framer.next_frame() is NEED_DATA
    assert framer.buffered == 0


def test_message_buffer_bound() -> None:
    framer = message_framer(max_message_size=4, max_buffer_size=10)
    framer.feed(b"{11}")
    framer.feed(b"{22}")
    with pytest.raises(LocalProtocolError, match="max_buffer_size=10"):
        framer.feed(b"{33}")
    assert framer.buffered == 8
    framer.feed(b"{}")
    with pytest.raises(LocalProtocolError):
        framer.feed(b"{")
    framer.feed(b"")  # empty fits exactly
    assert framer.buffered == 10
    assert framer.next_frame() == b"{11}"
    framer.feed(b"{44}")  # room again after draining
    frames: list[Frame] = []
    assert drain(framer, frames) is NEED_DATA
    assert frames == [b"{22}", b"{}", b"{44}"]
    assert framer.buffered == 0


def test_message_eof_after_queue_drains() -> None:
    framer = message_framer(max_message_size=4)
    framer.feed(b"{1}")
    framer.feed(b"     ")
    framer.feed(b"  ")
    framer.feed(b"{2}")
    assert framer.eof is False
    framer.feed_eof()
    assert framer.eof is True
    assert framer.next_frame() == b"{1}"
    assert framer.next_frame() == Oversize(size=5)
    assert framer.next_frame() == b"{2}"
    for _ in range(3):
        assert framer.next_frame() is END_OF_STREAM
    assert framer.buffered == 0


def test_message_eof_with_nothing_queued() -> None:
    framer = message_framer()
    framer.feed(b" ")
    framer.feed_eof()
    assert framer.next_frame() is END_OF_STREAM
    assert framer.next_frame() is END_OF_STREAM


@pytest.mark.parametrize("data", [b"{}", b"", b"x" * (M + 1)])
def test_message_feed_after_eof_raises(data: bytes) -> None:
    framer = message_framer()
    framer.feed(b"{}")
    framer.feed_eof()
    with pytest.raises(LocalProtocolError, match="after feed_eof"):
        framer.feed(data)
    assert framer.buffered == 2
    assert framer.next_frame() == b"{}"
    assert framer.next_frame() is END_OF_STREAM


# --- properties ---------------------------------------------------------------

PM = 8  # a small bound so that lines often pass it

_message = st.lists(st.sampled_from([b"{", b"}", b"a", b" ", b"\t", b"\r"]), max_size=3 * PM).map(
    b"".join
)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def _frame_stream(framer: LineFramer, chunks: list[bytes], eof: bool) -> list[Frame]:
    frames: list[Frame] = []
    for chunk in chunks:
        framer.feed(chunk)
        assert drain(framer, frames) is NEED_DATA
        assert framer.buffered <= framer.max_message_size + 1
    if eof:
        framer.feed_eof()
        assert drain(framer, frames) is END_OF_STREAM
        assert framer.next_frame() is END_OF_STREAM
        assert framer.buffered == 0
    return frames


@settings(max_examples=examples(times=5), deadline=None)
@given(
    messages=st.lists(st.tuples(_message, st.sampled_from([b"\n", b"\r\n"])), max_size=12),
    unterminated_last=st.booleans(),
    eof=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=30),
)
def test_property_line_framer(
    messages: list[tuple[bytes, bytes]], unterminated_last: bool, eof: bool, cuts: list[int]
) -> None:
    unterminated_last = unterminated_last and eof and bool(messages)
    data = b""
    expected: list[bytes | tuple[str, int]] = []
    for i, (message, sep) in enumerate(messages):
        last = unterminated_last and i == len(messages) - 1
        data += message if last else message + sep
        raw = message if last else message + sep[:-1]  # the line before its \n
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if len(line) > PM:
            expected.append(("oversize", len(raw)))
        elif line.strip(b" \t\r"):
            expected.append(line)
    framer = LineFramer(max_message_size=PM, max_buffer_size=len(data) + PM + 1)
    frames = _frame_stream(framer, _split(data, cuts), eof)
    assert len(frames) == len(expected), (frames, expected)
    for got, want in zip(frames, expected, strict=True):
        if isinstance(want, tuple):
            assert isinstance(got, Oversize)
            assert PM < got.size <= want[1]
        else:
            assert got == want


@settings(max_examples=examples(times=5), deadline=None)
@given(
    data=st.lists(st.sampled_from([b"{", b"a", b" ", b"\t", b"\r", b"\n"]), max_size=80).map(
        b"".join
    ),
    eof=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=20),
)
def test_property_chunking_does_not_matter(data: bytes, eof: bool, cuts: list[int]) -> None:
    def run(chunks: list[bytes]) -> list[Frame]:
        framer = LineFramer(max_message_size=PM, max_buffer_size=len(data) + PM + 1)
        return _frame_stream(framer, chunks, eof)

    whole = run([data])
    chunked = run(_split(data, cuts))
    bytewise = run([data[i : i + 1] for i in range(len(data))])
    for frames in (chunked, bytewise):
        assert len(frames) == len(whole)
        for got, want in zip(frames, whole, strict=True):
            if isinstance(want, Oversize):
                assert isinstance(got, Oversize)
                assert got.size > PM
            else:
                assert got == want


# --- the fast path ------------------------------------------------------------------------
# next_frame() hands out the usual line ("{" ... LF, within the bound, no CR) in one test
# and leaves everything else to the long way (_next_frame).  Both must frame alike.


class _LongWayOnly(LineFramer):
    def next_frame(self) -> Frame:
        return self._next_frame(self._buf.find(b"\n", self._scanned))


_LINE_PIECES = [
    b'{"a":1}\n',
    b'{"a":1}\r\n',
    b"{" + b"b" * 14 + b"}\n",  # 16 bytes: exactly the bound below
    b"{" + b"b" * 15 + b"}\n",  # one more
    b"\n",
    b" \t\r\n",
    b"x\n",
    b"\r",
    b"{",
    b"}\n",
]


def _frames_of(framer: LineFramer, parts: list[bytes]) -> list[Frame]:
    out: list[Frame] = []
    for part in parts:
        framer.feed(part)
        out.append(drain(framer, out))
    framer.feed_eof()
    out.append(drain(framer, out))
    return out


@settings(max_examples=examples(times=4), deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_LINE_PIECES), max_size=30),
    cuts=st.lists(st.integers(min_value=1, max_value=24), min_size=1, max_size=8),
)
def test_the_fast_path_frames_like_the_long_way(pieces: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(pieces)
    parts, at, turn = [], 0, 0
    while at < len(stream):
        size = cuts[turn % len(cuts)]
        parts.append(stream[at : at + size])
        at, turn = at + size, turn + 1

    def framer(kind: type[LineFramer]) -> LineFramer:
        return kind(max_message_size=16, max_buffer_size=64)

    assert _frames_of(framer(LineFramer), parts) == _frames_of(framer(_LongWayOnly), parts)
