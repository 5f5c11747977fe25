"""The 2025-era Streamable HTTP targets: what a server reads of a session's request
(which POST is 2025-era, its session headers, the session table, the replay buffer a
``Last-Event-ID`` resumes from), and what a client reads of a server's session id and
SSE event ids (``check_session_id``, ``StreamResumption``)."""

from __future__ import annotations

from typing import Any

import mrtr_core as m
from mrtr_core.http import _client_sessions as client_mod
from mrtr_core.http import _replay as replay_mod
from mrtr_core.http import _sessions as sessions_mod
from mrtr_core.http._headers import header_fields

from ._common import STDLIB, chunks, guarded

# --- Server side: headers, the session table, the replay buffer ----------------------------


def _headers_of(head: str) -> dict[str, list[str]]:
    """Header lines (``name: value``) as the HTTP server reads them (values stripped by
    the HTTP library, names lower-cased)."""
    pairs = [line.split(":", 1) for line in head.split("\n") if ":" in line]
    return header_fields((name.strip(), value.strip(" \t")) for name, value in pairs)


def _check_read(read: sessions_mod.LegacyHeaders, initialize: bool) -> None:
    if initialize:
        assert read.session_id is None, read
    else:
        assert read.session_id is not None and sessions_mod.valid_session_id(read.session_id)
    assert read.last_event_id is None or len(read.last_event_id) <= (
        sessions_mod.MAX_EVENT_ID_LENGTH
    )
    assert initialize or read.protocol_version in (
        *m.LEGACY_VERSIONS,
        sessions_mod.DEFAULT_LEGACY_VERSION,
    ), read


def _table_ops(table: sessions_mod.SessionTable, ops: list[str], ids: list[str]) -> None:
    """Drive the session table: the app admits and adds sessions with ids of its own
    making; the peer names ids (its own text, or one it was given) in lookups; work
    begins and ends; time moves on (the first character's code point)."""
    now = 0.0
    for op in ops:
        if not op:
            continue
        code, rest = op[0], op[1:]
        now += (ord(rest[0]) % 64) / 4 if rest else 0.25
        named = ids[ord(rest[1]) % len(ids)] if len(rest) > 1 and ids else rest[2:]
        if code == "a":  # the app opens a session (initialize)
            ending = table.admit(now)
            if ending is None:  # every session busy: none expired, the newcomer is refused
                assert table.expired(now) == [], table.expired(now)
                continue
            assert all(sid in table for sid in ending), ending
            for sid in ending:
                table.remove(sid)
            fresh = f"s{len(ids)}-{rest[2:10].encode('ascii', 'replace').hex()}"
            table.add(fresh, now)
            ids.append(fresh)
        elif code == "l":  # a request names a session
            expired = table.expired(now)
            if _lookup_found(table, named, now):
                assert named in table and named not in expired
            else:
                assert named not in table or named in expired
        elif code == "b":
            table.begin(named)
        elif code == "e":
            table.end(named, now)
        elif code == "x":
            for sid in table.expired(now):
                table.remove(sid)
        elif code == "d":  # DELETE
            table.remove(named)
        assert len(table) <= table.max_sessions


def _lookup_found(table: sessions_mod.SessionTable, named: str, now: float) -> bool:
    try:
        table.lookup(named, now)
    except sessions_mod.SessionRefused as exc:
        assert exc.status == 404, exc.status
        return False
    return True


def _replay_ops(buffer: replay_mod.ReplayBuffer, ops: list[str]) -> None:
    """Drive one session's replay buffer: the server opens streams, records events,
    finishes streams; the peer resumes from a ``Last-Event-ID`` of its own text (or
    one it was given) and reads."""
    streams = [replay_mod.STANDALONE]
    given: list[str] = []
    cursors: list[replay_mod.Cursor] = []
    for op in ops:
        if not op:
            continue
        code, rest = op[0], op[1:]
        pick = ord(rest[0]) if rest else 0
        if code == "o":
            streams.append(buffer.open_stream())
        elif code == "r":
            stream = streams[pick % len(streams)]
            data = rest[1:].encode()
            event_id = guarded(lambda s=stream, d=data: buffer.record(s, d))
            if event_id is not None:  # (None: a finished stream, the app's misuse, refused)
                given.append(event_id)
        elif code == "f":
            buffer.finish(streams[pick % len(streams)])
        elif code in "RG":  # the peer resumes: its own text, or an id it was sent
            text = rest if code == "R" or not given else given[pick % len(given)]
            cursor = _resume(buffer, text)
            if cursor is not None:
                cursors.append(cursor)
        elif code == "c" and cursors:
            cursor = cursors[pick % len(cursors)]
            read = guarded(lambda c=cursor: buffer.read(c))
            if read is not None:
                found, after, _ = read
                seqs = [replay_mod.parse_event_id(eid) for eid, _ in found]
                assert all(stream == cursor.stream for stream, _ in seqs), seqs
                assert [seq for _, seq in seqs] == sorted({seq for _, seq in seqs}), seqs
                assert all(seq > cursor.seq for _, seq in seqs), (seqs, cursor)
                assert after.stream == cursor.stream and after.seq >= cursor.seq
                cursors.append(after)
        events, size = buffer.size
        assert events <= buffer.max_events or events == 1, buffer.size
        assert size <= buffer.max_bytes or events == 1, buffer.size


def _resume(buffer: replay_mod.ReplayBuffer, text: str) -> replay_mod.Cursor | None:
    """A ``Last-Event-ID`` as the HTTP server takes it: through the header rules, then
    the buffer; a refusal is a ``RemoteProtocolError``, never anything else."""
    read = guarded(
        lambda: sessions_mod.read_legacy_headers({"mcp-session-id": ["s"], "last-event-id": [text]})
    )
    if read is None or read.last_event_id is None:
        return None
    parsed = guarded(lambda: replay_mod.parse_event_id(read.last_event_id))
    cursor = guarded(lambda: buffer.resume(read.last_event_id))
    if cursor is not None:
        assert parsed == (cursor.stream, cursor.seq), (parsed, cursor)
    return cursor  # type: ignore[no-any-return]


def http_sessions(data: bytes) -> None:
    """A 2025-era request at the server: the body's JSON on the first line, header lines
    up to a blank line, then operations on the session table and the replay buffer (one
    per line, the first character says which).

    Control bytes: ``data[0]`` bit 0: the request is an ``initialize``; bits 1-3: the
    table's bound (1..8 sessions); ``data[1]``: the replay buffer's bounds (events
    1..16, bytes 1..256, from the low and high nibble).  The rest is read as latin-1,
    as the HTTP server decodes header values.
    """
    if len(data) < 2:
        return
    initialize = bool(data[0] & 1)
    text = data[2:].decode("latin-1")
    body, _, rest = text.partition("\n")
    head, _, ops_text = rest.partition("\n\n")
    received = _headers_of(head)
    message = guarded(lambda: STDLIB.loads(body))
    legacy = m.http.is_legacy_message(received, message)
    assert isinstance(legacy, bool)
    read = guarded(lambda: sessions_mod.read_legacy_headers(received, initialize=initialize))
    if read is not None:
        _check_read(read, initialize)
    ops = ops_text.split("\n")
    table = sessions_mod.SessionTable(1 + (data[0] >> 1) % 8, idle_timeout=5.0)
    _table_ops(table, ops, [])
    if read is not None and read.session_id is not None:
        _lookup_found(table, read.session_id, 0.0)
    buffer = replay_mod.ReplayBuffer(1 + data[1] % 16, max_bytes=1 + (data[1] >> 4) * 16)
    _replay_ops(buffer, ops)
    if read is not None and read.last_event_id is not None:
        _resume(buffer, read.last_event_id)


# --- Client side: the server's session id and its SSE event ids ---------------------------


def client_sessions(data: bytes) -> None:
    """What a 2025-era server says to a client about its session: the first line is an
    ``Mcp-Session-Id`` header value (raw bytes), the rest an SSE stream whose event ids
    and ``retry`` fields feed a ``StreamResumption``, the stream broken after each event.

    Control bytes: ``data[0]``: the attempts allowed in a row (0..7); ``data[1:5]``: how
    the stream is cut.
    """
    if len(data) < 5:
        return
    raw, _, stream = data[5:].partition(b"\n")
    session_id = guarded(lambda: client_mod.check_session_id(raw))
    if session_id is not None:
        assert sessions_mod.valid_session_id(session_id, client_mod.MAX_PEER_SESSION_ID_LENGTH)
        headers = client_mod.session_headers(session_id, "2025-11-25", method="tools/call")
        assert headers[0] == (m.http.Header.SESSION_ID, session_id)
        assert client_mod.session_headers(session_id, "2025-11-25", method="initialize") == []
        assert client_mod.session_headers(session_id, None, method=None) == headers[:1]
    else:  # (no session: only the version goes)
        assert [n for n, _ in client_mod.session_headers(None, "2025-11-25", method="x")] == [
            "MCP-Protocol-Version"
        ]
    # (the same value given as text, as an adapter whose library decoded it)
    guarded(lambda: client_mod.check_session_id(raw.decode("latin-1")))
    resumption = client_mod.StreamResumption(max_attempts=data[0] % 8)
    decoder = m.http.SseDecoder(max_event_size=1024)
    for piece in chunks(stream, data[1:5]):
        decoder.feed(piece)
        for _ in range(100_000):
            event = decoder.next_event()
            if not isinstance(event, (m.http._sse.SseEvent, m.wire.Oversize)):
                break
            if isinstance(event, m.wire.Oversize):
                continue
            before = resumption.last_event_id
            resumption.saw(event.id, event.retry)
            _check_resumption(resumption, before)
        else:
            raise AssertionError("next_event never returned NEED_DATA")
    for _ in range(resumption.max_attempts + 1):
        _check_resumption(resumption, resumption.last_event_id)


def _check_resumption(resumption: client_mod.StreamResumption, before: str | None) -> None:
    last = resumption.last_event_id
    assert last is None or sessions_mod.valid_session_id(
        last, client_mod.MAX_PEER_EVENT_ID_LENGTH
    ), last
    if last != before:
        assert resumption.attempts == 0
    delay: Any = resumption.next_delay()
    assert resumption.attempts <= resumption.max_attempts
    if delay is not None:
        assert last is not None and 0 <= delay <= client_mod.MAX_RETRY_MS / 1000, delay
