"""The assertion grants' rules (``mrtr_core.auth._grants``): the JWT-bearer grant
(RFC 7523) and the token exchange for an ID-JAG (RFC 8693; SEP-990)."""

from __future__ import annotations

import pytest

from mrtr_core.auth._client import AuthorizationRefused
from mrtr_core.auth._grants import (
    ID_JAG,
    JWT_BEARER_GRANT,
    MAX_ASSERTION_LENGTH,
    TOKEN_EXCHANGE_GRANT,
    id_jag_request,
    jwt_bearer_grant,
    read_id_jag,
)

RESOURCE = "https://mcp.example.com/mcp"
JWT = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3In0.c2ln"


def test_the_jwt_bearer_grant():
    assert jwt_bearer_grant(assertion=JWT, resource=RESOURCE, scopes=None) == {
        "grant_type": JWT_BEARER_GRANT,
        "assertion": JWT,
        "resource": RESOURCE,
    }
    scoped = jwt_bearer_grant(assertion=JWT, resource=RESOURCE, scopes=("a", "b"))
    assert scoped["scope"] == "a b"
    assert "scope" not in jwt_bearer_grant(assertion=JWT, resource=RESOURCE, scopes=())


def test_the_id_jag_request():
    form = id_jag_request(
        id_token="id.token.x", audience="https://as.example.com", resource=RESOURCE, scopes=None
    )
    assert form == {
        "grant_type": TOKEN_EXCHANGE_GRANT,
        "requested_token_type": ID_JAG,
        "subject_token": "id.token.x",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "audience": "https://as.example.com",
        "resource": RESOURCE,
    }
    scoped = id_jag_request(id_token="t", audience="a", resource=RESOURCE, scopes=("read",))
    assert scoped["scope"] == "read"


def test_an_id_jag_is_read():
    answer = {"access_token": JWT, "issued_token_type": ID_JAG, "token_type": "N_A"}
    assert read_id_jag(200, answer) == JWT


@pytest.mark.parametrize(
    ("status", "raw", "match"),
    [
        (200, ["not", "an", "object"], "not an object"),
        (400, {"error": "invalid_grant"}, r"refused \(HTTP 400, invalid_grant\)"),
        (200, {"error": "invalid_request", "access_token": JWT}, "refused"),
        (200, {"access_token": JWT}, "not an ID-JAG"),
        (200, {"access_token": JWT, "issued_token_type": "urn:x:access_token"}, "not an ID-JAG"),
        (200, {"issued_token_type": ID_JAG}, "not a JWT"),
        (200, {"access_token": "", "issued_token_type": ID_JAG}, "not a JWT"),
        (200, {"access_token": "opaque", "issued_token_type": ID_JAG}, "not a JWT"),
        (200, {"access_token": "a.b.c\r\nX: y", "issued_token_type": ID_JAG}, "not a JWT"),
        (
            200,
            {"access_token": "a.b." + "c" * MAX_ASSERTION_LENGTH, "issued_token_type": ID_JAG},
            "not a JWT",
        ),
    ],
)
def test_a_bad_exchange_answer_is_refused(status, raw, match):
    with pytest.raises(AuthorizationRefused, match=match) as refused:
        read_id_jag(status, raw)
    assert JWT not in refused.value.message
