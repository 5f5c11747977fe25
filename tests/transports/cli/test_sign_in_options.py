"""The sign-in options of the client commands, without a server: where ``--token`` reads
from (and that a literal token is refused, saying why), which combinations are usage
errors, the token store's default path, and ``mrtr auth list``/``forget`` on a store file
(real ``mrtr`` subprocesses, marked: what they print never holds a token or a secret)."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from pathlib import Path

import pytest
import trio
from mrtr_transports.cli.connecting import UsageError
from mrtr_transports.cli.main import build_parser
from mrtr_transports.cli.secrets_input import MAX_TOKEN_BYTES, read_token
from mrtr_transports.cli.signing_in import _show_sign_in, default_token_store, sign_in_plan
from mrtr_transports.client.errors import AuthorizationFailed
from support.cli_run import mrtr

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJl"


@pytest.fixture(autouse=True)
def _config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here reads the machine's own token store."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def plan(*argv: str, stdin: str = "", kind: str = "http") -> object:
    args = build_parser().parse_args(["call", *argv, "http://127.0.0.1:9/mcp", "tool"])
    headers = [tuple(h.split(":", 1)) for h in args.header]
    return sign_in_plan(args, kind, headers, io.StringIO(stdin))


def test_the_token_comes_from_stdin_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "token"
    path.write_text(f"  {TOKEN}\n")
    monkeypatch.setenv("MY_TOKEN", f"Bearer {TOKEN}")
    assert read_token("-", io.StringIO(TOKEN + "\n")) == TOKEN
    assert read_token(f"@{path}", io.StringIO()) == TOKEN
    assert read_token("env:MY_TOKEN", io.StringIO()) == TOKEN


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (TOKEN, "visible to every user"),
        ("env:NOT_SET_ANYWHERE", "not set"),
        ("@/nonexistent/token", "cannot read it"),
        ("-", "does not hold one bearer token"),
    ],
)
def test_a_token_source_that_is_no_source_is_a_usage_error(source: str, says: str) -> None:
    stdin = io.StringIO("two words\n")
    with pytest.raises(UsageError) as caught:
        read_token(source, stdin)
    assert says in str(caught.value)
    assert TOKEN not in str(caught.value) and "two words" not in str(caught.value)


def test_a_token_with_a_newline_inside_or_too_long_is_refused() -> None:
    with pytest.raises(UsageError, match="does not hold one bearer token"):
        read_token("-", io.StringIO("abc\r\nX-Injected: 1"))
    with pytest.raises(UsageError, match="more than"):
        read_token("-", io.StringIO("a" * (MAX_TOKEN_BYTES + 1)))


def test_the_plan_of_each_combination(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_CLIENT_SECRET", "the-secret")
    monkeypatch.setenv("OTHER_SECRET", "other-secret")
    oauth = plan()
    assert oauth.oauth and oauth.token is None and oauth.open_browser  # type: ignore[attr-defined]
    given = plan("--token", "-", stdin=TOKEN)
    assert not given.oauth and given.headers([]) == [("Authorization", f"Bearer {TOKEN}")]  # type: ignore[attr-defined]
    assert TOKEN not in repr(given)
    by_header = plan("--header", "Authorization: Bearer x")
    assert not by_header.oauth  # type: ignore[attr-defined]
    client = plan("--client-id", "mcp-confidential", "--no-browser")
    assert client.client_secret == "the-secret" and not client.open_browser  # type: ignore[attr-defined]
    assert "the-secret" not in repr(client)
    other = plan("--client-id", "c", "--client-secret-env", "OTHER_SECRET")
    assert other.client_secret == "other-secret"  # type: ignore[attr-defined]
    assert plan().client_secret is None  # type: ignore[attr-defined]  # (no --client-id: unused)
    # A WebSocket TARGET signs in as an HTTP one does (its upgrade carries the token).
    over_ws = plan("--client-id", "c", kind="ws")
    assert over_ws.oauth and over_ws.client_id == "c"  # type: ignore[attr-defined]
    assert not plan("--token", "-", stdin=TOKEN, kind="ws").oauth  # type: ignore[attr-defined]
    assert not plan(kind="stdio").oauth  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("argv", "kind", "says"),
    [
        (["--token", "-", "--header", "Authorization: Bearer x"], "http", "give one of them"),
        (["--token", "-"], "stdio", "a stdio TARGET has none"),
        (["--client-id", "c", "--token", "-"], "stdio", "a stdio TARGET has none"),
        (["--client-metadata-url", "https://c.example/m.json"], "stdio", "stdio"),
    ],
)
def test_combinations_that_are_usage_errors(argv: list[str], kind: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        plan(*argv, stdin=TOKEN, kind=kind)


def test_the_default_store_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_token_store() == tmp_path / "mrtr" / "tokens.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # (ignored, as the spec says)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_token_store() == tmp_path / "home" / ".config" / "mrtr" / "tokens.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert default_token_store() == tmp_path / "home" / ".config" / "mrtr" / "tokens.json"


def write_store(path: Path) -> None:
    key = json.dumps(["https://notes.example/mcp", "https://as.example"])
    other = json.dumps(["https://other.example/mcp", "https://as.example"])
    raw = {
        "tokens": {
            key: {
                "access_token": "AT-secret",
                "token_type": "Bearer",
                "expires_at": 4102444800.0,  # 2100-01-01
                "refresh_token": "RT-secret",
                "scopes": ["notes:read", "offline_access"],
            },
            other: {"access_token": "AT-other", "token_type": "Bearer", "expires_at": 1.0},
        },
        "clients": {"https://as.example": {"client_id": "client-1", "client_secret": "CS-secret"}},
    }
    path.write_text(json.dumps(raw))
    os.chmod(path, 0o600)


@pytest.mark.subprocess
async def test_auth_list_shows_endpoints_issuers_expiry_never_a_secret(tmp_path: Path) -> None:
    store = tmp_path / "tokens.json"
    write_store(store)
    ran = await mrtr("auth", "list", "--token-store", str(store))
    assert ran.returncode == 0, ran.stderr
    assert (
        "https://notes.example/mcp: issuer https://as.example; expires 2100-01-01 00:00:00 UTC; "
        "scopes notes:read offline_access; refreshable"
    ) in ran.stdout
    assert "https://other.example/mcp: issuer https://as.example; expires 1970" in ran.stdout
    assert "(expired)" in ran.stdout
    assert "client client-1 registered at https://as.example" in ran.stdout
    for secret in ("AT-secret", "RT-secret", "AT-other", "CS-secret"):
        assert secret not in ran.stdout + ran.stderr
    empty = await mrtr("auth", "list", "--token-store", str(tmp_path / "none.json"))
    assert empty.returncode == 0 and "(empty)" in empty.stdout


@pytest.mark.subprocess
async def test_auth_forget_one_endpoint_then_all(tmp_path: Path) -> None:
    store = tmp_path / "tokens.json"
    write_store(store)
    ran = await mrtr("auth", "forget", "--token-store", str(store), "https://NOTES.example/mcp")
    assert ran.returncode == 0, ran.stderr
    assert "forgot 1 token(s) of https://notes.example/mcp" in ran.stdout
    kept = json.loads(store.read_text())
    assert [json.loads(k)[0] for k in kept["tokens"]] == ["https://other.example/mcp"]
    assert kept["clients"]  # (a registration is kept: it is not the person's token)
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    again = await mrtr("auth", "forget", "--token-store", str(store), "https://notes.example/mcp")
    assert again.returncode == 2 and "no token stored" in again.stderr
    both = await mrtr("auth", "forget", "--token-store", str(store))
    assert both.returncode == 2 and "give one URL, or --all" in both.stderr
    everything = await mrtr("auth", "forget", "--all", "--token-store", str(store))
    assert everything.returncode == 0
    assert json.loads(store.read_text()) == {"tokens": {}, "clients": {}}


@pytest.mark.subprocess
async def test_auth_on_a_store_that_is_not_one(tmp_path: Path) -> None:
    store = tmp_path / "tokens.json"
    store.write_text("[1, 2]")
    ran = await mrtr("auth", "list", "--token-store", str(store))
    assert ran.returncode == 2 and "cannot read it" in ran.stderr


@pytest.mark.subprocess
async def test_a_literal_token_on_the_command_line_is_refused_before_anything(
    tmp_path: Path,
) -> None:
    ran = await mrtr("call", "--token", TOKEN, "http://127.0.0.1:9/mcp", "tool")
    assert ran.returncode == 2
    assert "--token takes where the token is, not the token" in ran.stderr
    assert TOKEN not in ran.stderr


@pytest.mark.subprocess
async def test_a_token_store_that_is_no_store_is_a_usage_error_before_anything(
    tmp_path: Path,
) -> None:
    store = tmp_path / "tokens.json"
    store.write_text("{not json")
    ran = await mrtr("call", "--token-store", str(store), "http://127.0.0.1:9/mcp", "tool")
    assert ran.returncode == 2, ran.stderr
    assert f"the token store {store} cannot be read (JSONDecodeError)" in ran.stderr
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://as.example/authorize?x=\u202e1", "hidden or control character"),
        ("javascript:alert(1)", "javascript: URLs are refused"),
        ("https://bank.example@evil.example/authorize", "carries credentials"),
    ],
)
def test_a_sign_in_url_a_person_should_not_open_is_refused_unshown(url: str, says: str) -> None:
    err = io.StringIO()
    sign_in = plan("--no-browser")
    with pytest.raises(AuthorizationFailed, match=says):
        _show_sign_in(err, "mrtr call", "https://mcp.example/mcp", url, sign_in)  # type: ignore[arg-type]
    assert err.getvalue() == ""


def test_the_sign_in_url_is_shown_whole_on_its_own_line() -> None:
    err = io.StringIO()
    url = "http://as.example/authorize?state=s&scope=a%20b"
    _show_sign_in(err, "mrtr call", "http://mcp.example/mcp", url, plan())  # type: ignore[arg-type]
    first, shown, end = err.getvalue().split("\n")
    assert first.startswith("mrtr call: http://mcp.example/mcp needs you to sign in (not https)")
    assert shown == url and end == ""


@pytest.mark.subprocess
async def test_no_browser_found_says_so_and_opens_nothing(tmp_path: Path) -> None:
    """A machine with no browser at all (no ``BROWSER``, no display, nothing on ``PATH``)."""
    code = (
        "import sys; from mrtr_transports.cli.signing_in import _open_browser; "
        "_open_browser(sys.stderr)('https://as.example/authorize')"
    )
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    done = await trio.run_process(
        [sys.executable, "-c", code], env=env, capture_stderr=True, check=False
    )
    assert done.returncode == 0
    assert b"no browser found: open the URL above yourself" in done.stderr


@pytest.mark.subprocess
async def test_auth_forget_takes_the_tokens_a_command_on_the_url_uses(tmp_path: Path) -> None:
    """A resource may be the endpoint's origin (or another parent): forgetting the endpoint
    forgets those tokens too, as the client would use them there; never another origin's."""
    store = tmp_path / "tokens.json"
    tokens = {"access_token": "AT", "token_type": "Bearer"}
    raw = {
        "tokens": {
            json.dumps(["https://notes.example", "https://as.example"]): tokens,
            json.dumps(["https://notes.example.evil", "https://as.example"]): tokens,
            json.dumps(["https://notes.example/other", "https://as.example"]): tokens,
        },
        "clients": {},
    }
    store.write_text(json.dumps(raw))
    ran = await mrtr("auth", "forget", "--token-store", str(store), "https://notes.example/mcp")
    assert ran.returncode == 0, ran.stderr
    left = sorted(json.loads(k)[0] for k in json.loads(store.read_text())["tokens"])
    assert left == ["https://notes.example.evil", "https://notes.example/other"]
    bad = await mrtr("auth", "forget", "--token-store", str(store), "notes.example")
    assert bad.returncode == 2 and "is not an http(s) URL" in bad.stderr
    # A WebSocket URL names the tokens of its http(s) URL (what `mrtr call wss://...` uses).
    over_ws = await mrtr(
        "auth", "forget", "--token-store", str(store), "wss://notes.example.evil/m"
    )
    assert over_ws.returncode == 0, over_ws.stderr
    assert "of https://notes.example.evil/m" in over_ws.stdout
    left = sorted(json.loads(k)[0] for k in json.loads(store.read_text())["tokens"])
    assert left == ["https://notes.example/other"]
