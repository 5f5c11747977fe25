"""``mrtr serve --auth-dpop [allowed|required]``, in-process: what it builds (the
endpoint's ``ResourceAuth`` with a ``Dpop`` policy, the metadata's DPoP fields) and its
rules.  The flag at work against the real provider: ``test_dpop_end_to_end.py``."""

from __future__ import annotations

import argparse
import re

import pytest
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.cli.serve_options import ServeOptions, UsageError, add_arguments

AS = "https://as.example.test"
RS = "https://mcp.example.test/mcp"


def parse(*flags: str, transport: str = "--http") -> ServeOptions:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    where = ["127.0.0.1:0"] if transport == "--http" else []
    return ServeOptions.from_args(parser.parse_args([transport, *where, *flags]))


@pytest.mark.parametrize(
    ("flags", "mode", "required"),
    [
        ((), None, None),
        (("--auth-dpop",), "allowed", False),
        (("--auth-dpop", "allowed"), "allowed", False),
        (("--auth-dpop", "required"), "required", True),
        (("--auth-dpop=required",), "required", True),
        (("--auth-dpop", "--auth-scope", "tools:read"), "allowed", False),  # (a flag follows)
    ],
)
def test_what_the_flag_builds(flags: tuple[str, ...], mode: str | None, required: bool | None):
    options = parse("--auth-issuer", AS, "--auth-audience", RS, *flags)
    assert options.auth is not None
    assert options.auth.dpop == mode
    auth = options.auth.resource_auth(McpApp("flag-test", "1.0"))
    document = auth.metadata.to_json()
    if required is None:
        assert auth.dpop is None
        assert "dpop_signing_alg_values_supported" not in document
        return
    assert auth.dpop is not None and auth.dpop.required is required
    assert document["dpop_signing_alg_values_supported"] == ["ES256", "RS256", "PS256", "EdDSA"]
    assert document.get("dpop_bound_access_tokens_required", False) is required
    assert auth.bearer_accepted is not required


def test_the_flag_needs_an_issuer_and_http() -> None:
    with pytest.raises(UsageError, match=re.escape("need --auth-issuer")):
        parse("--auth-dpop", "--auth-audience", RS)
    with pytest.raises(UsageError, match=re.escape("only apply to --http")):
        parse("--auth-dpop", transport="--stdio")


def test_an_unknown_mode_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--auth-issuer", AS, "--auth-audience", RS, "--auth-dpop", "sometimes")
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


NONCE_VARIABLE = "MRTR_TEST_DPOP_NONCE_SECRET"
WITH_NONCES = ("--auth-dpop", "--auth-dpop-nonces", "--auth-dpop-nonce-secret")


def test_nonces_with_a_secret_every_worker_shares(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "a secret the workers share, 16+ bytes"
    monkeypatch.setenv(NONCE_VARIABLE, secret + "\n")
    flags = ("--auth-issuer", AS, "--auth-audience", RS, "--auth-dpop", "--auth-dpop-nonces")
    app = McpApp("flag-test", "1.0")
    shared = (*flags, "--auth-dpop-nonce-secret", f"env:{NONCE_VARIABLE}")
    one, two = parse(*shared).auth, parse(*shared).auth
    assert one is not None and two is not None
    assert secret not in repr(one)
    first, second = one.resource_auth(app).dpop, two.resource_auth(app).dpop
    assert first is not None and second is not None and first.nonces
    assert first.nonce(1_000_000.0) == second.nonce(1_000_000.0)  # (another worker's)
    # Without a secret, each process makes its own.
    alone = parse(*flags).auth
    assert alone is not None and alone.dpop_nonce_secret is None
    own = alone.resource_auth(app).dpop
    assert own is not None and own.nonces
    assert own.nonce(1_000_000.0) != first.nonce(1_000_000.0)
    plain = parse("--auth-issuer", AS, "--auth-audience", RS, "--auth-dpop").auth
    assert plain is not None and not plain.resource_auth(app).dpop.nonces  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--auth-dpop-nonces",), "--auth-dpop-nonces needs --auth-dpop"),
        (
            ("--auth-dpop", "--auth-dpop-nonce-secret", f"env:{NONCE_VARIABLE}"),
            "needs --auth-dpop-nonces",
        ),
        (
            (*WITH_NONCES, "env:MRTR_UNSET_X"),
            "MRTR_UNSET_X",
        ),
        (
            (*WITH_NONCES, f"env:{NONCE_VARIABLE}"),
            "16 bytes at least",
        ),
    ],
)
def test_the_nonce_flags_rules(
    flags: tuple[str, ...], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NONCE_VARIABLE, "too short")
    monkeypatch.delenv("MRTR_UNSET_X", raising=False)
    with pytest.raises(UsageError, match=re.escape(says)) as refused:
        parse("--auth-issuer", AS, "--auth-audience", RS, *flags)
    assert "too short" not in str(refused.value)
