"""Property tests of the client role mid-flow: calls in flight, a server that says anything.

A client Connection (2026-07-28, newline framing) starts two to four calls and
sends their legs.  Some calls get an ``input_required`` round (their inputs are
dispatched to the app, which holds them: it is slow), the others wait for their
leg's answer.  Then hypothesis plays the server: answers to live legs, to dead
legs and to ids nobody used (complete, ``input_required`` of every shape,
errors), progress and cancellations naming any leg, server requests, and
garbage: mutated messages, arbitrary JSON values, arbitrary bytes.

Checked after every message: nothing escapes ``receive_data``/``next_event``
(the app never misuses the API, so not even a documented error); only the call
the message names (by its leg's id, a leg's progress token or a cancelled leg)
gets events, every other call's state is untouched; a call's events stop at its
one end.  Checked at the end: no call is lost, each has ended or is still
waiting (its leg on the wire, or its inputs with the app); the inputs still
held are answered, and are taken; then the stream ends and every call has
ended exactly once.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.budget import examples

import mrtr_core as m

SETTINGS = settings(
    max_examples=examples(times=1.5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
TERMINAL = (m.engine.Done, m.engine.Failed, m.engine.TimedOut, m.engine.Cancelled)

FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Which city?",
        "requestedSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
URL = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "go", "url": "https://x.test/", "elicitationId": "e1"},
}
SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 8,
    },
}
ROOTS = {"method": "roots/list"}
BAD_ASKS: list[Any] = [{"method": "nope"}, {"method": "roots/list", "params": 5}, "x", None]


def answer_for(request: Any) -> Any:
    if isinstance(request, m.wire.CreateMessageRequest):
        content = {"type": "text", "text": "ok"}
        return m.wire.CreateMessageResult(role="assistant", content=content, model="x")
    if isinstance(request, m.wire.ListRootsRequest):
        return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///r")])
    return m.wire.ElicitResult(action="decline")


# --- Strategies for what the server says ------------------------------------------------

texts = st.text(max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
asks = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([FORM, URL, SAMPLE, ROOTS, *BAD_ASKS]),
    max_size=3,
)
results = st.one_of(
    st.just({"content": [{"type": "text", "text": "done"}]}),
    st.builds(lambda extra: {"resultType": "complete", **extra}, st.dictionaries(texts, texts)),
    st.builds(
        lambda a, state: {
            "resultType": "input_required",
            **({"inputRequests": a} if a is not None else {}),
            **({"requestState": state} if state is not None else {}),
        },
        st.none() | asks,
        st.none() | texts | st.integers(),
    ),
    st.builds(lambda t: {"resultType": t}, texts),
    json_values,
)
errors = st.builds(
    lambda code, message, data: {"code": code, "message": message, "data": data},
    st.sampled_from([-32602, -32601, -32603, -32021, -32022, -32700, 0, 7]),
    texts,
    st.none() | st.just({"supported": ["2026-07-28"]}) | json_values,
)


def mutate(data: bytes, how: int, where: int, byte: int) -> bytes:
    """One of: flip a byte, cut the message short, insert a byte, duplicate a slice."""
    if not data:
        return bytes([byte])
    at = where % len(data)
    if how == 0:
        return data[:at] + bytes([data[at] ^ (byte or 1)]) + data[at + 1 :]
    if how == 1:
        return data[:at]
    if how == 2:
        return data[:at] + bytes([byte]) + data[at:]
    return data[:at] + data[at : at + 8] * 2 + data[at + 8 :]


class Client:
    """The client app and the book of what it started, sent and was told."""

    def __init__(self, calls: int, rounds: list[bool]) -> None:
        self.conn = m.Connection(
            m.CLIENT,
            era="modern",
            capabilities=ALL_CAPS,
            max_message_size=4096,
            max_finished_ids=16,
        )
        self.calls: list[int] = []
        self.leg_of: dict[m.RequestId, int] = {}  # every leg id ever sent -> its call
        self.ended: dict[int, Any] = {}
        self.held: dict[int, dict[str, Any]] = {}  # dispatched inputs the app holds
        for index in range(calls):
            params = {"name": f"tool{index}", "arguments": {"n": index}}
            self.calls.append(self.conn.call("tools/call", params, progress=index % 2 == 0))
        self.pump()
        # Some calls get an input round now, the rest wait for their leg.
        for call, asked in zip(self.calls, rounds, strict=False):
            if asked:
                rid = self.live_leg(call)
                body = {"resultType": "input_required", "inputRequests": {"a": FORM, "b": SAMPLE}}
                self.feed(json.dumps({"jsonrpc": "2.0", "id": rid, "result": body}).encode())
                self.pump()
                assert set(self.held[call]) == {"a", "b"}

    def live_leg(self, call: int) -> m.RequestId:
        (rid,) = [r for r in self.conn.outstanding if self.leg_of.get(r) == call]
        return rid

    def feed(self, data: bytes) -> None:
        self.conn.receive_data(data + b"\n")

    def pump(self) -> list[Any]:
        """Every event up to NEED_DATA, handled as the app would; returns them."""
        seen = []
        for _ in range(1000):
            event = self.conn.next_event()
            if event is m.NEED_DATA:
                return seen
            seen.append(event)
            self.on_event(event)
            if isinstance(event, m.ConnectionClosed):
                return seen  # (handed out again on every call from now on)
        raise AssertionError(f"next_event never returned NEED_DATA: {seen[-4:]}")

    def on_event(self, event: Any) -> None:
        if isinstance(event, m.CallEvent):
            call = event.call
            assert call in self.calls, event
            assert call not in self.ended, (event, self.ended[call])
            inner = event.event
            if isinstance(inner, (m.engine.SendRequest, m.engine.SendRetry)):
                sent = json.loads(self.conn.send(event))
                assert sent["id"] not in self.leg_of, sent  # ids are never reused
                self.leg_of[sent["id"]] = call
            elif isinstance(inner, m.engine.CancelLeg):
                self.conn.send(event)
            elif isinstance(inner, m.engine.DispatchInput):
                self.held.setdefault(call, {})[inner.key] = inner.request
            elif isinstance(inner, m.engine.CancelInputs):
                for key in inner.keys:
                    self.held.get(call, {}).pop(key, None)
            elif isinstance(inner, TERMINAL):
                self.ended[call] = inner
                self.held.pop(call, None)
                if isinstance(inner, m.engine.Failed):
                    assert isinstance(inner.error, m.MrtrError)
        elif isinstance(event, m.Request):
            self.conn.send(m.ResultResponse(id=event.id, result={}))
        elif isinstance(event, (m.InvalidMessage, m.AutoReply)):
            self.conn.send(event)  # (a client never answers garbage: b"")

    def calls_named(self, data: bytes) -> set[int]:
        """The calls a message names: by a leg's id, progress token or cancelled id."""
        try:
            obj = json.loads(data)
        except ValueError:
            return set()
        if not isinstance(obj, dict):
            return set()
        params = obj.get("params") if isinstance(obj.get("params"), dict) else {}
        named = set()
        for rid in (obj.get("id"), params.get("requestId"), params.get("progressToken")):
            if isinstance(rid, (int, str)) and not isinstance(rid, bool) and rid in self.leg_of:
                named.add(self.leg_of[rid])
        return named

    def waiting(self, call: int) -> bool:
        """A live call waits for its leg's answer or for the app's inputs."""
        on_wire = any(self.leg_of.get(r) == call for r in self.conn.outstanding)
        return on_wire or bool(self.held.get(call))


def server_message(draw: Any, client: Client) -> bytes:
    """One thing the server says, addressed to whatever hypothesis picks."""
    ids = sorted(client.leg_of, key=str)
    rid = draw(st.sampled_from(ids) | st.integers(-5, 100) | texts)
    kind = draw(st.sampled_from(["result", "error", "progress", "cancel", "other", "junk"]))
    if kind == "result":
        obj: Any = {"jsonrpc": "2.0", "id": rid, "result": draw(results)}
    elif kind == "error":
        obj = {"jsonrpc": "2.0", "id": rid, "error": draw(errors)}
    elif kind == "progress":
        params = {"progressToken": rid, "progress": draw(st.integers(0, 9) | texts)}
        obj = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
    elif kind == "cancel":
        params = {"requestId": rid, "reason": draw(texts)}
        obj = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
    elif kind == "other":
        method = draw(st.sampled_from(["ping", "notifications/message", "elicitation/create", "x"]))
        obj = {"jsonrpc": "2.0", "method": method, "params": draw(json_values)}
        if draw(st.booleans()):
            obj["id"] = rid
    else:
        obj = draw(json_values)
    data = json.dumps(obj).encode()
    if draw(st.integers(0, 3)) == 0:
        how, where, byte = draw(
            st.tuples(st.integers(0, 3), st.integers(0, 999), st.integers(0, 255))
        )
        data = mutate(data, how, where, byte).replace(b"\n", b" ")
    elif draw(st.integers(0, 9)) == 0:
        data = draw(st.binary(max_size=40)).replace(b"\n", b" ")
    return data


@SETTINGS
@given(st.data(), st.integers(2, 4), st.lists(st.booleans(), min_size=4, max_size=4))
def test_a_client_mid_flow_survives_any_server(data: Any, calls: int, rounds: list[bool]) -> None:
    client = Client(calls, rounds)
    for _ in range(data.draw(st.integers(1, 12), label="messages")):
        message = server_message(data.draw, client)
        named = client.calls_named(message)
        before = {c: (dict(client.held.get(c, {})), c in client.ended) for c in client.calls}
        wire = {c: client.waiting(c) for c in client.calls}
        client.feed(message)
        events = client.pump()
        touched = {e.call for e in events if isinstance(e, m.CallEvent)}
        touched |= {e.call for e in events if isinstance(e, m.Progress) and e.call is not None}
        # Only the call the message names moves; every other call is as it was.
        assert touched <= named, (message, touched, named)
        for call in set(client.calls) - named:
            assert (dict(client.held.get(call, {})), call in client.ended) == before[call]
            assert client.waiting(call) == wire[call], (call, message)
    # No call is lost: each has ended or is still waiting.
    for call in client.calls:
        assert call in client.ended or client.waiting(call), call
    # The inputs the app still holds are taken (their calls' state is intact).
    for call, held in list(client.held.items()):
        for key, request in list(held.items()):
            if call not in client.ended:
                client.conn.provide(call, key, answer_for(request))
                client.pump()
    # The end of the stream: every call ends exactly once.
    client.conn.receive_data(b"")
    events = client.pump()
    assert isinstance(events[-1], m.ConnectionClosed), events
    assert set(client.ended) == set(client.calls), (client.calls, client.ended)
