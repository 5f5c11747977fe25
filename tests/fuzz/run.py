"""Fuzz every target (or some) for a number of seconds each, one subprocess per target.

    python tests/fuzz/run.py --seconds 600            # every target, 10 minutes each
    python tests/fuzz/run.py --seconds 5 codec sse    # two targets, 5 seconds each

Each target starts from its seed corpus (``corpus/<target>/``, read only) and
what earlier runs found (``found/<target>/``, where libFuzzer writes new
inputs).  A crash is written to ``artifacts/<target>/`` (``crash-*``,
``timeout-*``, ``oom-*``).  ``found/`` and ``artifacts/`` are git-ignored.

Reported per target: executions, coverage (libFuzzer's ``cov``) at start and at
the end, inputs added, and crashes with their artifact.  The exit status is 1
when any target crashed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
FOUND = HERE / "found"
ARTIFACTS = HERE / "artifacts"
TARGET_NAMES = (
    "framing",
    "sse",
    "codec",
    "convert",
    "headers",
    "client",
    "server",
    "legacy_shim",
    "engine",
    "schemas",
    "http_sessions",
    "client_sessions",
    "websocket",
    "url_callback",
    "tasks",
)
#: libFuzzer's largest input: room for a message over the connections' 1 KiB bound.
MAX_LEN = 8192
#: A single input slower than this is reported as a timeout (a hang), in seconds.
UNIT_TIMEOUT = 20
RSS_LIMIT_MB = 2048


@dataclass
class Outcome:
    target: str
    seconds: float
    returncode: int
    executions: int = 0
    start_cov: int = 0
    end_cov: int = 0
    new_units: int = 0
    artifacts: list[Path] = field(default_factory=list)
    log: str = ""

    @property
    def crashed(self) -> bool:
        return self.returncode != 0 or bool(self.artifacts)

    def summary(self) -> str:
        status = "CRASH" if self.crashed else "ok"
        line = (
            f"{self.target:12} {status:5} {self.executions:>9} execs in {self.seconds:6.1f}s  "
            f"cov {self.start_cov} -> {self.end_cov} (+{self.end_cov - self.start_cov})  "
            f"new inputs {self.new_units}"
        )
        for path in self.artifacts:
            line += f"\n    artifact: {path}"
        return line


def _last_int(pattern: str, text: str) -> int:
    found = re.findall(pattern, text)
    return int(found[-1]) if found else 0


def fuzz(
    target: str, seconds: int, *, found: Path | None = None, extra: Sequence[str] = ()
) -> Outcome:
    """Fuzz ``target`` for ``seconds``; new inputs go to ``found`` (``found/<target>/``
    unless given), crashes to ``artifacts/<target>/``."""
    found = FOUND / target if found is None else found
    artifacts = ARTIFACTS / target
    found.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    before = set(artifacts.iterdir())
    command = [
        sys.executable,
        str(HERE / "fuzz_one.py"),
        target,
        f"-max_total_time={seconds}",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        f"-timeout={UNIT_TIMEOUT}",
        f"-max_len={MAX_LEN}",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
        *extra,
        str(found),  # the first folder is where libFuzzer writes what it finds
        str(CORPUS / target),
    ]
    started = time.monotonic()
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    log = proc.stdout + proc.stderr
    outcome = Outcome(
        target=target,
        seconds=time.monotonic() - started,
        returncode=proc.returncode,
        executions=_last_int(r"stat::number_of_executed_units:\s*(\d+)", log),
        start_cov=_last_int(r"INITED cov: (\d+)", log),
        end_cov=max(
            _last_int(r"#\d+\s+\w+\s+cov: (\d+)", log), _last_int(r"INITED cov: (\d+)", log)
        ),
        new_units=_last_int(r"stat::new_units_added:\s*(\d+)", log),
        artifacts=sorted(set(artifacts.iterdir()) - before),
        log=log,
    )
    return outcome


def describe_artifact(path: Path, limit: int = 600) -> str:
    data = path.read_bytes()
    shown = repr(data[:limit]) + (" ..." if len(data) > limit else "")
    return f"{path} ({len(data)} bytes): {shown}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=120, help="per target (default 120)")
    parser.add_argument("targets", nargs="*", help=f"some of {', '.join(TARGET_NAMES)}")
    args = parser.parse_args(argv)
    names = args.targets or list(TARGET_NAMES)
    unknown = set(names) - set(TARGET_NAMES)
    if unknown:
        parser.error(f"unknown targets: {sorted(unknown)}")
    crashed = False
    for name in names:
        outcome = fuzz(name, args.seconds)
        print(outcome.summary(), flush=True)
        if outcome.crashed:
            crashed = True
            for path in outcome.artifacts:
                print("   ", describe_artifact(path))
            print("\n".join(outcome.log.splitlines()[-60:]))
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
