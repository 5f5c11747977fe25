"""The parser targets: NDJSON framing, SSE, the JSON-RPC codec, conversion of the
peer's JSON into the payload model, and the Streamable HTTP header checks."""

from __future__ import annotations

from typing import Any

import mrtr_core as m
from mrtr_core.http import _headers as headers_mod
from mrtr_core.wire import _codec as codec_mod
from mrtr_core.wire import _convert as convert_mod

from ._common import OVERSIZE, STDLIB, chunks, guarded


def _reference_lines(stream: bytes, max_size: int) -> list[Any]:
    """What ``LineFramer`` must hand out for ``stream``, by its documented rules."""
    out: list[Any] = []
    lines = stream.split(b"\n")
    for line in lines:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > max_size:
            out.append(OVERSIZE)
        elif line.strip(b" \t\r"):
            out.append(line)
    return out


def _drain_frames(
    framer: m.wire.LineFramer | m.wire._framing.MessageFramer, out: list[Any]
) -> bool:
    """Frames up to NEED_DATA / END_OF_STREAM; True at the end of the stream."""
    for _ in range(100_000):
        frame = framer.next_frame()
        if frame is m.NEED_DATA:
            return False
        if frame is m.wire.END_OF_STREAM:
            return True
        if isinstance(frame, m.wire.Oversize):
            assert frame.size > framer.max_message_size, frame
            out.append(OVERSIZE)
            continue
        assert isinstance(frame, bytes), frame
        assert len(frame) <= framer.max_message_size, (len(frame), framer.max_message_size)
        out.append(frame)
    raise AssertionError("next_frame never returned NEED_DATA")


def framing(data: bytes) -> None:
    """LineFramer: the same frames, however the stream is chunked, as the reference says.

    Control bytes: the message size bound, and the chunk sizes (all of ``data[2:10]``).
    """
    if len(data) < 10:
        return
    max_size = 1 + data[0] % 48
    stream = data[10:]
    sizes = data[2:10]
    # Whole: one feed (the buffer bound is the stream's size, so it always fits).
    whole = m.wire.LineFramer(max_message_size=max_size, max_buffer_size=max_size + len(stream))
    whole_frames: list[Any] = []
    whole.feed(stream)
    assert not _drain_frames(whole, whole_frames)
    whole.feed_eof()
    assert _drain_frames(whole, whole_frames)
    # Chunked, draining between feeds, reading at most max_buffer - max_message - 1 bytes
    # at a time, as documented: the buffer bound is never hit.
    cut = m.wire.LineFramer(max_message_size=max_size, max_buffer_size=max_size + 65)
    cut_frames: list[Any] = []
    for piece in chunks(stream, sizes):
        cut.feed(piece)
        assert cut.buffered <= max_size + 65
        assert not _drain_frames(cut, cut_frames)
    cut.feed_eof()
    assert _drain_frames(cut, cut_frames)
    assert cut.next_frame() is m.wire.END_OF_STREAM
    assert whole_frames == cut_frames, (whole_frames, cut_frames)
    assert whole_frames == _reference_lines(stream, max_size), whole_frames
    # Whole messages: each line fed on its own is handed out as itself (or Oversize).
    messages = m.wire._framing.MessageFramer(max_message_size=max_size, max_buffer_size=max_size)
    for line in stream.split(b"\n")[: data[1] % 8]:
        messages.feed(line)
        found: list[Any] = []
        _drain_frames(messages, found)
        if len(line) > max_size:
            assert found == [OVERSIZE], found
        else:
            assert found == ([line] if line.strip(b" \t\r\n") else []), found


# --- SSE decoding ----------------------------------------------------------------------


def _sse_events(decoder: m.http.SseDecoder, out: list[Any]) -> bool:
    for _ in range(100_000):
        event = decoder.next_event()
        if event is m.NEED_DATA:
            return False
        if event is m.wire.END_OF_STREAM:
            return True
        if isinstance(event, m.wire.Oversize):
            out.append(OVERSIZE)
            continue
        assert isinstance(event, m.http._sse.SseEvent), event
        assert len(event.data.encode("utf-8", "surrogatepass")) <= 3 * decoder.max_event_size
        out.append(event)
    raise AssertionError("next_event never returned NEED_DATA")


def sse(data: bytes) -> None:
    """SseDecoder: the same events and final state however the stream is chunked;
    and what ``encode_sse`` writes decodes back to its data.

    Control bytes: the event size bound (0: the default), the chunk sizes.
    """
    if len(data) < 10:
        return
    bound = data[0] * 4 or m.http._sse.DEFAULT_MAX_EVENT_SIZE
    stream = data[10:]
    whole = m.http.SseDecoder(max_event_size=bound)
    whole_events: list[Any] = []
    whole.feed(stream)
    _sse_events(whole, whole_events)
    whole.feed_eof()
    assert _sse_events(whole, whole_events)
    cut = m.http.SseDecoder(max_event_size=bound)
    cut_events: list[Any] = []
    for piece in chunks(stream, data[2:10]):
        cut.feed(piece)
        assert not _sse_events(cut, cut_events)
    cut.feed_eof()
    assert _sse_events(cut, cut_events)
    assert whole_events == cut_events, (whole_events, cut_events)
    assert (whole.last_event_id, whole.reconnection_time) == (
        cut.last_event_id,
        cut.reconnection_time,
    )
    # The encoder's round trip, with the stream as the event's text.
    text = stream.decode("utf-8", "replace")
    event_type = text[: data[1] % 8] if data[1] & 1 else None
    encoded = guarded(lambda: m.http.encode_sse(text, event=event_type))
    if encoded is None:
        return
    back = m.http.SseDecoder()
    back.feed(encoded)
    back.feed_eof()
    decoded: list[Any] = []
    _sse_events(back, decoded)
    normal = text.replace("\r\n", "\n").replace("\r", "\n")
    # (one event even for empty text: its one data line is empty, and that dispatches)
    assert len(decoded) == 1 and decoded[0].data == normal, (decoded, normal)
    assert decoded[0].event == (event_type or "message"), decoded


# --- JSON-RPC codec and conversion ----------------------------------------------------
CODECS = [STDLIB, m.wire.Codec("auto")]


def codec(data: bytes) -> None:
    """decode -> encode -> decode is the identity, with either JSON backend."""
    for one in CODECS:
        message = guarded(lambda one=one: one.decode(data))
        if message is None:
            continue
        encoded = guarded(lambda one=one, message=message: one.encode(message))
        if encoded is None:
            continue  # (values one backend reads and cannot write: documented in _codec)
        assert b"\n" not in encoded, encoded
        assert one.decode(encoded) == message, (data, encoded)


#: Every payload class a peer's JSON is structured into.
PAYLOADS: list[type] = [
    m.wire.ElicitFormRequest,
    m.wire.ElicitUrlRequest,
    m.wire.CreateMessageRequest,
    m.wire.ListRootsRequest,
    m.wire.ElicitResult,
    m.wire.CreateMessageResult,
    m.wire.ListRootsResult,
    m.wire.Root,
]


def convert(data: bytes) -> None:
    """The peer's JSON into each payload class, an input request, an input_required
    result; whatever structures must unstructure and structure back to itself."""
    if len(data) < 1:
        return
    value = guarded(lambda: STDLIB.loads(data[1:]))
    if value is None:
        return
    kind = PAYLOADS[data[0] % len(PAYLOADS)]
    shaped = guarded(lambda: m.wire.structure(value, kind))
    if shaped is not None:
        assert m.wire.structure(m.wire.unstructure(shaped), kind) == shaped
    request = guarded(lambda: m.wire.structure_input_request(value))
    if request is not None:
        plain = m.wire._convert.unstructure_input_request(request)
        assert m.wire.structure_input_request(plain) == request
    result = guarded(lambda: m.wire.structure_input_required(value))
    if result is not None:
        plain = m.wire._convert.unstructure_input_required(result)
        assert m.wire.structure_input_required(plain) == result
    # The message classifier on the same value (a JSON-RPC object or not).
    guarded(lambda: codec_mod.message_from_json(value))
    guarded(lambda: convert_mod.unstructure_input_response(value))


# --- HTTP header checks ----------------------------------------------------------------


def headers(data: bytes) -> None:
    """A POST's headers against its body: the first line is a tool's inputSchema, the
    header lines follow up to a blank line, the body is the rest."""
    text = data.decode("utf-8", "replace")
    schema_line, _, rest = text.partition("\n")
    head, _, body = rest.partition("\n\n")
    schema = guarded(lambda: STDLIB.loads(schema_line))
    params = guarded(lambda: headers_mod.schema_header_params(schema)) if schema else None
    message = guarded(lambda: STDLIB.loads(body))
    if not isinstance(message, dict):
        return
    tool = headers_mod.called_tool(message)
    assert tool is None or (message.get("method") == "tools/call" and isinstance(tool, str))
    fields = [tuple(line.split(":", 1)) for line in head.split("\n") if ":" in line]
    received = headers_mod.header_fields((n.strip(), v.strip()) for n, v in fields)
    guarded(lambda: headers_mod.check_request_headers(received, message, header_params=params))
    # What a client would send for the same message passes the check.
    version = "2026-07-28"
    sent = guarded(
        lambda: headers_mod.request_headers(
            message, protocol_version=version, header_params=params
        ),
    )
    if sent is not None and "id" in message and isinstance(message.get("method"), str):
        mirrored = headers_mod.header_fields(sent)
        guarded(lambda: headers_mod.check_request_headers(mirrored, message, header_params=params))
