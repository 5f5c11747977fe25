"""Structuring and unstructuring the wire model with cattrs.

One converter, strict about primitives (a ``"5"`` is not an int, ``true`` is
not a number), with each payload class's wire names taken from its field
metadata and its unknown keys carried in ``extra``.  Every failure surfaces as
:class:`RemoteProtocolError` with ``-32602`` (invalid params); no cattrs,
``KeyError`` or ``TypeError`` leaks out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs

from .._errors import INVALID_PARAMS, RemoteProtocolError, describe
from ._inputs import INPUT_KINDS, InputKind, InputRegistry
from ._model import InputRequest, InputRequiredResult, InputResponse
from ._payload import is_json_object, make_structure, make_unstructure

T = TypeVar("T")

# The longest failure text a structuring error repeats.
_MAX_REASON = 200

converter = cattrs.Converter(detailed_validation=False)


def _strict(kind: type, check: Callable[[Any], bool]) -> None:
    def hook(value: Any, _: Any) -> Any:
        if not check(value):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    converter.register_structure_hook(kind, hook)


_strict(str, lambda v: isinstance(v, str))
_strict(int, lambda v: isinstance(v, int) and not isinstance(v, bool))
_strict(float, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
_strict(bool, lambda v: isinstance(v, bool))


def _is_list(tp: Any) -> bool:
    return tp is list or get_origin(tp) is list


def _strict_list(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], list[Any]]:
    # cattrs structures any iterable into a list: "END" would become ["E", "N", "D"]
    # and {} an empty list.  Accept only what encodes as a JSON array.
    args = get_args(tp)
    item_type = args[0] if args else Any
    item_hook = conv.get_structure_hook(item_type)

    def hook(value: Any, _: Any) -> list[Any]:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected an array, got {type(value).__name__}")
        return [item_hook(item, item_type) for item in value]

    return hook


converter.register_structure_hook_factory(_is_list, _strict_list)


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _strict_literal(tp: Any) -> Callable[[Any, Any], Any]:
    # cattrs' own hook puts the whole value in its message: a peer's 16 MiB string, or
    # a list nested a thousand deep (whose repr is a RecursionError), would be in ours.
    allowed = get_args(tp)
    expected = ", ".join(repr(a) for a in allowed)

    def hook(value: Any, _: Any) -> Any:
        for option in allowed:
            if type(value) is type(option) and value == option:
                return value
        raise ValueError(f"expected one of {expected}, got {describe(value)}")

    return hook


converter.register_structure_hook_factory(_is_literal, _strict_literal)


def _json_object(value: Any, _: Any) -> Any:
    # Free-form JSON objects (schemas, content, metadata) are the peer's data:
    # check the shape and keep the mapping as it is rather than copy it.
    if not isinstance(value, (dict, Mapping)):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


converter.register_structure_hook_func(is_json_object, _json_object)


def _is_payload(cls: Any) -> bool:
    # Every payload class keeps unknown keys in ``extra``: a new input kind's classes
    # get their hooks without being listed.  InputRequiredResult is the exception:
    # its requests need the input-kind registry (structure_input_required).
    return (
        isinstance(cls, type)
        and attrs.has(cls)
        and "extra" in attrs.fields_dict(cls)
        and cls is not InputRequiredResult
    )


# Each payload class's hooks, also straight from a dict: the converter's own dispatch
# costs as much as structuring a small payload.  Filled as the converter makes them.
_payload_structure: dict[Any, Callable[[Any, Any], Any]] = {}
_payload_unstructure: dict[Any, Callable[[Any], Any]] = {}


def _structure_factory(cls: type) -> Callable[[Any, Any], Any]:
    hook = _payload_structure[cls] = make_structure(cls, converter)
    return hook


def _unstructure_factory(cls: type) -> Callable[[Any], Any]:
    hook = _payload_unstructure[cls] = make_unstructure(cls, converter)
    return hook


converter.register_structure_hook_factory(_is_payload, _structure_factory)
converter.register_unstructure_hook_factory(_is_payload, _unstructure_factory)


def structure(raw: Any, cls: type[T]) -> T:
    """Structure ``raw`` into ``cls``; any failure is a -32602 RemoteProtocolError."""
    try:
        hook = _payload_structure.get(cls)
        if hook is None:
            return converter.structure(raw, cls)
        return hook(raw, cls)  # type: ignore[no-any-return]
    except Exception as exc:  # cattrs raises many kinds; all mean "invalid params"
        reason = str(exc)
        if len(reason) > _MAX_REASON:  # (our hooks name types, not values: a backstop)
            reason = reason[: _MAX_REASON - 1] + "…"
        raise RemoteProtocolError(
            f"invalid {getattr(cls, '__name__', cls)}: {reason}", code=INVALID_PARAMS
        ) from exc


def unstructure(obj: Any) -> Any:
    """The plain, JSON-able form of a model object."""
    hook = _payload_unstructure.get(type(obj))
    return converter.unstructure(obj) if hook is None else hook(obj)


#: The methods an input request may name.
INPUT_METHODS = INPUT_KINDS.methods


def _input_kind(raw: Any, input_kinds: InputRegistry) -> InputKind:
    if not isinstance(raw, (dict, Mapping)):
        raise RemoteProtocolError("an input request must be an object", code=INVALID_PARAMS)
    return input_kinds.resolve(raw.get("method"), raw.get("params"))


def input_request_class(raw: Any, input_kinds: InputRegistry = INPUT_KINDS) -> type[InputRequest]:
    """The class an ``{method, params}`` input request structures into."""
    return _input_kind(raw, input_kinds).request_class


def structure_input_request(raw: Any, input_kinds: InputRegistry = INPUT_KINDS) -> InputRequest:
    """``{"method", "params"}`` -> the typed input request."""
    return structure_input_request_kind(raw, input_kinds)[1]


def structure_input_request_kind(
    raw: Any, input_kinds: InputRegistry = INPUT_KINDS
) -> tuple[InputKind, InputRequest, Mapping[str, Any]]:
    """``structure_input_request``, with the kind it resolved and the params it read
    (``{}`` where the kind lets them be absent): what a capability check needs next."""
    kind = _input_kind(raw, input_kinds)
    params = raw.get("params")
    if params is None and kind.params_optional:
        params = {}
    return kind, structure(params, kind.request_class), params


def unstructure_input_request(request: InputRequest) -> dict[str, Any]:
    """The typed input request -> ``{"method", "params"}``."""
    return {"method": request.method, "params": converter.unstructure(request)}


def structure_input_required(
    raw: Any, input_kinds: InputRegistry = INPUT_KINDS
) -> InputRequiredResult:
    """A result mapping with ``resultType: input_required`` -> InputRequiredResult.

    Checks the shape only; the round engine adds the protocol rules (at least
    one field, capabilities).
    """
    if not isinstance(raw, (dict, Mapping)):
        raise RemoteProtocolError("a result must be an object", code=INVALID_PARAMS)
    if raw.get("resultType") != "input_required":
        raise RemoteProtocolError("not an input_required result", code=INVALID_PARAMS)
    requests_raw = raw.get("inputRequests")
    requests: dict[str, InputRequest] | None = None
    if requests_raw is not None:
        if not isinstance(requests_raw, (dict, Mapping)):
            raise RemoteProtocolError("inputRequests must be an object", code=INVALID_PARAMS)
        requests = {
            str(k): structure_input_request(v, input_kinds) for k, v in requests_raw.items()
        }
    state = raw.get("requestState")
    if state is not None and not isinstance(state, str):
        raise RemoteProtocolError("requestState must be a string", code=INVALID_PARAMS)
    extra = {
        k: v for k, v in raw.items() if k not in ("resultType", "inputRequests", "requestState")
    }
    return InputRequiredResult(input_requests=requests, request_state=state, extra=extra)


def unstructure_input_required(result: InputRequiredResult) -> dict[str, Any]:
    """InputRequiredResult -> the wire result mapping, ``resultType`` included."""
    out: dict[str, Any] = dict(result.extra)
    out["resultType"] = "input_required"
    if result.input_requests is not None:
        out["inputRequests"] = {
            k: unstructure_input_request(v) for k, v in result.input_requests.items()
        }
    if result.request_state is not None:
        out["requestState"] = result.request_state
    return out


def unstructure_input_response(
    response: InputResponse | Mapping[str, Any],
) -> dict[str, Any]:
    """A typed input response (or a plain mapping, copied) -> its wire mapping."""
    hook = _payload_unstructure.get(type(response))
    if hook is not None:
        return hook(response)  # type: ignore[no-any-return]
    if isinstance(response, (dict, Mapping)):
        return dict(response)
    return converter.unstructure(response)  # type: ignore[no-any-return]
