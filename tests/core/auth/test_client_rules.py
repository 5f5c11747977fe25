"""The OAuth client's rules (``mrtr_core.auth._client``), sans-IO: what to fetch after a
401, which resource metadata covers the endpoint, scope selection and step-up, the
registration choice, the authorization request, the redirect's checks (state, RFC
9207's ``iss``), the token request's client authentication, the token response."""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from mrtr_core import LocalProtocolError
from mrtr_core.auth import (
    AuthorizationServerMetadata,
    BearerChallenge,
    InvalidMetadata,
    ResourceMetadata,
)
from mrtr_core.auth import _client as rules
from mrtr_core.auth._client import AuthorizationRefused, ClientCredentials, Tokens

ENDPOINT = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"
REDIRECT = "http://127.0.0.1:8765/callback"
VERIFIER = "v" * 43
STATE = "s-123"


def server(**fields: Any) -> AuthorizationServerMetadata:
    doc = {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token",
        "registration_endpoint": f"{ISSUER}/register",
        **fields,
    }
    return AuthorizationServerMetadata.from_json(
        {k: v for k, v in doc.items() if v is not None}, issuer=ISSUER
    )


def resource(**fields: Any) -> ResourceMetadata:
    return ResourceMetadata.from_json(
        {"resource": ENDPOINT, "authorization_servers": [ISSUER], **fields}
    )


# --- Discovery -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "resource"),
    [
        ("ws://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/mcp"),
        ("WSS://mcp.example.com/mcp?x=1", "https://mcp.example.com/mcp?x=1"),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("http://127.0.0.1/mcp", "http://127.0.0.1/mcp"),
        ("ws", "ws"),  # (no scheme: left as it is, for the metadata reader to refuse)
    ],
)
def test_a_websocket_endpoint_is_protected_as_its_http_url(endpoint, resource):
    assert rules.resource_endpoint(endpoint) == resource


def test_metadata_urls_after_401_prefer_the_challenge():
    prm = "https://mcp.example.com/custom/prm.json"
    assert rules.metadata_urls_after_401(BearerChallenge(resource_metadata=prm), ENDPOINT) == [prm]
    assert rules.metadata_urls_after_401(BearerChallenge(), ENDPOINT) == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]
    assert rules.metadata_urls_after_401(None, ENDPOINT)[0].endswith("resource/mcp")


@pytest.mark.parametrize(
    "named",
    ["https://mcp.example.com/mcp", "https://MCP.example.com/mcp/", "https://mcp.example.com"],
)
def test_resource_metadata_covering_the_endpoint(named):
    doc = {"resource": named, "authorization_servers": [ISSUER]}
    assert rules.read_resource_metadata(doc, endpoint=ENDPOINT).resource == named


@pytest.mark.parametrize(
    "named",
    [
        "https://evil.example.com/mcp",
        "http://mcp.example.com/mcp",
        "https://mcp.example.com/mc",
        "https://mcp.example.com/mcp/deeper",
        "https://mcp.example.com/other",
        "https://mcp.example.com/mcp?tenant=2",
    ],
)
def test_resource_metadata_for_another_resource_is_refused(named):
    with pytest.raises(InvalidMetadata, match="is for the resource"):
        rules.read_resource_metadata(
            {"resource": named, "authorization_servers": [ISSUER]}, endpoint=ENDPOINT
        )


# --- Scopes ----------------------------------------------------------------------------


def test_scope_from_the_challenge_first():
    challenge = BearerChallenge(scope=("mcp:basic",))
    chosen = rules.select_scopes(challenge, resource(scopes_supported=["a", "b"]), server())
    assert chosen == ("mcp:basic",)


def test_scope_from_scopes_supported_when_the_challenge_has_none():
    assert rules.select_scopes(
        BearerChallenge(), resource(scopes_supported=["a", "b"]), server()
    ) == (
        "a",
        "b",
    )
    assert rules.select_scopes(None, resource(scopes_supported=["a"]), server()) == ("a",)


def test_no_scope_when_nothing_names_one():
    assert rules.select_scopes(None, resource(), server()) is None


def test_offline_access_only_when_the_server_lists_it():
    listed = server(scopes_supported=["mcp:basic", "offline_access"])
    unlisted = server(scopes_supported=["mcp:basic", "mcp:read"])
    prm = resource(scopes_supported=["mcp:basic"])
    assert rules.select_scopes(None, prm, listed) == ("mcp:basic", "offline_access")
    assert rules.select_scopes(None, prm, listed, offline=False) == ("mcp:basic",)
    assert rules.select_scopes(None, prm, unlisted) == ("mcp:basic",)
    challenge = BearerChallenge(scope=("offline_access",))
    assert rules.select_scopes(challenge, prm, listed) == ("offline_access",)


def test_step_up_keeps_the_previous_scopes():
    challenge = BearerChallenge(scope=("mcp:write",), error="insufficient_scope")
    chosen = rules.select_scopes(
        challenge, resource(), server(), previous=("mcp:basic", "mcp:write")
    )
    assert chosen == ("mcp:basic", "mcp:write")


def test_is_step_up():
    insufficient = BearerChallenge(error="insufficient_scope", scope=("x",))
    assert rules.is_step_up(403, insufficient)
    assert not rules.is_step_up(401, insufficient)
    assert not rules.is_step_up(403, BearerChallenge(error="invalid_token"))
    assert not rules.is_step_up(403, None)


# --- Registration ----------------------------------------------------------------------


def test_registration_choice_order():
    cimd = server(client_id_metadata_document_supported=True)
    url = "https://app.example.com/client.json"
    assert rules.registration_choice(cimd, preregistered=True, metadata_document_url=url) == (
        "preregistered"
    )
    assert rules.registration_choice(cimd, preregistered=False, metadata_document_url=url) == (
        "metadata_document"
    )
    assert rules.registration_choice(cimd, preregistered=False, metadata_document_url=None) == (
        "dynamic"
    )
    assert rules.registration_choice(server(), preregistered=False, metadata_document_url=url) == (
        "dynamic"
    )
    with pytest.raises(AuthorizationRefused, match="pre-registered"):
        rules.registration_choice(
            server(registration_endpoint=None), preregistered=False, metadata_document_url=url
        )


def test_registration_request_is_a_native_client_asking_for_refresh():
    body = rules.registration_request(server(), redirect_uris=[REDIRECT], client_name="t")
    assert body["application_type"] == "native"
    assert body["redirect_uris"] == [REDIRECT]
    assert "refresh_token" in body["grant_types"]
    assert body["token_endpoint_auth_method"] == "none"
    post_only = server(token_endpoint_auth_methods_supported=["client_secret_post"])
    body = rules.registration_request(post_only, redirect_uris=[REDIRECT], client_name="t")
    assert body["token_endpoint_auth_method"] == "client_secret_post"
    odd = server(token_endpoint_auth_methods_supported=["private_key_jwt"])
    body = rules.registration_request(odd, redirect_uris=[REDIRECT], client_name="t")
    assert body["token_endpoint_auth_method"] == "client_secret_basic"


def test_read_registration():
    client = rules.read_registration(
        {
            "client_id": "c",
            "client_secret": "s3cret",
            "token_endpoint_auth_method": "client_secret_post",
        }
    )
    assert client == ClientCredentials(
        client_id="c", client_secret="s3cret", token_endpoint_auth_method="client_secret_post"
    )
    assert "s3cret" not in repr(client)
    assert rules.read_registration({"client_id": "c", "client_secret": ""}).client_secret is None


@pytest.mark.parametrize(
    "raw",
    [
        [],
        {},
        {"client_id": ""},
        {"client_id": "c", "client_secret": 5},
        {"client_id": "c", "token_endpoint_auth_method": "private_key_jwt"},
    ],
)
def test_bad_registration_is_refused(raw):
    with pytest.raises(AuthorizationRefused):
        rules.read_registration(raw)


def test_auth_method():
    public = ClientCredentials(client_id="c")
    secret = ClientCredentials(client_id="c", client_secret="s")
    assert rules.auth_method(server(), public) == "none"
    assert rules.auth_method(server(), secret) == "client_secret_basic"
    post = server(token_endpoint_auth_methods_supported=["client_secret_post"])
    assert rules.auth_method(post, secret) == "client_secret_post"
    assert (
        rules.auth_method(server(token_endpoint_auth_methods_supported=["none"]), secret) == "none"
    )
    registered = ClientCredentials(
        client_id="c", client_secret="s", token_endpoint_auth_method="none"
    )
    assert rules.auth_method(post, registered) == "none"


# --- The authorization request and the redirect ----------------------------------------


def test_pkce_challenge_is_s256():
    # RFC 7636, appendix B
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert rules.pkce_challenge(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    expected = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=")
    assert rules.pkce_challenge(VERIFIER) == expected.decode()


@pytest.mark.parametrize("verifier", ["short", "x" * 129, "v" * 42 + " ", 42])
def test_bad_pkce_verifier(verifier):
    with pytest.raises(LocalProtocolError):
        rules.pkce_challenge(verifier)


def test_authorization_url_params():
    url = rules.authorization_url(
        server(),
        client_id="c",
        redirect_uri=REDIRECT,
        state=STATE,
        code_verifier=VERIFIER,
        resource=ENDPOINT,
        scopes=("mcp:basic", "offline_access"),
    )
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{ISSUER}/authorize"
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert query == {
        "response_type": "code",
        "client_id": "c",
        "redirect_uri": REDIRECT,
        "state": STATE,
        "code_challenge": rules.pkce_challenge(VERIFIER),
        "code_challenge_method": "S256",
        "resource": ENDPOINT,
        "scope": "mcp:basic offline_access",
    }


def test_authorization_url_without_scope_and_with_a_query():
    url = rules.authorization_url(
        server(authorization_endpoint=f"{ISSUER}/authorize?tenant=1"),
        client_id="c",
        redirect_uri=REDIRECT,
        state=STATE,
        code_verifier=VERIFIER,
        resource=ENDPOINT,
        scopes=None,
    )
    assert url.startswith(f"{ISSUER}/authorize?tenant=1&")
    assert "scope" not in parse_qs(urlsplit(url).query)


@pytest.mark.parametrize(
    "fields", [{"authorization_endpoint": None}, {"code_challenge_methods_supported": ["plain"]}]
)
def test_authorization_url_refusals(fields):
    with pytest.raises(AuthorizationRefused):
        rules.authorization_url(
            server(**fields),
            client_id="c",
            redirect_uri=REDIRECT,
            state=STATE,
            code_verifier=VERIFIER,
            resource=ENDPOINT,
            scopes=None,
        )


def callback(query: str, **fields: Any) -> str:
    return rules.read_callback(
        f"{REDIRECT}?{query}", redirect_uri=REDIRECT, state=STATE, server=server(**fields)
    )


def test_callback_gives_the_code():
    assert callback(f"code=abc&state={STATE}") == "abc"
    assert callback(f"code=abc&state={STATE}&iss={ISSUER}") == "abc"
    advertised = {"authorization_response_iss_parameter_supported": True}
    assert callback(f"code=abc&state={STATE}&iss={ISSUER}", **advertised) == "abc"


@pytest.mark.parametrize(
    ("query", "fields", "match"),
    [
        # RFC 9207 as the suite's six iss scenarios require
        (
            f"code=a&state={STATE}",
            {"authorization_response_iss_parameter_supported": True},
            "no iss",
        ),
        (f"code=a&state={STATE}&iss=https://evil.example.com", {}, "not the issuer"),
        (
            f"code=a&state={STATE}&iss=https://evil.example.com",
            {"authorization_response_iss_parameter_supported": True},
            "not the issuer",
        ),
        (f"code=a&state={STATE}&iss={ISSUER}/", {}, "not the issuer"),
        (f"code=a&state={STATE}&iss=https://AUTH.example.com", {}, "not the issuer"),
        ("code=a&state=other", {}, "state"),
        ("code=a", {}, "state"),
        (f"error=access_denied&error_description=no&state={STATE}", {}, "access_denied: no"),
        (f"error=access_denied&state={STATE}", {}, "access_denied$"),
        (f"state={STATE}", {}, "no authorization code"),
        (f"code=&state={STATE}", {}, "no authorization code"),
        (f"code=a&code=b&state={STATE}", {}, "repeats"),
    ],
)
def test_callback_refusals(query, fields, match):
    with pytest.raises(AuthorizationRefused, match=match):
        callback(query, **fields)


def test_callback_at_an_unregistered_uri_is_refused():
    with pytest.raises(AuthorizationRefused, match="another URI"):
        rules.read_callback(
            f"https://evil.example.com/callback?code=a&state={STATE}",
            redirect_uri=REDIRECT,
            state=STATE,
            server=server(),
        )


# --- The token request and its answer --------------------------------------------------


def test_token_request_client_authentication():
    grant = rules.code_grant(
        code="c0de", code_verifier=VERIFIER, redirect_uri=REDIRECT, resource=ENDPOINT
    )
    assert grant == {
        "grant_type": "authorization_code",
        "code": "c0de",
        "code_verifier": VERIFIER,
        "redirect_uri": REDIRECT,
        "resource": ENDPOINT,
    }
    basic = ClientCredentials(client_id="id:1", client_secret="s&cret")
    headers, form = rules.token_request(server(), basic, grant)
    assert headers == [("Authorization", "Basic " + base64.b64encode(b"id%3A1:s%26cret").decode())]
    assert form == grant
    post = ClientCredentials(
        client_id="c", client_secret="s", token_endpoint_auth_method="client_secret_post"
    )
    headers, form = rules.token_request(server(), post, grant)
    assert headers == [] and form == {**grant, "client_id": "c", "client_secret": "s"}
    public = ClientCredentials(client_id="c")
    headers, form = rules.token_request(server(), public, grant)
    assert headers == [] and form == {**grant, "client_id": "c"}
    refresh = rules.refresh_grant(refresh_token="r", resource=ENDPOINT)
    assert refresh == {"grant_type": "refresh_token", "refresh_token": "r", "resource": ENDPOINT}


def test_private_key_jwt_assertion():
    claims = rules.client_assertion_claims(client_id="m2m", audience=ISSUER, now=1000.9, jti="j1")
    assert claims == {
        "iss": "m2m",
        "sub": "m2m",
        "aud": ISSUER,
        "iat": 1000,
        "exp": 1000 + rules.ASSERTION_LIFETIME,
        "jti": "j1",
    }
    client = ClientCredentials(client_id="m2m", token_endpoint_auth_method="private_key_jwt")
    grant = rules.client_credentials_grant(resource=ENDPOINT, scopes=None)
    headers, form = rules.token_request(server(), client, grant, assertion="a.b.c")
    assert headers == []
    assert form == {
        **grant,
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        "client_assertion": "a.b.c",
    }
    with pytest.raises(LocalProtocolError, match="assertion"):
        rules.token_request(server(), client, grant)


def test_client_credentials_grant():
    assert rules.client_credentials_grant(resource=ENDPOINT, scopes=("a", "b")) == {
        "grant_type": "client_credentials",
        "resource": ENDPOINT,
        "scope": "a b",
    }
    assert "scope" not in rules.client_credentials_grant(resource=ENDPOINT, scopes=None)


def test_token_response():
    tokens = rules.read_token_response(
        200,
        {
            "access_token": "at-1",
            "token_type": "bearer",
            "expires_in": 60,
            "refresh_token": "rt",
            "scope": "a b",
        },
        now=1000.0,
    )
    assert tokens == Tokens(
        access_token="at-1", expires_at=1060.0, refresh_token="rt", scopes=("a", "b")
    )
    assert "at-1" not in repr(tokens) and "rt" not in repr(tokens)
    assert tokens.header() == ("Authorization", "Bearer at-1")
    assert tokens.usable(1000.0) and not tokens.usable(1060.0 - rules.EXPIRY_SKEW)
    plain = rules.read_token_response(200, {"access_token": "x", "token_type": "Bearer"}, now=0)
    assert plain.expires_at is None and plain.usable(1e12) and plain.scopes is None
    kept = rules.read_token_response(
        200, {"access_token": "x2", "token_type": "Bearer"}, now=0, previous=tokens
    )
    assert kept.refresh_token == "rt"


@pytest.mark.parametrize(
    ("status", "raw", "match"),
    [
        (400, {"error": "invalid_grant", "error_description": "used"}, "invalid_grant.*: used"),
        (400, {"error": "invalid_client"}, r"invalid_client\)$"),
        (200, {"error": "x"}, "refused"),
        (200, [], "not an object"),
        (200, {"token_type": "Bearer"}, "access_token"),
        (200, {"access_token": "a b", "token_type": "Bearer"}, "access_token"),
        (200, {"access_token": "a", "token_type": "DPoP"}, "token_type"),
        (200, {"access_token": "a"}, "token_type"),
        (200, {"access_token": "a", "token_type": "Bearer", "expires_in": -1}, "expires_in"),
        (200, {"access_token": "a", "token_type": "Bearer", "expires_in": True}, "expires_in"),
        (200, {"access_token": "a", "token_type": "Bearer", "expires_in": "60"}, "expires_in"),
        (200, {"access_token": "a", "token_type": "Bearer", "refresh_token": ""}, "refresh_token"),
        (200, {"access_token": "a", "token_type": "Bearer", "scope": ["a"]}, "scope"),
    ],
)
def test_bad_token_response(status, raw, match):
    with pytest.raises(AuthorizationRefused, match=match):
        rules.read_token_response(status, raw, now=0)


def test_secret_token_values_never_in_the_errors():
    with pytest.raises(AuthorizationRefused) as caught:
        rules.read_token_response(
            200, {"access_token": "sekrit token", "token_type": "Bearer"}, now=0
        )
    assert "sekrit" not in str(caught.value)
