"""Building retry params: the one rule every leg obeys.

A retry carries the original params with any ``inputResponses`` and
``requestState`` removed (also ones the caller put there), this round's answers
(never accumulated across rounds; omitted when the round had none) and the
``requestState`` exactly as last received (the same ``str``), if and only if
the latest result carried one.  The original params are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import LocalProtocolError
from .._meta import MRTR_METHODS as MRTR_METHODS
from ..wire._convert import unstructure_input_response
from ..wire._model import InputResponse

_ROUND_FIELDS = ("inputResponses", "requestState")


def strip_round_fields(params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``params`` without ``inputResponses`` and ``requestState``."""
    return {k: v for k, v in params.items() if k not in _ROUND_FIELDS}


def build_retry_params(
    original_params: Mapping[str, Any],
    input_responses: Mapping[str, InputResponse | Mapping[str, Any]] | None = None,
    request_state: str | None = None,
) -> dict[str, Any]:
    """The params of a retry leg, for callers who drive rounds themselves.

    ``input_responses`` maps each key of the round to its answer (a typed
    response or a plain mapping); pass ``None`` or ``{}`` for a
    requestState-only round.  ``request_state`` is the value of the latest
    result's ``requestState``, or ``None`` when it had none.
    """
    if not isinstance(original_params, (dict, Mapping)):
        raise LocalProtocolError("original params must be a mapping")
    if request_state is not None and not isinstance(request_state, str):
        raise LocalProtocolError("requestState must be the str received")
    params = strip_round_fields(original_params)
    if input_responses:
        params["inputResponses"] = {
            key: unstructure_input_response(value) for key, value in input_responses.items()
        }
    if request_state is not None:
        params["requestState"] = request_state
    return params
