"""The one rule every link with an OAuth provider sends by (HTTP's POSTs, the WebSocket's
upgrade): send with the provider's token (and its DPoP proof, for a bound one); when
the server answers 401 or 403, the provider decides what next (a new token or a DPoP
nonce: send again; nothing would help: the refusal stands), and a request runs
``MAX_AUTHORIZATIONS_PER_REQUEST`` authorizations at most, so a server that never
accepts what it asks for cannot loop the client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from mrtr_core.auth._client import MAX_AUTHORIZATIONS_PER_REQUEST

if TYPE_CHECKING:
    from .provider import OAuthProvider

__all__ = ["Challenged", "send_authorized"]

T = TypeVar("T")


class Challenged(Exception):
    """A 401 or 403 from the server: its ``WWW-Authenticate`` values, its ``DPoP-Nonce``
    (RFC 9449, section 9) and its body (kept for the error the caller makes when no
    new token would help)."""

    def __init__(
        self,
        status: int,
        challenges: list[str],
        body: bytes = b"",
        *,
        dpop_nonce: str | None = None,
    ) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.challenges = challenges
        self.body = body
        self.dpop_nonce = dpop_nonce

    @classmethod
    def from_response(
        cls, status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes
    ) -> Challenged:
        """The refusal of a response with these (lower-case) header fields."""
        challenges: list[str] = []
        nonce: str | None = None
        for name, value in headers:
            if name == b"www-authenticate":
                challenges.append(value.decode("latin-1"))
            elif name == b"dpop-nonce":
                nonce = value.decode("latin-1")
        return cls(status, challenges, body, dpop_nonce=nonce)


async def send_authorized(
    auth: OAuthProvider,
    attempt: Callable[[list[tuple[str, str]]], Awaitable[T]],
    *,
    method: str,
    url: str,
) -> T:
    """``attempt(headers)`` with the token ``auth`` gives (its ``Authorization`` header
    and, for a DPoP-bound token, the proof for ``method`` ``url``), again after each
    401/403 the provider answers with a new token or nonce.  The last ``Challenged``
    propagates when the provider declines or the bound is reached; the provider's own
    failure (``AuthorizationFailed``, ``FetchFailed``) propagates as it is."""
    authorizations = 0
    while True:
        sent = await auth.authorization()
        headers = [] if sent is None else [sent, *auth.proof_headers(method, url, sent)]
        try:
            return await attempt(headers)
        except Challenged as refused:
            if authorizations >= MAX_AUTHORIZATIONS_PER_REQUEST or not await auth.challenged(
                refused.status, refused.challenges, sent, dpop_nonce=refused.dpop_nonce
            ):
                raise
            authorizations += 1
