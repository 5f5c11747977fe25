"""What the endpoint asks of a token: a :class:`TokenVerifier` turns one into an
:class:`~.identity.Identity` or refuses it (``TokenRefused``).  ``JwtVerifier``
(``jwt_verifier.py``) and ``IntrospectionVerifier`` (``introspection.py``) are two;
any object with this ``verify`` is another (a test's, a deployment's own)."""

from __future__ import annotations

from typing import Protocol

from .identity import Identity

__all__ = ["TokenVerifier"]


class TokenVerifier(Protocol):
    async def verify(self, token: str) -> Identity:
        """The identity of ``token``; raises ``TokenRefused`` (never a message that
        quotes the token) when it gives no access."""
        ...
