"""``--dpop`` on the client commands, without a server: the plan carries it to the
provider (which then holds a key), the combinations that make no sense are usage errors,
and ``mrtr auth list``/``forget`` on a store holding a DPoP-bound token with its key
(real ``mrtr`` subprocesses): the list marks the token and shows no key, forget removes
the key with the token."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from mrtr_transports.cli.connecting import UsageError
from mrtr_transports.cli.main import build_parser
from mrtr_transports.cli.signing_in import SignIn, sign_in_plan, signed_in
from mrtr_transports.client.oauth import FileTokenStore
from mrtr_transports.client.oauth.dpop import DpopKey
from support.cli_run import mrtr

from mrtr_core.auth import Tokens

RESOURCE, ISSUER = "https://notes.example/mcp", "https://as.example"


@pytest.fixture(autouse=True)
def _config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here reads the machine's own token store."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def plan(command: list[str], kind: str = "http") -> SignIn:
    args = build_parser().parse_args(command)
    headers = [(name, value.strip()) for name, _, value in (h.partition(":") for h in args.header)]
    return sign_in_plan(args, kind, headers, io.StringIO("a-token"))


def test_every_client_command_takes_dpop() -> None:
    target = "http://127.0.0.1:9/mcp"
    commands = [
        ["call", "--dpop", target, "tool"],
        ["get-prompt", "--dpop", target, "prompt"],
        ["read", "--dpop", target, "file:///x"],
        ["list", "--dpop", target],
    ]
    for command in commands:
        assert plan(command).dpop and plan(command).oauth
    assert not plan(["call", target, "tool"]).dpop
    assert plan(["call", "--dpop", "ws://127.0.0.1:9/mcp", "tool"], kind="ws").dpop


@pytest.mark.parametrize(
    ("argv", "kind", "says"),
    [
        (["--dpop"], "stdio", "a stdio TARGET has none"),
        (["--dpop", "--token", "-"], "http", "--dpop signs in with OAuth"),
        (["--dpop", "--header", "Authorization: Bearer x"], "http", "--dpop signs in with OAuth"),
    ],
)
def test_dpop_where_no_oauth_runs_is_a_usage_error(argv: list[str], kind: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        plan(["call", *argv, "http://127.0.0.1:9/mcp", "tool"], kind=kind)


async def test_the_provider_of_a_dpop_plan_holds_a_key(tmp_path: Path) -> None:
    err = io.StringIO()
    for dpop in (True, False):
        chosen = SignIn(oauth=True, store=tmp_path / "tokens.json", open_browser=False, dpop=dpop)
        async with signed_in(chosen, "http://127.0.0.1:9/mcp", err, "mrtr") as provider:
            assert provider is not None
            assert (provider._dpop_key is not None) is dpop
    assert err.getvalue() == ""


async def write_bound(path: Path) -> DpopKey:
    key = DpopKey()
    bound = Tokens(
        access_token="AT-bound-secret",
        token_type="DPoP",
        expires_at=4102444800.0,  # 2100-01-01
        refresh_token="RT-bound-secret",
    )
    await FileTokenStore(path).save_tokens(RESOURCE, ISSUER, bound, dpop_key=key)
    return key


@pytest.mark.subprocess
async def test_auth_list_marks_a_bound_token_and_forget_drops_its_key(tmp_path: Path) -> None:
    store = tmp_path / "tokens.json"
    key = await write_bound(store)
    private = key.private_jwk()
    listed = await mrtr("auth", "list", "--token-store", str(store))
    assert listed.returncode == 0, listed.stderr
    assert f"{RESOURCE}: issuer {ISSUER}; expires 2100-01-01 00:00:00 UTC; DPoP-bound" in (
        listed.stdout
    )
    for secret in (private["d"], "AT-bound-secret", "RT-bound-secret"):
        assert secret not in listed.stdout + listed.stderr
    assert private["d"] in store.read_text()

    forgot = await mrtr("auth", "forget", "--token-store", str(store), RESOURCE)
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(store.read_text())["tokens"] == {}
    assert private["d"] not in store.read_text()

    await write_bound(store)
    cleared = await mrtr("auth", "forget", "--token-store", str(store), "--all")
    assert cleared.returncode == 0, cleared.stderr
    assert "dpop_key" not in store.read_text()
