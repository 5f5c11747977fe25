"""What the era probe costs a 2025-only stdio server that dies of it, and what a
remembered verdict saves.

``python benchmarks/bench_era_probe.py [RUNS]`` opens a client to
tests/support/stdio_2025_strict.py (a 2025-only server that exits on
``server/discover``) and calls its ``greet`` tool (one ``elicitation/create``
answered), RUNS times (10) each way:

* ``era="auto"``: the probe kills the child, which is started again and
  initialized (two children per run);
* ``prior=client.verdict``: straight to ``initialize`` (one child).

Prints the median wall time of each (child start-up included).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio
from mrtr_transports.client.stdio import open_stdio_client

import mrtr_core as m

STRICT = [
    sys.executable,
    str(Path(__file__).resolve().parents[1] / "tests/support/stdio_2025_strict.py"),
]


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    return m.wire.ElicitResult(action="accept", content={"name": "Ada"})


async def once(**options: Any) -> tuple[float, m.Verdict | None]:
    started = time.perf_counter()
    async with open_stdio_client(STRICT, answer=answer, **options) as client:
        await client.call_tool("greet")
        verdict = client.verdict
    return time.perf_counter() - started, verdict


async def main(runs: int) -> None:
    probed: list[float] = []
    remembered: list[float] = []
    verdict = None
    for _ in range(runs):
        elapsed, verdict = await once()
        probed.append(elapsed)
    for _ in range(runs):
        elapsed, _ = await once(prior=verdict)
        remembered.append(elapsed)
    for label, times in (
        ("era='auto' (the probe kills the child; restarted)", probed),
        ("prior=verdict (no probe, one child)", remembered),
    ):
        print(f"{label:52} {statistics.median(times) * 1e3:.0f} ms")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 10)
