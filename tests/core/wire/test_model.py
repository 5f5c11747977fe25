"""The wire model and its cattrs conversion."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.budget import examples

from mrtr_core import (
    ErrorObject,
    ErrorResponse,
    Notification,
    RemoteProtocolError,
    Request,
    ResultResponse,
)
from mrtr_core._errors import INVALID_PARAMS
from mrtr_core.wire import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    Root,
    structure,
    structure_input_request,
    structure_input_required,
    unstructure,
)
from mrtr_core.wire._convert import (
    input_request_class,
    unstructure_input_request,
    unstructure_input_required,
    unstructure_input_response,
)
from mrtr_core.wire._inputs import RESPONSE_FOR_REQUEST

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

# (class, wire form, typed form): structure(wire) == typed and unstructure(typed) == wire.
ROUND_TRIPS: list[Any] = [
    pytest.param(
        ElicitFormRequest,
        {"message": "Your name?", "requestedSchema": SCHEMA},
        ElicitFormRequest(message="Your name?", requested_schema=SCHEMA),
        id="form-no-mode",
    ),
    pytest.param(
        ElicitFormRequest,
        {"mode": "form", "message": "Your name?", "requestedSchema": SCHEMA},
        ElicitFormRequest(message="Your name?", requested_schema=SCHEMA, mode="form"),
        id="form-explicit-mode",
    ),
    pytest.param(
        ElicitFormRequest,
        {"message": "m", "requestedSchema": {}, "_meta": {"a": 1}, "x-new": [1]},
        ElicitFormRequest(
            message="m", requested_schema={}, extra={"_meta": {"a": 1}, "x-new": [1]}
        ),
        id="form-extra",
    ),
    pytest.param(
        ElicitUrlRequest,
        {"mode": "url", "message": "Sign in", "url": "https://example.com/auth?x=1"},
        ElicitUrlRequest(message="Sign in", url="https://example.com/auth?x=1"),
        id="url",
    ),
    pytest.param(
        ElicitUrlRequest,
        {"mode": "url", "message": "m", "url": "u", "_meta": {"k": "v"}},
        ElicitUrlRequest(message="m", url="u", extra={"_meta": {"k": "v"}}),
        id="url-extra",
    ),
    pytest.param(
        CreateMessageRequest,
        {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5},
        CreateMessageRequest(
            messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}], max_tokens=5
        ),
        id="sampling-minimal",
    ),
    pytest.param(
        CreateMessageRequest,
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 100,
            "systemPrompt": "Be brief.",
            "temperature": 0.5,
            "stopSequences": ["END", "STOP"],
            "modelPreferences": {"hints": [{"name": "claude"}], "speedPriority": 0.3},
            "includeContext": "thisServer",
            "metadata": {"trace": "t"},
            "tools": [{"name": "calc", "inputSchema": {"type": "object"}}],
            "toolChoice": {"mode": "auto"},
            "_meta": {"m": True},
            "x-future": None,
        },
        CreateMessageRequest(
            messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}],
            max_tokens=100,
            system_prompt="Be brief.",
            temperature=0.5,
            stop_sequences=["END", "STOP"],
            model_preferences={"hints": [{"name": "claude"}], "speedPriority": 0.3},
            include_context="thisServer",
            metadata={"trace": "t"},
            tools=[{"name": "calc", "inputSchema": {"type": "object"}}],
            tool_choice={"mode": "auto"},
            extra={"_meta": {"m": True}, "x-future": None},
        ),
        id="sampling-full",
    ),
    pytest.param(
        CreateMessageRequest,
        {"messages": [], "maxTokens": 1, "temperature": 1, "includeContext": "none"},
        CreateMessageRequest(messages=[], max_tokens=1, temperature=1, include_context="none"),
        id="sampling-int-temperature",
    ),
    pytest.param(ListRootsRequest, {}, ListRootsRequest(), id="roots-empty"),
    pytest.param(
        ListRootsRequest,
        {"_meta": {"progressToken": 1}},
        ListRootsRequest(extra={"_meta": {"progressToken": 1}}),
        id="roots-meta",
    ),
    pytest.param(
        ElicitResult,
        {"action": "accept", "content": {"name": "Ada", "n": 3}},
        ElicitResult(action="accept", content={"name": "Ada", "n": 3}),
        id="elicit-accept",
    ),
    pytest.param(ElicitResult, {"action": "decline"}, ElicitResult(action="decline"), id="decline"),
    pytest.param(
        ElicitResult,
        {"action": "cancel", "_meta": {}},
        ElicitResult(action="cancel", extra={"_meta": {}}),
        id="cancel-meta",
    ),
    pytest.param(
        CreateMessageResult,
        {
            "role": "assistant",
            "content": {"type": "text", "text": "hello"},
            "model": "m-1",
            "stopReason": "endTurn",
        },
        CreateMessageResult(
            role="assistant",
            content={"type": "text", "text": "hello"},
            model="m-1",
            stop_reason="endTurn",
        ),
        id="sampling-result",
    ),
    pytest.param(
        CreateMessageResult,
        {"role": "user", "content": [{"type": "text", "text": "a"}], "model": "m", "x": 1},
        CreateMessageResult(
            role="user", content=[{"type": "text", "text": "a"}], model="m", extra={"x": 1}
        ),
        id="sampling-result-list-content",
    ),
    pytest.param(
        CreateMessageResult,
        {"role": "user", "content": None, "model": "m"},
        CreateMessageResult(role="user", content=None, model="m"),
        id="sampling-result-null-content",
    ),
    pytest.param(Root, {"uri": "file:///x"}, Root(uri="file:///x"), id="root"),
    pytest.param(
        Root,
        {"uri": "file:///x", "name": "X", "_meta": {"a": 1}},
        Root(uri="file:///x", name="X", extra={"_meta": {"a": 1}}),
        id="root-full",
    ),
    pytest.param(
        ListRootsResult, {"roots": []}, ListRootsResult(roots=[]), id="roots-result-empty"
    ),
    pytest.param(
        ListRootsResult,
        {
            "roots": [{"uri": "file:///a", "name": "A", "x": 1}, {"uri": "file:///b"}],
            "_meta": {"z": None},
        },
        ListRootsResult(
            roots=[Root(uri="file:///a", name="A", extra={"x": 1}), Root(uri="file:///b")],
            extra={"_meta": {"z": None}},
        ),
        id="roots-result",
    ),
]


@pytest.mark.parametrize(("cls", "wire", "typed"), ROUND_TRIPS)
def test_structure_and_unstructure(cls: type, wire: dict[str, Any], typed: Any) -> None:
    got: Any = structure(wire, cls)
    assert type(got) is cls
    assert got == typed
    assert unstructure(typed) == wire
    assert unstructure(got) == wire
    assert structure(unstructure(got), cls) == got


def test_structure_accepts_any_mapping() -> None:
    wire = types.MappingProxyType({"uri": "file:///x", "other": 2})
    assert structure(wire, Root) == Root(uri="file:///x", extra={"other": 2})


def test_unknown_keys_keep_their_values_and_known_keys_win() -> None:
    got = structure({"action": "accept", "content": None, "_meta": {"x": [1]}}, ElicitResult)
    assert got.content is None
    assert got.extra == {"_meta": {"x": [1]}}
    # A known field is never stored in extra, even when its value is null.
    assert "content" not in got.extra
    out = unstructure(ElicitResult(action="decline", extra={"action": "accept", "y": 1}))
    assert out == {"action": "decline", "y": 1}


def test_internal_extra_marker_cannot_be_spoofed() -> None:
    wire = {"uri": "file:///x", "\x00extra": {"name": "spoof"}}
    got = structure(wire, Root)
    assert got.name is None
    assert got.extra == {"\x00extra": {"name": "spoof"}}
    assert unstructure(got) == wire


def test_elicit_url_mode_is_always_emitted() -> None:
    assert unstructure(ElicitUrlRequest(message="m", url="u")) == {
        "message": "m",
        "url": "u",
        "mode": "url",
    }
    # Structured straight from params without a mode it still defaults to (and emits) "url".
    got = structure({"message": "m", "url": "u"}, ElicitUrlRequest)
    assert got.mode == "url"
    assert unstructure(got)["mode"] == "url"


def test_elicit_form_mode_is_omitted_only_when_absent() -> None:
    implicit = ElicitFormRequest(message="m", requested_schema={})
    explicit = ElicitFormRequest(message="m", requested_schema={}, mode="form")
    assert "mode" not in unstructure(implicit)
    assert unstructure(explicit)["mode"] == "form"
    assert implicit != explicit
    wire: dict[str, Any] = {"message": "m", "requestedSchema": {}, "mode": None}
    assert structure(wire, ElicitFormRequest) == implicit


def test_optional_fields_are_omitted_when_none() -> None:
    out = unstructure(CreateMessageRequest(messages=[], max_tokens=3))
    assert out == {"messages": [], "maxTokens": 3}
    assert unstructure(ElicitResult(action="accept")) == {"action": "accept"}
    assert unstructure(Root(uri="u")) == {"uri": "u"}


def test_lists_accept_tuples_from_python_callers() -> None:
    got = structure({"roots": ({"uri": "a"},)}, ListRootsResult)
    assert got.roots == [Root(uri="a")]
    assert isinstance(got.roots, list)
    got2 = structure(
        {"messages": (), "maxTokens": 1, "stopSequences": ("x",)}, CreateMessageRequest
    )
    assert got2.stop_sequences == ["x"]


def test_primitive_hooks_are_strict() -> None:
    assert structure("x", str) == "x"
    assert structure(3, int) == 3
    assert structure(3, float) == 3
    assert structure(2.5, float) == 2.5
    assert structure(True, bool) is True
    assert structure([1, "a", None], list) == [1, "a", None]
    for raw, cls in [
        (1, str),
        (None, str),
        ("5", int),
        (True, int),
        (5.0, int),
        (False, float),
        ("1.5", float),
        (1, bool),
        ("true", bool),
        ("ab", list),
        ({"a": 1}, list),
    ]:
        with pytest.raises(RemoteProtocolError) as info:
            structure(raw, cls)
        assert info.value.code == INVALID_PARAMS


# --- strictness ---------------------------------------------------------------

_SAMPLING = {"messages": [], "maxTokens": 5}

INVALID: list[Any] = [
    pytest.param(CreateMessageRequest, {**_SAMPLING, "maxTokens": "5"}, id="maxTokens-str"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "maxTokens": True}, id="maxTokens-bool"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "maxTokens": 5.0}, id="maxTokens-float"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "maxTokens": None}, id="maxTokens-null"),
    pytest.param(CreateMessageRequest, {"messages": []}, id="maxTokens-missing"),
    pytest.param(CreateMessageRequest, {"maxTokens": 5}, id="messages-missing"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "temperature": True}, id="temperature-bool"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "temperature": "0.5"}, id="temperature-str"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "includeContext": "all"}, id="literal"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "includeContext": 1}, id="literal-int"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "includeContext": []}, id="literal-list"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "stopSequences": "END"}, id="str-as-list"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "stopSequences": [1]}, id="list-item-int"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "stopSequences": {"a": 1}}, id="obj-as-list"),
    pytest.param(CreateMessageRequest, {"messages": {}, "maxTokens": 5}, id="messages-object"),
    pytest.param(CreateMessageRequest, {"messages": "", "maxTokens": 5}, id="messages-string"),
    pytest.param(CreateMessageRequest, {"messages": [[1]], "maxTokens": 5}, id="message-list"),
    pytest.param(CreateMessageRequest, {"messages": ["x"], "maxTokens": 5}, id="message-string"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "tools": {}}, id="tools-object"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "toolChoice": []}, id="toolChoice-list"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "metadata": "x"}, id="metadata-string"),
    pytest.param(CreateMessageRequest, {**_SAMPLING, "systemPrompt": 1}, id="systemPrompt-int"),
    pytest.param(CreateMessageRequest, [1, 2], id="list-as-object"),
    pytest.param(ElicitFormRequest, {"message": 5, "requestedSchema": {}}, id="message-int"),
    pytest.param(ElicitFormRequest, {"message": "m", "requestedSchema": []}, id="schema-list"),
    pytest.param(ElicitFormRequest, {"message": "m"}, id="schema-missing"),
    pytest.param(
        ElicitFormRequest,
        {"message": "m", "requestedSchema": {}, "mode": "url"},
        id="form-mode-url",
    ),
    pytest.param(
        ElicitFormRequest,
        {"message": "m", "requestedSchema": {}, "mode": "FORM"},
        id="form-mode-upper",
    ),
    pytest.param(ElicitFormRequest, None, id="form-null"),
    pytest.param(ElicitUrlRequest, {"message": "m", "url": "u", "mode": "form"}, id="url-mode"),
    pytest.param(ElicitUrlRequest, {"message": "m", "url": None}, id="url-null"),
    pytest.param(ElicitUrlRequest, {"message": "m"}, id="url-missing"),
    pytest.param(ElicitUrlRequest, "url", id="url-string"),
    pytest.param(ListRootsRequest, [], id="roots-request-list"),
    pytest.param(ListRootsRequest, None, id="roots-request-null"),
    pytest.param(ElicitResult, {"action": "ok"}, id="action"),
    pytest.param(ElicitResult, {"action": True}, id="action-bool"),
    pytest.param(ElicitResult, {}, id="action-missing"),
    pytest.param(ElicitResult, {"action": "accept", "content": [1]}, id="content-list"),
    pytest.param(ElicitResult, {"action": "accept", "content": "x"}, id="content-str"),
    pytest.param(ElicitResult, [{"action": "accept"}], id="elicit-list"),
    pytest.param(CreateMessageResult, {"role": "system", "content": 1, "model": "m"}, id="role"),
    pytest.param(CreateMessageResult, {"role": "user", "content": 1}, id="model-missing"),
    pytest.param(CreateMessageResult, {"role": "user", "model": "m"}, id="content-missing"),
    pytest.param(
        CreateMessageResult,
        {"role": "user", "content": 1, "model": "m", "stopReason": 1},
        id="stopReason-int",
    ),
    pytest.param(ListRootsResult, {"roots": {}}, id="roots-object"),
    pytest.param(ListRootsResult, {"roots": "file:///x"}, id="roots-string"),
    pytest.param(ListRootsResult, {"roots": [{"uri": 1}]}, id="root-uri-int"),
    pytest.param(ListRootsResult, {"roots": [["uri"]]}, id="root-list"),
    pytest.param(ListRootsResult, {"roots": [{"name": "n"}]}, id="root-uri-missing"),
    pytest.param(ListRootsResult, {}, id="roots-missing"),
    pytest.param(Root, ["file:///x"], id="root-as-list"),
    pytest.param(Root, {"uri": "u", "name": 3}, id="root-name-int"),
]


@pytest.mark.parametrize(("cls", "raw"), INVALID)
def test_structure_rejects(cls: type, raw: Any) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        structure(raw, cls)
    assert type(info.value) is RemoteProtocolError
    assert info.value.code == INVALID_PARAMS
    assert info.value.request_id is None
    assert cls.__name__ in info.value.message
    assert info.value.__cause__ is not None


# --- input requests -----------------------------------------------------------

INPUT_REQUESTS: list[Any] = [
    pytest.param(
        {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": SCHEMA}},
        ElicitFormRequest(message="m", requested_schema=SCHEMA),
        id="form",
    ),
    pytest.param(
        {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "m", "requestedSchema": {}},
        },
        ElicitFormRequest(message="m", requested_schema={}, mode="form"),
        id="form-mode",
    ),
    pytest.param(
        {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "u"}},
        ElicitUrlRequest(message="m", url="u"),
        id="url",
    ),
    pytest.param(
        {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 9}},
        CreateMessageRequest(messages=[], max_tokens=9),
        id="sampling",
    ),
    pytest.param(
        {"method": "roots/list", "params": {"_meta": {"a": 1}}},
        ListRootsRequest(extra={"_meta": {"a": 1}}),
        id="roots",
    ),
]


@pytest.mark.parametrize(("raw", "typed"), INPUT_REQUESTS)
def test_input_request_round_trip(raw: dict[str, Any], typed: Any) -> None:
    got = structure_input_request(raw)
    assert type(got) is type(typed)
    assert got == typed
    assert got.method == raw["method"]
    assert unstructure_input_request(got) == raw


def test_roots_request_params_are_optional() -> None:
    assert structure_input_request({"method": "roots/list"}) == ListRootsRequest()
    assert structure_input_request({"method": "roots/list", "params": None}) == ListRootsRequest()
    assert unstructure_input_request(ListRootsRequest()) == {"method": "roots/list", "params": {}}


def test_other_input_requests_need_params() -> None:
    for raw in (
        {"method": "sampling/createMessage"},
        {"method": "elicitation/create"},
        {"method": "elicitation/create", "params": ["mode", "url"]},
        {"method": "roots/list", "params": []},
    ):
        with pytest.raises(RemoteProtocolError) as info:
            structure_input_request(raw)
        assert info.value.code == INVALID_PARAMS


def test_input_request_class() -> None:
    assert input_request_class({"method": "elicitation/create"}) is ElicitFormRequest
    assert input_request_class({"method": "elicitation/create", "params": "x"}) is (
        ElicitFormRequest
    )
    assert (
        input_request_class({"method": "elicitation/create", "params": {"mode": None}})
        is ElicitFormRequest
    )
    assert (
        input_request_class({"method": "elicitation/create", "params": {"mode": "form"}})
        is ElicitFormRequest
    )
    assert (
        input_request_class({"method": "elicitation/create", "params": {"mode": "url"}})
        is ElicitUrlRequest
    )
    assert input_request_class({"method": "sampling/createMessage"}) is CreateMessageRequest
    assert input_request_class({"method": "roots/list"}) is ListRootsRequest


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"method": "tools/call", "params": {}}, "unknown input request method"),
        ({"method": "ping"}, "unknown input request method"),
        ({"params": {}}, "unknown input request method"),
        ({"method": 5}, "unknown input request method"),
        ({"method": "elicitation/create", "params": {"mode": "popup"}}, "unknown elicitation mode"),
        ({"method": "elicitation/create", "params": {"mode": 1}}, "unknown elicitation mode"),
        ({"method": "elicitation/create", "params": {"mode": ["url"]}}, "elicitation mode"),
        (["elicitation/create"], "must be an object"),
        ("roots/list", "must be an object"),
        (None, "must be an object"),
    ],
)
def test_input_request_class_errors(raw: Any, match: str) -> None:
    with pytest.raises(RemoteProtocolError, match=match) as info:
        input_request_class(raw)
    assert info.value.code == INVALID_PARAMS
    with pytest.raises(RemoteProtocolError) as info:
        structure_input_request(raw)
    assert info.value.code == INVALID_PARAMS


# --- input_required results ---------------------------------------------------

FULL_INPUT_REQUIRED = {
    "resultType": "input_required",
    "inputRequests": {
        "user_name": {
            "method": "elicitation/create",
            "params": {"message": "Name?", "requestedSchema": SCHEMA},
        },
        "consent": {
            "method": "elicitation/create",
            "params": {"mode": "url", "message": "Sign in", "url": "https://example.com"},
        },
        "sample": {
            "method": "sampling/createMessage",
            "params": {"messages": [{"role": "user", "content": {}}], "maxTokens": 10},
        },
        "roots": {"method": "roots/list", "params": {}},
    },
    "requestState": "opaque-state\u2028+/=",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s"}},
    "x-unknown": [1, 2],
}


def test_input_required_round_trip() -> None:
    got = structure_input_required(FULL_INPUT_REQUIRED)
    assert got.request_state == "opaque-state\u2028+/="
    assert got.input_requests == {
        "user_name": ElicitFormRequest(message="Name?", requested_schema=SCHEMA),
        "consent": ElicitUrlRequest(message="Sign in", url="https://example.com"),
        "sample": CreateMessageRequest(messages=[{"role": "user", "content": {}}], max_tokens=10),
        "roots": ListRootsRequest(),
    }
    assert got.extra == {
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s"}},
        "x-unknown": [1, 2],
    }
    assert unstructure_input_required(got) == FULL_INPUT_REQUIRED
    assert structure_input_required(unstructure_input_required(got)) == got


def test_input_required_partial_shapes() -> None:
    only_state = structure_input_required({"resultType": "input_required", "requestState": ""})
    assert only_state == InputRequiredResult(request_state="")
    assert unstructure_input_required(only_state) == {
        "resultType": "input_required",
        "requestState": "",
    }
    only_requests = structure_input_required({"resultType": "input_required", "inputRequests": {}})
    assert only_requests == InputRequiredResult(input_requests={})
    assert unstructure_input_required(only_requests) == {
        "resultType": "input_required",
        "inputRequests": {},
    }
    # The shape check alone accepts neither field; the engine enforces "at least one".
    bare = structure_input_required(types.MappingProxyType({"resultType": "input_required"}))
    assert bare == InputRequiredResult()
    assert unstructure_input_required(bare) == {"resultType": "input_required"}
    nulls = structure_input_required(
        {"resultType": "input_required", "inputRequests": None, "requestState": None}
    )
    assert nulls == InputRequiredResult()


def test_unstructure_input_required_result_type_wins_over_extra() -> None:
    result = InputRequiredResult(request_state="s", extra={"resultType": "complete", "k": 1})
    assert unstructure_input_required(result) == {
        "resultType": "input_required",
        "requestState": "s",
        "k": 1,
    }


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ([], "must be an object"),
        ("input_required", "must be an object"),
        (None, "must be an object"),
        ({}, "not an input_required"),
        ({"resultType": "complete"}, "not an input_required"),
        ({"resultType": "INPUT_REQUIRED"}, "not an input_required"),
        ({"resultType": "input_required", "inputRequests": []}, "inputRequests must be"),
        ({"resultType": "input_required", "inputRequests": "x"}, "inputRequests must be"),
        ({"resultType": "input_required", "requestState": 5}, "requestState must be"),
        ({"resultType": "input_required", "requestState": {"s": 1}}, "requestState must be"),
        ({"resultType": "input_required", "inputRequests": {"k": "x"}}, "must be an object"),
        (
            {"resultType": "input_required", "inputRequests": {"k": {"method": "tools/call"}}},
            "unknown input request method",
        ),
        (
            {
                "resultType": "input_required",
                "inputRequests": {"k": {"method": "sampling/createMessage", "params": {}}},
            },
            "invalid CreateMessageRequest",
        ),
    ],
)
def test_structure_input_required_errors(raw: Any, match: str) -> None:
    with pytest.raises(RemoteProtocolError, match=match) as info:
        structure_input_required(raw)
    assert info.value.code == INVALID_PARAMS


# --- input responses ----------------------------------------------------------


def test_unstructure_input_response_copies_mappings() -> None:
    original = {"action": "accept", "content": {"a": 1}}
    out = unstructure_input_response(original)
    assert out == original
    assert out is not original
    out["action"] = "decline"
    assert original["action"] == "accept"
    proxy: Mapping[str, Any] = types.MappingProxyType({"roots": []})
    out2 = unstructure_input_response(proxy)
    assert type(out2) is dict
    assert out2 == {"roots": []}


@pytest.mark.parametrize(
    ("response", "wire"),
    [
        (
            ElicitResult(action="accept", content={"n": 1}),
            {"action": "accept", "content": {"n": 1}},
        ),
        (ElicitResult(action="cancel"), {"action": "cancel"}),
        (
            CreateMessageResult(role="assistant", content={"t": 1}, model="m", stop_reason="x"),
            {"role": "assistant", "content": {"t": 1}, "model": "m", "stopReason": "x"},
        ),
        (
            ListRootsResult(roots=[Root(uri="file:///a", name="A")], extra={"_meta": {}}),
            {"roots": [{"uri": "file:///a", "name": "A"}], "_meta": {}},
        ),
    ],
)
def test_unstructure_input_response_typed(response: Any, wire: dict[str, Any]) -> None:
    out = unstructure_input_response(response)
    assert out == wire
    assert structure(out, type(response)) == response


def test_response_for_request_table() -> None:
    expected = {
        ElicitFormRequest: ElicitResult,
        ElicitUrlRequest: ElicitResult,
        CreateMessageRequest: CreateMessageResult,
        ListRootsRequest: ListRootsResult,
    }
    assert expected == RESPONSE_FOR_REQUEST


# --- the attrs classes themselves ---------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        Request(id=1, method="m"),
        Notification(method="n"),
        ResultResponse(id=1, result={}),
        ErrorResponse(error=ErrorObject(code=1, message="m")),
        ErrorObject(code=1, message="m"),
        ElicitFormRequest(message="m", requested_schema={}),
        ElicitUrlRequest(message="m", url="u"),
        CreateMessageRequest(messages=[], max_tokens=1),
        ListRootsRequest(),
        ElicitResult(action="accept"),
        CreateMessageResult(role="user", content="c", model="m"),
        Root(uri="u"),
        ListRootsResult(roots=[]),
        InputRequiredResult(),
    ],
)
def test_model_classes_are_frozen(obj: Any) -> None:
    field = attrs.fields(type(obj))[0].name
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(obj, field, None)
    assert obj == attrs.evolve(obj)


def test_model_classes_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        Request(1, "m")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Root("file:///x")  # type: ignore[call-arg]


def test_defaults() -> None:
    assert Request(id=1, method="m").params is None
    assert Notification(method="n").params is None
    assert ErrorResponse(error=ErrorObject(code=1, message="m")).id is None
    assert ErrorObject(code=1, message="m").data is None
    assert ElicitFormRequest(message="m", requested_schema={}).mode is None
    assert ElicitUrlRequest(message="m", url="u").mode == "url"
    assert ListRootsRequest().extra == {}
    # Each instance gets its own extra dict.
    assert ListRootsRequest().extra is not ListRootsRequest().extra
    assert InputRequiredResult().input_requests is None
    assert InputRequiredResult().request_state is None
    assert (ElicitFormRequest.method, ElicitUrlRequest.method) == ("elicitation/create",) * 2
    assert CreateMessageRequest.method == "sampling/createMessage"
    assert ListRootsRequest.method == "roots/list"


def test_extra_is_not_in_repr() -> None:
    assert "secret" not in repr(Root(uri="u", extra={"secret": 1}))


# --- hypothesis: structure never leaks another exception -----------------------

_ints = st.integers(min_value=-(2**63 - 1), max_value=2**63 - 1)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    _ints,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=15,
)

PAYLOAD_CLASSES = [
    ElicitFormRequest,
    ElicitUrlRequest,
    CreateMessageRequest,
    ListRootsRequest,
    ElicitResult,
    CreateMessageResult,
    Root,
    ListRootsResult,
]
_WIRE_KEYS = st.sampled_from(
    [
        "message",
        "requestedSchema",
        "mode",
        "url",
        "messages",
        "maxTokens",
        "systemPrompt",
        "temperature",
        "stopSequences",
        "modelPreferences",
        "includeContext",
        "metadata",
        "tools",
        "toolChoice",
        "action",
        "content",
        "role",
        "model",
        "stopReason",
        "uri",
        "name",
        "roots",
        "_meta",
    ]
)
_WIRE_VALUES = st.one_of(
    json_values,
    st.sampled_from(["form", "url", "accept", "decline", "user", "none", "thisServer"]),
    st.lists(st.dictionaries(_WIRE_KEYS, json_values, max_size=3), max_size=3),
)
payload_like = st.one_of(json_values, st.dictionaries(_WIRE_KEYS | st.text(), _WIRE_VALUES))


@pytest.mark.parametrize("cls", PAYLOAD_CLASSES)
@settings(max_examples=examples(times=2), deadline=None)
@given(raw=payload_like)
def test_structure_only_raises_invalid_params(cls: type, raw: Any) -> None:
    try:
        got: Any = structure(raw, cls)
    except RemoteProtocolError as exc:
        assert type(exc) is RemoteProtocolError
        assert exc.code == INVALID_PARAMS
    else:
        assert type(got) is cls
        assert structure(unstructure(got), cls) == got


_input_request_like = st.fixed_dictionaries(
    {
        "method": st.sampled_from(
            ["elicitation/create", "sampling/createMessage", "roots/list", "other"]
        ),
    },
    optional={"params": st.one_of(json_values, st.dictionaries(_WIRE_KEYS, _WIRE_VALUES))},
)
input_required_like = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"resultType": st.sampled_from(["input_required", "complete"])},
        optional={
            "inputRequests": st.one_of(
                json_values, st.dictionaries(st.text(max_size=4), _input_request_like, max_size=3)
            ),
            "requestState": st.one_of(st.text(), json_values),
            "_meta": json_values,
        },
    ),
)


@settings(max_examples=examples(times=3), deadline=None)
@given(raw=input_required_like)
def test_structure_input_required_only_raises_invalid_params(raw: Any) -> None:
    try:
        got = structure_input_required(raw)
    except RemoteProtocolError as exc:
        assert exc.code == INVALID_PARAMS
    else:
        assert isinstance(got, InputRequiredResult)
        assert structure_input_required(unstructure_input_required(got)) == got
