"""``mrtr call`` as the OAuth client of a person, end to end, every part real: the OpenID
provider (``oidc-provider`` on Node), ``mrtr serve --http --auth-issuer`` serving an app with
a scoped tool, and ``mrtr call --no-browser`` as subprocesses on 127.0.0.1.  The test is
the person's browser: it reads the sign-in URL ``mrtr call`` prints, signs in as "ada" with
``TestBrowser`` and delivers the provider's redirect to ``mrtr call``'s loopback port.

The first call signs in; the token lands in ``$XDG_CONFIG_HOME/mrtr/tokens.json`` (0600);
the next call reuses it (no URL printed), an expired one is refreshed, ``mrtr auth list``
shows it without any secret, ``mrtr auth forget`` makes the next call ask again; no token,
refresh token, code or verifier shows in stdout, stderr, ``--trace`` or
``/proc/PID/cmdline``.  ``--token`` takes a token from stdin, a file or the environment and
refuses one written on the command line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.cli_run import MRTR, TESTS_ON_PATH
from support.oidc_provider import CONFIDENTIAL_CLIENT_ID, TestBrowser, oidc_provider
from support.serve_subprocess import mrtr_serve

HERE = Path(__file__).resolve().parent
HUNG = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environment(config_home: Path, **more: str) -> dict[str, str]:
    """The tests' environment, ``oauth_app`` importable, tokens under ``config_home``."""
    return {
        **TESTS_ON_PATH,
        "PYTHONPATH": os.pathsep.join([str(HERE), TESTS_ON_PATH["PYTHONPATH"]]),
        "XDG_CONFIG_HOME": str(config_home),
        **more,
    }


@asynccontextmanager
async def serving(issuer: str, env: Mapping[str, str], *, ws: bool = False) -> AsyncIterator[str]:
    """``mrtr serve --http`` (``--ws``) of ``oauth_app`` requiring ``issuer``'s tokens: its
    URL (whose ``http://`` form, the resource, is the tokens' audience)."""
    port = _free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    transport = "--ws" if ws else "--http"
    flags = [transport, f"127.0.0.1:{port}", "--app", "oauth_app:app"]
    flags += ["--auth-issuer", issuer, "--auth-audience", resource]
    async with mrtr_serve(flags, env=env) as url:
        yield url


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    #: The sign-in URLs ``mrtr call`` printed, and what the browser brought back.
    urls: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    pages: list[bytes] = field(default_factory=list)
    cmdline: bytes = b""

    def json(self) -> Any:
        return json.loads(self.stdout)


async def mrtr(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    issuer: str,
    browser: TestBrowser | None = None,
    user: str = "ada",
    stdin: bytes = b"",
    think: float = 0.0,
) -> Ran:
    """``mrtr ARGS`` to completion; each sign-in URL it prints is signed in to by
    ``browser`` as ``user`` (after ``think`` seconds: a person typing) and its redirect
    delivered (no ``browser``: nobody does)."""
    ran = Ran(0, "", "")
    out, err = bytearray(), bytearray()
    process = await anyio.open_process(
        [*MRTR, *args],
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    async with process:
        ran.cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        await process.stdin.send(stdin)
        await process.stdin.aclose()

        async def read_out() -> None:
            assert process.stdout is not None
            async for chunk in process.stdout:
                out.extend(chunk)

        async def read_err() -> None:
            assert process.stderr is not None
            handled = 0
            async for chunk in process.stderr:
                err.extend(chunk)
                lines = err.decode(errors="replace").split("\n")[:-1]
                for line in lines[handled:]:
                    if line.startswith(issuer):
                        ran.urls.append(line)
                        ran.cmdline += Path(f"/proc/{process.pid}/cmdline").read_bytes()
                        if browser is not None:
                            await anyio.sleep(think)
                            response = await browser.authorize(line, user=user)
                            ran.codes.append(response.code or "")
                            delivered = await browser.deliver(response)
                            ran.pages.append(delivered.body)
                handled = len(lines)

        try:
            with anyio.fail_after(HUNG):
                async with anyio.create_task_group() as group:
                    group.start_soon(read_out)
                    group.start_soon(read_err)
                ran.returncode = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
    ran.stdout, ran.stderr = out.decode(), err.decode()
    return ran


def stored(config_home: Path) -> dict[str, Any]:
    return json.loads((config_home / "mrtr" / "tokens.json").read_text())


def secrets_of(store: Mapping[str, Any]) -> list[str]:
    found = []
    for tokens in store["tokens"].values():
        found.append(tokens["access_token"])
        if tokens.get("refresh_token"):
            found.append(tokens["refresh_token"])
    return found


async def test_mrtr_call_signs_in_reuses_refreshes_and_forgets(tmp_path: Path) -> None:
    home = tmp_path / "config"
    env = environment(home)
    trace = tmp_path / "trace.ndjson"
    async with oidc_provider() as provider, serving(provider.issuer, env) as url:
        issuer = provider.issuer
        browser = provider.browser()
        # (a call that should not sign in but does gives up after 5 s, not 300)
        call = ["call", "--no-browser", "--login-timeout", "5", "--trace", str(trace), url]

        # 1. No token yet: the server's 401 starts the sign-in; the person signs in, in
        # longer than the server's --timeout, which the person's time does not count.
        first = await mrtr(
            [*call, "--timeout", "3", "deploy", '{"target": "prod"}'],
            env,
            issuer=issuer,
            browser=browser,
            think=4.0,
        )
        assert first.returncode == 0, first.stderr
        assert first.json()["content"][0]["text"] == "ada deployed prod"
        assert len(first.urls) == 1, first.stderr
        assert b"you can close this window" in first.pages[0]
        assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in first.urls[0]
        # (the scopes `mrtr serve` publishes for its tools: scopes_supported)
        assert "&scope=tools%3Adeploy%20offline_access" in first.urls[0]
        token_file = home / "mrtr" / "tokens.json"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        after_first = stored(home)
        [(key, tokens)] = after_first["tokens"].items()
        assert json.loads(key) == [url, issuer]
        assert tokens["refresh_token"], tokens  # (offline_access was asked for)
        first_trace = trace.read_text()
        # (the handshake was not timed out meanwhile: no fallback to a 2025 session)
        assert '"initialize"' not in first_trace and '"server/discover"' in first_trace

        # 2. A second call reuses the stored token: no URL, no browser.
        second = await mrtr([*call, "whoami"], env, issuer=issuer)
        assert second.returncode == 0, second.stderr
        assert second.json()["content"][0]["text"] == "ada"
        assert second.urls == []
        assert stored(home)["tokens"] == after_first["tokens"]
        listed = await mrtr(["list", url], env, issuer=issuer)  # (every client command)
        assert listed.returncode == 0, listed.stderr
        assert "deploy" in listed.stdout and listed.urls == []

        # 3. An expired token is refreshed (the refresh token rotates), still no URL.
        expired = stored(home)
        expired["tokens"][key]["expires_at"] = 1.0
        token_file.write_text(json.dumps(expired))
        third = await mrtr([*call, "whoami"], env, issuer=issuer)
        assert third.returncode == 0, third.stderr
        assert third.urls == []
        refreshed = stored(home)["tokens"][key]
        assert refreshed["access_token"] != tokens["access_token"]
        assert refreshed["expires_at"] > 1.0

        # 4. `mrtr auth list` shows the endpoint, issuer and expiry, never a token.
        listing = await mrtr(["auth", "list"], env, issuer=issuer)
        assert listing.returncode == 0, listing.stderr
        assert url in listing.stdout and f"issuer {issuer}" in listing.stdout
        assert "expires 20" in listing.stdout and "refreshable" in listing.stdout

        # 5. `mrtr auth forget URL`: the next call asks again (and nobody answers in time).
        forgot = await mrtr(["auth", "forget", url], env, issuer=issuer)
        assert forgot.returncode == 0, forgot.stderr
        assert stored(home)["tokens"] == {}
        asked = await mrtr(
            ["call", "--no-browser", "--login-timeout", "1", url, "whoami"], env, issuer=issuer
        )
        assert asked.returncode == 4, asked.stderr
        assert len(asked.urls) == 1
        assert "no authorization response came back to http://127.0.0.1:" in asked.stderr
        again = await mrtr(["auth", "forget", url], env, issuer=issuer)
        assert again.returncode == 2 and "no token stored" in again.stderr

    # No secret anywhere a person or another user could see it.
    every_secret = [*secrets_of(after_first), refreshed["access_token"]]
    every_secret += [refreshed["refresh_token"], *first.codes]
    shown = [first, second, listed, third, listing, forgot, asked]
    for ran in shown:
        for secret in every_secret:
            assert secret not in ran.stdout and secret not in ran.stderr
            assert secret.encode() not in ran.cmdline
    for secret in every_secret:
        assert secret not in first_trace and secret not in trace.read_text()
    assert "code_verifier" not in first.stderr


async def test_token_from_stdin_a_file_or_the_environment_never_argv(tmp_path: Path) -> None:
    home = tmp_path / "config"
    env = environment(home)
    async with oidc_provider() as provider, serving(provider.issuer, env) as url:
        issuer = provider.issuer
        signed = await mrtr(
            ["call", "--no-browser", url, "whoami"], env, issuer=issuer, browser=provider.browser()
        )
        assert signed.returncode == 0, signed.stderr
        [token] = [t["access_token"] for t in stored(home)["tokens"].values()]
        other_home = tmp_path / "nothing-stored"  # (so only --token can authenticate)
        bare = environment(other_home, MRTR_TEST_TOKEN=token)
        token_path = tmp_path / "token"
        token_path.write_text(token + "\n")
        for source, stdin in (
            ("-", token.encode()),
            (f"@{token_path}", b""),
            ("env:MRTR_TEST_TOKEN", b""),
        ):
            ran = await mrtr(
                ["call", "--token", source, url, "whoami"], bare, issuer=issuer, stdin=stdin
            )
            assert ran.returncode == 0, (source, ran.stderr)
            assert ran.json()["content"][0]["text"] == "ada"
            assert ran.urls == [] and token.encode() not in ran.cmdline
        assert not (other_home / "mrtr" / "tokens.json").exists()  # (nothing stored)

        # A token written on the command line is refused before anything is sent.
        literal = await mrtr(["call", "--token", "abc.def", url, "whoami"], bare, issuer=issuer)
        assert literal.returncode == 2
        assert "visible to every user" in literal.stderr and "abc.def" not in literal.stderr
        # A refused token: the server's 401, no sign-in (the person chose the token).
        wrong = await mrtr(
            ["call", "--token", "env:WRONG", url, "whoami"],
            {**bare, "WRONG": "not-a-jwt"},
            issuer=issuer,
        )
        assert wrong.returncode == 3, wrong.stderr  # (the handshake refused, as the client says)
        assert "the token is not a well-formed JWT" in wrong.stderr, wrong.stderr
        assert wrong.urls == [] and "not-a-jwt" not in wrong.stderr


async def test_the_browser_opens_on_the_sign_in_url_by_the_webbrowser_module(
    tmp_path: Path,
) -> None:
    """Without ``--no-browser``, ``mrtr call`` opens the URL with ``webbrowser`` (here the
    ``BROWSER`` a person may set: a script that records the URL it is given)."""
    opened = tmp_path / "opened-url"
    script = tmp_path / "browser"
    script.write_text(
        f"#!{sys.executable}\nimport pathlib, sys\n"
        f"pathlib.Path({str(opened)!r}).write_text(sys.argv[1])\n"
    )
    script.chmod(0o700)
    env = environment(tmp_path / "config", BROWSER=str(script))
    async with oidc_provider() as provider, serving(provider.issuer, env) as url:
        result: list[Ran] = []

        async def call() -> None:
            result.append(await mrtr(["call", url, "whoami"], env, issuer=provider.issuer))

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            with anyio.fail_after(HUNG):
                while not opened.exists() or not opened.read_text():
                    await anyio.sleep(0.05)
            response = await provider.browser().authorize(opened.read_text(), user="ada")
            await provider.browser().deliver(response)
        [ran] = result
        assert ran.returncode == 0, ran.stderr
        assert ran.json()["content"][0]["text"] == "ada"
        assert "your browser opens it, or open it yourself" in ran.stderr
        assert ran.urls == [opened.read_text()]  # (printed too, whole, on its own line)


async def test_a_preregistered_confidential_client_with_its_secret_from_the_environment(
    tmp_path: Path,
) -> None:
    home = tmp_path / "config"
    async with oidc_provider() as provider:
        secret = provider.client_secret(CONFIDENTIAL_CLIENT_ID)
        env = environment(home, MRTR_CLIENT_SECRET=secret)
        async with serving(provider.issuer, env) as url:
            ran = await mrtr(
                ["call", "--no-browser", "--client-id", CONFIDENTIAL_CLIENT_ID, url, "whoami"],
                env,
                issuer=provider.issuer,
                browser=provider.browser(),
            )
            assert ran.returncode == 0, ran.stderr
            assert ran.json()["content"][0]["text"] == "ada"
            assert f"client_id={CONFIDENTIAL_CLIENT_ID}" in ran.urls[0]
            assert secret not in ran.stderr + ran.stdout and secret.encode() not in ran.cmdline
            # (a pre-registered client is the command line's, not stored as a registration)
            assert stored(home)["clients"] == {}
            # A wrong secret: the token endpoint refuses, a clear failure, still no secret shown.
            wrong = await mrtr(
                ["call", "--no-browser", "--client-id", CONFIDENTIAL_CLIENT_ID, url, "whoami"],
                environment(tmp_path / "other", MRTR_CLIENT_SECRET="wrong-secret"),
                issuer=provider.issuer,
                browser=provider.browser(),
            )
            assert wrong.returncode == 6, wrong.stderr
            assert "authorization for http://127.0.0.1:" in wrong.stderr
            assert "wrong-secret" not in wrong.stderr


async def test_ctrl_c_while_waiting_for_the_browser_is_exit_130_and_the_port_is_closed(
    tmp_path: Path,
) -> None:
    env = environment(tmp_path / "config")
    async with oidc_provider() as provider, serving(provider.issuer, env) as url:
        process = await anyio.open_process(
            [*MRTR, "call", "--no-browser", url, "whoami"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        async with process:
            assert process.stderr is not None and process.stdout is not None
            seen = b""
            with anyio.fail_after(HUNG):
                while provider.issuer.encode() + b"/" not in seen or not seen.endswith(b"\n"):
                    seen += await process.stderr.receive()
            sign_in_url = seen.decode().splitlines()[-1]
            port = int(sign_in_url.split("127.0.0.1%3A", 1)[1].split("%2F", 1)[0])
            process.send_signal(signal.SIGINT)
            with anyio.fail_after(HUNG):
                code = await process.wait()
                rest = b"".join([chunk async for chunk in process.stderr])
        assert code == 130, seen + rest
        assert rest.decode().strip().endswith("interrupted"), rest
        assert b"Traceback" not in rest
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), 5):
            pass
