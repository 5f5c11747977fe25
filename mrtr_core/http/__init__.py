"""Streamable HTTP, for authors of an HTTP binding (server or client): the header
names (one namespace, ``Header``) and the rules of their mirrors, the HTTP status
of an error answer, server-sent events, and the 2025-era sessions (session ids,
the ``SessionTable``, event ids and the ``ReplayBuffer``, what a client of a
session sends and how it resumes a stream).  The steps of serving one POST that
our ASGI endpoint takes live in the private ``_post`` module.

Everything here is sans-IO: header fields, bodies and events in, decisions and
bytes out.  See ``docs/transports.md``.
"""

from ._client_sessions import StreamResumption, check_session_id, session_headers
from ._headers import (
    Header,
    HeaderMismatch,
    InvalidHeaderAnnotation,
    check_request_headers,
    header_fields,
    request_headers,
    schema_header_params,
)
from ._post import status_for_error
from ._replay import ReplayBuffer, ReplayLost
from ._sessions import (
    SessionRefused,
    SessionTable,
    is_legacy_message,
    read_legacy_headers,
)
from ._sse import SseDecoder, encode_sse

__all__ = [
    # the headers
    "Header",
    "HeaderMismatch",
    "InvalidHeaderAnnotation",
    "check_request_headers",
    "header_fields",
    "request_headers",
    "schema_header_params",
    # one 2026-07-28 POST
    "status_for_error",
    # server-sent events
    "SseDecoder",
    "encode_sse",
    # 2025-era sessions
    "SessionRefused",
    "SessionTable",
    "is_legacy_message",
    "read_legacy_headers",
    "ReplayBuffer",
    "ReplayLost",
    "StreamResumption",
    "check_session_id",
    "session_headers",
]
