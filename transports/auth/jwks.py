"""A JSON Web Key Set fetched over HTTP and kept: the keys a :class:`JwtVerifier` checks
signatures with.

Bounds and freshness, the rules of this module:

* one fetch reads ``max_bytes`` at most, in ``timeout`` seconds, through
  ``max_redirects`` redirects, and keeps ``max_keys`` signing keys at most;
* the set is kept ``ttl`` seconds, then fetched again when a token needs it;
* a token whose ``kid`` the set lacks makes one refetch (the authorization server
  rotated its keys), but no sooner than ``refetch_interval`` seconds after the last
  fetch: a flood of made-up ``kid`` values costs the source one fetch per interval;
* when a fetch fails (the source is down, too slow, too big, not a key set), the last
  good set is kept and used, and the next try waits ``refetch_interval``; with no good
  set yet, every token is refused (``VerifierUnavailable``);
* one fetch at a time: concurrent tokens wait for the same one;
* :meth:`JwksKeys.of_issuer`: the set's URL is the ``jwks_uri`` of the issuer's
  metadata (RFC 8414 / OpenID discovery, at the well-known URLs in the specification's
  order, whose ``issuer`` must be the one asked), looked up at the first fetch and
  again at each fetch until found (same bounds).
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import anyio
import jwt

from mrtr_core.auth import (
    AuthorizationServerMetadata,
    InvalidMetadata,
    authorization_server_metadata_urls,
)

from ..client.fetch import FetchFailed, fetch
from .refusals import TokenRefused, VerifierUnavailable

__all__ = ["JwksKeys"]

log = logging.getLogger("mrtr.auth")

#: The ``kty`` values of the asymmetric keys a signature is checked with.
_ASYMMETRIC = ("RSA", "EC", "OKP")


class JwksKeys:
    """The key set at ``url`` (``jwks_uri`` of the authorization server's metadata)."""

    def __init__(
        self,
        url: str | None,
        *,
        ttl: float = 300.0,
        refetch_interval: float = 30.0,
        max_bytes: int = 64 * 1024,
        timeout: float = 5.0,
        max_redirects: int = 1,
        max_keys: int = 32,
    ) -> None:
        if url is not None and not url.startswith(("https://", "http://")):
            raise ValueError(f"a JWKS URL is http(s), not {url!r}")
        for name, value in (("ttl", ttl), ("refetch_interval", refetch_interval)):
            if not value >= 0:
                raise ValueError(f"{name} must be non-negative")
        self.url = url
        #: The issuer whose metadata names the set (``of_issuer``), while ``url`` is unknown.
        self.issuer: str | None = None
        self.ttl = ttl
        self.refetch_interval = refetch_interval
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.max_keys = max_keys
        self._keys: dict[str | None, jwt.PyJWK] | None = None
        #: The ``alg`` each key names (RFC 7517 4.4), where it names one.
        self._pinned: dict[str | None, str] = {}
        self._fetched_at = -math.inf  # (the last good set's)
        self._tried_at = -math.inf  # (the last attempt's, good or not)
        self._lock = anyio.Lock()
        #: How many fetches were made (a figure the tests and the logs read).
        self.fetches = 0

    @classmethod
    def of_issuer(cls, issuer: str, **bounds: Any) -> JwksKeys:
        """The key set the metadata of ``issuer`` names (its ``jwks_uri``)."""
        if not issuer.startswith(("https://", "http://")):
            raise ValueError(f"an issuer is an http(s) URL, not {issuer!r}")
        keys = cls(None, **bounds)
        keys.issuer = issuer
        return keys

    async def key_for(self, kid: str | None) -> jwt.PyJWK:
        """The key named ``kid`` (``None``: the set's only key); ``TokenRefused`` when the
        set has none such, ``VerifierUnavailable`` when there is no set to look in."""
        now = anyio.current_time()
        if self._keys is None or now >= self._fetched_at + self.ttl:
            await self._refresh(now)
        elif kid not in self._keys:
            await self._refresh(now)  # (rate-limited inside)
        if self._keys is None:
            raise VerifierUnavailable("the authorization server's key set is unavailable")
        key = self._keys.get(kid)
        if key is None:
            raise TokenRefused("signed by a key the authorization server does not publish")
        return key

    def pinned_algorithm(self, kid: str | None) -> str | None:
        """The ``alg`` the JWK of ``kid`` names: the only one a token may use with it."""
        return self._pinned.get(kid)

    async def _refresh(self, asked_at: float) -> None:
        async with self._lock:
            now = anyio.current_time()
            if self._tried_at > asked_at or now < self._tried_at + self.refetch_interval:
                return  # another caller just fetched (or tried): use what it got
            self._tried_at = now
            self.fetches += 1
            try:
                keys, pinned = await self._fetch()
            except (FetchFailed, ValueError) as exc:
                kept = "keeping the last good set" if self._keys is not None else "no set yet"
                log.warning("JWKS %s: %s (%s)", self.url or self.issuer, exc, kept)
                return
            self._keys, self._pinned = keys, pinned
            self._fetched_at = anyio.current_time()

    async def _discover(self) -> str:
        """The issuer's ``jwks_uri``, from the first of its metadata URLs that answers."""
        assert self.issuer is not None
        for url in authorization_server_metadata_urls(self.issuer):
            fetched = await fetch(
                url,
                max_bytes=self.max_bytes,
                timeout=self.timeout,
                max_redirects=self.max_redirects,
            )
            if fetched.status != 200:
                continue
            try:
                metadata = AuthorizationServerMetadata.from_json(
                    json.loads(fetched.body), issuer=self.issuer
                )
            except (ValueError, InvalidMetadata) as exc:
                raise ValueError(f"the issuer's metadata at {url}: {exc}") from None
            jwks_uri = metadata.extra.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
                raise ValueError(f"the issuer's metadata at {url} names no http(s) jwks_uri")
            return jwks_uri
        raise ValueError(f"no metadata found for the issuer {self.issuer}")

    async def _fetch(self) -> tuple[dict[str | None, jwt.PyJWK], dict[str | None, str]]:
        if self.url is None:
            self.url = await self._discover()
        fetched = await fetch(
            self.url,
            max_bytes=self.max_bytes,
            timeout=self.timeout,
            max_redirects=self.max_redirects,
        )
        if fetched.status != 200:
            raise ValueError(f"answered {fetched.status}")
        try:
            document: Any = json.loads(fetched.body)
        except ValueError:
            raise ValueError("not JSON") from None
        raw_keys = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(raw_keys, list):
            raise ValueError("not a key set (no 'keys' array)")
        keys: dict[str | None, jwt.PyJWK] = {}
        pinned: dict[str | None, str] = {}
        for raw in raw_keys:
            if len(keys) >= self.max_keys:
                break
            if not isinstance(raw, dict) or raw.get("kty") not in _ASYMMETRIC:
                continue  # a symmetric key is never a public signing key
            if raw.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(raw)
            except jwt.PyJWTError:
                continue  # a key of a kind or curve we do not check with: skipped
            kid = raw.get("kid") if isinstance(raw.get("kid"), str) else None
            keys[kid] = key
            if isinstance(raw.get("alg"), str):
                pinned[kid] = raw["alg"]
        if not keys:
            raise ValueError("no usable signing key")
        if len(keys) == 1:
            # A token without ``kid`` may use the set's only key.
            ((only, key),) = keys.items()
            keys.setdefault(None, key)
            if only in pinned:
                pinned.setdefault(None, pinned[only])
        return keys, pinned
