"""``mrtr call --dpop`` keeps its DPoP key with the token it is bound to, end to end, every
part real: the OpenID provider (``oidc-provider`` on Node, its ``dpop`` feature on, binding
each token to the key of the token request's proof), ``mrtr serve --http --auth-dpop
required`` (it takes DPoP-bound tokens only, each request with a proof by the bound key)
and ``mrtr`` as subprocesses on 127.0.0.1; the test is the person's browser
(``test_call_oauth``'s).

The first ``mrtr call --dpop`` signs in and stores the bound token with its private key
(0600); the next process reuses both (no sign-in URL printed), an expired token is
refreshed with the stored key, ``mrtr auth list`` marks the token DPoP-bound and shows
no key; a token whose key is gone from the store makes the next call sign in again; ``mrtr
auth forget`` removes token and key.  The private key is in no output, trace or command
line.
"""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jwt
from support.oidc_provider import default_config, oidc_provider
from support.serve_subprocess import mrtr_serve
from test_call_oauth import Ran, _free_port, environment, mrtr, stored


@asynccontextmanager
async def serving_dpop(issuer: str, env: Mapping[str, str]) -> AsyncIterator[str]:
    """``mrtr serve --http`` of ``oauth_app`` taking DPoP-bound tokens of ``issuer`` only."""
    port = _free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    flags = ["--http", f"127.0.0.1:{port}", "--app", "oauth_app:app"]
    flags += ["--auth-issuer", issuer, "--auth-audience", resource, "--auth-dpop", "required"]
    async with mrtr_serve(flags, env=env) as url:
        yield url


def the_entry(home: Path) -> dict[str, Any]:
    [entry] = stored(home)["tokens"].values()
    assert isinstance(entry, dict)
    return entry


def bound_to(access_token: str) -> str:
    """The thumbprint the token's ``cnf`` binds it to."""
    claims = jwt.decode(access_token, options={"verify_signature": False})
    jkt: str = claims["cnf"]["jkt"]
    return jkt


async def test_a_later_mrtr_call_proves_with_the_stored_key(tmp_path: Path) -> None:
    home = tmp_path / "config"
    env = environment(home)
    token_file = home / "mrtr" / "tokens.json"
    async with (
        oidc_provider(default_config(dpop=True)) as provider,
        serving_dpop(provider.issuer, env) as url,
    ):
        issuer = provider.issuer
        browser = provider.browser()
        trace = tmp_path / "trace.ndjson"
        call = ["call", "--dpop", "--no-browser", "--login-timeout", "5", "--trace", str(trace)]
        call += [url, "whoami"]

        # 1. The first call signs in; the bound token is stored with its key, 0600.
        first = await mrtr(call, env, issuer=issuer, browser=browser)
        assert first.returncode == 0, first.stderr
        assert first.json()["content"][0]["text"] == "ada"
        assert len(first.urls) == 1
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        signed_in = the_entry(home)
        assert signed_in["token_type"] == "DPoP" and signed_in["refresh_token"]
        key = signed_in["dpop_key"]
        assert key["kty"] == "EC" and key["crv"] == "P-256" and key["d"]
        thumbprint = bound_to(signed_in["access_token"])

        # 2. The next process reuses the token and its key: no URL, nothing rewritten.
        second = await mrtr(call, env, issuer=issuer)
        assert second.returncode == 0, second.stderr
        assert second.json()["content"][0]["text"] == "ada"
        assert second.urls == []
        assert the_entry(home) == signed_in
        # (a command without --dpop proves with the stored token's key all the same)
        listed = await mrtr(["list", url], env, issuer=issuer)
        assert listed.returncode == 0, listed.stderr
        assert "whoami" in listed.stdout and listed.urls == []

        # 3. Expired: refreshed with the stored key, which the new token is bound to.
        expired = stored(home)
        [name] = expired["tokens"]
        expired["tokens"][name]["expires_at"] = 1.0
        token_file.write_text(json.dumps(expired))
        third = await mrtr(call, env, issuer=issuer)
        assert third.returncode == 0, third.stderr
        assert third.urls == []
        refreshed = the_entry(home)
        assert refreshed["access_token"] != signed_in["access_token"]
        assert refreshed["dpop_key"] == key
        assert bound_to(refreshed["access_token"]) == thumbprint

        # 4. `mrtr auth list` marks it DPoP-bound, and shows no key.
        listing = await mrtr(["auth", "list"], env, issuer=issuer)
        assert listing.returncode == 0, listing.stderr
        assert "DPoP-bound" in listing.stdout and url in listing.stdout

        # 5. A token whose key is gone is no token: the next call signs in again.
        keyless = stored(home)
        del keyless["tokens"][name]["dpop_key"]
        token_file.write_text(json.dumps(keyless))
        fourth = await mrtr(call, env, issuer=issuer, browser=browser)
        assert fourth.returncode == 0, fourth.stderr
        assert len(fourth.urls) == 1
        again = the_entry(home)
        assert again["dpop_key"]["d"] != key["d"]  # (a new process's new key)
        assert bound_to(again["access_token"]) != thumbprint

        # 6. `mrtr auth forget URL` removes the token and its key.
        forgot = await mrtr(["auth", "forget", url], env, issuer=issuer)
        assert forgot.returncode == 0, forgot.stderr
        assert stored(home)["tokens"] == {}
        assert key["d"] not in token_file.read_text()
        assert again["dpop_key"]["d"] not in token_file.read_text()

    shown: list[Ran] = [first, second, listed, third, listing, fourth, forgot]
    secrets = [key["d"], again["dpop_key"]["d"], signed_in["access_token"]]
    secrets += [refreshed["access_token"], refreshed["refresh_token"], again["access_token"]]
    for ran in shown:
        for secret in secrets:
            assert secret not in ran.stdout and secret not in ran.stderr
            assert secret.encode() not in ran.cmdline
    traced = trace.read_text()  # (the last call's: the fourth, which signed in again)
    assert '"whoami"' in traced
    assert all(secret not in traced for secret in secrets)
