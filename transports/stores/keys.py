"""The sealing keys several workers share: one small JSON document.

Every process that may serve a leg of a flow must open the ``requestState``
the others sealed, so they load the same keys (``mrtr serve --state-keys FILE``,
or ``--state-keys env:NAME`` to read the document from an environment
variable)::

    {"signing_key": "k2",
     "keys": {"k1": "<base64 of 32 random bytes>", "k2": "<base64 ...>"}}

``keys`` maps key ids (``[A-Za-z0-9_-]{1,32}``) to secrets in base64 (standard
or URL-safe, padding optional), each at least 16 bytes decoded; ``signing_key``
names the one that seals new states.  The others still open states sealed
before a rotation: add a key, make it the signing key on every worker, and drop
the old one once the longest flow has run out (``flow_ttl``, one hour by default).

Where the document comes from is one rule for every command that needs the keys
(``mrtr serve --state-keys`` seals with them, ``mrtr state inspect --state-keys``
opens what it sealed): :func:`load_state_keys` reads ``FILE`` or ``env:NAME``.

``new_state_keys()`` writes a fresh document (``python -m mrtr_transports.stores.keys``
prints one).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from .._secret_source import SecretSourceError, read_secret_source

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "StateKeys",
    "StateKeysError",
    "load_state_keys",
    "new_state_keys",
    "parse_state_keys",
]

#: A keys document is a few hundred bytes; refuse anything far larger.
MAX_DOCUMENT_BYTES = 64 * 1024
MAX_KEYS = 64
MIN_KEY_BYTES = 16
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")


class StateKeysError(ValueError):
    """A keys document that cannot be used; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class StateKeys:
    """Key ids to secrets, and the id of the one that signs."""

    keys: Mapping[str, bytes]
    signing_key: str

    def __repr__(self) -> str:  # never print the secrets
        return f"StateKeys(ids={sorted(self.keys)}, signing_key={self.signing_key!r})"


def parse_state_keys(text: str | bytes) -> StateKeys:
    """The keys of a JSON keys document; :class:`StateKeysError`."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise StateKeysError(f"a keys document is at most {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StateKeysError(f"not JSON: {exc}") from exc
    if not isinstance(document, dict) or set(document) != {"keys", "signing_key"}:
        raise StateKeysError('expected {"signing_key": ID, "keys": {ID: BASE64, ...}}')
    encoded, signing_key = document["keys"], document["signing_key"]
    if not isinstance(encoded, dict) or not 0 < len(encoded) <= MAX_KEYS:
        raise StateKeysError(f'"keys" must be an object of 1 to {MAX_KEYS} keys')
    keys: dict[str, bytes] = {}
    for key_id, value in encoded.items():
        if not _KEY_ID.fullmatch(key_id):
            raise StateKeysError(f"key id {key_id!r} must match [A-Za-z0-9_-]{{1,32}}")
        keys[key_id] = _secret(key_id, value)
    if not isinstance(signing_key, str) or signing_key not in keys:
        raise StateKeysError(f'"signing_key" {signing_key!r} is not one of "keys"')
    return StateKeys(keys, signing_key)


def load_state_keys(source: str) -> StateKeys:
    """The keys of the document in file ``source`` (or ``@PATH``), or in the environment
    variable ``NAME`` for ``source`` ``env:NAME``; :class:`StateKeysError` saying which
    and why."""
    where = f"--state-keys {source}"
    try:
        text = read_secret_source(source, flag="--state-keys", max_bytes=MAX_DOCUMENT_BYTES)
    except SecretSourceError as exc:
        raise StateKeysError(str(exc)) from exc
    try:
        return parse_state_keys(text)
    except StateKeysError as exc:
        raise StateKeysError(f"{where}: {exc}") from exc


def _secret(key_id: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise StateKeysError(f"key {key_id!r}: the secret is a base64 string")
    text = value.strip().replace("-", "+").replace("_", "/")
    try:
        secret = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise StateKeysError(f"key {key_id!r}: not base64 ({exc})") from exc
    if len(secret) < MIN_KEY_BYTES:
        raise StateKeysError(f"key {key_id!r}: at least {MIN_KEY_BYTES} bytes (32 random is right)")
    return secret


def new_state_keys(key_id: str = "k1") -> str:
    """A fresh keys document: one key of 32 random bytes, which signs."""
    secret = base64.b64encode(secrets.token_bytes(32)).decode("ascii")
    return json.dumps({"signing_key": key_id, "keys": {key_id: secret}}, indent=2) + "\n"


if __name__ == "__main__":
    sys.stdout.write(new_state_keys())
