"""Protocol facts: versions and eras, the ``_meta`` keys every 2026-07-28 request
carries, the JSON-RPC and MCP error codes, the methods that may answer
``input_required``, and what a server knows about one request (``RequestInfo``).
"""

from .._errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from ._meta import (
    ALL_VERSIONS,
    CACHEABLE_METHODS,
    LEGACY_VERSIONS,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSIONS,
    MRTR_METHODS,
    Era,
    RequestInfo,
)

__all__ = [
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "MRTR_METHODS",
    "ALL_VERSIONS",
    "CACHEABLE_METHODS",
    "LEGACY_VERSIONS",
    "LOG_LEVELS",
    "META_CLIENT_CAPABILITIES",
    "META_CLIENT_INFO",
    "META_LOG_LEVEL",
    "META_PROTOCOL_VERSION",
    "META_SERVER_INFO",
    "MODERN_VERSIONS",
    "Era",
    "RequestInfo",
]
