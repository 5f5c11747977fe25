"""Where the JWT of a JWT-bearer grant comes from (RFC 7523; the MCP extensions for
workload identity and enterprise-managed authorization): an :data:`AssertionSource`
is given the authorization server, the resource and the scopes, and returns the JWT
to present; ``OAuthProvider(jwt_bearer=...)`` takes one instead of a user agent.
The forms and answers are the core's (``mrtr_core.auth._grants``).

* :func:`workload_identity`: the workload's own identity token (a platform's, handed
  over as a string or read fresh by a callable each time one is needed).
* :func:`enterprise_identity`: the user's ID token exchanged at the enterprise
  identity provider for an ID-JAG naming this authorization server and resource.
"""

from __future__ import annotations

import base64
import inspect
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from mrtr_core.auth import AuthorizationServerMetadata
from mrtr_core.auth import _grants as rules

from .fetch import fetch, read_json

__all__ = ["AssertionSource", "enterprise_identity", "workload_identity"]

#: ``await source(server, resource, scopes)`` -> the JWT for the JWT-bearer grant.
AssertionSource = Callable[
    [AuthorizationServerMetadata, str, "tuple[str, ...] | None"], Awaitable[str]
]


def workload_identity(token: str | Callable[[], str | Awaitable[str]]) -> AssertionSource:
    """The workload's identity JWT as the assertion: ``token`` itself, or what the
    callable returns (read when needed: a platform rotates such tokens)."""

    async def assertion(
        server: AuthorizationServerMetadata, resource: str, scopes: tuple[str, ...] | None
    ) -> str:
        if isinstance(token, str):
            return token
        value = token()
        return await value if inspect.isawaitable(value) else value

    return assertion


def enterprise_identity(
    *,
    token_endpoint: str,
    id_token: str,
    client_id: str,
    client_secret: str | None = None,
    timeout: float = 10.0,
    max_bytes: int = 64 * 1024,
) -> AssertionSource:
    """An ID-JAG from the identity provider's ``token_endpoint``, for the user whose
    ``id_token`` it issued, as its client ``client_id`` (by ``client_secret`` with
    HTTP Basic when given)."""

    async def assertion(
        server: AuthorizationServerMetadata, resource: str, scopes: tuple[str, ...] | None
    ) -> str:
        form = rules.id_jag_request(
            id_token=id_token, audience=server.issuer, resource=resource, scopes=scopes
        )
        headers: list[tuple[str, str]] = []
        if client_secret is None:
            form["client_id"] = client_id
        else:
            pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"
            headers.append(("Authorization", "Basic " + base64.b64encode(pair.encode()).decode()))
        fetched = await fetch(
            token_endpoint,
            method="POST",
            form=form,
            headers=headers,
            timeout=timeout,
            max_bytes=max_bytes,
        )
        return rules.read_id_jag(fetched.status, read_json(fetched, token_endpoint))

    return assertion
