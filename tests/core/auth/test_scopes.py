"""The resource server's scope rule (``mrtr_core.auth._scopes``): what a token lacks of
what an operation needs, and the ``insufficient_scope`` challenge naming all it needs."""

from __future__ import annotations

import pytest

from mrtr_core.auth import BearerChallenge
from mrtr_core.auth._scopes import ScopeShortfall, check_scopes, missing_scopes

PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


@pytest.mark.parametrize(
    ("needed", "granted", "missing"),
    [
        ((), (), ()),
        ((), ("a",), ()),
        (("a",), ("a", "b"), ()),
        (("a", "b"), ("b",), ("a",)),
        (("b", "a", "b"), (), ("b", "a")),  # needed's order, each once
        (("admin",), ("Admin",), ("admin",)),  # scopes are case-sensitive (RFC 6749 3.3)
    ],
)
def test_missing_scopes(needed, granted, missing):
    assert missing_scopes(needed, granted) == missing


def test_a_token_with_every_scope_passes():
    assert (
        check_scopes(["read", "write"], frozenset({"write", "read", "x"}), resource_metadata=PRM)
        is None
    )
    assert check_scopes([], frozenset(), resource_metadata=PRM) is None


def test_a_shortfall_names_every_needed_scope_in_its_challenge():
    shortfall = check_scopes(["read", "write", "read"], ["read"], resource_metadata=PRM)
    assert shortfall == ScopeShortfall(
        ("write",),
        BearerChallenge(resource_metadata=PRM, scope=("read", "write"), error="insufficient_scope"),
    )
    # What a client reads back from the header the server sends.
    header = shortfall.challenge.to_header()
    read = BearerChallenge.from_headers(header)
    assert read is not None
    assert (read.error, read.scope, read.resource_metadata) == (
        "insufficient_scope",
        ("read", "write"),
        PRM,
    )


def test_without_metadata_the_challenge_names_none():
    shortfall = check_scopes(("admin",), (), resource_metadata=None)
    assert shortfall is not None and shortfall.challenge.resource_metadata is None
    assert shortfall.missing == ("admin",)
