"""Who is calling: the :class:`Identity` a verifier makes of a good token, and the
contextvar that carries it through one request.

The principal that sealed ``requestState``, single-use entries, continuations, URL
interactions, tasks and each client's share of the pools are bound to is
:attr:`Identity.principal`: the issuer and the subject together, so that two
authorization servers' users of the same ``sub`` are never one principal.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["CURRENT_IDENTITY", "Identity"]


@attrs.frozen(kw_only=True)
class Identity:
    """A verified token's facts: ``subject`` (``sub``), ``issuer`` (``iss``),
    ``client_id`` (``client_id``/``azp``, when given), ``scopes``, ``audience``,
    ``expires_at`` (seconds since the epoch, or ``None``) and every ``claims``."""

    subject: str
    issuer: str
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    audience: tuple[str, ...] = ()
    expires_at: float | None = None
    claims: Mapping[str, Any] = attrs.field(factory=dict, repr=False, hash=False)

    @property
    def principal(self) -> str:
        """The issuer and subject as one unambiguous string (JSON of the pair: an
        issuer that ends the way another begins cannot make two users one)."""
        return json.dumps([self.issuer, self.subject], separators=(",", ":"))


#: The identity of the request being served (``None``: an unauthenticated transport,
#: where the app's own ``principal`` holds).  Set by the HTTP endpoint per request and
#: per WebSocket conversation; the tasks a request starts inherit it.
CURRENT_IDENTITY: contextvars.ContextVar[Identity | None] = contextvars.ContextVar(
    "mrtr_current_identity", default=None
)
