"""``mrtr serve``'s ``--auth-*`` flags, in-process: the rules they are checked by
(``UsageError``), the verifier and metadata they build, and how the introspection
client secret is read (a file or an environment variable, never quoted back).  The
flags at work against a real provider: ``test_end_to_end.py`` and
``test_serve_introspection.py``."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest
from mrtr_transports.cli.serve_auth import read_client_secret
from mrtr_transports.cli.serve_options import ServeOptions, UsageError, add_arguments

SECRET_VARIABLE = "MRTR_TEST_RESOURCE_SERVER_SECRET"


def options(*flags: str) -> ServeOptions:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return ServeOptions.from_args(parser.parse_args(["--http", "127.0.0.1:0", *flags]))


AS = "https://as.example.test"
RS = "https://mcp.example.test/mcp"
INTROSPECT = ("--auth-introspection", f"{AS}/introspect")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (INTROSPECT, "needs --auth-client-id and --auth-client-secret"),
        (
            (*INTROSPECT, "--auth-client-id", "rs"),
            "needs --auth-client-id and --auth-client-secret",
        ),
        (("--auth-client-id", "rs"), "need --auth-introspection"),
        (("--auth-client-secret", "env:X"), "need --auth-introspection"),
        (
            (*INTROSPECT, "--auth-jwks", f"{AS}/jwks", "--auth-client-id", "rs"),
            "checked one way",
        ),
        (("--auth-introspection", "as.example/introspect"), "absolute http(s) URL"),
        (("--auth-scope", "two scopes"), "one scope token"),
        (("--auth-leeway", "301"), "0 to 300 seconds"),
        (("--auth-leeway", "nan"), "0 to 300 seconds"),
        (("--auth-leeway", "-1"), "0 to 300 seconds"),
    ],
)
def test_the_introspection_flags_rules(flags: tuple[str, ...], says: str) -> None:
    with pytest.raises(UsageError, match=re.escape(says)):
        options("--auth-issuer", AS, "--auth-audience", RS, *flags)


def test_the_options_and_what_they_build(tmp_path: Path) -> None:
    from mrtr_transports.apps.mcp_app import McpApp
    from mrtr_transports.auth import IntrospectionVerifier, JwtVerifier

    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret\n")
    given = options(
        "--auth-issuer",
        AS,
        "--auth-audience",
        RS,
        *INTROSPECT,
        "--auth-client-id",
        "rs",
        "--auth-client-secret",
        str(secret_file),
        "--auth-scope",
        "read",
        "--auth-scope",
        "read",
        "--auth-leeway",
        "5",
    )
    auth = given.auth
    assert auth is not None
    assert (auth.client_id, auth.client_secret, auth.scopes, auth.leeway) == (
        "rs",
        "s3cret",
        ("read",),
        5.0,
    )
    assert "s3cret" not in repr(given)  # options get logged and shown in tracebacks
    app = McpApp("scoped", "1.0")

    @app.tool(scopes=["admin", "read"])
    def purge() -> str:
        return "purged"

    built = auth.resource_auth(app)
    assert isinstance(built.verifier, IntrospectionVerifier)
    assert (built.verifier.endpoint, built.verifier.leeway) == (f"{AS}/introspect", 5.0)
    assert built.scopes == ("read",)
    assert built.metadata.scopes_supported == ("read", "admin")
    jwt = options("--auth-issuer", AS, "--public-url", RS).auth
    assert jwt is not None and jwt.audience == RS
    plain = jwt.resource_auth(McpApp("plain", "1.0"))
    assert isinstance(plain.verifier, JwtVerifier) and plain.verifier.leeway == 60
    assert plain.metadata.scopes_supported is None and plain.scopes == ()


def test_reading_the_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VARIABLE, "  from-the-environment\n")
    assert read_client_secret(f"env:{SECRET_VARIABLE}") == "from-the-environment"
    monkeypatch.delenv(SECRET_VARIABLE)
    with pytest.raises(UsageError, match="is not set"):
        read_client_secret(f"env:{SECRET_VARIABLE}")
    cases = {
        "empty": (b"\n", "one line"),
        "two-lines": (b"first-secret\nsecond\n", "one line"),
        "huge": (b"x" * 5000, "not a secret"),
        "binary": (b"\xff\xfe", "not UTF-8"),
    }
    for name, (content, says) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(UsageError, match=says) as refused:
            read_client_secret(str(path))
        assert "first-secret" not in str(refused.value)  # never quoted
    with pytest.raises(UsageError, match="cannot read it"):
        read_client_secret(str(tmp_path / "missing"))
    good = tmp_path / "good"
    good.write_text("from-a-file\n")
    assert read_client_secret(str(good)) == "from-a-file"
    assert os.environ.get(SECRET_VARIABLE) is None
