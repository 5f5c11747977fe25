"""An opaque (or any) access token verified by asking the authorization server (RFC
7662 token introspection).

The rules: the request is authenticated to the authorization server (HTTP Basic with
the resource server's client id and secret, ``client_secret_basic``), bounded like a
JWKS fetch (``fetch.py``); an answer that is not 200 JSON, or ``active`` other than
``true``, is a refusal; ``exp`` passed, ``nbf`` ahead (with ``leeway``), another ``iss``
(when ``issuer`` is given) or an ``aud`` that does not name ``audience`` is a refusal
(an answer without ``aud`` is refused too: the specification requires the audience
checked).  A good answer is kept ``cache_ttl`` seconds at most (never past its
``exp``), keyed by the token's SHA-256, ``max_cached`` answers at most; refusals are
not kept.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import quote, urlencode

import anyio

from mrtr_core.auth import canonical_resource

from ..client.fetch import FetchFailed, fetch
from .identity import Identity
from .jwt_verifier import MAX_TOKEN_LENGTH, identity_of, names_audience
from .refusals import TokenRefused, VerifierUnavailable

__all__ = ["IntrospectionVerifier"]


class IntrospectionVerifier:
    """Ask ``endpoint`` (the AS's ``introspection_endpoint``) about each token."""

    def __init__(
        self,
        *,
        endpoint: str,
        client_id: str,
        client_secret: str,
        audience: str,
        issuer: str | None = None,
        leeway: float = 60.0,
        cache_ttl: float = 30.0,
        max_cached: int = 1024,
        max_bytes: int = 64 * 1024,
        timeout: float = 5.0,
    ) -> None:
        self.endpoint = endpoint
        self.issuer = issuer
        self.audience = audience
        self._audience = canonical_resource(audience)
        credentials = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"
        self._authorization = "Basic " + base64.b64encode(credentials.encode()).decode()
        self.leeway = leeway
        self.cache_ttl = cache_ttl
        self.max_cached = max_cached
        self.max_bytes = max_bytes
        self.timeout = timeout
        self._cache: OrderedDict[bytes, tuple[float, Identity]] = OrderedDict()
        #: How many introspection requests were made (a figure the tests read).
        self.requests = 0

    async def verify(self, token: str) -> Identity:
        if len(token) > MAX_TOKEN_LENGTH:
            raise TokenRefused(f"the token is longer than {MAX_TOKEN_LENGTH} characters")
        digest = hashlib.sha256(token.encode()).digest()
        now_loop = anyio.current_time()
        kept = self._cache.get(digest)
        if kept is not None:
            until, identity = kept
            if now_loop < until and (identity.expires_at or float("inf")) > time.time():
                return identity
            del self._cache[digest]
        identity = await self._introspect(token)
        until = now_loop + self.cache_ttl
        self._cache[digest] = (until, identity)
        while len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)
        return identity

    async def _introspect(self, token: str) -> Identity:
        self.requests += 1
        body = urlencode({"token": token, "token_type_hint": "access_token"}).encode()
        try:
            fetched = await fetch(
                self.endpoint,
                method="POST",
                body=body,
                headers=[
                    ("content-type", "application/x-www-form-urlencoded"),
                    ("authorization", self._authorization),
                ],
                max_bytes=self.max_bytes,
                timeout=self.timeout,
            )
        except FetchFailed as exc:
            raise VerifierUnavailable(f"token introspection failed: {exc}") from None
        if fetched.status != 200:
            raise VerifierUnavailable(f"token introspection answered {fetched.status}")
        try:
            answer: Any = json.loads(fetched.body)
        except ValueError:
            raise VerifierUnavailable("token introspection answered no JSON") from None
        if not isinstance(answer, dict):
            raise VerifierUnavailable("token introspection answered no JSON object")
        if answer.get("active") is not True:
            raise TokenRefused("the token is not active")
        now = time.time()
        exp, nbf = answer.get("exp"), answer.get("nbf")
        if isinstance(exp, int | float) and exp + self.leeway <= now:
            raise TokenRefused("the token has expired")
        if isinstance(nbf, int | float) and nbf - self.leeway > now:
            raise TokenRefused("the token is not valid yet (nbf or iat in the future)")
        iss = answer.get("iss")
        if self.issuer is not None and iss is not None and iss != self.issuer:
            raise TokenRefused("the token is from another issuer (iss)")
        if not names_audience(answer.get("aud"), self._audience):
            raise TokenRefused("the token is for another resource (aud)")
        issuer = self.issuer or (iss if isinstance(iss, str) else self.endpoint)
        return identity_of(answer, issuer=issuer)
