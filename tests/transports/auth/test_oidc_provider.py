"""The OpenID provider of the auth tests (``support.oidc_provider``) does what they rely on.

A real ``oidc-provider`` process on 127.0.0.1, driven with plain HTTP as an MCP client and
a person's browser would: its discovery documents carry what the MCP authorization spec
asks of an authorization server, the authorization-code flow with PKCE and a ``resource``
(RFC 8707) gives a JWT access token for that resource, signed with a key of its JWKS
(checked here with ``cryptography``), refresh rotates the public client's token, and each
refusal the client and server tests will lean on is a refusal.  Every test runs on trio and
asyncio (the helper is ``anyio``).
"""

from __future__ import annotations

import base64
import http.server
import json
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from support.oidc_provider import (
    CONFIDENTIAL_CLIENT_ID,
    CONFIDENTIAL_POST_CLIENT_ID,
    PUBLIC_CLIENT_ID,
    RESOURCE_SERVER_CLIENT_ID,
    BrowserError,
    HttpResponse,
    OidcProvider,
    Pkce,
    basic_auth,
    default_config,
    http_request,
    metadata_urls,
    oidc_provider,
)

pytestmark = pytest.mark.anyio

RESOURCE = "http://127.0.0.1:8123/mcp"
#: A loopback redirect on a port of the client's choosing (RFC 8252 section 7.3): the
#: registered URI has none; nothing listens there (the browser does not visit it).
REDIRECT_URI = "http://127.0.0.1:54321/callback"


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def verify_jws(token: str, jwks: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of ``token`` once its signature checks against the key of
    ``jwks`` its ``kid`` names (RS256 or ES256); raises ``InvalidSignature`` otherwise."""
    header_b64, claims_b64, signature_b64 = token.split(".")
    header = json.loads(_b64(header_b64))
    key = next(k for k in jwks["keys"] if k["kid"] == header["kid"])
    signed, signature = f"{header_b64}.{claims_b64}".encode(), _b64(signature_b64)

    def number(name: str) -> int:
        return int.from_bytes(_b64(key[name]), "big")

    if header["alg"] == "RS256":
        public = rsa.RSAPublicNumbers(number("e"), number("n")).public_key()
        public.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
    else:
        assert header["alg"] == "ES256", header
        point = ec.EllipticCurvePublicNumbers(number("x"), number("y"), ec.SECP256R1())
        der = encode_dss_signature(int.from_bytes(signature[:32]), int.from_bytes(signature[32:]))
        point.public_key().verify(der, signed, ec.ECDSA(hashes.SHA256()))
    return header, json.loads(_b64(claims_b64))


async def authorize(
    provider: OidcProvider,
    *,
    user: str = "ada",
    scope: str = "tools:read offline_access",
    resource: str | None = RESOURCE,
    client_id: str = PUBLIC_CLIENT_ID,
) -> tuple[str, Pkce]:
    """A code for ``user`` to a public client, and the PKCE pair it was asked with."""
    pkce, state = Pkce.new(), secrets.token_urlsafe(12)
    url = provider.authorization_url(
        client_id=client_id,
        redirect_uri=REDIRECT_URI,
        scope=scope,
        resource=resource,
        pkce=pkce,
        state=state,
    )
    response = await provider.browser().authorize(url, user=user)
    assert response.redirect_uri == REDIRECT_URI, response
    assert response.state == state and response.iss == provider.issuer, response
    assert response.code, response
    return response.code, pkce


async def redeem(
    provider: OidcProvider,
    code: str,
    verifier: str,
    *,
    resource: str | None = RESOURCE,
    client_id: str = PUBLIC_CLIENT_ID,
) -> HttpResponse:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": client_id,
        "code_verifier": verifier,
        **({"resource": resource} if resource else {}),
    }
    return await http_request("POST", provider.token_endpoint, form=form)


async def test_discovery_has_what_an_mcp_client_needs() -> None:
    async with oidc_provider() as provider:
        openid = provider.discovery
        assert openid["issuer"] == provider.issuer
        assert provider.issuer.startswith("http://127.0.0.1:")
        for endpoint in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
            assert openid[endpoint].startswith(provider.issuer + "/"), endpoint
        assert openid["code_challenge_methods_supported"] == ["S256"]
        assert openid["authorization_response_iss_parameter_supported"] is True
        assert openid["response_types_supported"] == ["code"]
        assert {"none", "client_secret_basic", "client_secret_post"} <= set(
            openid["token_endpoint_auth_methods_supported"]
        )
        assert {"authorization_code", "refresh_token", "client_credentials"} <= set(
            openid["grant_types_supported"]
        )
        assert {"offline_access", "tools:read", "tools:deploy"} <= set(openid["scopes_supported"])
        # RFC 8414's well-known URL serves the same document (the package serves both)
        rfc8414 = f"{provider.issuer}/.well-known/oauth-authorization-server"
        oauth = await http_request("GET", rfc8414)
        assert oauth.status == 200 and oauth.json() == openid


async def test_without_registration() -> None:
    async with oidc_provider(default_config(registration=False)) as provider:
        assert "registration_endpoint" not in provider.discovery
        refused = await http_request("POST", f"{provider.issuer}/reg", json_body={})
        assert refused.status == 404


async def test_authorization_code_with_pkce_gives_a_jwt_for_the_resource() -> None:
    async with oidc_provider() as provider:
        before = int(time.time())
        code, pkce = await authorize(provider, scope="tools:read tools:deploy offline_access")
        response = await redeem(provider, code, pkce.verifier)
        assert response.status == 200, response
        tokens = response.json()
        assert tokens["token_type"] == "Bearer"
        # the access token's scopes: those of its resource
        assert set(tokens["scope"].split()) == {"tools:read", "tools:deploy"}
        assert tokens["refresh_token"]
        header, claims = verify_jws(tokens["access_token"], await provider.jwks())
        assert header["alg"] == "RS256" and header["typ"] == "at+jwt"  # RFC 9068
        assert claims["iss"] == provider.issuer
        assert claims["aud"] == RESOURCE
        assert claims["sub"] == "ada"
        assert claims["client_id"] == PUBLIC_CLIENT_ID
        assert set(claims["scope"].split()) == {"tools:read", "tools:deploy"}
        assert before - 5 <= claims["iat"] <= claims["exp"] - 3600 + 5


async def test_refresh_rotates_the_public_clients_token() -> None:
    async with oidc_provider() as provider:
        code, pkce = await authorize(provider)
        first = (await redeem(provider, code, pkce.verifier)).json()
        refresh = {
            "grant_type": "refresh_token",
            "refresh_token": first["refresh_token"],
            "client_id": PUBLIC_CLIENT_ID,
            "resource": RESOURCE,
        }
        second = await http_request("POST", provider.token_endpoint, form=refresh)
        assert second.status == 200, second
        renewed = second.json()
        assert renewed["refresh_token"] != first["refresh_token"]
        _, claims = verify_jws(renewed["access_token"], await provider.jwks())
        assert claims["aud"] == RESOURCE and claims["scope"] == "tools:read"
        # a public client's refresh token is single-use (the spec's security considerations)
        again = await http_request("POST", provider.token_endpoint, form=refresh)
        assert again.status == 400 and again.json()["error"] == "invalid_grant"


async def test_no_refresh_token_when_the_provider_gives_none() -> None:
    async with oidc_provider(default_config(refresh_tokens="never")) as provider:
        code, pkce = await authorize(provider)
        tokens = (await redeem(provider, code, pkce.verifier)).json()
        assert tokens["access_token"] and "refresh_token" not in tokens


async def test_a_wrong_pkce_verifier_is_refused() -> None:
    async with oidc_provider() as provider:
        code, _ = await authorize(provider)
        refused = await redeem(provider, code, Pkce.new().verifier)
        assert refused.status == 400 and refused.json()["error"] == "invalid_grant"


async def test_two_users_get_different_subjects() -> None:
    async with oidc_provider() as provider:
        subjects = []
        for user in ("ada", "grace"):
            code, pkce = await authorize(provider, user=user)
            tokens = (await redeem(provider, code, pkce.verifier)).json()
            _, claims = verify_jws(tokens["access_token"], await provider.jwks())
            subjects.append(claims["sub"])
        assert subjects == ["ada", "grace"]


async def test_es256_and_short_ttls() -> None:
    config = default_config(signing_alg="ES256", access_token_ttl=2, refresh_token_ttl=3)
    async with oidc_provider(config) as provider:
        code, pkce = await authorize(provider)
        tokens = (await redeem(provider, code, pkce.verifier)).json()
        assert tokens["expires_in"] == 2
        header, claims = verify_jws(tokens["access_token"], await provider.jwks())
        assert header["alg"] == "ES256"
        assert claims["exp"] - claims["iat"] == 2
        secret = provider.client_secret(RESOURCE_SERVER_CLIENT_ID)
        refresh = await http_request(
            "POST",
            provider.discovery["introspection_endpoint"],
            form={"token": tokens["refresh_token"]},
            headers=basic_auth(RESOURCE_SERVER_CLIENT_ID, secret),
        )
        assert refresh.json()["exp"] - refresh.json()["iat"] == 3, refresh


@pytest.mark.parametrize("client_id", [CONFIDENTIAL_CLIENT_ID, CONFIDENTIAL_POST_CLIENT_ID])
async def test_client_credentials_for_a_confidential_client(client_id: str) -> None:
    async with oidc_provider() as provider:
        secret = provider.client_secret(client_id)
        form = {"grant_type": "client_credentials", "scope": "tools:deploy", "resource": RESOURCE}
        if client_id == CONFIDENTIAL_CLIENT_ID:
            headers = basic_auth(client_id, secret)
        else:
            form |= {"client_id": client_id, "client_secret": secret}
            headers = {}
        response = await http_request("POST", provider.token_endpoint, form=form, headers=headers)
        assert response.status == 200, response
        _, claims = verify_jws(response.json()["access_token"], await provider.jwks())
        assert claims["aud"] == RESOURCE and claims["scope"] == "tools:deploy"
        assert claims["sub"] == client_id and "refresh_token" not in response.json()
        # the same request with a wrong secret
        wrong = basic_auth(CONFIDENTIAL_CLIENT_ID, "not-the-secret")
        form = {k: v for k, v in form.items() if k not in ("client_id", "client_secret")}
        refused = await http_request("POST", provider.token_endpoint, form=form, headers=wrong)
        assert refused.status == 401 and refused.json()["error"] == "invalid_client"


async def test_dynamic_registration_then_a_flow_with_the_new_client() -> None:
    async with oidc_provider() as provider:
        redirect = "http://127.0.0.1:40123/callback"
        metadata = {
            "client_name": "an MCP client",
            "redirect_uris": [redirect],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        }
        registered = await http_request(
            "POST",
            provider.discovery["registration_endpoint"],
            json_body=metadata,
        )
        assert registered.status == 201, registered
        client_id = registered.json()["client_id"]
        pkce = Pkce.new()
        url = provider.authorization_url(
            client_id=client_id,
            redirect_uri=redirect,
            scope="tools:read",
            resource=RESOURCE,
            pkce=pkce,
            state="s",
        )
        response = await provider.browser().authorize(url, user="grace")
        assert response.redirect_uri == redirect and response.code, response


async def test_deny_unknown_user_and_unregistered_redirect() -> None:
    async with oidc_provider() as provider:
        pkce = Pkce.new()

        def url(redirect_uri: str = REDIRECT_URI, resource: str = RESOURCE) -> str:
            return provider.authorization_url(
                redirect_uri=redirect_uri,
                scope="tools:read",
                resource=resource,
                pkce=pkce,
                state="s",
            )

        denied = await provider.browser().authorize(url(), user="ada", deny=True)
        assert denied.error == "access_denied" and denied.iss == provider.issuer, denied
        assert denied.code is None
        with pytest.raises(BrowserError, match="401"):
            await provider.browser().authorize(url(), user="mallory", password="x")
        with pytest.raises(BrowserError, match="401"):
            await provider.browser().authorize(url(), user="ada", password="not-hers")
        # the provider never redirects to a URI the client did not register
        with pytest.raises(BrowserError, match="redirect_uri"):
            await provider.browser().authorize(url("http://evil.example/callback"), user="ada")
        # a resource it does not serve tokens for
        elsewhere = url(resource="http://other.example/mcp")
        other = await provider.browser().authorize(elsewhere, user="ada")
        assert other.error == "invalid_target" and other.iss == provider.issuer, other


async def test_an_issuer_with_a_path_and_its_metadata_locations() -> None:
    async with oidc_provider(default_config(issuer_path="/tenant1")) as provider:
        assert provider.issuer.endswith("/tenant1")
        origin = provider.issuer.removesuffix("/tenant1")
        for url in metadata_urls(provider.issuer):
            served = await http_request("GET", url)
            assert served.status == 200 and served.json()["issuer"] == provider.issuer, url
        assert provider.authorization_endpoint.startswith(provider.issuer + "/")
        # RFC 8414 inserts the path: the root and the appended forms are not its locations
        for url in (f"{origin}/.well-known/oauth-authorization-server", f"{origin}/auth"):
            assert (await http_request("GET", url)).status == 404, url
        code, pkce = await authorize(provider)
        tokens = (await redeem(provider, code, pkce.verifier)).json()
        _, claims = verify_jws(tokens["access_token"], await provider.jwks())
        assert claims["iss"] == provider.issuer and claims["aud"] == RESOURCE


async def test_metadata_served_at_fewer_locations() -> None:
    config = default_config(issuer_path="/tenant1", well_known=["openid"])
    async with oidc_provider(config) as provider:
        oauth, openid_inserted, openid_appended = metadata_urls(provider.issuer)
        assert (await http_request("GET", oauth)).status == 404
        assert (await http_request("GET", openid_inserted)).status == 404
        assert (await http_request("GET", openid_appended)).status == 200
        assert provider.discovery["issuer"] == provider.issuer


async def test_opaque_tokens_introspected_by_the_resource_server_until_they_expire() -> None:
    # 5 s: long enough for the first checks on a loaded machine, short enough to wait out
    config = default_config(token_format="opaque", access_token_ttl=5)
    async with oidc_provider(config) as provider:
        code, pkce = await authorize(provider, user="grace")
        token = (await redeem(provider, code, pkce.verifier)).json()["access_token"]
        assert token.count(".") == 0  # not a JWT
        endpoint = provider.discovery["introspection_endpoint"]
        secret = provider.client_secret(RESOURCE_SERVER_CLIENT_ID)
        credentials = basic_auth(RESOURCE_SERVER_CLIENT_ID, secret)

        async def introspect(value: str, headers: Mapping[str, str]) -> HttpResponse:
            return await http_request("POST", endpoint, form={"token": value}, headers=headers)

        answer = await introspect(token, credentials)
        assert answer.status == 200, answer
        claims = answer.json()
        assert claims["active"] is True and claims["sub"] == "grace"
        assert claims["aud"] == RESOURCE and claims["scope"] == "tools:read"
        assert claims["client_id"] == PUBLIC_CLIENT_ID and claims["iss"] == provider.issuer
        # a caller that does not authenticate, or not as a client it knows, learns nothing
        assert (await introspect(token, {})).json()["error"] == "invalid_request"
        stranger = basic_auth("someone", "something")
        assert (await introspect(token, stranger)).json()["error"] == "invalid_client"
        assert (await introspect("not-a-token", credentials)).json() == {"active": False}
        await anyio.sleep(claims["exp"] - time.time() + 1.1)
        assert (await introspect(token, credentials)).json() == {"active": False}


async def test_a_browser_keeps_its_session() -> None:
    async with oidc_provider() as provider:
        browser = provider.browser()
        pkce = Pkce.new()
        url = provider.authorization_url(
            redirect_uri=REDIRECT_URI, scope="tools:read", resource=RESOURCE, pkce=pkce, state="s"
        )
        first = await browser.authorize(url, user="ada")
        assert [path.rsplit("/", 1)[1] for path in browser.submitted] == ["login", "consent"]
        assert browser.signed_in_as == "ada"
        # signed in: no sign-in page; the package asks a native client's consent every time
        second = await browser.authorize(url, user="ada")
        assert [path.rsplit("/", 1)[1] for path in browser.submitted[2:]] == ["consent"]
        assert second.code and second.code != first.code
        with pytest.raises(BrowserError, match="signed in as ada"):
            await browser.authorize(url, user="grace")
        # a refused sign-in leaves a browser signed out
        stranger = provider.browser()
        with pytest.raises(BrowserError, match="401"):
            await stranger.authorize(url, user="ada", password="wrong")
        assert stranger.signed_in_as is None


async def test_step_up_to_a_scope_not_granted_before() -> None:
    async with oidc_provider() as provider:
        tokens = []
        for scope in ("tools:read", "tools:read tools:deploy"):
            code, pkce = await authorize(provider, scope=scope)
            access = (await redeem(provider, code, pkce.verifier)).json()["access_token"]
            _, claims = verify_jws(access, await provider.jwks())
            tokens.append(claims["scope"])
        assert tokens == ["tools:read", "tools:read tools:deploy"]
        # a scope the resource does not define is left out, not granted
        code, pkce = await authorize(provider, scope="tools:read tools:admin")
        tokens_ = (await redeem(provider, code, pkce.verifier)).json()
        assert tokens_["scope"] == "tools:read"


async def test_no_secret_in_the_providers_output_nor_its_command_line() -> None:
    async with oidc_provider() as provider:
        code, pkce = await authorize(provider)
        tokens = (await redeem(provider, code, pkce.verifier)).json()
        secret = provider.client_secret(CONFIDENTIAL_CLIENT_ID)
        form = {"grant_type": "client_credentials", "resource": RESOURCE}
        headers = basic_auth(CONFIDENTIAL_CLIENT_ID, secret)
        assert (await http_request("POST", provider.token_endpoint, form=form, headers=headers)).ok
        secrets_ = [tokens["access_token"], tokens["refresh_token"], code, secret, "ada-password"]
        written = provider.log() + provider.stdout()
        argv = Path(f"/proc/{provider.pid}/cmdline").read_bytes().decode()
        for value in secrets_:
            assert value not in written and value not in argv
    assert not Path(f"/proc/{provider.pid}").exists()  # stopped and reaped


@contextmanager
def serving_documents(documents: Mapping[str, Any], seen: list[str] | None = None) -> Iterator[str]:
    """A loopback HTTP server answering each path of ``documents`` with its JSON (each
    request's target appended to ``seen``); its origin."""

    class Documents(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if seen is not None:
                seen.append(self.path)
            body = json.dumps(documents[self.path]).encode() if self.path in documents else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Documents)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_a_client_id_metadata_document_as_the_client() -> None:
    client_id = "https://mcp-client.test/client.json"
    document = {
        "client_id": client_id,
        "client_name": "an MCP client",
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    liar = {**document, "client_id": "https://mcp-client.test/another.json"}
    with serving_documents({"/client.json": document, "/liar.json": liar}) as stand_in:
        config = default_config(client_metadata_documents={"https://mcp-client.test": stand_in})
        async with oidc_provider(config) as provider:
            assert provider.discovery["client_id_metadata_document_supported"] is True
            code, pkce = await authorize(provider, client_id=client_id)
            response = await redeem(provider, code, pkce.verifier, client_id=client_id)
            assert response.status == 200, response
            _, claims = verify_jws(response.json()["access_token"], await provider.jwks())
            assert claims["client_id"] == client_id and claims["aud"] == RESOURCE
            # a document that names another client_id than its URL is refused
            with pytest.raises(BrowserError, match="client"):
                await authorize(provider, client_id="https://mcp-client.test/liar.json")


async def test_a_token_asked_for_no_resource_is_for_no_resource() -> None:
    """What a resource server must refuse: the package answers a code asked without
    ``resource`` (RFC 8707) with an opaque token for its own userinfo, with no audience."""
    async with oidc_provider() as provider:
        code, pkce = await authorize(provider, resource=None)
        token = (await redeem(provider, code, pkce.verifier, resource=None)).json()["access_token"]
        assert token.count(".") == 0  # not a JWT: no resource server's key verifies it
        secret = provider.client_secret(RESOURCE_SERVER_CLIENT_ID)
        answer = await http_request(
            "POST",
            provider.discovery["introspection_endpoint"],
            form={"token": token},
            headers=basic_auth(RESOURCE_SERVER_CLIENT_ID, secret),
        )
        claims = answer.json()
        assert claims["active"] is True and claims["sub"] == "ada" and "aud" not in claims


async def test_a_revoked_refresh_token_refreshes_nothing() -> None:
    async with oidc_provider() as provider:
        code, pkce = await authorize(provider)
        refresh_token = (await redeem(provider, code, pkce.verifier)).json()["refresh_token"]
        revoked = await http_request(
            "POST",
            provider.discovery["revocation_endpoint"],
            form={"token": refresh_token, "client_id": PUBLIC_CLIENT_ID},
        )
        assert revoked.status == 200, revoked  # RFC 7009
        refresh = {
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": PUBLIC_CLIENT_ID,
        }
        refused = await http_request("POST", provider.token_endpoint, form=refresh)
        assert refused.status == 400 and refused.json()["error"] == "invalid_grant"


async def test_the_redirect_delivered_to_the_client_once_it_listens() -> None:
    seen: list[str] = []
    with serving_documents({}, seen) as client:
        redirect_uri = f"{client}/callback"  # a loopback port of the client's choosing
        async with oidc_provider() as provider:
            pkce = Pkce.new()
            url = provider.authorization_url(
                redirect_uri=redirect_uri,
                scope="tools:read",
                resource=RESOURCE,
                pkce=pkce,
                state="s",
            )
            browser = provider.browser()
            response = await browser.authorize(url, user="ada")
            assert seen == []  # authorize stops short of the client
            await browser.deliver(response)
            assert response.code and seen == [response.url.removeprefix(client)]
            assert f"code={response.code}" in seen[0]


async def test_a_provider_that_cannot_start_says_why() -> None:
    config = default_config(refresh_tokens="sometimes")
    with pytest.raises(AssertionError, match="refresh_tokens: sometimes"):
        async with oidc_provider(config):
            pass
