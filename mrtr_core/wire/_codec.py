"""Bytes <-> messages.

The codec turns one complete JSON-RPC message (a line without its newline, an
HTTP body, an SSE ``data`` payload, a WebSocket text frame) into a
:data:`~mrtr_core.Message` and back.  Framing is not its business.

JSON backend: the standard library by default; ``orjson`` transparently when it
is installed (the ``speedups`` extra).  Both refuse ``NaN``/``Infinity`` and
invalid UTF-8 on input, and both write compact UTF-8 in which every newline is
escaped, which is what newline-delimited framing relies on.  Known differences,
kept because hiding them would cost the fast path: orjson reads integers beyond
64 bits as floats and refuses to write them, writes a non-finite float as
``null`` where the standard library raises, and refuses escaped lone surrogates
(``"\\ud800"``) that the standard library accepts.

Depth: a message nested deeper than ``max_depth`` (128 by default) is refused
as a parse error (-32700), exactly as the backends refuse what is deeper than
they parse at all (orjson: 1024 levels).  The check costs two byte counts on
the usual message: only a text with more than ``max_depth`` opening brackets
is walked (iteratively) after parsing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from .._errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    LocalProtocolError,
    RemoteProtocolError,
    describe,
)
from ._convert import unstructure
from ._depth import DEFAULT_MAX_DEPTH, check_max_depth, deeper_than, may_be_deeper
from ._model import (
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    ResultResponse,
)

JsonName = Literal["auto", "stdlib", "orjson"]


def _default(obj: Any) -> Any:
    """Serialise what JSON libraries do not know: other mappings and model objects."""
    if isinstance(obj, Mapping):
        return dict(obj)
    if attrs.has(type(obj)):
        return unstructure(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # A literal such as 1e400 overflows to inf, which could never be written back
    # (orjson refuses it on input too).
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{describe(text)} is out of range for a double")
    return value


_stdlib_decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_stdlib_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_default
)


def _stdlib_loads(data: bytes | str) -> Any:
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    return _stdlib_decoder.decode(text)


def _stdlib_dumps(obj: Any) -> bytes:
    text = _stdlib_encoder.encode(obj)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (only the stdlib reader lets one in): escape it rather than fail.
        return json.dumps(obj, allow_nan=False, separators=(",", ":"), default=_default).encode()


def _load_orjson() -> Any:
    """The orjson module, or ``None`` when the ``speedups`` extra is not installed."""
    try:
        import orjson
    except ImportError:
        return None
    return orjson


@attrs.frozen
class JsonBackend:
    """A pair of ``loads(bytes | str)`` and ``dumps(obj) -> bytes``."""

    name: str
    loads: Callable[[bytes | str], Any]
    dumps: Callable[[Any], bytes]


STDLIB_JSON = JsonBackend("stdlib", _stdlib_loads, _stdlib_dumps)
# Made once, on first use: the same backend for every codec that asks for orjson.
_orjson_backend: JsonBackend | None = None


def json_backend(name: JsonName = "auto") -> JsonBackend:
    """The backend called ``name``; ``"auto"`` prefers orjson when installed."""
    if name == "stdlib":
        return STDLIB_JSON
    if name not in ("auto", "orjson"):
        raise LocalProtocolError(f"unknown JSON backend {name!r}")
    orjson = _load_orjson()
    if orjson is None:
        if name == "orjson":
            raise LocalProtocolError("orjson is not installed (pip install 'mrtr[speedups]')")
        return STDLIB_JSON
    global _orjson_backend
    if _orjson_backend is None:
        options = orjson.OPT_NON_STR_KEYS
        dumps = orjson.dumps

        def orjson_dumps(obj: Any) -> bytes:
            return dumps(obj, default=_default, option=options)  # type: ignore[no-any-return]

        _orjson_backend = JsonBackend("orjson", orjson.loads, orjson_dumps)
    return _orjson_backend


def writes_compact(backend: JsonBackend) -> bool:
    """Whether ``backend`` is one of ours, known to write compact JSON (an object is
    ``{`` ... ``}`` with no space around), so encoded parts may be joined as bytes."""
    return backend is STDLIB_JSON or backend is _orjson_backend


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


class Codec:
    """Decode and encode single JSON-RPC messages with one JSON backend.

    ``decode`` raises :class:`RemoteProtocolError` (-32700 for bytes that are not
    JSON or nest deeper than ``max_depth``, -32600 for JSON that is not a
    JSON-RPC message, -32602 for non-object params), with ``request_id`` set when
    the id could be read.  ``encode`` raises :class:`LocalProtocolError` for
    values JSON cannot carry.
    """

    __slots__ = ("_dumps", "_loads", "backend", "max_depth")

    def __init__(
        self, json: JsonName | JsonBackend = "auto", *, max_depth: int = DEFAULT_MAX_DEPTH
    ) -> None:
        self.backend = json if isinstance(json, JsonBackend) else json_backend(json)
        self.max_depth = check_max_depth(max_depth)
        self._loads = self.backend.loads
        self._dumps = self.backend.dumps

    def loads(self, data: bytes | bytearray | memoryview | str) -> Any:
        """Parse JSON text; anything unparseable, or nested deeper than ``max_depth``,
        is a -32700 RemoteProtocolError."""
        raw = data if isinstance(data, (bytes, str)) else bytes(data)
        value = self.parse(raw)
        self.check_text_depth(raw, value)
        return value

    def parse(self, raw: bytes | str) -> Any:
        """Parse JSON text, not yet bounded in depth (``check_text_depth`` does that);
        anything unparseable is a -32700 RemoteProtocolError."""
        try:
            return self._loads(raw)
        except (ValueError, TypeError, RecursionError) as exc:
            # JSONDecodeError and UnicodeDecodeError too; RecursionError for deep nesting
            raise RemoteProtocolError(f"parse error: {exc}", code=PARSE_ERROR) from exc

    def check_text_depth(self, raw: bytes | str, value: Any) -> None:
        """``check_depth`` of ``value`` parsed from ``raw``, walked only when the text
        has more opening brackets than ``max_depth`` (so nearly never)."""
        if may_be_deeper(raw, self.max_depth):
            self.check_depth(value)

    def check_depth(self, value: Any) -> None:
        """Refuse a value (already parsed) nested deeper than ``max_depth``: -32700,
        as ``loads`` refuses its text."""
        if deeper_than(value, self.max_depth):
            # Parsed, so its id can be read: the request is refused, or the answer
            # fails the request it answers, under that id rather than none.
            raw_id = value.get("id") if isinstance(value, dict) else None
            raise RemoteProtocolError(
                f"parse error: the message nests deeper than max_depth={self.max_depth}",
                code=PARSE_ERROR,
                request_id=raw_id if _valid_id(raw_id) else None,
            )

    def dumps(self, obj: Any) -> bytes:
        """Compact UTF-8 JSON with no raw newline; unencodable values raise LocalProtocolError."""
        try:
            return self._dumps(obj)
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            raise LocalProtocolError(f"cannot encode as JSON: {exc}") from exc

    def decode(self, data: bytes | bytearray | memoryview | str) -> Message:
        """One JSON-RPC message from its bytes (no framing)."""
        return message_from_json(self.loads(data))

    def encode(self, message: Message) -> bytes:
        """One JSON-RPC message to bytes (no framing: no trailing newline)."""
        return self.dumps(message_to_json(message))


def message_from_json(obj: Any) -> Message:
    """Classify a parsed JSON value as one of the four JSON-RPC messages."""
    if type(obj) is dict and "result" in obj:
        # The usual message, an answer, read in one pass of plain type checks;
        # anything unusual about it (even a valid int subclass id) takes the full path.
        answered = obj.get("id")
        result = obj["result"]
        if (
            (type(answered) is int or type(answered) is str)
            and type(result) is dict
            and obj.get("jsonrpc") == "2.0"
            and "method" not in obj
            and "error" not in obj
        ):
            return ResultResponse(id=answered, result=result)
    if not isinstance(obj, dict):
        if isinstance(obj, list):
            raise RemoteProtocolError("JSON-RPC batches are not supported", code=INVALID_REQUEST)
        raise RemoteProtocolError("a JSON-RPC message must be an object", code=INVALID_REQUEST)
    raw_id = obj.get("id")
    rid: RequestId | None = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        raise RemoteProtocolError('"jsonrpc" must be "2.0"', code=INVALID_REQUEST, request_id=rid)
    if "method" in obj:
        return _request_or_notification(obj, rid)
    has_result = "result" in obj
    if has_result == ("error" in obj):
        raise RemoteProtocolError(
            "a message needs exactly one of method, result or error",
            code=INVALID_REQUEST,
            request_id=rid,
        )
    if has_result:
        result = obj["result"]
        if rid is None:
            raise RemoteProtocolError(
                "a result response needs a string or integer id", code=INVALID_REQUEST
            )
        if not isinstance(result, dict):
            raise RemoteProtocolError(
                "result must be an object", code=INVALID_REQUEST, request_id=rid
            )
        return ResultResponse(id=rid, result=result)
    if raw_id is not None and rid is None:
        raise RemoteProtocolError(
            "an error response id must be a string or integer", code=INVALID_REQUEST
        )
    return ErrorResponse(id=rid, error=_error_object(obj["error"], rid))


def _request_or_notification(obj: dict[str, Any], rid: RequestId | None) -> Message:
    method = obj["method"]
    if not isinstance(method, str) or "result" in obj or "error" in obj:
        raise RemoteProtocolError(
            "method must be a string, without result or error",
            code=INVALID_REQUEST,
            request_id=rid,
        )
    params = obj.get("params")
    if params is not None and not isinstance(params, dict):
        raise RemoteProtocolError("params must be an object", code=INVALID_PARAMS, request_id=rid)
    if "id" not in obj:
        return Notification(method=method, params=params)
    if rid is None:
        raise RemoteProtocolError("a request id must be a string or integer", code=INVALID_REQUEST)
    return Request(id=rid, method=method, params=params)


def _error_object(raw: Any, rid: RequestId | None) -> ErrorObject:
    if not isinstance(raw, dict):
        raise RemoteProtocolError("error must be an object", code=INVALID_REQUEST, request_id=rid)
    code = raw.get("code")
    message = raw.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
        raise RemoteProtocolError(
            "error needs an integer code and a string message",
            code=INVALID_REQUEST,
            request_id=rid,
        )
    return ErrorObject(code=code, message=message, data=raw.get("data"))


def message_to_json(message: Message) -> dict[str, Any]:
    """The plain JSON-RPC object for a message (``params`` left as given)."""
    if isinstance(message, Request):
        out: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": message.id,
            "method": message.method,
        }
        if message.params is not None:
            out["params"] = message.params
        return out
    if isinstance(message, ResultResponse):
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    if isinstance(message, Notification):
        out = {"jsonrpc": "2.0", "method": message.method}
        if message.params is not None:
            out["params"] = message.params
        return out
    if isinstance(message, ErrorResponse):
        error: dict[str, Any] = {
            "code": message.error.code,
            "message": message.error.message,
        }
        if message.error.data is not None:
            error["data"] = message.error.data
        out = {"jsonrpc": "2.0", "error": error}
        if message.id is not None:
            out["id"] = message.id
        return out
    raise LocalProtocolError(f"not a message: {type(message).__name__}")


default_codec = Codec()


def decode_message(data: bytes | bytearray | memoryview | str) -> Message:
    """Decode one message with the default codec (orjson when installed)."""
    return default_codec.decode(data)


def encode_message(message: Message) -> bytes:
    """Encode one message with the default codec (orjson when installed)."""
    return default_codec.encode(message)
