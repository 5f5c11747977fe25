"""Malformed requests, ~170 kinds, sent as raw bytes: each gets a clear answer, never a traceback.

Every kind is written by hand (h11's client would refuse to send most of them),
followed by the end of the client's output, so the server sees the whole of
what it will ever get.  The answer must be a 4xx whose body is a JSON-RPC
error (or a 2xx for the few that are in fact fine), or, for a request cut
short, a clean close; and nothing the server logs may carry a traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterator

import attrs
import pytest
import trio
from test_http_server import ACCEPT_BOTH, ENDPOINT, serving, tool_call

GOOD = json.dumps(tool_call("echo", {"text": "hi"})).encode()
MIRRORED = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n"


@attrs.frozen
class Kind:
    name: str
    data: bytes
    #: The statuses acceptable as its answer.
    statuses: frozenset[int] = attrs.field(converter=frozenset)
    #: A clean close without an answer is acceptable too (the request was cut short).
    may_close: bool = False


def post(
    body: bytes = GOOD,
    *,
    headers: str = "",
    length: str | None = "auto",
    version: str = "HTTP/1.1",
    method: str = "POST",
    target: str = "/mcp",
    host: str | None = "localhost",
    accept: str | None = ACCEPT_BOTH,
    content_type: str | None = "application/json",
    mirrored: bool = True,
) -> bytes:
    head = f"{method} {target} {version}\r\n"
    if host is not None:
        head += f"Host: {host}\r\n"
    if accept is not None:
        head += f"Accept: {accept}\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    if mirrored:
        head += MIRRORED
    if length == "auto":
        head += f"Content-Length: {len(body)}\r\n"
    elif length is not None:
        head += f"Content-Length: {length}\r\n"
    return (head + headers + "\r\n").encode() + body  # UTF-8: non-ASCII bytes on purpose


def chunked(chunks: bytes, headers: str = "") -> bytes:
    return post(chunks, length=None, headers="Transfer-Encoding: chunked\r\n" + headers)


BAD = frozenset({400})
CLIENT_ERRORS = frozenset(range(400, 500))


def kinds() -> Iterator[Kind]:
    def k(name: str, data: bytes, statuses: Collection[int] = BAD, may_close: bool = False) -> Kind:
        return Kind(name, data, statuses, may_close)

    # --- The request line ---
    for name, line in [
        ("garbage line", b"GARBAGE\r\n\r\n"),
        ("method only", b"POST\r\n\r\n"),
        ("no version", b"POST /mcp\r\n\r\n"),
        ("HTTP/2.0 version", b"POST /mcp HTTP/2.0\r\nHost: localhost\r\n\r\n"),
        ("HTTP/0.9 version", b"GET /mcp\r\n\r\n"),
        ("extra token", b"POST /mcp HTTP/1.1 extra\r\nHost: localhost\r\n\r\n"),
        ("double space", b"POST  /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("tab separated", b"POST\t/mcp\tHTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("binary junk", bytes(range(256)) + b"\r\n\r\n"),
        ("NUL bytes", b"\x00" * 64 + b"\r\n\r\n"),
        ("TLS hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40),
        ("bare LF line", b"POST /mcp HTTP/1.1\nHost: localhost\n\n"),
        ("version lower case", b"POST /mcp http/1.1\r\nHost: localhost\r\n\r\n"),
        ("version 1.2", b"POST /mcp HTTP/1.2\r\nHost: localhost\r\n\r\n"),
        ("version 9.9", b"POST /mcp HTTP/9.9\r\nHost: localhost\r\n\r\n"),
        ("method with slash", b"PO/ST /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("non-ASCII method", "PÖST /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()),
        ("space in target", b"POST /m cp HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("target with NUL", b"POST /mcp\x00 HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("only CRLFs", b"\r\n" * 50),
    ]:
        yield k(f"request line: {name}", line, CLIENT_ERRORS | {505}, may_close=True)
    yield k("target too long", post(target="/mcp?" + "a" * 70_000), {431, 400, 414})
    yield k("method too long", post(method="P" * 70_000), {431, 400})
    for method in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "BREW", "post"):
        yield k(f"method {method}", post(method=method), {405, 400})
    for target in ("mcp", "*", "//mcp", "/mcp/", "/MCP", "/mcp%00", "/%zz", "/mcp#frag"):
        yield k(f"target {target!r}", post(target=target), {404, 400})
    yield k("absolute-form target", post(target="http://localhost/mcp"), {404})
    yield k("authority-form target", post(target="localhost:80"), {404})

    # --- Header fields ---
    for name, field in [
        ("no colon", "NoColon\r\n"),
        ("space before colon", "X-Bad : v\r\n"),
        ("empty name", ": v\r\n"),
        ("name with slash", "X/Bad: v\r\n"),
        ("name with NUL", "X\x00Bad: v\r\n"),
        ("value with NUL", "X-Bad: a\x00b\r\n"),
        ("value with bare CR", "X-Bad: a\rb\r\n"),
        ("name with non-ASCII", "X-Bäd: v\r\n"),
    ]:
        yield k(f"header {name}", post(headers=field))
    # RFC 9112, 5.2: unfolded (h11 does) or refused; either way answered.
    yield k("header obs-fold", post(headers="X-Folded: a\r\n b\r\n"), {200, 400})
    yield k("header value with DEL", post(headers="X-Bad: a\x7fb\r\n"), {200, 400})
    yield k("one huge header", post(headers=f"X-Filler: {'y' * 70_000}\r\n"), {431})
    yield k(
        "header bomb (5000 small fields)",
        post(headers="".join(f"X-H{i}: v\r\n" for i in range(5000))),
        {431},
    )
    yield k(
        "many fields under the limit",
        post(headers="".join(f"X-H{i}: v\r\n" for i in range(200))),
        {200},
    )
    yield k("value of non-ASCII bytes", post(headers="X-Name: Zürich\r\n"), {200})

    # --- Host ---
    yield k("no Host on HTTP/1.1", post(host=None), BAD)
    yield k("two Hosts", post(headers="Host: evil.example\r\n"), BAD)
    yield k("two equal Hosts", post(headers="Host: localhost\r\n"), BAD)
    yield k("Host and HOST", post(headers="HOST: localhost\r\n"), BAD)
    for host in ("", "evil.example", "[::1", "%%%", "local host", "evil.example:80"):
        yield k(f"Host {host!r}", post(host=host), {400, 403})
    yield k("Host with a port out of range", post(host="localhost:99999999"), {200, 400, 403})
    yield k("no Host on HTTP/1.0", post(host=None, version="HTTP/1.0"), {200})

    # --- Origin ---
    for origin in ("null", "http://[", "%%%", "http://evil.example", "file://", "http://", ""):
        yield k(f"Origin {origin!r}", post(headers=f"Origin: {origin}\r\n"), {403})
    yield k(
        "two Origins, the good one first",
        post(headers="Origin: http://localhost\r\nOrigin: http://evil.example\r\n"),
        {403},
    )
    yield k(
        "two Origins, the bad one first",
        post(headers="Origin: http://evil.example\r\nOrigin: http://localhost\r\n"),
        {403},
    )
    yield k("X-Forwarded-Host garbage", post(headers="X-Forwarded-Host: ,,,\r\n"), {200})

    # --- Accept and Content-Type ---
    for accept in (
        "text/html",
        "application/json;q=0",
        "application/json;q=abc",
        ";;;",
        "*/*;q=-1",
    ):
        yield k(f"Accept {accept!r}", post(accept=accept), {406})
    yield k("Accept of a thousand items", post(accept=",".join(["a/b"] * 1000)), {406})
    for ctype in ("text/plain", "application/xml", "", ";", "application/json-seq"):
        yield k(f"Content-Type {ctype!r}", post(content_type=ctype), {415})
    yield k("two Content-Types", post(headers="Content-Type: application/json\r\n"), BAD)
    yield k("no Content-Type", post(content_type=None), {200})
    yield k(
        "Content-Type with charset", post(content_type="application/json; charset=utf-8"), {200}
    )

    # --- Content-Length ---
    for length in ("-1", "+5", "0x10", "5, 5", "abc", " ", "1e3", "٣"):
        yield k(f"Content-Length {length!r}", post(length=length), BAD)
    for length in (str(2**63), str(10**12), str(4 * 1024 * 1024 + 1)):
        yield k(f"absurd Content-Length {length}", post(length=length), {413})
    yield k("Content-Length of 32 digits", post(length="9" * 32), {400, 413})
    yield k(
        "two different Content-Lengths",
        post(headers=f"Content-Length: {len(GOOD) + 1}\r\n"),
        BAD,
    )
    yield k("Content-Length past the body", post(length=str(len(GOOD) + 50)), BAD, may_close=True)
    yield k("Content-Length short of the body", post(length=str(len(GOOD) - 5)), BAD)
    yield k("Content-Length 0", post(b"", length="0"), BAD)
    yield k("no Content-Length, no body", post(b"", length=None), BAD)
    yield k("body over max_body_size", post(b"[" + b" " * 5_000_000 + b"]"), {413})

    # --- Transfer-Encoding ---
    yield k("chunked: fine", chunked(b"%x\r\n%s\r\n0\r\n\r\n" % (len(GOOD), GOOD)), {200})
    for name, body in [
        ("size not hex", b"zz\r\nabc\r\n0\r\n\r\n"),
        ("size too large", b"ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
        ("negative size", b"-5\r\nabcde\r\n0\r\n\r\n"),
        ("no CRLF after data", b"3\r\nabcXX0\r\n\r\n"),
        ("size with spaces", b"3 3\r\nabc\r\n0\r\n\r\n"),
        ("bad extension", b"3;\x00\r\nabc\r\n0\r\n\r\n"),
        ("empty size", b"\r\nabc\r\n0\r\n\r\n"),
        ("bad trailer", b"0\r\nNoColon\r\n\r\n"),
        ("data longer than size", b"2\r\nabc\r\n0\r\n\r\n"),
    ]:
        yield k(f"chunked: {name}", chunked(body), BAD, may_close=True)
    yield k("chunked: cut short", chunked(b"10\r\nabc"), BAD, may_close=True)
    yield k(
        "chunked: over max_body_size",
        chunked(b"".join(b"ffff\r\n" + b" " * 0xFFFF + b"\r\n" for _ in range(80)) + b"0\r\n\r\n"),
        {413},
    )
    yield k("chunked: empty", chunked(b"0\r\n\r\n"), BAD)
    yield k("chunked: trailer fields", chunked(b"0\r\nX-T: v\r\n\r\n"), BAD)
    for te in ("gzip", "chunked, chunked", "identity", "gzip, chunked", "chunked;q=1", "x" * 100):
        yield k(
            f"Transfer-Encoding {te!r}",
            post(length=None, headers=f"Transfer-Encoding: {te}\r\n"),
            {501, 400},
            may_close=True,
        )
    yield k(
        "Transfer-Encoding with Content-Length",
        post(headers="Transfer-Encoding: chunked\r\n"),
        BAD,
        may_close=True,
    )
    yield k(
        "Transfer-Encoding on HTTP/1.0",
        post(length=None, version="HTTP/1.0", headers="Transfer-Encoding: chunked\r\n"),
        {400, 501},
        may_close=True,
    )
    yield k(
        "Expect: 100-continue, too large",
        post(length=str(10**9), headers="Expect: 100-continue\r\n"),
        {413},
    )
    yield k("Expect: something else", post(headers="Expect: teapot\r\n"), {200, 417})

    # --- The body ---
    bodies: list[tuple[str, bytes, frozenset[int]]] = [
        ("not JSON", b"{not json", BAD),
        ("whitespace", b"   \n\t", BAD),
        ("invalid UTF-8", b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}', BAD),
        ("UTF-16", json.dumps(tool_call("echo")).encode("utf-16"), BAD),
        ("a BOM", b"\xef\xbb\xbf" + GOOD, {200, 400}),
        ("a batch", b"[" + GOOD + b"," + GOOD + b"]", BAD),
        ("a number", b"42", BAD),
        ("a string", b'"tools/call"', BAD),
        ("null", b"null", BAD),
        ("deep nesting", b"[" * 100_000 + b"]" * 100_000, BAD),
        ("deep object", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, BAD),
        ("NaN", b'{"jsonrpc":"2.0","id":NaN,"method":"tools/call"}', BAD),
        ("huge number", b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"x"}', BAD),
        ("trailing garbage", GOOD + b"xyz", BAD),
        ("two messages", GOOD + GOOD, BAD),
        ("a response", b'{"jsonrpc":"2.0","id":1,"result":{}}', BAD),
        ("an error response", b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}', BAD),
        ("no jsonrpc", b'{"id":1,"method":"tools/call","params":{}}', BAD),
        ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{}}', BAD),
        ("id an object", b'{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{}}', BAD),
        ("id a float", b'{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{}}', BAD),
        ("method a number", b'{"jsonrpc":"2.0","id":1,"method":5,"params":{}}', BAD),
        ("params a list", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}', BAD),
        ("params a string", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}', BAD),
        (
            "_meta a list",
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":[]}}',
            BAD,
        ),
        ("duplicate keys", b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call"}', BAD),
        ("control chars", b'{"jsonrpc":"2.0","id":1,"method":"a\x01b"}', BAD),
        ("lone surrogate", b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}', BAD),
        ("empty object", b"{}", BAD),
    ]
    for name, body, statuses in bodies:  # with and without the headers of a tools/call
        yield k(f"body: {name}", post(body), statuses | {404})
        yield k(f"body: {name}, no headers", post(body, mirrored=False), statuses | {404})

    # --- Headers that mirror the body ---
    for name, fields in [
        ("bad base64", "Mcp-Name: =?base64?!!!?=\r\n"),
        ("empty base64", "Mcp-Name: =?base64??=\r\n"),
        ("base64 of bad UTF-8", "Mcp-Name: =?base64?/w==?=\r\n"),
        ("version garbage", "MCP-Protocol-Version: \x01\x02\r\n"),
    ]:
        yield k(f"mirrored: {name}", post(headers=fields), BAD)
    region = json.dumps(tool_call("headers", {"region": "eu"})).encode()
    for name, value in [("bad base64", "=?base64?====?="), ("wrong value", "us"), ("empty", "")]:
        fields = MIRRORED.replace("Mcp-Name: echo", "Mcp-Name: headers")
        fields += f"Mcp-Param-Region: {value}\r\n"
        yield k(f"mirrored: Mcp-Param {name}", post(region, mirrored=False, headers=fields), BAD)
    no_mirror = post(mirrored=False)
    yield k("mirrored: none at all", no_mirror, BAD)
    for name, header in [
        ("version mismatch", "MCP-Protocol-Version: 2025-06-18\r\n"),
        ("method mismatch", "Mcp-Method: tools/list\r\n"),
        ("name mismatch", "Mcp-Name: other\r\n"),
    ]:
        yield k(f"mirrored: {name}", post(mirrored=False, headers=header + MIRRORED), BAD)

    # --- Connection management ---
    yield k("HTTP/1.0", post(version="HTTP/1.0"), {200})
    yield k(
        "HTTP/1.0 keep-alive", post(version="HTTP/1.0", headers="Connection: keep-alive\r\n"), {200}
    )
    yield k("Connection: close", post(headers="Connection: close\r\n"), {200})
    yield k("Connection garbage", post(headers="Connection: \x01, ,,\r\n"), {200, 400})
    yield k(
        "Upgrade: websocket",
        post(headers="Upgrade: websocket\r\nConnection: Upgrade\r\n"),
        {200, 400, 501},
        may_close=True,
    )
    yield k("pipelined pair", post() + post(), {200})
    yield k("pipelined garbage after", post() + b"GARBAGE\r\n\r\n", {200})
    yield k(
        "empty POST, Connection: close",
        post(b"", length=None, headers="Connection: close\r\n"),
        BAD,
    )
    yield k("empty POST, HTTP/1.0", post(b"", length=None, version="HTTP/1.0"), BAD)
    yield k("HEAD", post(b"", method="HEAD", length=None), {405})
    yield k("HEAD elsewhere", post(b"", method="HEAD", target="/x", length=None), {404})
    yield k("HEAD with a body", post(method="HEAD"), {405})
    yield k("nothing at all", b"", frozenset(), may_close=True)
    yield k("a head cut short", b"POST /mcp HTTP/1.1\r\nHost: loc", {400}, may_close=True)


KINDS = list(kinds())


@attrs.frozen
class Answer:
    status: int | None
    content_type: str | None
    body: bytes


def parse(data: bytes) -> list[Answer]:
    """The responses in ``data`` (HEAD-less framing: by Content-Length), in order."""
    answers = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"an incomplete response: {data[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        length = int(fields.get("content-length", "0"))
        if status == 100:
            length = 0
        answers.append(Answer(status, fields.get("content-type"), rest[:length]))
        data = rest[length:]
    return answers


async def send_raw(host: str, port: int, data: bytes, *, head_request: bool = False) -> bytes:
    stream = await trio.open_tcp_stream(host, port)
    received = b""
    async with stream:
        try:
            await stream.send_all(data)
            await stream.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the server answered and closed before taking it all
        try:
            while chunk := await stream.receive_some(65536):
                received += chunk
        except trio.BrokenResourceError:
            pass
    return received


@pytest.fixture
def server_log() -> Iterator[list[logging.LogRecord]]:
    """Every record the HTTP server logs meanwhile."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("mrtr")  # every logger of the tree (docs/transports.md)
    handler = Keep(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def assert_no_traceback(records: list[logging.LogRecord]) -> None:
    broken = [r for r in records if r.exc_info is not None or r.levelno >= logging.ERROR]
    assert not broken, [r.getMessage() for r in broken]


@ENDPOINT
async def test_every_malformed_request_gets_a_clear_answer(
    server_log: list[logging.LogRecord], kind: str
) -> None:
    kind_of_server = kind
    assert len(KINDS) >= 150
    assert len({kind.name for kind in KINDS}) == len(KINDS)
    outcomes: dict[str, bytes] = {}
    with trio.fail_after(60):
        options = {"body_timeout": 5.0, "max_body_size": 4 * 1024 * 1024}
        if kind == "mrtr":
            options["head_timeout"] = 5.0  # (a connection's bound: the host's)
        async with serving(**options, kind=kind) as served:
            limit = trio.CapacityLimiter(16)

            async def one(kind: Kind) -> None:
                async with limit:
                    outcomes[kind.name] = await send_raw(served.host, served.port, kind.data)

            async with trio.open_nursery() as nursery:
                for kind in KINDS:
                    nursery.start_soon(one, kind)
    wrong = {}
    for kind in KINDS:
        answers = [a for a in parse(outcomes[kind.name]) if a.status != 100]
        if not answers:
            # hypercorn's trio worker, writing the endpoint's early 413 while it handles the
            # client's end of input mid-body, can fail its own write (BusyResourceError, a
            # race) and close: the connection is the server's, not the endpoint's.
            host_closes = kind_of_server != "mrtr" and kind.name.startswith("absurd")
            if not (kind.may_close or host_closes):
                wrong[kind.name] = "closed without an answer"
            continue
        first = answers[0]
        statuses = kind.statuses
        if kind_of_server != "mrtr" and kind.name == "method post":
            statuses = frozenset({200})  # an ASGI scope's method is uppercased (the spec's)
        if first.status not in statuses:
            wrong[kind.name] = f"{first.status}: {first.body[:200]!r}"
            continue
        for answer in answers:
            if answer.body:  # every error body is a JSON-RPC message
                assert answer.content_type == "application/json", (kind.name, answer)
                message = json.loads(answer.body)
                assert message["jsonrpc"] == "2.0", (kind.name, message)
                if answer.status is not None and answer.status >= 400:
                    assert message["error"]["message"], (kind.name, message)
    assert not wrong, "\n".join(f"{name}: {what}" for name, what in wrong.items())
    assert_no_traceback(server_log)
