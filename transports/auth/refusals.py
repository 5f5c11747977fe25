"""Why a token gave no access: :class:`TokenRefused` (401, ``invalid_token``) and
:class:`InsufficientScope` (403, ``insufficient_scope``).

A refusal's message says what was wrong with the token (expired, another audience, an
algorithm not allowed), never the token itself: it goes to logs and to the client.
"""

from __future__ import annotations

from collections.abc import Iterable

import mrtr_core as m

# The scope rule's home is the core; the apps import it from here.
from mrtr_core.auth._scopes import missing_scopes as missing_scopes

__all__ = ["FORBIDDEN", "InsufficientScope", "TokenRefused", "VerifierUnavailable"]

#: The JSON-RPC code of a call refused for its scopes where no HTTP status can say it
#: (a WebSocket conversation): one of the -32000..-32019 the spec leaves to servers.
FORBIDDEN = -32003


class TokenRefused(Exception):
    """The token is no good (RFC 6750 ``invalid_token``): 401.  ``reason`` is safe to
    log and to send: it never quotes the token."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class VerifierUnavailable(TokenRefused):
    """The verifier could not decide (its key set or introspection endpoint did not
    answer, and nothing kept decides it): no access, 401 like any refusal, logged apart."""


class InsufficientScope(m.MrtrError):
    """A good token that lacks a scope the call needs: 403 with
    ``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."`` over HTTP; this
    JSON-RPC error (:data:`FORBIDDEN`, ``data.scopes``) where a status cannot say it."""

    def __init__(self, needed: Iterable[str], missing: Iterable[str]) -> None:
        self.needed = tuple(needed)
        self.missing = tuple(missing)
        super().__init__(
            f"this call needs the scope(s) {' '.join(self.missing)}",
            code=FORBIDDEN,
            data={"reason": "insufficient_scope", "scopes": list(self.needed)},
        )
