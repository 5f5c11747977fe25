"""Sealed ``requestState``: server state the client carries between rounds, tamper-evident.

A multi round-trip server that keeps nothing between legs gives the client its
state in ``requestState`` and gets it back on the retry.  The client is not
trusted, so the state is sealed: an HMAC-SHA256 over the payload, keyed by a
server secret, binds it to

* the method and a digest of the request's salient params (everything but
  ``_meta``, ``inputResponses`` and ``requestState``: the tool name or uri and
  the arguments), so a state cannot be replayed on another tool or other
  arguments;
* the authenticated principal (a keyed digest of it, so the token does not
  reveal who it is for), so one user cannot use another's state;
* an expiry (10 minutes by default; the clock is the caller's ``now``).

The seal gives integrity, not secrecy: the client can read the payload (it is
base64 JSON).  Put nothing secret in it.  It gives no single use either: a
sealed token can be replayed until it expires.  Whatever must happen at most
once checks the token's ``nonce`` against a :class:`NonceStore` (``consume``).

Token: ``mrtr1.<key id>.<payload>.<mac>`` (base64url, no padding), at most
``max_token_size`` characters.  Several keys verify, one signs, so keys can
rotate: add the new key, make it the signing key, drop the old one after a TTL.
"""

from __future__ import annotations

import binascii
import hashlib
import heapq
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from .._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
    describe,
)
from ..wire._codec import _load_orjson
from ..wire._depth import DEFAULT_MAX_DEPTH, deeper_than

TOKEN_VERSION = "mrtr1"
DEFAULT_TTL = 600.0
DEFAULT_MAX_TOKEN_SIZE = 16 * 1024
MIN_KEY_BYTES = 16
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_ROUND_AND_META = ("_meta", "inputResponses", "requestState")

#: The ``data.reason`` values of :class:`InvalidRequestState`.
REQUEST_STATE_REASONS = (
    "malformed",  # not a token of ours, or not a string
    "too_large",  # longer than max_token_size
    "unsupported_version",  # a token format this server does not read
    "unknown_key",  # signed by a key this server no longer (or never) had
    "bad_signature",  # the payload or its MAC was changed
    "expired",
    "wrong_method",
    "wrong_params",  # another tool, uri or arguments
    "wrong_principal",
    "replayed",  # its nonce (or, for a continuation, its round) was used already
    "unknown_continuation",  # a continuation-style flow this process no longer holds
)


class InvalidRequestState(RemoteProtocolError):
    """-32602 "Invalid or expired requestState", ``data = {"reason": ...}``.

    The reasons are listed in ``REQUEST_STATE_REASONS``.

    Raised before any handler code runs; answer with ``error_response(id, exc)``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(
            "Invalid or expired requestState", code=INVALID_PARAMS, data={"reason": reason}
        )
        self.reason = reason


class NonceStoreFull(MrtrError):
    """The single-use store is at its bound with nothing expired: refuse (fail closed)."""

    code = INTERNAL_ERROR


class NonceStore(Protocol):
    """Consumed nonces, shared by every process that serves the same flows.

    ``consume`` must be atomic: it records ``nonce`` until ``expires_at`` and
    returns True, or returns False if it was recorded already.  A shared store
    maps onto one atomic command, e.g. Redis ``SET <nonce> 1 NX PXAT <expires>``
    (True when it answered OK), or an SQL insert into a table whose primary key
    is the nonce (True unless the key already existed).  Expired entries may be
    dropped: an expired token is refused before the store is asked.
    """

    def consume(self, nonce: str, expires_at: float, now: float) -> bool: ...


class MemoryNonceStore:
    """A bounded in-process :class:`NonceStore` (one process only).

    Holds at most ``max_entries`` nonces; expired ones are dropped as time
    passes.  When full of unexpired nonces it raises :class:`NonceStoreFull`
    rather than forget one (forgetting would allow a replay).
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        if not isinstance(max_entries, int) or isinstance(max_entries, bool) or max_entries < 1:
            raise LocalProtocolError("max_entries must be a positive integer")
        self.max_entries = max_entries
        self._expiry: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._expiry)

    def consume(self, nonce: str, expires_at: float, now: float) -> bool:
        heap = self._heap
        while heap and heap[0][0] < now:
            _, old = heapq.heappop(heap)
            del self._expiry[old]
        if nonce in self._expiry:
            return False
        if len(self._expiry) >= self.max_entries:
            raise NonceStoreFull(f"the single-use store holds {self.max_entries} unexpired nonces")
        self._expiry[nonce] = expires_at
        heapq.heappush(heap, (expires_at, nonce))
        return True


@attrs.frozen(kw_only=True)
class OpenedState:
    """A verified token: the app's ``value`` and the facts a single-use check needs."""

    value: Any
    nonce: str
    issued_at: float
    expires_at: float
    key_id: str
    #: ``params_digest`` of the params the token was opened for (checked equal to the
    #: one sealed in it): sealing the next state of the same leg reuses it.
    params_digest: str | None = attrs.field(default=None, eq=False, repr=False)


# The payload of a token whose MAC matched is our own JSON: orjson reads it several
# times faster when installed.  The stdlib reads what orjson reads otherwise: an
# integer of 19 digits or more (orjson makes a float of one beyond 64 bits; the scan
# is conservative, digits in a string count too) and a lone surrogate the stdlib
# writer escaped (orjson refuses it).
_orjson = _load_orjson()
# (Every digit made a 9, then one substring search: several times faster than a regex.)
_DIGITS_AS_NINES = bytes.maketrans(b"0123456789", b"9999999999")
_NINETEEN_DIGITS = b"9" * 19


def _loads_own(data: bytes) -> Any:
    if _orjson is not None and _NINETEEN_DIGITS not in data.translate(_DIGITS_AS_NINES):
        try:
            return _orjson.loads(data)
        except ValueError:
            pass
    return json.loads(data)


# base64url by hand around binascii: what base64.urlsafe_b64encode/decode do, without
# their argument checks and wrappers (these run three or four times per leg).
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")


def _b64encode(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode()


def _b64decode(text: str) -> bytes:
    # (Not strict, as urlsafe_b64decode: only text whose MAC matched is decoded.)
    padded = (text + "=" * (-len(text) % 4)).encode("ascii")
    return binascii.a2b_base64(padded.translate(_FROM_URLSAFE))


def _canonical(value: Any) -> bytes:
    # One spelling per JSON value, whatever backend decoded it: sorted keys, no spaces.
    # ASCII output: a lone surrogate (which the stdlib JSON reader lets in) stays encodable.
    # The encoder recurses: a value deeper than a message may be is refused before it starts.
    if deeper_than(value, DEFAULT_MAX_DEPTH):
        raise ValueError(f"nested deeper than {DEFAULT_MAX_DEPTH} levels")
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def params_digest(params: Mapping[str, Any] | None) -> str:
    """SHA-256 of the params that identify what is being done (not how far it got).

    Params that are not JSON values (NaN, other objects), or nested deeper than
    ``DEFAULT_MAX_DEPTH`` (128) levels, raise :class:`LocalProtocolError`: ``open``
    reports them as ``wrong_params``, and ``seal`` refuses them.
    """
    salient = {k: v for k, v in _params(params).items() if k not in _ROUND_AND_META}
    try:
        canonical = _canonical(salient)
    except (TypeError, ValueError, RecursionError) as exc:
        # NaN, values JSON cannot carry, too deep (or a caller with no stack left for them)
        raise LocalProtocolError(f"params are not JSON values: {exc}") from exc
    return _b64encode(hashlib.sha256(canonical).digest())


def _params(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The request's params as given (``None``: none); a caller's mistake otherwise."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise LocalProtocolError(
            "params are the request's params: a mapping (request.params), or None, "
            f"not {describe(params)}"
        )
    return params


class StateSealer:
    """Seals and opens ``requestState`` tokens.

    ``keys`` maps key ids to secrets (at least 16 bytes each; 32 random bytes
    is right); ``signing_key`` names the one that signs.  ``ttl`` is the
    default lifetime in seconds; ``store`` (optional) backs :meth:`consume`.
    """

    def __init__(
        self,
        keys: Mapping[str, bytes],
        signing_key: str,
        *,
        ttl: float = DEFAULT_TTL,
        max_token_size: int = DEFAULT_MAX_TOKEN_SIZE,
        store: NonceStore | None = None,
    ) -> None:
        if not keys:
            raise LocalProtocolError("at least one key is needed")
        for key_id, secret in keys.items():
            if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
                raise LocalProtocolError(f"key id {key_id!r} must match [A-Za-z0-9_-]{{1,32}}")
            if not isinstance(secret, bytes) or len(secret) < MIN_KEY_BYTES:
                raise LocalProtocolError(f"key {key_id!r} must be at least {MIN_KEY_BYTES} bytes")
        if signing_key not in keys:
            raise LocalProtocolError(f"signing key {signing_key!r} is not among the keys")
        if not isinstance(ttl, (int, float)) or isinstance(ttl, bool) or not ttl > 0:
            raise LocalProtocolError("ttl must be a positive number of seconds")
        if not isinstance(max_token_size, int) or max_token_size < 128:
            raise LocalProtocolError("max_token_size must be an integer of at least 128")
        self._keys = dict(keys)
        # One keyed HMAC-SHA256 per key, copied for each MAC: the key schedule (its
        # inner and outer pads, hashed) is done once, not once per token.
        self._keyed = {k: hmac.new(secret, digestmod=hashlib.sha256) for k, secret in keys.items()}
        self.signing_key = signing_key
        self.ttl = float(ttl)
        self.max_token_size = max_token_size
        self.store = store

    @staticmethod
    def new_key() -> bytes:
        """32 random bytes, a fresh signing secret."""
        return secrets.token_bytes(32)

    def seal(
        self,
        value: Any,
        *,
        method: str,
        params: Mapping[str, Any] | None,
        principal: str | None,
        now: float,
        ttl: float | None = None,
        nonce: str | None = None,
    ) -> str:
        """A token carrying ``value`` (any JSON value) for this method, params and principal."""
        return self._seal_digest(
            value,
            method=method,
            digest=params_digest(params),
            principal=principal,
            now=now,
            ttl=ttl,
            nonce=nonce,
        )

    def _seal_digest(
        self,
        value: Any,
        *,
        method: str,
        digest: str,
        principal: str | None,
        now: float,
        ttl: float | None = None,
        nonce: str | None = None,
    ) -> str:
        """:meth:`seal` for params whose ``params_digest`` is known already (the leg
        that opened them computed it): the same token, without digesting them again."""
        key_id = self.signing_key
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0
        ):
            raise LocalProtocolError("ttl must be a positive number of seconds")
        if nonce is not None and not isinstance(nonce, str):
            raise LocalProtocolError("nonce must be a string")
        lifetime = self.ttl if ttl is None else float(ttl)
        payload = {
            "m": method,
            "a": digest,
            "p": self._principal_digest(key_id, principal),
            "iat": now,
            "exp": now + lifetime,
            "n": secrets.token_urlsafe(16) if nonce is None else nonce,
            "s": value,
        }
        try:
            body = _b64encode(_canonical(payload))
        except (TypeError, ValueError) as exc:
            raise LocalProtocolError(f"the state is not a JSON value: {exc}") from exc
        token = f"{TOKEN_VERSION}.{key_id}.{body}.{self._mac(key_id, body)}"
        if len(token) > self.max_token_size:
            raise LocalProtocolError(
                f"the sealed state is {len(token)} characters, over max_token_size="
                f"{self.max_token_size}: keep less in it"
            )
        return token

    def open(
        self,
        token: Any,
        *,
        method: str,
        params: Mapping[str, Any] | None,
        principal: str | None,
        now: float,
    ) -> OpenedState:
        """Verify ``token`` for this request, or raise :class:`InvalidRequestState`."""
        _params(params)  # (the caller's mistake, whatever the token: LocalProtocolError)
        if not isinstance(token, str):
            raise InvalidRequestState("malformed")
        if len(token) > self.max_token_size:
            raise InvalidRequestState("too_large")
        parts = token.split(".")
        if len(parts) != 4 or not all(parts) or not token.isascii():
            raise InvalidRequestState("malformed")
        version, key_id, body, mac = parts
        if version != TOKEN_VERSION:
            reason = "unsupported_version" if version.startswith("mrtr") else "malformed"
            raise InvalidRequestState(reason)
        if key_id not in self._keys:
            raise InvalidRequestState("unknown_key")
        if not hmac.compare_digest(mac, self._mac(key_id, body)):
            raise InvalidRequestState("bad_signature")
        payload = self._payload(body)
        if now > payload["exp"]:
            raise InvalidRequestState("expired")
        if payload["m"] != method:
            raise InvalidRequestState("wrong_method")
        try:
            digest = params_digest(params)
        except LocalProtocolError as exc:
            raise InvalidRequestState("wrong_params") from exc
        if payload["a"] != digest:
            raise InvalidRequestState("wrong_params")
        if payload["p"] != self._principal_digest(key_id, principal):
            raise InvalidRequestState("wrong_principal")
        return OpenedState(
            value=payload["s"],
            nonce=payload["n"],
            issued_at=payload["iat"],
            expires_at=payload["exp"],
            key_id=key_id,
            params_digest=digest,
        )

    def consume(self, opened: OpenedState, now: float) -> None:
        """Spend the token's nonce in the store: a second spend is ``replayed``."""
        if self.store is None:
            raise LocalProtocolError("no single-use store was configured")
        if not self.store.consume(opened.nonce, opened.expires_at, now):
            raise InvalidRequestState("replayed")

    def _mac(self, key_id: str, body: str) -> str:
        mac = self._keyed[key_id].copy()
        mac.update(f"{TOKEN_VERSION}.{key_id}.{body}".encode("ascii"))
        return _b64encode(mac.digest())

    def _principal_digest(self, key_id: str, principal: str | None) -> str | None:
        if principal is None:
            return None
        # Keyed, so the token does not let anyone test guesses of who it is for.
        mac = self._keyed[key_id].copy()
        mac.update(b"principal\x00" + principal.encode("utf-8", "surrogatepass"))
        return _b64encode(mac.digest()[:16])

    @staticmethod
    def _payload(body: str) -> dict[str, Any]:
        # The MAC matched, so only our own (older or buggy) tokens can fail here.
        try:
            payload = _loads_own(_b64decode(body))
        except (ValueError, binascii.Error) as exc:
            raise InvalidRequestState("malformed") from exc
        if not (
            isinstance(payload, dict)
            and isinstance(payload.get("m"), str)
            and isinstance(payload.get("a"), str)
            and isinstance(payload.get("n"), str)
            and isinstance(payload.get("iat"), (int, float))
            and isinstance(payload.get("exp"), (int, float))
            and (payload.get("p") is None or isinstance(payload.get("p"), str))
            and "s" in payload
        ):
            raise InvalidRequestState("malformed")
        return payload
