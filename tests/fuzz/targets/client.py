"""The client target: a client Connection with calls in flight gets the server's bytes."""

from __future__ import annotations

import json
from typing import Any

import mrtr_core as m

from ._common import (
    ALL_CAPS,
    CLIENT_INFO,
    MAX_BUFFER,
    MAX_MESSAGE,
    MODERN,
    drain,
    feed_line,
    guarded,
    lines_of,
)


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
        self.fail_inputs = False
        self.close_streams = False  # a 2025 server's requests lose their response stream
        self.plain_id: int | None = None
        #: The app waits out a retry's delay: it sends a delayed leg at the next pump.
        self.wait_delays = False
        self.cancel_after_provide = False
        self.held: list[Any] = []
        self.calls: set[int] = set()
        self.ended: dict[int, Any] = {}
        self.pending: list[tuple[int, str, Any]] = []  # dispatched inputs not answered
        self.sent: list[bytes] = []  # what went out (make_corpus.py feeds it to a server)

    def send(self, event: Any) -> None:
        data = guarded(lambda: self.conn.send(event))
        if data:
            self.sent.append(data)

    @staticmethod
    def reply_to(request: m.Request) -> dict[str, Any]:
        """The app's answer to a 2025-era server's question: the typed answer's JSON."""
        if request.method == "ping":
            return {}
        shaped = guarded(
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
            if self.wait_delays and isinstance(inner, m.engine.SendRetry) and inner.delay > 0:
                self.held.append(event)  # sent at the next pump, once the delay is over
            elif isinstance(inner, (m.engine.SendRequest, m.engine.SendRetry, m.engine.CancelLeg)):
                self.send(event)
            elif isinstance(inner, m.engine.DispatchInput):
                self.pending.append((event.call, inner.key, inner.request))
            elif isinstance(
                inner, (m.engine.Done, m.engine.Failed, m.engine.TimedOut, m.engine.Cancelled)
            ):
                self.ended[event.call] = inner
                self.pending = [p for p in self.pending if p[0] != event.call]
            elif isinstance(inner, m.engine.CancelInputs):
                dropped = set(inner.keys)
                self.pending = [
                    p for p in self.pending if p[0] != event.call or p[1] not in dropped
                ]
        elif isinstance(event, (m.HandshakeStep, m.AutoReply, m.InvalidMessage)):
            self.send(event)
        elif isinstance(event, m.Request):
            # A 2025-era server's question (or ping): answer it, as an app would.
            if self.close_streams:
                self.conn.response_stream_closed(event.id)
                return
            self.send(m.ResultResponse(id=event.id, result=self.reply_to(event)))
        elif isinstance(event, m.Progress) and event.call is not None:
            assert event.call in self.calls, event
        elif isinstance(event, m.SessionFailed):
            assert isinstance(event.error, m.MrtrError)

    def pump(self) -> None:
        held, self.held = self.held, []
        for event in held:  # (its call may have ended meanwhile: then nothing goes)
            self.send(event)
        drain(self.conn, self.on_event)
        if self.answer_inputs:
            pending, self.pending = self.pending, []
            for call, key, request in pending:
                if self.fail_inputs:
                    guarded(lambda c=call, k=key: self.conn.fail_input(c, k, "no"))
                    continue
                answer = answer_for(request)
                guarded(lambda c=call, k=key, a=answer: self.conn.provide(c, k, a))
                if self.cancel_after_provide:
                    # Cancelled before its retry was handed out: the retry never goes.
                    guarded(lambda c=call: self.conn.cancel(c))
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


def client_setup(
    scenario: int,
    framing: str,
    *,
    answer_inputs: bool,
    plain: bool = False,
    log_level: str | None = None,
    names: tuple[str, str] = ("one", "two"),
    close_stream: bool = False,
) -> ClientApp:
    """A client with calls in flight; the same every time (ids included).

    0, modern: call 1 in an input round (one of its two inputs answered, one
    pending), call 2 waiting for its leg, call 3 in a requestState-only round
    (its retry sent), call 4 (with progress and timeouts) waiting for its leg.
    1, auto: the ``server/discover`` probe out, calls 1 and 2 queued behind it.
    2, legacy: ``initialize`` out, calls 1 and 2 queued behind it.
    3, auto with only 2026-07-28 to offer: as 1, and it cannot fall back.
    ``plain``: then a ``tools/list`` of the app's own goes out too.  ``names``: the
    tools calls 1 and 2 call (``make_corpus.py`` picks the server target's tools).
    ``close_stream``: a cancelled leg's stream is closed instead of notified.
    """
    era = ("modern", "auto", "legacy", "auto")[scenario]
    conn = m.Connection(
        m.CLIENT,
        era=era,  # type: ignore[arg-type]
        versions=(MODERN,) if scenario == 3 else m.ALL_VERSIONS,
        log_level=log_level,
        framing=framing,  # type: ignore[arg-type]
        info=CLIENT_INFO,
        capabilities=ALL_CAPS,
        max_message_size=MAX_MESSAGE,
        max_buffer_size=MAX_BUFFER,
        max_finished_ids=3,
        cancellation="close_stream" if close_stream else "notify",
    )
    app = ClientApp(conn, b"", answer_inputs=False)
    app.start("tools/call", names[0])
    app.start("tools/call", names[1])
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
    if plain:
        # A request of the app's own, next to the calls (its answer is the app's).
        app.plain_id = conn.new_request_id()
        token = {"_meta": {"progressToken": "plain"}}
        app.send(m.Request(id=app.plain_id, method="tools/list", params=token))
    app.answer_inputs = answer_inputs
    return app


def client(data: bytes) -> None:
    """A client mid-flow gets arbitrary server bytes: only documented errors, no lost
    call, no event for a call after its end, and at the end of the stream every call
    ended exactly once.

    Control bytes: ``data[0]``: the scenario (0x03, see :func:`client_setup`), 0x04
    the client has a log level, 0x08 it cancels legs by closing their streams, 0x40
    a plain request too, 0x80 whole-message framing.
    ``data[1]``: 0x01 the app answers inputs (0x20: it fails them instead), what it
    does mid-stream (0x02 cancel a call, 0x04 break a leg, 0x08 an input timer
    fires, 0x10 a leg timer fires), 0x40 messages arrive parsed
    (``receive_message``).  ``data[2]``: more the app does mid-stream (0x01 the
    handshake timer fires, 0x02 it cancels its plain request, 0x04 the response
    stream of a 2025 server's request closes instead of the app answering it),
    0x08 parsed and raw lines alternate with no ``next_event`` between a pair,
    0x10 the app's timers fire late (past every budget), 0x20 the app waits out a
    retry's delay (sends it at the next line), 0x40 it cancels a call right after
    answering its input.  All three cut the stream.
    """
    if len(data) < 3:
        return
    scenario = data[0] & 0x03
    framing = "messages" if data[0] & 0x80 else "lines"
    app = client_setup(
        scenario,
        framing,
        answer_inputs=bool(data[1] & 1),
        plain=bool(data[0] & 0x40),
        log_level="debug" if data[0] & 0x04 else None,
        close_stream=bool(data[0] & 0x08),
    )
    app.wait_delays = bool(data[2] & 0x20)
    app.cancel_after_provide = bool(data[2] & 0x40)
    app.data = data
    app.fail_inputs = bool(data[1] & 0x20)
    app.close_streams = bool(data[2] & 0x04)
    conn = app.conn
    late = 1000.0 if data[2] & 0x10 else 100.0
    actions = {
        1: (data[1] & 0x08, lambda call: conn.input_timed_out(call, now=late), False),
        3: (data[1] & 0x02, conn.cancel, False),
        4: (data[1] & 0x10, lambda call: conn.leg_timed_out(call, now=late), True),
        5: (data[1] & 0x04, conn.leg_broken, True),
    }
    parsed = bool(data[1] & 0x40)
    mixed = bool(data[2] & 0x08)
    for step, line in enumerate(lines_of(data[3:])):
        if mixed:
            for _ in feed_line(conn, line, data[:3], parsed=not step % 2):
                pass
            if not step % 2:
                continue  # no next_event between this line and the next
        else:
            for _ in feed_line(conn, line, data[:3], parsed=parsed):
                app.pump()
        app.pump()
        if step in (0, 2) and data[2] & 0x01:
            guarded(conn.handshake_timed_out)
            app.pump()
        if step == 1 and data[2] & 0x02 and app.plain_id is not None:
            cancel = {"requestId": app.plain_id, "reason": "app gave up"}
            app.send(m.Notification(method="notifications/cancelled", params=cancel))
            app.send(m.Notification(method="notifications/roots/list_changed"))
        enabled, action, highest = actions.get(step, (0, None, False))
        if enabled and action is not None:
            # As an app might: on the lowest live call, or the highest.
            live = sorted(app.calls - app.ended.keys())
            if live:
                guarded(lambda c=live[-1 if highest else 0], act=action: act(c))
                app.pump()
    guarded(lambda: conn.receive_data(b""))
    app.pump()
    app.check_all_ended()
    # What the handshake settled, as the app reads it: consistent with itself.
    assert conn.era in (None, "modern", "legacy"), conn.era
    if conn.era is not None:  # settled: on a version of its era (the probe's may stay)
        assert conn.protocol_version in m.ALL_VERSIONS, conn.protocol_version
    assert conn.peer_info is None or isinstance(conn.peer_info, dict), conn.peer_info
    assert isinstance(conn.peer_capabilities, dict), conn.peer_capabilities
    assert conn.session_state.value in ("closed", "failed", "error"), conn.session_state
