"""The wire model: JSON-RPC envelopes and the MRTR payload types.

Every class is a frozen, slotted, keyword-only attrs class, so the same object
serves both directions.  Payload classes keep the keys they do not know in
``extra`` (the schema allows extra keys), and those keys come back out on
encoding, so a decode/encode round trip loses nothing.

Python attribute names are snake_case; a field whose wire name differs
declares it in its ``metadata["wire"]``.  Structuring and unstructuring live
in :mod:`mrtr_core.wire._convert`; what each input request kind needs and
answers with, in the registry of :mod:`mrtr_core.wire._inputs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from .._errors import MrtrError

RequestId = str | int
JSONObject = Mapping[str, Any]

_EMPTY: Mapping[str, Any] = {}


def _wire(name: str) -> dict[str, str]:
    return {"wire": name}


# --- JSON-RPC envelopes ----------------------------------------------------


@attrs.frozen(kw_only=True)
class ErrorObject:
    """The ``error`` member of an error response. ``data`` is ``None`` when absent."""

    code: int
    message: str
    data: Any = None


@attrs.frozen(kw_only=True)
class Request:
    """A JSON-RPC request. ``params`` stays a plain mapping: it is the app's data."""

    id: RequestId
    method: str
    params: JSONObject | None = None


@attrs.frozen(kw_only=True)
class Notification:
    """A JSON-RPC notification (no id, no response)."""

    method: str
    params: JSONObject | None = None


@attrs.frozen(kw_only=True)
class ResultResponse:
    """A successful response. ``result`` is the plain result mapping."""

    id: RequestId
    result: JSONObject


@attrs.frozen(kw_only=True)
class ErrorResponse:
    """An error response. ``id`` is ``None`` when the request id could not be read;
    it is then omitted on the wire (the 2026-07-28 schema forbids ``"id": null``)."""

    error: ErrorObject
    id: RequestId | None = None


Message = Request | Notification | ResultResponse | ErrorResponse


def error_response(request_id: RequestId | None, error: MrtrError) -> ErrorResponse:
    """The error response that reports ``error`` (its code, message and data)."""
    return ErrorResponse(
        id=request_id,
        error=ErrorObject(code=error.code, message=error.message, data=error.data),
    )


# --- Input requests (server -> client, inside an input_required result) -----


@attrs.frozen(kw_only=True)
class ElicitFormRequest:
    """``elicitation/create`` in form mode. ``mode`` is ``None`` when the wire omitted it."""

    method = "elicitation/create"
    message: str
    requested_schema: JSONObject = attrs.field(metadata=_wire("requestedSchema"))
    mode: Literal["form"] | None = None
    extra: JSONObject = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class ElicitUrlRequest:
    """``elicitation/create`` in URL mode: show ``url`` in full, then ask consent."""

    method = "elicitation/create"
    message: str
    url: str
    mode: Literal["url"] = attrs.field(default="url", metadata={"always": True})
    extra: JSONObject = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class CreateMessageRequest:
    """``sampling/createMessage``. Optional fields are ``None`` when absent."""

    method = "sampling/createMessage"
    messages: list[JSONObject]
    max_tokens: int = attrs.field(metadata=_wire("maxTokens"))
    system_prompt: str | None = attrs.field(default=None, metadata=_wire("systemPrompt"))
    temperature: float | None = None
    stop_sequences: list[str] | None = attrs.field(default=None, metadata=_wire("stopSequences"))
    model_preferences: JSONObject | None = attrs.field(
        default=None, metadata=_wire("modelPreferences")
    )
    include_context: Literal["none", "thisServer", "allServers"] | None = attrs.field(
        default=None, metadata=_wire("includeContext")
    )
    metadata: JSONObject | None = None
    tools: list[JSONObject] | None = None
    tool_choice: JSONObject | None = attrs.field(default=None, metadata=_wire("toolChoice"))
    extra: JSONObject = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class ListRootsRequest:
    """``roots/list``; its params carry nothing but an optional ``_meta`` (kept in ``extra``)."""

    method = "roots/list"
    extra: JSONObject = attrs.field(factory=dict, repr=False)


InputRequest = ElicitFormRequest | ElicitUrlRequest | CreateMessageRequest | ListRootsRequest


# --- Input responses (client -> server, inside a retry's inputResponses) ------


@attrs.frozen(kw_only=True)
class ElicitResult:
    """The answer to an elicitation. ``decline`` and ``cancel`` are distinct user choices."""

    action: Literal["accept", "decline", "cancel"]
    content: JSONObject | None = None
    extra: JSONObject = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class CreateMessageResult:
    """The answer to a sampling request."""

    role: Literal["user", "assistant"]
    content: Any
    model: str
    stop_reason: str | None = attrs.field(default=None, metadata=_wire("stopReason"))
    extra: JSONObject = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class Root:
    """One root: a ``file://`` URI and an optional display name."""

    uri: str
    name: str | None = None
    extra: JSONObject = attrs.field(factory=dict, repr=False)


@attrs.frozen(kw_only=True)
class ListRootsResult:
    """The answer to ``roots/list``."""

    roots: list[Root]
    extra: JSONObject = attrs.field(factory=dict, repr=False)


InputResponse = ElicitResult | CreateMessageResult | ListRootsResult


@attrs.frozen(kw_only=True)
class InputRequiredResult:
    """``{"resultType": "input_required", "inputRequests"?, "requestState"?}``.

    ``input_requests`` is ``None`` when absent; ``request_state`` is kept as the
    exact ``str`` received.  ``extra`` holds ``_meta`` and unknown keys.
    """

    input_requests: Mapping[str, InputRequest] | None = attrs.field(
        default=None, metadata=_wire("inputRequests")
    )
    request_state: str | None = attrs.field(default=None, metadata=_wire("requestState"))
    extra: JSONObject = attrs.field(factory=dict, repr=False)
