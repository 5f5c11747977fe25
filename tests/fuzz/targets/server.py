"""The server targets: a server Connection (handlers, sealed state, the legacy shim)
gets the client's bytes; and the legacy shim on its own."""

from __future__ import annotations

from typing import Any

import mrtr_core as m

from ._common import (
    ALL_CAPS,
    CLIENT_INFO,
    LEGACY,
    MAX_BUFFER,
    MAX_MESSAGE,
    SERVER_INFO,
    STDLIB,
    drain,
    feed_stream,
    guarded,
)

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
        data = guarded(lambda: self.conn.send(event))
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
                guarded(lambda s=shim: s.receive(event, 0.0))
        elif isinstance(event, m.RequestCancelled):
            shim = self.shims.get(event.request_id)
            if shim is not None:
                shim.cancel()
            # Anything for a cancelled request goes out as nothing.
            sent = guarded(lambda: self.conn.send(m.ResultResponse(id=event.request_id, result={})))
            assert sent in (b"", None), sent

    def on_request(self, request: m.Request) -> None:
        conn = self.conn
        info = guarded(lambda: conn.request_info(request.id))
        assert info is not None, request  # every request handed out has its info
        if self.chatty:
            self.send(m.Progress(request_id=request.id, progress=0.5, total=1.0, message="half"))
            self.send(m.LogMessage(request_id=request.id, level="info", data={"r": request.id}))
        if request.method != "tools/call":
            self.send(m.ResultResponse(id=request.id, result={}))
            return
        arguments = (request.params or {}).get("arguments")
        if (request.params or {}).get("name") == "echo" and isinstance(arguments, dict):
            # An app whose result is the peer's to choose: the server's rules on what an
            # app may send (input kinds declared, input_required only to 2026 clients)
            # refuse what breaks them with AppResultRefused.
            result = arguments.get("result")
            self.send(
                m.ResultResponse(id=request.id, result=result if isinstance(result, dict) else {})
            )
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

    Control byte: ``data[0]``: 0x80 whole-message framing, 0x40 progress and log
    messages go out, 0x20 cacheable results, 0x10 messages arrive parsed
    (``receive_message``); and how the stream is cut.  A ``tools/call`` of ``echo``
    answers with its ``arguments.result``.
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
    for _ in feed_stream(conn, data, data[1:], data[:1], parsed=bool(data[0] & 0x10)):
        app.pump()
    guarded(lambda: conn.receive_data(b""))
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
            guarded(lambda delay=event.delay: shim.resume(delay))
            continue
        if isinstance(event, (m.server.ShimSend, m.server.ShimRun)):
            continue
        if event is m.Wait.FINISHED:
            break
        line = next(lines, None)
        if line is None:
            shim.cancel()
            continue
        value = guarded(lambda line=line: STDLIB.loads(line))
        if event is m.Wait.NEED_RESULT:
            outcome = value if isinstance(value, dict) else m.MrtrError("app failed")
            guarded(lambda outcome=outcome: shim.leg_done(outcome))
        elif event is m.Wait.NEED_INPUT:
            rid = shim.waiting_for[0]
            answer: m.ResultResponse | m.ErrorResponse
            if isinstance(value, dict) and isinstance(value.get("code"), int):
                error = m.ErrorObject(code=value["code"], message=str(value.get("message")))
                answer = m.ErrorResponse(id=rid, error=error)
            else:
                answer = m.ResultResponse(id=rid, result=value if isinstance(value, dict) else {})
            guarded(lambda answer=answer: shim.receive(answer, 0.0))
        else:
            guarded(lambda: shim.resume(0.0))
    else:
        raise AssertionError("the shim never finished")
    assert done <= 1, "the original request was answered twice"
    assert shim.finished
