"""Deep and odd peer values on the wire: the depth bound, and how errors show a peer's value.

A message nested deeper than the codec's ``max_depth`` is a -32700 parse error
on both JSON backends, the way a backend's own depth refusal is.  Whatever a
peer sends, an error message shows it through ``describe``: short, and never
a ``RecursionError``.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Literal

import pytest

from mrtr_core import LocalProtocolError, RemoteProtocolError, Request, ResultResponse
from mrtr_core._errors import INVALID_PARAMS, PARSE_ERROR, describe
from mrtr_core.wire import (
    Codec,
    CreateMessageRequest,
    ElicitResult,
    structure,
    structure_input_request,
)
from mrtr_core.wire._depth import DEFAULT_MAX_DEPTH, deeper_than, may_be_deeper

BACKENDS: tuple[Literal["stdlib", "orjson"], ...] = ("stdlib", "orjson")


def nested_list(depth: int, leaf: Any = 0) -> Any:
    """A value ``depth`` arrays deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_text(depth: int) -> bytes:
    return b"[" * depth + b"0" + b"]" * depth


def request_with_arguments(arguments: bytes) -> bytes:
    # The request is 3 deep (envelope, params, arguments) before the arguments' own depth.
    return (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call",'
        b'"params":{"name":"t","arguments":{"a":%s}}}' % arguments
    )


# --- describe -----------------------------------------------------------------------


def test_describe_shows_scalars_as_their_repr() -> None:
    assert describe("form") == "'form'"
    assert describe(5) == "5"
    assert describe(-2.5) == "-2.5"
    assert describe(True) == "True"
    assert describe(None) == "None"


def test_describe_cuts_long_strings_and_huge_integers() -> None:
    shown = describe("x" * 10_000_000)
    assert shown == "'" + "x" * 40 + "'…"
    assert describe(10**5000) == "<int of 16610 bits>"  # repr would raise past 4300 digits
    assert describe(2**128 - 1) == str(2**128 - 1)
    assert describe(2**128) == "<int of 129 bits>"


def test_describe_shows_two_levels_and_three_items_of_containers() -> None:
    assert describe([]) == "list []"
    assert describe({}) == "dict {}"
    assert describe(()) == "tuple []"
    assert describe([1, [2, [3, [4]]]]) == "list [1, [2, […]]]"
    assert describe({"a": {"b": {"c": 1}}, "x": [1, 2, 3, 4], "y": {}, "z": 0}) == (
        "dict {'a': {'b': {…}}, 'x': [1, 2, 3, …], 'y': {}, …}"
    )


def test_describe_stays_short_and_shallow_however_big_or_deep_the_value() -> None:
    for value in (
        nested_list(100_000),
        [["y" * 1000] * 1000] * 1000,
        {f"k{i}" * 100: nested_list(50_000) for i in range(10)},
    ):
        shown = describe(value)
        assert len(shown) <= 120
    assert describe(nested_list(100_000)) == "list [[[…]]]"
    assert describe([["y" * 100] * 5] * 5).endswith("…")


def test_describe_names_other_objects_by_type_alone() -> None:
    class Hostile:
        def __repr__(self) -> str:  # pragma: no cover - never called, which is the point
            raise AssertionError("describe must not call a foreign repr")

    assert describe(Hostile()) == "<Hostile>"
    assert describe([Hostile()]) == "list [<Hostile>]"


# --- the depth helpers --------------------------------------------------------------


def test_depth_counts_objects_and_arrays() -> None:
    assert not deeper_than(5, 0)
    assert not deeper_than({}, 1)
    assert deeper_than({"a": []}, 1)
    assert not deeper_than({"a": [1, {"b": "c"}]}, 3)
    assert deeper_than({"a": [1, {"b": {}}]}, 3)
    assert deeper_than(nested_list(100_000), 128)  # no recursion, however deep
    assert not deeper_than(nested_list(128), 128)
    assert deeper_than(nested_list(129), 128)
    wide = [[0] * 100_000, [[[]]]]
    assert deeper_than(wide, 3) and not deeper_than(wide, 4)


def test_a_value_that_contains_itself_is_too_deep() -> None:
    loop: dict[str, Any] = {}
    loop["a"] = loop
    loop["b"] = loop  # two ways down at every level: still found in max_depth steps
    assert deeper_than(loop, 128)
    ring: list[Any] = []
    ring.append(ring)
    assert deeper_than((ring,), 5)


def test_the_pre_check_only_clears_texts_that_cannot_be_deeper() -> None:
    assert not may_be_deeper(b'{"a":[1,2]}', 2)
    assert may_be_deeper(b'{"a":[1,[2]]}', 2)
    assert may_be_deeper(b'{"a":"[[["}', 2)  # brackets in strings count: a conservative yes
    assert not may_be_deeper('{"a":[1]}', 2)
    assert may_be_deeper("[[[", 2)


# --- the codec's bound ----------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_codec_refuses_a_message_deeper_than_max_depth(backend: str) -> None:
    codec = Codec(backend)  # type: ignore[arg-type]
    assert codec.max_depth == DEFAULT_MAX_DEPTH == 128
    fits = request_with_arguments(nested_text(DEFAULT_MAX_DEPTH - 3))  # 128 in all
    assert isinstance(codec.decode(fits), Request)
    too_deep = request_with_arguments(nested_text(DEFAULT_MAX_DEPTH - 2))
    for data in (too_deep, too_deep.decode(), bytearray(too_deep), memoryview(too_deep)):
        with pytest.raises(RemoteProtocolError) as info:
            codec.decode(data)
        assert info.value.code == PARSE_ERROR
        assert info.value.request_id == 7  # parsed, so refused under its id
        assert "deeper than max_depth=128" in info.value.message
    # Nothing is held: the next message decodes.
    assert isinstance(codec.decode(fits), Request)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("depth", [500, 990, 1000, 1024, 1030, 5000, 100_000])
def test_messages_nested_as_deep_as_the_backends_go_are_parse_errors(
    backend: str, depth: int
) -> None:
    # orjson parses 1024 levels and refuses more; the standard library goes until the
    # recursion limit.  Every one of them is the same -32700 with a short message.
    codec = Codec(backend)  # type: ignore[arg-type]
    with pytest.raises(RemoteProtocolError) as info:
        codec.decode(request_with_arguments(nested_text(depth)))
    assert info.value.code == PARSE_ERROR
    assert len(info.value.message) < 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_depth_is_configurable(backend: str) -> None:
    codec = Codec(backend, max_depth=4)  # type: ignore[arg-type]
    four = b'{"jsonrpc":"2.0","id":1,"result":{"a":{"b":[]}}}'
    assert isinstance(codec.decode(four), ResultResponse)
    with pytest.raises(RemoteProtocolError, match="max_depth=4"):
        codec.decode(b'{"jsonrpc":"2.0","id":1,"result":{"a":{"b":[[]]}}}')
    with pytest.raises(RemoteProtocolError, match="max_depth=4"):
        codec.loads(b"[[[[[]]]]]")
    codec.check_depth(json.loads(four))
    with pytest.raises(RemoteProtocolError, match="max_depth=4"):
        codec.check_depth(nested_list(5))
    deep = Codec(backend, max_depth=1000)  # type: ignore[arg-type]
    assert deep.loads(nested_text(900)) == nested_list(900)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "128", None])
def test_max_depth_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(LocalProtocolError, match="max_depth must be a positive integer"):
        Codec("stdlib", max_depth=bad)


# --- structuring shows peer values bounded ----------------------------------------------


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_a_deep_value_in_a_literal_field_is_refused_with_a_short_message(depth: int) -> None:
    for raw, cls in (
        ({"action": nested_list(depth)}, ElicitResult),
        (
            {"messages": [], "maxTokens": 5, "includeContext": nested_list(depth)},
            CreateMessageRequest,
        ),
    ):
        with pytest.raises(RemoteProtocolError) as info:
            structure(raw, cls)
        assert info.value.code == INVALID_PARAMS
        assert "got list [[[…]]]" in info.value.message
        assert not isinstance(info.value.__cause__, RecursionError)


def test_a_literal_field_takes_exactly_its_options() -> None:
    assert structure({"action": "accept"}, ElicitResult).action == "accept"
    with pytest.raises(RemoteProtocolError) as info:
        structure({"action": "z" * 1_000_000}, ElicitResult)
    assert info.value.message == (
        "invalid ElicitResult: expected one of 'accept', 'decline', 'cancel', got "
        "'" + "z" * 40 + "'…"
    )


def test_a_structuring_failure_repeats_at_most_200_characters_of_its_reason() -> None:
    # cattrs' enum hook puts the whole value in its message; ours is cut.
    class Colour(enum.Enum):
        RED = "red"

    with pytest.raises(RemoteProtocolError) as info:
        structure("q" * 100_000, Colour)
    assert info.value.code == INVALID_PARAMS
    assert len(info.value.message) == len("invalid Colour: ") + 200
    assert info.value.message.endswith("q…")


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_an_input_request_with_a_deep_method_or_mode_is_refused_with_a_short_message(
    depth: int,
) -> None:
    deep = nested_list(depth)
    with pytest.raises(RemoteProtocolError) as info:
        structure_input_request({"method": deep, "params": {}})
    assert info.value.message == "unknown input request method list [[[…]]]"
    with pytest.raises(RemoteProtocolError) as info:
        structure_input_request({"method": "elicitation/create", "params": {"mode": deep}})
    assert info.value.message == "unknown elicitation mode list [[[…]]]"
    with pytest.raises(RemoteProtocolError) as info:
        structure_input_request({"method": "m" * 1_000_000, "params": {}})
    assert len(info.value.message) < 100


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_huge_number_literal_is_refused_with_a_short_message(backend: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        Codec(backend).loads(b"[1" + b"0" * 100_000 + b"e400]")  # type: ignore[arg-type]
    assert info.value.code == PARSE_ERROR
    assert len(info.value.message) < 300
