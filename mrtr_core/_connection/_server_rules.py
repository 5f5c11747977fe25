"""What a server owes each answer: the checks and additions the 2026-07-28 spec requires.

Pure functions over plain data, applied by the connection when the app sends a
result or a server-to-client request.  A violation is the app's mistake, so it
raises :class:`~mrtr_core._errors.AppResultRefused`, whose ``code``/``data`` are
what the peer should then be told (``error_response(id, exc)``).  What each kind
of input request needs comes from the input-kind registry, for ``input_required``
results and 2025-era server-to-client requests alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import MISSING_CLIENT_CAPABILITY, AppResultRefused, MrtrError, describe
from .._meta import CACHEABLE_METHODS, META_SERVER_INFO, RequestInfo
from ..engine._retry import MRTR_METHODS
from ..server._asking import required_capabilities
from ..server._plain import plain_form_request
from ..tasks._gate import TASKS_EXTENSION, declares_tasks
from ..tasks._wire import TASK_AUGMENTABLE_METHODS, CreateTaskResult
from ..wire._convert import structure_input_required
from ..wire._inputs import INPUT_KINDS, InputRegistry, capability_paths
from ..wire._model import InputRequest, Request

#: 2025-era server-to-client requests that carry no input request (and need no capability).
PLAIN_SERVER_REQUEST_METHODS = frozenset({"ping"})
#: Requests a 2025-era server may send a client.
SERVER_REQUEST_METHODS = INPUT_KINDS.legacy_methods | PLAIN_SERVER_REQUEST_METHODS


def _needs_undeclared(required: Mapping[str, Any], message: str) -> AppResultRefused:
    return AppResultRefused(
        message, code=MISSING_CLIENT_CAPABILITY, data={"requiredCapabilities": dict(required)}
    )


def finish_result(
    info: RequestInfo,
    result: Mapping[str, Any],
    *,
    server_info: Mapping[str, Any] | None,
    cache_ttl_ms: int,
    cache_scope: str,
    input_kinds: InputRegistry = INPUT_KINDS,
) -> dict[str, Any]:
    """A copy of the app's ``result`` for the request ``info`` describes, checked and
    completed: ``resultType``, caching fields, ``serverInfo`` (2026-07-28 only).  An
    ``input_required`` or a task (``resultType: "task"``) must be one this request may
    take."""
    out = dict(result)
    result_type = out.get("resultType")
    if result_type == "input_required":
        check_input_required(info, out, input_kinds)
    elif result_type == "task":
        check_task_result(info, out)
    elif info.era == "legacy":
        return out
    elif result_type is None:
        out["resultType"] = "complete"
    elif result_type != "complete":
        raise AppResultRefused(f"unknown resultType {describe(result_type)}")
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
        meta = dict(given) if given is not None and isinstance(given, Mapping) else {}
        meta.setdefault(META_SERVER_INFO, server_info)
        out["_meta"] = meta
    return out


def check_input_required(
    info: RequestInfo, result: Mapping[str, Any], input_kinds: InputRegistry = INPUT_KINDS
) -> None:
    """An input_required answer is legal only for the MRTR methods of a 2026-07-28
    request, with at least one of its fields, asking only for declared capabilities."""
    if info.era == "legacy":
        raise AppResultRefused(
            "a 2025-era client cannot take input_required: ask it with server-to-client "
            "requests instead"
        )
    if info.method not in MRTR_METHODS:
        raise AppResultRefused(f"{describe(info.method)} cannot answer input_required")
    if "inputRequests" not in result and "requestState" not in result:
        raise AppResultRefused("input_required needs inputRequests or requestState")
    plain = _plain_requests(result, input_kinds)
    requests: Mapping[str, InputRequest]
    if plain is not None:
        requests = plain
    else:
        try:
            shaped = structure_input_required(result, input_kinds)
        except MrtrError as exc:
            raise AppResultRefused(f"malformed input_required: {exc.message}") from exc
        requests = shaped.input_requests or {}
    required = required_capabilities(requests, info.capabilities, input_kinds)
    if required:
        raise _needs_undeclared(
            required, "the request did not declare the capabilities this input needs"
        )


def check_task_result(info: RequestInfo, result: Mapping[str, Any]) -> None:
    """A task (SEP-2663) is a legal answer only to a 2026-07-28 request of a method tasks
    augment (``tools/call``) whose own capabilities declare the extension, and only as a
    well-formed CreateTaskResult.  Without the declaration the client is owed -32021
    naming the extension (what the SEP requires of a server that can only answer with a
    task); the other refusals are -32603."""
    if info.era == "legacy":
        raise AppResultRefused(
            "a 2025-era client cannot take a task: the tasks extension is 2026-07-28's"
        )
    if info.method not in TASK_AUGMENTABLE_METHODS:
        raise AppResultRefused(f"{describe(info.method)} cannot answer with a task")
    if not declares_tasks(info.capabilities):
        raise _needs_undeclared(
            {"extensions": {TASKS_EXTENSION: {}}},
            f"the request did not declare the {TASKS_EXTENSION} extension a task needs",
        )
    try:
        CreateTaskResult.from_result(result)
    except MrtrError as exc:
        raise AppResultRefused(f"malformed CreateTaskResult: {exc.message}") from exc


def _plain_requests(
    result: Mapping[str, Any], input_kinds: InputRegistry
) -> dict[str, InputRequest] | None:
    """The typed requests of an input_required result that asks only plain form
    elicitations (as ``structure_input_required`` reads them), else ``None``."""
    raw = result.get("inputRequests")
    state = result.get("requestState")
    if type(raw) is not dict or (state is not None and not isinstance(state, str)):
        return None
    requests: dict[str, InputRequest] = {}
    for key, request in raw.items():
        typed = plain_form_request(request, input_kinds)
        if typed is None:
            return None
        requests[str(key)] = typed
    return requests


def check_server_request(
    request: Request,
    client_capabilities: Mapping[str, Any],
    input_kinds: InputRegistry = INPUT_KINDS,
) -> None:
    """A 2025-era server-to-client request must be one the client declared it can take.

    The same capability check as for ``input_required`` (the registry entry of the
    request's kind), plus the 2025 shape's own demand: the id param its kind
    carries in that era (URL elicitation's ``elicitationId``).
    """
    method = request.method
    if method in PLAIN_SERVER_REQUEST_METHODS:
        return
    params = request.params or {}
    try:
        kind = input_kinds.resolve_legacy(method, params)
    except MrtrError as exc:  # a mode no kind of this method has
        raise AppResultRefused(
            f"a server cannot send this {describe(method)}: {exc.message}"
        ) from exc
    if kind is None:
        raise AppResultRefused(f"a server cannot send {describe(method)} requests")
    id_param = kind.legacy_id_param
    if id_param is not None and not isinstance(params.get(id_param), str):
        raise AppResultRefused(f"a 2025-era {kind.name} request needs an {id_param} string")
    required = kind.missing_capabilities(params, client_capabilities)
    if required:
        raise _needs_undeclared(
            required,
            f"the client did not declare what this {kind.name} request needs: "
            + ", ".join(capability_paths(required)),
        )


def modern_only_initialize_refusal(modern_versions: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """The message and data of the error a 2026-07-28-only server answers ``initialize``
    with.  The spec (versioning: "Backward Compatibility") says such a server SHOULD name
    the versions it supports in that error, on any transport: a 2025 client has no way
    forward, and this message may be all its user sees."""
    versions = ", ".join(modern_versions)
    message = (
        f"this server does not support initialize: it speaks only protocol version(s) "
        f"{versions} (no 2025-era sessions); upgrade the client"
    )
    return message, {"supported": list(modern_versions)}


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
