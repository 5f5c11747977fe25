"""The input-kind registry: its entries, its lookups, and what every kind needs."""

from __future__ import annotations

from typing import Any

import pytest
from support.input_kinds import CONFIRM, SAMPLE_ANSWERS, SAMPLE_REQUESTS, WITH_CONFIRM

import mrtr_core as m
from mrtr_core.wire._convert import INPUT_METHODS, input_request_class
from mrtr_core.wire._inputs import (
    INPUT_KINDS,
    RESPONSE_FOR_REQUEST,
    InputKind,
    InputRegistry,
    capability_paths,
)

KIND_NAMES = [kind.name for kind in INPUT_KINDS.kinds]
INPUT_KINDS_METHOD = {kind.name: kind.method for kind in INPUT_KINDS.kinds}
URL_KIND = INPUT_KINDS.kinds[1]


def test_the_registry_has_the_four_kinds_of_the_schema() -> None:
    assert KIND_NAMES == [
        "elicitation/create",
        "elicitation/create#url",
        "sampling/createMessage",
        "roots/list",
    ]
    assert set(SAMPLE_REQUESTS) == set(KIND_NAMES)  # every kind has its samples
    assert INPUT_KINDS.methods == INPUT_METHODS
    assert INPUT_METHODS == ("elicitation/create", "sampling/createMessage", "roots/list")
    assert INPUT_KINDS.legacy_methods == frozenset(INPUT_METHODS)
    assert INPUT_KINDS.response_for_request == RESPONSE_FOR_REQUEST


@pytest.mark.parametrize("kind", INPUT_KINDS.kinds, ids=lambda k: k.name)
def test_every_entry_round_trips(kind: InputKind) -> None:
    wire = SAMPLE_REQUESTS[kind.name]
    assert INPUT_KINDS.resolve(wire["method"], wire["params"]) is kind
    assert input_request_class(wire) is kind.request_class
    request = m.wire.structure_input_request(wire)
    assert type(request) is kind.request_class and request.method == kind.method
    assert INPUT_KINDS.kind_for(request) is kind and INPUT_KINDS.kind_of(request) is kind
    assert m.engine._events.input_kind(request) == kind.name
    assert m.wire._convert.unstructure_input_request(request) == wire
    answer = m.wire.structure(SAMPLE_ANSWERS[kind.name], kind.response_class)
    assert m.wire.unstructure(answer) == SAMPLE_ANSWERS[kind.name]
    assert RESPONSE_FOR_REQUEST[kind.request_class] is kind.response_class


def test_roots_may_come_without_params_and_others_may_not() -> None:
    assert m.wire.structure_input_request({"method": "roots/list"}) == m.wire.ListRootsRequest()
    with pytest.raises(m.RemoteProtocolError):
        m.wire.structure_input_request({"method": "sampling/createMessage"})


def test_lookups_of_what_is_not_an_input_request() -> None:
    assert INPUT_KINDS.kind_of(m.wire.ElicitResult(action="accept")) is None
    with pytest.raises(m.LocalProtocolError, match="ElicitResult is not an input request"):
        INPUT_KINDS.kind_for(m.wire.ElicitResult(action="accept"))
    assert INPUT_KINDS.resolve_legacy("ping", {}) is None
    assert INPUT_KINDS.resolve_legacy("elicitation/create", {"mode": "url"}) is URL_KIND
    with pytest.raises(m.RemoteProtocolError, match="unknown elicitation mode 'popup'"):
        INPUT_KINDS.resolve_legacy("elicitation/create", {"mode": "popup"})
    # A method with one kind never reads the mode.
    assert INPUT_KINDS.resolve("roots/list", {"mode": "url"}).name == "roots/list"


# --- capability needs: every kind ------------------------------------------------------

FORM_PARAMS = SAMPLE_REQUESTS["elicitation/create"]["params"]
URL_PARAMS = SAMPLE_REQUESTS["elicitation/create#url"]["params"]
SAMPLING_PARAMS = SAMPLE_REQUESTS["sampling/createMessage"]["params"]
TOOLS = {**SAMPLING_PARAMS, "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
CHOICE = {**SAMPLING_PARAMS, "toolChoice": {"mode": "auto"}}
CONTEXT = {**SAMPLING_PARAMS, "includeContext": "allServers"}
NO_CONTEXT = {**SAMPLING_PARAMS, "includeContext": "none", "tools": None}
BOTH = {**TOOLS, "includeContext": "thisServer"}
ROOTS_PARAMS: dict[str, Any] = {}

NEEDS = [
    ("elicitation/create", FORM_PARAMS, {"elicitation": {"form": {}}}),
    ("elicitation/create#url", URL_PARAMS, {"elicitation": {"url": {}}}),
    ("sampling/createMessage", SAMPLING_PARAMS, {"sampling": {}}),
    ("sampling/createMessage", TOOLS, {"sampling": {"tools": {}}}),
    ("sampling/createMessage", CHOICE, {"sampling": {"tools": {}}}),
    ("sampling/createMessage", CONTEXT, {"sampling": {"context": {}}}),
    ("sampling/createMessage", NO_CONTEXT, {"sampling": {}}),
    ("sampling/createMessage", BOTH, {"sampling": {"tools": {}, "context": {}}}),
    ("roots/list", ROOTS_PARAMS, {"roots": {}}),
]


def test_the_needs_table_covers_every_kind() -> None:
    assert {name for name, _, _ in NEEDS} == set(KIND_NAMES)


@pytest.mark.parametrize(("name", "params", "needed"), NEEDS)
def test_every_kind_needs_its_capability(
    name: str, params: dict[str, Any], needed: dict[str, Any]
) -> None:
    kind = INPUT_KINDS.resolve(INPUT_KINDS_METHOD[name], params)
    assert kind.name == name
    assert kind.needed_capabilities(params) == needed
    # Nothing declared: all of it is missing.  Exactly it declared: nothing is.
    assert kind.missing_capabilities(params, {}) == needed
    assert kind.missing_capabilities(params, needed) == {}
    # Declared as something other than an object: as good as absent.
    (capability,) = needed
    assert kind.missing_capabilities(params, {capability: True}) == needed


@pytest.mark.parametrize(
    ("name", "params", "declared", "missing"),
    [
        # elicitation: {} means form only (as in 2025); URL mode must be named.
        ("elicitation/create", FORM_PARAMS, {"elicitation": {}}, {}),
        ("elicitation/create", FORM_PARAMS, {"elicitation": {"url": {}}}, None),
        ("elicitation/create#url", URL_PARAMS, {"elicitation": {}}, None),
        ("elicitation/create#url", URL_PARAMS, {"elicitation": {"form": {}}}, None),
        # sampling: sub-capabilities for what the params use, all missing ones at once.
        (
            "sampling/createMessage",
            BOTH,
            {"sampling": {}},
            {"sampling": {"tools": {}, "context": {}}},
        ),
        (
            "sampling/createMessage",
            BOTH,
            {"sampling": {"tools": {}}},
            {"sampling": {"context": {}}},
        ),
        (
            "sampling/createMessage",
            TOOLS,
            {"sampling": {"context": {}}},
            {"sampling": {"tools": {}}},
        ),
        ("roots/list", ROOTS_PARAMS, {"roots": {"listChanged": True}}, {}),
    ],
)
def test_capability_needs_against_partial_declarations(
    name: str,
    params: dict[str, Any],
    declared: dict[str, Any],
    missing: dict[str, Any] | None,
) -> None:
    kind = INPUT_KINDS.resolve(INPUT_KINDS_METHOD[name], params)
    expected = kind.needed_capabilities(params) if missing is None else missing
    assert kind.missing_capabilities(params, declared) == expected


def test_capability_paths() -> None:
    assert capability_paths({"elicitation": {"url": {}}, "roots": {}}) == [
        "elicitation.url",
        "roots",
    ]
    assert capability_paths({"sampling": {"tools": {}, "context": {}}}) == [
        "sampling.tools",
        "sampling.context",
    ]
    assert capability_paths({}) == []


# --- building a registry -------------------------------------------------------------------


def test_a_registry_with_one_more_kind() -> None:
    assert WITH_CONFIRM.kinds[-1] is CONFIRM
    assert WITH_CONFIRM.methods == (*INPUT_METHODS, "confirmation/ask")
    assert "confirmation/ask" in WITH_CONFIRM.legacy_methods
    assert CONFIRM.needed_capabilities({"danger": True}) == {"confirmation": {"dangerous": {}}}
    assert CONFIRM.needed_capabilities({}) == {"confirmation": {}}
    with pytest.raises(m.RemoteProtocolError, match="unknown input request method"):
        INPUT_KINDS.resolve("confirmation/ask", {})


def _variant(kind: InputKind, **changes: Any) -> InputKind:
    fields = {
        "name": kind.name,
        "method": kind.method,
        "request_class": kind.request_class,
        "response_class": kind.response_class,
        "modes": kind.modes,
        "capability": kind.capability,
        "legacy_method": kind.legacy_method,
    }
    return InputKind(**{**fields, **changes})


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (_variant(URL_KIND, request_class=m.engine.RoundEngine), "registered twice"),  # same name
        (_variant(CONFIRM, name="x", request_class=m.wire.ElicitUrlRequest), "registered twice"),
        (
            _variant(URL_KIND, name="elicitation/create#popup", request_class=dict),
            "has its mode",
        ),  # same method+mode
        (
            _variant(CONFIRM, name="c", legacy_method="roots/list"),  # same 2025 method+mode
            "has its mode",
        ),
    ],
)
def test_a_malformed_registry_is_refused(extra: InputKind, match: str) -> None:
    with pytest.raises(m.LocalProtocolError, match=match):
        InputRegistry(kinds=(*INPUT_KINDS.kinds, extra))


def test_kinds_of_one_method_with_disjoint_modes_are_fine() -> None:
    popup = _variant(
        URL_KIND, name="elicitation/create#popup", modes=frozenset({"popup"}), request_class=dict
    )
    registry = InputRegistry(kinds=(*INPUT_KINDS.kinds, popup))
    assert registry.resolve("elicitation/create", {"mode": "popup"}) is popup
    assert registry.resolve("elicitation/create", {"mode": "url"}) is URL_KIND
