"""The rules of one 2026-07-28 Streamable HTTP POST (mrtr_core.http._post): what is
refused before the body is read, the status of a JSON error, the error body."""

from __future__ import annotations

import json

import pytest

import mrtr_core as m
from mrtr_core.http._post import PostRefusal, post_refusal

LIMIT = 100


@pytest.mark.parametrize(
    ("fields", "refusal"),
    [
        ({}, None),  # no Accept takes both; no Content-Type is taken as JSON
        ({"accept": ["application/json"], "content-type": ["application/json"]}, None),
        ({"content-type": ["Application/JSON; charset=utf-8"]}, None),
        ({"content-length": [str(LIMIT)]}, None),  # at the bound
        ({"content-length": ["oops"]}, None),  # not a length: the body read bounds it
        ({"accept": ["text/html"]}, (406, "Accept must include")),
        ({"content-type": ["application/json", "application/json"]}, (400, "more than one")),
        ({"content-type": ["text/plain"]}, (415, "Content-Type must be")),
        ({"content-length": [str(LIMIT + 1)]}, (413, f"larger than {LIMIT} bytes")),
    ],
)
def test_post_refusal(fields: dict[str, list[str]], refusal: tuple[int, str] | None) -> None:
    found = post_refusal(fields, LIMIT)
    if refusal is None:
        assert found is None
    else:
        assert isinstance(found, PostRefusal)
        assert found.status == refusal[0] and refusal[1] in found.message
        assert found.code == m.ErrorCode.INVALID_REQUEST


def test_body_too_large_names_the_bound() -> None:
    assert m.http._post.body_too_large(7) == PostRefusal(413, "body larger than 7 bytes")


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (m.ErrorCode.METHOD_NOT_FOUND, 404),
        (m.ErrorCode.PARSE_ERROR, 400),
        (m.ErrorCode.HEADER_MISMATCH, 400),
        (m.ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, 400),
        (m.ErrorCode.INTERNAL_ERROR, 500),
        (-1, 200),  # an application's own error code: the answer itself is fine
    ],
)
def test_status_for_error(code: int, status: int) -> None:
    assert m.http.status_for_error(code) == status


def test_error_body_is_a_json_rpc_error_without_id() -> None:
    body = json.loads(m.http._post.error_body("no", -32600, data={"why": 1}))
    error = {"code": -32600, "message": "no", "data": {"why": 1}}
    assert body == {"jsonrpc": "2.0", "error": error}  # (a null id is left out)


def test_sse_headers_and_removed_methods() -> None:
    assert dict(m.http._post.SSE_RESPONSE_HEADERS)["content-type"] == "text/event-stream"
    assert dict(m.http._post.SSE_RESPONSE_HEADERS)["x-accel-buffering"] == "no"
    assert {"ping", "initialize"} == m.http._post.REMOVED_METHODS


def test_an_empty_body_is_a_parse_error() -> None:
    for body in (b"", b" \r\n\t"):
        refusal = m.http._post.body_refusal(body)
        assert refusal is not None and (refusal.status, refusal.code) == (400, -32700)
        assert "empty body" in refusal.message
    assert m.http._post.body_refusal(b"{}") is None


def test_removed_methods_get_method_not_found() -> None:
    reply = m.http._post.removed_method_reply(m.Request(id=4, method="initialize"))
    assert reply is not None and reply.id == 4
    assert reply.error.code == m.ErrorCode.METHOD_NOT_FOUND
    assert "initialize is not a 2026-07-28 method" in reply.error.message
    assert m.http._post.removed_method_reply(m.Request(id=4, method="tools/list")) is None


def test_listen_closure_names_the_subscription() -> None:
    closure = m.http._post.listen_closure("sub-1")
    assert closure == {"_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"}}
    assert m.http._post.LISTEN_METHOD == "subscriptions/listen"


def test_parse_posted_gives_the_value_or_none_for_what_is_not_json() -> None:
    assert m.http._post.parse_posted(b'{"jsonrpc":"2.0","id":1,"method":"x"}') == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "x",
    }
    assert m.http._post.parse_posted(b"{oops") is None  # the connection reports it from the bytes


CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "greet", "arguments": {"region": "eu"}},
}
ASKED: list[str] = []


def params_of(tool: str) -> dict[str, list[str]]:
    ASKED.append(tool)
    return {"Region": ["region"]}


def test_header_refusal_passes_headers_that_mirror_the_body() -> None:
    ASKED.clear()
    fields = {"mcp-method": ["tools/call"], "mcp-name": ["greet"], "mcp-param-region": ["eu"]}
    assert m.http._post.header_refusal(fields, CALL, params_of) is None
    assert ASKED == ["greet"]  # a tool's own header params are asked for its calls only
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert m.http._post.header_refusal({"mcp-method": ["ping"]}, ping, params_of) is None
    assert ASKED == ["greet"]
    # a body that is not an object is the connection's to refuse, not the headers'
    assert m.http._post.header_refusal({}, None, params_of) is None
    assert m.http._post.header_refusal({}, [CALL], params_of) is None


def test_header_refusal_answers_a_mismatch_under_the_request_id() -> None:
    fields = {"mcp-method": ["tools/call"], "mcp-name": ["greet"], "mcp-param-region": ["us"]}
    refused = m.http._post.header_refusal(fields, CALL, params_of)
    assert isinstance(refused, m.http._post.HeaderRefusal)
    assert refused.status == 400
    assert refused.reply.id == 7
    assert refused.reply.error.code == m.ErrorCode.HEADER_MISMATCH
    assert "Mcp-Param-Region" in refused.reply.error.message
