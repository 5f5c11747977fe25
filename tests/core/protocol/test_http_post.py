"""The rules of one 2026-07-28 Streamable HTTP POST (mrtr_core.protocol._http): what is
refused before the body is read, the status of a JSON error, the error body."""

from __future__ import annotations

import json

import pytest

import mrtr_core as m
from mrtr_core.protocol import PostRefusal, post_refusal

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
        assert found.code == m.protocol.INVALID_REQUEST


def test_body_too_large_names_the_bound() -> None:
    assert m.protocol.body_too_large(7) == PostRefusal(413, "body larger than 7 bytes")


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (m.protocol.METHOD_NOT_FOUND, 404),
        (m.protocol.PARSE_ERROR, 400),
        (m.protocol.HEADER_MISMATCH, 400),
        (m.protocol.UNSUPPORTED_PROTOCOL_VERSION, 400),
        (m.protocol.INTERNAL_ERROR, 500),
        (-1, 200),  # an application's own error code: the answer itself is fine
    ],
)
def test_status_for_error(code: int, status: int) -> None:
    assert m.protocol.status_for_error(code) == status


def test_error_body_is_a_json_rpc_error_without_id() -> None:
    body = json.loads(m.protocol.error_body("no", -32600, data={"why": 1}))
    error = {"code": -32600, "message": "no", "data": {"why": 1}}
    assert body == {"jsonrpc": "2.0", "error": error}  # (a null id is left out)


def test_sse_headers_and_removed_methods() -> None:
    assert dict(m.protocol.SSE_RESPONSE_HEADERS)["content-type"] == "text/event-stream"
    assert dict(m.protocol.SSE_RESPONSE_HEADERS)["x-accel-buffering"] == "no"
    assert {"ping", "initialize"} == m.protocol.REMOVED_METHODS


def test_an_empty_body_is_a_parse_error() -> None:
    for body in (b"", b" \r\n\t"):
        refusal = m.protocol.body_refusal(body)
        assert refusal is not None and (refusal.status, refusal.code) == (400, -32700)
        assert "empty body" in refusal.message
    assert m.protocol.body_refusal(b"{}") is None


def test_removed_methods_get_method_not_found() -> None:
    reply = m.protocol.removed_method_reply(m.Request(id=4, method="initialize"))
    assert reply is not None and reply.id == 4
    assert reply.error.code == m.protocol.METHOD_NOT_FOUND
    assert "initialize is not a 2026-07-28 method" in reply.error.message
    assert m.protocol.removed_method_reply(m.Request(id=4, method="tools/list")) is None


def test_listen_closure_names_the_subscription() -> None:
    closure = m.protocol.listen_closure("sub-1")
    assert closure == {"_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"}}
    assert m.protocol.LISTEN_METHOD == "subscriptions/listen"
