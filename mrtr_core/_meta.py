"""Protocol facts the connection applies: versions, ``_meta`` keys, caching, log levels.

Kept apart from the connection so the rules are readable in one place and
testable on their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ._errors import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, RemoteProtocolError, describe

if TYPE_CHECKING:  # (a type only: the wire imports this module's _meta keys)
    from .wire._model import RequestId

Era = Literal["modern", "legacy"]

#: Versions that carry everything per request in ``_meta`` (no handshake), newest first.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
#: Versions negotiated by ``initialize``, newest first.
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
ALL_VERSIONS = MODERN_VERSIONS + LEGACY_VERSIONS

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

#: The methods whose results may be ``input_required``.
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})

#: Methods whose complete results carry ``ttlMs`` and ``cacheScope``.
CACHEABLE_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)

#: RFC 5424 severities, least severe first (MCP's LoggingLevel).
LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_LOG_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}

#: Error codes that only a 2026-07-28 server sends: a dual-era client that gets one
#: from ``server/discover`` knows the peer is modern and never falls back to initialize.
MODERN_ERROR_CODES = frozenset({-32020, -32021, -32022})


def log_level_allows(threshold: str | None, level: str) -> bool:
    """Whether a message at ``level`` may go to a request that asked for ``threshold``."""
    return threshold is not None and _LOG_RANK[level] >= _LOG_RANK[threshold]


def is_log_level(value: Any) -> bool:
    return isinstance(value, str) and value in _LOG_RANK


@attrs.frozen(kw_only=True)
class RequestInfo:
    """What the server connection knows about one request it handed out.

    ``capabilities`` are this request's own (2026-07-28) or the ones declared in
    ``initialize`` (2025 era).  ``retry`` is true when the request carried
    ``inputResponses`` or ``requestState``: its result must not be cached.
    """

    id: RequestId
    method: str
    era: Era
    protocol_version: str
    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None
    log_level: str | None
    progress_token: str | int | None
    retry: bool


def _invalid(message: str, request_id: RequestId) -> RemoteProtocolError:
    return RemoteProtocolError(message, code=INVALID_PARAMS, request_id=request_id)


def declared_capabilities(params: Any) -> Mapping[str, Any] | None:
    """The ``ClientCapabilities`` a request's ``params._meta`` declares (``None``: none)."""
    # (dict first: the common case, and the cheaper check on the hot path)
    meta = params.get("_meta") if isinstance(params, (dict, Mapping)) else None
    found = meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, (dict, Mapping)) else None
    return found if isinstance(found, (dict, Mapping)) else None


def has_modern_meta(params: Mapping[str, Any] | None) -> bool:
    """Whether a request claims the 2026-07-28 era (its ``_meta`` names a protocol version)."""
    if params is None:
        return False
    meta = params.get("_meta")
    return isinstance(meta, Mapping) and META_PROTOCOL_VERSION in meta


def progress_token_of(params: Mapping[str, Any] | None) -> str | int | None:
    meta = params.get("_meta") if params is not None else None
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    if isinstance(token, (str, int)) and not isinstance(token, bool):
        return token
    return None


def is_retry_leg(params: Mapping[str, Any] | None) -> bool:
    return params is not None and ("inputResponses" in params or "requestState" in params)


def read_modern_request(
    request_id: RequestId, method: str, params: Mapping[str, Any], supported: Sequence[str]
) -> RequestInfo:
    """Check a 2026-07-28 request's ``_meta``; raise the error its answer must carry.

    -32022 with ``data: {supported, requested}`` for a version this server does
    not serve per request; -32602 for a missing or malformed required key.
    """
    meta = params["_meta"]
    version = meta[META_PROTOCOL_VERSION]
    if not isinstance(version, str):
        raise _invalid(f"_meta {META_PROTOCOL_VERSION} must be a string", request_id)
    if version not in supported:
        raise RemoteProtocolError(
            f"unsupported protocol version {describe(version)}",
            code=UNSUPPORTED_PROTOCOL_VERSION,
            data={"supported": list(supported), "requested": version},
            request_id=request_id,
        )
    capabilities = meta.get(META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, Mapping):
        raise _invalid(
            f"_meta {META_CLIENT_CAPABILITIES} is required and must be an object", request_id
        )
    client_info = meta.get(META_CLIENT_INFO)
    if client_info is not None and not isinstance(client_info, Mapping):
        raise _invalid(f"_meta {META_CLIENT_INFO} must be an object", request_id)
    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and not is_log_level(log_level):
        raise _invalid(f"_meta {META_LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}", request_id)
    return RequestInfo(
        id=request_id,
        method=method,
        era="modern",
        protocol_version=version,
        capabilities=capabilities,
        client_info=client_info,
        log_level=log_level,
        progress_token=progress_token_of(params),
        retry=is_retry_leg(params),
    )


def choose_version(offered: Any, ours: Sequence[str]) -> str | None:
    """Our most preferred version that the peer also offers (``offered`` is untrusted)."""
    if not isinstance(offered, list):
        return None
    for version in ours:
        if version in offered:
            return version
    return None


def negotiate_legacy(requested: str, supported: Sequence[str]) -> str:
    """The 2025-era rule: the client's version if we support it, else our newest."""
    return requested if requested in supported else supported[0]
