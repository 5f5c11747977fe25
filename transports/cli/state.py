"""``mrtr state inspect``: open a sealed ``requestState`` offline and say which check fails.

A server that rejects a ``requestState`` says only "Invalid or expired
requestState" on the wire; the operator holding the keys asks here.  The
token is opened with ``mrtr_core.server.StateSealer`` and the given keys (``--key``,
or ``--state-keys FILE|env:NAME``: the keys document ``mrtr serve --state-keys`` read,
by the same rule, ``stores/keys.py``), and the
first failing check is named (:data:`REASON_TEXT`).  Bindings not given
(``--method``, ``--params``, ``--principal``) are reported as not checked,
never as failed.  Exit 0 when every check made passed, 1 when one failed, 2 on
usage errors.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import mrtr_core as m

from ..stores.keys import StateKeysError, load_state_keys
from .call import UsageError, parse_json_object
from .exit_codes import ExitCode

#: What each ``InvalidRequestState`` reason means, for people.
REASON_TEXT: Mapping[str, str] = {
    "malformed": "not a requestState token of this format (or not text)",
    "too_large": "longer than the largest token a server reads",
    "unsupported_version": "a token format version this code does not read",
    "unknown_key": "signed by a key id that is not among the given keys",
    "bad_signature": "tampered: the payload, key id or MAC was changed (or the key is wrong)",
    "expired": "expired: older than its time to live",
    "wrong_method": "bound to another method",
    "wrong_params": "bound to another request (another tool, uri or arguments)",
    "wrong_principal": "bound to another principal (another user's state)",
    "replayed": "already used (single-use state)",
    "unknown_continuation": "a continuation this process no longer holds",
}


def _decode_secret(text: str) -> bytes:
    if text.startswith("hex:"):
        try:
            return bytes.fromhex(text[4:])
        except ValueError as exc:
            raise UsageError(f"--key: bad hex ({exc})") from exc
    padded = text + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UsageError("--key: SECRET must be base64, base64url or hex:HEX") from exc


def parse_keys(
    specs: Sequence[str], key_id: str | None, token_key_id: str | None
) -> dict[str, bytes]:
    """The verifying keys ``{key id: secret}`` from ``--key`` values."""
    keys: dict[str, bytes] = {}
    for spec in specs:
        if spec.startswith("@"):
            try:
                with open(spec[1:], encoding="utf-8") as f:
                    spec = f.read().strip()
            except OSError as exc:
                raise UsageError(f"--key {spec}: {exc.strerror or exc}") from exc
        ident, sep, secret_text = spec.partition(":")
        if sep and ident != "hex":
            name: str | None = ident
        else:
            name, secret_text = key_id or token_key_id, spec
        if not name:
            raise UsageError("--key SECRET needs --key-id, or a token that names its key")
        secret = _decode_secret(secret_text)
        if len(secret) < 16:
            raise UsageError(f"--key {name}: a secret is at least 16 bytes, got {len(secret)}")
        keys[name] = secret
    return keys


def _peek(token: str) -> tuple[str | None, Any]:
    """The token's key id and its (unverified) payload, as far as they can be read."""
    parts = token.split(".")
    if len(parts) != 4:
        return None, None
    try:
        body = base64.urlsafe_b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        return parts[1], json.loads(body)
    except (binascii.Error, ValueError):
        return parts[1], None


def run_state_inspect(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    token: str = args.token
    token_key_id, payload = _peek(token)
    try:
        keys: dict[str, bytes] = {}
        if args.state_keys is not None:  # the same document, the same reading, as mrtr serve
            try:
                keys.update(load_state_keys(args.state_keys).keys)
            except StateKeysError as exc:
                raise UsageError(str(exc)) from exc
        keys.update(parse_keys(args.key, args.key_id, token_key_id))
        if not keys:
            raise UsageError("give the keys: --state-keys FILE|env:NAME, or --key [ID:]SECRET")
        params = None if args.params is None else parse_json_object(args.params, "--params")
        sealer = m.server.StateSealer(
            keys, next(iter(keys)), max_token_size=max(128, len(token) + 1)
        )
    except (UsageError, m.LocalProtocolError) as exc:
        sys.stderr.write(f"mrtr state inspect: {exc}\n")
        return ExitCode.USAGE
    now = time.time() if args.now is None else args.now
    readable = isinstance(payload, dict)
    token_method = payload.get("m") if readable else None
    method = args.method if args.method is not None else str(token_method or "")

    def say(text: str) -> None:
        out.write(text + "\n")

    say(f"key id: {token_key_id if token_key_id is not None else '(unreadable)'}")
    if readable:
        say(
            f"method: {token_method}  issued at: {payload.get('iat')}  "
            f"expires at: {payload.get('exp')}  now: {now}"
        )
    try:
        opened = sealer.open(token, method=method, params=params, principal=args.principal, now=now)
    except m.server.InvalidRequestState as exc:
        reason = exc.reason
        # The checks run in order (format, key, signature, expiry, method, params,
        # principal): a binding that was not given cannot be the one that failed.
        if reason == "wrong_params" and params is None:
            return _passed(say, payload, "params and principal (give --params to check them)")
        if reason == "wrong_principal" and args.principal is None:
            return _passed(say, payload, "principal: the token is bound to one (give --principal)")
        say(f"verdict: {reason}: {REASON_TEXT.get(reason, reason)}")
        if readable and reason not in ("malformed", "too_large"):
            _show_payload(say, payload, verified=reason not in ("unknown_key", "bad_signature"))
        return 1
    unchecked = [
        name
        for name, given in (
            ("method", args.method),
            ("params", params),
            ("principal", args.principal),
        )
        if given is None
    ]
    say("verdict: valid" + (f" (not checked: {', '.join(unchecked)})" if unchecked else ""))
    say(f"nonce: {opened.nonce}  key: {opened.key_id}")
    say("state: " + json.dumps(opened.value, ensure_ascii=False, sort_keys=True))
    return ExitCode.RESULT


def _passed(say: Any, payload: Any, unchecked: str) -> int:
    say("verdict: no failure in the checks made (signature valid, not expired)")
    say(f"not checked: {unchecked}")
    _show_payload(say, payload, verified=True)
    return ExitCode.RESULT


def _show_payload(say: Any, payload: Any, *, verified: bool) -> None:
    label = "payload" if verified else "payload (UNVERIFIED: the signature does not hold)"
    say(f"{label}: " + json.dumps(payload, ensure_ascii=False, sort_keys=True))
