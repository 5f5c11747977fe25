"""The examples run as subprocesses: `make demo` (examples/demo.py) and the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo.py"


def test_make_demo_runs_a_two_round_call_over_a_stdio_subprocess() -> None:
    lines = _run("demo.py")
    sent = [line for line in lines if " -> [" in line]
    assert '"method":"server/discover"' in sent[0]
    calls = [line for line in sent if '"method":"tools/call"' in line]
    assert len(calls) == 3  # the call and two retries
    assert lines[-2] == "result (stdout of mrtr call, exit 0): Trip to Lisbon for Ada: 3 nights."


def test_the_pair_demo_settles_the_era_and_finishes_a_two_round_call() -> None:
    lines = _run("pair_demo.py")
    assert lines[0].startswith('--> {"jsonrpc":"2.0","id":1,"method":"server/discover"')
    assert "    era settled: modern 2026-07-28" in lines
    assert [line for line in lines if line.startswith("--> leg")][-1].startswith("--> leg 3:")
    assert lines[-1] == (
        "done: Trip for Ada: Take tram 28 early. Itinerary saved to file:///home/ada/trips."
    )


def _run(name: str) -> list[str]:
    path = DEMO.parent / name
    run = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


def test_the_weather_tool_runs_in_all_four_handler_styles() -> None:
    lines = _run("weather_styles.py")
    for style in ("re-entrant", "once", "steps", "continuation"):
        assert f"{style:<13} 4 legs: Oslo: 21 C, warm and bright" in lines
        # Declining the first question ends every style after it, with a tool error.
        refused = "(tool error) No forecast: you declined to answer 'Which city?'."
        assert f"{style:<13} 2 legs: {refused}" in lines
    assert lines[-1] == "side effect of the once style ran 1 time"


def test_the_deploy_tool_deploys_once_and_refuses_the_replay() -> None:
    assert _run("deploy.py") == [
        "skipping the question: {'error': {'key': 'confirm', 'reason': 'unproven'}}",
        "leg 1: ['confirm']",
        "leg 2: Deployed to prod.",
        "replay of leg 2: {'error': {'reason': 'replayed'}}",
        "declined: Not deployed to prod: the user did not confirm. isError: True",
        "deployments: ['prod']",
    ]
