"""The MCP server as an OAuth 2.1 resource server (the 2026-07-28 specification's
authorization chapter): token verifiers, the identity a good token gives, and the
rules of the endpoint's gate.  See ``docs/auth.md``.

* :class:`ResourceAuth` (``McpAsgi(app, auth=...)``): the metadata to publish, the
  401/403 challenges, a request's :class:`Identity`;
* :class:`TokenVerifier`, with :class:`JwtVerifier` (keys from a JWKS,
  :class:`JwksKeys`) and :class:`IntrospectionVerifier` (RFC 7662);
* :class:`Dpop` (``ResourceAuth(..., dpop=Dpop())``): DPoP-bound tokens (RFC 9449);
* :class:`TokenRefused` (401), :class:`InsufficientScope` (403).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dpop import Dpop
    from .identity import CURRENT_IDENTITY, Identity
    from .introspection import IntrospectionVerifier
    from .jwks import JwksKeys
    from .jwt_verifier import JwtVerifier
    from .refusals import InsufficientScope, TokenRefused, VerifierUnavailable
    from .resource import AuthFailure, ResourceAuth
    from .verifier import TokenVerifier

#: Each name's module, loaded on first use: the endpoint's gate needs no JOSE library
#: (PyJWT and cryptography load with the JWT verifier, not with every server).
_HOMES = {
    "CURRENT_IDENTITY": "identity",
    "Dpop": "dpop",
    "Identity": "identity",
    "IntrospectionVerifier": "introspection",
    "JwksKeys": "jwks",
    "JwtVerifier": "jwt_verifier",
    "InsufficientScope": "refusals",
    "TokenRefused": "refusals",
    "VerifierUnavailable": "refusals",
    "AuthFailure": "resource",
    "ResourceAuth": "resource",
    "TokenVerifier": "verifier",
}

__all__ = [
    "CURRENT_IDENTITY",
    "AuthFailure",
    "Dpop",
    "Identity",
    "InsufficientScope",
    "IntrospectionVerifier",
    "JwksKeys",
    "JwtVerifier",
    "ResourceAuth",
    "TokenRefused",
    "TokenVerifier",
    "VerifierUnavailable",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
