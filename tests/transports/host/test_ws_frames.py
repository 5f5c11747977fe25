"""``FrameLengths``: the length each WebSocket frame announces, read from its header only."""

from __future__ import annotations

import struct

from mrtr_transports._ws_frames import FrameLengths
from wsproto.frame_protocol import FrameProtocol


def frames(*payloads: bytes, masked: bool) -> bytes:
    """Whole text frames as wsproto writes them (a client masks, a server does not)."""
    out = b""
    for payload in payloads:
        proto = FrameProtocol(client=masked, extensions=[])
        out += proto.send_data(payload.decode(), fin=True)
    return out


def test_frames_within_the_limit_pass_however_the_bytes_are_split() -> None:
    data = frames(b"a" * 10, b"b" * 200, b"c" * 70_000, b"", masked=True) + frames(
        b"d" * 126, masked=False
    )
    whole = FrameLengths(70_000)
    assert whole.feed(data) is None
    bytewise = FrameLengths(70_000)
    assert all(bytewise.feed(data[i : i + 1]) is None for i in range(len(data)))
    # In sync after all that: the next header is read as one.
    assert bytewise.feed(bytes([0x81, 127]) + struct.pack("!Q", 70_001)) == 70_001


def test_the_first_length_over_the_limit_is_named_from_its_header() -> None:
    for length, header in (
        (101, bytes([0x81, 0x80 | 101])),
        (5000, bytes([0x81, 126]) + struct.pack("!H", 5000)),
        (2**63 - 1, bytes([0x81, 0x80 | 127]) + struct.pack("!Q", 2**63 - 1)),
        (2**63, bytes([0x81, 127]) + struct.pack("!Q", 2**63)),
        (2**64 - 1, bytes([0x82, 127]) + b"\xff" * 8),
    ):
        lengths = FrameLengths(100)
        assert lengths.feed(frames(b"ok", masked=True)) is None
        *head, last = header
        assert lengths.feed(bytes(head)) is None  # (not whole yet)
        assert lengths.feed(bytes([last])) == length
