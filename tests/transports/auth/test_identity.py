"""Who a verified token's claims say is calling (``identity_of``, shared by the JWT and
introspection verifiers): the subject, or the client for a token that names no user."""

from __future__ import annotations

from typing import Any

import pytest
from mrtr_transports.auth import TokenRefused
from mrtr_transports.auth.jwt_verifier import identity_of

ISSUER = "https://as.example"


def test_a_user_token_is_its_subject_at_its_issuer() -> None:
    identity = identity_of({"sub": "ada", "client_id": "app", "scope": "a b"}, issuer=ISSUER)
    assert (identity.subject, identity.client_id, identity.scopes) == ("ada", "app", {"a", "b"})
    assert identity.principal == '["https://as.example","ada"]'


@pytest.mark.parametrize("client", [{"client_id": "robot"}, {"azp": "robot"}])
def test_a_token_naming_only_its_client_is_the_client(client: dict[str, Any]) -> None:
    identity = identity_of({**client, "scp": ["tools:read", 7]}, issuer=ISSUER)
    assert (identity.subject, identity.client_id) == ("robot", "robot")
    assert identity.scopes == {"tools:read"}
    # the same principal a JWT of RFC 9068 (sub = the client id) would give
    assert identity.principal == identity_of({"sub": "robot"}, issuer=ISSUER).principal


@pytest.mark.parametrize(
    "claims",
    [{}, {"sub": ""}, {"sub": 7, "client_id": "robot"}, {"client_id": 7}, {"client_id": ""}],
)
def test_a_token_naming_nobody_is_refused(claims: dict[str, Any]) -> None:
    with pytest.raises(TokenRefused, match="names no subject"):
        identity_of(claims, issuer=ISSUER)
