"""Streamable HTTP, for authors of an HTTP binding (server or client): the header
names and the rules of their mirrors, the rules of one 2026-07-28 POST and the
status of its answers, server-sent events, and the 2025-era sessions (session
ids, the ``SessionTable``, event ids and the ``ReplayBuffer``, what a client of a
session sends and how it resumes a stream).

Everything here is sans-IO: header fields, bodies and events in, decisions and
bytes out.  See ``docs/transports.md``.
"""

from ._client_sessions import StreamResumption, check_session_id, session_headers
from ._headers import (
    METHOD_HEADER,
    NAME_HEADER,
    PARAM_HEADER_PREFIX,
    PROTOCOL_VERSION_HEADER,
    HeaderMismatch,
    InvalidHeaderAnnotation,
    check_request_headers,
    header_fields,
    request_headers,
    schema_header_params,
)
from ._post import (
    SSE_RESPONSE_HEADERS,
    body_refusal,
    error_body,
    header_refusal,
    parse_posted,
    post_refusal,
    status_for_error,
)
from ._replay import STANDALONE, ReplayBuffer, ReplayLost
from ._sessions import (
    LAST_EVENT_ID_HEADER,
    SESSION_ID_HEADER,
    SessionRefused,
    SessionTable,
    is_legacy_message,
    read_legacy_headers,
)
from ._sse import SseDecoder, SseEvent, encode_sse, encode_sse_comment

__all__ = [
    # the headers
    "METHOD_HEADER",
    "NAME_HEADER",
    "PARAM_HEADER_PREFIX",
    "PROTOCOL_VERSION_HEADER",
    "HeaderMismatch",
    "InvalidHeaderAnnotation",
    "check_request_headers",
    "header_fields",
    "request_headers",
    "schema_header_params",
    # one 2026-07-28 POST
    "SSE_RESPONSE_HEADERS",
    "body_refusal",
    "error_body",
    "header_refusal",
    "parse_posted",
    "post_refusal",
    "status_for_error",
    # server-sent events
    "SseDecoder",
    "SseEvent",
    "encode_sse",
    "encode_sse_comment",
    # 2025-era sessions
    "LAST_EVENT_ID_HEADER",
    "SESSION_ID_HEADER",
    "SessionRefused",
    "SessionTable",
    "is_legacy_message",
    "read_legacy_headers",
    "STANDALONE",
    "ReplayBuffer",
    "ReplayLost",
    "StreamResumption",
    "check_session_id",
    "session_headers",
]
