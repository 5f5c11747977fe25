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


def converse(scenario: int, *, answer_inputs: bool) -> tuple[bytes, bytes]:
    """The client target's setup against the server target's app, until both are quiet.

    Returns (what the client wrote from the start, what the server wrote after the
    client's setup); the first is a server seed, the second a client seed.
    """
    client = targets.client_setup(scenario, "lines", answer_inputs=answer_inputs)
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
    for scenario in range(3):
        for answer in (0, 1):
            _, to_client = converse(scenario, answer_inputs=bool(answer))
            for framing in (0x00, 0x80):
                yield bytes([scenario | framing, answer | 0x08]) + to_client
            yield bytes([scenario, answer | 0x02 | 0x04]) + to_client  # cancel, break a leg
            yield bytes([scenario | 0x40, answer | 0x08 | 0x10 | 0x20]) + to_client  # timers
            yield bytes([scenario, answer | 0x40]) + to_client  # parsed messages
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
    bodies = [
        result(leg, done),
        result(leg, ask_all),
        result(leg, {"resultType": "input_required", "inputRequests": {"u": url}}),
        result(leg, {"resultType": "input_required", "requestState": "only"}),
        result(leg, {"resultType": "input_required"}),
        result(leg, {"resultType": "input_required", "inputRequests": {}}),
        result(leg, {"resultType": "input_required", "inputRequests": {"x": {"method": "nope"}}}),
        result(leg, {"resultType": "complete", **done}),
        result(leg, {"resultType": "other"}),
        error(leg, -32602, "bad params"),
        error(leg, -32601, "no such method"),
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
    for control in (b"\x00\x00", b"\x00\x01", b"\x80\x01", b"\x00\x07"):
        yield control + b"".join(bodies)
    for body in bodies:
        yield b"\x00\x01" + body
        yield b"\x00\x09" + result(legs[1], ask_all) + result(legs[2], done) + body
    for data in mutations(result(leg, ask_all)) + deep_messages():
        yield b"\x00\x01" + data
    # The 2025 handshake by hand: an initialize result, then the legs.
    init = {
        "protocolVersion": targets.LEGACY,
        "capabilities": {"tools": {}, "logging": {}},
        "serverInfo": targets.SERVER_INFO,
        "instructions": "hi",
    }
    for scenario in (1, 2):
        boot = targets.client_setup(scenario, "lines", answer_inputs=False)
        (first,) = boot.conn.outstanding
        fallback = error(first, -32601, "no server/discover") if scenario == 1 else b""
        yield bytes([scenario, 1]) + fallback + result(first, init) + result(first + 1, init)
        yield bytes([scenario, 1]) + result(first, {"protocolVersion": "1999-01-01"})
        yield bytes([scenario, 1]) + error(first, -32602, "Unsupported protocol version")


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


def server_seeds() -> Iterable[bytes]:
    for scenario in range(3):
        for answer in (False, True):
            to_server, _ = converse(scenario, answer_inputs=answer)
            for control in (0x40, 0x00, 0xC0, 0x60, 0x50):
                yield bytes([control]) + to_server
            for data in mutations(to_server.split(b"\n")[0]):
                yield b"\x40" + data
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
    yield b"\x40" + b"".join(bodies)
    yield b"\xc0" + b"".join(bodies)
    yield b"\x10" + b"".join(bodies)
    for body in bodies:
        yield b"\x40" + body
    for data in deep_messages():
        yield b"\x40" + data
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
            yield b"\x40" + head + extra + tail


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
        m.wire.encode_sse(text.decode(), id=str(i), event="message" if i % 2 else None)
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
    yield b"\n\n\n" + json.dumps({**body, "params": {"uri": "r", "name": 5}}).encode()
    yield deep(1000, "{") + b"\n\n\n{}"


SEEDS = {
    "framing": framing_seeds,
    "sse": sse_seeds,
    "codec": codec_seeds,
    "convert": convert_seeds,
    "headers": headers_seeds,
    "client": client_seeds,
    "server": server_seeds,
    "legacy_shim": legacy_shim_seeds,
}


def main() -> None:
    for name, make in SEEDS.items():
        folder = CORPUS / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        seeds = list(dict.fromkeys(make()))
        for seed in seeds:
            # Named by content, as libFuzzer names what it finds.
            (folder / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
        print(f"{name:12} {len(seeds):4} seeds, largest {max(map(len, seeds))} bytes")


if __name__ == "__main__":
    main()
