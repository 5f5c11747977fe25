"""The server step's fast paths decide exactly as the slow ones they skip.

Each shortcut taken on every leg (a keyed HMAC copied per token, the state's own
payload read by orjson, the params digest carried from ``open`` to the next
``seal``, a schema found by identity, a spend without its ``Redeemed``) is checked
against what it replaces: the same bytes, the same verdicts, the same refusals.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.budget import examples

import mrtr_core as m
from mrtr_core._connection import _server_rules
from mrtr_core._meta import read_modern_request
from mrtr_core.server import (
    Ask,
    HandlerContext,
    InvalidRequestState,
    MemoryNonceStore,
    StateSealer,
    _plain,
    _sealing,
    _validation,
    close_leg,
    elicit_form,
    open_leg,
    run_handler,
)
from mrtr_core.server._handlers import spend_redeemed
from mrtr_core.server._sealing import OpenedState, params_digest
from mrtr_core.server._validation import compile_schema
from mrtr_core.wire._convert import structure, structure_input_request, unstructure_input_request
from mrtr_core.wire._inputs import INPUT_KINDS
from mrtr_core.wire._model import ElicitFormRequest

KEY = b"K" * 32
NOW = 1_000.0
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
PARAMS: dict[str, Any] = {"name": "book", "arguments": {"city": "Oslo"}, "_meta": META}
ASK = elicit_form("Confirm?", {"ok": {"type": "boolean"}}, required=["ok"])


def sealer(**options: Any) -> StateSealer:
    return StateSealer({"k": KEY}, "k", **options)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# --- the keyed HMAC, copied per token ----------------------------------------------------------


def test_every_mac_is_plain_hmac_sha256_of_its_own_token() -> None:
    # Copies of one keyed HMAC must not carry state from one token to the next.
    s = sealer()
    tokens = [s.seal(i, method="m", params={"i": i}, principal=None, now=NOW) for i in range(3)]
    for token in tokens:
        version, key_id, body, mac = token.split(".")
        signed = f"{version}.{key_id}.{body}".encode("ascii")
        assert mac == b64(hmac.new(KEY, signed, hashlib.sha256).digest())
    assert len({t.split(".")[3] for t in tokens}) == 3


def test_the_principal_digest_is_the_keyed_hmac_of_the_principal() -> None:
    s = sealer()
    token = s.seal(1, method="m", params={}, principal="alice", now=NOW)
    payload = json.loads(base64.urlsafe_b64decode(token.split(".")[2] + "=="))
    expected = hmac.new(KEY, b"principal\x00alice", hashlib.sha256).digest()[:16]
    assert payload["p"] == b64(expected)
    # ... and a token sealed between two principal digests leaves them the same.
    s.seal(2, method="m", params={}, principal="bob", now=NOW)
    assert s.open(token, method="m", params={}, principal="alice", now=NOW).value == 1
    with pytest.raises(InvalidRequestState) as caught:
        s.open(token, method="m", params={}, principal="bob", now=NOW)
    assert caught.value.reason == "wrong_principal"


# --- the payload, read by orjson or the stdlib -------------------------------------------------


VALUES: list[Any] = [
    {"n": 2**70},  # 22 digits: orjson would make a float of it
    {"n": -(2**63) - 1},  # 19 digits past the signed 64-bit range
    {"n": 2**64 - 1, "s": "1234567890123456789012"},  # digits in a string count too
    {"s": "\ud800"},  # a lone surrogate: escaped by the stdlib writer, refused by orjson
    {"f": 1e300, "i": 12345678901234567, "u": "\u00e9"},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_own_payload_reads_the_same_with_and_without_orjson(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = sealer()
    token = s.seal(value, method="m", params={}, principal=None, now=NOW)
    fast = s.open(token, method="m", params={}, principal=None, now=NOW).value
    monkeypatch.setattr(_sealing, "_orjson", None)
    slow = s.open(token, method="m", params={}, principal=None, now=NOW).value
    assert json.dumps(fast) == json.dumps(slow) == json.dumps(value)
    assert [type(v) for v in fast.values()] == [type(v) for v in value.values()]


def test_the_stdlib_reader_still_refuses_a_broken_payload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sealing, "_orjson", None)
    s = sealer()
    body = b64(b"{not json")
    signed = f"mrtr1.k.{body}".encode("ascii")
    token = f"mrtr1.k.{body}.{b64(hmac.new(KEY, signed, hashlib.sha256).digest())}"
    with pytest.raises(InvalidRequestState) as caught:
        s.open(token, method="m", params={}, principal=None, now=NOW)
    assert caught.value.reason == "malformed"


# --- the params digest, carried from open to the next seal -------------------------------------


def test_opened_state_carries_the_digest_it_checked_outside_equality() -> None:
    s = sealer()
    token = s.seal(1, method="m", params=PARAMS, principal=None, now=NOW)
    opened = s.open(token, method="m", params=PARAMS, principal=None, now=NOW)
    assert opened.params_digest == params_digest(PARAMS)
    same = OpenedState(
        value=1,
        nonce=opened.nonce,
        issued_at=opened.issued_at,
        expires_at=opened.expires_at,
        key_id="k",
    )
    assert same == opened and same.params_digest is None


def info_for(params: dict[str, Any]) -> Any:
    return read_modern_request(1, "tools/call", params, ("2026-07-28",))


def asks_twice(ctx: HandlerContext) -> Any:
    if ctx.state is None:
        return ctx.ask({"ok": ASK}, state="first")
    return ctx.ask({"again": ASK}, state="second")


def test_a_retry_leg_seals_its_next_state_to_the_same_params() -> None:
    s = sealer(store=MemoryNonceStore())
    first = run_handler(
        asks_twice,
        m.Request(id=1, method="tools/call", params=PARAMS),
        info_for(PARAMS),
        sealer=s,
        principal=None,
        now=NOW,
    )
    retry = {**PARAMS, "requestState": first["requestState"], "inputResponses": {}}
    second = run_handler(
        asks_twice,
        m.Request(id=2, method="tools/call", params=retry),
        info_for(retry),
        sealer=s,
        principal=None,
        now=NOW,
    )
    token = second["requestState"]
    opened = s.open(token, method="tools/call", params=PARAMS, principal=None, now=NOW)
    assert opened.value["v"] == "second"
    other = {**PARAMS, "arguments": {"city": "Bergen"}}
    with pytest.raises(InvalidRequestState) as caught:
        s.open(token, method="tools/call", params=other, principal=None, now=NOW)
    assert caught.value.reason == "wrong_params"


def test_a_context_opened_by_a_host_without_the_digest_still_binds_the_params() -> None:
    s = sealer()
    ctx = open_leg(
        m.Request(id=1, method="tools/call", params=PARAMS),
        info_for(PARAMS),
        sealer=s,
        principal=None,
        now=NOW,
    )
    # A host may build its OpenedState itself (the digest is optional there).
    ctx.opened = OpenedState(value=None, nonce="n", issued_at=NOW, expires_at=NOW + 60, key_id="k")
    token = close_leg(ctx, Ask(requests={"ok": ASK}))["requestState"]
    assert s.open(token, method="tools/call", params=PARAMS, principal=None, now=NOW)
    with pytest.raises(InvalidRequestState):
        s.open(token, method="tools/call", params={"name": "x"}, principal=None, now=NOW)


# --- spending without a Redeemed ---------------------------------------------------------------


class CountingStore:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float, float]] = []

    def consume(self, nonce: str, expires_at: float, now: float) -> bool:
        self.calls.append((nonce, expires_at, now))
        return len(self.calls) == 1


def test_spend_redeemed_spends_once_what_to_spend_names() -> None:
    s = sealer()
    token = s.seal(
        {"f": "flow", "d": NOW + 60, "g": [], "q": {}, "v": None},
        method="tools/call",
        params=PARAMS,
        principal=None,
        now=NOW,
    )
    params = {**PARAMS, "requestState": token}
    ctx = open_leg(
        m.Request(id=1, method="tools/call", params=params),
        info_for(params),
        sealer=s,
        principal=None,
        now=NOW,
    )
    pending = ctx.to_spend
    assert pending is not None
    store = CountingStore()
    spend_redeemed(ctx, None)  # no store: nothing spent, still pending
    assert ctx.to_spend == pending
    spend_redeemed(ctx, store)
    spend_redeemed(ctx, store)  # spent already: the store is not asked again
    assert store.calls == [(pending.nonce, pending.expires_at, NOW)]
    assert ctx.to_spend is None


# --- close_leg's dict first --------------------------------------------------------------------


def test_close_leg_copies_any_result_mapping() -> None:
    ctx = open_leg(
        m.Request(id=1, method="tools/call", params=PARAMS),
        info_for(PARAMS),
        sealer=None,
        principal=None,
        now=NOW,
    )
    result = {"content": []}
    out = close_leg(ctx, result)
    assert out == result and out is not result
    proxied = close_leg(ctx, MappingProxyType({"content": [1]}))
    assert proxied == {"content": [1]} and type(proxied) is dict


def test_answers_read_a_mapping_that_is_not_a_dict() -> None:
    params = {**PARAMS, "inputResponses": MappingProxyType({"ok": {"action": "decline"}})}
    answers = m.server.Answers(params)
    reply = answers.get("ok", ASK)
    assert isinstance(reply, m.wire.ElicitResult) and reply.action == "decline"
    assert answers.unproven == {"ok"}


# --- compile_schema by identity ----------------------------------------------------------------


def test_a_schema_mutated_in_place_is_compiled_again() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    first = compile_schema(schema)
    assert compile_schema(schema) is first  # by identity
    assert first.problem({"n": "x"}) is not None
    schema["properties"]["n"]["type"] = "string"  # a nested change: the snapshot is deep
    again = compile_schema(schema)
    assert again is not first
    assert again.problem({"n": "x"}) is None and again.problem({"n": 1}) is not None


def test_an_equal_schema_object_shares_the_compilation() -> None:
    a = {"type": "object", "required": ["z"]}
    b = {"required": ["z"], "type": "object"}
    assert compile_schema(a) is compile_schema(b)


def test_a_schema_with_a_tuple_is_still_cached_by_its_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The snapshot is JSON (a list): a tuple never equals it, so the canonical key decides.
    schema = {"type": "object", "required": ("a",)}
    first = compile_schema(schema)
    assert compile_schema(schema) is first
    assert first.problem({}) is not None


def test_the_identity_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_validation, "MAX_COMPILED_SCHEMAS", 2)
    monkeypatch.setattr(_validation, "_by_identity", {})
    schemas = [{"type": "object", "title": f"s{i}"} for i in range(5)]
    for schema in schemas:
        compile_schema(schema)
        assert len(_validation._by_identity) <= 2
    assert compile_schema(schemas[-1]).problem({}) is None


# --- base64url around binascii -----------------------------------------------------------------


@pytest.mark.parametrize("size", range(40))
def test_base64url_is_the_standard_librarys(size: int) -> None:
    data = bytes(range(256))[size : size * 5]  # (every residue of the length mod 3)
    text = _sealing._b64encode(data)
    assert text == base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
    assert _sealing._b64decode(text) == data


@pytest.mark.parametrize("text", ["a", "!!ab", "a b", "\u00e9abc"])
def test_base64url_refuses_what_the_standard_library_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    with pytest.raises(ValueError):
        _sealing._b64decode(text)


# --- a plain form answer, built without the converter ------------------------------------------

_ANSWER_VALUES = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
ANSWERS = st.one_of(
    st.dictionaries(
        st.sampled_from(["action", "content", "_meta", "x", "\x00extra"]),
        st.sampled_from(["accept", "decline", "cancel", "other", ""])
        | _ANSWER_VALUES
        | st.dictionaries(st.text(max_size=3), _ANSWER_VALUES, max_size=3)
        | st.lists(_ANSWER_VALUES, max_size=2),
        max_size=4,
    ),
    st.lists(st.none(), max_size=1),
    st.text(max_size=3),
)


@given(raw=ANSWERS)
@settings(max_examples=examples(times=4), deadline=None)
def test_a_plain_answer_is_the_answer_the_converter_makes(raw: Any) -> None:
    fast = _plain.plain_elicit_result(raw)
    try:
        slow = structure(raw, m.wire.ElicitResult)
    except m.RemoteProtocolError:
        assert fast is None
        return
    assert fast is None or (fast == slow and fast.extra == slow.extra)


def test_a_plain_answer_keeps_its_extra_keys_and_is_checked_against_the_schema() -> None:
    params = {"inputResponses": {"ok": {"action": "accept", "content": {"ok": "yes"}, "x": 1}}}
    with pytest.raises(m.server.InvalidAnswer) as caught:
        m.server.Answers(params).get("ok", ASK)
    assert caught.value.field == "/ok"
    params = {"inputResponses": {"ok": {"action": "accept", "content": {"ok": True}, "x": 1}}}
    reply = m.server.Answers(params).get("ok", ASK)
    assert isinstance(reply, m.wire.ElicitResult) and reply.extra == {"x": 1}
    bad = {"inputResponses": {"ok": {"action": "maybe"}}}
    with pytest.raises(m.server.InvalidAnswer):
        m.server.Answers(bad).get("ok", ASK)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_ODD = st.tuples(st.integers()) | st.dictionaries(st.integers(), st.none(), min_size=1, max_size=1)
SCHEMAS = st.dictionaries(st.text(max_size=4), _JSON | _ODD, max_size=4)
FORMS = st.builds(
    ElicitFormRequest,
    message=st.text(max_size=5),
    requested_schema=SCHEMAS,
    mode=st.sampled_from([None, "form"]),
    extra=st.sampled_from([{}, {"x": 1}]),
)


@given(request=FORMS)
@settings(max_examples=examples(times=3), deadline=None)
def test_a_plain_form_ask_is_written_as_the_converter_writes_it(request: ElicitFormRequest) -> None:
    fast = _plain.plain_form_wire(request)
    slow = unstructure_input_request(request)
    if fast is None:
        return
    assert fast == slow and json.dumps(fast) == json.dumps(slow)  # (the same key order too)
    # A copy: the wire form shares no dict or list with the ask.
    assert fast["params"]["requestedSchema"] is not request.requested_schema


def test_plain_form_wire_leaves_the_others_to_the_converter() -> None:
    assert _plain.plain_form_wire(m.server.elicit_url("Go", "https://example.com/x")) is None
    assert (
        _plain.plain_form_wire(ElicitFormRequest(message="m", requested_schema={}, extra={"x": 1}))
        is None
    )
    odd = ElicitFormRequest(message="m", requested_schema={"t": ("a",)})
    assert _plain.plain_form_wire(odd) is None
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):  # past the recursion limit: the converter decides
        node["d"] = {}
        node = node["d"]
    assert _plain.plain_form_wire(ElicitFormRequest(message="m", requested_schema=deep)) is None


WIRE_REQUESTS = st.fixed_dictionaries(
    {
        "method": st.sampled_from(["elicitation/create", "sampling/createMessage", "x"]),
        "params": st.none()
        | st.dictionaries(
            st.sampled_from(["message", "requestedSchema", "mode", "url", "other"]),
            st.sampled_from(["form", "url", "m"]) | _JSON,
            max_size=4,
        ),
    }
) | st.text(max_size=2)


@given(raw=WIRE_REQUESTS)
@settings(max_examples=examples(times=4), deadline=None)
def test_a_plain_form_request_is_the_one_the_converter_reads(raw: Any) -> None:
    fast = _plain.plain_form_request(raw, INPUT_KINDS)
    try:
        slow = structure_input_request(raw, INPUT_KINDS)
    except m.RemoteProtocolError:
        assert fast is None
        return
    assert fast is None or (fast == slow and fast.extra == slow.extra)


def test_check_input_required_takes_the_plain_path_and_still_refuses() -> None:
    info = info_for(PARAMS)
    built = m.server.input_required({"ok": ASK}, state="s")
    assert _server_rules._plain_requests(built, INPUT_KINDS) == {"ok": ASK}
    _server_rules.check_input_required(info, built)
    # Not plain: the general way (which refuses what it refused before).
    url = m.server.input_required({"u": m.server.elicit_url("Go", "https://example.com/x")})
    assert _server_rules._plain_requests(url, INPUT_KINDS) is None
    for odd in ({**built, "requestState": 5}, {**built, "inputRequests": [1]}):
        assert _server_rules._plain_requests(odd, INPUT_KINDS) is None
        with pytest.raises(m.AppResultRefused):
            _server_rules.check_input_required(info, odd)
    # Plain, yet asking what the request did not declare: -32021 as before.
    bare = read_modern_request(1, "tools/call", {"_meta": {**META, META_CAPS: {}}}, ("2026-07-28",))
    with pytest.raises(m.AppResultRefused) as caught:
        _server_rules.check_input_required(bare, built)
    assert caught.value.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY


def test_plain_shapes_leave_lists_of_odd_values_and_url_asks_to_the_converter() -> None:
    in_list = ElicitFormRequest(message="m", requested_schema={"enum": ["a", ("b",)]})
    assert _plain.plain_form_wire(in_list) is None
    url = {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "u"}}
    assert _plain.plain_form_request(url, INPUT_KINDS) is None
    assert isinstance(structure_input_request(url, INPUT_KINDS), m.wire.ElicitUrlRequest)
