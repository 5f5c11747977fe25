"""Running ``mrtr`` as a real subprocess in tests: ``python -m mrtr_transports.cli.main ...``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from support.conformance_suite import FIXTURES_APP

MRTR = [sys.executable, "-m", "mrtr_transports.cli.main"]
#: The environment with ``tests/`` importable (for ``--app support.cli_slow_app:app``).
TESTS_ON_PATH = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])]
    ),
}
#: The example server over stdio, as a ``mrtr call`` TARGET.
STDIO_EXAMPLE = "stdio:" + shlex.join([*MRTR, "serve", "--stdio"])
#: The conformance fixtures (``test_simple_text``, ...) over stdio, as a ``mrtr call`` TARGET.
STDIO_FIXTURES = "stdio:" + shlex.join([*MRTR, "serve", "--stdio", "--app", FIXTURES_APP])


def python_target(code: str) -> str:
    """A stdio TARGET that runs ``python -c CODE`` (a server that misbehaves on purpose)."""
    return "stdio:" + shlex.join([sys.executable, "-c", code])


@attrs.frozen
class Ran:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        import json

        return json.loads(self.stdout)


#: Seconds before a run counts as hung: a guard, not a speed check.  An ``mrtr`` that
#: takes half a second of CPU took more than 10 s on a two-core machine busy with a
#: parallel ``make test`` and other work (two such failures in one run).
HUNG = 30.0


async def mrtr(
    *args: str,
    timeout: float = HUNG,
    stdin: Any = subprocess.DEVNULL,
    env: Mapping[str, str] | None = None,
) -> Ran:
    """Run ``mrtr ARGS`` to completion, stdin not a terminal unless given one."""
    with trio.fail_after(timeout):
        done = await trio.run_process(
            [*MRTR, *args],
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=None if env is None else dict(env),
        )
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


async def mrtr_all(calls: Sequence[Sequence[str]], timeout: float = HUNG) -> list[Ran]:
    """Several ``mrtr`` runs at once (each its own process); results in the given order."""
    results: list[Ran | None] = [None] * len(calls)

    async def one(i: int, args: Sequence[str]) -> None:
        results[i] = await mrtr(*args, timeout=timeout)

    async with trio.open_nursery() as nursery:
        for i, args in enumerate(calls):
            nursery.start_soon(one, i, args)
    return [r for r in results if r is not None]
