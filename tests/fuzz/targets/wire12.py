"""The WebSocket rules (message assembly, the subprotocol, a peer's close) and the URL
elicitation callback (the query string a browser brings back, settling an interaction)."""

from __future__ import annotations

import mrtr_core as m
from mrtr_core.server import _url_flows as flows
from mrtr_core.websocket import _binding as ws

from ._common import guarded

# --- WebSocket ---------------------------------------------------------------------------


def websocket(data: bytes) -> None:
    """A peer's WebSocket messages: frames for a ``MessageAssembler``, the server's
    subprotocol offer and the client's check of the answer, a close frame's code and reason.

    Control bytes: ``data[0]``: the size bound (1..256 bytes); ``data[1]``: bit 0: the
    frames are text decoded by a UTF-8 decoder (else latin-1, which a hand-made str may
    hold).  The rest is frames separated by ``\\x00``; a frame's first byte says what it
    is: ``F`` the last fragment of a text message, ``f`` not the last, ``B`` binary,
    ``S`` a ``Sec-WebSocket-Protocol`` offer (comma-separated, as headers carry it), ``s``
    the subprotocol a server selected, ``C`` a close (two bytes of code, then reason).
    """
    if len(data) < 2:
        return
    bound = 1 + data[0]
    assembler = ws.MessageAssembler(max_message_size=bound)
    pending: list[bytes] = []
    failed = False
    for frame in data[2:].split(b"\x00"):
        if not frame:
            continue
        kind, body = frame[:1], frame[1:]
        text = body.decode("utf-8", "replace") if data[1] & 1 else body.decode("latin-1")
        if kind in (b"F", b"f", b"B"):
            if failed:  # (the conversation is over: the app's next call is its misuse)
                try:
                    assembler.receive_text(text, message_finished=True)
                except m.LocalProtocolError:
                    continue
                raise AssertionError("an assembler accepted a frame after a violation")
            try:
                if kind == b"B":
                    assembler.receive_binary()
                    raise AssertionError("a binary message was accepted")
                message = assembler.receive_text(text, message_finished=kind == b"F")
            except ws.WebSocketViolation as exc:
                failed = True
                assert exc.close_code == ws.CLOSE_CODES[exc.fault]
                assert exc.fault in (ws.Fault.MESSAGE_TOO_BIG, ws.Fault.BINARY_MESSAGE)
                continue
            pending.append(text.encode("utf-8", "surrogatepass"))
            assert assembler.buffered <= bound
            if message is not None:
                assert message == b"".join(pending), (message, pending)
                assert len(message) <= bound
                pending.clear()
                assert assembler.buffered == 0
        elif kind == b"S":
            chosen = ws.choose_subprotocol(text.split(","))
            assert chosen in (None, ws.SUBPROTOCOL)
            assert (chosen is not None) == any(n.strip() == "mcp" for n in text.split(","))
        elif kind == b"s":
            selected = text or None
            checked = guarded(lambda selected=selected: ws.check_subprotocol(selected) or True)
            assert (checked is not None) == (selected == ws.SUBPROTOCOL)
        elif kind == b"C":
            code = int.from_bytes(body[:2], "big") if len(body) >= 2 else None
            reason = body[2:].decode("utf-8", "replace") or None
            words = ws.describe_close(code, reason)
            assert isinstance(words, str) and (code is None or str(code) in words)
            cut = ws.close_reason(text)
            assert len(cut.encode("utf-8", "replace")) <= ws.MAX_CLOSE_REASON


# --- URL elicitation: the callback ----------------------------------------------------


CALLBACK_URL = "https://mcp.example/mcp/auth/callback"


def url_callback(data: bytes) -> None:
    """A browser's callback request: the query string (the bytes after ``?``, as the
    HTTP server passes them) read by ``read_callback`` and settled against a table of
    interactions this server began; first line (when it starts with ``http``) a provider
    URL the app rewrites.

    Control bytes: ``data[0]``: bits 0-1: the query is given as bytes (0, 1) or text (2)
    or with its routing prefix replaced by a pending interaction's (3); bits 2-4: the
    seconds that pass before the callback (0..28, the interactions live 10); bit 5: the
    same callback comes twice (a replay); bit 6: which interaction's prefix; bit 7: the
    query gets a parameter of 8 KiB more (past the bound, which libFuzzer's ``-max_len``
    would not reach).
    """
    if len(data) < 1:
        return
    control, rest = data[0], data[1:]
    table = flows.MemoryInteractions(max_entries=4)
    first, newline, query = rest.partition(b"\n")
    if not newline:
        first, query = b"", rest
    provider = first.decode("utf-8", "replace") if first.startswith(b"http") else None
    pending: list[flows.Interaction] = []
    for key in ("a", "b"):
        begun = guarded(
            lambda key=key: flows.begin_interaction(
                provider or "https://provider.example/authorize?client_id=c&state=xyz",
                key=key,
                callback_url=CALLBACK_URL,
                flow="f",
                principal=None,
                now=0.0,
                ttl=10.0,
            )
        )
        if begun is None:  # (a provider URL no user may be sent to: the app's misuse)
            break
        interaction, url = begun
        _check_rewritten(url, interaction)
        table.register(interaction, 0.0)
        pending.append(interaction)
    mode = control & 3
    if mode == 3 and pending:
        query = query.replace(b"PREFIX", pending[(control >> 6 & 1) % len(pending)].id.encode())
    if control & 0x80:
        query += b"&pad=" + b"x" * flows.MAX_CALLBACK_QUERY
    given: str | bytes = query.decode("latin-1") if mode == 2 else query
    callback = guarded(lambda: flows.read_callback(given))
    if callback is None:
        return
    assert isinstance(callback, flows.Callback)
    assert flows.STATE_PARAM not in callback.params
    assert (callback.error is None) == (callback.event is flows.InteractionEvent.CODE)
    now = float((control >> 2) & 7) * 4
    for attempt in range(2 if control & 0x20 else 1):
        settled = guarded(lambda: table.settle(callback, now))
        known = any(i.id == callback.prefix for i in pending)
        if settled is None:
            assert attempt == 1 or not known or now >= 10.0, (attempt, known, now)
            continue
        assert attempt == 0 and known and now < 10.0
        assert (
            settled.status
            is flows.INTERACTION_TRANSITIONS[flows.InteractionStatus.PENDING, callback.event]
        )
        assert settled.status_at(now) is settled.status
        back = flows.Interaction.from_json(settled.to_json())
        assert back == settled, (back, settled)
    # The same callback against the interaction itself (a store other than the memory
    # table: it hands out expired entries too, and settle() must refuse them).
    for interaction in pending:
        if interaction.id == callback.prefix:
            moved = guarded(lambda i=interaction: i.settle(callback, now))
            assert (moved is None) == (now >= interaction.expires_at), (moved, now)
    # More flows begin meanwhile (the table holds 4): expired entries make room, live
    # ones never do.
    for offset, ttl in ((0.0, 1.0), (0.0, 30.0), (0.0, 1.0), (2.0, 30.0), (2.0, 30.0)):
        at = now + offset
        begun = guarded(lambda at=at, ttl=ttl: _begin(provider, at, ttl))
        if begun is not None:
            live = [i for i in pending if at < i.expires_at and table.get(i.id, at)]
            if guarded(lambda b=begun, at=at: table.register(b, at) or True) is None:
                assert len(table) == table.max_entries and len(live) <= table.max_entries
            else:
                pending.append(begun)


def _begin(provider: str | None, now: float, ttl: float) -> flows.Interaction:
    url = provider or "https://provider.example/authorize?client_id=c"
    interaction, _ = flows.begin_interaction(
        url, key="k", callback_url=CALLBACK_URL, flow="f", principal=None, now=now, ttl=ttl
    )
    return interaction


def _check_rewritten(url: str, interaction: flows.Interaction) -> None:
    """The URL the user is sent to carries our prefix in ``state`` and our callback."""
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(url).query, keep_blank_values=True)
    assert query[flows.REDIRECT_PARAM] == [CALLBACK_URL], query
    (state,) = query[flows.STATE_PARAM]
    assert flows.split_state(state) == (interaction.id, interaction.provider_state), state
