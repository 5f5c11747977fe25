"""The server never believes the client: proof of asking, single use, schemas, ask rules.

* proof: an answer counts as asked only when the previous leg's sealed state says
  so (``ctx.proven``); guarded side effects refuse unproven answers, and
  ``require_proof`` / ``Steps`` read them as missing;
* single use: nothing is spent on a leg without state, and every redeemed state is
  spent until its own expiry;
* schemas: a form answer is checked against the schema it was asked with;
* the ask builders refuse what the spec forbids.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from mrtr_core import LocalProtocolError, Request
from mrtr_core._errors import INVALID_PARAMS
from mrtr_core.server import (
    Answers,
    HandlerContext,
    InvalidAnswer,
    InvalidRequestState,
    LegacyShim,
    MemoryNonceStore,
    Next,
    RequestInfo,
    ShimDone,
    ShimSend,
    StateSealer,
    Steps,
    UnprovenAnswer,
    close_leg,
    elicit_form,
    elicit_url,
    open_leg,
    run_handler,
)
from mrtr_core.server import _validation as validation
from mrtr_core.server._handlers import Redeemed, spend_redeemed
from mrtr_core.server._validation import compile_schema, schema_problem
from mrtr_core.wire import ElicitFormRequest, ElicitResult

KEY = b"0123456789abcdef0123456789abcdef"
CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}}
BASE: dict[str, Any] = {"name": "deploy", "arguments": {"env": "prod"}}
CONFIRM = elicit_form("Deploy?", {"confirm": {"type": "boolean"}}, required=["confirm"])
LOGIN = elicit_url("Sign in", "https://auth.example.com/start")
YES = {"action": "accept", "content": {"confirm": True}}


def info(capabilities: Mapping[str, Any] = CAPS) -> RequestInfo:
    return RequestInfo(
        id=1,
        method="tools/call",
        era="modern",
        protocol_version="2026-07-28",
        capabilities=dict(capabilities),
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )


def new_sealer(store: MemoryNonceStore | None = None) -> StateSealer:
    return StateSealer({"k1": KEY}, "k1", store=store)


def leg(
    handler: Callable[[HandlerContext], Any],
    params: Mapping[str, Any],
    sealer: StateSealer | None,
    now: float = 10.0,
) -> dict[str, Any]:
    request = Request(id=1, method="tools/call", params=dict(params))
    return run_handler(handler, request, info(), sealer=sealer, principal="ada", now=now)


def payload(token: str) -> dict[str, Any]:
    body = token.split(".")[2]
    found = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert isinstance(found, dict)
    return found


def deployer(deployed: list[str], *, require_proof: bool = False) -> Callable[..., Any]:
    """The deploy tool of the issue: ask a confirmation, then deploy once."""

    def deploy(ctx: HandlerContext) -> Any:
        if require_proof:
            ctx.require_proof()
        answer = ctx.answer("confirm", CONFIRM)
        if answer is None:
            return ctx.ask({"confirm": CONFIRM})
        if ctx.once("deploy"):
            deployed.append(ctx.arguments["env"])
        return {"content": [{"type": "text", "text": "deployed"}]}

    return deploy


# --- 1. proof of asking ----------------------------------------------------------------------


def test_a_confirmation_without_state_never_deploys() -> None:
    """The issue's reproduction: inputResponses.confirm and no requestState, 3 times."""
    deployed: list[str] = []
    sealer = new_sealer(MemoryNonceStore())
    for _ in range(3):
        with pytest.raises(UnprovenAnswer) as caught:
            leg(deployer(deployed), {**BASE, "inputResponses": {"confirm": YES}}, sealer)
        assert caught.value.code == INVALID_PARAMS == -32602
        assert caught.value.data == {"key": "confirm", "reason": "unproven"}
        assert "'confirm'" in caught.value.message
    assert deployed == []


def test_with_require_proof_the_forged_confirmation_is_simply_asked_again() -> None:
    deployed: list[str] = []
    sealer = new_sealer(MemoryNonceStore())
    forged = {**BASE, "inputResponses": {"confirm": YES}}
    for _ in range(3):
        reply = leg(deployer(deployed, require_proof=True), forged, sealer)
        assert list(reply["inputRequests"]) == ["confirm"]
    assert deployed == []
    # The real flow: asked, then answered with the state that proves it.
    reply = leg(deployer(deployed, require_proof=True), BASE, sealer)
    assert payload(reply["requestState"])["s"]["q"] == {"confirm": "elicitation/create"}
    done = leg(
        deployer(deployed, require_proof=True),
        {**BASE, "requestState": reply["requestState"], "inputResponses": {"confirm": YES}},
        sealer,
        now=11.0,
    )
    assert done["content"][0]["text"] == "deployed"
    assert deployed == ["prod"]


def test_an_unproven_answer_is_still_read_by_a_plain_handler_and_recorded() -> None:
    """The spec's stateless model: a plain re-entrant handler gets the answer."""
    seen: dict[str, Any] = {}

    def greet(ctx: HandlerContext) -> Any:
        seen["answer"] = ctx.answer("confirm", CONFIRM)
        seen["unproven"] = set(ctx.answers.unproven)
        seen["proven"] = dict(ctx.proven)
        return {"content": []}

    leg(greet, {**BASE, "inputResponses": {"confirm": YES}}, new_sealer())
    assert seen == {
        "answer": ElicitResult(action="accept", content={"confirm": True}),
        "unproven": {"confirm"},
        "proven": {},
    }


def test_proof_is_for_the_key_the_previous_leg_asked_as_the_same_kind() -> None:
    sealer = new_sealer()
    seen: list[tuple[bool, bool]] = []

    def handler(ctx: HandlerContext) -> Any:
        if ctx.state is None:  # leg 1: ask "confirm" as a URL visit, "other" as a form
            return ctx.ask({"confirm": LOGIN, "other": CONFIRM}, state=1)
        ctx.answer("confirm", CONFIRM)  # read as a *form* answer: another kind
        ctx.answer("other", CONFIRM)
        seen.append(
            (ctx.answers.is_proven("confirm", CONFIRM), ctx.answers.is_proven("other", CONFIRM))
        )
        assert ctx.answers.unproven == {"confirm"}
        return ctx.ask({"later": CONFIRM}, state=2)

    first = leg(handler, BASE, sealer)
    assert payload(first["requestState"])["s"]["q"] == {
        "confirm": "elicitation/create#url",
        "other": "elicitation/create",
    }
    answers = {"confirm": YES, "other": YES}
    second = leg(
        handler, {**BASE, "requestState": first["requestState"], "inputResponses": answers}, sealer
    )
    assert seen == [(False, True)]
    # Leg 3 proves only what leg 2 asked ("later"), not what leg 1 asked.
    opened = open_leg(
        Request(id=1, method="tools/call", params={**BASE, "requestState": second["requestState"]}),
        info(),
        sealer=sealer,
        principal="ada",
        now=12.0,
    )
    assert opened.proven == {"later": "elicitation/create"}


def test_require_proof_reads_unproven_answers_as_missing() -> None:
    answers = Answers(
        {"inputResponses": {"confirm": YES, "other": YES}},
        proven={"other": "elicitation/create"},
    )
    asked = {"confirm": CONFIRM, "other": CONFIRM}
    assert answers.missing(asked) == {}
    answers.require_proof = True
    assert answers.get("confirm", CONFIRM) is None
    assert answers.get("other", CONFIRM) == ElicitResult(action="accept", content={"confirm": True})
    assert answers.missing(asked) == {"confirm": CONFIRM}
    assert answers.unproven == set()  # nothing unproven was read


def test_once_after_an_unproven_read_refuses_and_records_no_guard() -> None:
    def handler(ctx: HandlerContext) -> Any:
        ctx.answer("confirm", CONFIRM)
        try:
            ctx.once("deploy")
        finally:
            assert ctx._guards == []
        return {"content": []}

    with pytest.raises(UnprovenAnswer):
        leg(handler, {**BASE, "inputResponses": {"confirm": YES}}, new_sealer())


def test_a_guard_that_already_fired_stays_quiet_even_after_an_unproven_read() -> None:
    sealer = new_sealer()
    fired: list[bool] = []

    def handler(ctx: HandlerContext) -> Any:
        if ctx.state is None:
            fired.append(ctx.once("notify"))  # fires on leg 1, before any answer
            return ctx.ask({"confirm": CONFIRM}, state=1)
        ctx.answer("unasked", CONFIRM)  # unproven
        fired.append(ctx.once("notify"))  # already fired: False, no error
        return {"content": []}

    first = leg(handler, BASE, sealer)
    retry = {**BASE, "requestState": first["requestState"], "inputResponses": {"unasked": YES}}
    leg(handler, retry, sealer)
    assert fired == [True, False]


def steps_deployer(deployed: list[str], ran: list[str]) -> Steps:
    steps = Steps()

    @steps.step("ask")
    def ask(ctx: HandlerContext, data: Any) -> Any:
        ran.append("ask")
        return Next(None, ask={"confirm": CONFIRM})

    @steps.step("deploy")
    def deploy(ctx: HandlerContext, data: Any) -> Any:
        ran.append("deploy")
        deployed.append("prod")
        return {"content": []}

    return steps


def test_steps_asks_an_attacker_again_and_never_runs_its_last_step() -> None:
    deployed: list[str] = []
    ran: list[str] = []
    reply = leg(
        steps_deployer(deployed, ran), {**BASE, "inputResponses": {"confirm": YES}}, new_sealer()
    )
    assert list(reply["inputRequests"]) == ["confirm"]
    assert deployed == [] and ran == ["ask"]


def test_the_last_step_refuses_after_an_unproven_read_before_steps_began() -> None:
    deployed: list[str] = []
    steps = steps_deployer(deployed, [])
    sealer = new_sealer()
    first = leg(steps, BASE, sealer)

    def wrapper(ctx: HandlerContext) -> Any:
        ctx.answer("extra", CONFIRM)  # read before Steps turned proof on: recorded
        return steps(ctx)

    retry = {
        **BASE,
        "requestState": first["requestState"],
        "inputResponses": {"confirm": YES, "extra": YES},
    }
    with pytest.raises(UnprovenAnswer) as caught:
        leg(wrapper, retry, sealer)
    assert caught.value.data["key"] == "extra"
    assert deployed == []


def test_a_state_sealed_without_what_was_asked_proves_nothing() -> None:
    """A state from before this change has no "q": it opens, and proves no answer."""
    sealer = new_sealer()
    token = sealer.seal(
        {"f": "flow", "d": 5000.0, "g": [], "v": None},
        method="tools/call",
        params=BASE,
        principal="ada",
        now=1.0,
    )
    request = Request(id=1, method="tools/call", params={**BASE, "requestState": token})
    ctx = open_leg(request, info(), sealer=sealer, principal="ada", now=2.0)
    assert ctx.proven == {}


@pytest.mark.parametrize("asked", [["confirm"], {"confirm": 7}], ids=["list", "kind-not-str"])
def test_a_state_whose_asked_keys_are_not_in_shape_is_malformed(asked: Any) -> None:
    sealer = new_sealer()
    token = sealer.seal(
        {"f": "flow", "d": 5000.0, "g": [], "q": asked, "v": None},
        method="tools/call",
        params=BASE,
        principal="ada",
        now=1.0,
    )
    with pytest.raises(InvalidRequestState) as caught:
        leg(deployer([]), {**BASE, "requestState": token}, sealer)
    assert caught.value.reason == "malformed"


def test_the_2025_shim_vouches_for_the_answers_it_asked_for_itself() -> None:
    """Without a sealer there is no state to prove anything; the shim asked with real
    requests, so the answers it brings back are proven and the guard fires."""
    deployed: list[str] = []
    ids = iter(range(100, 200))
    request = Request(id=1, method="tools/call", params=BASE)
    shim = LegacyShim(
        deployer(deployed), request, info(), new_id=lambda: next(ids), sealer=None, principal=None
    )
    shim.start(now=0.0)
    event = shim.next_event()
    assert isinstance(event, ShimSend) and isinstance(event.message, Request)
    from mrtr_core import ResultResponse

    shim.receive(ResultResponse(id=event.message.id, result=YES), now=1.0)
    done = shim.next_event()
    assert isinstance(done, ShimDone) and isinstance(done.response, ResultResponse)
    assert deployed == ["prod"]


# --- 2. single use: what is spent, and when ----------------------------------------------------


def test_single_leg_calls_spend_nothing_and_a_later_flow_still_works() -> None:
    """The issue's second reproduction: a store of 10 and 1,000 single-leg calls."""
    store = MemoryNonceStore(max_entries=10)
    sealer = new_sealer(store)
    deployed: list[str] = []
    forged = {**BASE, "inputResponses": {"confirm": YES}}
    for n in range(1000):
        reply = leg(deployer(deployed, require_proof=True), forged, sealer, now=10.0 + n)
        assert reply["resultType"] == "input_required"
        with pytest.raises(UnprovenAnswer):
            leg(deployer(deployed), forged, sealer, now=10.0 + n)
    assert len(store) == 0 and deployed == []
    first = leg(deployer(deployed), BASE, sealer, now=2000.0)
    retry = {**BASE, "requestState": first["requestState"], "inputResponses": {"confirm": YES}}
    leg(deployer(deployed), retry, sealer, now=2001.0)
    assert deployed == ["prod"]
    assert len(store) == 1
    assert list(store._expiry.values()) == [payload(first["requestState"])["exp"]]
    with pytest.raises(InvalidRequestState) as caught:
        leg(deployer(deployed), retry, sealer, now=2002.0)
    assert caught.value.reason == "replayed"
    assert deployed == ["prod"]


def test_what_a_leg_must_spend_is_its_redeemed_state() -> None:
    sealer = new_sealer()
    first = leg(deployer([]), BASE, sealer)
    fresh = open_leg(Request(id=1, method="tools/call", params=BASE), info(), sealer=sealer,
                     principal="ada", now=11.0)  # fmt: skip
    assert fresh.to_spend is None  # no state: nothing to spend
    request = Request(
        id=1, method="tools/call", params={**BASE, "requestState": first["requestState"]}
    )
    ctx = open_leg(request, info(), sealer=sealer, principal="ada", now=11.0)
    opened = payload(first["requestState"])
    assert ctx.to_spend == Redeemed(nonce=opened["n"], expires_at=opened["exp"])
    store = MemoryNonceStore()
    spend_redeemed(ctx, store)
    assert ctx.to_spend is None and len(store) == 1
    spend_redeemed(ctx, store)  # nothing pending: no second spend
    assert len(store) == 1
    again = open_leg(request, info(), sealer=sealer, principal="ada", now=12.0)
    spend_redeemed(again, None)  # no store: nothing happens
    assert again.to_spend is not None
    with pytest.raises(InvalidRequestState) as caught:
        again.record_spend(False)
    assert caught.value.reason == "replayed"


def test_a_guard_spends_the_state_when_the_host_did_not() -> None:
    """A host that used open_leg/close_leg without spending: the guard spends it."""
    store = MemoryNonceStore()
    sealer = new_sealer(store)
    deployed: list[str] = []
    first = leg(deployer(deployed), BASE, sealer)
    params = {**BASE, "requestState": first["requestState"], "inputResponses": {"confirm": YES}}
    request = Request(id=1, method="tools/call", params=params)
    ctx = open_leg(request, info(), sealer=sealer, principal="ada", now=11.0)
    close_leg(ctx, deployer(deployed)(ctx))
    assert deployed == ["prod"] and len(store) == 1
    replay = open_leg(request, info(), sealer=sealer, principal="ada", now=12.0)
    with pytest.raises(InvalidRequestState) as caught:
        deployer(deployed)(replay)
    assert caught.value.reason == "replayed"
    assert deployed == ["prod"]


# --- 3. answers checked against the schema they were asked with -----------------------------

NIGHTS = elicit_form(
    "Your stay",
    {
        "nights": {"type": "integer", "minimum": 1, "maximum": 30},
        "name": {"type": "string"},
        "room": {"type": "string", "enum": ["single", "double"]},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
    },
    required=["nights"],
)
GOOD = {
    "nights": 3,
    "name": "Ada",
    "room": "double",
    "email": "ada@example.com",
    "site": "https://example.com/a",
    "day": "2026-07-28",
    "at": "2026-07-28T10:00:00Z",
}


def read(content: Any, action: str = "accept") -> Any:
    raw: dict[str, Any] = {"action": action}
    if content is not None:
        raw["content"] = content
    return Answers({"inputResponses": {"stay": raw}}).get("stay", NIGHTS)


def test_a_valid_form_answer_is_read() -> None:
    assert read(GOOD) == ElicitResult(action="accept", content=GOOD)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": ["Ada"]}, "/name"),  # a list where a string was asked
        ({"nights": 40}, "/nights"),  # over the maximum
        ({"nights": 2.5}, "/nights"),  # not an integer
        ({"room": "attic"}, "/room"),  # outside the enum
        ({"email": "nope"}, "/email"),
        ({"site": "not a uri"}, "/site"),
        ({"day": "2026-13-45"}, "/day"),
        ({"at": "yesterday"}, "/at"),
    ],
    ids=["list-for-string", "maximum", "integer", "enum", "email", "uri", "date", "date-time"],
)
def test_a_form_answer_that_breaks_its_schema_is_32602_naming_the_field(
    change: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidAnswer) as caught:
        read({**GOOD, **change})
    assert caught.value.code == INVALID_PARAMS
    assert caught.value.data["key"] == "stay"
    assert caught.value.data["field"] == field
    assert caught.value.data["reason"]


def test_a_missing_required_field_names_that_field() -> None:
    without = {k: v for k, v in GOOD.items() if k != "nights"}
    with pytest.raises(InvalidAnswer) as caught:
        read(without)
    assert caught.value.data["field"] == "/nights"
    with pytest.raises(InvalidAnswer) as caught:
        read(None)  # accepted with no content at all
    assert caught.value.data["field"] == "/nights"


def test_declined_and_cancelled_answers_carry_nothing_to_check() -> None:
    assert read(None, "decline") == ElicitResult(action="decline")
    assert read({"nights": "junk"}, "cancel").action == "cancel"


def test_a_deeply_nested_answer_is_an_invalid_answer_not_a_recursion_error() -> None:
    deep: Any = "x"
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(InvalidAnswer) as caught:
        read({**GOOD, "name": deep})
    assert caught.value.data["key"] == "stay"
    for schema in (
        {"type": "object", "properties": {"a": {"enum": [1]}}},
        {"type": "array", "uniqueItems": True},
    ):
        found = schema_problem(schema, {"a": deep} if "properties" in schema else [deep, deep])
        assert found is not None and "nested" in found.reason


def test_a_schema_is_compiled_once_and_the_cache_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert compile_schema(schema) is compile_schema(dict(schema))  # same JSON, same object
    monkeypatch.setattr(validation, "MAX_COMPILED_SCHEMAS", 4)
    monkeypatch.setattr(validation, "_compiled", type(validation._compiled)())
    first = compile_schema({"type": "string", "maxLength": 0})
    for n in range(1, 6):
        compile_schema({"type": "string", "maxLength": n})
    assert len(validation._compiled) == 4
    assert compile_schema({"type": "string", "maxLength": 0}) is not first  # evicted, remade


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "nope"},  # not valid under its dialect
        {"$schema": "https://example.com/my-dialect", "type": "string"},  # unknown dialect
        {"$ref": "https://schemas.example.com/never-fetched.json"},  # never fetched
        {"type": "object", "default": {1, 2}},  # not JSON at all
    ],
    ids=["invalid", "dialect", "remote-ref", "not-json"],
)
def test_an_unusable_schema_is_a_local_error(schema: dict[str, Any]) -> None:
    with pytest.raises(LocalProtocolError):
        compile_schema(schema)


def test_problems_point_at_the_field_with_json_pointer_escapes() -> None:
    schema = {
        "type": "object",
        "properties": {"a/b~c": {"type": "string"}, "need": {}},
        "required": ["need"],
        "additionalProperties": False,
    }
    assert schema_problem(schema, {"need": 1, "a/b~c": 2}).field == "/a~1b~0c"  # type: ignore[union-attr]
    assert schema_problem(schema, {}).field == "/need"  # type: ignore[union-attr]
    assert schema_problem(schema, {"need": 1, "zz": 0}).field == "/zz"  # type: ignore[union-attr]
    assert schema_problem(schema, [1]).field == ""  # type: ignore[union-attr]
    assert schema_problem(schema, {"need": 1}) is None


def test_a_2020_12_schema_is_the_default_dialect() -> None:
    # prefixItems exists from 2020-12 on; under draft 7 it would be ignored.
    schema = {"type": "array", "prefixItems": [{"type": "string"}]}
    assert schema_problem(schema, [1]) is not None
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
    assert schema_problem(draft7, [1]) is None


# --- 4. the ask builders refuse what the spec forbids ------------------------------------------


@pytest.mark.parametrize(
    "definition",
    [
        {"type": "string", "title": "T", "description": "D", "default": "x"},
        {"type": "string", "minLength": 1, "maxLength": 5, "format": "email"},
        {"type": "string", "format": "date-time"},
        {"type": "number", "minimum": 0.5, "maximum": 9, "default": 1},
        {"type": "integer", "minimum": 1},
        {"type": "boolean", "default": False},
        {"type": "string", "enum": ["a", "b"], "default": "a"},
        {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
        {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        {"type": "array", "items": {"type": "string", "enum": ["a"]}, "minItems": 1},
        {
            "type": "array",
            "items": {"anyOf": [{"const": "a", "title": "A"}]},
            "maxItems": 2,
            "default": ["a"],
        },
    ],
    ids=[
        "string",
        "string-bounds",
        "date-time",
        "number",
        "integer",
        "boolean",
        "enum",
        "legacy-enum-names",
        "titled-enum",
        "multi-select",
        "titled-multi-select",
    ],
)
def test_elicit_form_accepts_each_primitive_schema(definition: dict[str, Any]) -> None:
    asked = elicit_form("Fill in", {"field": definition})
    assert isinstance(asked, ElicitFormRequest)
    assert asked.requested_schema["properties"]["field"] == definition


@pytest.mark.parametrize(
    ("definition", "complaint"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, "nested"),
        ({"type": "array", "items": {"type": "object"}}, "multi-select"),
        ({"$ref": "#/$defs/x"}, "type must be"),
        ({"type": "string", "$ref": "#/x"}, "not allowed"),
        ({"type": "string", "pattern": "^a"}, "not allowed"),
        ({"type": 7}, "type must be"),
        ("string", "must be an object"),
        ({"type": "string", "title": 1}, "title"),
        ({"type": "string", "minLength": -1}, "minLength"),
        ({"type": "string", "format": "ipv4"}, "format"),
        ({"type": "string", "enum": [1]}, "enum"),
        ({"type": "string", "enumNames": ["A"]}, "enumNames"),
        ({"type": "string", "oneOf": [{"const": "a"}]}, "oneOf"),
        ({"type": "string", "oneOf": "a"}, "oneOf"),
        (
            {"type": "string", "enum": ["a"], "oneOf": [{"const": "a", "title": "A"}]},
            "not both",
        ),
        ({"type": "string", "default": 1}, "default"),
        ({"type": "string", "maxLength": 9, "oneOf": [{"const": "a", "title": "A"}]}, "no minL"),
        ({"type": "string", "enum": ["a"], "format": "email"}, "no minLength"),
        ({"type": "number", "maximum": "9"}, "maximum"),
        ({"type": "integer", "minimum": True}, "minimum"),
        ({"type": "boolean", "default": "yes"}, "default"),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a"]}, "maxItems": 1.5},
            "maxItems",
        ),
        ({"type": "array", "items": {"type": "string"}}, "multi-select"),
        ({"type": "array", "items": {"type": "integer", "enum": ["a"]}}, "multi-select"),
        ({"type": "array", "items": {"anyOf": [{"const": 1, "title": "A"}]}}, "multi-select"),
        ({"type": "array"}, "multi-select"),
        ({"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": "a"}, "default"),
    ],
)
def test_elicit_form_refuses_what_is_not_a_primitive_schema(
    definition: Any, complaint: str
) -> None:
    with pytest.raises(LocalProtocolError, match=complaint):
        elicit_form("Fill in", {"field": definition})


def test_elicit_form_refuses_odd_containers() -> None:
    with pytest.raises(LocalProtocolError, match="mapping"):
        elicit_form("Fill in", [("a", {"type": "string"})])  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError, match="names are strings"):
        elicit_form("Fill in", {1: {"type": "string"}})


@pytest.mark.parametrize(
    "url",
    [
        "https://auth.example.com/start?state=abc",
        "HTTPS://example.com",
        "http://localhost:8080/cb",
        "http://app.localhost/cb",
        "http://127.0.0.1:9/x",
        "http://[::1]/x",
    ],
)
def test_elicit_url_accepts_https_and_loopback_http(url: str) -> None:
    assert elicit_url("Go", url).url == url


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("javascript:alert(1)", "https"),
        ("data:text/html,<b>hi</b>", "https"),
        ("file:///etc/passwd", "https"),
        ("ftp://example.com/x", "https"),
        ("/relative/path", "relative"),
        ("https:///no-host", "absolute"),
        ("https://user:secret@example.com/", "credentials"),
        ("https://user@example.com/", "credentials"),
        ("http://example.com/", "loopback"),
        ("http://10.0.0.1/", "loopback"),
        ("https://example.com/a b", "spaces"),
        ("https://example.com/\nx", "control"),
        ("https://example.com:99999/", "valid URL"),
        ("https://[::1/", "valid URL"),
        (42, "string"),
    ],
)
def test_elicit_url_refuses_what_is_not_a_safe_https_url(url: Any, complaint: str) -> None:
    with pytest.raises(LocalProtocolError, match=complaint):
        elicit_url("Go", url)
