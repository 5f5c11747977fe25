"""The error types of mrtr_core.

Everything the core raises, or reports inside a ``Failed`` event, is an
:class:`MrtrError`.  Each carries a JSON-RPC ``code`` hint so an adapter can turn
it into an error response without a lookup table of its own.  Any other
exception escaping the core is a bug.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice
from typing import Any, Final


class ErrorCode:
    """The JSON-RPC 2.0 and MCP error codes (schema 2026-07-28), each a plain ``int``.

    A namespace, not an enum: a code goes into an ``ErrorObject`` and onto the wire
    as it is, and a peer's code that is none of these reads the same way.
    """

    PARSE_ERROR: Final = -32700
    INVALID_REQUEST: Final = -32600
    METHOD_NOT_FOUND: Final = -32601
    INVALID_PARAMS: Final = -32602
    INTERNAL_ERROR: Final = -32603
    HEADER_MISMATCH: Final = -32020
    MISSING_CLIENT_CAPABILITY: Final = -32021
    UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
    #: A "come back later" refusal, before the request was processed (an implementation
    #: code: the spec leaves -32000 to -32019 to servers).  Sent by our HTTP server with
    #: 503 and ``Retry-After``; our HTTP client retries it.
    SERVER_BUSY: Final = -32000


# The core's own modules (and our transports) name a code without its namespace.
PARSE_ERROR: Final = ErrorCode.PARSE_ERROR
INVALID_REQUEST: Final = ErrorCode.INVALID_REQUEST
METHOD_NOT_FOUND: Final = ErrorCode.METHOD_NOT_FOUND
INVALID_PARAMS: Final = ErrorCode.INVALID_PARAMS
INTERNAL_ERROR: Final = ErrorCode.INTERNAL_ERROR
HEADER_MISMATCH: Final = ErrorCode.HEADER_MISMATCH
MISSING_CLIENT_CAPABILITY: Final = ErrorCode.MISSING_CLIENT_CAPABILITY
UNSUPPORTED_PROTOCOL_VERSION: Final = ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
SERVER_BUSY: Final = ErrorCode.SERVER_BUSY

# How much of a value an error message shows: a few items of a couple of levels.
_SHOWN_CHARS = 40
_SHOWN_ITEMS = 3
_SHOWN_LEVELS = 2
_SHOWN_TOTAL = 120
_SHOWN_INT_BITS = 128
#: How much of a peer's text (a name, a URI, a method) an error message quotes.
CLIPPED_CHARS: Final = 128


def clip(value: Any, limit: int = CLIPPED_CHARS) -> str | int | float | None:
    """A peer's name or value as an error quotes it (in its message or its ``data``),
    bounded: a string cut to ``limit`` characters and an ellipsis; a number, a
    boolean or ``null`` as it is (an integer of more than 128 bits described);
    anything else as :func:`describe` shows it.  Every error that echoes what a
    peer sent goes through here: a 3 MB unknown tool name would otherwise be
    echoed, and kept for replay, at its full size."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if value is None or isinstance(value, float):
        return value
    if isinstance(value, int) and value.bit_length() <= _SHOWN_INT_BITS:
        return value  # (bool too)
    return describe(value)


def describe(value: Any) -> str:
    """A peer's value as an error message shows it: short, bounded, never deep.

    Strings, numbers, ``true``/``false`` and ``null`` read as their ``repr``
    (a long string cut, with an ellipsis; a huge integer by its size);
    arrays and objects as their type and their first items, two levels deep
    (``list [[…]]``, ``dict {'a': …}``); anything else by its type alone.
    The result is at most about 120 characters, however large or deep the
    value: ``repr`` of a value nested a thousand deep raises ``RecursionError``,
    and a 16 MiB string has no place in a message.
    """
    if isinstance(value, (dict, list, tuple)):
        text = f"{type(value).__name__} {_shown(value, _SHOWN_LEVELS)}"
    else:
        text = _shown(value, 0)
    return text if len(text) <= _SHOWN_TOTAL else text[: _SHOWN_TOTAL - 1] + "…"


def _shown(value: Any, levels: int) -> str:
    # Recursion is bounded by ``levels`` (at most _SHOWN_LEVELS deep).
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, str):
        cut = str.__repr__(value[:_SHOWN_CHARS])
        return cut if len(value) <= _SHOWN_CHARS else cut + "…"
    if isinstance(value, int):
        if value.bit_length() > _SHOWN_INT_BITS:
            return f"<int of {value.bit_length()} bits>"
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        if levels <= 0:
            return "{…}"
        pairs = islice(value.items(), _SHOWN_ITEMS)
        items = [f"{_shown(k, 0)}: {_shown(v, levels - 1)}" for k, v in pairs]
        return "{" + ", ".join(items) + (", …}" if len(value) > _SHOWN_ITEMS else "}")
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        if levels <= 0:
            return "[…]"
        items = [_shown(v, levels - 1) for v in islice(value, _SHOWN_ITEMS)]
        return "[" + ", ".join(items) + (", …]" if len(value) > _SHOWN_ITEMS else "]")
    return f"<{type(value).__name__}>"


class MrtrError(Exception):
    """Base of every error the core raises or reports.

    ``code`` is the JSON-RPC error code that best describes the problem and
    ``data`` an optional JSON-able payload for the error response's ``data``.
    """

    code: int = INTERNAL_ERROR

    def __init__(self, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code})"


class LocalProtocolError(MrtrError):
    """You misused the API: an input in the wrong state, an unknown key, ..."""


class RemoteProtocolError(MrtrError):
    """The peer sent something that breaks the protocol.

    ``request_id`` is the JSON-RPC id of the offending message when one could
    be read, so a server can address its error response (the id is omitted,
    never ``null``, when it is ``None``).
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        data: Any = None,
        request_id: str | int | None = None,
    ) -> None:
        super().__init__(message, code=code, data=data)
        self.request_id = request_id


class InvalidInputRequired(RemoteProtocolError):
    """An ``input_required`` result the client must not act on.

    ``key`` and ``method`` name the offending input request when the problem is
    one request (``None`` when it is the result as a whole).
    """

    code = INTERNAL_ERROR

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        method: str | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message, data=data)
        self.key = key
        self.method = method


class MissingCapability(InvalidInputRequired):
    """The server asked for input the request did not declare a capability for.

    ``required`` is the ``ClientCapabilities`` fragment that would have been
    needed, also placed in ``data.requiredCapabilities``.
    """

    code = MISSING_CLIENT_CAPABILITY

    def __init__(self, message: str, *, key: str, method: str, required: Mapping[str, Any]) -> None:
        super().__init__(
            message,
            key=key,
            method=method,
            data={"requiredCapabilities": dict(required)},
        )
        self.required = dict(required)


class AppResultRefused(MrtrError):
    """The server app's result, or its request to the client, breaks a rule the server
    owes the client, so the connection refused to send it.

    Not a protocol error of either side: the app produced it, and the peer is
    still owed an answer.  ``code`` and ``data`` are what the peer should be told
    instead (``error_response(request_id, exc)``): -32021 with
    ``data.requiredCapabilities`` for input the request did not declare, -32603
    for the rest.
    """


class PeerError(MrtrError):
    """The peer answered a leg with a JSON-RPC error response."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message, code=code, data=data)


class RoundLimitExceeded(MrtrError):
    """A flow asked for more rounds (or legs) than its configured cap.

    ``limit_name`` is the option that was exceeded (``"max_rounds"``,
    ``"max_state_only_legs"`` or ``"max_leg_reissues"``) and ``last_result``
    the last ``input_required`` payload received, as a plain mapping (``None``
    for a reissue cap hit before any such result).
    """

    def __init__(self, limit_name: str, limit: int, last_result: Mapping[str, Any] | None) -> None:
        super().__init__(f"{limit_name}={limit} exceeded", code=INTERNAL_ERROR)
        self.limit_name = limit_name
        self.limit = limit
        self.last_result = last_result


class InputFailed(MrtrError):
    """The client could not produce the answer for ``key`` (``fail(key, reason)``)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"input {describe(key)} failed: {reason}", code=INTERNAL_ERROR)
        self.key = key
        self.reason = reason
