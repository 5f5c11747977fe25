"""``mrtr call`` signing a person in over ``ws://``, end to end, every part real: the
OpenID provider (``oidc-provider`` on Node), ``mrtr serve --ws --auth-issuer`` serving
``oauth_app`` (a scoped tool) and ``mrtr call --no-browser`` as subprocesses on 127.0.0.1;
the test is the person's browser (``test_call_oauth.py``'s ``mrtr`` helper).

The WebSocket's upgrade request carries the token; a 401 to it runs the sign-in between
two tries of the upgrade, so neither ``--timeout`` (the handshake's bound) nor the connect
timeout cuts off a person who takes their time.  The token is stored under the endpoint's
``http://`` URL (its resource); a later call reuses it, an expired one is refreshed (no
new sign-in: the new process's first upgrade carries no token), ``mrtr auth forget
ws://...`` drops it.  No token, refresh token or code in any output or process listing.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mrtr_transports.cli.serve_options import ServeOptions, UsageError, add_arguments
from support.oidc_provider import AuthorizationResponse, TestBrowser, oidc_provider
from test_call_oauth import environment, mrtr, secrets_of, serving, stored

#: How long the person takes to sign in: longer than the ``--timeout`` the calls give.
SLOW_PERSON = 2.0


class SlowBrowser:
    """The test's browser, signing in ``SLOW_PERSON`` seconds after the URL is shown."""

    def __init__(self, browser: TestBrowser) -> None:
        self._browser = browser

    async def authorize(self, url: str, *, user: str) -> AuthorizationResponse:
        await anyio.sleep(SLOW_PERSON)
        return await self._browser.authorize(url, user=user)

    async def deliver(self, response: AuthorizationResponse) -> object:
        return await self._browser.deliver(response)


@asynccontextmanager
async def serving_ws(issuer: str, env: Mapping[str, str]) -> AsyncIterator[tuple[str, str]]:
    """``mrtr serve --ws`` of ``oauth_app`` requiring ``issuer``'s tokens: its ``ws://``
    URL and the resource (its ``http://`` URL, the tokens' audience)."""
    async with serving(issuer, env, ws=True) as url:
        yield url, "http" + url.removeprefix("ws")


async def test_mrtr_call_over_ws_signs_in_reuses_refreshes_and_forgets(tmp_path: Path) -> None:
    home = tmp_path / "config"
    env = environment(home)
    async with oidc_provider() as provider, serving_ws(provider.issuer, env) as (url, resource):
        issuer = provider.issuer
        slow = SlowBrowser(provider.browser())
        call = ["call", "--no-browser", "--login-timeout", "30", "--timeout", "1", url]

        # 1. The upgrade's 401 starts the sign-in; the person signs in after --timeout.
        first = await mrtr(
            [*call, "deploy", '{"target": "prod"}'], env, issuer=issuer, browser=slow
        )  # type: ignore[arg-type]
        assert first.returncode == 0, first.stderr
        assert first.json()["content"][0]["text"] == "ada deployed prod"
        assert len(first.urls) == 1, first.stderr
        assert f"mrtr call: {url} needs you to sign in" in first.stderr
        # (the scopes `mrtr serve --ws` publishes for its tools, and the http resource)
        assert "&scope=tools%3Adeploy%20offline_access" in first.urls[0]
        assert "resource=http%3A%2F%2F127.0.0.1%3A" in first.urls[0]
        after_first = stored(home)
        [(key, tokens)] = after_first["tokens"].items()
        assert json.loads(key) == [resource, issuer]
        assert tokens["refresh_token"], tokens

        # 2. A second call reuses the stored token: no URL.
        second = await mrtr([*call, "whoami"], env, issuer=issuer)
        assert second.returncode == 0, second.stderr
        assert second.json()["content"][0]["text"] == "ada"
        assert second.urls == []
        assert stored(home)["tokens"] == after_first["tokens"]

        # 3. An expired token is refreshed, no new sign-in (nobody would answer one).
        expired = stored(home)
        expired["tokens"][key]["expires_at"] = 1.0
        (home / "mrtr" / "tokens.json").write_text(json.dumps(expired))
        third = await mrtr([*call, "whoami"], env, issuer=issuer)
        assert third.returncode == 0, third.stderr
        assert third.urls == []
        refreshed = stored(home)["tokens"][key]
        assert refreshed["access_token"] != tokens["access_token"]

        # 4. `mrtr auth forget ws://...` drops the endpoint's token: the next call asks.
        forgot = await mrtr(["auth", "forget", url], env, issuer=issuer)
        assert forgot.returncode == 0, forgot.stderr
        assert stored(home)["tokens"] == {}
        asked = await mrtr(
            ["call", "--no-browser", "--login-timeout", "1", url, "whoami"], env, issuer=issuer
        )
        assert asked.returncode == 4, asked.stderr
        assert len(asked.urls) == 1
        assert "no authorization response came back to http://127.0.0.1:" in asked.stderr

    every_secret = [*secrets_of(after_first), refreshed["access_token"]]
    every_secret += [refreshed["refresh_token"], *first.codes]
    for ran in (first, second, third, forgot, asked):
        for secret in every_secret:
            assert secret not in ran.stdout and secret not in ran.stderr
            assert secret.encode() not in ran.cmdline


async def test_a_token_given_by_hand_over_ws_and_no_sign_in(tmp_path: Path) -> None:
    """``--token`` over ``ws://``: the upgrade carries it, no flow runs; a wrong one is the
    server's refusal (no sign-in: the person chose the token)."""
    home = tmp_path / "config"
    env = environment(home)
    async with oidc_provider() as provider, serving_ws(provider.issuer, env) as (url, _):
        issuer = provider.issuer
        signed = await mrtr(
            ["call", "--no-browser", url, "whoami"], env, issuer=issuer, browser=provider.browser()
        )
        assert signed.returncode == 0, signed.stderr
        [token] = [t["access_token"] for t in stored(home)["tokens"].values()]
        bare = environment(tmp_path / "nothing-stored", MRTR_TEST_TOKEN=token)
        given = await mrtr(
            ["call", "--token", "env:MRTR_TEST_TOKEN", url, "whoami"], bare, issuer=issuer
        )
        assert given.returncode == 0, given.stderr
        assert given.json()["content"][0]["text"] == "ada" and given.urls == []
        wrong = await mrtr(
            ["call", "--token", "env:WRONG", url, "whoami"],
            {**bare, "WRONG": "not-a-jwt"},
            issuer=issuer,
        )
        assert wrong.returncode == 6 and wrong.urls == [], wrong.stderr
        assert "refused the WebSocket (HTTP 401): the token is not a well-formed JWT" in (
            wrong.stderr
        )
        assert "not-a-jwt" not in wrong.stderr


def ws_options(*flags: str) -> ServeOptions:
    return ServeOptions.from_args(_parsed("--ws", "127.0.0.1:0", *flags))


def test_serve_ws_takes_the_auth_flags_with_the_http_audience() -> None:
    issuer, resource = "https://as.example.test", "http://127.0.0.1:8000/mcp"
    auth = ws_options("--auth-issuer", issuer, "--auth-audience", resource).auth
    assert auth is not None and (auth.issuer, auth.audience) == (issuer, resource)
    with pytest.raises(UsageError, match="over --ws needs --auth-audience: the audience"):
        ws_options("--auth-issuer", issuer)  # (--public-url is HTTP's: --auth-audience)
    with pytest.raises(UsageError, match="absolute http"):
        ws_options("--auth-issuer", issuer, "--auth-audience", "ws://127.0.0.1:8000/mcp")
    with pytest.raises(UsageError, match="only apply to --http and --ws"):
        ServeOptions.from_args(
            _parsed("--stdio", "--auth-issuer", issuer, "--auth-audience", resource)
        )


def _parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))
