"""Authorization (the 2026-07-28 specification's chapter; OAuth 2.1), the parts both
sides share, sans-IO: the ``WWW-Authenticate`` Bearer challenge a resource server
answers with and a client reads (:class:`BearerChallenge`, RFC 6750 and RFC 9728's
``resource_metadata``), and the metadata documents that say where the
authorization server is (:class:`ResourceMetadata`, RFC 9728;
:class:`AuthorizationServerMetadata`, RFC 8414) with the well-known URLs a client
tries, in the specification's order.  A malformed challenge is
:class:`InvalidChallenge`, a document that breaks its rules or names another
identity :class:`InvalidMetadata` (both ``RemoteProtocolError``).  An OAuth
client keeps what it gets as :class:`Tokens` and :class:`ClientCredentials` (the
client's other rules are ``_client``'s, used by the transports; the resource
server's scope rule is ``_scopes``', its JOSE header reader ``_jose``').  See
``docs/core.md``, "Authorization".
"""

from ._challenge import BearerChallenge, InvalidChallenge
from ._client import ClientCredentials, Tokens
from ._metadata import (
    AuthorizationServerMetadata,
    InvalidMetadata,
    ResourceMetadata,
    authorization_server_metadata_urls,
    canonical_resource,
    resource_metadata_urls,
)

__all__ = [
    "BearerChallenge",
    "InvalidChallenge",
    "ResourceMetadata",
    "AuthorizationServerMetadata",
    "InvalidMetadata",
    "canonical_resource",
    "resource_metadata_urls",
    "authorization_server_metadata_urls",
    "Tokens",
    "ClientCredentials",
]
