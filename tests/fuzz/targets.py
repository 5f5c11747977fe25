"""The fuzz targets: one function per parser and per connection role, bytes in.

Each target takes the fuzzer's bytes, drives one part of the core with them
and lets only what the core documents come out: an :class:`mrtr_core.MrtrError`
(or a subclass).  Anything else (``KeyError``, ``TypeError``, an
``AssertionError`` from an invariant checked here, a loop that never returns
``NEED_DATA``) propagates, and the fuzzer records the input as a crash.

This module does not import atheris: the same functions run under the fuzzer
(``fuzz_one.py``, instrumented), under ``coverage`` when the corpus is
replayed (``replay.py``) and in ``test_regressions.py``.

Input layout: the first one or two bytes are *control* bytes (which scenario,
which framing, how the stream is cut into chunks); the rest is what the peer
sends.  ``make_corpus.py`` writes seeds in that layout.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import mrtr_core as m
from mrtr_core.protocol import _headers as headers_mod
from mrtr_core.wire import _codec as codec_mod
from mrtr_core.wire import _convert as convert_mod

# --- What may come out -----------------------------------------------------------------


class KnownDeepNesting(Exception):
    """Stand-in for the RecursionError deep nesting still raises (see ``_known``)."""


def _known(exc: BaseException, data: bytes) -> bool:
    """An exception that is a known, tracked problem rather than a new find.

    TODO(depth bound): remove this allowance once the codec's depth bound lands
    (another branch is adding it); from then on deep nesting must surface as a
    ``RemoteProtocolError`` like any other bad input, and a RecursionError is a crash.
    """
    return isinstance(exc, RecursionError) and _nesting(data) >= 500


def _nesting(data: bytes) -> int:
    """How deep ``[``/``{`` nest in ``data`` (a cheap bound; strings are not skipped)."""
    depth = deepest = 0
    for byte in data:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}" and depth:
            depth -= 1
    return deepest


def guarded(data: bytes, action: Callable[[], Any]) -> Any:
    """``action()``; a documented error becomes ``None``, anything else propagates."""
    try:
        return action()
    except m.MrtrError:
        return None
    except RecursionError as exc:
        if _known(exc, data):
            raise KnownDeepNesting from exc
        raise


def run(target: Callable[[bytes], None], data: bytes) -> None:
    """Call ``target(data)`` the way the fuzzer does: a known problem is not a find."""
    with contextlib.suppress(KnownDeepNesting):
        target(data)


def chunks(data: bytes, sizes: bytes) -> Iterator[bytes]:
    """``data`` cut into pieces whose sizes cycle through ``sizes`` (1..64 each)."""
    if not sizes:
        sizes = b"\x00"
    start = index = 0
    while start < len(data):
        size = 1 + sizes[index % len(sizes)] % 64
        yield data[start : start + size]
        start += size
        index += 1


# --- NDJSON framing --------------------------------------------------------------------

OVERSIZE = "oversize"


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


def _drain_frames(framer: m.wire.LineFramer | m.wire.MessageFramer, out: list[Any]) -> bool:
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
    # Chunked, draining between feeds: at most 64 bytes pending besides a partial message.
    cut = m.wire.LineFramer(max_message_size=max_size, max_buffer_size=max_size + 64)
    cut_frames: list[Any] = []
    for piece in chunks(stream, sizes):
        cut.feed(piece)
        assert cut.buffered <= max_size + 64
        assert not _drain_frames(cut, cut_frames)
    cut.feed_eof()
    assert _drain_frames(cut, cut_frames)
    assert cut.next_frame() is m.wire.END_OF_STREAM
    assert whole_frames == cut_frames, (whole_frames, cut_frames)
    assert whole_frames == _reference_lines(stream, max_size), whole_frames
    # Whole messages: each line fed on its own is handed out as itself (or Oversize).
    messages = m.wire.MessageFramer(max_message_size=max_size, max_buffer_size=max_size)
    for line in stream.split(b"\n")[: data[1] % 8]:
        messages.feed(line)
        found: list[Any] = []
        _drain_frames(messages, found)
        if len(line) > max_size:
            assert found == [OVERSIZE], found
        else:
            assert found == ([line] if line.strip(b" \t\r\n") else []), found


# --- SSE decoding ----------------------------------------------------------------------


def _sse_events(decoder: m.wire.SseDecoder, out: list[Any]) -> bool:
    for _ in range(100_000):
        event = decoder.next_event()
        if event is m.NEED_DATA:
            return False
        if event is m.wire.END_OF_STREAM:
            return True
        if isinstance(event, m.wire.Oversize):
            out.append(OVERSIZE)
            continue
        assert isinstance(event, m.wire.SseEvent), event
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
    bound = data[0] * 4 or m.wire.DEFAULT_MAX_EVENT_SIZE
    stream = data[10:]
    whole = m.wire.SseDecoder(max_event_size=bound)
    whole_events: list[Any] = []
    whole.feed(stream)
    _sse_events(whole, whole_events)
    whole.feed_eof()
    assert _sse_events(whole, whole_events)
    cut = m.wire.SseDecoder(max_event_size=bound)
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
    encoded = guarded(data, lambda: m.wire.encode_sse(text, event=event_type))
    if encoded is None:
        return
    back = m.wire.SseDecoder()
    back.feed(encoded)
    back.feed_eof()
    decoded: list[Any] = []
    _sse_events(back, decoded)
    normal = text.replace("\r\n", "\n").replace("\r", "\n")
    # (one event even for empty text: its one data line is empty, and that dispatches)
    assert len(decoded) == 1 and decoded[0].data == normal, (decoded, normal)
    assert decoded[0].event == (event_type or "message"), decoded


# --- JSON-RPC codec and conversion ----------------------------------------------------

STDLIB = m.wire.Codec("stdlib")
CODECS = [STDLIB, m.wire.Codec("auto")]


def codec(data: bytes) -> None:
    """decode -> encode -> decode is the identity, with either JSON backend."""
    for one in CODECS:
        message = guarded(data, lambda one=one: one.decode(data))
        if message is None:
            continue
        encoded = guarded(data, lambda one=one, message=message: one.encode(message))
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
    value = guarded(data, lambda: STDLIB.loads(data[1:]))
    if value is None:
        return
    kind = PAYLOADS[data[0] % len(PAYLOADS)]
    shaped = guarded(data, lambda: m.wire.structure(value, kind))
    if shaped is not None:
        assert m.wire.structure(m.wire.unstructure(shaped), kind) == shaped
    request = guarded(data, lambda: m.wire.structure_input_request(value))
    if request is not None:
        plain = m.wire.unstructure_input_request(request)
        assert m.wire.structure_input_request(plain) == request
    result = guarded(data, lambda: m.wire.structure_input_required(value))
    if result is not None:
        plain = m.wire.unstructure_input_required(result)
        assert m.wire.structure_input_required(plain) == result
    # The message classifier on the same value (a JSON-RPC object or not).
    guarded(data, lambda: codec_mod.message_from_json(value))
    guarded(data, lambda: convert_mod.unstructure_input_response(value))


# --- HTTP header checks ----------------------------------------------------------------


def headers(data: bytes) -> None:
    """A POST's headers against its body: the first line is a tool's inputSchema, the
    header lines follow up to a blank line, the body is the rest."""
    text = data.decode("utf-8", "replace")
    schema_line, _, rest = text.partition("\n")
    head, _, body = rest.partition("\n\n")
    schema = guarded(data, lambda: STDLIB.loads(schema_line))
    params = guarded(data, lambda: headers_mod.schema_header_params(schema)) if schema else None
    message = guarded(data, lambda: STDLIB.loads(body))
    if not isinstance(message, dict):
        return
    fields = [tuple(line.split(":", 1)) for line in head.split("\n") if ":" in line]
    received = headers_mod.header_fields((n.strip(), v.strip()) for n, v in fields)
    guarded(
        data, lambda: headers_mod.check_request_headers(received, message, header_params=params)
    )
    # What a client would send for the same message passes the check.
    version = "2026-07-28"
    sent = guarded(
        data,
        lambda: headers_mod.request_headers(
            message, protocol_version=version, header_params=params
        ),
    )
    if sent is not None and "id" in message and isinstance(message.get("method"), str):
        mirrored = headers_mod.header_fields(sent)
        guarded(
            data, lambda: headers_mod.check_request_headers(mirrored, message, header_params=params)
        )


# --- Shared by the connection targets -------------------------------------------------

MAX_MESSAGE = 1024
MAX_BUFFER = 4096
ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
CLIENT_INFO = {"name": "fuzz-client", "version": "1"}
SERVER_INFO = {"name": "fuzz-server", "version": "1"}
MODERN = "2026-07-28"
LEGACY = "2025-06-18"


def drain(conn: m.Connection, on_event: Callable[[Any], None]) -> None:
    """Hand every event to ``on_event`` until NEED_DATA; a loop is a crash."""
    for _ in range(10_000):
        event = conn.next_event()
        if event is m.NEED_DATA:
            return
        on_event(event)
        if isinstance(event, m.ConnectionClosed):
            return
    raise AssertionError("next_event never returned NEED_DATA")


def feed_stream(conn: m.Connection, data: bytes, stream: bytes, sizes: bytes) -> Iterator[None]:
    """Feed ``stream`` as lines in chunks, or one message per line; yield after each feed."""
    if conn.framing == "messages":
        pieces: Iterator[bytes] = iter(stream.split(b"\n"))
    else:
        pieces = chunks(stream, sizes)
    for piece in pieces:
        if conn.framing == "messages" and not piece:
            continue  # b"" means the peer closed
        guarded(data, lambda piece=piece: conn.receive_data(piece))
        yield


# --- The client role, mid-flow -------------------------------------------------------


def answer_for(request: Any) -> Any:
    """The client app's typed answer to a dispatched input request."""
    if isinstance(request, m.wire.CreateMessageRequest):
        content = {"type": "text", "text": "ok"}
        return m.wire.CreateMessageResult(role="assistant", content=content, model="fuzz")
    if isinstance(request, m.wire.ListRootsRequest):
        return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///fuzz")])
    if isinstance(request, (m.wire.ElicitFormRequest, m.wire.ElicitUrlRequest)):
        return m.wire.ElicitResult(action="decline")
    return {}  # an input kind the fuzzer invented: the engine judges the answer


class ClientApp:
    """The app around a client Connection, and the book of its calls.

    Invariants checked on every event: a call's events come only between its
    start and its one terminal event; a call never ends twice.
    """

    def __init__(self, conn: m.Connection, data: bytes, *, answer_inputs: bool) -> None:
        self.conn = conn
        self.data = data
        self.answer_inputs = answer_inputs
        self.calls: set[int] = set()
        self.ended: dict[int, Any] = {}
        self.pending: list[tuple[int, str, Any]] = []  # dispatched inputs not answered
        self.sent: list[bytes] = []  # what went out (make_corpus.py feeds it to a server)

    def send(self, event: Any) -> None:
        data = guarded(self.data, lambda: self.conn.send(event))
        if data:
            self.sent.append(data)

    @staticmethod
    def reply_to(request: m.Request) -> dict[str, Any]:
        """The app's answer to a 2025-era server's question: the typed answer's JSON."""
        if request.method == "ping":
            return {}
        shaped = guarded(
            b"",
            lambda: m.wire.structure_input_request(
                {"method": request.method, "params": request.params}
            ),
        )
        answer = answer_for(shaped)
        return answer if isinstance(answer, dict) else m.wire.unstructure(answer)

    def start(self, method: str, name: str, **options: Any) -> None:
        params = {"name": name, "arguments": {"x": name}}
        call = self.conn.call(method, params, **options)
        assert call not in self.calls
        self.calls.add(call)

    def on_event(self, event: Any) -> None:
        if isinstance(event, m.CallEvent):
            assert event.call in self.calls, event
            assert event.call not in self.ended, (event, self.ended[event.call])
            inner = event.event
            if isinstance(inner, (m.SendRequest, m.SendRetry, m.CancelLeg)):
                self.send(event)
            elif isinstance(inner, m.DispatchInput):
                self.pending.append((event.call, inner.key, inner.request))
            elif isinstance(inner, (m.Done, m.Failed, m.TimedOut, m.Cancelled)):
                self.ended[event.call] = inner
                self.pending = [p for p in self.pending if p[0] != event.call]
            elif isinstance(inner, m.CancelInputs):
                dropped = set(inner.keys)
                self.pending = [
                    p for p in self.pending if p[0] != event.call or p[1] not in dropped
                ]
        elif isinstance(event, (m.HandshakeStep, m.AutoReply, m.InvalidMessage)):
            self.send(event)
        elif isinstance(event, m.Request):
            # A 2025-era server's question (or ping): answer it, as an app would.
            self.send(m.ResultResponse(id=event.id, result=self.reply_to(event)))
        elif isinstance(event, m.Progress) and event.call is not None:
            assert event.call in self.calls, event
        elif isinstance(event, m.SessionFailed):
            assert isinstance(event.error, m.MrtrError)

    def pump(self) -> None:
        drain(self.conn, self.on_event)
        if self.answer_inputs:
            pending, self.pending = self.pending, []
            for call, key, request in pending:
                answer = answer_for(request)
                guarded(self.data, lambda c=call, k=key, a=answer: self.conn.provide(c, k, a))
            if pending:
                drain(self.conn, self.on_event)

    def check_all_ended(self) -> None:
        """After the stream ended: every call has its one terminal event."""
        assert self.ended.keys() == self.calls, (self.calls, self.ended)


def _line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def _result(rid: Any, result: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": rid, "result": result})


FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Which city?",
        "requestedSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 8,
    },
}
ROOTS = {"method": "roots/list"}


def client_setup(scenario: int, framing: str, *, answer_inputs: bool) -> ClientApp:
    """A client with calls in flight; the same every time (ids included).

    0, modern: call 1 in an input round (one of its two inputs answered, one
    pending), call 2 waiting for its leg, call 3 in a requestState-only round
    (its retry sent), call 4 (with progress and timeouts) waiting for its leg.
    1, auto: the ``server/discover`` probe out, calls 1 and 2 queued behind it.
    2, legacy: ``initialize`` out, calls 1 and 2 queued behind it.
    """
    era = ("modern", "auto", "legacy")[scenario]
    conn = m.Connection(
        m.CLIENT,
        era=era,
        framing=framing,  # type: ignore[arg-type]
        info=CLIENT_INFO,
        capabilities=ALL_CAPS,
        max_message_size=MAX_MESSAGE,
        max_buffer_size=MAX_BUFFER,
        max_finished_ids=8,
    )
    app = ClientApp(conn, b"", answer_inputs=False)
    app.start("tools/call", "one")
    app.start("tools/call", "two")
    if scenario == 0:
        app.start("prompts/get", "three")
        app.start("resources/read", "four", progress=True, leg_timeout=5.0, total_timeout=60.0)
    app.pump()
    if scenario == 0:
        leg_one, _, leg_three, _ = sorted(conn.outstanding, key=str)
        asks = {"resultType": "input_required", "inputRequests": {"a": FORM, "b": SAMPLE}}
        conn.receive_data(_result(leg_one, asks))
        conn.receive_data(_result(leg_three, {"resultType": "input_required", "requestState": "s"}))
        app.pump()
        call, key, request = app.pending.pop(0)
        conn.provide(call, key, answer_for(request))
        app.pump()
    app.answer_inputs = answer_inputs
    return app


def client(data: bytes) -> None:
    """A client mid-flow gets arbitrary server bytes: only documented errors, no lost
    call, no event for a call after its end, and at the end of the stream every call
    ended exactly once.

    Control bytes: ``data[0]`` the scenario (see :func:`client_setup`) and framing,
    ``data[1]`` whether the app answers inputs, cancels, and how the stream is cut.
    """
    if len(data) < 2:
        return
    scenario = data[0] % 3
    framing = "messages" if data[0] & 0x80 else "lines"
    app = client_setup(scenario, framing, answer_inputs=bool(data[1] & 1))
    app.data = data
    conn = app.conn
    for step, _ in enumerate(feed_stream(conn, data, data[2:], data[1:2])):
        app.pump()
        if data[1] & 2 and step == 3:
            # Cancel the lowest live call, mid-stream, as an app might.
            live = sorted(app.calls - app.ended.keys())
            if live:
                guarded(data, lambda call=live[0]: conn.cancel(call))
                app.pump()
        if data[1] & 4 and step == 5:
            live = sorted(app.calls - app.ended.keys())
            if live:
                guarded(data, lambda call=live[-1]: conn.leg_broken(call))
                app.pump()
    assert conn.session_state is not None
    guarded(data, lambda: conn.receive_data(b""))
    app.pump()
    app.check_all_ended()


# --- The server role -----------------------------------------------------------------

SEALER_KEY = b"fuzz-key-fuzz-key-fuzz-key-fuzz!"
CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
TONE = m.server.sample("Three words for sunshine", max_tokens=10)


def weather(ctx: m.server.HandlerContext) -> Any:
    """A two-round tool: ask the city (form), then a tone (sampling) if it may."""
    city = ctx.answer("city", CITY)
    if city is None:
        return ctx.ask({"city": CITY}, state={"round": 1})
    if ctx.once("audit") and ctx.can_ask(TONE):
        return ctx.ask({"tone": TONE}, state={"round": 2, "city": repr(city)})
    return {"content": [{"type": "text", "text": f"sunny, state={ctx.state!r}"}]}


def make_sealer() -> m.server.StateSealer:
    return m.server.StateSealer({"k1": SEALER_KEY}, "k1", store=m.server.MemoryNonceStore(64))


class ServerApp:
    """The app around a server Connection: tools run through ``run_handler`` (modern)
    or a ``LegacyShim`` (2025 era); other requests get ``{}``; progress and log
    messages go out for each request when asked."""

    def __init__(self, conn: m.Connection, data: bytes, *, chatty: bool) -> None:
        self.conn = conn
        self.data = data
        self.chatty = chatty
        self.sealer = make_sealer()
        self.shims: dict[Any, m.server.LegacyShim] = {}
        self.sent: list[bytes] = []  # what went out (make_corpus.py feeds it to a client)

    def send(self, event: Any) -> None:
        data = guarded(self.data, lambda: self.conn.send(event))
        if data:
            self.sent.append(data)

    def on_event(self, event: Any) -> None:
        if isinstance(event, (m.AutoReply, m.InvalidMessage)):
            self.send(event)
        elif isinstance(event, m.Request):
            # An id is handed out again only once its request was answered.
            shim = self.shims.get(event.id)
            assert shim is None or shim.finished, event
            self.on_request(event)
        elif isinstance(event, (m.ResultResponse, m.ErrorResponse)):
            for shim in [s for s in self.shims.values() if event.id in s.waiting_for]:
                guarded(self.data, lambda s=shim: s.receive(event, 0.0))
        elif isinstance(event, m.RequestCancelled):
            shim = self.shims.get(event.request_id)
            if shim is not None:
                shim.cancel()
            # Anything for a cancelled request goes out as nothing.
            sent = guarded(
                self.data, lambda: self.conn.send(m.ResultResponse(id=event.request_id, result={}))
            )
            assert sent in (b"", None), sent

    def on_request(self, request: m.Request) -> None:
        conn = self.conn
        info = guarded(self.data, lambda: conn.request_info(request.id))
        assert info is not None, request  # every request handed out has its info
        if self.chatty:
            self.send(m.Progress(request_id=request.id, progress=0.5, total=1.0, message="half"))
            self.send(m.LogMessage(request_id=request.id, level="info", data={"r": request.id}))
        if request.method != "tools/call":
            self.send(m.ResultResponse(id=request.id, result={}))
            return
        if info.era == "legacy":
            shim = m.server.LegacyShim(
                weather,
                request,
                info,
                new_id=conn.new_request_id,
                sealer=self.sealer,
                principal=None,
            )
            self.shims[request.id] = shim
            shim.start(0.0)
            return
        try:
            result = m.server.run_handler(
                weather, request, info, sealer=self.sealer, principal="p", now=0.0
            )
        except m.MrtrError as exc:
            self.send(m.error_response(request.id, exc))
            return
        self.send(m.ResultResponse(id=request.id, result=result))

    def run_shims(self) -> None:
        for shim in self.shims.values():
            for _ in range(1000):
                event = shim.next_event()
                if isinstance(event, m.Wait):
                    break
                if isinstance(event, m.server.ShimSend):
                    self.send(event.message)
                elif isinstance(event, m.server.ShimWait):
                    shim.resume(event.delay)
                else:
                    assert isinstance(event, m.server.ShimDone), event
                    self.send(event.response)
            else:
                raise AssertionError("a shim never waits")

    def pump(self) -> None:
        drain(self.conn, self.on_event)
        self.run_shims()


def server(data: bytes) -> None:
    """A server gets arbitrary client bytes, both eras; tools run real handlers (sealed
    state, typed answers) and, for a 2025-era session, the legacy shim.

    Control byte: ``data[0]``: framing, whether progress/log go out, chunk sizes.
    """
    if len(data) < 1:
        return
    framing = "messages" if data[0] & 0x80 else "lines"
    conn = m.Connection(
        m.SERVER,
        framing=framing,  # type: ignore[arg-type]
        info=SERVER_INFO,
        capabilities={"tools": {}, "prompts": {}, "resources": {}, "logging": {}},
        instructions="fuzz",
        cache_ttl_ms=(data[0] & 0x20) * 100,
        max_message_size=MAX_MESSAGE,
        max_buffer_size=MAX_BUFFER,
        max_incoming=8,
    )
    app = ServerApp(conn, data, chatty=bool(data[0] & 0x40))
    for _ in feed_stream(conn, data, data[1:], data[:1]):
        app.pump()
    guarded(data, lambda: conn.receive_data(b""))
    app.pump()
    # Once the end is handed out it stays the answer (no event comes after it).
    assert isinstance(conn.next_event(), m.ConnectionClosed)


# --- The legacy shim, on its own --------------------------------------------------------


def legacy_shim(data: bytes) -> None:
    """A LegacyShim whose app (``handler=None``) returns what the fuzzer says and whose
    client answers what the fuzzer says: one JSON value per line, read in turn as the
    app's leg result or the client's answer to the first question waiting.

    Control byte: ``data[0]``: the declared capabilities and the round caps.
    """
    if len(data) < 1:
        return
    caps = [ALL_CAPS, {}, {"elicitation": {}}, {"sampling": {}, "roots": {}}][data[0] % 4]
    info = m.protocol.RequestInfo(
        id=1,
        method="tools/call",
        era="legacy",
        protocol_version=LEGACY,
        capabilities=caps,
        client_info=CLIENT_INFO,
        log_level=None,
        progress_token=None,
        retry=False,
    )
    request = m.Request(id=1, method="tools/call", params={"name": "t", "arguments": {}})
    ids = iter(range(100, 10_000))
    shim = m.server.LegacyShim(
        None,
        request,
        info,
        new_id=lambda: next(ids),
        sealer=None,
        principal=None,
        max_rounds=1 + (data[0] >> 2) % 4,
        max_state_only_rounds=(data[0] >> 4) % 4,
    )
    shim.start(0.0)
    lines = iter(data[1:].split(b"\n"))
    done = 0
    for _ in range(10_000):
        event = shim.next_event()
        if isinstance(event, m.server.ShimDone):
            done += 1
            assert event.response.id == 1, event
            continue
        if isinstance(event, m.server.ShimWait):
            assert event.delay > 0
            guarded(data, lambda delay=event.delay: shim.resume(delay))
            continue
        if isinstance(event, (m.server.ShimSend, m.server.ShimRun)):
            continue
        if event is m.Wait.FINISHED:
            break
        line = next(lines, None)
        if line is None:
            shim.cancel()
            continue
        value = guarded(data, lambda line=line: STDLIB.loads(line))
        if event is m.Wait.NEED_RESULT:
            outcome = value if isinstance(value, dict) else m.MrtrError("app failed")
            guarded(data, lambda outcome=outcome: shim.leg_done(outcome))
        elif event is m.Wait.NEED_INPUT:
            rid = shim.waiting_for[0]
            answer: m.ResultResponse | m.ErrorResponse
            if isinstance(value, dict) and isinstance(value.get("code"), int):
                error = m.ErrorObject(code=value["code"], message=str(value.get("message")))
                answer = m.ErrorResponse(id=rid, error=error)
            else:
                answer = m.ResultResponse(id=rid, result=value if isinstance(value, dict) else {})
            guarded(data, lambda answer=answer: shim.receive(answer, 0.0))
        else:
            guarded(data, lambda: shim.resume(0.0))
    else:
        raise AssertionError("the shim never finished")
    assert done <= 1, "the original request was answered twice"
    assert shim.finished


TARGETS: dict[str, Callable[[bytes], None]] = {
    "framing": framing,
    "sse": sse,
    "codec": codec,
    "convert": convert,
    "headers": headers,
    "client": client,
    "server": server,
    "legacy_shim": legacy_shim,
}
