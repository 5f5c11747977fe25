"""SSE event ids and the replay buffer of one 2025-era session (sans-IO).

The model.  Every SSE stream of a session (one per POSTed request, and the
standalone ``GET`` stream) gets a number, and every event on it an id
``"{stream}-{seq}"``, ``seq`` counting every event of the session.  What is
sent is recorded here first, and a writer reads it from here: a live
connection reads as events arrive, and a client whose stream was cut resumes
with ``Last-Event-ID`` (a ``GET``) and reads what came after that id on that
stream, then the rest live, until the stream is finished.  A stream's events
never show on another stream, and the buffer is per session, so no session
can read another's.

Bounds: at most ``max_events`` events and ``max_bytes`` bytes of data in
all, every event counted; past either, the oldest events go.  One event is at
most ``max_event_bytes`` (a quarter of ``max_bytes`` unless told): a larger one
is never kept for replay.  It is handed to the stream's live reader, if the
stream has one when it is recorded (``live=True``), once, and then forgotten;
with no live reader, or once that reader is gone (``reader_gone``), it is lost
as an evicted event is.  So what a session holds is ``max_bytes`` however large
its events, plus at most one event in passing per stream being read.  A reader
whose next event went is told so (:class:`ReplayLost`): the client cannot get a
gapless stream any more and the HTTP server refuses the resumption (its
request is lost to it).  A finished stream is forgotten with its last event.
"""

from __future__ import annotations

from collections import deque

import attrs

from .._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError

__all__ = ["STANDALONE", "Cursor", "ReplayBuffer", "ReplayLost", "parse_event_id"]

#: The standalone GET stream's number.
STANDALONE = 0


class ReplayLost(RemoteProtocolError):
    """A ``Last-Event-ID`` (or a reader's place) this buffer cannot continue from."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=INVALID_REQUEST)


def parse_event_id(value: str) -> tuple[int, int]:
    """``"{stream}-{seq}"`` -> (stream, seq); :class:`ReplayLost` when it is not one."""
    stream, sep, seq = value.partition("-")
    # (ASCII first: str.isdigit() is also true of "\u00b2", which int() refuses, and of
    # other scripts' digits, which int() reads: ids we never sent)
    if not (sep and value.isascii() and stream.isdigit() and seq.isdigit() and len(value) <= 40):
        raise ReplayLost(f"Last-Event-ID {value[:40]!r} is not an event id of this server")
    return int(stream), int(seq)


@attrs.frozen
class Cursor:
    """A reader's place: the stream, and the last ``seq`` it has."""

    stream: int
    seq: int


@attrs.define
class _Stream:
    finished: bool = False
    #: The highest seq of this stream dropped from the buffer (0: none).
    lost: int = 0
    #: Events of this stream in the buffer.
    held: int = 0


class ReplayBuffer:
    """The events of one session's SSE streams, bounded by count and bytes."""

    def __init__(self, max_events: int, max_bytes: int, max_event_bytes: int | None = None) -> None:
        if max_event_bytes is None:
            max_event_bytes = max(1, max_bytes // 4)
        if max_events < 1 or max_bytes < 1 or not 1 <= max_event_bytes <= max_bytes:
            raise LocalProtocolError(
                "max_events and max_bytes must be positive, and max_event_bytes 1 to max_bytes"
            )
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.max_event_bytes = max_event_bytes
        self._events: deque[tuple[int, int, bytes]] = deque()  # (stream, seq, data)
        self._bytes = 0
        #: Events over ``max_event_bytes`` on their way to a live reader: (seq, data).
        self._passing: dict[int, tuple[int, bytes]] = {}
        self._seq = 0
        self._next_stream = STANDALONE + 1
        self._streams: dict[int, _Stream] = {STANDALONE: _Stream()}

    @property
    def size(self) -> tuple[int, int]:
        """(events, bytes) kept for replay: at most ``max_events``, ``max_bytes``."""
        return len(self._events), self._bytes

    @property
    def passing_bytes(self) -> int:
        """Bytes of the events too large to keep, still waiting for their live reader."""
        return sum(len(data) for _, data in self._passing.values())

    def open_stream(self) -> int:
        """A new stream's number."""
        stream = self._next_stream
        self._next_stream += 1
        self._streams[stream] = _Stream()
        return stream

    def record(self, stream: int, data: bytes, *, live: bool = False) -> str:
        """Keep one event of ``stream`` (``b""``: a priming event); its id.

        An event over ``max_event_bytes`` is not kept: it goes to the stream's
        reader once when ``live`` (a reader is there now), else it is lost."""
        state = self._streams.get(stream)
        if state is None or state.finished:
            raise LocalProtocolError(f"stream {stream} is not open")
        self._seq += 1
        if len(data) > self.max_event_bytes:
            self._lose_passing(stream)  # (an earlier one not yet read: lost, one at a time)
            if live:
                self._passing[stream] = (self._seq, data)
            else:
                state.lost = self._seq
            return f"{stream}-{self._seq}"
        # A copy of its own size: ``max_bytes`` bounds what is held, and orjson's output
        # keeps the 4 KiB buffer it was written in whatever its length.
        self._events.append((stream, self._seq, bytes(memoryview(data))))
        state.held += 1
        self._bytes += len(data)
        while len(self._events) > self.max_events or self._bytes > self.max_bytes:
            self._drop_oldest()  # (never the newest: it fits, max_event_bytes <= max_bytes)
        return f"{stream}-{self._seq}"

    def reader_gone(self, stream: int) -> None:
        """Nobody reads ``stream`` now: an event passing on it is lost."""
        self._lose_passing(stream)
        self._forget_if_done(stream)

    def _lose_passing(self, stream: int) -> None:
        passing = self._passing.pop(stream, None)
        if passing is not None:
            state = self._streams[stream]
            state.lost = max(state.lost, passing[0])

    def _forget_if_done(self, stream: int) -> None:
        state = self._streams.get(stream)
        if state is not None and state.finished and state.held == 0 and stream not in self._passing:
            del self._streams[stream]

    def _drop_oldest(self) -> None:
        stream, seq, data = self._events.popleft()
        self._bytes -= len(data)
        state = self._streams[stream]
        state.lost = max(state.lost, seq)
        state.held -= 1
        self._forget_if_done(stream)

    def finish(self, stream: int) -> None:
        """No more events on ``stream`` (its response was recorded)."""
        state = self._streams.get(stream)
        if state is not None and stream != STANDALONE:
            state.finished = True
            self._forget_if_done(stream)

    def start(self, stream: int) -> Cursor:
        """A reader from the beginning of ``stream``."""
        return Cursor(stream, 0)

    def tail(self, stream: int) -> Cursor:
        """A reader of what ``stream`` records from now on."""
        return Cursor(stream, self._seq)

    def resume(self, last_event_id: str) -> Cursor:
        """A reader after ``last_event_id``; :class:`ReplayLost` when that is not possible."""
        stream, seq = parse_event_id(last_event_id)
        state = self._streams.get(stream)
        if state is None or seq > self._seq:
            raise ReplayLost(
                f"Last-Event-ID {last_event_id!r}: no such stream in this session "
                "(finished and forgotten, or never opened)"
            )
        if seq < state.lost:
            raise ReplayLost(
                f"Last-Event-ID {last_event_id!r}: later events of that stream are no "
                "longer held (the session's replay buffer was full, or one was too large "
                "to keep)"
            )
        return Cursor(stream, seq)

    def read(self, cursor: Cursor) -> tuple[list[tuple[str, bytes]], Cursor, bool]:
        """The events after ``cursor`` as (id, data), the new cursor, and whether the
        stream is finished with nothing more to read."""
        state = self._streams.get(cursor.stream)
        if state is None or cursor.seq < state.lost:  # (a reader that read all saw done)
            raise ReplayLost(f"events of stream {cursor.stream} were dropped before being read")
        found = [
            (seq, data)
            for stream, seq, data in self._events
            if stream == cursor.stream and seq > cursor.seq
        ]
        if cursor.stream in self._passing:  # handed over once: never to a resumption
            found = sorted([*found, self._passing[cursor.stream]], key=lambda event: event[0])
            self._lose_passing(cursor.stream)
            self._forget_if_done(cursor.stream)
        last = found[-1][0] if found else cursor.seq
        events = [(f"{cursor.stream}-{seq}", data) for seq, data in found]
        return events, Cursor(cursor.stream, last), state.finished
