"""The SSE codec: the WHATWG reading rules, three ways, and the encoder."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mrtr_core as m

MODES = ("whole", "bytewise", "trailing")
UNFINISHED = b"data: not yet"


def read(stream: bytes, mode: str, **options: Any) -> list[Any]:
    """Every event (and Oversize) the decoder hands out for ``stream``, fed in ``mode``."""
    decoder = m.http.SseDecoder(**options)
    out: list[Any] = []

    def drain() -> None:
        while (event := decoder.next_event()) is not m.NEED_DATA:
            assert event is not m.wire.END_OF_STREAM
            out.append(event)

    if mode == "bytewise":
        for i in range(len(stream)):
            decoder.feed(stream[i : i + 1])
            drain()
    elif mode == "trailing":
        decoder.feed(stream + UNFINISHED)
        drain()
        before = list(out)
        decoder.feed(b"\n\n")
        drain()
        assert out[len(before) :] == [
            m.http._sse.SseEvent(data="not yet", id=decoder.last_event_id)
        ]
        del out[len(before) :]
    else:
        decoder.feed(stream)
        drain()
    decoder.feed_eof()
    assert decoder.next_event() is m.wire.END_OF_STREAM
    assert decoder.next_event() is m.wire.END_OF_STREAM
    with pytest.raises(m.LocalProtocolError):
        decoder.feed(b"data: x\n\n")
    return out


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_fields_comments_and_line_ends(mode: str) -> None:
    stream = (
        b"\xef\xbb\xbf: a comment\r\n"
        b"event: update\rdata: one\r\ndata\ndata:  two\nid: 7\nretry: 1x\nretry: 3000\n"
        b"unknown: field\n\n"
        b": keep-alive\n\n"
        b"data:test\n\n"
    )
    events = read(stream, mode)
    assert events == [
        m.http._sse.SseEvent(data="one\n\n two", event="update", id="7", retry=3000),
        m.http._sse.SseEvent(data="test", id="7"),
    ]


def test_an_empty_data_line_dispatches_an_empty_event_but_no_data_dispatches_nothing(
    mode: str,
) -> None:
    assert read(b"data\n\nevent: x\n\ndata:\n\n", mode) == [
        m.http._sse.SseEvent(data=""),
        m.http._sse.SseEvent(data=""),
    ]


def test_ids_persist_nul_is_ignored_and_retry_outlives_an_empty_event() -> None:
    decoder = m.http.SseDecoder()
    decoder.feed(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\nretry: 500\nid\n\ndata: c\n\n")
    first, second, third = (decoder.next_event() for _ in range(3))
    assert (first.id, second.id, third.id) == ("1", "1", "")  # type: ignore[union-attr]
    assert decoder.last_event_id == ""
    assert decoder.reconnection_time == 500 and third.retry is None  # type: ignore[union-attr]


def test_a_bom_is_dropped_only_at_the_start_and_may_arrive_split() -> None:
    decoder = m.http.SseDecoder()
    for piece in (b"\xef", b"\xbb", b"\xbfdata: x\n\n"):
        decoder.feed(piece)
    assert decoder.next_event() == m.http._sse.SseEvent(data="x")
    decoder.feed(b"\xef\xbb\xbfdata: y\n\n")  # not at the start: part of the field name
    assert decoder.next_event() is m.NEED_DATA
    short = m.http.SseDecoder()
    short.feed(b"\xef")
    short.feed_eof()
    assert short.next_event() is m.wire.END_OF_STREAM


def test_a_cr_at_the_end_of_a_chunk_takes_a_following_lf() -> None:
    decoder = m.http.SseDecoder()
    decoder.feed(b"data: a\r")
    assert decoder.next_event() is m.NEED_DATA
    decoder.feed(b"\n\r")  # the LF ends "data: a"; the CR is a blank line
    assert decoder.next_event() == m.http._sse.SseEvent(data="a")
    decoder.feed(b"\ndata: b\r\r")  # that LF belongs to the blank line's CR
    assert decoder.next_event() == m.http._sse.SseEvent(data="b")
    assert decoder.next_event() is m.NEED_DATA


def test_invalid_utf8_becomes_replacement_characters_and_eof_drops_an_unfinished_event() -> None:
    decoder = m.http.SseDecoder()
    decoder.feed(b"data: \xff\n\ndata: never dispatched\n")
    decoder.feed_eof()
    assert decoder.next_event() == m.http._sse.SseEvent(data="\ufffd")
    assert decoder.next_event() is m.wire.END_OF_STREAM


@pytest.mark.parametrize(
    "big",
    [
        b"data: " + b"x" * 100 + b"\n",  # one long line
        b"data: xx\n" * 40,  # many short lines
    ],
)
def test_an_oversize_event_is_reported_once_and_skipped(mode: str, big: bytes) -> None:
    events = read(big + b"\ndata: next\n\n", mode, max_event_size=64)
    assert len(events) == 2
    assert isinstance(events[0], m.wire.Oversize) and events[0].size > 64
    assert events[1] == m.http._sse.SseEvent(data="next")


def test_an_oversize_line_still_arriving_is_not_held() -> None:
    decoder = m.http.SseDecoder(max_event_size=64)
    decoder.feed(b"data: " + b"x" * 100)
    assert isinstance(decoder.next_event(), m.wire.Oversize)
    for _ in range(10):
        decoder.feed(b"y" * 50)
        assert decoder.next_event() is m.NEED_DATA
        assert len(decoder._buf) <= 64
    decoder.feed(b"\n\ndata: ok\n\n")
    assert decoder.next_event() == m.http._sse.SseEvent(data="ok")


@pytest.mark.parametrize("bad", [0, -1, True, "8"])
def test_the_bound_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(m.LocalProtocolError):
        m.http.SseDecoder(max_event_size=bad)


def test_the_encoder() -> None:
    assert m.http.encode_sse("x") == b"data: x\n\n"
    assert m.http.encode_sse("a\r\nb\rc\nd", event="e", id="1", retry=5) == (
        b"event: e\nid: 1\nretry: 5\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    )
    assert m.http._sse.encode_sse_comment() == b":\n\n"
    assert m.http._sse.encode_sse_comment("ping") == b": ping\n\n"
    for bad in (
        lambda: m.http.encode_sse("x", event="a\nb"),
        lambda: m.http.encode_sse("x", id="a\rb"),
        lambda: m.http.encode_sse("x", id="a\0b"),
        lambda: m.http.encode_sse("x", retry=-1),
        lambda: m.http.encode_sse("x", retry=True),
        lambda: m.http._sse.encode_sse_comment("a\nb"),
    ):
        with pytest.raises(m.LocalProtocolError):
            bad()


NAMES = st.text(
    st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)), max_size=8
)


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(),
            st.none() | NAMES.filter(bool),
            st.none() | NAMES,
            st.none() | st.integers(0, 10**6),
        ),
        max_size=5,
    ),
    st.data(),
)
def test_encoded_events_decode_back_in_any_chunking(events: list[Any], data: Any) -> None:
    stream = b"".join(
        m.http.encode_sse(text, event=event, id=ident, retry=retry)
        + m.http._sse.encode_sse_comment()
        for text, event, ident, retry in events
    )
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = m.http.SseDecoder()
    got: list[Any] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoder.feed(stream[start:end])
        while (event := decoder.next_event()) is not m.NEED_DATA:
            got.append(event)
    expected = []
    last_id = None
    for text, event, ident, retry in events:
        last_id = ident if ident is not None else last_id
        normalised = text.replace("\r\n", "\n").replace("\r", "\n")
        expected.append(
            m.http._sse.SseEvent(data=normalised, event=event or "message", id=last_id, retry=retry)
        )
    assert got == expected


def test_the_encoder_refuses_text_that_is_not_valid_unicode() -> None:
    for bad in (
        lambda: m.http.encode_sse("\ud800"),
        lambda: m.http._sse.encode_sse_comment("\udfff"),
    ):
        with pytest.raises(m.LocalProtocolError, match="valid Unicode"):
            bad()
