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
    MODERN,
    SERVER_INFO,
    STDLIB,
    drain,
    feed_line,
    guarded,
    lines_of,
)

ALL = m.ALL_VERSIONS
SEALER_KEY = b"fuzz-key-fuzz-key-fuzz-key-fuzz!"
OTHER_KEY = b"another-key-another-key-another!"
CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
TONE = m.server.sample("Three words for sunshine", max_tokens=10)
ROOTS = m.server.list_roots()
LOGIN = m.server.elicit_url("Sign in first", "https://auth.example/login")
#: The params every pooled state (``STATE_POOL``) is sealed for: a retry that splices one
#: in matches only with these (else ``wrong_params``).
POOL_PARAMS = {"name": "weather", "arguments": {"x": 1}}
#: Below the connection's message bound, so a peer can send a token over it.
MAX_TOKEN = 700
#: The sealer's lifetimes: a clock that advances (control bit) reaches both.
FLOW_TTL = 40.0
STATE_TTL = 25.0


def weather(ctx: m.server.HandlerContext) -> Any:
    """A two-round tool: ask the city (form), then a tone (sampling) if it may."""
    city = ctx.answer("city", CITY)
    if city is None:
        return ctx.ask({"city": CITY}, state={"round": 1})
    if ctx.once("audit") and ctx.can_ask(TONE):
        return ctx.ask({"tone": TONE}, state={"round": 2, "city": repr(city)})
    return {"content": [{"type": "text", "text": f"sunny, state={ctx.state!r}"}]}


def proven(ctx: m.server.HandlerContext) -> Any:
    """A tool that takes only answers a sealed state proves it asked for, guarded once."""
    ctx.require_proof()
    login = ctx.answer("login", LOGIN)
    if login is None:
        return ctx.ask({"login": LOGIN} if ctx.can_ask(LOGIN) else {"roots": ROOTS})
    if ctx.once("charge"):
        return {"content": [{"type": "text", "text": "charged once"}]}
    return {"content": [{"type": "text", "text": "already charged"}]}


def count(ctx: m.server.HandlerContext) -> Any:
    """A one-round tool with a guarded side effect and no question."""
    done = "counted" if ctx.once("count") else "counted before"
    return {"content": [{"type": "text", "text": done}]}


STEPS = m.server.Steps()


@STEPS.step("where")
def _where(ctx: m.server.HandlerContext, data: Any) -> Any:
    return m.server.Next({"n": 1}, ask={"city": CITY})


@STEPS.step("confirm")
def _confirm(ctx: m.server.HandlerContext, data: Any) -> Any:
    city = ctx.answer("city", CITY)
    if city is None:
        return ctx.ask({"city": CITY})  # stay here, asking again
    roots = {"roots": ROOTS} if ctx.can_ask(ROOTS) else None
    return m.server.Next({"n": 2, "city": repr(city)[:40]}, ask=roots)


@STEPS.step("done")
def _done(ctx: m.server.HandlerContext, data: Any) -> Any:
    return {"content": [{"type": "text", "text": repr(data)[:80]}]}


HANDLERS: dict[str, m.server.Handler] = {
    "weather": weather,
    "proven": proven,
    "steps": STEPS,
    "count": count,
}


def make_sealer(*, entries: int = 64) -> m.server.StateSealer:
    return m.server.StateSealer(
        {"k1": SEALER_KEY},
        "k1",
        ttl=STATE_TTL,
        store=m.server.MemoryNonceStore(entries),
        max_token_size=MAX_TOKEN,
    )


def _pool() -> list[str]:
    """Real sealed states of earlier flows, for the fuzzer to splice into a retry
    (``"#S0"`` .. ``"#S10"`` in a line; sealed for ``POOL_PARAMS``, with the tool's
    name ``steps`` for 2 and 7, ``proven`` for 8): valid, and valid but wrong in each way the
    sealer checks.  Sealed with fixed nonces, so they are the same in every process."""
    sealer = make_sealer()
    other = m.server.StateSealer({"k0": OTHER_KEY}, "k0")
    flow = {"f": "flow-1", "d": 1e9, "g": [], "q": {"city": "elicitation/create"}}

    def seal(value: Any, *, by: m.server.StateSealer = sealer, **over: Any) -> str:
        options: dict[str, Any] = {
            "method": "tools/call",
            "params": POOL_PARAMS,
            "principal": "p",
            "now": 0.0,
            "nonce": f"n{len(tokens)}",
            **over,
        }
        return by.seal(value, **options)

    steps = {**POOL_PARAMS, "name": "steps"}
    proven = {**POOL_PARAMS, "name": "proven"}
    login = {"login": "elicitation/create#url"}
    tokens: list[str] = []
    for value, over in [
        ({**flow, "v": {"round": 1}}, {}),  # the weather flow's first round
        ({**flow, "g": ["audit"], "q": {"tone": "sampling/createMessage"}, "v": {"round": 2}}, {}),
        ({**flow, "v": {"step": "confirm", "data": {"n": 1}}}, {"params": steps}),
        ({**flow, "v": {"round": 1}}, {"method": "prompts/get"}),
        ({**flow, "v": {"round": 1}}, {"principal": "someone else"}),
        ({**flow, "v": {"round": 1}}, {"now": -1000.0, "ttl": 1.0}),  # expired
        ({"not": "our shape"}, {}),  # another app's state under our key
        ({**flow, "v": None}, {"by": other}),  # a key we do not hold
        ({**flow, "v": {"step": "gone", "data": None}}, {"params": steps}),  # no such step
        ({**flow, "q": login, "v": None}, {"params": proven}),  # proven's login asked
        ({**flow, "d": -1.0, "v": {"round": 1}}, {}),  # the flow's own deadline has passed
    ]:
        tokens.append(seal(value, **over))
    return tokens


STATE_POOL = _pool()


class ServerApp:
    """The app around a server Connection: tools run through ``run_handler`` (modern)
    or a ``LegacyShim`` (2025 era); other requests get ``{}``; progress and log
    messages go out for each request when asked."""

    def __init__(
        self,
        conn: m.Connection,
        data: bytes,
        *,
        chatty: bool,
        sealer: bool = True,
        nonces: int = 64,
        tick: float = 0.0,
        close_streams: bool = False,
    ) -> None:
        self.conn = conn
        self.data = data
        self.chatty = chatty
        self.sealer = make_sealer(entries=nonces) if sealer else None
        self.tick = tick
        self.now = 0.0
        self.close_streams = close_streams
        self.shims: dict[Any, m.server.LegacyShim] = {}
        self.sealed: list[str] = []  # the states this app sealed, newest last
        self.sent: list[bytes] = []  # what went out (make_corpus.py feeds it to a client)

    def send(self, event: Any) -> None:
        if self.chatty:  # as an adapter that keeps the message (to trace it, say)
            message = guarded(lambda: self.conn.send_message(event))
            data = guarded(lambda: self.conn.encode(message)) if message is not None else None
        else:
            data = guarded(lambda: self.conn.send(event))
        if data:
            self.sent.append(data)

    def splice(self, line: bytes) -> bytes:
        """``"#S<n>"`` becomes pooled state n, ``"#D<n>"`` the n-th newest this app sealed."""
        if b'"#' not in line:
            return line
        for index, token in enumerate(STATE_POOL):
            line = line.replace(b'"#S%d"' % index, b'"' + token.encode() + b'"')
        for index, token in enumerate(reversed(self.sealed[-4:])):
            line = line.replace(b'"#D%d"' % index, b'"' + token.encode() + b'"')
        return line

    def on_event(self, event: Any) -> None:
        if isinstance(event, (m.AutoReply, m.InvalidMessage)):
            self.send(event)
        elif isinstance(event, m.Request):
            # An id is handed out again only once its request was answered.
            shim = self.shims.get(event.id)
            assert shim is None or shim.finished, event
            self.now += self.tick
            self.on_request(event)
        elif isinstance(event, (m.ResultResponse, m.ErrorResponse)):
            for shim in [s for s in self.shims.values() if event.id in s.waiting_for]:
                guarded(lambda s=shim: s.receive(event, self.now))
        elif isinstance(event, m.RequestCancelled):
            shim = self.shims.get(event.request_id)
            if shim is not None:
                shim.cancel()
            # Anything for a cancelled request goes out as nothing.
            for late in (
                m.ResultResponse(id=event.request_id, result={}),
                m.Progress(request_id=event.request_id, progress=1.0),
                m.LogMessage(request_id=event.request_id, level="info", data="late"),
            ):
                sent = guarded(lambda late=late: self.conn.send(late))
                assert sent in (b"", None), sent

    def on_request(self, request: m.Request) -> None:
        conn = self.conn
        info = guarded(lambda: conn.request_info(request.id))
        assert info is not None, request  # every request handed out has its info
        if self.chatty:
            self.send(m.Progress(request_id=request.id, progress=0.5, total=1.0, message="half"))
            self.send(m.Progress(request_id=request.id, progress=0.75))
            self.send(
                m.LogMessage(request_id=request.id, level="info", data={"r": 1}, logger="fuzz")
            )
            self.send(m.LogMessage(request_id=request.id, level="debug", data="quiet"))
        if self.close_streams and isinstance(request.id, int) and request.id % 2:
            # The transport lost this request's response stream before the app answered.
            conn.response_stream_closed(request.id)
            conn.response_stream_closed(request.id)  # a second close is a no-op
            return
        params = request.params or {}
        arguments = params.get("arguments")
        if params.get("name") == "echo" and isinstance(arguments, dict):
            self.echo(request, arguments)  # (any method: prompts/get may ask too)
            return
        if request.method != "tools/call":
            self.send(m.ResultResponse(id=request.id, result={}))
            return
        handler = HANDLERS.get(params.get("name"), weather)  # type: ignore[arg-type]
        if info.era == "legacy":
            shim = m.server.LegacyShim(
                handler,
                request,
                info,
                new_id=conn.new_request_id,
                sealer=self.sealer,
                principal=None,
            )
            self.shims[request.id] = shim
            shim.start(self.now)
            return
        try:
            result = m.server.run_handler(
                handler,
                request,
                info,
                sealer=self.sealer,
                principal="p",
                now=self.now,
                flow_ttl=FLOW_TTL,
            )
        except m.MrtrError as exc:
            self.send(m.error_response(request.id, exc))
            return
        state = result.get("requestState")
        if isinstance(state, str):
            self.sealed.append(state)
        self.send(m.ResultResponse(id=request.id, result=result))

    def echo(self, request: m.Request, arguments: dict[str, Any]) -> None:
        """An app whose result (and request to the client) is the peer's to choose: the
        server's rules on what an app may send (input kinds declared, input_required only
        to 2026 clients, requests a 2025 client can take) refuse what breaks them with
        AppResultRefused, which is then the client's answer."""
        asked = arguments.get("request")
        if isinstance(asked, dict) and isinstance(asked.get("method"), str):
            params = asked.get("params")
            outgoing = m.Request(
                id=self.conn.new_request_id(),
                method=asked["method"],
                params=params if isinstance(params, dict) else None,
            )
            self.send(outgoing)
        if arguments.get("cancel") is True:
            # The app ends the request without an answer (as a subscriptions/listen
            # stream ends): a notifications/cancelled of its own, then nothing more.
            end = {"requestId": request.id, "reason": "done"}
            self.send(m.Notification(method="notifications/cancelled", params=end))
            return
        result = arguments.get("result")
        response = m.ResultResponse(
            id=request.id, result=result if isinstance(result, dict) else {}
        )
        try:
            data: bytes | None = self.conn.send(response)
        except m.AppResultRefused as exc:
            refusal = m.error_response(request.id, exc)
            data = guarded(lambda: self.conn.send(refusal))
        except m.MrtrError:
            return
        if data:
            self.sent.append(data)

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
    state, typed answers, ``Steps``, ``once``, ``require_proof``) and, for a 2025-era
    session, the legacy shim.

    Control bytes: ``data[0]``: 0x80 whole-message framing, 0x40 progress and log
    messages go out, 0x20 cacheable results, 0x10 messages arrive parsed
    (``receive_message``), 0x08 parsed and raw lines alternate with no ``next_event``
    between a pair, 0x04 the server speaks 2026-07-28 only, 0x02 it has a log level,
    0x01 at most two requests in flight.  ``data[1]``: 0x01 no sealer (stateless
    server), 0x02 a single-use store of two nonces, 0x04 the response stream of
    every odd request id closes before it is answered, 0x08/0x10 the clock advances
    10/20 s per request (the sealer's states live 25 s, flows 40 s), 0x20 the server
    has no info and no instructions, 0x40 it speaks 2025 only; with both, how the
    stream is cut.

    The tools: ``weather`` (default), ``proven``, ``steps`` and ``count``; ``echo`` answers with
    its ``arguments.result`` and first sends the client ``arguments.request``.  In a
    line, ``"#S0"`` .. ``"#S10"`` is replaced by a real sealed state from
    ``STATE_POOL`` and ``"#D0"`` .. ``"#D3"`` by one this server sealed earlier in
    the stream (newest first), so retries can carry real, replayed and spliced state.
    """
    if len(data) < 2:
        return
    control, extra = data[0], data[1]
    framing = "messages" if control & 0x80 else "lines"
    conn = m.Connection(
        m.SERVER,
        framing=framing,  # type: ignore[arg-type]
        info=None if extra & 0x20 else SERVER_INFO,
        capabilities={"tools": {}, "prompts": {}, "resources": {}, "logging": {}},
        instructions=None if extra & 0x20 else "fuzz",
        versions=(MODERN,) if control & 0x04 else (LEGACY,) if extra & 0x40 else ALL,
        log_level="warning" if control & 0x02 else None,
        cache_ttl_ms=(control & 0x20) * 100,
        max_message_size=MAX_MESSAGE,
        max_buffer_size=MAX_BUFFER,
        max_incoming=2 if control & 0x01 else 8,
    )
    app = ServerApp(
        conn,
        data,
        chatty=bool(control & 0x40),
        sealer=not extra & 0x01,
        nonces=2 if extra & 0x02 else 64,
        tick=10.0 * ((extra >> 3) & 0x03),
        close_streams=bool(extra & 0x04),
    )
    parsed = bool(control & 0x10)
    mixed = bool(control & 0x08)
    for index, line in enumerate(lines_of(data[2:])):
        line = app.splice(line)
        if mixed:
            # Parsed and raw input on one connection, fed back to back: the inbox holds
            # the raw bytes until the parsed message before them is handed out.
            for _ in feed_line(conn, line, data[:2], parsed=not index % 2):
                pass
            if index % 2:
                app.pump()
            continue
        for _ in feed_line(conn, line, data[:2], parsed=parsed):
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
    info = m.server.RequestInfo(
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
            waiting = list(shim.waiting_for)
            shim.cancel()
            shim.cancel()  # a second cancel (the client said it twice) changes nothing
            # What was under way when it was cancelled still comes back, and is dropped.
            if event is m.Wait.NEED_RESULT:
                guarded(lambda: shim.leg_done({"content": []}))
            for rid in waiting:
                late = m.ResultResponse(id=rid, result={})
                guarded(lambda late=late: shim.receive(late, 0.0))
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
