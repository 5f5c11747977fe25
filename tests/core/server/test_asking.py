"""The server's side of a round: typed asks, the input_required builder, capability
gating and reading the answers of a retry.

The helpers must produce exactly the wire shapes of SEP-2322 (2026-07-28):
``{"resultType": "input_required", "inputRequests": {KEY: {method, params}},
"requestState"?}`` with wire names (``requestedSchema``, ``maxTokens``, ...).
The end of the file runs a handler built from them through real Connections.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from support.pairing import ALL_CAPS, CLIENT_INFO, SERVER_INFO, drain, modern_pair

from mrtr_core import (
    CLIENT,
    SERVER,
    AppResultRefused,
    CallEvent,
    Connection,
    ErrorResponse,
    LocalProtocolError,
    MrtrError,
    PeerError,
    RemoteProtocolError,
    Request,
    ResultResponse,
    error_response,
)
from mrtr_core._errors import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY
from mrtr_core.engine import DispatchInput, Done, Failed, RoundStarted, SendRequest, SendRetry
from mrtr_core.server import (
    Answers,
    CapabilityRequired,
    InvalidAnswer,
    InvalidRequestState,
    RequestInfo,
    StateSealer,
    elicit_form,
    elicit_url,
    input_required,
    list_roots,
    required_capabilities,
    sample,
)
from mrtr_core.wire import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    Root,
    structure_input_required,
)

MODERN = "2026-07-28"
CITY_SCHEMA = {"city": {"type": "string", "description": "A city"}}
TOOLS = [{"name": "lookup", "inputSchema": {"type": "object"}}]


# --- the typed asks ----------------------------------------------------------------------------


def test_elicit_form_builds_the_typed_request_and_its_wire_form() -> None:
    ask = elicit_form("Which city?", CITY_SCHEMA, required=["city"])
    assert ask == ElicitFormRequest(
        message="Which city?",
        requested_schema={"type": "object", "properties": CITY_SCHEMA, "required": ["city"]},
    )
    assert ask.mode is None and ask.method == "elicitation/create"
    assert input_required({"city": ask}) == {
        "resultType": "input_required",
        "inputRequests": {
            "city": {
                "method": "elicitation/create",
                "params": {
                    "message": "Which city?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"city": {"type": "string", "description": "A city"}},
                        "required": ["city"],
                    },
                },
            }
        },
    }


def test_elicit_form_without_required_has_no_required_key() -> None:
    ask = elicit_form("Anything?", {"a": {"type": "string"}, "b": {"type": "number"}})
    assert ask.requested_schema == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "number"}},
    }
    assert (
        "required"
        not in input_required({"k": ask})["inputRequests"]["k"]["params"]["requestedSchema"]
    )
    # An empty form is still a form.
    assert elicit_form("Ok?", {}).requested_schema == {"type": "object", "properties": {}}


def test_elicit_form_required_may_be_any_iterable_and_keeps_its_order() -> None:
    props = {"a": {"type": "string"}, "b": {"type": "string"}}
    ask = elicit_form("m", props, required=(n for n in ("b", "a")))
    assert ask.requested_schema["required"] == ["b", "a"]


def test_elicit_form_copies_the_properties_mapping() -> None:
    props: dict[str, Any] = {"a": {"type": "string"}}
    ask = elicit_form("m", props)
    props["b"] = {"type": "string"}
    assert list(ask.requested_schema["properties"]) == ["a"]


@pytest.mark.parametrize(
    "required", [["town"], ["city", "town"], ["City"]], ids=lambda r: "+".join(r)
)
def test_elicit_form_required_fields_must_be_properties(required: list[str]) -> None:
    with pytest.raises(LocalProtocolError, match="not among the properties"):
        elicit_form("Which city?", CITY_SCHEMA, required=required)


def test_elicit_form_required_fields_are_named_by_strings() -> None:
    with pytest.raises(LocalProtocolError, match="named by strings"):
        elicit_form("Which city?", CITY_SCHEMA, required=[1])  # type: ignore[list-item]


def test_elicit_url_sets_mode_url() -> None:
    ask = elicit_url("Sign in, please", "https://auth.example.com/start?x=1")
    assert ask == ElicitUrlRequest(
        message="Sign in, please", url="https://auth.example.com/start?x=1", mode="url"
    )
    assert ask.mode == "url" and ask.method == "elicitation/create"
    assert input_required({"login": ask})["inputRequests"]["login"] == {
        "method": "elicitation/create",
        "params": {
            "message": "Sign in, please",
            "url": "https://auth.example.com/start?x=1",
            "mode": "url",
        },
    }


def test_sample_with_a_string_prompt() -> None:
    ask = sample("Summarise the forecast", max_tokens=200)
    assert ask == CreateMessageRequest(
        messages=[{"role": "user", "content": {"type": "text", "text": "Summarise the forecast"}}],
        max_tokens=200,
    )
    assert input_required({"s": ask})["inputRequests"]["s"] == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Summarise the forecast"}}
            ],
            "maxTokens": 200,
        },
    }


def test_sample_with_a_message_list_and_options() -> None:
    messages = [
        {"role": "user", "content": {"type": "text", "text": "Weather?"}},
        {"role": "assistant", "content": {"type": "text", "text": "Where?"}},
        {"role": "user", "content": {"type": "text", "text": "Oslo"}},
    ]
    ask = sample(
        messages,
        max_tokens=64,
        system_prompt="Be brief.",
        temperature=0.2,
        stop_sequences=["\n\n"],
        model_preferences={"hints": [{"name": "small"}]},
        include_context="thisServer",
        metadata={"trace": "t1"},
        tools=TOOLS,
        tool_choice={"mode": "auto"},
    )
    assert ask.messages == messages and ask.messages is not messages
    assert all(m is not o for m, o in zip(ask.messages, messages, strict=True))
    assert (ask.temperature, ask.tools, ask.tool_choice) == (0.2, TOOLS, {"mode": "auto"})
    assert input_required({"s": ask})["inputRequests"]["s"] == {
        "method": "sampling/createMessage",
        "params": {
            "messages": messages,
            "maxTokens": 64,
            "systemPrompt": "Be brief.",
            "temperature": 0.2,
            "stopSequences": ["\n\n"],
            "modelPreferences": {"hints": [{"name": "small"}]},
            "includeContext": "thisServer",
            "metadata": {"trace": "t1"},
            "tools": TOOLS,
            "toolChoice": {"mode": "auto"},
        },
    }


def test_sample_accepts_any_sequence_of_mappings() -> None:
    message = {"role": "user", "content": {"type": "text", "text": "x"}}
    assert sample((message,), max_tokens=1).messages == [message]
    assert sample([], max_tokens=1).messages == []


def test_list_roots_has_no_params() -> None:
    ask = list_roots()
    assert ask == ListRootsRequest()
    assert ask.extra == {} and ask.method == "roots/list"
    assert input_required({"r": ask})["inputRequests"]["r"] == {
        "method": "roots/list",
        "params": {},
    }


# --- input_required ----------------------------------------------------------------------------


def test_input_required_with_several_requests_and_a_state() -> None:
    asks: dict[str, InputRequest] = {
        "city": elicit_form("Which city?", CITY_SCHEMA, required=["city"]),
        "login": elicit_url("Sign in", "https://a.example/x"),
        "draft": sample("hi", max_tokens=5),
        "where": list_roots(),
    }
    result = input_required(asks, state="opaque\u2028state")
    assert list(result) == ["resultType", "inputRequests", "requestState"]
    assert result["resultType"] == "input_required"
    assert result["requestState"] == "opaque\u2028state"
    assert list(result["inputRequests"]) == ["city", "login", "draft", "where"]
    assert [r["method"] for r in result["inputRequests"].values()] == [
        "elicitation/create",
        "elicitation/create",
        "sampling/createMessage",
        "roots/list",
    ]
    # It is plain JSON and reads back as the same typed requests.
    assert json.loads(json.dumps(result)) == result
    assert structure_input_required(result) == InputRequiredResult(
        input_requests=asks, request_state="opaque\u2028state"
    )


def test_input_required_without_state_has_no_request_state_key() -> None:
    result = input_required({"r": list_roots()})
    assert result == {
        "resultType": "input_required",
        "inputRequests": {"r": {"method": "roots/list", "params": {}}},
    }


def test_input_required_state_only() -> None:
    assert input_required(state="s1") == {"resultType": "input_required", "requestState": "s1"}
    assert input_required(None, state="s1") == input_required(state="s1")
    # An empty mapping counts as no requests.
    assert input_required({}, state="s1") == input_required(state="s1")
    assert input_required(state="") == {"resultType": "input_required", "requestState": ""}


def test_input_required_does_not_keep_the_callers_mapping() -> None:
    asks: dict[str, Any] = {"r": list_roots()}
    result = input_required(asks)
    asks["x"] = list_roots()
    assert list(result["inputRequests"]) == ["r"]


@pytest.mark.parametrize("requests", [None, {}], ids=["none", "empty"])
def test_input_required_needs_requests_or_state(requests: Any) -> None:
    with pytest.raises(LocalProtocolError, match="input requests or a state"):
        input_required(requests)


@pytest.mark.parametrize("key", [1, None, ("a",), b"city"], ids=repr)
def test_input_required_keys_are_strings(key: Any) -> None:
    with pytest.raises(LocalProtocolError, match="keys are strings"):
        input_required({key: list_roots()})


@pytest.mark.parametrize(
    "value",
    [
        {"method": "roots/list", "params": {}},  # a wire mapping, not a typed request
        "roots/list",
        None,
        ElicitResult(action="accept"),  # an answer, not a request
        Root(uri="file:///x"),
    ],
    ids=lambda v: type(v).__name__,
)
def test_input_required_values_are_input_requests(value: Any) -> None:
    with pytest.raises(LocalProtocolError, match="is not an input request"):
        input_required({"k": value}, state="s")


@pytest.mark.parametrize("state", [5, b"state", {"s": 1}, ["s"], True], ids=repr)
def test_input_required_state_must_be_a_string(state: Any) -> None:
    with pytest.raises(LocalProtocolError, match="state must be a string"):
        input_required({"r": list_roots()}, state=state)
    with pytest.raises(LocalProtocolError, match="state must be a string"):
        input_required(state=state)


# --- capabilities ------------------------------------------------------------------------------

FORM = elicit_form("f", {"a": {"type": "string"}})
URL = elicit_url("u", "https://x.example")
PLAIN_SAMPLING = sample("p", max_tokens=1)
TOOLS_SAMPLING = sample("p", max_tokens=1, tools=TOOLS)
CHOICE_SAMPLING = sample("p", max_tokens=1, tool_choice={"mode": "auto"})
CONTEXT_SAMPLING = sample("p", max_tokens=1, include_context="allServers")
NO_CONTEXT_SAMPLING = sample("p", max_tokens=1, include_context="none")
ROOTS = list_roots()


@pytest.mark.parametrize(
    ("ask", "capabilities", "needed"),
    [
        # Form: elicitation {} means form only; {"form": {}} says so; url alone is not enough.
        (FORM, {}, {"elicitation": {"form": {}}}),
        (FORM, {"elicitation": {}}, {}),
        (FORM, {"elicitation": {"form": {}}}, {}),
        (FORM, {"elicitation": {"form": {}, "url": {}}}, {}),
        (FORM, {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        (FORM, {"elicitation": None}, {"elicitation": {"form": {}}}),
        (FORM, {"elicitation": True}, {"elicitation": {"form": {}}}),
        (FORM, {"sampling": {}, "roots": {}}, {"elicitation": {"form": {}}}),
        # URL: needs elicitation.url.
        (URL, {}, {"elicitation": {"url": {}}}),
        (URL, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        (URL, {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
        (URL, {"elicitation": {"url": {}}}, {}),
        (URL, {"elicitation": "url"}, {"elicitation": {"url": {}}}),
        # Sampling.
        (PLAIN_SAMPLING, {}, {"sampling": {}}),
        (PLAIN_SAMPLING, {"sampling": {}}, {}),
        (PLAIN_SAMPLING, {"sampling": []}, {"sampling": {}}),
        (TOOLS_SAMPLING, {}, {"sampling": {"tools": {}}}),
        (TOOLS_SAMPLING, {"sampling": {}}, {"sampling": {"tools": {}}}),
        (TOOLS_SAMPLING, {"sampling": {"context": {}}}, {"sampling": {"tools": {}}}),
        (TOOLS_SAMPLING, {"sampling": {"tools": {}}}, {}),
        (CHOICE_SAMPLING, {"sampling": {}}, {"sampling": {"tools": {}}}),
        (CHOICE_SAMPLING, {"sampling": {"tools": {}}}, {}),
        (CONTEXT_SAMPLING, {}, {"sampling": {"context": {}}}),
        (CONTEXT_SAMPLING, {"sampling": {}}, {"sampling": {"context": {}}}),
        (CONTEXT_SAMPLING, {"sampling": {"tools": {}}}, {"sampling": {"context": {}}}),
        (CONTEXT_SAMPLING, {"sampling": {"context": {}}}, {}),
        (NO_CONTEXT_SAMPLING, {"sampling": {}}, {}),
        # Roots.
        (ROOTS, {}, {"roots": {}}),
        (ROOTS, {"roots": {}}, {}),
        (ROOTS, {"roots": {"listChanged": True}}, {}),
        (ROOTS, {"roots": True}, {"roots": {}}),
    ],
)
def test_required_capabilities_for_one_ask(
    ask: Any, capabilities: dict[str, Any], needed: dict[str, Any]
) -> None:
    assert required_capabilities({"k": ask}, capabilities) == needed


def test_required_capabilities_merges_several_asks() -> None:
    asks: dict[str, InputRequest] = {
        "f": FORM,
        "u": URL,
        "s": TOOLS_SAMPLING,
        "c": CONTEXT_SAMPLING,
        "r": ROOTS,
    }
    assert required_capabilities(asks, {}) == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}, "context": {}},
        "roots": {},
    }
    assert required_capabilities(asks, {"elicitation": {}, "sampling": {}}) == {
        "elicitation": {"url": {}},
        "sampling": {"tools": {}, "context": {}},
        "roots": {},
    }
    assert required_capabilities({"a": FORM, "b": FORM}, {}) == {"elicitation": {"form": {}}}
    # A plain sampling ask next to a tools one does not lose the tools need.
    assert required_capabilities({"p": PLAIN_SAMPLING, "t": TOOLS_SAMPLING}, {}) == {
        "sampling": {"tools": {}}
    }
    assert required_capabilities({"t": TOOLS_SAMPLING, "p": PLAIN_SAMPLING}, {}) == {
        "sampling": {"tools": {}}
    }


def test_required_capabilities_is_empty_when_everything_is_allowed() -> None:
    everything: dict[str, Any] = {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}, "context": {}},
        "roots": {},
    }
    asks: dict[str, InputRequest] = {
        "f": FORM,
        "u": URL,
        "s": TOOLS_SAMPLING,
        "c": CONTEXT_SAMPLING,
        "r": ROOTS,
    }
    assert required_capabilities(asks, everything) == {}
    assert required_capabilities({}, {}) == {}
    assert required_capabilities({"f": FORM, "r": ROOTS}, ALL_CAPS) == {}


def test_required_capabilities_for_tools_and_context_together() -> None:
    # BUG: with ``sampling: {}`` declared, an ask using both tools and includeContext
    # reports only ``tools`` as missing (missing_capability returns at the first gap),
    # so a client that adds what -32021 named is refused again for ``context``.
    # With no sampling at all both are reported; the two cases should agree.
    both = sample("p", max_tokens=1, tools=TOOLS, include_context="thisServer")
    assert required_capabilities({"b": both}, {}) == {"sampling": {"tools": {}, "context": {}}}
    assert required_capabilities({"b": both}, {"sampling": {}}) == {
        "sampling": {"tools": {}, "context": {}}
    }


def test_capability_required_error() -> None:
    needed = required_capabilities({"u": URL}, {"elicitation": {}})
    exc = CapabilityRequired(needed)
    assert isinstance(exc, MrtrError) and not isinstance(exc, RemoteProtocolError)
    assert exc.code == MISSING_CLIENT_CAPABILITY == -32021
    assert exc.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert exc.required == {"elicitation": {"url": {}}}
    reply = error_response(3, exc)
    assert reply.error.code == -32021
    assert reply.error.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    # It keeps its own copy.
    needed["roots"] = {}
    assert exc.required == {"elicitation": {"url": {}}}


# --- Answers -----------------------------------------------------------------------------------

ASKS: dict[str, Any] = {
    "city": elicit_form("Which city?", CITY_SCHEMA, required=["city"]),
    "login": elicit_url("Sign in", "https://a.example/x"),
    "draft": sample("hi", max_tokens=5),
    "where": list_roots(),
}
GOOD_ANSWERS: dict[str, Any] = {
    "city": {"action": "accept", "content": {"city": "Oslo"}},
    "login": {"action": "decline"},
    "draft": {
        "role": "assistant",
        "content": {"type": "text", "text": "hello"},
        "model": "tiny-1",
        "stopReason": "endTurn",
    },
    "where": {"roots": [{"uri": "file:///home/ada", "name": "home"}, {"uri": "file:///tmp"}]},
}


def retry(responses: Any, **more: Any) -> dict[str, Any]:
    return {
        "name": "weather",
        "arguments": {},
        "_meta": {META_PROTOCOL_VERSION: MODERN},
        "inputResponses": responses,
        "requestState": "s",
        **more,
    }


def test_answers_typed_get_for_each_kind() -> None:
    answers = Answers(retry(GOOD_ANSWERS))
    city = answers.get("city", ASKS["city"])
    assert city == ElicitResult(action="accept", content={"city": "Oslo"})
    login = answers.get("login", ASKS["login"])
    assert login == ElicitResult(action="decline")
    draft = answers.get("draft", ASKS["draft"])
    assert draft == CreateMessageResult(
        role="assistant",
        content={"type": "text", "text": "hello"},
        model="tiny-1",
        stop_reason="endTurn",
    )
    where = answers.get("where", ASKS["where"])
    assert where == ListRootsResult(
        roots=[Root(uri="file:///home/ada", name="home"), Root(uri="file:///tmp")]
    )
    assert isinstance(where, ListRootsResult) and isinstance(where.roots[0], Root)
    assert answers.missing(ASKS) == {}


def test_answers_cancel_and_extra_fields_are_kept() -> None:
    answers = Answers(retry({"city": {"action": "cancel", "_meta": {"x": 1}}}))
    city = answers.get("city", ASKS["city"])
    assert isinstance(city, ElicitResult)
    assert city.action == "cancel" and city.content is None
    assert city.extra == {"_meta": {"x": 1}}


def test_answers_missing_keys() -> None:
    answers = Answers(retry({"city": GOOD_ANSWERS["city"]}))
    assert answers.get("draft", ASKS["draft"]) is None
    assert answers.get("where", ASKS["where"]) is None
    missing = answers.missing(ASKS)
    assert list(missing) == ["login", "draft", "where"]
    assert missing["draft"] is ASKS["draft"]
    # What is missing can be asked again as it is.
    again = input_required(missing, state="s2")
    assert list(again["inputRequests"]) == ["login", "draft", "where"]


def test_answers_extra_keys_are_ignored() -> None:
    responses = {**GOOD_ANSWERS, "unasked": {"whatever": True}, "other": 5}
    answers = Answers(retry(responses))
    assert answers.missing(ASKS) == {}
    assert answers.get("city", ASKS["city"]) == ElicitResult(
        action="accept", content={"city": "Oslo"}
    )
    # Nothing but what was asked is read.
    assert answers.missing({"city": ASKS["city"]}) == {}


def test_answers_a_null_answer_counts_as_missing() -> None:
    answers = Answers(retry({"city": None, "where": GOOD_ANSWERS["where"]}))
    assert answers.get("city", ASKS["city"]) is None
    assert answers.missing({"city": ASKS["city"], "where": ASKS["where"]}) == {"city": ASKS["city"]}


def test_answers_in_operator() -> None:
    answers = Answers(retry({"city": GOOD_ANSWERS["city"], "unasked": {}}))
    assert "city" in answers
    assert "unasked" in answers
    assert "draft" not in answers
    assert 5 not in answers
    assert "city" not in Answers(None)


def test_answers_in_agrees_with_missing_for_a_null_answer() -> None:
    # BUG (consistency): a null answer is missing for get()/missing(), yet ``in`` says
    # it is there, so ``if key in answers: answers.get(key, ask).action`` crashes.
    answers = Answers(retry({"city": None}))
    assert answers.missing({"city": ASKS["city"]}) == {"city": ASKS["city"]}
    assert "city" not in answers


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("city", {"action": "maybe"}),
        ("city", {"content": {"city": "Oslo"}}),  # no action
        ("city", {"action": "accept", "content": "Oslo"}),
        ("city", "accept"),
        ("city", []),
        ("city", 5),
        ("login", {"action": 1}),
        ("draft", {"role": "assistant", "content": {}}),  # no model
        ("draft", {"role": "robot", "content": {}, "model": "m"}),
        ("draft", {"role": "assistant", "content": {}, "model": 7}),
        ("where", {"roots": "file:///"}),
        ("where", {"roots": [{"name": "no uri"}]}),
        ("where", {"roots": [{"uri": 5}]}),
        ("where", {}),
        ("where", True),
    ],
    ids=lambda v: v if isinstance(v, str) else json.dumps(v),
)
def test_answers_wrong_shape_is_invalid_answer(key: str, raw: Any) -> None:
    answers = Answers(retry({key: raw}))
    with pytest.raises(InvalidAnswer) as info:
        answers.get(key, ASKS[key])
    exc = info.value
    assert isinstance(exc, RemoteProtocolError)
    assert exc.code == INVALID_PARAMS == -32602
    assert exc.key == key
    assert set(exc.data) == {"key", "reason"}
    assert exc.data["key"] == key
    assert isinstance(exc.data["reason"], str) and repr(key) in exc.data["reason"]
    assert exc.message == f"invalid inputResponses: {exc.data['reason']}"
    # A wrong shape is not "missing": it is not asked again.
    assert answers.missing({key: ASKS[key]}) == {}


def test_answers_shape_is_read_against_what_was_asked() -> None:
    # A roots answer under a key that asked for a form is not a form answer.
    answers = Answers(retry({"city": GOOD_ANSWERS["where"]}))
    with pytest.raises(InvalidAnswer, match="ElicitResult"):
        answers.get("city", ASKS["city"])
    with pytest.raises(InvalidAnswer, match="ListRootsResult"):
        Answers(retry({"r": GOOD_ANSWERS["city"]})).get("r", ASKS["where"])
    with pytest.raises(InvalidAnswer, match="CreateMessageResult"):
        Answers(retry({"d": GOOD_ANSWERS["city"]})).get("d", ASKS["draft"])


@pytest.mark.parametrize("responses", [[], ["city"], "city", 5, True], ids=repr)
def test_answers_input_responses_not_an_object(responses: Any) -> None:
    with pytest.raises(InvalidAnswer) as info:
        Answers(retry(responses))
    exc = info.value
    assert exc.code == -32602
    assert exc.key is None
    assert exc.data == {"key": None, "reason": "inputResponses must be an object"}


@pytest.mark.parametrize("params", [None, {}, {"name": "t"}, {"inputResponses": None}], ids=repr)
def test_answers_with_no_responses(params: Any) -> None:
    answers = Answers(params)
    assert answers.get("city", ASKS["city"]) is None
    assert answers.missing(ASKS) == ASKS
    assert "city" not in answers


def test_answers_accept_any_mapping() -> None:
    class Frozen(Mapping[str, Any]):
        def __init__(self, data: dict[str, Any]) -> None:
            self._data = data

        def __getitem__(self, key: str) -> Any:
            return self._data[key]

        def __iter__(self) -> Any:
            return iter(self._data)

        def __len__(self) -> int:
            return len(self._data)

    answers = Answers(Frozen({"inputResponses": Frozen({"city": GOOD_ANSWERS["city"]})}))
    assert answers.get("city", ASKS["city"]) == ElicitResult(
        action="accept", content={"city": "Oslo"}
    )


# --- end to end through real Connections -------------------------------------------------------

TOOL_PARAMS: dict[str, Any] = {"name": "weather", "arguments": {"when": "today"}}
ASK_CITY = {"city": elicit_form("Which city?", CITY_SCHEMA, required=["city"])}
SEALER = StateSealer({"k1": b"k" * 32}, "k1")


class WeatherServer:
    """A stateless handler built from the helpers: asks for "city", then answers."""

    def __init__(self) -> None:
        self.rounds = 0
        self.opened: list[Any] = []

    def handle(self, request: Request, info: RequestInfo, now: float) -> Any:
        params = request.params or {}
        token = params.get("requestState")
        if token is not None:
            try:
                opened = SEALER.open(
                    token, method=request.method, params=params, principal=None, now=now
                )
            except InvalidRequestState as exc:
                return error_response(request.id, exc)
            self.opened.append(opened.value)
        answers = Answers(params)
        missing = answers.missing(ASK_CITY)
        if missing:
            needed = required_capabilities(missing, info.capabilities)
            if needed:
                return error_response(request.id, CapabilityRequired(needed))
            self.rounds += 1
            state = SEALER.seal(
                {"round": self.rounds, "asked": sorted(missing)},
                method=request.method,
                params=params,
                principal=None,
                now=now,
            )
            return ResultResponse(id=request.id, result=input_required(missing, state=state))
        answer = answers.get("city", ASK_CITY["city"])
        assert isinstance(answer, ElicitResult)
        city = (answer.content or {}).get("city") if answer.action == "accept" else None
        text = f"Sunny in {city}" if city else "No city, no forecast"
        return ResultResponse(
            id=request.id, result={"content": [{"type": "text", "text": text}], "isError": False}
        )


def serve(server: Connection, handler: WeatherServer, now: float = 0.0) -> bytes:
    """Answer every request the server hands out; return the bytes to send back."""
    out = b""
    for event in drain(server, now):
        assert isinstance(event, Request), event
        out += server.send(handler.handle(event, server.request_info(event.id), now))
    return out


def client_events(client: Connection, call: int, now: float = 0.0) -> list[Any]:
    events = drain(client, now)
    assert all(isinstance(e, CallEvent) and e.call == call for e in events), events
    return [e.event for e in events]


def hand_made_leg(rid: int, **extra: Any) -> bytes:
    meta = {
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_CAPABILITIES: ALL_CAPS,
        META_CLIENT_INFO: CLIENT_INFO,
    }
    params = {**TOOL_PARAMS, **extra, "_meta": meta}
    message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    return json.dumps(message).encode() + b"\n"


def test_end_to_end_ask_answer_and_read_through_connections() -> None:
    client, server = modern_pair()
    handler = WeatherServer()
    call = client.call("tools/call", TOOL_PARAMS, now=0.0)
    (first,) = client_events(client, call)
    assert isinstance(first, SendRequest)
    server.receive_data(client.send(CallEvent(call=call, event=first)))

    # Leg 1: the handler asks for "city" with a sealed state.
    client.receive_data(serve(server, handler))
    started, dispatch = client_events(client, call)
    assert isinstance(started, RoundStarted) and started.keys == ("city",)
    assert started.kinds == ("elicitation/create",)
    assert isinstance(dispatch, DispatchInput) and dispatch.key == "city"
    assert dispatch.request == ASK_CITY["city"]  # the typed ask survived the wire

    # The client answers; its retry carries the answer and the state, byte-exact.
    client.provide(call, "city", {"action": "accept", "content": {"city": "Oslo"}})
    (retry_event,) = client_events(client, call)
    assert isinstance(retry_event, SendRetry)
    assert retry_event.params["inputResponses"] == {
        "city": {"action": "accept", "content": {"city": "Oslo"}}
    }
    server.receive_data(client.send(CallEvent(call=call, event=retry_event)))

    # Leg 2: the handler opens the state, reads the answer with Answers, completes.
    client.receive_data(serve(server, handler, now=1.0))
    (done,) = client_events(client, call)
    assert isinstance(done, Done)
    assert done.result["content"] == [{"type": "text", "text": "Sunny in Oslo"}]
    assert done.result["resultType"] == "complete"
    assert handler.opened == [{"round": 1, "asked": ["city"]}]
    assert handler.rounds == 1


def test_end_to_end_a_retry_without_the_answer_gets_a_fresh_input_required() -> None:
    server = Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}})
    handler = WeatherServer()

    # Round 1 on a hand-made original leg.
    server.receive_data(hand_made_leg(1))
    first = json.loads(serve(server, handler))
    assert first["id"] == 1
    assert first["result"]["resultType"] == "input_required"
    assert list(first["result"]["inputRequests"]) == ["city"]
    state = first["result"]["requestState"]

    # A retry that echoes the state but answers nothing: asked again, not an error.
    server.receive_data(hand_made_leg(2, requestState=state))
    second = json.loads(serve(server, handler, now=1.0))
    assert second["id"] == 2 and "error" not in second
    assert second["result"]["resultType"] == "input_required"
    assert second["result"]["inputRequests"] == first["result"]["inputRequests"]
    assert second["result"]["requestState"] != state  # a fresh state for the new round
    assert handler.opened == [{"round": 1, "asked": ["city"]}]

    # A retry answering only some other key (and a null city): asked again, too.
    server.receive_data(
        hand_made_leg(
            3,
            requestState=second["result"]["requestState"],
            inputResponses={"town": {"action": "accept"}, "city": None},
        )
    )
    third = json.loads(serve(server, handler, now=2.0))
    assert third["result"]["resultType"] == "input_required"
    assert list(third["result"]["inputRequests"]) == ["city"]

    # The answer at last.
    server.receive_data(
        hand_made_leg(
            4,
            requestState=third["result"]["requestState"],
            inputResponses={"city": {"action": "accept", "content": {"city": "Bergen"}}},
        )
    )
    fourth = json.loads(serve(server, handler, now=3.0))
    assert fourth["result"]["content"] == [{"type": "text", "text": "Sunny in Bergen"}]
    assert handler.rounds == 3


def test_end_to_end_a_tampered_state_is_answered_with_32602() -> None:
    server = Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}})
    handler = WeatherServer()
    server.receive_data(hand_made_leg(1))
    state = json.loads(serve(server, handler))["result"]["requestState"]
    server.receive_data(
        hand_made_leg(
            2,
            requestState=state + "-TAMPERED",
            inputResponses={"city": {"action": "accept", "content": {"city": "Oslo"}}},
        )
    )
    reply = json.loads(serve(server, handler, now=1.0))
    assert reply == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {
            "code": -32602,
            "message": "Invalid or expired requestState",
            "data": {"reason": "bad_signature"},
        },
    }
    # Another tool's params with a genuine state: refused before the handler reads answers.
    server.receive_data(hand_made_leg(3, requestState=state, arguments={"when": "tomorrow"}))
    reply = json.loads(serve(server, handler, now=1.0))
    assert reply["error"]["data"] == {"reason": "wrong_params"}
    assert handler.opened == []


def test_end_to_end_a_client_without_the_capability_gets_32021() -> None:
    client = Connection(CLIENT, era="modern", info=CLIENT_INFO, capabilities={"roots": {}})
    server = Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}})
    handler = WeatherServer()
    call = client.call("tools/call", TOOL_PARAMS, now=0.0)
    (first,) = client_events(client, call)
    server.receive_data(client.send(CallEvent(call=call, event=first)))
    client.receive_data(serve(server, handler))
    (failed,) = client_events(client, call)
    assert isinstance(failed, Failed)
    assert isinstance(failed.error, PeerError)
    assert failed.error.code == -32021
    assert failed.error.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    assert handler.rounds == 0


def test_end_to_end_server_refuses_an_ask_beyond_the_declared_capabilities() -> None:
    # The handler that forgets to gate is stopped by the server Connection itself.
    client = Connection(CLIENT, era="modern", info=CLIENT_INFO, capabilities={})
    client_call = client.call("tools/call", TOOL_PARAMS, now=0.0)
    (first,) = client_events(client, client_call)
    _, server = modern_pair()
    server.receive_data(client.send(CallEvent(call=client_call, event=first)))
    (request,) = drain(server)
    assert isinstance(request, Request)
    with pytest.raises(AppResultRefused, match="capabilities"):
        server.send(ResultResponse(id=request.id, result=input_required(ASK_CITY)))
    assert isinstance(error_response(request.id, CapabilityRequired({})), ErrorResponse)


def test_answers_get_needs_an_input_request_to_read_against() -> None:
    answers = Answers({"inputResponses": {"city": {"action": "accept"}}})
    with pytest.raises(LocalProtocolError, match="not an input request"):
        answers.get("city", {"method": "elicitation/create"})  # type: ignore[arg-type]
