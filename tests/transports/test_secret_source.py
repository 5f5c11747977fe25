"""The one rule for a secret a flag names (``transports/_secret_source.py``): where it is
read from, its bounds, and errors that never quote it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from mrtr_transports._secret_source import (
    SecretSourceError,
    is_secret_source,
    read_secret_source,
)

SECRET = "s3cret-value"


def read(source: str, *, stdin: io.StringIO | None = None, max_bytes: int = 64) -> str:
    return read_secret_source(source, flag="--flag", max_bytes=max_bytes, stdin=stdin)


def test_each_place_a_secret_can_be(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret"
    path.write_text(SECRET + "\n")
    monkeypatch.setenv("A_SECRET", SECRET)
    assert read("env:A_SECRET") == SECRET
    assert read(f"@{path}") == SECRET + "\n"
    assert read(str(path)) == SECRET + "\n"  # a bare path, where the flag takes one
    assert read("-", stdin=io.StringIO(SECRET)) == SECRET


@pytest.mark.parametrize(
    ("source", "literal"), [("-", True), ("@x", True), ("env:X", True), (SECRET, False)]
)
def test_what_names_a_place_and_what_is_a_literal(source: str, literal: bool) -> None:
    assert is_secret_source(source) is literal


def test_a_place_with_no_secret_is_an_error_that_quotes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMPTY_SECRET", "")
    monkeypatch.setenv("HUGE_SECRET", SECRET * 10)
    huge = tmp_path / "huge"
    huge.write_text(SECRET * 10)
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe" + SECRET.encode())
    cases = {
        "env:NOT_SET_ANYWHERE": "'NOT_SET_ANYWHERE' is not set or empty",
        "env:EMPTY_SECRET": "is not set or empty",
        "env:HUGE_SECRET": "more than 64 bytes",
        f"@{tmp_path / 'missing'}": "cannot read it (No such file or directory)",
        str(huge): "more than 64 bytes, not a secret",
        str(binary): "not UTF-8 text",
        "-": "cannot read it",  # no stdin for this flag: "-" is a file name
    }
    for source, says in cases.items():
        with pytest.raises(SecretSourceError) as refused:
            read(source)
        assert says in str(refused.value) and str(refused.value).startswith("--flag ")
        assert SECRET not in str(refused.value)
    with pytest.raises(SecretSourceError, match="more than 64 bytes"):
        read("-", stdin=io.StringIO("x" * 65))
