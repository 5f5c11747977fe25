"""The assertion grants of the MCP authorization extensions, sans-IO: the JWT-bearer
grant (RFC 7523, section 2.1), in which the client presents a JWT someone it trusts
signed instead of a user's consent, and the token exchange (RFC 8693) that gets such
a JWT from an enterprise identity provider.

* Workload identity federation (``io.modelcontextprotocol/auth/wif``, SEP-1933): the
  JWT is the workload's own identity token (a platform issues it); the client sends
  it as the grant's ``assertion``.  A refusal is final: no retry, no other grant.
* Enterprise-managed authorization (``io.modelcontextprotocol/enterprise-managed-
  authorization``, SEP-990): the client exchanges the user's ID token at the identity
  provider for an Identity Assertion JWT Authorization Grant (ID-JAG: ``requested_
  token_type`` ``...:id-jag``, ``audience`` the authorization server's issuer,
  ``resource`` the MCP server), then presents the ID-JAG in the JWT-bearer grant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._errors import clip, describe
from ._client import AuthorizationRefused

__all__ = [
    "ID_JAG",
    "JWT_BEARER_GRANT",
    "TOKEN_EXCHANGE_GRANT",
    "id_jag_request",
    "jwt_bearer_grant",
    "read_id_jag",
]

JWT_BEARER_GRANT: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE_GRANT: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN: Final = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG: Final = "urn:ietf:params:oauth:token-type:id-jag"
#: The longest assertion taken from an identity provider (a JWT of a few claims).
MAX_ASSERTION_LENGTH: Final = 16 * 1024


def jwt_bearer_grant(
    *, assertion: str, resource: str, scopes: tuple[str, ...] | None
) -> dict[str, str]:
    """The JWT-bearer grant's parameters (with RFC 8707's resource)."""
    grant = {"grant_type": JWT_BEARER_GRANT, "assertion": assertion, "resource": resource}
    if scopes:
        grant["scope"] = " ".join(scopes)
    return grant


def id_jag_request(
    *,
    id_token: str,
    audience: str,
    resource: str,
    scopes: tuple[str, ...] | None,
) -> dict[str, str]:
    """The token exchange's form at the identity provider (its client authentication
    is the caller's): the user's ``id_token`` for an ID-JAG naming the authorization
    server (``audience``, its issuer) and the MCP server (``resource``)."""
    form = {
        "grant_type": TOKEN_EXCHANGE_GRANT,
        "requested_token_type": ID_JAG,
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN,
        "audience": audience,
        "resource": resource,
    }
    if scopes:
        form["scope"] = " ".join(scopes)
    return form


def read_id_jag(status: int, raw: Any) -> str:
    """The ID-JAG of the identity provider's answer, or ``AuthorizationRefused`` (its
    ``error``, an answer of another token type, no usable JWT)."""
    if not isinstance(raw, Mapping):
        raise AuthorizationRefused(
            f"the token exchange answered HTTP {status} with {describe(raw)}, not an object"
        )
    if status != 200 or "error" in raw:
        raise AuthorizationRefused(
            f"the token exchange was refused (HTTP {status}, {clip(raw.get('error'))})"
        )
    issued = raw.get("issued_token_type")
    if issued != ID_JAG:
        raise AuthorizationRefused(f"the token exchange issued {clip(issued)!r}, not an ID-JAG")
    token = raw.get("access_token")
    if (
        not isinstance(token, str)
        or not 0 < len(token) <= MAX_ASSERTION_LENGTH
        or token.count(".") != 2
        or any(c in token for c in "\r\n ")
    ):
        raise AuthorizationRefused("the token exchange's ID-JAG is not a JWT")
    return token
