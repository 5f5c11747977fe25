"""Server-sent events (text/event-stream), sans-IO: an encoder and an incremental decoder.

Streamable HTTP answers a request with a request-scoped SSE stream when the
server sends progress or notifications before the response.  Each event's
``data`` is one JSON-RPC message, for a ``Connection(framing="messages")``.

The decoder follows the WHATWG HTML "event stream interpretation" rules: lines
end in CR LF, LF or CR (a CR at the end of a chunk waits for a possible LF);
one leading byte-order mark is dropped; a line starting with ``:`` is a
comment; ``field: value`` with one optional space after the colon; a field
with no colon has an empty value; ``data`` lines accumulate joined by LF;
``event`` sets the type (``message`` when absent); ``id`` sets the event id
buffer unless it contains NUL, which becomes the stream's last event id when
the event is dispatched; ``retry`` sets the reconnection time when it is all
ASCII digits (more than 12 digits are ignored: no peer gets to make us parse
a huge number); unknown fields are ignored; a blank line dispatches the
event, unless its data is empty.  At end of stream an unfinished event is
discarded, its id too.  Bytes are decoded as UTF-8 with replacement
characters.  A CR ends its line at once; a LF right after it, even in the
next chunk, belongs to it.

The usual event (``data: <one line>`` LF LF at the start of an event) is read
in one go; every other shape takes the general line-by-line path, and the
tests hold both paths to the same events.

Bound: an event whose field lines (and a line still waiting for its end)
pass ``max_event_size`` bytes is reported once as :class:`~mrtr_core.wire.Oversize`
and skipped through its blank line; the stream goes on with the next event.
"""

from __future__ import annotations

import re

import attrs

from .._errors import LocalProtocolError
from .._wait import NEED_DATA
from ..wire._framing import END_OF_STREAM, NoFrame, Oversize

DEFAULT_MAX_EVENT_SIZE = 16 * 1024 * 1024

_LINE_END = re.compile(rb"[\r\n]")
_BOM = b"\xef\xbb\xbf"


@attrs.frozen(kw_only=True)
class SseEvent:
    """One dispatched event.

    ``id`` is the last event id *after* this event (ids persist across events,
    as the standard says), ``None`` if none was ever set; ``retry`` is the
    reconnection time in milliseconds set while this event was read, or ``None``.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


_new = object.__new__
_set_data, _set_event, _set_id, _set_retry = (
    SseEvent.__dict__[name].__set__ for name in ("data", "event", "id", "retry")
)


def _event(data: str, id: str | None) -> SseEvent:
    """``SseEvent(data=data, id=id)`` at a third of its cost: the decoder's hot path
    fills the frozen record's slots directly (its values are already what they must be)."""
    event = _new(SseEvent)
    _set_data(event, data)
    _set_event(event, "message")
    _set_id(event, id)
    _set_retry(event, None)
    return event


def _single_line(name: str, value: str) -> None:
    if "\n" in value or "\r" in value:
        raise LocalProtocolError(f"an SSE {name} cannot contain a line break")


def encode_sse(
    data: str, *, event: str | None = None, id: str | None = None, retry: int | None = None
) -> bytes:
    """One event as bytes; multi-line ``data`` becomes several ``data`` lines."""
    out: list[str] = []
    if event is not None:
        _single_line("event type", event)
        out.append(f"event: {event}\n")
    if id is not None:
        _single_line("id", id)
        if "\0" in id:
            raise LocalProtocolError("an SSE id cannot contain NUL")
        out.append(f"id: {id}\n")
    if retry is not None:
        if not isinstance(retry, int) or isinstance(retry, bool) or not 0 <= retry < 10**12:
            raise LocalProtocolError("retry is a non-negative integer of milliseconds")
        out.append(f"retry: {retry}\n")
    for line in re.split(r"\r\n|\r|\n", data):
        out.append(f"data: {line}\n")
    out.append("\n")
    return _utf8("".join(out))


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate
        raise LocalProtocolError(f"an SSE event must be valid Unicode: {exc}") from exc


def encode_sse_comment(text: str = "") -> bytes:
    """A comment line (a keep-alive that no client dispatches)."""
    _single_line("comment", text)
    return _utf8(f": {text}\n\n") if text else b":\n\n"


class SseDecoder:
    """Incremental text/event-stream decoder: ``feed`` bytes, then ``next_event()``."""

    __slots__ = (
        "_buf",
        "_data",
        "_discarding",
        "_eof",
        "_event",
        "_event_size",
        "_id_buffer",
        "_last_id",
        "_reconnection",
        "_retry",
        "_scanned",
        "_skip_lf",
        "_started",
        "max_event_size",
    )

    def __init__(self, *, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        if not isinstance(max_event_size, int) or isinstance(max_event_size, bool):
            raise LocalProtocolError("max_event_size must be a positive integer")
        if max_event_size < 1:
            raise LocalProtocolError("max_event_size must be a positive integer")
        self.max_event_size = max_event_size
        self._buf = bytearray()
        self._scanned = 0  # no line end before this offset of _buf
        self._skip_lf = False  # the last line ended in CR: a LF right after belongs to it
        self._started = False  # the BOM check is done
        self._eof = False
        self._data: list[str] = []
        self._event = ""
        self._retry: int | None = None
        self._id_buffer: str | None = None
        self._last_id: str | None = None
        self._reconnection: int | None = None
        self._event_size = 0  # bytes of field lines in the event being read
        self._discarding = False

    @property
    def last_event_id(self) -> str | None:
        """The last event id of the stream (set by dispatched events; it persists)."""
        return self._last_id

    @property
    def reconnection_time(self) -> int | None:
        """The latest ``retry`` (milliseconds), also when no event carried it out."""
        return self._reconnection

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._eof:
            raise LocalProtocolError("cannot feed data after feed_eof()")
        self._buf += data

    def feed_eof(self) -> None:
        self._eof = True

    def next_event(self) -> SseEvent | Oversize | NoFrame:
        """The next event, an :class:`Oversize` report, ``NEED_DATA`` or ``END_OF_STREAM``."""
        buf = self._buf
        # The usual event, in one go: "data: <one line>" LF LF at the start of an event
        # (between events, with no field read, nothing to skip and nothing pending).
        if (
            buf.startswith(b"data: ")
            and self._event_size == 0
            and self._started
            and not self._skip_lf
            and not self._discarding
            and not self._eof
        ):
            start = max(6, self._scanned)  # (no CR or LF before _scanned)
            end = buf.find(b"\n", start)
            if end < 0:
                if buf.find(b"\r", start) < 0:
                    self._scanned = len(buf)
                    return self._wait()
            elif (
                end + 1 < len(buf)
                and buf[end + 1] == 0x0A
                and end < self.max_event_size  # its line and LF: end + 1 bytes
                and buf.find(b"\r", start, end) < 0
            ):
                data = buf[6:end].decode("utf-8", "replace")
                del buf[: end + 2]
                self._scanned = 0
                self._last_id = last_id = self._id_buffer
                return _event(data, last_id)
        return self._next_event()

    def _next_event(self) -> SseEvent | Oversize | NoFrame:
        while True:
            line = self._next_line()
            if line is None:
                return self._wait()
            if not line:
                found = self._dispatch()
                if found is not None:
                    return found
                continue
            if self._discarding:
                continue
            self._event_size += len(line) + 1
            if self._event_size > self.max_event_size:
                return self._oversize(self._event_size)
            self._field(line)

    def _wait(self) -> Oversize | NoFrame:
        if not self._started and not self._eof:
            return NEED_DATA  # at most two bytes that may be the start of a BOM
        pending = self._event_size + len(self._buf)
        if not self._discarding and pending > self.max_event_size:
            return self._oversize(pending)
        if self._discarding and len(self._buf) > 1:
            # Nothing of this line will be read: hold one byte of it, so that its end
            # still ends a (non-blank) line rather than look like the event's end.
            del self._buf[:-1]
            self._scanned = 1
        if self._eof:
            self._reset()  # an unfinished event at the end is discarded
            self._discarding = False
            del self._buf[:]
            return END_OF_STREAM
        return NEED_DATA

    def _oversize(self, size: int) -> Oversize:
        self._discarding = True
        self._data.clear()
        return Oversize(size=size)

    def _next_line(self) -> bytes | None:
        buf = self._buf
        if not self._started:
            if len(buf) < len(_BOM) and _BOM.startswith(bytes(buf)) and not self._eof:
                return None  # maybe the start of a BOM
            self._started = True
            if buf.startswith(_BOM):
                del buf[: len(_BOM)]
        if self._skip_lf and buf:
            self._skip_lf = False
            if buf[0] == 0x0A:
                del buf[:1]
        found = _LINE_END.search(buf, self._scanned)
        if found is None:
            self._scanned = len(buf)
            return None
        end = found.start()
        line = bytes(buf[:end])
        if buf[end] == 0x0D:
            if end + 1 < len(buf):
                cut = end + 2 if buf[end + 1] == 0x0A else end + 1
            else:
                cut = end + 1
                self._skip_lf = True  # its LF may be in the next chunk
        else:
            cut = end + 1
        del buf[:cut]
        self._scanned = 0
        return line

    def _field(self, line: bytes) -> None:
        if line[:1] == b":":
            return  # a comment
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        text = value.decode("utf-8", "replace")
        if name == b"data":
            self._data.append(text)
        elif name == b"event":
            self._event = text
        elif name == b"id":
            if "\0" not in text:
                self._id_buffer = text
        elif name == b"retry" and value.isdigit() and len(value) <= 12:  # b"" is no digit
            self._retry = self._reconnection = int(value)
        # any other field is ignored

    def _dispatch(self) -> SseEvent | None:
        self._last_id = self._id_buffer  # even for an event that turns out empty
        if self._discarding:
            self._discarding = False
            self._reset()
            return None
        data = self._data
        if not data:
            self._reset()
            return None
        event = SseEvent(
            data="\n".join(data),
            event=self._event or "message",
            id=self._id_buffer,
            retry=self._retry,
        )
        self._reset()
        return event

    def _reset(self) -> None:
        self._data = []
        self._event = ""
        self._retry = None
        self._event_size = 0
