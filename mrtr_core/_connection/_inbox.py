"""What the peer sent, in arrival order: bytes through the framer, decoded values as given.

``receive_data`` and ``receive_message`` only buffer; :meth:`Inbox.next_message`
frames, parses and shape-checks one message at a time, so bad input is
reported lazily and in order whichever way it arrived.

A decoded value is read as its bytes would be: one nested deeper than the
codec's ``max_depth`` is refused as a parse error, and the rest is shape-checked.
It is handed out after every complete message received before it
(a line still missing its newline does not hold it up).  Bytes that arrive
while a decoded value waits are held behind it, under the same
``max_buffer_size`` as the framer's own, and reach the framer in turn.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs

from .._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError
from .._wait import NEED_DATA
from ..wire._codec import Codec, message_from_json
from ..wire._framing import (
    END_OF_STREAM,
    LineFramer,
    MessageFramer,
    NoFrame,
    Oversize,
)
from ..wire._model import Message, RequestId


@attrs.frozen
class Unreadable:
    """A message that could not be read; ``replyable`` when it may have been a request,
    ``answer_to`` the id it answers when it was plainly a response with a readable id."""

    error: RemoteProtocolError
    replyable: bool
    answer_to: RequestId | None = None


@attrs.frozen
class _Decoded:
    value: Any


class _EndOfInput:
    """``receive_data(b"")`` held behind a decoded value."""


_END = _EndOfInput()


class Inbox:
    __slots__ = ("_codec", "_eof", "_framer", "_held", "_queue")

    def __init__(self, framer: LineFramer | MessageFramer, codec: Codec) -> None:
        self._framer = framer
        self._codec = codec
        # Decoded values, and what arrived after the first of them that is still waiting.
        self._queue: deque[_Decoded | bytes | Oversize | _EndOfInput] = deque()
        self._held = 0  # bytes in _queue
        self._eof = False

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._queue:
            self._hold(data)
        elif not data:
            self._eof = True
            self._framer.feed_eof()
        else:
            self._framer.feed(data)

    def receive_message(self, value: Any) -> None:
        if self._eof:
            raise LocalProtocolError('cannot receive a message after receive_data(b"")')
        self._queue.append(_Decoded(value))

    def _hold(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            self._eof = True
            self._queue.append(_END)
            return
        if self._eof:
            raise LocalProtocolError("cannot feed data after feed_eof()")
        framer = self._framer
        size = memoryview(data).nbytes
        if isinstance(framer, MessageFramer) and size > framer.max_message_size:
            self._queue.append(Oversize(size=size))  # never held, as the framer would
            return
        if framer.buffered + self._held + size > framer.max_buffer_size:
            raise LocalProtocolError(
                f"more than max_buffer_size={framer.max_buffer_size} bytes buffered: "
                "call next_event() until NEED_DATA before feeding more"
            )
        self._queue.append(bytes(data))
        self._held += size

    def next_message(self) -> Message | Unreadable | NoFrame:
        """The next message, a report of one that could not be read, or a framer signal."""
        framer = self._framer
        while True:
            frame = framer.next_frame()
            if frame is NEED_DATA and self._queue:
                item = self._queue.popleft()
                if isinstance(item, _Decoded):
                    try:
                        self._codec.check_depth(item.value)
                        return message_from_json(item.value)
                    except RemoteProtocolError as exc:  # as its bytes would be
                        return _unreadable(item.value, exc)
                if isinstance(item, bytes):
                    self._held -= len(item)
                    framer.feed(item)  # (within max_buffer_size: _hold counted it)
                    continue
                if isinstance(item, _EndOfInput):
                    framer.feed_eof()
                    continue
                frame = item
            if frame is NEED_DATA or frame is END_OF_STREAM:
                return frame
            if isinstance(frame, Oversize):
                error = RemoteProtocolError(
                    f"message of at least {frame.size} bytes exceeds "
                    f"max_message_size={framer.max_message_size}",
                    code=INVALID_REQUEST,
                )
                return Unreadable(error, replyable=True)
            try:
                value = self._codec.parse(frame)
            except RemoteProtocolError as exc:
                return Unreadable(exc, replyable=True)
            try:
                self._codec.check_text_depth(frame, value)
                return message_from_json(value)
            except RemoteProtocolError as exc:
                return _unreadable(value, exc)


def _unreadable(value: Any, error: RemoteProtocolError) -> Unreadable:
    # Answer only what may have been a request: never a response or a notification.
    looks_like_request = (
        not isinstance(value, dict)
        or ("method" in value and "id" in value)
        or ("result" not in value and "error" not in value and "method" not in value)
    )
    # A response we cannot read still names what it answers: that request must end
    # (with this error), not wait for an answer that has come and gone.
    looks_like_answer = (
        isinstance(value, dict)
        and "method" not in value
        and ("result" in value or "error" in value)
    )
    answer_to = error.request_id if looks_like_answer else None
    return Unreadable(error, replyable=looks_like_request, answer_to=answer_to)
