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
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

import attrs

from mrtr_core.auth import BearerChallenge, ResourceMetadata, resource_metadata_urls
from mrtr_core.auth._scopes import ScopeShortfall, check_scopes

from .identity import Identity
from .refusals import TokenRefused, VerifierUnavailable
from .verifier import TokenVerifier

__all__ = ["AuthFailure", "ResourceAuth"]

log = logging.getLogger("mrtr.auth")


@attrs.frozen
class AuthFailure(Exception):
    """A request refused: ``status`` (400, 401, 403), the ``WWW-Authenticate`` value and
    a message for the JSON-RPC error body (none of them quotes the token)."""

    status: int
    challenge: str
    message: str


class ResourceAuth:
    """Require a token ``verifier`` accepts on every request to the endpoint at
    ``resource`` (its public URL: the audience tokens must name), whose tokens come
    from ``authorization_servers``.  ``scopes`` every request needs (say so in
    ``scopes_supported`` too); ``resource_name`` for the metadata."""

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        resource: str,
        authorization_servers: Sequence[str],
        scopes: Iterable[str] = (),
        scopes_supported: Iterable[str] | None = None,
        resource_name: str | None = None,
    ) -> None:
        if urlsplit(resource).scheme not in ("https", "http"):
            raise ValueError(f"resource is the endpoint's http(s) URL, not {resource!r}")
        self.verifier = verifier
        self.resource = resource
        self.scopes = tuple(scopes)
        self.metadata = ResourceMetadata(
            resource=resource,
            authorization_servers=tuple(authorization_servers),
            scopes_supported=None if scopes_supported is None else tuple(scopes_supported),
            bearer_methods_supported=("header",),
            resource_name=resource_name,
        )
        # A document a client would refuse fails now, not at the first request.
        ResourceMetadata.from_json(self.metadata.to_json(), resource=resource)
        urls = resource_metadata_urls(resource)
        #: Where clients look for the metadata; the 401's ``resource_metadata`` is the first.
        self.metadata_url = urls[0]
        #: The paths (below the server's root) the metadata is served at.
        self.metadata_paths = frozenset(urlsplit(url).path for url in urls)
        self.metadata_body = json.dumps(self.metadata.to_json()).encode()

    def challenge(
        self,
        error: str | None = None,
        scope: Sequence[str] | None = None,
        description: str | None = None,
    ) -> str:
        """The ``WWW-Authenticate`` value (``BearerChallenge``)."""
        if scope is None and self.scopes:
            scope = self.scopes
        return BearerChallenge(
            resource_metadata=self.metadata_url,
            scope=None if scope is None else tuple(scope),
            error=error,
            error_description=description,
        ).to_header()

    async def authenticate(self, authorization: Sequence[str]) -> Identity:
        """The identity of the request whose ``Authorization`` header values are
        ``authorization``, or ``AuthFailure``."""
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
        if scheme.lower() != "bearer" or not token or " " in token:
            raise AuthFailure(
                401,
                self.challenge("invalid_request", description="use the Bearer scheme"),
                "the Authorization header is not 'Bearer <token>'",
            )
        try:
            identity = await self.verifier.verify(token)
        except VerifierUnavailable as exc:
            log.error("token not checked: %s", exc.reason)
            raise AuthFailure(401, self.challenge("invalid_token"), exc.reason) from None
        except TokenRefused as exc:
            log.info("token refused: %s", exc.reason)
            challenge = self.challenge("invalid_token", description=exc.reason)
            raise AuthFailure(401, challenge, exc.reason) from None
        shortfall = self.check_scopes(self.scopes, identity)
        if shortfall is not None:
            raise AuthFailure(
                403,
                shortfall.challenge.to_header(),
                f"the token lacks the scope(s) {' '.join(shortfall.missing)}",
            )
        return identity

    def check_scopes(self, needed: Sequence[str], identity: Identity) -> ScopeShortfall | None:
        """``mrtr_core.auth._scopes.check_scopes`` for this resource's challenge."""
        return check_scopes(needed, identity.scopes, resource_metadata=self.metadata_url)
