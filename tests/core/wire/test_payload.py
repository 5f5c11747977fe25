"""The generated payload hooks: the same checks and the same values as the generic
path they replace, for every kind of field the generator knows and the ones it does not."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.budget import examples

from mrtr_core import RemoteProtocolError
from mrtr_core._errors import INVALID_PARAMS
from mrtr_core.wire import (
    CreateMessageRequest,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    Root,
    structure,
    unstructure,
)
from mrtr_core.wire._convert import converter, unstructure_input_response
from mrtr_core.wire._payload import is_flat_object, make_structure, make_unstructure

JSONObject = Mapping[str, Any]


def _tags() -> list[str]:
    return ["default"]


@attrs.frozen(kw_only=True)
class Everything:
    """A payload class with every kind of field the generator treats apart (no class of
    the schema has a bool, a factory default or a literal of numbers)."""

    flag: bool
    count: int
    ratio: float | None = None
    tags: list[str] = attrs.field(factory=_tags)
    level: Literal[1, 2] = 1
    maybe_flag: bool | None = None
    extra: JSONObject = attrs.field(factory=dict, repr=False)


def test_a_custom_payload_class_structures_and_round_trips() -> None:
    raw = {
        "flag": True,
        "count": 3,
        "ratio": 2,
        "tags": ["a"],
        "level": 2,
        "maybe_flag": False,
        "unknown": {"x": 1},
    }
    got = structure(raw, Everything)
    assert got == Everything(
        flag=True,
        count=3,
        ratio=2,
        tags=["a"],
        level=2,
        maybe_flag=False,
        extra={"unknown": {"x": 1}},
    )
    assert unstructure(got) == raw


def test_defaults_fill_absent_fields_and_a_factory_is_called_each_time() -> None:
    first = structure({"flag": False, "count": 0}, Everything)
    second = structure({"flag": False, "count": 0}, Everything)
    assert first == Everything(flag=False, count=0)
    assert first.tags == ["default"] and first.tags is not second.tags
    assert first.extra == {}
    # Defaults are omitted on the way out, factory defaults included.
    assert unstructure(first) == {"flag": False, "count": 0}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"flag": 1, "count": 0}, "expected bool, got int"),
        ({"flag": True, "count": True}, "expected int, got bool"),
        ({"flag": True, "count": "1"}, "expected int, got str"),
        ({"flag": True, "count": 1, "maybe_flag": "yes"}, "expected bool, got str"),
        ({"flag": True, "count": 1, "ratio": True}, "expected float, got bool"),
        ({"flag": True, "count": 1, "tags": "abc"}, "expected an array, got str"),
        ({"flag": True}, "'count'"),
        ([("flag", True)], "expected an object, got list"),
    ],
)
def test_a_custom_payload_class_refuses_what_the_converter_refuses(raw: Any, reason: str) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        structure(raw, Everything)
    assert info.value.code == INVALID_PARAMS
    assert reason in info.value.message


def test_a_literal_of_numbers_goes_through_the_converter_hook() -> None:
    with pytest.raises(RemoteProtocolError, match="expected one of 1, 2, got"):
        structure({"flag": True, "count": 1, "level": 3}, Everything)
    with pytest.raises(RemoteProtocolError, match="expected one of 1, 2"):
        structure({"flag": True, "count": 1, "level": True}, Everything)


def test_a_string_literal_refuses_an_unhashable_value_with_the_usual_error() -> None:
    with pytest.raises(RemoteProtocolError) as info:
        structure({"action": ["accept"]}, ElicitResult)
    assert info.value.message.startswith("invalid ElicitResult: expected one of 'accept'")


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_a_string_literal_takes_exactly_its_strings(action: str) -> None:
    assert structure({"action": action}, ElicitResult) == ElicitResult(action=action)  # type: ignore[arg-type]

    class Text(str):
        pass

    with pytest.raises(RemoteProtocolError, match="expected one of"):
        structure({"action": Text(action)}, ElicitResult)


def test_unknown_keys_split_only_when_present_and_never_shadow_known_fields() -> None:
    plain = structure({"message": "m", "requestedSchema": {}}, ElicitFormRequest)
    assert plain.extra == {}
    mixed = structure({"_meta": {"a": 1}, "message": "m", "requestedSchema": {}}, ElicitFormRequest)
    assert mixed.extra == {"_meta": {"a": 1}} and mixed.message == "m"
    # A known field always wins over an unknown key of the same name in extra.
    assert unstructure(ElicitResult(action="decline", extra={"action": "accept", "y": 1})) == {
        "y": 1,
        "action": "decline",
    }


def test_any_mapping_is_read_and_a_json_object_field_is_kept_as_given() -> None:
    schema = types.MappingProxyType({"type": "object"})
    raw = types.MappingProxyType({"message": "m", "requestedSchema": schema})
    got = structure(raw, ElicitFormRequest)
    assert got.requested_schema is schema


def test_an_always_field_is_written_even_at_its_default() -> None:
    assert unstructure(ElicitUrlRequest(message="m", url="u")) == {
        "message": "m",
        "url": "u",
        "mode": "url",
    }


def test_a_flat_json_object_is_copied_and_a_nested_one_deeply() -> None:
    flat = {"confirm": True, "note": "x", "n": 1, "f": 1.5, "none": None}
    out = unstructure_input_response(ElicitResult(action="accept", content=flat))
    assert out == {"action": "accept", "content": flat}
    assert out["content"] is not flat
    nested = {"where": {"city": "Lisbon"}, "list": [1, {"a": 2}]}
    out = unstructure_input_response(ElicitResult(action="accept", content=nested))
    assert out["content"] == nested
    assert out["content"]["where"] is not nested["where"]  # (as the converter copies it)
    proxy = types.MappingProxyType({"a": 1})
    out = unstructure_input_response(ElicitResult(action="accept", content=proxy))
    assert out["content"] == {"a": 1} and type(out["content"]) is dict


def test_is_flat_object_takes_exact_json_scalars_only() -> None:
    class Number(int):
        pass

    assert is_flat_object({})
    assert is_flat_object({"a": 1, "b": "s", "c": None, "d": 1.0, "e": False})
    assert not is_flat_object({"a": []})
    assert not is_flat_object({"a": Number(1)})


def test_the_generated_hooks_are_the_converters_hooks() -> None:
    # One source of truth: the converter hands out the generated hooks, and structure()
    # and unstructure() find the same ones without its dispatch.
    assert structure({"uri": "file:///x"}, Root) == converter.structure({"uri": "file:///x"}, Root)
    assert unstructure(Root(uri="u", name="n")) == converter.unstructure(Root(uri="u", name="n"))


def test_generated_code_is_readable_in_a_traceback() -> None:
    import linecache
    import traceback

    hook = make_structure(ElicitResult, converter)
    with pytest.raises(ValueError) as info:
        hook({"action": "nope"}, ElicitResult)
    text = "".join(traceback.format_exception(info.value))
    assert "raise ValueError" in text
    assert any("mrtr generated structure" in name for name in linecache.cache)


# --- the generated hooks against cattrs' own ---------------------------------------


def _reference_structure(raw: Mapping[str, Any], cls: type) -> Any:
    """What cattrs builds from the known keys, with the unknown ones as extra."""
    fields = {f.name: f.metadata.get("wire", f.name) for f in attrs.fields(cls)}
    known = {wire: name for name, wire in fields.items() if name != "extra"}
    kwargs = {known[k]: v for k, v in raw.items() if k in known}
    kwargs["extra"] = {k: v for k, v in raw.items() if k not in known}
    return cls(**kwargs)


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


@settings(max_examples=examples(times=2), deadline=None)
@given(
    message=_values,
    schema=_values,
    mode=st.sampled_from([None, "form", "url", 1]),
    other=st.dictionaries(st.sampled_from(["_meta", "x", "y"]), _values, max_size=2),
)
def test_form_request_agrees_with_the_plain_reading(
    message: Any, schema: Any, mode: Any, other: dict[str, Any]
) -> None:
    raw: dict[str, Any] = {"message": message, "requestedSchema": schema, **other}
    if mode is not None:
        raw["mode"] = mode
    valid = isinstance(message, str) and isinstance(schema, dict) and mode in (None, "form")
    if not valid:
        with pytest.raises(RemoteProtocolError):
            structure(raw, ElicitFormRequest)
        return
    got = structure(raw, ElicitFormRequest)
    assert got == _reference_structure(raw, ElicitFormRequest)
    assert structure(unstructure(got), ElicitFormRequest) == got


@settings(max_examples=examples(times=2), deadline=None)
@given(
    max_tokens=st.one_of(st.integers(), st.booleans(), st.text(max_size=2)),
    system_prompt=st.one_of(st.none(), st.text(max_size=3), st.integers()),
    include=st.sampled_from([None, "none", "thisServer", "allServers", "other", 0]),
    metadata=st.one_of(st.none(), st.dictionaries(st.text(max_size=2), _scalars), st.integers()),
)
def test_sampling_request_agrees_with_the_plain_reading(
    max_tokens: Any, system_prompt: Any, include: Any, metadata: Any
) -> None:
    raw = {
        "messages": [],
        "maxTokens": max_tokens,
        "systemPrompt": system_prompt,
        "includeContext": include,
        "metadata": metadata,
    }
    valid = (
        isinstance(max_tokens, int)
        and not isinstance(max_tokens, bool)
        and (system_prompt is None or isinstance(system_prompt, str))
        and include in (None, "none", "thisServer", "allServers")
        and (metadata is None or isinstance(metadata, dict))
    )
    if not valid:
        with pytest.raises(RemoteProtocolError):
            structure(raw, CreateMessageRequest)
        return
    got = structure(raw, CreateMessageRequest)
    assert got == _reference_structure(raw, CreateMessageRequest)


def test_make_unstructure_matches_for_a_class_the_converter_never_saw() -> None:
    @attrs.frozen(kw_only=True)
    class Fresh:
        name: str
        data: JSONObject | None = None
        extra: JSONObject = attrs.field(factory=dict)

    attrs.resolve_types(Fresh, globalns=globals(), localns={"JSONObject": JSONObject})
    write = make_unstructure(Fresh, converter)
    assert write(Fresh(name="n")) == {"name": "n"}
    assert write(Fresh(name="n", data={"a": [1]}, extra={"z": 0})) == {
        "z": 0,
        "name": "n",
        "data": {"a": [1]},
    }


def test_a_class_seen_for_the_first_time_gets_its_hooks_then_keeps_them() -> None:
    # A fresh class (made here, so no earlier test can have registered it): the first
    # call of each function asks the converter, which makes and records the hooks.
    @attrs.frozen(kw_only=True)
    class Answer:
        value: int
        extra: JSONObject = attrs.field(factory=dict)

    attrs.resolve_types(Answer, globalns=globals(), localns={"JSONObject": JSONObject})
    assert unstructure_input_response(Answer(value=1)) == {"value": 1}
    assert unstructure_input_response(Answer(value=2, extra={"k": 0})) == {"k": 0, "value": 2}

    @attrs.frozen(kw_only=True)
    class Other:
        value: int
        extra: JSONObject = attrs.field(factory=dict)

    attrs.resolve_types(Other, globalns=globals(), localns={"JSONObject": JSONObject})
    assert unstructure(Other(value=1)) == {"value": 1}
    assert unstructure(Other(value=2)) == {"value": 2}
    assert structure({"value": 3}, Other) == Other(value=3)
    assert structure({"value": 4, "x": 1}, Other) == Other(value=4, extra={"x": 1})
    # What is no payload class goes to the converter as before.
    assert unstructure([1, {"a": 2}]) == [1, {"a": 2}]
    assert structure(5, int) == 5
