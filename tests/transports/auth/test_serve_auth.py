"""``mrtr serve --http --auth-issuer --auth-jwks --auth-audience`` as a real subprocess
(the key set served over HTTP on 127.0.0.1 by this process): 401 without a token,
the subject with one, 403 for a tool's scope; the flags' rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from authserver_kit import ISSUER, RESOURCE, AuthServerApp, Issuer, hosting, post
from support.cli_run import mrtr

from mrtr_core.auth import BearerChallenge

HERE = Path(__file__).resolve().parent


def call(name: str) -> dict[str, object]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}, "_meta": meta},
    }


async def test_serve_requires_the_issuer_s_tokens() -> None:
    issuer = Issuer()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    async with hosting(AuthServerApp(issuer)) as as_port:
        command = [
            sys.executable,
            "-m",
            "mrtr_transports.cli.main",
            "serve",
            "--http",
            "127.0.0.1:0",
            "--app",
            "authserver_app:app",
            "--auth-issuer",
            ISSUER,
            "--auth-jwks",
            f"http://127.0.0.1:{as_port}/jwks",
            "--auth-audience",
            RESOURCE,
        ]
        async with await anyio.open_process(command, env=env, stderr=subprocess.PIPE) as process:
            try:
                assert process.stderr is not None
                seen = b""
                with anyio.fail_after(30):
                    while b"listening on http://" not in seen or not seen.endswith(b"\n"):
                        seen += await process.stderr.receive()
                line = seen.decode().split("listening on http://", 1)[1].split()[0]
                port = int(line.split("/")[0].rsplit(":", 1)[1])
                refused = await post(port, call("whoami"), None)
                assert refused.status == 401
                challenge = BearerChallenge.from_headers(refused.header("www-authenticate") or "")
                assert challenge is not None
                assert challenge.resource_metadata == (
                    "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
                )
                token = issuer.token("alice", scope="mcp:tools")
                reply = await post(port, call("whoami"), token)
                assert reply.status == 200, reply.body
                assert reply.json()["result"]["content"][0]["text"] == "alice"
                scoped = await post(port, call("purge"), token)
                assert scoped.status == 403
            finally:
                process.terminate()
                await process.wait()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--http", "127.0.0.1:0", "--auth-issuer", ISSUER], "the audience"),
        (["--http", "127.0.0.1:0", "--auth-jwks", "https://as/jwks"], "need --auth-issuer"),
        (["--stdio", "--auth-issuer", ISSUER], "only apply to --http"),
        (
            ["--http", "127.0.0.1:0", "--auth-issuer", "as.example", "--auth-audience", RESOURCE],
            "absolute http(s) URL",
        ),
    ],
)
async def test_the_auth_flags_rules(flags: list[str], says: str) -> None:
    ran = await mrtr("serve", *flags)
    assert ran.returncode != 0
    assert says in ran.stderr
