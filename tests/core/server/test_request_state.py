"""Sealed ``requestState``: the threat model of ``StateSealer``.

The client carries the server's state between rounds and is not trusted.  Every
way of abusing a token (tampering, replaying it on another tool, arguments,
method or user, keeping it past its expiry, spending it twice) must be refused
by ``open`` (or ``consume``) itself, before any handler code could run, with
one error: -32602 "Invalid or expired requestState", ``data = {"reason": ...}``.
Nothing else may escape ``open``: the token is attacker-controlled input.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_core import LocalProtocolError, MrtrError, RemoteProtocolError, error_response
from mrtr_core._errors import INTERNAL_ERROR, INVALID_PARAMS
from mrtr_core.server import (
    InvalidRequestState,
    MemoryNonceStore,
    NonceStore,
    NonceStoreFull,
    StateSealer,
)
from mrtr_core.server._sealing import (
    DEFAULT_MAX_TOKEN_SIZE,
    DEFAULT_TTL,
    REQUEST_STATE_REASONS,
    TOKEN_VERSION,
    OpenedState,
    _b64encode,
    params_digest,
)

KEY_A = b"A" * 32
KEY_B = b"B" * 32
METHOD = "tools/call"
PARAMS: dict[str, Any] = {"name": "book", "arguments": {"city": "Oslo", "nights": 2}}
NOW = 1_000.0


def sealer(**options: Any) -> StateSealer:
    return StateSealer({"a": KEY_A}, "a", **options)


_DEFAULT_STATE: Any = {"step": 1}


def seal(s: StateSealer, value: Any = _DEFAULT_STATE, **overrides: Any) -> str:
    kw: dict[str, Any] = {"method": METHOD, "params": PARAMS, "principal": "alice", "now": NOW}
    kw.update(overrides)
    return s.seal(value, **kw)


def open_(s: StateSealer, token: Any, **overrides: Any) -> OpenedState:
    kw: dict[str, Any] = {"method": METHOD, "params": PARAMS, "principal": "alice", "now": NOW}
    kw.update(overrides)
    return s.open(token, **kw)


def rejected(action: Callable[[], Any], reason: str) -> InvalidRequestState:
    """``action`` fails with exactly the requestState error, for ``reason``."""
    with pytest.raises(InvalidRequestState) as info:
        action()
    exc = info.value
    assert isinstance(exc, RemoteProtocolError)
    assert exc.code == INVALID_PARAMS == -32602
    assert exc.message == "Invalid or expired requestState"
    assert exc.data == {"reason": reason}
    assert exc.reason == reason
    assert reason in REQUEST_STATE_REASONS
    return exc


def refuses(s: StateSealer, token: Any, reason: str, **overrides: Any) -> None:
    rejected(lambda: open_(s, token, **overrides), reason)


def parts(token: str) -> list[str]:
    split = token.split(".")
    assert len(split) == 4
    return split


def payload_of(token: str) -> dict[str, Any]:
    body = parts(token)[2]
    decoded = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert isinstance(decoded, dict)
    return decoded


def replace_char(text: str, index: int) -> str:
    """``text`` with the character at ``index`` changed to another base64url one."""
    new = "B" if text[index] != "B" else "C"
    return text[:index] + new + text[index + 1 :]


# --- round trip --------------------------------------------------------------------------------

VALUES: list[Any] = [
    None,
    0,
    -7,
    2**70,
    1.5,
    -0.25,
    1e-300,
    True,
    "",
    "plain",
    "unicode: \u00e9\u4e2d\U0001f600 line\u2028sep\u2029para \x00 nul",
    [],
    {},
    {"nested": {"list": [1, 2.5, None, {"deep": ["x", {"y": False}]}]}, "z": "\u2028"},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_seal_then_open_returns_the_value_and_its_facts(value: Any) -> None:
    s = sealer()
    token = seal(s, value)
    opened = open_(s, token)
    assert opened.value == value
    assert type(opened.value) is type(value)
    assert opened.issued_at == NOW
    assert opened.expires_at == NOW + DEFAULT_TTL == NOW + 600
    assert opened.key_id == "a"
    assert isinstance(opened.nonce, str) and len(opened.nonce) >= 16
    assert token.startswith(f"{TOKEN_VERSION}.a.")
    assert token.isascii() and "\n" not in token and "\u2028" not in token


def test_token_is_the_documented_four_part_base64url_shape() -> None:
    token = seal(sealer())
    version, key_id, body, mac = parts(token)
    assert (version, key_id) == ("mrtr1", "a")
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert set(body) <= alphabet and set(mac) <= alphabet  # no padding, url-safe
    assert len(base64.urlsafe_b64decode(mac + "=" * (-len(mac) % 4))) == 32  # HMAC-SHA256


def test_default_ttl_and_the_sealers_own_ttl_and_a_per_token_override() -> None:
    assert DEFAULT_TTL == 600.0
    assert sealer().ttl == 600.0
    assert open_(sealer(), seal(sealer())).expires_at == NOW + 600
    short = sealer(ttl=30)
    assert short.ttl == 30.0 and isinstance(short.ttl, float)
    assert open_(short, seal(short)).expires_at == NOW + 30
    opened = open_(short, seal(short, ttl=5))
    assert (opened.issued_at, opened.expires_at) == (NOW, NOW + 5)
    refuses(short, seal(short, ttl=5), "expired", now=NOW + 6)


def test_open_at_exactly_expires_at_is_valid_a_hair_after_is_expired() -> None:
    s = sealer()
    token = seal(s)
    expires = NOW + 600
    assert open_(s, token, now=expires).expires_at == expires
    refuses(s, token, "expired", now=math.nextafter(expires, math.inf))
    refuses(s, token, "expired", now=expires + 1e-6)
    refuses(s, token, "expired", now=expires + 86_400)
    assert open_(s, token, now=NOW - 5).value == {"step": 1}  # the clock is the caller's


def test_deterministic_nonce_parameter() -> None:
    s = sealer()
    one = seal(s, nonce="fixed-nonce")
    two = seal(s, nonce="fixed-nonce")
    assert one == two
    assert open_(s, one).nonce == "fixed-nonce"
    assert payload_of(one)["n"] == "fixed-nonce"
    # Without it every seal gets a fresh random nonce, so equal states give distinct tokens.
    fresh = {open_(s, seal(s)).nonce for _ in range(20)}
    assert len(fresh) == 20


# --- tampering ---------------------------------------------------------------------------------


def test_version_part_tampered() -> None:
    s = sealer()
    _, key_id, body, mac = parts(seal(s))
    for other in ("mrtr2", "mrtr0", "mrtr", "mrtr1x", "mrtr10"):
        refuses(s, f"{other}.{key_id}.{body}.{mac}", "unsupported_version")
    for other in ("Mrtr1", "xrtr1", "MRTR1", "nrtr1", "jwt", "1rtrm", " mrtr1"):
        refuses(s, f"{other}.{key_id}.{body}.{mac}", "malformed")


def test_key_id_part_tampered() -> None:
    s = sealer()
    _, _, body, mac = parts(seal(s))
    for other in ("b", "A", "aa", "a-", "zz", "a_b"):
        refuses(s, f"mrtr1.{other}.{body}.{mac}", "unknown_key")


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_payload_part_with_one_character_replaced(where: str) -> None:
    s = sealer()
    version, key_id, body, mac = parts(seal(s))
    index = {"first": 0, "middle": len(body) // 2, "last": len(body) - 1}[where]
    refuses(s, f"{version}.{key_id}.{replace_char(body, index)}.{mac}", "bad_signature")


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_mac_part_with_one_character_replaced(where: str) -> None:
    s = sealer()
    version, key_id, body, mac = parts(seal(s))
    index = {"first": 0, "middle": len(mac) // 2, "last": len(mac) - 1}[where]
    refuses(s, f"{version}.{key_id}.{body}.{replace_char(mac, index)}", "bad_signature")


def test_mac_compared_as_text_not_as_decoded_bytes() -> None:
    # The last base64 character of a 32-byte MAC carries 2 spare bits: a variant that
    # decodes to the same bytes is still not our token.
    s = sealer()
    version, key_id, body, mac = parts(seal(s))
    last = mac[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    twin = alphabet[alphabet.index(last) ^ 1]
    variant = mac[:-1] + twin
    assert base64.urlsafe_b64decode(variant + "=") == base64.urlsafe_b64decode(mac + "=")
    refuses(s, f"{version}.{key_id}.{body}.{variant}", "bad_signature")


@pytest.mark.parametrize(
    "change",
    [
        {"s": {"step": 99}},
        {"exp": NOW + 10**9},
        {"iat": NOW + 5},
        {"m": "prompts/get"},
        {"a": params_digest({"name": "other"})},
        {"p": None},
        {"n": "another-nonce"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_payload_reencoded_without_the_key_is_a_bad_signature(change: dict[str, Any]) -> None:
    s = sealer()
    token = seal(s)
    version, key_id, _, mac = parts(token)
    forged = {**payload_of(token), **change}
    body = _b64encode(json.dumps(forged, sort_keys=True, separators=(",", ":")).encode())
    refuses(s, f"{version}.{key_id}.{body}.{mac}", "bad_signature")


def test_truncated_tokens() -> None:
    s = sealer()
    token = seal(s)
    version, key_id, body, _ = parts(token)
    for short in (
        "",
        version,
        f"{version}.{key_id}",
        f"{version}.{key_id}.{body}",
        f"{version}.{key_id}.{body}.",
        token[: token.rindex(".")],
    ):
        refuses(s, short, "malformed")
    # Cut inside the last part: still four parts, but the MAC no longer matches.
    refuses(s, token[:-1], "bad_signature")
    refuses(s, token[:-10], "bad_signature")
    # Cut inside the payload part: fewer parts.
    refuses(s, token[: len(version) + len(key_id) + 10], "malformed")


def test_extra_dots_and_empty_parts() -> None:
    s = sealer()
    token = seal(s)
    version, key_id, body, mac = parts(token)
    for bad in (
        token + ".",
        token + ".x",
        "." + token,
        f"{version}.{key_id}.{body}..{mac}",
        f"{version}..{body}.{mac}",
        f".{key_id}.{body}.{mac}",
        f"{version}.{key_id}..{mac}",
        "...",
        "....",
        "a.b.c.d.e",
    ):
        refuses(s, bad, "malformed")


@pytest.mark.parametrize(
    "token",
    [None, 5, 5.0, True, [], {}, ["mrtr1", "a", "x", "y"]],
    ids=repr,
)
def test_non_strings_are_malformed(token: Any) -> None:
    refuses(sealer(), token, "malformed")


def test_the_token_as_bytes_is_malformed() -> None:
    s = sealer()
    token = seal(s)
    refuses(s, token.encode("ascii"), "malformed")
    refuses(s, bytearray(token.encode("ascii")), "malformed")


def test_oversize_token_is_too_large_before_anything_else() -> None:
    s = sealer(max_token_size=200)
    refuses(s, "x" * 201, "too_large")
    refuses(s, "mrtr1.a." + "A" * 300 + ".mac", "too_large")
    refuses(s, "x" * 200, "malformed")  # at the limit: read, then refused for what it is
    default = sealer()
    assert default.max_token_size == DEFAULT_MAX_TOKEN_SIZE == 16 * 1024
    refuses(default, seal(default) + "A" * DEFAULT_MAX_TOKEN_SIZE, "too_large")


def test_seal_refuses_a_state_whose_token_would_exceed_max_token_size() -> None:
    s = sealer(max_token_size=128)
    with pytest.raises(LocalProtocolError, match="max_token_size"):
        seal(s, "x" * 200)
    # The limit is inclusive: a token of exactly max_token_size characters is sealed and opens.
    exact_len = len(seal(sealer(), "v", nonce="n"))
    exact = sealer(max_token_size=exact_len)
    token = seal(exact, "v", nonce="n")
    assert len(token) == exact_len
    assert open_(exact, token).value == "v"
    with pytest.raises(LocalProtocolError):
        seal(exact, "vv", nonce="n")


# --- binding -----------------------------------------------------------------------------------


def test_another_method_is_refused() -> None:
    s = sealer()
    token = seal(s)
    for other in ("prompts/get", "resources/read", "tools/list", "tools/call ", "TOOLS/CALL"):
        refuses(s, token, "wrong_method", method=other)


@pytest.mark.parametrize(
    "other",
    [
        {"name": "cancel", "arguments": PARAMS["arguments"]},  # another tool
        {"name": "book", "arguments": {"city": "Bergen", "nights": 2}},  # another value
        {"name": "book", "arguments": {"city": "Oslo", "nights": 2.5}},
        {"name": "book", "arguments": {"city": "Oslo"}},  # an argument dropped
        {"name": "book", "arguments": {"city": "Oslo", "nights": 2, "x": None}},  # one added
        {"name": "book", "arguments": {}},
        {"name": "book"},
        {"arguments": PARAMS["arguments"]},
        {**PARAMS, "extra": 1},  # any other salient top-level key
        {},
        None,
    ],
    ids=str,
)
def test_other_params_are_refused(other: Any) -> None:
    s = sealer()
    refuses(s, seal(s), "wrong_params", params=other)


def test_another_uri_is_refused() -> None:
    s = sealer()
    params = {"uri": "file:///a.txt"}
    token = seal(s, method="resources/read", params=params)
    assert open_(s, token, method="resources/read", params={"uri": "file:///a.txt"}).value
    refuses(s, token, "wrong_params", method="resources/read", params={"uri": "file:///b.txt"})
    refuses(s, token, "wrong_method", method="prompts/get", params=params)


def test_round_fields_and_meta_do_not_matter() -> None:
    s = sealer()
    token = seal(s, params={**PARAMS, "_meta": {"io.modelcontextprotocol/protocolVersion": "x"}})
    retry = {
        **PARAMS,
        "_meta": {"progressToken": 7, "io.modelcontextprotocol/clientCapabilities": {}},
        "inputResponses": {"city": {"action": "accept", "content": {"city": "Oslo"}}},
        "requestState": token,
    }
    assert open_(s, token, params=retry).value == {"step": 1}
    assert open_(s, token, params=PARAMS).value == {"step": 1}
    assert params_digest(retry) == params_digest(PARAMS)


def test_argument_key_order_does_not_matter() -> None:
    s = sealer()
    token = seal(s, params={"name": "t", "arguments": {"a": 1, "b": {"x": 1, "y": [1, 2]}}})
    reordered = {"arguments": {"b": {"y": [1, 2], "x": 1}, "a": 1}, "name": "t"}
    assert open_(s, token, params=reordered).value == {"step": 1}
    # ... but list order does.
    refuses(
        s,
        token,
        "wrong_params",
        params={"name": "t", "arguments": {"a": 1, "b": {"x": 1, "y": [2, 1]}}},
    )


def test_params_digest_is_canonical_and_ignores_round_fields() -> None:
    assert params_digest(None) == params_digest({}) == params_digest({"_meta": {"k": 1}})
    assert params_digest({"requestState": "s", "inputResponses": {}}) == params_digest(None)
    assert params_digest({"a": 1, "b": 2}) == params_digest({"b": 2, "a": 1})
    assert params_digest({"a": 1}) != params_digest({"a": "1"})
    assert params_digest({"a": "\u00e9"}) != params_digest({"a": "e"})
    digest = params_digest(PARAMS)
    assert isinstance(digest, str) and len(digest) == 43  # SHA-256, base64url, no padding


def test_another_principal_is_refused() -> None:
    s = sealer()
    token = seal(s, principal="alice")
    assert open_(s, token, principal="alice").value == {"step": 1}
    refuses(s, token, "wrong_principal", principal="bob")
    refuses(s, token, "wrong_principal", principal="Alice")
    refuses(s, token, "wrong_principal", principal="")
    refuses(s, token, "wrong_principal", principal=None)
    anonymous = seal(s, principal=None)
    assert open_(s, anonymous, principal=None).value == {"step": 1}
    refuses(s, anonymous, "wrong_principal", principal="alice")
    refuses(s, anonymous, "wrong_principal", principal="")


def test_the_token_does_not_reveal_the_principal() -> None:
    s = sealer()
    principal = "alice@example.com"
    token = seal(s, principal=principal)
    payload = payload_of(token)
    decoded = json.dumps(payload)
    assert principal not in decoded and "alice" not in decoded
    assert principal not in token
    assert isinstance(payload["p"], str)
    # The digest is keyed: without the server's key it cannot be recomputed or compared.
    other = StateSealer({"a": KEY_B}, "a")
    assert payload_of(seal(other, principal=principal))["p"] != payload["p"]
    # And the same principal gets the same digest under one key (so it can be checked).
    assert payload_of(seal(s, principal=principal))["p"] == payload["p"]
    assert payload_of(seal(s, principal=None))["p"] is None


# --- key rotation ------------------------------------------------------------------------------


def test_rotation_old_tokens_open_while_the_old_key_is_kept() -> None:
    before = StateSealer({"old": KEY_A}, "old")
    token = seal(before)
    during = StateSealer({"old": KEY_A, "new": KEY_B}, "new")
    opened = open_(during, token)
    assert opened.key_id == "old" and opened.value == {"step": 1}
    fresh = seal(during)
    assert parts(fresh)[1] == "new"
    assert open_(during, fresh).key_id == "new"
    # The principal binding survives the rotation both ways.
    refuses(during, token, "wrong_principal", principal="bob")
    refuses(during, fresh, "wrong_principal", principal="bob")
    # The old sealer never knew the new key.
    refuses(before, fresh, "unknown_key")


def test_rotation_after_the_old_key_is_dropped_its_tokens_are_unknown_key() -> None:
    token = seal(StateSealer({"old": KEY_A}, "old"))
    after = StateSealer({"new": KEY_B}, "new")
    refuses(after, token, "unknown_key")
    assert open_(after, seal(after)).key_id == "new"


def test_a_token_relabelled_to_another_key_is_a_bad_signature() -> None:
    both = StateSealer({"ka": KEY_A, "kb": KEY_B}, "ka")
    token = seal(both)
    version, key_id, body, mac = parts(token)
    assert key_id == "ka"
    refuses(both, f"{version}.kb.{body}.{mac}", "bad_signature")
    # And a token of the same key material under another id is not ours either.
    same_secret = StateSealer({"ka": KEY_A, "kc": KEY_A}, "ka")
    refuses(same_secret, f"{version}.kc.{body}.{mac}", "bad_signature")


# --- integrity, not secrecy --------------------------------------------------------------------


def test_the_payload_is_readable_by_anyone() -> None:
    # Documented: the seal gives integrity, not secrecy. Put nothing secret in the state.
    s = sealer()
    state = {"cart": ["tent", "stove"], "note": "h\u00e9llo"}
    token = seal(s, state)
    payload = payload_of(token)
    assert payload["s"] == state
    assert payload["m"] == METHOD
    assert payload["a"] == params_digest(PARAMS)
    assert payload["iat"] == NOW and payload["exp"] == NOW + 600
    assert set(payload) == {"m", "a", "p", "iat", "exp", "n", "s"}


# --- post-MAC shape checks (white box) ---------------------------------------------------------


def mac_valid(s: StateSealer, body_bytes: bytes, key_id: str = "a") -> str:
    """A token our key signed around arbitrary payload bytes."""
    body = _b64encode(body_bytes)
    return f"{TOKEN_VERSION}.{key_id}.{body}.{s._mac(key_id, body)}"


GOOD_PAYLOAD: dict[str, Any] = {
    "m": METHOD,
    "a": params_digest(PARAMS),
    "p": None,
    "iat": NOW,
    "exp": NOW + 600,
    "n": "nonce",
    "s": {"step": 1},
}


def encode(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def test_white_box_mac_valid_good_payload_opens() -> None:
    s = sealer()
    opened = open_(s, mac_valid(s, encode(GOOD_PAYLOAD)), principal=None)
    assert opened == OpenedState(
        value={"step": 1}, nonce="nonce", issued_at=NOW, expires_at=NOW + 600, key_id="a"
    )
    # int timestamps are numbers too.
    ints = {**GOOD_PAYLOAD, "iat": 1000, "exp": 1600}
    assert open_(s, mac_valid(s, encode(ints)), principal=None).expires_at == 1600


def _without(key: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD_PAYLOAD.items() if k != key}


MALFORMED_PAYLOADS: list[tuple[str, bytes]] = [
    ("not-json", b"not json"),
    ("truncated-json", encode(GOOD_PAYLOAD)[:-1]),
    ("invalid-utf8", b'{"m":"\xff"}'),
    ("empty", b""),
    ("a-list", encode([GOOD_PAYLOAD])),
    ("a-string", encode("payload")),
    ("null", b"null"),
    *[(f"missing-{k}", encode(_without(k))) for k in ("m", "a", "n", "iat", "exp", "s")],
    ("m-int", encode({**GOOD_PAYLOAD, "m": 1})),
    ("m-null", encode({**GOOD_PAYLOAD, "m": None})),
    ("a-list", encode({**GOOD_PAYLOAD, "a": ["x"]})),
    ("n-int", encode({**GOOD_PAYLOAD, "n": 5})),
    ("iat-str", encode({**GOOD_PAYLOAD, "iat": "1000"})),
    ("iat-null", encode({**GOOD_PAYLOAD, "iat": None})),
    ("exp-str", encode({**GOOD_PAYLOAD, "exp": "1600"})),
    ("exp-list", encode({**GOOD_PAYLOAD, "exp": [1600]})),
    ("p-int", encode({**GOOD_PAYLOAD, "p": 7})),
    ("p-object", encode({**GOOD_PAYLOAD, "p": {}})),
]


@pytest.mark.parametrize(
    "body", [b for _, b in MALFORMED_PAYLOADS], ids=[i for i, _ in MALFORMED_PAYLOADS]
)
def test_white_box_mac_valid_but_malformed_payload(body: bytes) -> None:
    s = sealer()
    refuses(s, mac_valid(s, body), "malformed", principal=None)


def test_white_box_mac_valid_body_that_is_not_base64() -> None:
    # One base64 character left over cannot be decoded at all (binascii.Error).
    s = sealer()
    body = "A"
    refuses(s, f"{TOKEN_VERSION}.a.{body}.{s._mac('a', body)}", "malformed", principal=None)


def test_white_box_checks_after_the_shape_use_the_payload() -> None:
    s = sealer()
    stale = mac_valid(s, encode({**GOOD_PAYLOAD, "exp": NOW - 1}))
    refuses(s, stale, "expired", principal=None)
    other = mac_valid(s, encode({**GOOD_PAYLOAD, "m": "prompts/get"}))
    refuses(s, other, "wrong_method", principal=None)
    refuses(s, mac_valid(s, encode(GOOD_PAYLOAD)), "wrong_params", principal=None, params={})
    refuses(s, mac_valid(s, encode(GOOD_PAYLOAD)), "wrong_principal", principal="alice")


# --- non-ASCII in the token ------------------------------------------------------------------
# The token is attacker-controlled; any character the client puts in it must end in
# InvalidRequestState (our tokens are pure ASCII, so anything else is not one of ours).
# Before the fix, a non-ASCII character in the payload or MAC part escaped as
# UnicodeEncodeError (from _mac) or TypeError (from hmac.compare_digest).

NON_ASCII = ["\u00e9", "\x80", "\u2028", "\U0001f600", "\ufeff"]


@pytest.mark.parametrize("char", NON_ASCII, ids=ascii)
@pytest.mark.parametrize("part", ["version", "key_id", "payload", "mac"])
@pytest.mark.parametrize("how", ["replace", "append"])
def test_non_ascii_character_in_any_part_is_refused(char: str, part: str, how: str) -> None:
    s = sealer()
    pieces = parts(seal(s))
    index = ["version", "key_id", "payload", "mac"].index(part)
    old = pieces[index]
    pieces[index] = old[:-1] + char if how == "replace" else old + char
    refuses(s, ".".join(pieces), "malformed")


@pytest.mark.parametrize("char", NON_ASCII, ids=ascii)
def test_non_ascii_token_is_refused_as_a_whole(char: str) -> None:
    s = sealer()
    refuses(s, seal(s) + char, "malformed")
    refuses(s, char + seal(s), "malformed")
    refuses(s, char, "malformed")


# --- single use --------------------------------------------------------------------------------


def test_consume_once_then_replayed() -> None:
    store = MemoryNonceStore()
    s = sealer(store=store)
    assert s.store is store
    token = seal(s)
    opened = open_(s, token)
    s.consume(opened, NOW)
    assert len(store) == 1
    # The token still opens (integrity is not single use) but cannot be spent again.
    again = open_(s, token)
    rejected(lambda: s.consume(again, NOW), "replayed")
    # Another token of the same flow has its own nonce.
    s.consume(open_(s, seal(s)), NOW)
    assert len(store) == 2


def test_two_processes_sharing_one_store() -> None:
    shared = MemoryNonceStore()
    first = StateSealer({"a": KEY_A}, "a", store=shared)
    second = StateSealer({"a": KEY_A}, "a", store=shared)
    token = seal(first)
    first.consume(open_(first, token), NOW)
    rejected(lambda: second.consume(open_(second, token), NOW + 1), "replayed")
    other = seal(second)
    second.consume(open_(second, other), NOW)
    rejected(lambda: first.consume(open_(first, other), NOW), "replayed")


def test_stores_are_not_shared_by_accident() -> None:
    token = seal(sealer())
    a = sealer(store=MemoryNonceStore())
    b = sealer(store=MemoryNonceStore())
    a.consume(open_(a, token), NOW)
    b.consume(open_(b, token), NOW)  # separate stores: each sees a first spend


def test_consume_without_a_store_is_a_local_error() -> None:
    s = sealer()
    assert s.store is None
    with pytest.raises(LocalProtocolError, match="store"):
        s.consume(open_(s, seal(s)), NOW)


def test_a_custom_store_gets_nonce_expiry_and_now() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.calls: list[tuple[str, float, float]] = []

        def consume(self, nonce: str, expires_at: float, now: float) -> bool:
            self.calls.append((nonce, expires_at, now))
            return len(self.calls) == 1

    recorder = Recorder()
    store: NonceStore = recorder
    s = sealer(store=store)
    opened = open_(s, seal(s, nonce="n1"))
    s.consume(opened, NOW + 3)
    rejected(lambda: s.consume(opened, NOW + 4), "replayed")
    assert recorder.calls == [("n1", NOW + 600, NOW + 3), ("n1", NOW + 600, NOW + 4)]


def test_memory_store_bound_and_fail_closed() -> None:
    store = MemoryNonceStore(max_entries=2)
    assert store.max_entries == 2
    assert store.consume("a", 10.0, 0.0) is True
    assert store.consume("b", 20.0, 0.0) is True
    with pytest.raises(NonceStoreFull) as info:
        store.consume("c", 30.0, 0.0)
    assert info.value.code == INTERNAL_ERROR == -32603
    assert isinstance(info.value, MrtrError)
    # Nothing was forgotten to make room: both still count as spent, "c" was not recorded.
    assert len(store) == 2
    assert store.consume("a", 10.0, 0.0) is False
    assert store.consume("b", 20.0, 0.0) is False
    with pytest.raises(NonceStoreFull):
        store.consume("c", 30.0, 5.0)


def test_memory_store_purges_expired_nonces_as_now_advances() -> None:
    store = MemoryNonceStore(max_entries=3)
    store.consume("a", 10.0, 0.0)
    store.consume("b", 20.0, 0.0)
    store.consume("c", 30.0, 0.0)
    assert len(store) == 3
    # At exactly its expiry a nonce is still held (a token is valid at exactly expires_at).
    assert store.consume("a", 10.0, 10.0) is False
    assert len(store) == 3
    # Just after, it is dropped, which makes room.
    assert store.consume("d", 40.0, 10.5) is True
    assert len(store) == 3
    assert store.consume("e", 50.0, 25.0) is True  # "b" goes
    assert len(store) == 3
    assert store.consume("z", 100.0, 45.0) is True  # "c" and "d" go
    assert len(store) == 2
    assert store.consume("e", 50.0, 45.0) is False
    assert store.consume("q", 200.0, 1000.0) is True  # everything else expired
    assert len(store) == 1


def test_memory_store_with_the_sealer_expiry() -> None:
    store = MemoryNonceStore(max_entries=1)
    s = sealer(store=store, ttl=10)
    first = open_(s, seal(s))
    s.consume(first, NOW)
    second = open_(s, seal(s))
    with pytest.raises(NonceStoreFull):
        s.consume(second, NOW + 5)
    # After the first token expired its nonce is dropped; the expired token itself is
    # refused by open before the store is asked.
    second_later = open_(s, seal(s, now=NOW + 11), now=NOW + 11)
    s.consume(second_later, NOW + 11)
    assert len(store) == 1


@pytest.mark.parametrize("bad", [0, -1, True, False, 1.5, "10", None])
def test_memory_store_constructor_validation(bad: Any) -> None:
    with pytest.raises(LocalProtocolError, match="max_entries"):
        MemoryNonceStore(max_entries=bad)


def test_memory_store_default_bound() -> None:
    assert MemoryNonceStore().max_entries == 100_000
    assert len(MemoryNonceStore()) == 0


# --- constructor and seal validation -----------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "signing", "match"),
    [
        ({}, "a", "at least one key"),
        ({"": KEY_A}, "", "key id"),
        ({"a.b": KEY_A}, "a.b", "key id"),
        ({"a b": KEY_A}, "a b", "key id"),
        ({"x" * 33: KEY_A}, "x" * 33, "key id"),
        ({"\u00e1": KEY_A}, "\u00e1", "key id"),
        ({5: KEY_A}, 5, "key id"),
        ({"a": b"short"}, "a", "at least 16 bytes"),
        ({"a": b"x" * 15}, "a", "at least 16 bytes"),
        ({"a": "x" * 32}, "a", "at least 16 bytes"),
        ({"a": bytearray(32)}, "a", "at least 16 bytes"),
        ({"a": None}, "a", "at least 16 bytes"),
        ({"a": KEY_A, "b": b"tiny"}, "a", "at least 16 bytes"),
        ({"a": KEY_A}, "b", "signing key"),
        ({"a": KEY_A}, None, "signing key"),
    ],
)
def test_sealer_key_validation(keys: Any, signing: Any, match: str) -> None:
    with pytest.raises(LocalProtocolError, match=match):
        StateSealer(keys, signing)


def test_sealer_accepts_edge_valid_keys() -> None:
    s = StateSealer({"x" * 32: b"k" * 16, "A-b_9": KEY_B}, "x" * 32)
    assert s.signing_key == "x" * 32
    assert open_(s, seal(s)).key_id == "x" * 32


@pytest.mark.parametrize("ttl", [0, -1, -0.5, True, "600", None, math.nan])
def test_sealer_ttl_validation(ttl: Any) -> None:
    with pytest.raises(LocalProtocolError, match="ttl"):
        sealer(ttl=ttl)


@pytest.mark.parametrize("size", [0, 127, -1, True, 128.0, "16384", None])
def test_sealer_max_token_size_validation(size: Any) -> None:
    with pytest.raises(LocalProtocolError, match="max_token_size"):
        sealer(max_token_size=size)


def test_sealer_minimum_max_token_size_is_128() -> None:
    assert sealer(max_token_size=128).max_token_size == 128


def test_new_key_is_32_fresh_random_bytes() -> None:
    keys = {StateSealer.new_key() for _ in range(10)}
    assert len(keys) == 10
    assert all(isinstance(k, bytes) and len(k) == 32 for k in keys)
    s = StateSealer({"k": StateSealer.new_key()}, "k")
    assert open_(s, seal(s)).value == {"step": 1}


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        math.nan,
        math.inf,
        -math.inf,
        {"x": math.nan},
        pytest.param([object()], id="[object()]"),  # repr has an address: differs per worker
        b"bytes",
        {1: "a", "b": 2},
    ],
    ids=repr,
)
def test_seal_refuses_a_value_that_is_not_json(value: Any) -> None:
    with pytest.raises(LocalProtocolError, match="not a JSON value"):
        sealer().seal(value, method=METHOD, params=PARAMS, principal=None, now=NOW)


def test_errors_become_wire_errors() -> None:
    s = sealer()
    with pytest.raises(InvalidRequestState) as info:
        open_(s, "garbage")
    reply = error_response(7, info.value)
    assert reply.id == 7
    assert reply.error.code == -32602
    assert reply.error.message == "Invalid or expired requestState"
    assert reply.error.data == {"reason": "malformed"}


def test_reason_list() -> None:
    assert REQUEST_STATE_REASONS == (
        "malformed",
        "too_large",
        "unsupported_version",
        "unknown_key",
        "bad_signature",
        "expired",
        "wrong_method",
        "wrong_params",
        "wrong_principal",
        "replayed",
        "unknown_continuation",  # raised by the trio continuation store
    )


# --- properties --------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
SALIENT = st.dictionaries(
    st.text(max_size=8).filter(lambda k: k not in ("_meta", "inputResponses", "requestState")),
    JSON_VALUES,
    max_size=4,
)


def _surrogate_free(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_round_trip_and_mutation(
    value: Any,
    params: dict[str, Any],
    principal: str | None,
    data: st.DataObject,
    chars: st.SearchStrategy[str],
) -> None:
    s = sealer()
    kw: dict[str, Any] = {"method": METHOD, "params": params, "principal": principal, "now": NOW}
    token = s.seal(value, **kw)
    opened = s.open(token, **kw)
    assert opened.value == value
    assert s.open(token, **{**kw, "params": {**params, "_meta": {"x": 1}}}).value == value

    index = data.draw(st.integers(0, len(token) - 1), label="index")
    kind = data.draw(st.sampled_from(["replace", "delete", "insert"]), label="kind")
    char = data.draw(chars, label="char")
    if kind == "replace":
        if char == token[index]:
            return
        mutated = token[:index] + char + token[index + 1 :]
    elif kind == "delete":
        mutated = token[:index] + token[index + 1 :]
    else:
        mutated = token[:index] + char + token[index:]
    assert mutated != token
    try:
        s.open(mutated, **kw)
    except InvalidRequestState as exc:
        assert exc.reason in REQUEST_STATE_REASONS
        assert exc.code == INVALID_PARAMS
    else:
        raise AssertionError(f"mutated token accepted: {mutated!r}")


#: Mutations a client could type: the token's own alphabet, the separator and ASCII noise.
ASCII_CHARS = st.sampled_from(".-_=+/ Aa0") | st.characters(min_codepoint=0, max_codepoint=127)


@settings(deadline=None)
@given(
    value=JSON_VALUES,
    params=SALIENT,
    principal=st.none() | st.text(max_size=16).filter(_surrogate_free),
    data=st.data(),
)
def test_property_round_trip_and_ascii_single_character_mutation_is_rejected(
    value: Any, params: dict[str, Any], principal: str | None, data: st.DataObject
) -> None:
    _check_round_trip_and_mutation(value, params, principal, data, ASCII_CHARS)


@settings(deadline=None)
@given(
    value=JSON_VALUES,
    params=SALIENT,
    principal=st.none() | st.text(max_size=16).filter(_surrogate_free),
    data=st.data(),
)
def test_property_round_trip_and_any_single_character_mutation_is_rejected(
    value: Any, params: dict[str, Any], principal: str | None, data: st.DataObject
) -> None:
    # Any Unicode character (non-ASCII ones in the payload or MAC part used to escape as
    # UnicodeEncodeError / TypeError instead of InvalidRequestState).
    _check_round_trip_and_mutation(
        value, params, principal, data, ASCII_CHARS | st.characters(codec="utf-8")
    )


def test_seal_refuses_a_bad_ttl_or_nonce() -> None:
    s = sealer()
    for ttl in ("10", -1, 0, True):
        with pytest.raises(LocalProtocolError, match="ttl"):
            s.seal(1, method="m", params=None, principal=None, now=0.0, ttl=ttl)
    with pytest.raises(LocalProtocolError, match="nonce"):
        s.seal(1, method="m", params=None, principal=None, now=0.0, nonce=5)  # type: ignore[arg-type]


def test_params_that_are_not_json_values() -> None:
    with pytest.raises(LocalProtocolError, match="not JSON values"):
        params_digest({"arguments": {"x": math.nan}})
    s = sealer()
    token = s.seal(1, method="m", params={"arguments": {}}, principal=None, now=0.0)
    with pytest.raises(InvalidRequestState) as caught:
        s.open(token, method="m", params={"arguments": {"x": math.inf}}, principal=None, now=0.0)
    assert caught.value.data == {"reason": "wrong_params"}


def test_lone_surrogates_in_params_and_principal_are_digested_not_raised() -> None:
    # The stdlib JSON reader accepts "\ud800" from a client: it must not break the seal.
    s = sealer()
    params = {"arguments": {"name": "\ud800"}}
    token = s.seal(1, method="m", params=params, principal="\udfff", now=0.0)
    assert s.open(token, method="m", params=params, principal="\udfff", now=0.0).value == 1
    with pytest.raises(InvalidRequestState):
        s.open(
            token, method="m", params={"arguments": {"name": "\ud801"}}, principal="\udfff", now=0.0
        )
