"""DPoP (RFC 9449) in the OAuth provider, against a scripted authorization server on
127.0.0.1 (``test_oauth_provider``'s) whose token endpoint checks each proof with
PyJWT against the key the proof names: the token request proves the key, the token
comes back DPoP-bound, each request to the resource gets a fresh proof with ``ath``,
and a server's ``use_dpop_nonce`` (token endpoint or resource) is honoured once per
nonce.  The suite's ``auth/dpop`` and ``auth/dpop-nonce`` run the same against its
own servers (``test_conformance_client_auth.py``)."""

from __future__ import annotations

import json
from typing import Any

import jwt
import pytest
from mrtr_transports.client.oauth.authorized import Challenged, send_authorized
from test_oauth_provider import (
    Reply,
    Seen,
    Server,
    challenge,
    json_reply,
    oauth_server,
    provider,
    serving,
)

from mrtr_core.auth import BearerChallenge
from mrtr_core.auth._client import MAX_AUTHORIZATIONS_PER_REQUEST
from mrtr_core.auth._dpop import access_token_hash

pytestmark = pytest.mark.anyio


def verify_proof(proof: str, method: str, url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a proof whose signature checks with the key it names."""
    header = jwt.get_unverified_header(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert "d" not in header["jwk"]  # the public key only
    key = jwt.PyJWK(header["jwk"], algorithm="ES256")
    claims = jwt.decode(proof, key=key.key, algorithms=["ES256"])
    assert claims["htm"] == method and claims["htu"] == url
    return header, claims


def dpop_server(*, nonce: str | None = None, offered: list[str] | None = None) -> Server:
    """``oauth_server`` whose token endpoint takes DPoP (``dpop_signing_alg_values_supported``
    ``offered``), wants ``nonce`` in the proof when given, and binds its tokens."""
    server = oauth_server()
    metadata = server.routes["/.well-known/oauth-authorization-server"]
    issued = iter(range(1, 100))

    async def as_metadata(seen: Seen) -> Reply:
        status, headers, body = await metadata(seen)
        document = json.loads(body)
        document["dpop_signing_alg_values_supported"] = offered or ["ES256"]
        return status, headers, json.dumps(document).encode()

    async def token(seen: Seen) -> Reply:
        proof = seen.headers.get("dpop")
        if proof is None:
            return json_reply({"access_token": "plain", "token_type": "Bearer"})
        _, claims = verify_proof(proof, "POST", f"{server.base}/token")
        if nonce is not None and claims.get("nonce") != nonce:
            status, headers, body = json_reply({"error": "use_dpop_nonce"}, 400)
            return status, [*headers, ("DPoP-Nonce", nonce)], body
        n = next(issued)
        return json_reply(
            {
                "access_token": f"bound-{n}",
                "token_type": "DPoP",
                "expires_in": 3600,
                "refresh_token": f"refresh-{n}",
            }
        )

    server.routes["/.well-known/oauth-authorization-server"] = as_metadata
    server.routes["/token"] = token
    return server


def proofs(server: Server) -> list[str]:
    return [s.headers["dpop"] for s in server.seen if s.path == "/token" and "dpop" in s.headers]


async def test_the_token_is_bound_and_each_request_gets_a_fresh_proof() -> None:
    async with serving(dpop_server()) as server:
        auth = provider(server, dpop=True)
        assert await auth.challenged(401, challenge(server), None)
        assert len(proofs(server)) == 1
        sent = await auth.authorization()
        assert sent == ("Authorization", "DPoP bound-1")
        resource = f"{server.base}/mcp"
        first, second = (auth.proof_headers("POST", resource, sent) for _ in range(2))
        (name, proof), (_, again) = first[0], second[0]
        assert name == "DPoP"
        header, claims = verify_proof(proof, "POST", resource)
        _, claims_again = verify_proof(again, "POST", resource)
        assert claims["ath"] == access_token_hash("bound-1")
        assert claims["jti"] != claims_again["jti"]  # fresh each time
        token_header = jwt.get_unverified_header(proofs(server)[0])
        assert header["jwk"] == token_header["jwk"]  # one key: the token's binding
        assert "nonce" not in claims


async def test_the_token_endpoint_nonce_is_sent_again_once() -> None:
    async with serving(dpop_server(nonce="as-nonce-1")) as server:
        auth = provider(server, dpop=True)
        assert await auth.challenged(401, challenge(server), None)
        sent_proofs = proofs(server)
        assert len(sent_proofs) == 2  # refused for its nonce, then with it
        assert "nonce" not in jwt.decode(sent_proofs[0], options={"verify_signature": False})
        second = jwt.decode(sent_proofs[1], options={"verify_signature": False})
        assert second["nonce"] == "as-nonce-1"
        assert await auth.authorization() == ("Authorization", "DPoP bound-1")


async def test_a_resource_nonce_is_honoured_once_per_nonce() -> None:
    async with serving(dpop_server()) as server:
        auth = provider(server, dpop=True)
        await auth.challenged(401, challenge(server), None)
        sent = await auth.authorization()
        assert sent is not None
        asked = [BearerChallenge(error="use_dpop_nonce").to_header().replace("Bearer", "DPoP")]
        count = len(server.seen)
        assert await auth.challenged(401, asked, sent, dpop_nonce="rs-nonce-1")
        assert len(server.seen) == count  # the same token: no flow ran
        ((_, proof),) = auth.proof_headers("POST", f"{server.base}/mcp", sent)
        assert verify_proof(proof, "POST", f"{server.base}/mcp")[1]["nonce"] == "rs-nonce-1"
        # The same nonce refused again is not a nonce problem: the token is refreshed.
        assert await auth.challenged(401, asked, sent, dpop_nonce="rs-nonce-1")
        assert await auth.authorization() == ("Authorization", "DPoP bound-2")
        refresh = [s for s in server.seen if s.path == "/token"][-1]
        assert refresh.form()["grant_type"] == "refresh_token" and "dpop" in refresh.headers


async def test_no_dpop_where_the_server_offers_none_we_sign() -> None:
    async with serving(dpop_server(offered=["RS512"])) as server:
        auth = provider(server, dpop=True)
        await auth.challenged(401, challenge(server), None)
        assert proofs(server) == []
        sent = await auth.authorization()
        assert sent == ("Authorization", "Bearer plain")
        assert auth.proof_headers("POST", f"{server.base}/mcp", sent) == []


async def test_without_dpop_no_proof_is_sent() -> None:
    async with serving(dpop_server()) as server:
        auth = provider(server)  # (dpop=False: the default)
        await auth.challenged(401, challenge(server), None)
        assert proofs(server) == []
        assert await auth.authorization() == ("Authorization", "Bearer plain")


async def test_a_resource_that_keeps_asking_for_new_nonces_is_bounded() -> None:
    """``send_authorized`` (the links' one rule) with a resource whose every answer is
    401 ``use_dpop_nonce`` with a new nonce: each honoured, until the bound."""
    async with serving(dpop_server()) as server:
        auth = provider(server, dpop=True)
        await auth.challenged(401, challenge(server), None)
        asked = [BearerChallenge(error="use_dpop_nonce").to_header().replace("Bearer", "DPoP")]
        nonces: list[str | None] = []
        resource = f"{server.base}/mcp"

        async def attempt(headers: list[tuple[str, str]]) -> None:
            proof = dict(headers)["DPoP"]
            nonces.append(verify_proof(proof, "POST", resource)[1].get("nonce"))
            raise Challenged(401, asked, dpop_nonce=f"nonce-{len(nonces)}")

        with pytest.raises(Challenged):
            await send_authorized(auth, attempt, method="POST", url=resource)
        assert nonces == [None, "nonce-1", "nonce-2", "nonce-3"]
        assert nonces[1:] == [f"nonce-{n}" for n in range(1, MAX_AUTHORIZATIONS_PER_REQUEST + 1)]
        assert auth.authorizations == 1  # the same token throughout


async def test_the_nonce_retry_signs_a_new_client_assertion() -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    async with serving(dpop_server(nonce="as-nonce-1")) as server:
        auth = provider(server, dpop=True, client_id="signed-client", private_key_pem=pem)
        await auth.challenged(401, challenge(server), None)
        forms = [s.form() for s in server.seen if s.path == "/token"]
        assert len(forms) == 2
        jtis = {
            jwt.decode(f["client_assertion"], options={"verify_signature": False})["jti"]
            for f in forms
        }
        assert len(jtis) == 2  # (an authorization server may refuse a jti seen before)
