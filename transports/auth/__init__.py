"""The MCP server as an OAuth 2.1 resource server (the 2026-07-28 specification's
authorization chapter): token verifiers, the identity a good token gives, and the
rules of the endpoint's gate.  See ``docs/auth.md``.

* :class:`ResourceAuth` (``McpAsgi(app, auth=...)``): the metadata to publish, the
  401/403 challenges, a request's :class:`Identity`;
* :class:`TokenVerifier`, with :class:`JwtVerifier` (keys from a JWKS,
  :class:`JwksKeys`) and :class:`IntrospectionVerifier` (RFC 7662);
* :class:`TokenRefused` (401), :class:`InsufficientScope` (403).
"""

from .identity import CURRENT_IDENTITY, Identity
from .introspection import IntrospectionVerifier
from .jwks import JwksKeys
from .jwt_verifier import JwtVerifier
from .refusals import InsufficientScope, TokenRefused, VerifierUnavailable
from .resource import AuthFailure, ResourceAuth
from .verifier import TokenVerifier

__all__ = [
    "CURRENT_IDENTITY",
    "AuthFailure",
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
