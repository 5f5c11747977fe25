"""What the resource-server tests share: an issuer that signs real JWTs with keys made
here (PyJWT, cryptography), a tiny ASGI app serving its JWKS and an introspection
endpoint (with bad variants: oversized, slow, down), the project's host serving an app
on 127.0.0.1 (anyio: both loops), and a raw HTTP/1.1 client (h11) to talk to it.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

import anyio
import h11
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mrtr_transports.host.http import AsgiHost

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ISSUER = "https://as.example.test"
#: The MCP endpoint's public URL (behind a proxy): the audience tokens name.
RESOURCE = "https://mcp.example.test/mcp"
INTROSPECTION_ID = "mcp-server"
INTROSPECTION_SECRET = "s3cret-of-the-rs"


class Issuer:
    """An authorization server's signing side: an RSA key (``kid`` ``rsa-1``) and an EC
    one (``ec-1``), and the JWTs it mints."""

    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.kids = {"rsa-1": self.rsa, "ec-1": self.ec}
        #: kid -> the ``alg`` its JWK names (none by default).
        self.pinned: dict[str, str] = {}

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key in self.kids.items():
            if isinstance(key, rsa.RSAPrivateKey):
                jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
            else:
                jwk = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
            pinned = {"alg": self.pinned[kid]} if kid in self.pinned else {}
            keys.append({**jwk, "kid": kid, "use": "sig", **pinned})
        return {"keys": keys}

    def rotate(self) -> str:
        """A new RSA key joins the set; its kid."""
        kid = f"rsa-{len(self.kids) + 1}"
        self.kids[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return kid

    def public_pem(self) -> bytes:
        return self.rsa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def token(
        self,
        sub: str = "alice",
        *,
        scope: str = "mcp:tools",
        aud: Any = RESOURCE,
        iss: str = ISSUER,
        exp_in: float = 600,
        nbf_in: float | None = None,
        kid: str = "rsa-1",
        alg: str | None = None,
        header_kid: str | None = None,
        **claims: Any,
    ) -> str:
        now = int(time.time())
        body: dict[str, Any] = {"iss": iss, "sub": sub, "aud": aud, "iat": now}
        body["exp"] = now + int(exp_in)
        body["scope"] = scope
        body["client_id"] = "test-client"
        if nbf_in is not None:
            body["nbf"] = now + int(nbf_in)
        body.update(claims)
        key = self.kids[kid]
        algorithm = alg or ("ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256")
        # (the key object itself: PyJWT would load a PEM again, slowly, per token)
        headers = {"kid": kid if header_kid is None else header_kid}
        return jwt.encode(body, key, algorithm=algorithm, headers=headers)


def unsigned_token(sub: str = "mallory") -> str:
    """``alg: none``: a header and claims, no signature."""
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": sub, "aud": RESOURCE, "exp": now + 600, "scope": "admin"}
    return jwt.encode(claims, None, algorithm="none", headers={"kid": "rsa-1"})


def hmac_with_public_key(issuer: Issuer) -> str:
    """HS256 "signed" with the RSA public key (PEM) as the secret: the classic confusion."""
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    now = int(time.time())
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode())
    claims = {"iss": ISSUER, "sub": "mallory", "aud": RESOURCE, "exp": now + 600}
    payload = b64(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = hmac.new(issuer.public_pem(), signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{b64(signature)}"


class AuthServerApp:
    """The authorization server's HTTP side for the tests (an ASGI app): ``/jwks``,
    ``/big`` (a JWKS past any bound), ``/slow`` (answers after ``slow_seconds``),
    ``/introspect`` (RFC 7662, Basic auth; ``active`` tokens in ``introspected``).
    ``down=True``: every route answers 503.  ``counts`` says what was asked."""

    def __init__(self, issuer: Issuer) -> None:
        self.issuer = issuer
        self.counts: Counter[str] = Counter()
        self.down = False
        self.slow_seconds = 30.0
        #: token -> its introspection answer.
        self.introspected: dict[str, dict[str, Any]] = {}
        #: The ``issuer`` its metadata names (``None``: its own address, as it should).
        self.metadata_issuer: str | None = None

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope["path"]
        self.counts[path] += 1
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if self.down:
            await _answer(send, 503, b'{"error":"down"}')
        elif path == "/jwks":
            await _answer(send, 200, json.dumps(self.issuer.jwks()).encode())
        elif path == "/big":
            keys = self.issuer.jwks()["keys"] * 2000
            await _answer(send, 200, json.dumps({"keys": keys}).encode())
        elif path == "/slow":
            await anyio.sleep(self.slow_seconds)
            await _answer(send, 200, json.dumps(self.issuer.jwks()).encode())
        elif path == "/.well-known/oauth-authorization-server":
            host, port = scope["server"]
            here = f"http://{host}:{port}"
            document = {"issuer": self.metadata_issuer or here, "jwks_uri": f"{here}/jwks"}
            await _answer(send, 200, json.dumps(document).encode())
        elif path == "/redirect":  # (a key set that moved)
            await _answer(send, 302, b"", [(b"location", b"/jwks")])
        elif path == "/loop":
            await _answer(send, 302, b"", [(b"location", b"/loop")])
        elif path == "/notjson":
            await _answer(send, 200, b"<html>maintenance</html>")
        elif path == "/symmetric":  # only a shared secret: never a public signing key
            await _answer(send, 200, b'{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}')
        elif path == "/introspect":
            await self._introspect(scope, body, send)
        else:
            await _answer(send, 404, b"{}")

    async def _introspect(self, scope: Message, body: bytes, send: Send) -> None:
        import base64

        headers = dict(scope["headers"])
        expected = base64.b64encode(f"{INTROSPECTION_ID}:{INTROSPECTION_SECRET}".encode())
        if headers.get(b"authorization") != b"Basic " + expected:
            await _answer(send, 401, b'{"error":"invalid_client"}')
            return
        token = parse_qs(body.decode()).get("token", [""])[0]
        answer = self.introspected.get(token, {"active": False})
        await _answer(send, 200, json.dumps(answer).encode())


async def _answer(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def hosting(app: Any) -> AsyncIterator[int]:
    """``app`` (ASGI) on the project's host at 127.0.0.1; its port."""
    host = AsgiHost(app)
    async with anyio.create_task_group() as tasks:
        _, port = await tasks.start(host.serve, "127.0.0.1", 0)
        try:
            yield port
        finally:
            await host.aclose(grace=0.2)


class Reply:
    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> str | None:
        found = [v.decode() for k, v in self.headers if k.decode().lower() == name]
        assert len(found) <= 1, found
        return found[0] if found else None

    def json(self) -> Any:
        if self.header("content-type") == "text/event-stream":
            data = [
                line[5:].strip()
                for line in self.body.decode().splitlines()
                if line.startswith("data:")
            ]
            return json.loads([d for d in data if d][-1])
        return json.loads(self.body)


async def request(
    port: int,
    method: str,
    path: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
) -> Reply:
    """One HTTP/1.1 exchange with 127.0.0.1:``port`` (h11 over an anyio socket)."""
    conn = h11.Connection(h11.CLIENT)
    fields = [("host", f"127.0.0.1:{port}"), *headers]
    if body or method == "POST":
        fields.append(("content-length", str(len(body))))
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        data = conn.send(h11.Request(method=method, target=path, headers=fields))
        data += conn.send(h11.Data(data=body)) if body else b""
        data += conn.send(h11.EndOfMessage())
        await stream.send(data)
        status, got_headers, chunks = 0, [], []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                try:
                    conn.receive_data(await stream.receive())
                except anyio.EndOfStream:
                    conn.receive_data(b"")
                continue
            if isinstance(event, h11.InformationalResponse) and event.status_code == 101:
                return Reply(101, list(event.headers), b"")  # (a WebSocket accepted)
            if event is h11.PAUSED:
                break
            if isinstance(event, h11.Response):
                status, got_headers = event.status_code, list(event.headers)
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                break
    return Reply(status, got_headers, b"".join(chunks))


def mcp_headers(message: dict[str, Any], token: str | None) -> list[tuple[str, str]]:
    import mrtr_core as m

    headers = [
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        *m.http.request_headers(message),
    ]
    if token is not None:
        headers.append(("authorization", f"Bearer {token}"))
    return headers


async def post(port: int, message: dict[str, Any], token: str | None) -> Reply:
    return await request(
        port, "POST", "/mcp", headers=mcp_headers(message, token), body=json.dumps(message).encode()
    )


def random_kid() -> str:
    return secrets.token_hex(8)
