"""The codec: bytes <-> JSON-RPC messages, over both JSON backends."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.budget import examples

from mrtr_core import (
    ErrorObject,
    ErrorResponse,
    LocalProtocolError,
    Message,
    Notification,
    RemoteProtocolError,
    Request,
    ResultResponse,
)
from mrtr_core._errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR
from mrtr_core.wire import (
    Codec,
    ElicitFormRequest,
    ElicitUrlRequest,
    JsonBackend,
    ListRootsResult,
    Root,
    _codec,
    message_to_json,
)
from mrtr_core.wire._codec import (
    STDLIB_JSON,
    decode_message,
    default_codec,
    encode_message,
    json_backend,
    message_from_json,
)

BACKENDS: tuple[Literal["stdlib", "orjson"], ...] = ("stdlib", "orjson")
CODECS: dict[str, Codec] = {name: Codec(name) for name in BACKENDS}


@pytest.fixture(params=BACKENDS)
def codec(request: pytest.FixtureRequest) -> Codec:
    c = CODECS[request.param]
    assert c.backend.name == request.param
    return c


# --- the four message kinds -------------------------------------------------

DECODE_CASES: list[tuple[bytes, Message]] = [
    (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}',
        Request(id=1, method="tools/call", params={"name": "echo"}),
    ),
    (
        b'{"jsonrpc":"2.0","id":"abc","method":"server/discover"}',
        Request(id="abc", method="server/discover", params=None),
    ),
    (
        b'{"jsonrpc":"2.0","id":0,"method":"m","params":{}}',
        Request(id=0, method="m", params={}),
    ),
    (
        b'{"jsonrpc":"2.0","id":-7,"method":"m"}',
        Request(id=-7, method="m"),
    ),
    (
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}',
        Notification(method="notifications/cancelled", params={"requestId": 3}),
    ),
    (
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        Notification(method="notifications/initialized"),
    ),
    (
        b'{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","content":[]}}',
        ResultResponse(id=5, result={"resultType": "complete", "content": []}),
    ),
    (
        b'{"jsonrpc":"2.0","id":"r","result":{}}',
        ResultResponse(id="r", result={}),
    ),
    (
        b'{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"bad","data":{"x":[1]}}}',
        ErrorResponse(id=9, error=ErrorObject(code=-32602, message="bad", data={"x": [1]})),
    ),
    (
        b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}',
        ErrorResponse(error=ErrorObject(code=-32700, message="parse error")),
    ),
    (
        # "id": null is tolerated on receive and means "no id".
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}}',
        ErrorResponse(id=None, error=ErrorObject(code=-32600, message="no")),
    ),
    (
        # Members in another order, whitespace, and unknown top-level members.
        b' { "method" : "m" , "id" : "x", "jsonrpc" : "2.0", "x-extra": true }\n',
        Request(id="x", method="m"),
    ),
]


@pytest.mark.parametrize(("data", "expected"), DECODE_CASES)
def test_decode_message_kinds(codec: Codec, data: bytes, expected: Message) -> None:
    got = codec.decode(data)
    assert type(got) is type(expected)
    assert got == expected


@pytest.mark.parametrize(("data", "expected"), DECODE_CASES)
def test_decode_accepts_every_buffer_type(codec: Codec, data: bytes, expected: Message) -> None:
    assert codec.decode(bytearray(data)) == expected
    assert codec.decode(memoryview(data)) == expected
    assert codec.decode(data.decode("utf-8")) == expected


ENCODE_CASES: list[tuple[Message, bytes]] = [
    (
        Request(id=1, method="tools/call", params={"name": "echo", "arguments": {"a": [1, 2]}}),
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
        b'"params":{"name":"echo","arguments":{"a":[1,2]}}}',
    ),
    (Request(id="s", method="m"), b'{"jsonrpc":"2.0","id":"s","method":"m"}'),
    (Request(id=2, method="m", params={}), b'{"jsonrpc":"2.0","id":2,"method":"m","params":{}}'),
    (Notification(method="n"), b'{"jsonrpc":"2.0","method":"n"}'),
    (
        Notification(method="n", params={"k": None}),
        b'{"jsonrpc":"2.0","method":"n","params":{"k":null}}',
    ),
    (
        ResultResponse(id=3, result={"resultType": "complete", "f": 1.5, "b": False}),
        b'{"jsonrpc":"2.0","id":3,"result":{"resultType":"complete","f":1.5,"b":false}}',
    ),
    (
        ErrorResponse(id=4, error=ErrorObject(code=-32601, message="nope")),
        b'{"jsonrpc":"2.0","error":{"code":-32601,"message":"nope"},"id":4}',
    ),
    (
        ErrorResponse(error=ErrorObject(code=-32700, message="parse", data={"at": 0})),
        b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse","data":{"at":0}}}',
    ),
]


@pytest.mark.parametrize(("message", "expected"), ENCODE_CASES)
def test_encode_is_compact_and_exact(codec: Codec, message: Message, expected: bytes) -> None:
    got = codec.encode(message)
    assert got == expected
    assert not got.endswith(b"\n")
    assert codec.decode(got) == message


def test_error_response_without_id_omits_id(codec: Codec) -> None:
    message = ErrorResponse(error=ErrorObject(code=-32600, message="x"))
    as_json = message_to_json(message)
    assert "id" not in as_json
    assert b'"id"' not in codec.encode(message)
    assert b"null" not in codec.encode(message)


def test_error_data_null_is_omitted(codec: Codec) -> None:
    got = codec.decode(b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":null}}')
    assert got == ErrorResponse(id=1, error=ErrorObject(code=1, message="m"))
    assert b"data" not in codec.encode(got)


def test_error_data_falsy_values_are_kept(codec: Codec) -> None:
    data: Any
    for data in (0, False, "", [], {}):
        message = ErrorResponse(id=1, error=ErrorObject(code=1, message="m", data=data))
        got = codec.decode(codec.encode(message))
        assert isinstance(got, ErrorResponse)
        assert got.error.data == data
        assert type(got.error.data) is type(data)


def test_non_ascii_is_written_as_utf8(codec: Codec) -> None:
    message = Request(id=1, method="m", params={"name": "héllo ☃ 😀"})
    encoded = codec.encode(message)
    assert "héllo ☃ 😀".encode() in encoded
    assert b"\\u" not in encoded
    assert codec.decode(encoded) == message


def test_round_trip_keeps_unknown_keys(codec: Codec) -> None:
    params = {
        "name": "t",
        "arguments": {"deep": {"x-vendor": [1, {"y": None}]}},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "k": {}},
        "x-unknown": "kept",
    }
    result = {
        "resultType": "input_required",
        "inputRequests": {"a": {"method": "roots/list", "params": {"_meta": {"z": 1}}}},
        "requestState": "opaque\n\u2028state",
        "x-other": [True, False, None, 1.25, -3],
    }
    for message in (
        Request(id=1, method="tools/call", params=params),
        Notification(method="notifications/x", params=params),
        ResultResponse(id="q", result=result),
    ):
        assert codec.decode(codec.encode(message)) == message


def test_encoding_newlines_are_escaped(codec: Codec) -> None:
    message = Request(id="a\nb", method="line\r\none", params={"k\n": "v\r\n", "l": ["\n"]})
    encoded = codec.encode(message)
    assert b"\n" not in encoded
    assert b"\r" not in encoded
    assert b"\\n" in encoded
    assert b"\\r" in encoded
    assert codec.decode(encoded) == message


# --- hypothesis: round trips of JSON-ish values ------------------------------

_text = st.text(
    st.one_of(
        st.sampled_from('\n\r\t"\\/\x00\x1f\x7f\u2028\u2029é☃😀'),
        st.characters(exclude_categories=["Cs"]),
    ),
    max_size=12,
)
_ints = st.integers(min_value=-(2**63 - 1), max_value=2**63 - 1)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    _ints,
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
json_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_text, children, max_size=4),
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(_text, json_values, max_size=5)
request_ids = st.one_of(_ints, _text)

messages = st.one_of(
    st.builds(Request, id=request_ids, method=_text, params=st.one_of(st.none(), json_objects)),
    st.builds(Notification, method=_text, params=st.one_of(st.none(), json_objects)),
    st.builds(ResultResponse, id=request_ids, result=json_objects),
    st.builds(
        ErrorResponse,
        id=st.one_of(st.none(), request_ids),
        error=st.builds(ErrorObject, code=_ints, message=_text, data=json_values),
    ),
)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(times=2.5), deadline=None)
@given(message=messages)
def test_round_trip_property(backend: str, message: Message) -> None:
    codec = CODECS[backend]
    encoded = codec.encode(message)
    assert isinstance(encoded, bytes)
    assert b"\n" not in encoded
    assert b"\r" not in encoded
    assert codec.decode(encoded) == message
    # The other backend reads the same bytes to the same message.
    other = CODECS["orjson" if backend == "stdlib" else "stdlib"]
    assert other.decode(encoded) == message


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(times=2), deadline=None)
@given(value=json_values)
def test_dumps_loads_property(backend: str, value: Any) -> None:
    codec = CODECS[backend]
    encoded = codec.dumps(value)
    assert b"\n" not in encoded
    assert b"\r" not in encoded
    assert codec.loads(encoded) == value


# --- bad input ----------------------------------------------------------------

VALID = b'{"jsonrpc":"2.0","id":1,"method":"m"}'

PARSE_ERRORS = [
    pytest.param(b"", id="empty"),
    pytest.param(b"   ", id="blank"),
    pytest.param(b'{"jsonrpc":"2.0",', id="truncated"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"m"} {}', id="trailing-data"),
    pytest.param(b"{'jsonrpc':'2.0'}", id="single-quotes"),
    pytest.param(b"\xff\xfe{}", id="invalid-utf8"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\xc3"}', id="invalid-utf8-in-string"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"result":{"x":NaN}}', id="nan"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"result":{"x":Infinity}}', id="infinity"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"result":{"x":-Infinity}}', id="neg-infinity"),
    pytest.param(b"NaN", id="bare-nan"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"result":{"x":1e400}}', id="float-overflow"),
    pytest.param(b'{"jsonrpc":"2.0","id":1,"result":{"x":-1e400}}', id="neg-float-overflow"),
    pytest.param(b"\xef\xbb\xbf" + VALID, id="utf8-bom"),
    pytest.param(b"[" * 100_000, id="deep-array"),
    pytest.param(b'{"a":' * 100_000, id="deep-object"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep-balanced"),
]


@pytest.mark.parametrize("data", PARSE_ERRORS)
def test_parse_errors(codec: Codec, data: bytes) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        codec.decode(data)
    assert info.value.code == PARSE_ERROR
    assert info.value.request_id is None
    assert isinstance(info.value.__cause__, (ValueError, TypeError, RecursionError))


def test_parse_error_bom_in_text(codec: Codec) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        codec.decode("\ufeff" + VALID.decode())
    assert info.value.code == PARSE_ERROR


def test_big_float_within_range_is_accepted(codec: Codec) -> None:
    got = codec.decode(b'{"jsonrpc":"2.0","id":1,"result":{"x":1.7976931348623157e308,"y":1e-400}}')
    assert isinstance(got, ResultResponse)
    assert got.result == {"x": 1.7976931348623157e308, "y": 0.0}


INVALID_REQUESTS: list[Any] = [
    # (json text, request_id expected on the error)
    pytest.param(b'"hello"', None, id="string"),
    pytest.param(b"42", None, id="number"),
    pytest.param(b"null", None, id="null"),
    pytest.param(b"true", None, id="bool"),
    pytest.param(b"[" + VALID + b"]", None, id="batch"),
    pytest.param(b"[]", None, id="empty-batch"),
    pytest.param(b'{"id":1,"method":"m"}', 1, id="jsonrpc-missing"),
    pytest.param(b'{"jsonrpc":"1.0","id":"a","method":"m"}', "a", id="jsonrpc-1.0"),
    pytest.param(b'{"jsonrpc":2.0,"id":1,"method":"m"}', 1, id="jsonrpc-number"),
    pytest.param(b'{"jsonrpc":null,"method":"m"}', None, id="jsonrpc-null-notification"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":5}', 7, id="method-number"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":null}', 7, id="method-null"),
    pytest.param(b'{"jsonrpc":"2.0","method":["m"]}', None, id="method-list-notification"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,"method":"m","result":{}}', 7, id="method-and-result"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":7,"method":"m","error":{"code":1,"message":"x"}}',
        7,
        id="method-and-error",
    ),
    pytest.param(b'{"jsonrpc":"2.0","id":null,"method":"m"}', None, id="request-id-null"),
    pytest.param(b'{"jsonrpc":"2.0","id":true,"method":"m"}', None, id="request-id-true"),
    pytest.param(b'{"jsonrpc":"2.0","id":false,"method":"m"}', None, id="request-id-false"),
    pytest.param(b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', None, id="request-id-float"),
    pytest.param(b'{"jsonrpc":"2.0","id":1.0,"method":"m"}', None, id="request-id-float-int"),
    pytest.param(b'{"jsonrpc":"2.0","id":{},"method":"m"}', None, id="request-id-object"),
    pytest.param(b'{"jsonrpc":"2.0","id":[1],"method":"m"}', None, id="request-id-array"),
    pytest.param(b'{"jsonrpc":"2.0","result":{}}', None, id="result-without-id"),
    pytest.param(b'{"jsonrpc":"2.0","id":null,"result":{}}', None, id="result-id-null"),
    pytest.param(b'{"jsonrpc":"2.0","id":true,"result":{}}', None, id="result-id-bool"),
    pytest.param(b'{"jsonrpc":"2.0","id":2.5,"result":{}}', None, id="result-id-float"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"x"}}',
        3,
        id="result-and-error",
    ),
    pytest.param(b'{"jsonrpc":"2.0","id":3}', 3, id="neither"),
    pytest.param(b'{"jsonrpc":"2.0"}', None, id="neither-no-id"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"result":[1]}', 3, id="result-array"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"result":"ok"}', 3, id="result-string"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"result":null}', 3, id="result-null"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"error":"boom"}', 3, id="error-string"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"error":null}', 3, id="error-null"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"error":[]}', 3, id="error-array"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"error":{"message":"x"}}', 3, id="error-no-code"),
    pytest.param(b'{"jsonrpc":"2.0","id":3,"error":{"code":1}}', 3, id="error-no-message"),
    pytest.param(
        b'{"jsonrpc":"2.0","id":3,"error":{"code":"1","message":"x"}}', 3, id="error-code-string"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":3,"error":{"code":true,"message":"x"}}', 3, id="error-code-bool"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":3,"error":{"code":1.5,"message":"x"}}', 3, id="error-code-float"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":7}}', 3, id="error-message-int"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","error":{"code":1,"message":null}}', None, id="error-message-null"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":true,"error":{"code":1,"message":"x"}}', None, id="error-id-bool"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":1.5,"error":{"code":1,"message":"x"}}', None, id="error-id-float"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":{},"error":{"code":1,"message":"x"}}', None, id="error-id-object"
    ),
]


@pytest.mark.parametrize(("data", "request_id"), INVALID_REQUESTS)
def test_invalid_requests(codec: Codec, data: bytes, request_id: Any) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        codec.decode(data)
    assert info.value.code == INVALID_REQUEST
    assert info.value.request_id == request_id
    assert type(info.value.request_id) is type(request_id)


INVALID_PARAMS_CASES: list[Any] = [
    pytest.param(b'{"jsonrpc":"2.0","id":9,"method":"m","params":[1,2]}', 9, id="array"),
    pytest.param(b'{"jsonrpc":"2.0","id":"p","method":"m","params":"x"}', "p", id="string"),
    pytest.param(b'{"jsonrpc":"2.0","id":9,"method":"m","params":5}', 9, id="number"),
    pytest.param(b'{"jsonrpc":"2.0","id":9,"method":"m","params":false}', 9, id="bool"),
    pytest.param(b'{"jsonrpc":"2.0","method":"n","params":[]}', None, id="notification"),
    # An unreadable id is not reported even though the params problem is found first.
    pytest.param(b'{"jsonrpc":"2.0","id":true,"method":"m","params":[]}', None, id="bad-id"),
]


@pytest.mark.parametrize(("data", "request_id"), INVALID_PARAMS_CASES)
def test_params_not_an_object(codec: Codec, data: bytes, request_id: Any) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        codec.decode(data)
    assert info.value.code == INVALID_PARAMS
    assert info.value.request_id == request_id


def test_message_from_json_classifies_plain_values() -> None:
    assert message_from_json({"jsonrpc": "2.0", "id": 1, "method": "m"}) == Request(
        id=1, method="m"
    )
    with pytest.raises(RemoteProtocolError) as info:
        message_from_json((1, 2))
    assert info.value.code == INVALID_REQUEST
    with pytest.raises(RemoteProtocolError) as info:
        message_from_json(types.MappingProxyType({"jsonrpc": "2.0", "method": "m"}))
    assert info.value.code == INVALID_REQUEST


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(times=3), deadline=None)
@given(data=st.binary(max_size=64))
def test_arbitrary_bytes_only_raise_remote_protocol_error(backend: str, data: bytes) -> None:
    try:
        got = CODECS[backend].decode(data)
    except RemoteProtocolError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS)
    else:
        assert isinstance(got, (Request, Notification, ResultResponse, ErrorResponse))


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(times=3), deadline=None)
@given(text=st.text(st.sampled_from('{}[]":,0123456789.eE+-truefalsnl \\u\n\t') | st.characters()))
def test_arbitrary_text_only_raises_remote_protocol_error(backend: str, text: str) -> None:
    try:
        got = CODECS[backend].decode(text)
    except RemoteProtocolError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS)
    else:
        assert isinstance(got, (Request, Notification, ResultResponse, ErrorResponse))


_envelope_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"])
_envelope_values = st.one_of(
    st.just("2.0"),
    st.just({"code": -1, "message": "m"}),
    st.dictionaries(_envelope_keys | _text, json_values, max_size=3),
    json_values,
)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(times=3), deadline=None)
@given(obj=st.dictionaries(_envelope_keys, _envelope_values, max_size=6))
def test_json_shaped_fuzz(backend: str, obj: dict[str, Any]) -> None:
    """Valid JSON is never a parse error; what decodes re-encodes to the same message."""
    codec = CODECS[backend]
    data = json.dumps(obj).encode()
    try:
        got = codec.decode(data)
    except RemoteProtocolError as exc:
        assert exc.code in (INVALID_REQUEST, INVALID_PARAMS)
        rid = obj.get("id")
        if exc.request_id is not None:
            assert exc.request_id == rid
            assert not isinstance(rid, bool)
    else:
        assert codec.decode(codec.encode(got)) == got


# --- encoding -----------------------------------------------------------------


class _Unserialisable:
    pass


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(object(), id="object"),
        pytest.param(_Unserialisable(), id="custom-class"),
        pytest.param({1, 2}, id="set"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param(1 + 2j, id="complex"),
        pytest.param(STDLIB_JSON, id="attrs-with-callables"),
    ],
)
def test_encode_unserialisable_raises_local_error(codec: Codec, value: Any) -> None:
    with pytest.raises(LocalProtocolError) as info:
        codec.encode(Request(id=1, method="m", params={"v": value}))
    assert isinstance(info.value.__cause__, (TypeError, ValueError))


def test_encode_circular_and_too_deep_raise_local_error(codec: Codec) -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(LocalProtocolError):
        codec.encode(ResultResponse(id=1, result=circular))
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(LocalProtocolError):
        codec.encode(ResultResponse(id=1, result={"deep": deep}))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_stdlib_refuses_non_finite_floats(value: float) -> None:
    with pytest.raises(LocalProtocolError):
        CODECS["stdlib"].encode(Request(id=1, method="m", params={"x": value}))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_orjson_writes_non_finite_floats_as_null(value: float) -> None:
    # A documented difference between the backends (see the _codec docstring).
    encoded = CODECS["orjson"].encode(Request(id=1, method="m", params={"x": value}))
    assert encoded == b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":null}}'


def test_big_integers_differ_by_backend() -> None:
    big = 2**70
    message = ResultResponse(id=1, result={"n": big})
    encoded = CODECS["stdlib"].encode(message)
    assert encoded == b'{"jsonrpc":"2.0","id":1,"result":{"n":1180591620717411303424}}'
    assert CODECS["stdlib"].decode(encoded) == message
    with pytest.raises(LocalProtocolError):
        CODECS["orjson"].encode(message)
    # orjson reads an integer beyond 64 bits as a float.
    got = CODECS["orjson"].decode(encoded)
    assert isinstance(got, ResultResponse)
    assert isinstance(got.result["n"], float)


def test_lone_surrogates_differ_by_backend() -> None:
    data = b'{"jsonrpc":"2.0","id":1,"result":{"s":"\\ud800"}}'
    got = CODECS["stdlib"].decode(data)
    assert got == ResultResponse(id=1, result={"s": "\ud800"})
    # The stdlib backend escapes the surrogate rather than failing, so it round trips.
    encoded = CODECS["stdlib"].encode(got)
    assert b"\\ud800" in encoded
    assert b"\n" not in encoded
    assert CODECS["stdlib"].decode(encoded) == got
    with pytest.raises(RemoteProtocolError) as info:
        CODECS["orjson"].decode(data)
    assert info.value.code == PARSE_ERROR
    with pytest.raises(LocalProtocolError):
        CODECS["orjson"].encode(got)


def test_stdlib_surrogate_fallback_still_refuses_nan() -> None:
    with pytest.raises(LocalProtocolError):
        CODECS["stdlib"].encode(
            Request(id=1, method="m", params={"s": "\udfff", "x": float("nan")})
        )


def test_message_to_json_refuses_non_messages() -> None:
    for value in (None, {"jsonrpc": "2.0"}, "m", ErrorObject(code=1, message="m")):
        with pytest.raises(LocalProtocolError, match="not a message"):
            message_to_json(value)  # type: ignore[arg-type]


def test_encode_refuses_non_messages(codec: Codec) -> None:
    with pytest.raises(LocalProtocolError):
        codec.encode({"jsonrpc": "2.0", "id": 1, "method": "m"})  # type: ignore[arg-type]


def test_message_to_json_leaves_params_as_given() -> None:
    params = types.MappingProxyType({"a": 1})
    out = message_to_json(Request(id=1, method="m", params=params))
    assert out == {"jsonrpc": "2.0", "id": 1, "method": "m", "params": params}
    assert out["params"] is params


class _CustomMapping(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_non_dict_mappings_are_encoded(codec: Codec) -> None:
    params = types.MappingProxyType(
        {"inner": types.MappingProxyType({"x": [1, _CustomMapping({"y": "z"})]})}
    )
    encoded = codec.encode(Request(id=1, method="m", params=params))
    assert (
        encoded == b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"inner":{"x":[1,{"y":"z"}]}}}'
    )
    assert codec.decode(encoded) == Request(
        id=1, method="m", params={"inner": {"x": [1, {"y": "z"}]}}
    )


def test_result_mapping_proxy_is_encoded(codec: Codec) -> None:
    encoded = codec.encode(ResultResponse(id=1, result=_CustomMapping({"ok": True})))
    assert encoded == b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}'


def test_model_objects_inside_params_are_encoded(codec: Codec) -> None:
    params = {
        "form": ElicitFormRequest(
            message="Name?",
            requested_schema={"type": "object", "properties": {}},
            extra={"_meta": {"k": 1}},
        ),
        "url": ElicitUrlRequest(message="Go", url="https://example.com/x"),
        "roots": ListRootsResult(roots=[Root(uri="file:///a", name="A"), Root(uri="file:///b")]),
    }
    encoded = codec.encode(Request(id=1, method="m", params=params))
    decoded = codec.decode(encoded)
    assert isinstance(decoded, Request)
    assert decoded.params == {
        "form": {
            "_meta": {"k": 1},
            "message": "Name?",
            "requestedSchema": {"type": "object", "properties": {}},
        },
        "url": {"message": "Go", "url": "https://example.com/x", "mode": "url"},
        "roots": {"roots": [{"uri": "file:///a", "name": "A"}, {"uri": "file:///b"}]},
    }


def test_non_string_keys_become_strings(codec: Codec) -> None:
    assert codec.dumps({1: "a"}) == b'{"1":"a"}'


def test_dumps_and_loads_direct(codec: Codec) -> None:
    assert codec.dumps([1, "x", None, True, 1.5]) == b'[1,"x",null,true,1.5]'
    assert codec.loads(b" [1, 2] ") == [1, 2]
    assert codec.loads("[]") == []
    with pytest.raises(RemoteProtocolError) as info:
        codec.loads(b"[")
    assert info.value.code == PARSE_ERROR


# --- backends -----------------------------------------------------------------


def test_auto_prefers_orjson_when_installed() -> None:
    backend = json_backend("auto")
    assert backend.name == "orjson"
    assert json_backend().name == "orjson"
    assert Codec().backend.name == "orjson"
    assert default_codec.backend.name == "orjson"
    assert json_backend("orjson").name == "orjson"


def test_stdlib_is_always_stdlib(monkeypatch: pytest.MonkeyPatch) -> None:
    assert json_backend("stdlib") is STDLIB_JSON
    assert Codec("stdlib").backend is STDLIB_JSON
    monkeypatch.setitem(sys.modules, "orjson", None)
    assert json_backend("stdlib") is STDLIB_JSON


def test_orjson_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "orjson", None)
    assert _codec._load_orjson() is None
    assert json_backend("auto") is STDLIB_JSON
    assert Codec().backend is STDLIB_JSON
    with pytest.raises(LocalProtocolError, match="orjson is not installed"):
        json_backend("orjson")
    with pytest.raises(LocalProtocolError):
        Codec("orjson")


def test_unknown_backend_name_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="unknown JSON backend"):
        json_backend("simdjson")  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        Codec("ujson")  # type: ignore[arg-type]


def test_custom_backend_is_used() -> None:
    calls: list[str] = []

    def loads(data: bytes | str) -> Any:
        calls.append("loads")
        return json.loads(data)

    def dumps(obj: Any) -> bytes:
        calls.append("dumps")
        return json.dumps(obj, separators=(",", ":")).encode()

    backend = JsonBackend("custom", loads, dumps)
    codec = Codec(backend)
    assert codec.backend is backend
    message = Request(id=1, method="m")
    assert codec.decode(codec.encode(message)) == message
    assert calls == ["dumps", "loads"]


def test_backend_type_error_is_a_parse_error() -> None:
    def loads(data: bytes | str) -> Any:
        raise TypeError("nope")

    codec = Codec(JsonBackend("broken", loads, STDLIB_JSON.dumps))
    with pytest.raises(RemoteProtocolError) as info:
        codec.decode(b"{}")
    assert info.value.code == PARSE_ERROR


def test_module_functions_use_the_default_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    message = Request(id="d", method="m", params={"é": "\n"})
    encoded = encode_message(message)
    assert encoded == default_codec.encode(message)
    assert decode_message(encoded) == message
    assert decode_message(bytearray(encoded)) == message

    seen: list[str] = []

    def loads(data: bytes | str) -> Any:
        seen.append("loads")
        return STDLIB_JSON.loads(data)

    def dumps(obj: Any) -> bytes:
        seen.append("dumps")
        return STDLIB_JSON.dumps(obj)

    monkeypatch.setattr(_codec, "default_codec", Codec(JsonBackend("spy", loads, dumps)))
    assert decode_message(encode_message(message)) == message
    assert seen == ["dumps", "loads"]


def test_an_answer_of_dict_subclasses_is_read_by_the_full_path() -> None:
    # (What json and orjson never produce, but an adapter's decoded value may hold.)
    from collections import OrderedDict

    from mrtr_core.wire._codec import message_from_json as classify

    value = OrderedDict(jsonrpc="2.0", id=3, result=OrderedDict(content=[]))
    message = classify(value)
    assert isinstance(message, ResultResponse) and message.id == 3
    assert message.result == {"content": []}
    plain = classify({"jsonrpc": "2.0", "id": 4, "result": OrderedDict(a=1)})
    assert isinstance(plain, ResultResponse) and plain.result == {"a": 1}
