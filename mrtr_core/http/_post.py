"""Streamable HTTP (2026-07-28), the rules of one POST that do not depend on the server.

Every server of the endpoint (the trio one, the ASGI one) asks these, so each
rule has one home:

* ``post_refusal``: what makes a POST unacceptable before its body is read
  (``Accept`` that takes neither JSON nor SSE: 406; more than one
  ``Content-Type``: 400; one that is not JSON: 415; a declared
  ``Content-Length`` over the bound: 413).  ``body_too_large`` is the 413 of a
  body that turns out longer than the bound as it is read.
* ``status_for_error``: the HTTP status of a JSON error answer, by JSON-RPC
  code (-32601 -> 404; the client's mistakes -> 400; -32603 -> 500; any
  other code, an application's error, -> 200).
* ``body_refusal``: an empty body (400, -32700).
* ``REMOVED_METHODS``: 2025-era methods a 2026-07-28 request may not call;
  ``removed_method_reply`` is the -32601 (404) that replaces what the
  connection would have answered for them.
* ``listen_closure``: the graceful end of a ``subscriptions/listen`` stream
  (a result whose ``_meta`` names the subscription), which a server sends at
  the stream's lifetime instead of cutting it.
* ``SSE_RESPONSE_HEADERS``: the headers of a request-scoped SSE stream (no
  caching, no proxy buffering).
* ``error_body``: the JSON-RPC error response (without id) every HTTP error
  carries, so a client always has a message to show.
* ``parse_posted`` and ``header_refusal``: a body is parsed once, and the headers
  that mirror it (``Mcp-Method``, ``Mcp-Name``, a tool's ``Mcp-Param-*``) are
  checked against that value before the connection takes it; a mismatch is a
  ``HeaderRefusal`` (-32020, 400) answered under the request's id.

The header mirrors (``check_request_headers``), ``Accept`` (``accepted_media``)
and the 2025-era test (``is_legacy_message``) have their own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .._errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    MrtrError,
)
from ..wire._codec import default_codec, encode_message
from ..wire._model import ErrorObject, ErrorResponse, Request, RequestId, error_response
from ._headers import (
    HeaderMismatch,
    HeaderParams,
    ReceivedHeaders,
    accepted_media,
    called_tool,
    check_request_headers,
)

__all__ = [
    "LISTEN_METHOD",
    "REMOVED_METHODS",
    "SUBSCRIPTION_ID",
    "body_refusal",
    "listen_closure",
    "removed_method_reply",
    "SSE_RESPONSE_HEADERS",
    "STATUS_FOR_CODE",
    "HeaderRefusal",
    "PostRefusal",
    "header_refusal",
    "parse_posted",
    "body_too_large",
    "error_body",
    "post_refusal",
    "status_for_error",
]

#: The HTTP status of a JSON error answer, by JSON-RPC code (any other code: 200).
STATUS_FOR_CODE = {
    METHOD_NOT_FOUND: 404,
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    INTERNAL_ERROR: 500,
}

#: 2025-era methods with no place on a 2026-07-28 endpoint.
REMOVED_METHODS = frozenset({"ping", "initialize"})
#: The long-lived request of 2026-07-28, and the ``_meta`` key of its notifications
#: and of its final result.
LISTEN_METHOD = "subscriptions/listen"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

#: The headers of a request-scoped SSE response (lower-case names).
SSE_RESPONSE_HEADERS = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
)


def status_for_error(code: int) -> int:
    """The HTTP status of a JSON answer carrying the JSON-RPC error ``code``."""
    return STATUS_FOR_CODE.get(code, 200)


def error_body(message: str, code: int, data: Any = None) -> bytes:
    """A JSON-RPC error response without id (the request was not read, or not readable)."""
    error = ErrorResponse(id=None, error=ErrorObject(code=code, message=message, data=data))
    return encode_message(error)


@attrs.frozen
class PostRefusal:
    """An HTTP refusal of a POST: its status and the message of its JSON-RPC error."""

    status: int
    message: str
    code: int = INVALID_REQUEST


def body_too_large(max_body_size: int) -> PostRefusal:
    """The 413 of a body longer than ``max_body_size`` bytes."""
    return PostRefusal(413, f"body larger than {max_body_size} bytes")


def post_refusal(received: ReceivedHeaders, max_body_size: int) -> PostRefusal | None:
    """Why a POST with these headers is refused before its body is read, or ``None``.

    ``received``: lower-case name -> values (``header_fields``).
    """
    json_ok, sse_ok = accepted_media(received.get("accept", ()))
    if not (json_ok or sse_ok):
        return PostRefusal(406, "Accept must include application/json or text/event-stream")
    content_types = received.get("content-type", ())
    if len(content_types) > 1:
        return PostRefusal(400, "more than one Content-Type header: send one")
    if content_types and content_types[0].split(";")[0].strip().lower() != "application/json":
        return PostRefusal(415, "Content-Type must be application/json")
    declared = received.get("content-length", ())
    if declared and declared[0].isdigit() and int(declared[0]) > max_body_size:
        return body_too_large(max_body_size)
    return None


def body_refusal(body: bytes) -> PostRefusal | None:
    """Why a POST's body is refused before it is parsed (empty: -32700), or ``None``."""
    if not body.strip():
        return PostRefusal(400, "empty body: expected one JSON-RPC message", PARSE_ERROR)
    return None


def removed_method_reply(request: Request) -> ErrorResponse | None:
    """The -32601 for a 2025-era method (``ping``, ``initialize``) in a 2026-07-28
    request, whatever the connection answered it with; ``None`` for any other."""
    if request.method not in REMOVED_METHODS:
        return None
    removed = MrtrError(f"{request.method} is not a 2026-07-28 method", code=METHOD_NOT_FOUND)
    return error_response(request.id, removed)


def listen_closure(subscription_id: RequestId) -> dict[str, Any]:
    """The result that ends a ``subscriptions/listen`` stream gracefully: the client
    opens a new one (a stream cut without it looks like a failure)."""
    return {"_meta": {SUBSCRIPTION_ID: subscription_id}}


def parse_posted(body: bytes) -> Any:
    """A POST body's JSON value, parsed once for the header checks and the connection;
    ``None`` when it is not JSON (the connection, given the bytes, reports what is wrong)."""
    try:
        return default_codec.loads(body)
    except MrtrError:
        return None


@attrs.frozen
class HeaderRefusal:
    """A POST whose mirrored headers contradict its body: the HTTP status and the error
    response (under the request's id) that answer it."""

    status: int
    reply: ErrorResponse


def header_refusal(
    received: ReceivedHeaders,
    message: Any,
    header_params: Callable[[str], HeaderParams | None],
) -> HeaderRefusal | None:
    """Why ``message`` (what ``parse_posted`` gave) is refused for its headers, or ``None``.

    ``header_params(tool)`` is the ``Mcp-Param-*`` mapping a tool declares (``None``:
    none); it is asked only for a ``tools/call``.
    """
    if not isinstance(message, Mapping):
        return None
    tool = called_tool(message)
    try:
        check_request_headers(
            received, message, header_params=header_params(tool) if tool is not None else None
        )
    except HeaderMismatch as exc:
        return HeaderRefusal(status_for_error(exc.code), error_response(exc.request_id, exc))
    return None
