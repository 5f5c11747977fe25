"""What a server owes each answer: the checks and additions the 2026-07-28 spec requires.

Pure functions over plain data, applied by the connection when the app sends a
result or a server-to-client request.  A violation is the app's mistake, so it
raises :class:`~mrtr_core.LocalProtocolError`, whose ``code``/``data`` are what
the peer should then be told (``error_response(id, exc)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import INTERNAL_ERROR, MISSING_CLIENT_CAPABILITY, LocalProtocolError, MrtrError
from ..engine._retry import MRTR_METHODS
from ..protocol._meta import CACHEABLE_METHODS, META_SERVER_INFO, RequestInfo
from ..server._asking import required_capabilities
from ..wire._convert import structure_input_required
from ..wire._model import Request

#: Requests a 2025-era server may send a client.
SERVER_REQUEST_METHODS = frozenset(
    {"elicitation/create", "sampling/createMessage", "roots/list", "ping"}
)


def finish_result(
    info: RequestInfo,
    result: Mapping[str, Any],
    *,
    server_info: Mapping[str, Any] | None,
    cache_ttl_ms: int,
    cache_scope: str,
) -> dict[str, Any]:
    """A copy of the app's ``result`` for the request ``info`` describes, checked and
    completed: ``resultType``, caching fields, ``serverInfo`` (2026-07-28 only)."""
    out = dict(result)
    result_type = out.get("resultType")
    if result_type == "input_required":
        check_input_required(info, out)
    elif info.era == "legacy":
        return out
    elif result_type is None:
        out["resultType"] = "complete"
    elif result_type != "complete":
        raise LocalProtocolError(f"unknown resultType {result_type!r}", code=INTERNAL_ERROR)
    if out["resultType"] == "complete" and info.method in CACHEABLE_METHODS:
        if info.retry:
            # A retry leg's answer depends on what the user said: nothing may cache it.
            out["ttlMs"] = 0
            out["cacheScope"] = "private"
        else:
            out.setdefault("ttlMs", cache_ttl_ms)
            out.setdefault("cacheScope", cache_scope)
    if server_info is not None:
        given = out.get("_meta")
        meta = dict(given) if isinstance(given, Mapping) else {}
        meta.setdefault(META_SERVER_INFO, server_info)
        out["_meta"] = meta
    return out


def check_input_required(info: RequestInfo, result: Mapping[str, Any]) -> None:
    """An input_required answer is legal only for the MRTR methods of a 2026-07-28
    request, with at least one of its fields, asking only for declared capabilities."""
    if info.era == "legacy":
        raise LocalProtocolError(
            "a 2025-era client cannot take input_required: ask it with server-to-client "
            "requests instead",
            code=INTERNAL_ERROR,
        )
    if info.method not in MRTR_METHODS:
        raise LocalProtocolError(
            f"{info.method!r} cannot answer input_required", code=INTERNAL_ERROR
        )
    if "inputRequests" not in result and "requestState" not in result:
        raise LocalProtocolError(
            "input_required needs inputRequests or requestState", code=INTERNAL_ERROR
        )
    try:
        shaped = structure_input_required(result)
    except MrtrError as exc:
        raise LocalProtocolError(
            f"malformed input_required: {exc.message}", code=INTERNAL_ERROR
        ) from exc
    required = required_capabilities(shaped.input_requests or {}, info.capabilities)
    if required:
        raise LocalProtocolError(
            "the request did not declare the capabilities this input needs",
            code=MISSING_CLIENT_CAPABILITY,
            data={"requiredCapabilities": required},
        )


def check_server_request(request: Request, client_capabilities: Mapping[str, Any]) -> None:
    """A 2025-era server-to-client request must be one the client declared it can take."""
    method = request.method
    if method not in SERVER_REQUEST_METHODS:
        raise LocalProtocolError(f"a server cannot send {method!r} requests")
    params = request.params or {}
    caps = client_capabilities
    needed: str | None = None
    if method == "elicitation/create":
        elicitation = caps.get("elicitation")
        if params.get("mode") == "url":
            if not isinstance(params.get("elicitationId"), str):
                raise LocalProtocolError("URL-mode elicitation needs an elicitationId")
            if not isinstance(elicitation, Mapping) or "url" not in elicitation:
                needed = "elicitation.url"
        elif not isinstance(elicitation, Mapping) or (elicitation and "form" not in elicitation):
            needed = "elicitation.form"
    elif method == "sampling/createMessage" and not isinstance(caps.get("sampling"), Mapping):
        needed = "sampling"
    elif method == "roots/list" and not isinstance(caps.get("roots"), Mapping):
        needed = "roots"
    if needed is not None:
        raise LocalProtocolError(
            f"the client did not declare the {needed} capability",
            code=MISSING_CLIENT_CAPABILITY,
        )


def discover_result(
    versions: Sequence[str], capabilities: Mapping[str, Any], instructions: str | None
) -> dict[str, Any]:
    """The ``server/discover`` result before ``finish_result`` adds caching and serverInfo."""
    result: dict[str, Any] = {
        "supportedVersions": list(versions),
        "capabilities": dict(capabilities),
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result


def initialize_result(
    version: str,
    capabilities: Mapping[str, Any],
    server_info: Mapping[str, Any] | None,
    instructions: str | None,
) -> dict[str, Any]:
    """The 2025-era ``initialize`` result."""
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": dict(capabilities),
        "serverInfo": dict(server_info) if server_info is not None else {},
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result
