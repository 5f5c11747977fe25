"""Write the seed corpus: ``python tests/fuzz/make_corpus.py`` (re-run after changing a
target's input layout; the files are committed under ``corpus/<target>/``).

The connection seeds are real conversations: the fuzz client (its setup exactly
as the ``client`` target builds it) talks to the fuzz server (the ``server``
target's app, with its handlers, sealed state and legacy shim), in each era, and
what each side wrote becomes the other target's seed.  Around those: every kind
of message written by hand (``input_required`` rounds, retries, errors,
notifications, the 2025 handshake), deep nesting (1,000 and 1,025 levels of
``[`` and ``{``), mutations of real messages, split and oversize lines.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import targets

import mrtr_core as m

CORPUS = Path(__file__).resolve().parent / "corpus"


def line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def result(rid: Any, value: Any) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "result": value})


def error(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return line({"jsonrpc": "2.0", "id": rid, "error": err})


def note(method: str, params: Any = None) -> bytes:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        obj["params"] = params
    return line(obj)


def request(rid: Any, method: str, params: Any = None) -> bytes:
    obj: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        obj["params"] = params
    return line(obj)


def deep(depth: int, open_: str) -> bytes:
    close = {"[": "]", "{": "}"}[open_]
    if open_ == "[":
        return (b"[" * depth) + (b"]" * depth)
    return b'{"a":' * depth + b"1" + close.encode() * depth


def deep_messages() -> list[bytes]:
    """Messages whose params/results nest 1,000 and 1,025 levels (plus bare values)."""
    out = []
    for depth in (1000, 1025):
        for open_ in "[{":
            inner = deep(depth, open_)
            out.append(inner + b"\n")
            out.append(b'{"jsonrpc":"2.0","id":1,"result":{"x":' + inner + b"}}\n")
            out.append(b'{"jsonrpc":"2.0","method":"n","params":{"x":' + inner + b"}}\n")
    return out


def mutations(data: bytes) -> list[bytes]:
    """A few deterministic mutations of one message line."""
    body = data.rstrip(b"\n")
    half = len(body) // 2
    return [
        body[:half] + b"\n",  # truncated
        body[:half] + b"\n" + body[half:] + b"\n",  # split by a newline
        body.replace(b'"2.0"', b'"1.0"') + b"\n",
        body.replace(b'"id":', b'"id":null,"x":') + b"\n",
        body.replace(b'"result"', b'"error"') + b"\n",
        body.replace(b"{", b"[", 2) + b"\n",
        body + b"\r\n\r\n   \n",
        b"\xef\xbb\xbf" + body + b"\n",
        body[:-1] + b"\xff}\n",
        body + body + b"\n",  # two messages on one line
    ]


def oversize(size: int = targets.MAX_MESSAGE + 64) -> bytes:
    return b'{"jsonrpc":"2.0","method":"notifications/x","params":{"pad":"' + b"x" * size + b'"}}\n'


# --- Real conversations ------------------------------------------------------------------


def server_connection() -> m.Connection:
    """The server the ``server`` target builds (control byte 0x40: lines, chatty)."""
    return m.Connection(
        m.SERVER,
        framing="lines",
        info=targets.SERVER_INFO,
        capabilities={"tools": {}, "prompts": {}, "resources": {}, "logging": {}},
        instructions="fuzz",
        cache_ttl_ms=0,
        max_message_size=targets.MAX_MESSAGE,
        max_buffer_size=targets.MAX_BUFFER,
        max_incoming=8,
    )


def converse(
    scenario: int, *, answer_inputs: bool, names: tuple[str, str] = ("one", "two")
) -> tuple[bytes, bytes]:
    """The client target's setup against the server target's app, until both are quiet.

    Returns (what the client wrote from the start, what the server wrote after the
    client's setup); the first is a server seed, the second a client seed.
    """
    client = targets.client_setup(scenario, "lines", answer_inputs=answer_inputs, names=names)
    server = targets.ServerApp(server_connection(), b"", chatty=True)
    to_server = list(client.sent)
    to_client: list[bytes] = []
    delivered = 0
    for _ in range(100):
        for data in client.sent[delivered:]:
            server.conn.receive_data(data)
        delivered = len(client.sent)
        before = len(server.sent)
        server.pump()
        fresh = server.sent[before:]
        for data in fresh:
            client.conn.receive_data(data)
        to_client.extend(fresh)
        client.pump()
        if not fresh and delivered == len(client.sent):
            break
    to_server.extend(client.sent[len(to_server) :])
    return b"".join(to_server), b"".join(to_client)


def client_seeds() -> Iterable[bytes]:
    for scenario in range(4):
        for answer in (0, 1):
            _, to_client = converse(scenario, answer_inputs=bool(answer))
            for framing in (0x00, 0x80):
                yield bytes([scenario | framing, answer | 0x08, 0]) + to_client
            yield bytes([scenario, answer | 0x02 | 0x04, 0x01]) + to_client  # cancel, break
            yield bytes([scenario | 0x44, answer | 0x08 | 0x10 | 0x20, 0x12]) + to_client
            yield bytes([scenario, answer | 0x40, 0x04]) + to_client  # parsed messages
            yield bytes([scenario | 0x40, answer, 0x08]) + to_client  # parsed and raw mixed
            yield bytes([scenario, answer, 0x01]) + to_client  # the handshake timer fires
            yield bytes([scenario | 0x08, answer | 0x02, 0x20]) + to_client  # delays waited
            yield bytes([scenario, 0x01, 0x40]) + to_client  # cancel right after answering
    # Hand-written answers to the modern scenario's legs.
    app = targets.client_setup(0, "lines", answer_inputs=False)
    legs = sorted(app.conn.outstanding, key=str)
    nxt = max(int(i) for i in legs) + 1
    token = None
    for data in app.sent:
        sent = json.loads(data)
        token = sent.get("params", {}).get("_meta", {}).get("progressToken", token)
    done = {"content": [{"type": "text", "text": "ok"}]}
    leg = legs[0]
    ask_all = {
        "resultType": "input_required",
        "inputRequests": {"f": targets.FORM, "s": targets.SAMPLE, "r": targets.ROOTS},
        "requestState": "st",
    }
    url = {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "go", "url": "https://x.test/", "elicitationId": "e"},
    }
    sample_params = {**targets.SAMPLE["params"], "tools": [], "includeContext": "thisServer"}
    sample_tools = {**targets.SAMPLE, "params": sample_params}
    bodies = [
        result(leg, done),
        result(leg, ask_all),
        result(leg, {"resultType": "input_required", "inputRequests": {"u": url}}),
        result(leg, {"resultType": "input_required", "inputRequests": {"t": sample_tools}}),
        result(leg, {"resultType": "input_required", "requestState": "only"}),
        result(leg, {"resultType": "input_required"}),
        result(leg, {"resultType": "input_required", "inputRequests": {}}),
        result(leg, {"resultType": "input_required", "inputRequests": {"x": {"method": "nope"}}}),
        result(leg, {"resultType": "complete", **done}),
        result(leg, {"resultType": "other"}),
        error(leg, -32602, "bad params"),
        error(leg, -32601, "no such method"),
        error(leg, -32022, "unsupported", {"supported": [targets.MODERN], "requested": "x"}),
        error(leg, -32022, "unsupported", {"supported": ["1999-01-01"]}),
        error(leg, -32021, "missing", {"requiredCapabilities": {"elicitation": {"form": {}}}}),
        error(None, -32700, "parse error"),
        note("notifications/progress", {"progressToken": token, "progress": 1, "total": 2}),
        note("notifications/progress", {"progressToken": token, "progress": "x"}),
        note("notifications/progress", {"progressToken": "nobody", "progress": 1}),
        note("notifications/cancelled", {"requestId": leg, "reason": "server gave up"}),
        note("notifications/cancelled", {}),
        note("notifications/message", {"level": "info", "data": "log"}),
        note("notifications/tools/list_changed"),
        request("srv-1", "ping"),
        request("srv-2", "elicitation/create", targets.FORM["params"]),
        result(1, done),  # the answered leg of call 1 (a late answer)
        result(nxt, done),  # the retry leg call 1 sends once its input is answered
        result(nxt + 5, done),  # nobody's
        result(True, done),
        b"[]\n",
        b"[" + result(leg, done).rstrip(b"\n") + b"]\n",
        b"null\n",
        b"\n\n \r\n",
        oversize(),
    ]
    for control in (b"\x00\x00\x00", b"\x00\x01\x00", b"\x80\x01\x00", b"\x00\x07\x10"):
        yield control + b"".join(bodies)
    yield b"\x40\x41\x08" + b"".join(bodies)
    for body in bodies:
        yield b"\x00\x01\x00" + body
        yield b"\x00\x09\x00" + result(legs[1], ask_all) + result(legs[2], done) + body
    for data in mutations(result(leg, ask_all)) + deep_messages():
        yield b"\x00\x01\x00" + data
    yield from handshake_seeds()


def handshake_seeds() -> Iterable[bytes]:
    """Every shape of answer to the client's ``server/discover`` and ``initialize``."""
    init = {
        "protocolVersion": targets.LEGACY,
        "capabilities": {"tools": {}, "logging": {}},
        "serverInfo": targets.SERVER_INFO,
        "instructions": "hi",
    }
    discover = {
        "supportedVersions": [targets.MODERN],
        "capabilities": {"tools": {}},
        "instructions": "hi",
        "_meta": {"io.modelcontextprotocol/serverInfo": targets.SERVER_INFO},
    }
    supported = {"supported": [targets.MODERN], "requested": "1999-01-01"}
    for scenario in (1, 2, 3):
        boot = targets.client_setup(scenario, "lines", answer_inputs=False)
        (first,) = boot.conn.outstanding
        after = first + 1
        if scenario == 2:  # initialize is the first step
            answers = [
                result(first, init),
                result(first, {**init, "serverInfo": "x", "capabilities": 5, "instructions": 1}),
                result(first, {"protocolVersion": "1999-01-01"}),
                result(first, {"protocolVersion": 7}),
                error(first, -32602, "Unsupported protocol version"),
            ]
        else:
            answers = [
                result(first, discover),
                result(first, {**discover, "_meta": 5, "capabilities": [], "instructions": 1}),
                result(first, {"supportedVersions": [targets.LEGACY]}),  # fall back
                result(first, {"supportedVersions": ["1999-01-01"]}),
                result(first, {"supportedVersions": "2026-07-28"}),
                result(first, {}),
                error(first, -32601, "no server/discover") + result(after, init),
                error(first, -32601, "no server/discover") + error(after, -32603, "x"),
                error(first, -32022, "unsupported", supported) + result(after, discover),
                error(first, -32022, "unsupported", supported) + error(after, -32022, "again"),
                error(first, -32022, "unsupported", {"supported": ["1999-01-01"]}),
                error(first, -32022, "unsupported", [1]),
                error(first, -32020, "modern error"),
                error(first, -32021, "missing", {"requiredCapabilities": {}}),
                error(first, -32700, "parse error"),
            ]
        for answer in answers:
            for control in (bytes([scenario, 1, 0]), bytes([scenario | 0x04, 0x41, 0x04])):
                yield control + answer + result(first + 2, init) + result(first + 3, {})
        # The handshake timer fires: before any answer, and after the fallback.
        yield bytes([scenario, 1, 0x01]) + b"\n\n\n" + result(first, init)
        yield (
            bytes([scenario, 1, 0x01]) + error(first, -32601, "none") + b"\n" + result(after, init)
        )
        # A 2025 server's own requests, answered or with their response stream closed.
        asks = request("s1", "ping") + request("s2", "roots/list") + request("s3", "x/y")
        asks += request("s4", "elicitation/create", targets.FORM["params"])
        for control in (bytes([scenario, 1, 0]), bytes([scenario, 1, 0x04])):
            yield (
                control
                + result(first, init)
                + asks
                + note("notifications/cancelled", {"requestId": "s2"})
            )


ASK = {"resultType": "input_required", "inputRequests": {"a": targets.FORM, "r": targets.ROOTS}}
URL_ASK = {
    "resultType": "input_required",
    "inputRequests": {
        "u": {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"},
        }
    },
    "requestState": "s",
}


def packed(control: bytes, bodies: list[bytes], limit: int = 8000) -> Iterable[bytes]:
    """``control`` and ``bodies`` in as few seeds as fit libFuzzer's ``-max_len``."""
    seed = control
    for body in bodies:
        if len(seed) + len(body) > limit and len(seed) > len(control):
            yield seed
            seed = control
        seed += body
    yield seed


def line_with(message: dict[str, Any], *, id: Any, state: str | None = None) -> bytes:
    """``message`` again under another id (and with another ``requestState``)."""
    params = dict(message.get("params") or {})
    if state is not None:
        params["requestState"] = state
    return line({**message, "id": id, "params": params})


def _retry_lines(stream: bytes) -> list[bytes]:
    return [ln + b"\n" for ln in stream.split(b"\n") if b'"requestState"' in ln]


def server_seeds() -> Iterable[bytes]:
    for names in (("one", "two"), ("steps", "proven"), ("proven", "steps")):
        for scenario in range(4):
            for answer in (False, True):
                to_server, _ = converse(scenario, answer_inputs=answer, names=names)
                first = names == ("one", "two")
                for control in (0x40, 0x00, 0xC0, 0x60, 0x50, 0x48, 0x05) if first else (0x40,):
                    yield bytes([control, 0]) + to_server
                for extra in (0x01, 0x02, 0x04, 0x08, 0x18, 0x20) if first else (0x02, 0x18):
                    yield bytes([0x40, extra]) + to_server
                for data in mutations(to_server.split(b"\n")[0]) if first else []:
                    yield b"\x40\x00" + data
                # A retry sent twice (the second a replay of a spent state), and again
                # with its state swapped for the newest this server sealed.
                for line in _retry_lines(to_server)[:1]:
                    retry = json.loads(line)
                    again = line_with(retry, id=f"re-{retry['id']}")
                    twice = line_with(retry, id=f"re2-{retry['id']}")
                    yield b"\x40\x00" + to_server + again
                    yield b"\x40\x02" + to_server + again + twice
                    yield b"\x40\x00" + to_server + line_with(retry, id="sp", state="#D0")
                    yield b"\x40\x00" + to_server + line_with(retry, id="sp", state="#D1")
    meta = {
        "io.modelcontextprotocol/protocolVersion": targets.MODERN,
        "io.modelcontextprotocol/clientCapabilities": targets.ALL_CAPS,
        "progressToken": "tok",
        "io.modelcontextprotocol/logLevel": "debug",
    }
    call = {"name": "weather", "arguments": {"x": 1}, "_meta": meta}
    init = {
        "protocolVersion": targets.LEGACY,
        "capabilities": targets.ALL_CAPS,
        "clientInfo": targets.CLIENT_INFO,
    }
    city = {"city": {"action": "accept", "content": {"city": "Oslo"}}}
    tone = {"tone": {"role": "assistant", "content": {"type": "text", "text": "w"}, "model": "m"}}
    login = {"login": {"action": "accept"}}
    bodies = [
        request(1, "server/discover", {"_meta": meta}),
        request(2, "tools/call", call),
        request(3, "tools/call", {**call, "inputResponses": {"city": {"action": "accept"}}}),
        request(4, "tools/call", {**call, "requestState": "mrtr1.k1.e30.AAAA"}),
        request(5, "tools/list", {"_meta": meta}),
        request(6, "tools/call", {"name": "weather"}),
        request(7, "ping"),
        note("notifications/cancelled", {"requestId": 2}),
        note("notifications/cancelled", {"requestId": "nobody"}),
        result(1000, {}),
        error(1000, -1, "x"),
        request(2, "tools/call", call),  # an id in use
        request(8, "initialize", init),
        note("notifications/initialized"),
        request(9, "tools/call", {"name": "weather", "arguments": {}}),
        result(1, {"action": "accept", "content": {"city": "Oslo"}}),
        result(2, {"role": "assistant", "content": {"type": "text", "text": "w"}, "model": "m"}),
        request(10, "logging/setLevel", {"level": "debug"}),
        request(11, "tools/call", {"name": "echo", "arguments": {"result": ASK}, "_meta": meta}),
        request(12, "tools/call", {"name": "echo", "arguments": {"result": URL_ASK}}),
        request(13, "tools/call", {"name": "echo", "arguments": {"result": {"content": []}}}),
        b"[]\n",
        oversize(),
    ]
    # Every pooled sealed state spliced into a retry of the pool's params, answered.
    for index in range(len(targets.STATE_POOL)):
        for name, answers in (("weather", {**city, **tone}), ("steps", city), ("proven", login)):
            params = {
                **targets.POOL_PARAMS,
                "name": name,
                "requestState": f"#S{index}",
                "inputResponses": answers,
                "_meta": meta,
            }
            bodies.append(request(100 + index, "tools/call", params))
    bodies.append(
        request(120, "tools/call", {**targets.POOL_PARAMS, "requestState": "#S0", "_meta": meta})
    )
    bodies.append(
        request(121, "tools/call", {**targets.POOL_PARAMS, "requestState": 5, "_meta": meta})
    )
    for token in ("a.b.c", "mrtr9.k1.x.y", "mrtr1.zz.x.y", "mrtr1.k1.!!!.y", "x" * 900, "é.a.b.c"):
        bodies.append(request(122, "tools/call", {**call, "requestState": token}))
    # The server's rules on what an app may send, through echo's result and request.
    echo_results = [
        {"resultType": "other"},
        {"resultType": "complete", "content": []},
        {"resultType": "input_required"},
        {"resultType": "input_required", "inputRequests": {"x": {"method": "nope"}}},
        {"resultType": "input_required", "inputRequests": 5},
        {"resultType": "input_required", "inputRequests": {"u": URL_ASK["inputRequests"]["u"]}},
        {"resultType": "input_required", "requestState": "s"},
    ]
    echo_requests = [
        {"method": "ping"},
        {"method": "roots/list"},
        {"method": "sampling/createMessage", "params": targets.SAMPLE["params"]},
        {"method": "elicitation/create", "params": targets.FORM["params"]},
        {"method": "elicitation/create", "params": URL_ASK["inputRequests"]["u"]["params"]},
        {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": "m", "url": "https://x"},
        },
        {"method": "elicitation/create", "params": {"mode": "carrier pigeon"}},
        {"method": "tools/list"},
    ]
    bare = {**meta, "io.modelcontextprotocol/clientCapabilities": {}}
    for index, value in enumerate(echo_results + [{"content": []}] * len(echo_requests)):
        arguments: dict[str, Any] = {"result": value}
        if index >= len(echo_results):
            arguments["request"] = echo_requests[index - len(echo_results)]
        for params in (
            {"name": "echo", "arguments": arguments, "_meta": meta},
            {"name": "echo", "arguments": arguments, "_meta": bare},
            {"name": "echo", "arguments": arguments},  # 2025 era (after initialize)
            {"name": "echo", "arguments": arguments, "_meta": meta, "requestState": "s"},
        ):
            bodies.append(request(200 + index, "tools/call", params))
    bodies.extend(
        [
            request(300, "ping", {"_meta": meta}),
            request(301, "initialize", {**init, "_meta": meta}),
            request(302, "server/discover"),
            request(
                303,
                "tools/call",
                {**call, "_meta": {**meta, "io.modelcontextprotocol/protocolVersion": 5}},
            ),
            request(
                304,
                "tools/call",
                {
                    **call,
                    "_meta": {**meta, "io.modelcontextprotocol/protocolVersion": "1999-01-01"},
                },
            ),
            request(
                305,
                "tools/call",
                {**call, "_meta": {**meta, "io.modelcontextprotocol/clientCapabilities": 5}},
            ),
            request(
                306,
                "tools/call",
                {**call, "_meta": {**meta, "io.modelcontextprotocol/clientInfo": 5}},
            ),
            request(
                307,
                "tools/call",
                {**call, "_meta": {**meta, "io.modelcontextprotocol/logLevel": "loud"}},
            ),
            request(308, "tools/call", {**call, "inputResponses": 5}),
            request(
                309,
                "tools/call",
                {**call, "inputResponses": {"city": {"action": "accept", "content": {"city": 5}}}},
            ),
            request(310, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {}}),
            request(311, "initialize", init),
            request(311, "initialize", init),
            note("notifications/initialized"),
            request(312, "server/discover"),
            request(313, "tools/call", {**call, "requestState": "#S2"}),
            request(314, "tools/call", {**call, "requestState": "#S8"}),
            request(315, "tools/call", {**call, "requestState": "m" * 800}),
        ]
    )
    for control in (b"\x40\x00", b"\xc0\x00", b"\x10\x00", b"\x08\x00", b"\x46\x00", b"\x41\x1e"):
        yield from packed(control, bodies)
    yield from special_server_seeds(meta, init)
    legacy_open = request(8, "initialize", init) + note("notifications/initialized")
    for body in bodies:
        yield b"\x40\x00" + body
        if b'"echo"' in body:
            yield b"\x40\x00" + legacy_open + body
    for data in deep_messages():
        yield b"\x40\x00" + data
    # Deep values where the server reads them: arguments, a retry's answers and state.
    head = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"weather",'
    tail = b',"_meta":' + json.dumps(meta).encode() + b"}}\n"
    for depth in (1000, 1025):
        nested = deep(depth, "[")
        for extra in (
            b'"arguments":{"x":' + nested + b"}",
            b'"arguments":{},"requestState":"mrtr1.k1.e30.AAAA","x":' + nested,
            b'"arguments":{},"inputResponses":{"city":' + nested + b"}",
        ):
            yield b"\x40\x00" + head + extra + tail


def special_server_seeds(meta: dict[str, Any], init: dict[str, Any]) -> Iterable[bytes]:
    """The handler styles' corners, reached through pooled state, and server options."""
    city = {"city": {"action": "accept", "content": {"city": "Oslo"}}}
    no_roots = {**meta, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}

    def call(rid: Any, name: str, state: str | None = None, **more: Any) -> bytes:
        params: dict[str, Any] = {**targets.POOL_PARAMS, "name": name, "_meta": meta, **more}
        if state is not None:
            params["requestState"] = state
        return request(rid, "tools/call", params)

    yield b"\x40\x00" + call(1, "steps", "#S2")  # Steps stays, asking again
    yield b"\x40\x00" + call(1, "steps", "#S2", inputResponses=city)
    yield b"\x40\x00" + call(1, "steps", "#S2", inputResponses=city, _meta=no_roots)
    yield b"\x40\x00" + call(1, "steps", "#S7", inputResponses=city)  # a step it lacks
    login = {"login": {"action": "accept"}}
    yield b"\x40\x00" + call(1, "proven", "#S8", inputResponses=login) + call(2, "proven", "#S8")
    yield b"\x40\x00" + call(1, "weather", "#S9", inputResponses=city)  # the flow ran out
    yield b"\x40\x01" + call(1, "weather", None, inputResponses=city)  # stateless, answered
    yield b"\x40\x01" + call(1, "proven") + call(2, "count")  # stateless: asks, guards
    legacy = request(1, "initialize", init) + note("notifications/initialized")
    three = b"".join(request(i, "tools/call", {"name": "weather"}) for i in (2, 3, 4))
    yield b"\x41\x00" + legacy + three  # at most two in flight
    yield b"\x40\x40" + request(1, "server/discover", {"_meta": meta}) + legacy  # 2025 only
    yield b"\x44\x00" + legacy  # 2026 only
    cancel = {"name": "echo", "arguments": {"cancel": True}, "_meta": meta}
    yield b"\x40\x00" + request(1, "tools/call", cancel) + request(1, "ping", {"_meta": meta})
    tools_caps = {**meta, "io.modelcontextprotocol/clientCapabilities": {"sampling": {"tools": {}}}}
    sample_tools = {
        "method": "sampling/createMessage",
        "params": {**targets.SAMPLE["params"], "tools": []},
    }
    ask = {"resultType": "input_required", "inputRequests": {"t": sample_tools}}
    for caps in (tools_caps, meta):
        echo = {"name": "echo", "arguments": {"result": ask}, "_meta": caps}
        yield b"\x40\x00" + request(1, "tools/call", echo)


def legacy_shim_seeds() -> Iterable[bytes]:
    ask = {
        "resultType": "input_required",
        "inputRequests": {"f": targets.FORM, "s": targets.SAMPLE, "r": targets.ROOTS},
        "requestState": "s1",
    }
    answers = [
        {"action": "accept", "content": {"city": "Oslo"}},
        {"role": "assistant", "content": {"type": "text", "text": "w"}, "model": "m"},
        {"roots": [{"uri": "file:///a"}]},
    ]
    done = {"content": [{"type": "text", "text": "ok"}]}
    state_only = {"resultType": "input_required", "requestState": "again"}
    flows = [
        [ask, *answers, done],
        [ask, *answers, ask, *answers, done],
        [state_only, state_only, state_only, done],
        [ask, {"code": -1, "message": "declined"}],
        [{"resultType": "input_required", "inputRequests": {"x": {"method": "nope"}}}],
        [{"resultType": "input_required", "inputRequests": 5}],
        [{"resultType": "input_required", "requestState": 5}],
        ["not an object"],
        [ask, "junk", "junk", "junk"],
        [done],
    ]
    for control in (0x00, 0x05, 0x3C, 0x11):
        for flow in flows:
            yield bytes([control]) + b"\n".join(json.dumps(v).encode() for v in flow)


def framing_seeds() -> Iterable[bytes]:
    _, to_client = converse(0, answer_inputs=True)
    to_server, _ = converse(2, answer_inputs=True)
    streams = [
        to_client,
        to_server.replace(b"\n", b"\r\n"),
        b"a\nbb\n\n  \n\r\n" + b"x" * 100 + b"\r\nlast",
        b"\r\r\r\n\n\n",
        b"0123456789" * 20 + b"\r",
        oversize(300) * 3,
    ]
    for stream in streams:
        for control in (b"\xff\x07\x00\x00\x00\x00\x00\x00\x00\x00", b"\x05\x03\x00\x01\x02\x07"):
            yield control.ljust(10, b"\x03") + stream


def sse_seeds() -> Iterable[bytes]:
    _, to_client = converse(0, answer_inputs=True)
    events = b"".join(
        m.http.encode_sse(text.decode(), id=str(i), event="message" if i % 2 else None)
        for i, text in enumerate(to_client.splitlines())
    )
    streams = [
        events,
        events.replace(b"\n", b"\r\n"),
        events.replace(b"\n", b"\r"),
        b"\xef\xbb\xbf" + events,
        b": comment\n\ndata\n\nid: 7\nretry: 1500\ndata: a\ndata: b\n\n",
        b"id: a\x00b\nretry: 99999999999999\nretry: x\nevent\ndata:x\n\n",
        b"data: " + b"y" * 600 + b"\n\ndata: z\n\n",
        b"data: unfinished",
    ]
    for stream in streams:
        for control in (b"\x00\x01", b"\x40\x03", b"\x02\x00"):
            yield control + b"\x05\x01\x3f\x02\x00\x09\x11\x00" + stream


def codec_seeds() -> Iterable[bytes]:
    _, to_client = converse(0, answer_inputs=True)
    to_server, _ = converse(2, answer_inputs=True)
    lines = [ln for ln in (to_client + to_server).split(b"\n") if ln]
    yield from lines
    yield from (d.rstrip(b"\n") for d in deep_messages())
    for ln in lines[:4]:
        yield from (d.rstrip(b"\n") for d in mutations(ln + b"\n"))
    yield b'{"jsonrpc":"2.0","id":1,"result":{"n":123456789012345678901234567890}}'
    yield b'{"jsonrpc":"2.0","id":1,"result":{"s":"\\ud800","f":1e400}}'
    yield b'{"jsonrpc":"2.0","id":1,"result":{"f":NaN}}'
    yield b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"x"}}'
    yield b'{"jsonrpc":"2.0","id":1.5,"error":{"code":1,"message":"x"}}'
    # Each shape rule of a JSON-RPC message broken once; odd ids described in errors.
    yield b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}'
    yield b'{"jsonrpc":"2.0","id":1,"result":[1]}'
    yield b'{"jsonrpc":"2.0","id":1,"method":5}'
    yield b'{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}'
    yield b'{"jsonrpc":"2.0","id":1,"error":"bad"}'
    for rid in (b'{"a":[1,{"b":2}],"c":{}}', b"[[],[1,[2,[3]]],{}]", b"1" * 40, b"1.25e3", b"{}"):
        yield b'{"jsonrpc":"2.0","id":' + rid + b',"result":{}}'
        yield b'{"jsonrpc":"2.0","id":' + rid + b',"method":"tools/call"}'


def convert_seeds() -> Iterable[bytes]:
    values = [
        targets.FORM,
        targets.SAMPLE,
        targets.ROOTS,
        targets.FORM["params"],
        targets.SAMPLE["params"],
        {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"},
        {"action": "accept", "content": {"a": 1}},
        {"role": "assistant", "content": {"type": "text", "text": "t"}, "model": "m"},
        {"roots": [{"uri": "file:///a", "name": "a"}]},
        {"uri": "file:///b"},
        {"resultType": "input_required", "inputRequests": {"a": targets.FORM}, "requestState": "s"},
        {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {}},
    ]
    for index, value in enumerate(values):
        for kind in range(len(targets.PAYLOADS)):
            if kind == index % len(targets.PAYLOADS) or kind == 0:
                yield bytes([kind]) + json.dumps(value).encode()
    yield b"\x00" + deep(1000, "[")
    yield b"\x01" + deep(1025, "{")


def headers_seeds() -> Iterable[bytes]:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "deep": {
                "type": "object",
                "properties": {"flag": {"type": "boolean", "x-mcp-header": "Flag"}},
            },
        },
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "weather",
            "arguments": {"region": "eu west", "n": 3, "deep": {"flag": True}},
            "_meta": {"io.modelcontextprotocol/protocolVersion": targets.MODERN},
        },
    }
    heads = [
        "MCP-Protocol-Version: 2026-07-28\nMcp-Method: tools/call\nMcp-Name: weather\n"
        "Mcp-Param-Region: eu west\nMcp-Param-N: 3\nMcp-Param-Flag: true",
        "Mcp-Method: tools/call\nMcp-Name: =?base64?d2VhdGhlcg==?=\nMcp-Param-Region: x",
        "Mcp-Method: tools/call\nMcp-Method: tools/call",
        "Mcp-Name: =?base64?!!!?=",
    ]
    for head in heads:
        yield f"{json.dumps(schema)}\n{head}\n\n{json.dumps(body)}".encode()
    yield b'{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}\n\n\n{}'
    # Argument values of every kind, mirrored right, wrong, encoded, missing, malformed.
    typed = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "x-mcp-header": "S"},
            "f": {"type": "number", "x-mcp-header": "F"},
            "b": {"type": "boolean", "x-mcp-header": "B"},
            "o": {"type": "object", "x-mcp-header": "O"},
            "list": {"type": "array", "items": [{"type": "string"}], "anyOf": [{}, {}]},
        },
    }
    for arguments, head in [
        (
            {"s": "café ", "f": 2.0, "b": False},
            "Mcp-Param-S: =?base64?Y2Fmw6kg?=\nMcp-Param-F: 2\nMcp-Param-B: false",
        ),
        ({"s": "x", "f": 2.5, "b": True}, "Mcp-Param-S: y\nMcp-Param-F: 2.50\nMcp-Param-B: yes"),
        ({"s": "x", "f": 1e300}, "Mcp-Param-S: =?base64?!!?=\nMcp-Param-F: NaN"),
        ({"s": "x", "f": 3}, "Mcp-Param-F: three"),
        ({"f": 3}, "Mcp-Param-S: x\nMcp-Param-F: 3"),
        ({"s": "=?base64?eA==?="}, "Mcp-Param-S: =?base64?PT9iYXNlNjQ/ZUE9PT89?="),
        ({"s": "\u00e9"}, "Mcp-Param-S: \u00e9"),
        ({"o": {"k": 1}, "s": None}, "Mcp-Param-O: x"),
        ("not an object", "Mcp-Param-S: x"),
    ]:
        message = {**body, "params": {**body["params"], "arguments": arguments}}
        lines = f"Mcp-Method: tools/call\nMcp-Name: weather\n{head}"
        yield f"{json.dumps(typed)}\n{lines}\n\n{json.dumps(message)}".encode()
    number = {"type": "object", "properties": {"f": {"type": "integer", "x-mcp-header": "F"}}}
    for value in (2.0, 2.5, 1e300, -0.0):
        message = {**body, "params": {**body["params"], "arguments": {"f": value}}}
        yield f"{json.dumps(number)}\nMcp-Param-F: 2\n\n{json.dumps(message)}".encode()
    for schema in [
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A b"}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": 5}}},
        {"type": "object", "properties": {"a": {"x-mcp-header": "A"}, "b": {"x-mcp-header": "a"}}},
        {"type": "object", "x-mcp-header": "Top"},
        {"type": "object", "properties": {"a": {"type": "array", "items": {"x-mcp-header": "I"}}}},
        {"type": "object", "properties": {"a": {"oneOf": [{"x-mcp-header": "O"}]}}},
        {"type": "object", "properties": [{"x-mcp-header": "L"}]},
        json.loads(deep(40, "{").decode().replace('"a":', '"properties":{"a":', 1) + "}"),
        json.loads(deep(100, "{")),
    ]:
        yield f"{json.dumps(schema)}\nMcp-Method: tools/call\n\n{json.dumps(body)}".encode()
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "file:///a"}},
        {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "p"}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": 5},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "result": {}},
    ]
    for message in requests:
        for head in ("Mcp-Method: x\nMcp-Name: y", "MCP-Protocol-Version: 2025-06-18", ""):
            yield f"\n{head}\n\n{json.dumps(message)}".encode()
    yield b"\n\n\n" + json.dumps({**body, "params": {"uri": "r", "name": 5}}).encode()
    yield deep(1000, "{") + b"\n\n\n{}"


def engine_seeds() -> Iterable[bytes]:
    def step(action: int, value: Any = None, seconds: int = 0) -> bytes:
        body = b"" if value is None else json.dumps(value).encode()
        return bytes([action << 4 | seconds]) + body

    done = {"content": [{"type": "text", "text": "ok"}]}
    ask = {
        "resultType": "input_required",
        "inputRequests": {"f": targets.FORM, "s": targets.SAMPLE, "r": targets.ROOTS},
        "requestState": "s1",
    }
    only_state = {"resultType": "input_required", "requestState": "again"}
    url = URL_ASK["inputRequests"]["u"]
    flows = [
        [step(0, done)],
        [step(0, ask), step(1), step(0, done)],
        [step(0, ask), step(6, None, 2), step(1), step(0, done)],  # restored mid-round
        [step(0, ask), step(1), step(6, None, 1), step(0, done)],  # restored mid-leg
        [step(0, ask), step(7, {"version": 2})],  # a stored snapshot gone bad
        [step(0, ask), step(7, {"state": "done"})],
        [step(0, ask), step(7, {"request_state": 5})],
        [step(0, ask), step(7, {"pending": {"x": {"method": "nope"}}})],
        [step(0, ask), step(7, {"elapsed": "x"})],
        [step(0, ask), step(7, {"round_elapsed": 1000})],
        [step(0, ask), step(7, {"options": {"max_rounds": 0}})],
        [step(0, only_state), step(0, only_state), step(0, only_state), step(0, only_state)],
        [step(0, ask), step(1), step(0, ask), step(1), step(0, ask), step(1), step(0, ask)],
        [step(0, ask), step(0, {"action": "accept"}), step(0, {"roots": 5}), step(2)],
        [step(0, ask), step(4, None, 15)],
        [step(3, None, 6), step(3, None, 6), step(0, done)],
        [step(5), step(5), step(5), step(5), step(0, done)],
        [step(0, ask), step(8)],
        [step(0, {"code": -32021, "message": "m", "data": {"requiredCapabilities": {}}})],
        [step(0, {"code": -32602, "message": "m"})],
        [step(0, {"resultType": "input_required", "inputRequests": {"u": url}})],
        [step(0, {"resultType": "input_required", "inputRequests": 5})],
        [step(0, {"resultType": "input_required", "requestState": 5})],
        [step(0, {"resultType": "input_required"})],
        [step(0, {"resultType": "strange"})],
        [step(0, ask, 15), step(1, None, 15), step(0, done, 15)],
    ]
    # A URL elicitation accepted (or declined): the requestState-only legs after it wait
    # for a person (not counted against max_state_only_legs, bounded by url_wait_timeout).
    accept, decline = {"action": "accept"}, {"action": "decline"}
    url_only = {"resultType": "input_required", "requestState": "waiting"}
    start = [step(0, URL_ASK), step(0, accept)]
    url_flows = [
        [*start, *[step(0, url_only, 2)] * 5, step(0, done)],
        [*start, *[step(0, url_only, 15)] * 4],
        [step(0, URL_ASK), step(0, decline), *[step(0, url_only)] * 5, step(0, done)],
        [*start, step(0, url_only, 5), step(6, None, 5), *[step(0, url_only, 15)] * 2],
        [*start, step(0, url_only), step(7, {"url_waited": 19.5}), step(0, url_only, 1)],
        [*start, step(0, url_only), step(0, ask), step(1), step(0, url_only), step(0, done)],
    ]
    for url_flow in url_flows:
        for control in (0x00, 0x07, 0x60):
            for option in (0x00, 0x10, 0x90):
                yield bytes([control, option]) + b"\n".join(url_flow)
    for control in (0x00, 0x07, 0x18, 0x60, 0x80, 0xFF):
        for declared in (0, 1, 2, 3) if control == 0x07 else (0,):
            for flow in flows:
                yield bytes([control, declared << 2]) + b"\n".join(flow)
    for flow in flows[:4]:
        yield b"\x00\x40" + b"\n".join(flow)  # cancelled before it starts
        yield b"\x07\x80" + b"\n".join(flow)  # stored and restored before it starts
    # An input timer bounded by the total budget, firing past it.
    yield b"\x06\x00" + b"\n".join([step(0, ask), step(4, None, 15), step(4, None, 15)])
    yield b"\x03\x00" + b"\n".join([step(3, None, 15), step(3, None, 15), step(3, None, 15)])


def schemas_seeds() -> Iterable[bytes]:
    form = targets.SCHEMAS[0]
    good = {"name": "Ann", "email": "ann@example.com", "born": "2000-01-31", "age": 3}
    values: list[Any] = [
        good,
        {**good, "email": "not an email", "born": "2000-13-01", "when": "x"},
        {**good, "tags": ["x", "x", "z"], "picks": ["q"], "size": "xl", "tone": "b"},
        {"region": "eu-1", "when": "2026-07-28T00:00:00Z", "deep": {"n": [1, 2]}},
        {"region": "EU", "deep": {"n": ["x"], "more": 1}, "other": True},
        {"x": "s", "y": True, "z": 5},
        [{"a": 1}, {"a": 1}],
        [],
        None,
        "text",
        1e308,
        {"action": "accept", "content": good},
        {"action": "accept", "content": {**good, "age": -1}},
        {"action": "accept"},
        {"action": "decline"},
        {"action": "cancel", "content": 5},
        {"action": "maybe"},
    ]
    for value in values:
        for control in (0x00, 0x04):
            yield bytes([control]) + json.dumps(value).encode()
    yield b"\x00" + deep(1000, "[")
    yield b"\x04" + b'{"action":"accept","content":{"name":' + deep(200, "[") + b"}}"
    fields: list[Any] = [
        form,
        {"properties": form["properties"], "required": ["name", "nobody"]},
        {"properties": form["properties"], "required": [5, {}]},
        {"a": {"type": "object", "properties": {}}},
        {"a": {"type": "string", "pattern": "x"}},
        {"a": {"type": "string", "minLength": -1, "format": "ipv4"}},
        {"a": {"type": "string", "enum": [1]}, "b": {"type": "string", "enumNames": ["x"]}},
        {"a": {"type": "string", "oneOf": [{"const": "a"}]}},
        {"a": {"type": "string", "enum": ["a"], "oneOf": [{"const": "a", "title": "A"}]}},
        {"a": {"type": "string", "default": 5, "title": 5}},
        {"a": {"type": "number", "minimum": "0"}, "b": {"type": "integer", "default": True}},
        {"a": {"type": "boolean", "default": "yes"}},
        {"a": {"type": "array", "items": {"type": "string"}}},
        {"a": {"type": "array", "items": {"type": "string", "enum": ["x"]}, "minItems": -1}},
        {
            "a": {
                "type": "array",
                "items": {"anyOf": [{"const": "x", "title": "X"}]},
                "default": [1],
            }
        },
        {"a": {"type": "array", "items": 5}},
        {"a": {"type": ["string", "null"]}},
        {"a": {"type": "null"}},
        {"a": {"$ref": "#/x"}},
        {"a": 5},
        {"a": {"type": "string", "maxLength": 1e3}},
        [],
        "x",
    ]
    for value in fields:
        yield b"\x01" + json.dumps(value).encode()
    urls = [
        "https://example.com/a?b#c",
        "http://localhost:8080/x",
        "http://app.localhost/x",
        "http://127.0.0.1/x",
        "http://[::1]:1/x",
        "http://example.com/x",
        "https://user:pw@example.com/",
        "https://@example.com/",
        "https:///path",
        "https://example.com:99999/",
        "https://[::1/",
        "javascript:alert(1)",
        "data:text/html,x",
        "file:///etc/passwd",
        "https://exa mple.com/",
        "https://example.com/\t",
        "HTTPS://EXAMPLE.COM/",
        "//example.com/",
        "",
    ]
    for url in urls:
        yield b"\x02" + json.dumps(url).encode()
    yield b"\x02" + b"\xff\xfe"
    yield b"\x02" + b"5"


# --- Issue 12: 2025-era HTTP sessions, WebSocket, the URL callback ---------------------


def http_sessions_seeds() -> Iterable[bytes]:
    init = request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    call = request(1, "tools/call", {"name": "weather"})
    meta = {m.wire.META_PROTOCOL_VERSION: targets.MODERN}
    modern = request(2, "tools/call", {"name": "w", "_meta": meta})
    bodies = [init, call, modern, note("notifications/initialized"), b"[1]\n", b"not json\n"]
    heads = [
        b"",
        b"Mcp-Session-Id: abc\nMCP-Protocol-Version: 2025-11-25\n",
        b"mcp-session-id: abc\nmcp-session-id: abd\n",
        b"Mcp-Session-Id: " + b"x" * 129 + b"\n",
        b"Mcp-Session-Id: a b\nMCP-Protocol-Version: 2025-06-18\nLast-Event-ID: 1-3\n",
        b"Mcp-Session-Id: \xff\xb2\nMCP-Protocol-Version: 1999-01-01\n",
        b"Mcp-Session-Id: s\nLast-Event-ID: " + b"9" * 65 + b"\n",
        b"Mcp-Session-Id: s\nLast-Event-ID: 0-1\nLast-Event-ID: 0-2\n",
        b"MCP-Protocol-Version: 2025-03-26\nLast-Event-ID: 1-\n",
        b"Mcp-Session-Id: abc\nLast-Event-ID: 1-1\n",
        b"Mcp-Session-Id: abc\nMCP-Protocol-Version: 1999-01-01\n",
    ]
    ops = [
        b"a\x00\x00\na\x01\x00\nl\x01\x00\nl\x01\x01\nlxxnope\nb\x00\x00\nx\x30\x00\nl\x00\x00\n"
        b"e\x00\x00\nd\x00\x01\na\x3f\x00\na\x3f\x00\na\x00\x00\n",
        b"o\no\nr\x01first\nr\x02second\nr\x00standalone\nG\x00\nG\x01\nc\x00\nf\x01\n"
        b"c\x00\nR1-1\nR0-0\nR2-99\nR-1\nR\xb2-1\nR1-\xb9\nR\xd9\xa1-1\nRabc\nR99-1\nc\x01\n",
        b"o\n"
        + b"".join(b"r\x01" + bytes([65 + i]) * (i * 8) + b"\n" for i in range(20))
        + b"G\x00\nG\x13\nc\x00\nc\x01\nf\x01\nG\x05\nc\x02\n",
        b"a\x00\x00\nb\x00\x00\nb\x00\x00\na\x00\x00\na\x3f\x00\ne\x3f\x00\na\x00\x00\n",
        # A finished stream whose events are dropped later; the standalone never finishes.
        b"o\nr\x01a\nf\x01\nf\x00\n" + (b"r\x00" + b"x" * 40 + b"\n") * 20 + b"G\x00\nc\x00\n",
    ]
    for body in bodies:
        for head in heads:
            for control in (b"\x00\x00", b"\x01\x21", b"\x06\xff"):
                yield control + body + head + b"\n" + ops[len(head) % len(ops)]
    for one in ops:
        for control in (b"\x00\x00", b"\x02\x10", b"\x0e\x3f", b"\x00\xf3"):
            yield control + call + b"Mcp-Session-Id: s\n\n" + one


#: (attempts in a row, then how the stream is cut)
CLIENT_SESSION_CONTROLS = (b"\x03\x00\x01\x3f\x05", b"\x00" + b"\x07" * 4, b"\x07" + b"\x3f" * 4)


def client_sessions_seeds() -> Iterable[bytes]:
    streams = [
        b"id: 1-1\nretry: 1500\ndata: {}\n\nid: 1-2\ndata: x\n\n",
        b"retry: 99999999\ndata: a\n\nid: a b\ndata: b\n\nid:\ndata: c\n\nid: 1-3\n\n",
        b"id: " + b"e" * 1025 + b"\ndata: big\n\nid: ok\nretry: 0\ndata: d\n\n",
        b"id: \xc3\xa9\ndata: x\n\nid: same\ndata: 1\n\nid: same\ndata: 2\n\n",
        b"data: no id\n\n: comment\n\n",
    ]
    ids = [b"abc", b"", b"a b", b"\xff\xfe", b"x" * 1024, b"x" * 1025, b"\x7f", b"!~"]
    for stream in streams:
        for sid in ids:
            for control in CLIENT_SESSION_CONTROLS:
                yield control + sid + b"\n" + stream


def websocket_seeds() -> Iterable[bytes]:
    _, to_client = converse(0, answer_inputs=True)
    messages = to_client.splitlines()[:6]
    frames = [b"F" + one for one in messages]
    halves = [b"f" + one[: len(one) // 2] + b"\x00F" + one[len(one) // 2 :] for one in messages]
    extra = [
        b"Smcp",
        b"Smcp.auth.token, mcp",
        b"SMCP,  mcp-x",
        b"S",
        b"smcp",
        b"sMCP",
        b"s",
        b"C\x03\xe8bye",
        b"C\x03\xf1too big",
        b"C\x0f\xa0app",
        b"C\x00\x01",
        b"C",
        b"C\x03\xe9" + "é".encode() * 70,
        b"F\xc3\xa9\xed\xa0\x80",
        b"B\x01\x02",
        b"Fafter",
    ]
    bodies = [b"\x00".join(frames), b"\x00".join(halves), b"\x00".join(extra)]
    for body in bodies:
        for control in (b"\xff\x01", b"\xff\x00", b"\x10\x01", b"\x00\x00"):
            yield control + body
    yield b"\x08\x01" + b"\x00".join([b"fabcd", b"fefgh", b"Fi", b"Fok"])


def url_callback_seeds() -> Iterable[bytes]:
    queries = [
        b"state=PREFIX&code=abc",
        b"state=PREFIX.xyz&code=abc&iss=https%3A%2F%2Fp",
        b"state=PREFIX&error=access_denied&error_description=no",
        b"state=PREFIX&error=server_error",
        b"state=PREFIX",
        b"code=abc",
        b"state=PREFIX&state=PREFIX&code=1",
        b"state=PREFIX&code=1&code=2",
        b"state=short&code=1",
        b"state=" + b"A" * 32 + b"&code=1",
        b"state=PREFIX&code=%ff%fe",
        b"state=PREFIX&code=\xc3\xa9",
        b"state=PREFIX&%zz=1&code",
        b"state=PREFIX;code=1",
        b"state=PREFIX&code=" + b"x" * 6900,
        b"",
    ]
    providers = [
        b"",
        b"https://provider.example/authorize?client_id=c&state=xyz&redirect_uri=https://a/b\n",
        b"https://provider.example/authorize?state=a&state=b\n",
        b"https://provider.example/a?x=1#frag\n",
        b"http://127.0.0.1:9/authorize?response_type=code\n",
        b"http://evil.example/\n",
        b"https://p.example/?state=" + b"s" * 1025 + b"\n",
    ]
    for number, provider in enumerate(providers):
        for query in queries if number < 2 else queries[:-2]:  # (the long one twice only)
            for control in (0x03, 0x23, 0x2F, 0x43, 0x83) + ((0x00, 0x02, 0x13) * (number < 2)):
                yield bytes([control]) + provider + query


def tasks_seeds() -> Iterable[bytes]:
    """The SEP's own examples, each through every reader (and mutated), and walks of the
    status machine."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
    import sep2663_examples as ex

    examples = [
        value for name, value in vars(ex).items() if name.isupper() and isinstance(value, dict)
    ]
    examples += [
        {**ex.FLOW_UPDATE_PARAMS, "requestState": "s"},
        {"taskId": 7},
        {"taskId": "t", "inputResponses": None},
        {**ex.CREATE_TASK_RESULT, "ttlMs": 1.5},
        {**ex.CREATE_TASK_RESULT, "ttlMs": True},
        {**ex.FLOW_COMPLETED, "error": {"code": 1, "message": "m"}},
    ]
    for reader in range(6):
        for example in examples:
            body = json.dumps(example, separators=(",", ":")).encode()
            yield bytes([reader]) + body
            variants = mutations(body)
            for mutated in (variants[0], variants[5], variants[8], variants[9]):
                yield bytes([reader]) + mutated
    for walk in (b"\x00\x01\x02", b"\x04\x04\x00", b"\x00\x03\x01\x04", bytes(range(20))):
        yield bytes([6]) + walk

    # The poller: a server's polls, each after what the app does (0: answer the asks).
    def poll(value: dict[str, Any], action: int = 0) -> bytes:
        mine = {**value, "taskId": "t1"}
        return bytes([action]) + json.dumps(mine, separators=(",", ":")).encode()

    working, asking = poll(ex.FLOW_WORKING), poll(ex.FLOW_INPUT_REQUIRED)
    completed = poll(ex.FLOW_COMPLETED)
    lives = [
        [working, asking, asking, working, completed],
        [asking, poll(ex.FLOW_INPUT_REQUIRED, 1), completed],
        [working, poll(ex.FLOW_WORKING, 2), completed],
        [working, poll(ex.FLOW_WORKING, 3), completed],
        [completed, working],  # a terminal status that changes
        [poll({**ex.FLOW_WORKING, "taskId": "other"}), completed],
        [working, bytes([0]) + b'{"code":-32602,"message":"unknown task"}'],
        [asking, poll({**ex.FLOW_COMPLETED, "result": {"resultType": "input_required"}})],
    ]
    for life in lives:
        yield bytes([7]) + b"\n".join(life)


SEEDS = {
    "framing": framing_seeds,
    "sse": sse_seeds,
    "codec": codec_seeds,
    "convert": convert_seeds,
    "headers": headers_seeds,
    "client": client_seeds,
    "server": server_seeds,
    "legacy_shim": legacy_shim_seeds,
    "engine": engine_seeds,
    "schemas": schemas_seeds,
    "http_sessions": http_sessions_seeds,
    "client_sessions": client_sessions_seeds,
    "websocket": websocket_seeds,
    "url_callback": url_callback_seeds,
    "tasks": tasks_seeds,
}


def main(names: list[str] | None = None) -> None:
    for name, make in SEEDS.items():
        if names and name not in names:
            continue
        folder = CORPUS / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        seeds = list(dict.fromkeys(make()))
        for seed in seeds:
            # Named by content, as libFuzzer names what it finds.
            (folder / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
        print(f"{name:12} {len(seeds):4} seeds, largest {max(map(len, seeds))} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
