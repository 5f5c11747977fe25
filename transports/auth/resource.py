"""The MCP server as an OAuth resource server, sans ASGI: what it publishes, what it
answers a request that lacks a good token with, and who a good token says is calling.

The model (the specification's authorization chapter; RFC 9728, 6750, 8707): the
server names its authorization server(s) in its protected-resource metadata, served
at the well-known URL(s) of its endpoint's path (``metadata_paths``); a request
without a token, or with one the verifier refuses, is answered 401 with
``WWW-Authenticate: Bearer resource_metadata="<that URL>"`` (``error="invalid_token"``
when a token was sent), which is how a client finds where to get one; a token is
taken from the ``Authorization`` header only (never the query string), one header,
scheme ``Bearer``; a good token's :class:`Identity` is the request's principal.

With ``dpop=Dpop(...)`` (``dpop.py``, RFC 9449) the scheme ``DPoP`` is accepted too
(alone when ``Dpop(required=True)``): the token must be bound to the key of the
request's proof.  A bound token (``cnf``) sent as ``Bearer`` is refused in every
case (RFC 9449, section 7.2): whoever copied it would otherwise need no key.  The
401 then carries the ``DPoP algs="..."`` challenge (beside the Bearer one when both
are accepted), with ``error="invalid_dpop_proof"`` for a bad proof.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

import attrs

from mrtr_core.auth import BearerChallenge, ResourceMetadata, resource_metadata_urls
from mrtr_core.auth import _dpop_proof as proof_rules
from mrtr_core.auth._scopes import ScopeShortfall, check_scopes

from .dpop import Dpop
from .identity import Identity
from .proof_replay import ProofNotChecked
from .refusals import TokenRefused, VerifierUnavailable
from .verifier import TokenVerifier

__all__ = ["AuthFailure", "ResourceAuth"]

log = logging.getLogger("mrtr.auth")


@attrs.frozen
class AuthFailure(Exception):
    """A request refused: ``status`` (400, 401, 403), the ``WWW-Authenticate`` value and
    a message for the JSON-RPC error body (none of them quotes the token), and any
    other ``headers``."""

    status: int
    challenge: str
    message: str
    #: More response headers (a ``DPoP-Nonce`` to sign the next proof with).
    headers: tuple[tuple[str, str], ...] = ()


class ResourceAuth:
    """Require a token ``verifier`` accepts on every request to the endpoint at
    ``resource`` (its public URL: the audience tokens must name), whose tokens come
    from ``authorization_servers``.  ``scopes`` every request needs (say so in
    ``scopes_supported`` too); ``resource_name`` for the metadata.  ``dpop``: accept
    DPoP-bound tokens (``Dpop()``; ``Dpop(required=True)``: only those); ``None``,
    the default, takes bearer tokens only (a server that takes DPoP keeps the
    proofs it has seen: see ``proof_replay.py`` for what that means across workers)."""

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        resource: str,
        authorization_servers: Sequence[str],
        scopes: Iterable[str] = (),
        scopes_supported: Iterable[str] | None = None,
        resource_name: str | None = None,
        dpop: Dpop | None = None,
    ) -> None:
        if urlsplit(resource).scheme not in ("https", "http"):
            raise ValueError(f"resource is the endpoint's http(s) URL, not {resource!r}")
        self.verifier = verifier
        self.resource = resource
        self.scopes = tuple(scopes)
        self.dpop = dpop
        self.metadata = ResourceMetadata(
            resource=resource,
            authorization_servers=tuple(authorization_servers),
            scopes_supported=None if scopes_supported is None else tuple(scopes_supported),
            bearer_methods_supported=("header",),
            resource_name=resource_name,
            extra={} if dpop is None else dpop.metadata(),
        )
        # A document a client would refuse fails now, not at the first request.
        ResourceMetadata.from_json(self.metadata.to_json(), resource=resource)
        urls = resource_metadata_urls(resource)
        #: Where clients look for the metadata; the 401's ``resource_metadata`` is the first.
        self.metadata_url = urls[0]
        #: The paths (below the server's root) the metadata is served at.
        self.metadata_paths = frozenset(urlsplit(url).path for url in urls)
        self.metadata_body = json.dumps(self.metadata.to_json()).encode()

    @property
    def bearer_accepted(self) -> bool:
        return self.dpop is None or not self.dpop.required

    def challenge(
        self,
        error: str | None = None,
        scope: Sequence[str] | None = None,
        description: str | None = None,
        *,
        scheme: str | None = None,
    ) -> str:
        """The ``WWW-Authenticate`` value: the challenge of each scheme accepted
        (``BearerChallenge``, ``DPoP algs="..."``), the ``error`` in ``scheme``'s
        (the scheme the request used; ``None``: every challenge carries it)."""
        if scope is None and self.scopes:
            scope = self.scopes
        challenges = []
        if self.bearer_accepted:
            mine = scheme in (None, "Bearer")
            challenges.append(
                BearerChallenge(
                    resource_metadata=self.metadata_url,
                    scope=None if scope is None else tuple(scope),
                    error=error if mine else None,
                    error_description=description if mine else None,
                ).to_header()
            )
        if self.dpop is not None:
            mine = scheme in (None, "DPoP")
            challenges.append(
                proof_rules.dpop_challenge(
                    self.dpop.algorithms,
                    resource_metadata=self.metadata_url,
                    scope=scope,
                    error=error if mine else None,
                    description=description if mine else None,
                )
            )
        return ", ".join(challenges)

    def request_urls(self, path: str, reached: str | None = None) -> tuple[str, ...]:
        """The URLs a request at ``path`` is addressed by, for a DPoP proof's ``htu``:
        the endpoint's public URL (``resource``), the path at the resource's origin,
        and the URL as it ``reached`` us (scheme and ``Host``, which the endpoint's
        policy has checked) when the caller knows it."""
        parts = urlsplit(self.resource)
        urls = (self.resource, urlunsplit((parts.scheme, parts.netloc, path, "", "")))
        return urls if reached is None else (*urls, reached)

    async def authenticate(
        self,
        authorization: Sequence[str],
        *,
        proofs: Sequence[str] = (),
        method: str = "POST",
        urls: Sequence[str] = (),
    ) -> Identity:
        """The identity of the request whose ``Authorization`` header values are
        ``authorization`` (and ``DPoP`` header values ``proofs``: for a DPoP token, the
        request's ``method`` and ``urls``, ``request_urls``), or ``AuthFailure``."""
        if not authorization:
            raise AuthFailure(401, self.challenge(), "this endpoint requires a bearer token")
        if len(authorization) > 1:
            raise AuthFailure(
                400,
                self.challenge("invalid_request", description="one Authorization header"),
                "more than one Authorization header",
            )
        scheme, _, token = authorization[0].strip().partition(" ")
        token = token.strip()
        scheme = {"bearer": "Bearer", "dpop": "DPoP"}.get(scheme.lower(), scheme)
        accepted = ("Bearer",) * self.bearer_accepted + ("DPoP",) * (self.dpop is not None)
        if scheme not in accepted or not token or " " in token:
            named = " or ".join(f"'{s} <token>'" for s in accepted)
            use = f"use the {' or '.join(accepted)} scheme"
            raise AuthFailure(
                401,
                self.challenge("invalid_request", description=use),
                f"the Authorization header is not {named}",
            )
        try:
            identity = await self.verifier.verify(token)
        except VerifierUnavailable as exc:
            log.error("token not checked: %s", exc.reason)
            challenge = self.challenge("invalid_token", scheme=scheme)
            raise AuthFailure(401, challenge, exc.reason) from None
        except TokenRefused as exc:
            log.info("token refused: %s", exc.reason)
            challenge = self.challenge("invalid_token", description=exc.reason, scheme=scheme)
            raise AuthFailure(401, challenge, exc.reason) from None
        await self._check_binding(scheme, token, identity, proofs, method, urls)
        shortfall = self.check_scopes(self.scopes, identity)
        if shortfall is not None:
            raise AuthFailure(
                403,
                self.scope_challenge(shortfall, identity),
                f"the token lacks the scope(s) {' '.join(shortfall.missing)}",
            )
        return identity

    async def _check_binding(
        self,
        scheme: str,
        token: str,
        identity: Identity,
        proofs: Sequence[str],
        method: str,
        urls: Sequence[str],
    ) -> None:
        """A bound token only with a proof by its key; a DPoP one only if bound."""
        try:
            try:
                bound_to = proof_rules.token_binding(identity.claims)
            except proof_rules.InvalidProof as exc:  # (the token's fault, not a proof's)
                raise TokenRefused(exc.message) from None
            if scheme == "Bearer":
                if bound_to is not None:
                    why = "the token is bound to a key: send it as DPoP with a proof"
                    raise TokenRefused(why)
                return
            assert self.dpop is not None  # (the scheme was accepted)
            await self.dpop.check(proofs, token=token, bound_to=bound_to, method=method, urls=urls)
        except proof_rules.NonceRequired as exc:
            assert self.dpop is not None
            challenge = self.challenge(exc.error, description=exc.message, scheme="DPoP")
            nonce = (("DPoP-Nonce", self.dpop.nonce()),)
            raise AuthFailure(401, challenge, exc.message, nonce) from None
        except proof_rules.InvalidProof as exc:
            log.info("DPoP proof refused: %s", exc.message)
            challenge = self.challenge(exc.error, description=exc.message, scheme="DPoP")
            raise AuthFailure(401, challenge, exc.message) from None
        except TokenRefused as exc:
            log.info("token refused: %s", exc.reason)
            challenge = self.challenge("invalid_token", description=exc.reason, scheme=scheme)
            raise AuthFailure(401, challenge, exc.reason) from None
        except ProofNotChecked as exc:
            log.warning("DPoP proof not checked: %s", exc)
            raise AuthFailure(503, self.challenge(scheme=scheme), str(exc)) from None

    def scope_challenge(self, shortfall: ScopeShortfall, identity: Identity) -> str:
        """The 403's challenge, in the scheme the token came with (a bound token came
        as DPoP: a bearer one would have been refused)."""
        if self.dpop is None or "cnf" not in identity.claims:
            return shortfall.challenge.to_header()
        return proof_rules.dpop_challenge(
            self.dpop.algorithms,
            resource_metadata=self.metadata_url,
            scope=shortfall.challenge.scope,
            error="insufficient_scope",
        )

    def check_scopes(self, needed: Sequence[str], identity: Identity) -> ScopeShortfall | None:
        """``mrtr_core.auth._scopes.check_scopes`` for this resource's challenge."""
        return check_scopes(needed, identity.scopes, resource_metadata=self.metadata_url)
