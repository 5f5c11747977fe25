"""The one rule every link with an OAuth provider sends by (HTTP's POSTs, the WebSocket's
upgrade): send with the provider's token; when the server answers 401 or 403, the
provider decides what next (a new token: send again; nothing would help: the refusal
stands), and a request runs ``MAX_AUTHORIZATIONS_PER_REQUEST`` authorizations at most,
so a server that never accepts what it asks for cannot loop the client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from mrtr_core.auth._client import MAX_AUTHORIZATIONS_PER_REQUEST

if TYPE_CHECKING:
    from .provider import OAuthProvider

__all__ = ["Challenged", "send_authorized"]

T = TypeVar("T")
#: The ``Authorization`` header a try carries (``None``: no token yet).
Sent = tuple[str, str] | None


class Challenged(Exception):
    """A 401 or 403 from the server: its ``WWW-Authenticate`` values and its body (kept
    for the error the caller makes when no new token would help)."""

    def __init__(self, status: int, challenges: list[str], body: bytes = b"") -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.challenges = challenges
        self.body = body


async def send_authorized(auth: OAuthProvider, attempt: Callable[[Sent], Awaitable[T]]) -> T:
    """``attempt(header)`` with the token ``auth`` gives, again after each 401/403 the
    provider answers with a new one.  The last ``Challenged`` propagates when the
    provider declines or the bound is reached; the provider's own failure
    (``AuthorizationFailed``, ``FetchFailed``) propagates as it is."""
    authorizations = 0
    while True:
        sent = await auth.authorization()
        try:
            return await attempt(sent)
        except Challenged as refused:
            if authorizations >= MAX_AUTHORIZATIONS_PER_REQUEST or not await auth.challenged(
                refused.status, refused.challenges, sent
            ):
                raise
            authorizations += 1
