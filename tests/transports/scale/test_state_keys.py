"""The sealing keys document several workers share (``mrtr_transports.stores.keys``)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
from mrtr_transports.stores.keys import (
    MAX_DOCUMENT_BYTES,
    StateKeysError,
    new_state_keys,
    parse_state_keys,
)

import mrtr_core as m

SECRET = bytes(range(32))
STANDARD = base64.b64encode(SECRET).decode()
URLSAFE_UNPADDED = base64.urlsafe_b64encode(SECRET).decode().rstrip("=")


def document(keys: object, signing_key: object = "k1") -> str:
    return json.dumps({"signing_key": signing_key, "keys": keys})


def test_a_document_gives_the_keys_and_the_signing_one() -> None:
    keys = parse_state_keys(document({"k1": STANDARD, "k2": URLSAFE_UNPADDED}, "k2"))
    assert keys.keys == {"k1": SECRET, "k2": SECRET}
    assert keys.signing_key == "k2"


def test_the_keys_seal_and_open_across_two_sealers() -> None:
    # what two workers do with the same document
    text = new_state_keys()
    one, two = parse_state_keys(text), parse_state_keys(text)
    sealer = m.server.StateSealer(one.keys, one.signing_key)
    token = sealer.seal({"a": 1}, method="tools/call", params={}, principal=None, now=1000.0)
    other = m.server.StateSealer(two.keys, two.signing_key)
    opened = other.open(token, method="tools/call", params={}, principal=None, now=1001.0)
    assert opened.value == {"a": 1}


def test_new_state_keys_is_a_fresh_32_byte_key_each_time() -> None:
    first, second = parse_state_keys(new_state_keys()), parse_state_keys(new_state_keys("main"))
    assert len(first.keys["k1"]) == 32
    assert second.signing_key == "main"
    assert first.keys["k1"] != second.keys["main"]


def test_the_module_prints_a_document() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mrtr_transports.stores.keys"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert parse_state_keys(done.stdout).signing_key == "k1"


def test_repr_never_shows_a_secret() -> None:
    keys = parse_state_keys(document({"k1": STANDARD}))
    assert STANDARD not in repr(keys) and repr(SECRET) not in repr(keys)
    assert "k1" in repr(keys)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        ("[]", "expected"),
        (json.dumps({"keys": {"k1": STANDARD}}), "expected"),
        (json.dumps({"keys": {"k1": STANDARD}, "signing_key": "k1", "extra": 1}), "expected"),
        (document({}), "1 to 64"),
        (document([STANDARD]), "1 to 64"),
        (document({f"k{i}": STANDARD for i in range(65)}), "1 to 64"),
        (document({"bad id": STANDARD}, "bad id"), "must match"),
        (document({"k" * 33: STANDARD}, "k" * 33), "must match"),
        (document({"k1": 123}), "base64 string"),
        (document({"k1": "not base64!"}), "not base64"),
        (document({"k1": base64.b64encode(b"short").decode()}), "at least 16 bytes"),
        (document({"k1": STANDARD}, "k2"), "not one of"),
        (document({"k1": STANDARD}, 1), "not one of"),
        ("x" * (MAX_DOCUMENT_BYTES + 1), "at most"),
    ],
)
def test_a_bad_document_says_what_to_fix(text: str | bytes, message: str) -> None:
    with pytest.raises(StateKeysError, match=message):
        parse_state_keys(text)
