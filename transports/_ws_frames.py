"""The length each WebSocket frame announces, read from its header as it arrives.

wsproto reads a frame's payload as the bytes come, so a frame whose header
announces more than the message bound (up to 2^64 - 1 bytes) is only refused
once that many bytes have arrived, if ever: the peer holds the connection for
as long as it trickles them.  ``FrameLengths`` reads the same byte stream beside
wsproto, headers only (RFC 6455, 5.2: two bytes, the extended length, the mask
key; then it skips the payload), and names the first length past ``limit`` the
moment it is read, so the reader closes with 1009 at once.  A length
with its top bit set (2^63 and above, which the RFC forbids) is past any limit
and is refused alike.

No I/O here: the readers (``host/websocket.py``, ``client/ws.py``) feed it.
"""

from __future__ import annotations

__all__ = ["FrameLengths"]

# The 7-bit length's two escapes: a 16-bit or a 64-bit length follows.
_TWO_BYTES, _EIGHT_BYTES = 126, 127


class FrameLengths:
    """Frame headers read from a WebSocket's incoming bytes; ``feed`` says when one
    announces more than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._head = bytearray()  # the header read so far
        self._judged = False  # its length was read (and is within the limit)
        self._skip = 0  # payload bytes still to pass over

    def feed(self, data: bytes) -> int | None:
        """Read ``data``; the length of the first frame in it that announces more than
        ``limit`` bytes (as soon as the length is read: nothing after it is), or ``None``."""
        at, end = 0, len(data)
        head = self._head
        while at < end:
            if self._skip:
                step = min(self._skip, end - at)
                self._skip -= step
                at += step
                continue
            take = min(_header_size(head) - len(head), end - at)
            head += data[at : at + take]
            at += take
            if not self._judged and len(head) >= _length_end(head):
                length = _announced(head)
                if length > self.limit:
                    return length
                self._judged = True
            if len(head) == _header_size(head):  # whole (the size grows with its 2nd byte)
                self._skip = _announced(head)
                head.clear()
                self._judged = False
        return None


def _length_end(head: bytearray) -> int:
    """Where the length of the header that begins with ``head`` ends (2 until its
    second byte says more)."""
    if len(head) < 2:
        return 2
    short = head[1] & 0x7F
    return 2 + (2 if short == _TWO_BYTES else 8 if short == _EIGHT_BYTES else 0)


def _header_size(head: bytearray) -> int:
    """How long the header that begins with ``head`` is: its length, then the mask key."""
    mask = 4 if len(head) >= 2 and head[1] & 0x80 else 0
    return _length_end(head) + mask


def _announced(head: bytearray) -> int:
    short = head[1] & 0x7F
    if short == _TWO_BYTES:
        return int.from_bytes(head[2:4], "big")
    if short == _EIGHT_BYTES:
        return int.from_bytes(head[2:10], "big")
    return short
