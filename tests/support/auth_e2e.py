"""What the end-to-end authorization tests share: the real OpenID provider
(``support.oidc_provider``) for a whole test module, ``mrtr serve --http`` requiring its
tokens as a real subprocess, and tokens got the way a client gets them.

* :func:`provider_for_module`: the provider on an event loop of its own (a thread, trio),
  so a module-scoped fixture holds it while each test runs on its own loop;
* :func:`serving_with_tokens`: ``mrtr serve --http 127.0.0.1:PORT --public-url
  http://127.0.0.1:PORT/mcp --app support.auth_e2e_app:app --auth-issuer ...``.  The port
  is picked before the server starts: its public URL is the audience tokens must name,
  and the provider issues tokens for ``http://127.0.0.1:<digits>/mcp``.  Its stderr is
  kept (a test looks for tokens in it);
* :func:`user_tokens` (a person signs in with :class:`~support.oidc_provider.TestBrowser`,
  then the client redeems the code) and :func:`machine_tokens` (client credentials).
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio.from_thread
import attrs

from support.conformance_suite import ROOT
from support.oidc_provider import (
    CONFIDENTIAL_CLIENT_ID,
    DEFAULT_USERS,
    PUBLIC_CLIENT_ID,
    OidcProvider,
    Pkce,
    TestBrowser,
    User,
    basic_auth,
    http_request,
    oidc_provider,
)

APP = "support.auth_e2e_app:app"
#: Where the public client's browser is sent back (any loopback port: a native client).
REDIRECT_URI = "http://127.0.0.1:51234/callback"
_START_SECONDS = 30.0


@contextmanager
def provider_for_module(
    config: Mapping[str, Any] | None = None, *, users: Mapping[str, User] = DEFAULT_USERS
) -> Iterator[OidcProvider]:
    """:func:`~support.oidc_provider.oidc_provider` held open from a plain ``with``: its
    own loop runs in a thread for as long as the block (a module's tests) lasts."""
    running = oidc_provider(config, users=users)
    with (
        anyio.from_thread.start_blocking_portal("trio") as portal,
        portal.wrap_async_context_manager(running) as provider,
    ):
        yield provider


def free_port() -> int:
    """A port nothing listens on now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@attrs.define
class Served:
    """A running ``mrtr serve``: its endpoint URL and what it wrote on stderr."""

    url: str
    port: int
    pid: int
    _stderr: list[bytes] = attrs.field(factory=list)

    def log(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a server subprocess: ``tests`` importable (the app), and
    ``extra``."""
    paths = [str(ROOT / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **(extra or {})}


@contextmanager
def serving_with_tokens(
    issuer: str, *flags: str, app: str = APP, env: Mapping[str, str] | None = None
) -> Iterator[Served]:
    """``mrtr serve --http`` of ``app`` requiring ``issuer``'s tokens (``flags`` added),
    until the block ends (SIGTERM, then SIGKILL)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    argv = [sys.executable, "-m", "mrtr_transports", "serve", "--http", f"127.0.0.1:{port}"]
    argv += ["--public-url", url, "--app", app, "--auth-issuer", issuer, *flags]
    process = subprocess.Popen(argv, cwd=ROOT, env=server_env(env), stderr=subprocess.PIPE)
    assert process.stderr is not None
    served = Served(url, port, process.pid)
    try:
        ready, _, _ = select.select([process.stderr], [], [], _START_SECONDS)
        line = process.stderr.readline() if ready else b""
        served._stderr.append(line)
        assert line.startswith(b"mrtr serve: listening on"), f"not serving: {line!r}"
        # Keep reading (and keeping) its stderr, so the server never blocks on a full pipe.
        stream = process.stderr
        threading.Thread(target=lambda: served._stderr.extend(stream), daemon=True).start()
        yield served
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def user_tokens(
    provider: OidcProvider, browser: TestBrowser, user: str, *, resource: str, scope: str
) -> dict[str, Any]:
    """The token response the public client gets for ``user`` (who signs in and allows
    in ``browser``): authorization code with PKCE and ``resource``, then the token
    request."""
    pkce = Pkce.new()
    url = provider.authorization_url(
        redirect_uri=REDIRECT_URI, scope=scope, resource=resource, pkce=pkce, state="e2e"
    )
    response = await browser.authorize(url, user=user)
    assert response.code, response
    form = {
        "grant_type": "authorization_code",
        "code": response.code,
        "redirect_uri": REDIRECT_URI,
        "client_id": PUBLIC_CLIENT_ID,
        "code_verifier": pkce.verifier,
        "resource": resource,
    }
    redeemed = await http_request("POST", provider.token_endpoint, form=form)
    assert redeemed.status == 200, redeemed
    tokens: dict[str, Any] = redeemed.json()
    return tokens


async def machine_tokens(provider: OidcProvider, *, resource: str, scope: str) -> dict[str, Any]:
    """The token response of a client credentials grant (the confidential client; its
    ``sub`` is the client id)."""
    secret = provider.client_secret(CONFIDENTIAL_CLIENT_ID)
    form = {"grant_type": "client_credentials", "resource": resource, "scope": scope}
    headers = basic_auth(CONFIDENTIAL_CLIENT_ID, secret)
    granted = await http_request("POST", provider.token_endpoint, form=form, headers=headers)
    assert granted.status == 200, granted
    tokens: dict[str, Any] = granted.json()
    return tokens
