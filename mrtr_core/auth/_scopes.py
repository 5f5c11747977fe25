"""The resource server's scope rule, sans-IO: which of the scopes an operation needs a
token lacks, and the ``insufficient_scope`` challenge (RFC 6750, section 3.1) that says
so.  One home for the rule the endpoint (a 403 before the app runs), the app (a
JSON-RPC error where no status can say it) and the scopes every request needs all
check by.  The challenge names every scope the operation needs, not only the missing
ones: a client stepping up asks for them all (the specification's "Scope Challenge
Handling").
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from ._challenge import BearerChallenge

__all__ = ["ScopeShortfall", "check_scopes", "missing_scopes"]


def missing_scopes(needed: Iterable[str], granted: Iterable[str]) -> tuple[str, ...]:
    """The scopes of ``needed`` that ``granted`` lacks, in ``needed``'s order."""
    have = set(granted)
    return tuple(dict.fromkeys(s for s in needed if s not in have))


@attrs.frozen
class ScopeShortfall:
    """A token short of scopes: the ``missing`` ones, and the 403's ``challenge``."""

    missing: tuple[str, ...]
    challenge: BearerChallenge


def check_scopes(
    needed: Iterable[str], granted: Iterable[str], *, resource_metadata: str | None
) -> ScopeShortfall | None:
    """``None`` when ``granted`` covers ``needed``; else what is missing and the
    challenge (``error="insufficient_scope"``, ``scope`` every needed one, the
    resource's ``resource_metadata`` URL)."""
    wanted = tuple(dict.fromkeys(needed))
    missing = missing_scopes(wanted, granted)
    if not missing:
        return None
    challenge = BearerChallenge(
        resource_metadata=resource_metadata, scope=wanted, error="insufficient_scope"
    )
    return ScopeShortfall(missing, challenge)
