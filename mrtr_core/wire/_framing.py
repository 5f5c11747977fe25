"""Framing: where one message ends and the next begins.

Two framers share one interface, so the connection's state machine does not
care which it has:

* :class:`LineFramer` for byte streams (stdio, TCP): newline-delimited JSON.
  A line ends at ``\\n``; a ``\\r`` before it is dropped; blank lines are
  skipped.  The JSON writers never emit a raw newline, so ``\\n`` cannot occur
  inside a message.
* :class:`MessageFramer` for transports that frame for us (an HTTP body, an SSE
  ``data`` payload, a WebSocket text frame): each ``feed`` is one message.

``feed`` only buffers; ``next_frame`` does the work, one frame per call, and
returns :data:`NEED_DATA` when it needs more bytes.  The usual line (``{`` up
to ``\n``, within the bound, no ``\r``) and the usual wait (part of a line
within the bound) are recognised in one test each; everything else takes the
general path, and the tests hold both paths to the same frames.

Bounds: a message larger than ``max_message_size`` is never handed out.  A
line whose size passes the bound is reported once as :class:`Oversize` (as
soon as the bound is passed, even before its newline arrives) and then
discarded through its newline, so the stream goes on with the next line; the
framer therefore never holds more than ``max_message_size + 1`` bytes of a line
it has not seen the end of (the one: a final ``\r``, which may start its line
end).  ``max_buffer_size`` bounds all bytes fed but not yet framed: feeding
past it raises :class:`~mrtr_core.LocalProtocolError` (drain ``next_frame``
until ``NEED_DATA`` between reads, and read at most ``max_buffer_size -
max_message_size - 1`` bytes at a time to never hit it).

End of stream: call ``feed_eof()`` once the peer has closed.  A final line
without a newline is then handed out like any other (it may well be a complete
message), after which ``next_frame`` returns :data:`END_OF_STREAM` for ever.
Feeding after ``feed_eof`` is a ``LocalProtocolError``.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Final, Literal

import attrs

from .._errors import LocalProtocolError
from .._wait import NEED_DATA, Wait


class EndOfStream(enum.Enum):
    """What ``next_frame`` returns once the peer closed and every frame was handed out."""

    END_OF_STREAM = "end_of_stream"


END_OF_STREAM: Final = EndOfStream.END_OF_STREAM
#: What ``next_frame`` returns when it has no frame: feed more bytes, or the end.
NoFrame = Literal[Wait.NEED_DATA] | EndOfStream

_BLANK = b" \t\r"


@attrs.frozen(kw_only=True)
class Oversize:
    """A message passed ``max_message_size`` and was (or is being) discarded.

    ``size`` is how many bytes of it had arrived when the bound was passed: at
    least ``max_message_size + 1``, not necessarily the whole message.
    """

    size: int


Frame = bytes | Oversize | NoFrame


class _Bounded:
    """What both framers share: the bounds, and the end of the stream."""

    __slots__ = ("_eof", "max_buffer_size", "max_message_size")

    def __init__(self, *, max_message_size: int, max_buffer_size: int) -> None:
        for name, value in (
            ("max_message_size", max_message_size),
            ("max_buffer_size", max_buffer_size),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise LocalProtocolError(f"{name} must be a positive integer, got {value!r}")
        if max_buffer_size < max_message_size:
            raise LocalProtocolError("max_buffer_size must be at least max_message_size")
        self.max_message_size = max_message_size
        self.max_buffer_size = max_buffer_size
        self._eof = False

    @property
    def eof(self) -> bool:
        return self._eof

    def feed_eof(self) -> None:
        self._eof = True

    def _admit(self, held: int, size: int) -> None:
        """Refuse ``size`` more bytes after EOF or past ``max_buffer_size``."""
        if self._eof:
            raise LocalProtocolError("cannot feed data after feed_eof()")
        if held + size > self.max_buffer_size:
            raise LocalProtocolError(
                f"more than max_buffer_size={self.max_buffer_size} bytes buffered: "
                "call next_event() until NEED_DATA before feeding more"
            )


class LineFramer(_Bounded):
    """Newline-delimited framing over a byte stream."""

    __slots__ = ("_buf", "_discarding", "_scanned")

    def __init__(self, *, max_message_size: int, max_buffer_size: int) -> None:
        super().__init__(max_message_size=max_message_size, max_buffer_size=max_buffer_size)
        self._buf = bytearray()
        # Bytes before this offset hold no newline: each byte is searched once.
        self._scanned = 0
        # True while dropping the rest of an oversize line.
        self._discarding = False

    @property
    def buffered(self) -> int:
        """Bytes fed and not yet framed (or discarded)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        # In bytes: a memoryview's len() counts items, not bytes.
        size = len(data) if type(data) is bytes else memoryview(data).nbytes
        self._admit(len(self._buf), size)
        self._buf += data

    def next_frame(self) -> Frame:
        buf = self._buf
        newline = buf.find(b"\n", self._scanned)
        # The usual line first, in one test: complete, within the bound, starting with
        # "{" (so not blank) and not ending in \r.  Everything else takes the long way.
        if (
            0 < newline <= self.max_message_size
            and buf[0] == 0x7B
            and buf[newline - 1] != 0x0D
            and not self._discarding
        ):
            line = bytes(buf[:newline])
            del buf[: newline + 1]
            self._scanned = 0
            return line
        if (
            newline < 0
            and len(buf) <= self.max_message_size
            and not self._discarding
            and not self._eof
        ):
            # The usual wait: part of a line, within the bound (a trailing \r included).
            self._scanned = len(buf)
            return NEED_DATA
        return self._next_frame(newline)

    def _next_frame(self, newline: int) -> Frame:
        buf = self._buf
        while True:
            if newline < 0:
                return self._no_newline()
            if self._discarding:
                del buf[: newline + 1]
                self._scanned = 0
                self._discarding = False
                newline = buf.find(b"\n")
                continue
            self._scanned = 0
            if newline > self.max_message_size:
                # The line is complete but too long; the newline may follow a \r.
                end = newline - 1 if buf[newline - 1] == 0x0D else newline
                if end > self.max_message_size:
                    del buf[: newline + 1]
                    return Oversize(size=end)
            line = bytes(buf[:newline])
            del buf[: newline + 1]
            if line.endswith(b"\r"):
                line = line[:-1]
            # Cheap test first: a message starts with "{"; anything else may be blank.
            if line and (line[0] == 0x7B or line.strip(_BLANK)):
                return line
            newline = buf.find(b"\n")

    def _no_newline(self) -> Frame:
        buf = self._buf
        if self._discarding:
            buf.clear()
            self._scanned = 0
            if self._eof:
                self._discarding = False
                return END_OF_STREAM
            return NEED_DATA
        size = len(buf)
        # A trailing \r is not part of the message (its \n may be on the way).
        if size > self.max_message_size + (buf[-1:] == b"\r"):
            # Report once, now, and drop what has arrived; the rest goes through the newline.
            buf.clear()
            self._scanned = 0
            self._discarding = not self._eof
            return Oversize(size=size)
        if self._eof:
            if buf.strip(_BLANK):
                line = bytes(buf)
                buf.clear()
                self._scanned = 0
                return line[:-1] if line.endswith(b"\r") else line
            buf.clear()
            return END_OF_STREAM
        self._scanned = len(buf)
        return NEED_DATA


class MessageFramer(_Bounded):
    """Message-at-a-time framing: every ``feed`` is one whole message."""

    __slots__ = ("_buffered", "_queue")

    def __init__(self, *, max_message_size: int, max_buffer_size: int) -> None:
        super().__init__(max_message_size=max_message_size, max_buffer_size=max_buffer_size)
        self._queue: deque[bytes | Oversize] = deque()
        self._buffered = 0

    @property
    def buffered(self) -> int:
        return self._buffered

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        size = memoryview(data).nbytes  # in bytes, like bytes(data) below
        if size > self.max_message_size:
            self._admit(0, 0)  # (still refused after EOF)
            # Never held: only its size is remembered.
            self._queue.append(Oversize(size=size))
            return
        self._admit(self._buffered, size)
        self._buffered += size
        self._queue.append(bytes(data))

    def next_frame(self) -> Frame:
        while self._queue:
            frame = self._queue.popleft()
            if isinstance(frame, Oversize):
                return frame
            self._buffered -= len(frame)
            if frame.strip(_BLANK + b"\n"):
                return frame
        return END_OF_STREAM if self._eof else NEED_DATA


Framer = LineFramer | MessageFramer
