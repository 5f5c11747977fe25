"""``mrtr call --era`` and ``--verdicts``: real ``mrtr`` subprocesses against a 2025-only
stdio server that exits on any method it does not know (tests/support/stdio_2025_strict.py),
which logs every message it reads, so the tests see what went over the wire."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from pathlib import Path

import pytest
from mrtr_transports.cli.verdicts import MAX_ENTRIES, VerdictFile
from support.cli_run import TESTS_ON_PATH, mrtr

from mrtr_core import Verdict

pytestmark = pytest.mark.subprocess

STRICT = Path(__file__).resolve().parents[2] / "support" / "stdio_2025_strict.py"
TARGET = "stdio:" + shlex.join([sys.executable, str(STRICT)])
ANSWER = ["--answer", 'elicitation/create={"action": "accept", "content": {"name": "Ada"}}']


def methods(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return [json.loads(line)["method"] for line in lines]


async def test_a_remembered_verdict_skips_the_probe_a_server_dies_of(tmp_path: Path) -> None:
    log, verdicts = tmp_path / "wire.ndjson", tmp_path / "verdicts.json"
    env = {**TESTS_ON_PATH, "MRTR_WIRE_LOG": str(log)}
    args = ["call", *ANSWER, "--verdicts", str(verdicts), TARGET, "greet"]
    ran = await mrtr(*args, env=env, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert ran.json()["content"][0]["text"] == "hello Ada"
    assert methods(log)[:3] == ["server/discover", "initialize", "notifications/initialized"]
    remembered = {"era": "legacy", "protocolVersion": "2025-11-25", "probeKills": True}
    assert json.loads(verdicts.read_text()) == {TARGET: remembered}

    ran = await mrtr(*args, env=env, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert methods(log)[:2] == ["initialize", "notifications/initialized"]  # no probe


async def test_era_legacy_and_modern_on_the_command_line(tmp_path: Path) -> None:
    log = tmp_path / "wire.ndjson"
    env = {**TESTS_ON_PATH, "MRTR_WIRE_LOG": str(log)}
    ran = await mrtr("call", *ANSWER, "--era", "legacy", TARGET, "greet", env=env, timeout=30)
    assert ran.returncode == 0, ran.stderr
    assert methods(log)[0] == "initialize"
    ran = await mrtr("call", "--era", "modern", TARGET, "greet", env=env, timeout=30)
    assert ran.returncode == 3 and "not initialized" in ran.stderr  # the server's own words
    assert methods(log) == ["tools/call"]
    ran = await mrtr("call", "--era", "2025", TARGET, "greet", env=env, timeout=30)
    assert ran.returncode == 2 and "--era" in ran.stderr


def test_a_verdicts_file_is_a_bounded_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "verdicts.json"
    legacy = Verdict(era="legacy", protocol_version="2025-06-18")
    for text in ("not json", "[1, 2]", "x" * (1024 * 1024 + 1)):
        path.write_text(text)
        with caplog.at_level(logging.WARNING, "mrtr.cli"):
            assert VerdictFile(path).prior("t") is None
        assert "ignored" in caplog.text
        caplog.clear()
    path.write_text(json.dumps({"t": {"era": "legacy", "protocolVersion": "1999-01-01"}}))
    assert VerdictFile(path).prior("t") is None  # an entry that is no verdict
    book = VerdictFile(path)
    book.remember("t", legacy)
    assert VerdictFile(path).prior("t") == legacy
    for index in range(MAX_ENTRIES + 5):
        book.remember(f"target-{index}", legacy)
    kept = json.loads(path.read_text())
    assert len(kept) == MAX_ENTRIES and "t" not in kept and "target-0" not in kept
    assert f"target-{MAX_ENTRIES + 4}" in kept
    assert VerdictFile(tmp_path / "absent.json").prior("t") is None
