"""DPoP-bound tokens at the endpoint (``ResourceAuth(dpop=Dpop())``, RFC 9449 section 7),
served by the project's host on 127.0.0.1, both loops, real JWTs (``cnf.jkt``) and
real proofs signed here with PyJWT: a good proof is a 200 whose identity is the
token's; every bad proof, a DPoP token without one and a bound token sent as Bearer is
a 401 with the DPoP challenge and the app never runs; the metadata says what is
accepted; the WebSocket upgrade's proof is for GET at the http URL; a bound token
introspected is bound the same way; tokens and proofs stay out of the logs."""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import jwt
import pytest
from authserver_kit import (
    INTROSPECTION_ID,
    INTROSPECTION_SECRET,
    ISSUER,
    RESOURCE,
    AuthServerApp,
    Issuer,
    hosting,
    mcp_headers,
    request,
)
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.auth import Dpop, IntrospectionVerifier, JwtVerifier, ResourceAuth
from mrtr_transports.server.http import HttpServer

import mrtr_core as m
from mrtr_core.auth import BearerChallenge
from mrtr_core.auth._dpop import access_token_hash
from mrtr_core.auth._dpop_proof import jwk_thumbprint

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
METADATA_URL = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"


class Key:
    """A client's DPoP key pair and the proofs it signs."""

    def __init__(self, kind: str = "ec") -> None:
        if kind == "ec":
            self.private: Any = ec.generate_private_key(ec.SECP256R1())
            self.alg = "ES256"
            self.jwk = jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        elif kind == "rsa":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.alg = "PS256"
            self.jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            self.private = ed25519.Ed25519PrivateKey.generate()
            self.alg = "EdDSA"
            self.jwk = jwt.algorithms.OKPAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.thumbprint = jwk_thumbprint(self.jwk)

    def proof(
        self,
        token: str | None,
        *,
        htm: str = "POST",
        htu: str = RESOURCE,
        iat_in: float = 0,
        jti: str | None = None,
        header: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        body: dict[str, Any] = {
            "htm": htm,
            "htu": htu,
            "iat": int(time.time() + iat_in),
            "jti": secrets.token_urlsafe(16) if jti is None else jti,
            **({} if token is None else {"ath": access_token_hash(token)}),
            **claims,
        }
        fields = {"typ": "dpop+jwt", "jwk": self.jwk, **(header or {})}
        return jwt.encode(body, self.private, algorithm=self.alg, headers=fields)


def make_app() -> McpApp:
    app = McpApp("dpop-test", "1.0")

    @app.tool
    def whoami(ctx: Context) -> str:
        """Who the token says is calling."""
        Calls.count += 1
        assert ctx.identity is not None
        return ctx.identity.subject

    @app.tool(scopes=["admin"])
    def purge(ctx: Context) -> str:
        """Needs the admin scope."""
        Calls.count += 1
        return "purged"

    return app


class Calls:
    count = 0


def call(name: str = "whoami") -> dict[str, Any]:
    params = {
        "name": name,
        "arguments": {},
        "_meta": {
            m.wire.META_PROTOCOL_VERSION: VERSION,
            m.wire.META_CLIENT_CAPABILITIES: {},
        },
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


async def post(
    port: int,
    token: str | None,
    proofs: tuple[str, ...] = (),
    *,
    scheme: str = "DPoP",
    message: dict[str, Any] | None = None,
) -> Any:
    message = message or call()
    headers = [h for h in mcp_headers(message, None)]
    if token is not None:
        headers.append(("authorization", f"{scheme} {token}"))
    headers += [("dpop", proof) for proof in proofs]
    return await request(port, "POST", "/mcp", headers=headers, body=json.dumps(message).encode())


def dpop_challenge(reply: Any) -> BearerChallenge:
    challenge = BearerChallenge.from_headers(reply.header("www-authenticate") or "", scheme="DPoP")
    assert challenge is not None
    return challenge


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture(scope="module")
def key() -> Key:
    return Key()


@asynccontextmanager
async def serve(auth: ResourceAuth) -> AsyncIterator[int]:
    server = HttpServer(make_app(), auth=auth, keepalive_interval=0.05)
    async with anyio.create_task_group() as tasks:
        _, port = await tasks.start(server.serve, "127.0.0.1", 0)
        try:
            yield port
        finally:
            await server.aclose(grace=0.2)


def resource_auth(as_port: int, dpop: Dpop | None, **options: Any) -> ResourceAuth:
    verifier = JwtVerifier(
        issuer=ISSUER, audience=RESOURCE, jwks=f"http://127.0.0.1:{as_port}/jwks"
    )
    return ResourceAuth(
        verifier, resource=RESOURCE, authorization_servers=[ISSUER], dpop=dpop, **options
    )


@pytest.fixture
async def as_port(issuer: Issuer) -> AsyncIterator[int]:
    async with hosting(AuthServerApp(issuer)) as port:
        yield port


@pytest.fixture
async def port(as_port: int) -> AsyncIterator[int]:
    async with serve(resource_auth(as_port, Dpop())) as port:
        yield port


async def test_a_good_proof_by_the_tokens_key_is_accepted(
    issuer: Issuer, key: Key, port: int
) -> None:
    token = issuer.token("alice", cnf={"jkt": key.thumbprint})
    reply = await post(port, token, (key.proof(token),))
    assert reply.status == 200, reply.body
    assert reply.json()["result"]["content"][0]["text"] == "alice"
    # The scheme is case-insensitive; each of the asymmetric key types signs.
    for kind in ("rsa", "okp"):
        other = Key(kind)
        token = issuer.token("bob", cnf={"jkt": other.thumbprint})
        reply = await post(port, token, (other.proof(token),), scheme="dpop")
        assert reply.status == 200, reply.body
    # The URL as the request reached us names it too (its Host, which the policy checked).
    token = issuer.token("alice", cnf={"jkt": key.thumbprint})
    here = key.proof(token, htu=f"http://127.0.0.1:{port}/mcp?ignored=1")
    assert (await post(port, token, (here,))).status == 200
    # Bearer tokens stay accepted beside DPoP ones by default.
    bearer = await post(port, issuer.token("carol"), scheme="Bearer")
    assert bearer.status == 200


def bad_proofs() -> dict[str, Callable[[Key, str], tuple[str, ...]]]:
    other = Key()
    return {
        "wrong htm": lambda k, t: (k.proof(t, htm="GET"),),
        "wrong htu": lambda k, t: (k.proof(t, htu="https://mcp.example.test/other"),),
        "another server's htu": lambda k, t: (k.proof(t, htu="https://evil.example.test/mcp"),),
        "stale iat": lambda k, t: (k.proof(t, iat_in=-120),),
        "future iat": lambda k, t: (k.proof(t, iat_in=120),),
        "wrong ath": lambda k, t: (k.proof(t, ath=access_token_hash("another")),),
        "no jti": lambda k, t: (k.proof(t, jti=""),),
        "another key than cnf.jkt": lambda k, t: (other.proof(t),),
        "another key's jwk in the header": lambda k, t: (k.proof(t, header={"jwk": other.jwk}),),
        "alg none": lambda k, t: (
            jwt.encode(
                {
                    "htm": "POST",
                    "htu": RESOURCE,
                    "iat": int(time.time()),
                    "jti": "j",
                    "ath": access_token_hash(t),
                },
                None,
                algorithm="none",
                headers={"typ": "dpop+jwt", "jwk": k.jwk},
            ),
        ),
        "HMAC": lambda k, t: (
            jwt.encode(
                {
                    "htm": "POST",
                    "htu": RESOURCE,
                    "iat": int(time.time()),
                    "jti": "j",
                    "ath": access_token_hash(t),
                },
                "a-shared-secret-of-32-bytes-or-more!",
                algorithm="HS256",
                headers={"typ": "dpop+jwt", "jwk": k.jwk},
            ),
        ),
        "a private key in the jwk": lambda k, t: (
            k.proof(
                t,
                header={"jwk": jwt.algorithms.ECAlgorithm.to_jwk(k.private, as_dict=True)},
            ),
        ),
        "typ JWT": lambda k, t: (k.proof(t, header={"typ": "JWT"}),),
        "a tampered signature": lambda k, t: (k.proof(t)[:-6] + "AAAAAA",),
        "not a JWT": lambda k, t: ("not-a-proof",),
        "no proof": lambda k, t: (),
        "two proofs": lambda k, t: (k.proof(t), k.proof(t)),
    }


BAD_PROOFS = bad_proofs()
#: What each refusal says (the rule it broke, never the proof).
REASONS = {
    "HMAC": "alg is not one this server accepts",
    "a private key in the jwk": "private members",
    "a tampered signature": "signature does not verify",
    "alg none": "alg is not one this server accepts",
    "another key than cnf.jkt": "signed by another key than the token's",
    "another key's jwk in the header": "signature does not verify",
    "another server's htu": "htu",
    "future iat": "in the future (iat)",
    "no jti": "jti",
    "no proof": "carries one DPoP proof",
    "not a JWT": "not a well-formed JWT",
    "stale iat": "too old (iat)",
    "two proofs": "carries one DPoP proof",
    "typ JWT": "typ",
    "wrong ath": "ath",
    "wrong htm": "htm",
    "wrong htu": "htu",
}


@pytest.mark.parametrize("case", sorted(BAD_PROOFS))
async def test_a_bad_proof_is_401_invalid_dpop_proof_and_no_access(
    case: str, issuer: Issuer, key: Key, port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    Calls.count = 0
    token = issuer.token("alice", cnf={"jkt": key.thumbprint})
    proofs = BAD_PROOFS[case](key, token)
    reply = await post(port, token, proofs)
    assert reply.status == 401, reply.body
    challenge = dpop_challenge(reply)
    assert challenge.error == "invalid_dpop_proof"
    assert challenge.resource_metadata == METADATA_URL
    assert challenge.extra["algs"] == "ES256 RS256 PS256 EdDSA"
    assert reply.json()["error"]["code"] == m.ErrorCode.INVALID_REQUEST
    assert REASONS[case] in reply.json()["error"]["message"]
    assert Calls.count == 0
    for secret in (token, *proofs):
        assert secret not in reply.body.decode() and secret not in caplog.text
        assert secret not in (reply.header("www-authenticate") or "")


async def test_a_replayed_proof_is_refused(issuer: Issuer, key: Key, port: int) -> None:
    token = issuer.token("alice", cnf={"jkt": key.thumbprint})
    proof = key.proof(token)
    assert (await post(port, token, (proof,))).status == 200
    again = await post(port, token, (proof,))
    assert again.status == 401
    assert dpop_challenge(again).error_description == "the DPoP proof was used before (jti)"
    # The same jti by another key is another proof.
    other = Key()
    other_token = issuer.token("bob", cnf={"jkt": other.thumbprint})
    jti = json.loads(
        jwt.api_jws.decode_complete(proof, options={"verify_signature": False})["payload"]
    )["jti"]
    assert (await post(port, other_token, (other.proof(other_token, jti=jti),))).status == 200


async def test_a_bound_token_sent_as_bearer_is_refused(
    issuer: Issuer, key: Key, as_port: int, port: int
) -> None:
    """RFC 9449, 7.2: whoever copied a bound token has no key, and gets nothing,
    from a server that takes DPoP and from one that does not."""
    token = issuer.token("alice", cnf={"jkt": key.thumbprint})
    reply = await post(port, token, (key.proof(token),), scheme="Bearer")
    assert reply.status == 401
    bearer = BearerChallenge.from_headers(reply.header("www-authenticate") or "")
    assert bearer is not None and bearer.error == "invalid_token"
    assert bearer.error_description == "the token is bound to a key: send it as DPoP with a proof"
    assert dpop_challenge(reply).error is None  # (the other scheme offered, plainly)
    async with serve(resource_auth(as_port, None)) as bearer_only:
        refused = await post(bearer_only, token, scheme="Bearer")
        assert refused.status == 401
        assert "bound to a key" in refused.json()["error"]["message"]
        # And a DPoP request is refused there for its scheme.
        proofed = await post(bearer_only, token, (key.proof(token),))
        assert proofed.status == 401
        challenge = BearerChallenge.from_headers(proofed.header("www-authenticate") or "")
        assert challenge is not None and challenge.error == "invalid_request"
        assert (
            BearerChallenge.from_headers(proofed.header("www-authenticate") or "", scheme="DPoP")
            is None
        )


async def test_an_unbound_token_sent_as_dpop_and_a_binding_we_cannot_check(
    issuer: Issuer, key: Key, port: int
) -> None:
    token = issuer.token("alice")
    reply = await post(port, token, (key.proof(token),))
    assert reply.status == 401
    assert dpop_challenge(reply).error == "invalid_dpop_proof"
    assert "not bound" in reply.json()["error"]["message"]
    certificate_bound = issuer.token("alice", cnf={"x5t#S256": "a-certificate-thumbprint"})
    for scheme in ("Bearer", "DPoP"):
        proofs = (key.proof(certificate_bound),)
        refused = await post(port, certificate_bound, proofs, scheme=scheme)
        assert refused.status == 401
        assert "cannot check" in refused.json()["error"]["message"]
        # The token's fault, said in the scheme it came with.
        header = refused.header("www-authenticate") or ""
        said = BearerChallenge.from_headers(header, scheme=scheme)
        assert said is not None and said.error == "invalid_token"


async def test_a_binding_we_cannot_check_where_dpop_is_off(issuer: Issuer, as_port: int) -> None:
    certificate_bound = issuer.token("alice", cnf={"x5t#S256": "a-certificate-thumbprint"})
    async with serve(resource_auth(as_port, None)) as port:
        refused = await post(port, certificate_bound, scheme="Bearer")
        assert refused.status == 401
        challenge = BearerChallenge.from_headers(refused.header("www-authenticate") or "")
        assert challenge is not None and challenge.error == "invalid_token"
        assert "cannot check" in (challenge.error_description or "")


async def test_a_bad_token_with_a_good_proof_is_invalid_token_in_the_dpop_scheme(
    issuer: Issuer, key: Key, port: int
) -> None:
    token = issuer.token("alice", exp_in=-3600, cnf={"jkt": key.thumbprint})
    reply = await post(port, token, (key.proof(token),))
    assert reply.status == 401
    assert dpop_challenge(reply).error == "invalid_token"
    bearer = BearerChallenge.from_headers(reply.header("www-authenticate") or "")
    assert bearer is not None and bearer.error is None


async def test_no_token_is_answered_with_both_challenges_and_the_metadata_says_dpop(
    port: int,
) -> None:
    reply = await post(port, None)
    assert reply.status == 401
    bearer = BearerChallenge.from_headers(reply.header("www-authenticate") or "")
    assert bearer is not None and bearer.resource_metadata == METADATA_URL
    dpop = dpop_challenge(reply)
    assert (dpop.error, dpop.resource_metadata) == (None, METADATA_URL)
    document = json.loads(
        (await request(port, "GET", "/.well-known/oauth-protected-resource/mcp")).body
    )
    assert document["dpop_signing_alg_values_supported"] == ["ES256", "RS256", "PS256", "EdDSA"]
    assert "dpop_bound_access_tokens_required" not in document
    m.auth.ResourceMetadata.from_json(document, resource=RESOURCE)


async def test_a_tools_scope_is_403_in_the_dpop_scheme(issuer: Issuer, key: Key, port: int) -> None:
    Calls.count = 0
    token = issuer.token("alice", scope="mcp:tools", cnf={"jkt": key.thumbprint})
    reply = await post(port, token, (key.proof(token),), message=call("purge"))
    assert reply.status == 403
    challenge = dpop_challenge(reply)
    assert (challenge.error, challenge.scope) == ("insufficient_scope", ("admin",))
    assert challenge.resource_metadata == METADATA_URL
    assert Calls.count == 0


async def test_required_takes_dpop_only(issuer: Issuer, key: Key, as_port: int) -> None:
    auth = resource_auth(as_port, Dpop(required=True, algorithms=["ES256"]), scopes=["mcp:tools"])
    async with serve(auth) as port:
        refused = await post(port, issuer.token("carol"), scheme="Bearer")
        assert refused.status == 401
        header = refused.header("www-authenticate") or ""
        assert BearerChallenge.from_headers(header) is None  # (DPoP alone is offered)
        challenge = dpop_challenge(refused)
        assert (challenge.error, challenge.extra["algs"]) == ("invalid_request", "ES256")
        assert challenge.scope == ("mcp:tools",)
        token = issuer.token("alice", cnf={"jkt": key.thumbprint})
        assert (await post(port, token, (key.proof(token),))).status == 200
        # An algorithm this server does not take.
        rsa_key = Key("rsa")
        rsa_token = issuer.token("alice", cnf={"jkt": rsa_key.thumbprint})
        assert (await post(port, rsa_token, (rsa_key.proof(rsa_token),))).status == 401
        path = "/.well-known/oauth-protected-resource/mcp"
        document = json.loads((await request(port, "GET", path)).body)
        assert document["dpop_signing_alg_values_supported"] == ["ES256"]
        assert document["dpop_bound_access_tokens_required"] is True


UPGRADE = [
    ("connection", "Upgrade"),
    ("upgrade", "websocket"),
    ("sec-websocket-version", "13"),
    ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ("sec-websocket-protocol", "mcp"),
]


async def test_the_websocket_upgrade_takes_a_proof_for_get_at_the_http_url(
    issuer: Issuer, key: Key, port: int
) -> None:
    token = issuer.token("alice", cnf={"jkt": key.thumbprint})

    async def upgrade(proof: str) -> int:
        headers = [*UPGRADE, ("authorization", f"DPoP {token}"), ("dpop", proof)]
        return (await request(port, "GET", "/mcp", headers=headers)).status

    assert await upgrade(key.proof(token, htm="GET", htu=f"http://127.0.0.1:{port}/mcp")) == 101
    assert await upgrade(key.proof(token, htm="GET")) == 101  # (the public URL)
    assert await upgrade(key.proof(token, htm="POST")) == 401
    assert await upgrade(key.proof(token, htm="GET", htu=f"ws://127.0.0.1:{port}/mcp")) == 401
    assert await upgrade(Key().proof(token, htm="GET")) == 401


async def test_an_introspected_token_is_bound_by_its_answer(issuer: Issuer, key: Key) -> None:
    as_app = AuthServerApp(issuer)
    async with hosting(as_app) as as_port:
        verifier = IntrospectionVerifier(
            endpoint=f"http://127.0.0.1:{as_port}/introspect",
            client_id=INTROSPECTION_ID,
            client_secret=INTROSPECTION_SECRET,
            issuer=ISSUER,
            audience=RESOURCE,
        )
        auth = ResourceAuth(
            verifier, resource=RESOURCE, authorization_servers=[ISSUER], dpop=Dpop()
        )
        token = "opaque-" + secrets.token_urlsafe(16)
        as_app.introspected[token] = {
            "active": True,
            "sub": "alice",
            "iss": ISSUER,
            "aud": RESOURCE,
            "exp": int(time.time()) + 600,
            "cnf": {"jkt": key.thumbprint},
        }
        async with serve(auth) as port:
            assert (await post(port, token, (key.proof(token),))).status == 200
            assert (await post(port, token, scheme="Bearer")).status == 401
            assert (await post(port, token, (Key().proof(token),))).status == 401


async def test_a_server_that_demands_nonces(issuer: Issuer, key: Key, as_port: int) -> None:
    """RFC 9449, section 9: a proof without our nonce is 401 ``use_dpop_nonce`` with the
    nonce to use in ``DPoP-Nonce``; one with it is accepted; a made-up nonce, or one of
    a period gone by, is asked again."""
    dpop = Dpop(nonces=True, max_age=30)
    async with serve(resource_auth(as_port, dpop)) as port:
        token = issuer.token("alice", cnf={"jkt": key.thumbprint})
        asked = await post(port, token, (key.proof(token),))
        assert asked.status == 401
        assert dpop_challenge(asked).error == "use_dpop_nonce"
        nonce = asked.header("dpop-nonce")
        assert nonce is not None and nonce == dpop.nonce()
        assert (await post(port, token, (key.proof(token, nonce=nonce),))).status == 200
        stale = dpop.nonce(time.time() - 2 * dpop.max_age)
        for wrong in ("made-up", stale):
            refused = await post(port, token, (key.proof(token, nonce=wrong),))
            assert refused.status == 401
            assert dpop_challenge(refused).error == "use_dpop_nonce"
            assert refused.header("dpop-nonce") == nonce
        # The previous period's nonce is still good (a client just given one).
        previous = dpop.nonce(time.time() - dpop.max_age)
        assert (await post(port, token, (key.proof(token, nonce=previous),))).status == 200
        # A bad proof is refused for what it is, nonce or not.
        wrong_key = await post(port, token, (Key().proof(token, nonce=nonce),))
        assert dpop_challenge(wrong_key).error == "invalid_dpop_proof"


def test_workers_sharing_a_secret_accept_each_others_nonces() -> None:
    secret = b"a secret every worker is given"
    one, two = Dpop(nonces=True, nonce_secret=secret), Dpop(nonces=True, nonce_secret=secret)
    assert one.nonce(1_000_000.0) == two.nonce(1_000_000.0)
    assert Dpop(nonces=True).nonce(1_000_000.0) != Dpop(nonces=True).nonce(1_000_000.0)
    assert one.nonce(1_000_000.0) != one.nonce(1_000_000.0 + one.max_age)
    with pytest.raises(ValueError):
        Dpop(nonces=True, nonce_secret=b"short")
    assert "secret" not in repr(one) and repr(secret) not in repr(one)
