"""What an ``input_required`` result asks, read strictly: its shape, each input request
typed by its kind, each checked against the capabilities the request declared.

Pure functions the engine applies to a result before it opens a round; each
refusal is the error the flow fails with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import InvalidInputRequired, MissingCapability, RemoteProtocolError, describe
from ..wire._convert import structure, structure_input_request_kind
from ..wire._inputs import InputRegistry
from ..wire._model import InputRequest, InputResponse

__all__ = ["answer_problem", "read_input_requests", "read_round_fields"]


def read_round_fields(result: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str | None]:
    """``inputRequests`` and ``requestState`` of an ``input_required`` result, checked for
    shape (at least one of them); ``InvalidInputRequired`` otherwise."""
    raw_requests = result.get("inputRequests")
    request_state = result.get("requestState")
    if raw_requests is not None and not isinstance(raw_requests, (dict, Mapping)):
        raise InvalidInputRequired("inputRequests must be an object")
    if request_state is not None and not isinstance(request_state, str):
        raise InvalidInputRequired("requestState must be a string")
    if not raw_requests and request_state is None:
        raise InvalidInputRequired("input_required needs inputRequests or requestState")
    return raw_requests, request_state


def read_input_requests(
    raw: Mapping[str, Any], capabilities: Mapping[str, Any], input_kinds: InputRegistry
) -> dict[str, InputRequest]:
    """The typed input requests of ``raw``; the first bad one raises
    ``InvalidInputRequired``, the first one beyond ``capabilities`` ``MissingCapability``."""
    requests: dict[str, InputRequest] = {}
    for key, value in raw.items():
        try:
            kind, request, params = structure_input_request_kind(value, input_kinds)
        except RemoteProtocolError as exc:
            method = value.get("method") if isinstance(value, (dict, Mapping)) else None
            raise InvalidInputRequired(
                f"input request {describe(key)} ({describe(method)}): {exc.message}",
                key=key,
                method=method if isinstance(method, str) else None,
            ) from exc
        # The raw params as structured (a mapping: ``{}`` where the kind allows none).
        required = kind.missing_capabilities(params, capabilities)
        if required:
            raise MissingCapability(
                f"input request {describe(key)} ({kind.name}) needs an undeclared capability: "
                f"{required}",
                key=key,
                method=request.method,
                required=required,
            )
        requests[key] = request
    return requests


def answer_problem(
    key: str,
    request: InputRequest,
    response: InputResponse | Mapping[str, Any],
    input_kinds: InputRegistry,
) -> str | None:
    """Why ``response`` cannot answer ``request`` (``None``: it can)."""
    expected = input_kinds.kind_for(request).response_class
    if isinstance(response, (dict, Mapping)):
        try:
            structure(response, expected)
        except RemoteProtocolError as exc:
            return f"answer for {describe(key)} is not a valid {expected.__name__}: {exc.message}"
        return None
    if not isinstance(response, expected):
        got = type(response).__name__
        return f"answer for {describe(key)} must be a {expected.__name__}, got {got}"
    return None
