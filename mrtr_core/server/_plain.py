"""The common shapes of a round, converted without the general converter.

Every leg of a form elicitation converts the same three shapes: the server's ask
(``ElicitFormRequest``) into its wire form, that wire form back into the typed
request when the connection checks the result, and the client's answer into an
``ElicitResult``.  The converter (cattrs, ``wire._convert``) does each through its
generic hooks; these functions build the same objects directly for the plain case
(exact dicts and lists, known values) and return ``None`` for anything else, which
then goes the general way, errors included.  Property tests hold each one to the
converter's result (``tests/core/server/test_server_fast_paths.py``).
"""

from __future__ import annotations

from typing import Any

from .._errors import RemoteProtocolError
from ..wire._inputs import InputRegistry
from ..wire._model import ElicitFormRequest, ElicitResult

_ELICIT_ACTIONS = frozenset({"accept", "decline", "cancel"})
_SCALARS = frozenset({str, int, float, bool, type(None)})
_FORM_KEYS = frozenset({"message", "requestedSchema", "mode"})
_NOT_PLAIN = object()


def plain_elicit_result(raw: Any) -> ElicitResult | None:
    """The ``ElicitResult`` that structuring ``raw`` gives, for a dict with a known
    action and an object or no content."""
    if type(raw) is not dict:
        return None
    action = raw.get("action")
    content = raw.get("content")
    if type(action) is not str or action not in _ELICIT_ACTIONS:
        return None
    if content is not None and type(content) is not dict:
        return None
    extra = {k: v for k, v in raw.items() if k != "action" and k != "content"}
    return ElicitResult(action=action, content=content, extra=extra)  # type: ignore[arg-type]


def _copy(value: Any) -> Any:
    """A copy of a JSON value made of exact dicts, lists and scalars (as the converter
    unstructures one), or ``_NOT_PLAIN``."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                return _NOT_PLAIN
            copied = _copy(item)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            out[key] = copied
        return out
    if kind is list:
        items = []
        for item in value:
            copied = _copy(item)
            if copied is _NOT_PLAIN:
                return _NOT_PLAIN
            items.append(copied)
        return items
    return _NOT_PLAIN


def plain_form_wire(request: Any) -> dict[str, Any] | None:
    """The wire ``{method, params}`` of a form elicitation without ``extra`` whose
    schema is plain JSON, as ``unstructure_input_request`` writes it (schema copied)."""
    if type(request) is not ElicitFormRequest or request.extra:
        return None
    schema = request.requested_schema
    try:
        copied = _copy(schema) if type(schema) is dict else _NOT_PLAIN
    except RecursionError:  # nested too deep to copy this way: the general way decides
        copied = _NOT_PLAIN
    if copied is _NOT_PLAIN:
        return None
    params: dict[str, Any] = {"message": request.message, "requestedSchema": copied}
    if request.mode is not None:
        params["mode"] = request.mode
    return {"method": request.method, "params": params}


def plain_form_request(raw: Any, input_kinds: InputRegistry) -> ElicitFormRequest | None:
    """The ``ElicitFormRequest`` that ``structure_input_request`` gives for a wire
    request whose params are a dict with a string message and an object schema."""
    if type(raw) is not dict:
        return None
    params = raw.get("params")
    if type(params) is not dict:
        return None
    try:
        kind = input_kinds.resolve(raw.get("method"), params)
    except RemoteProtocolError:
        return None
    if kind.request_class is not ElicitFormRequest:
        return None
    message = params.get("message")
    schema = params.get("requestedSchema")
    mode = params.get("mode")
    # (The kind resolved is the form kind, so the mode is one it has: "form" or none,
    # unless a registry of the app's own says otherwise.)
    plain_mode = mode is None or (type(mode) is str and mode == "form")
    if not isinstance(message, str) or type(schema) is not dict or not plain_mode:
        return None
    extra = {k: v for k, v in params.items() if k not in _FORM_KEYS}
    return ElicitFormRequest(
        message=message,
        requested_schema=schema,
        mode=mode,
        extra=extra,
    )
