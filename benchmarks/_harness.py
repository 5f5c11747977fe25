"""What every benchmark here shares: timed batches, their median and spread, the machine.

The rigour ``make bench`` promises, in one place:

* a warm-up batch before any batch that counts;
* ``repeats`` batches, each of ``n`` operations, with the garbage collector paused
  inside a batch (as ``timeit`` does) and collected between batches;
* the **median** batch reported, with the spread (fastest and slowest batch, as a
  percentage of the median), never a single lucky batch;
* ratios (ours against a floor or a peer) taken between medians of the same run.

``machine()`` is the line each script prints first: Python, platform, CPU count,
load average and the versions of the libraries the figures depend on.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata


@dataclass(frozen=True)
class Stats:
    """Per-operation seconds of each counted batch."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def rate(self) -> float:
        """Operations per second at the median."""
        return 1.0 / self.median

    @property
    def spread(self) -> str:
        """Fastest and slowest batch against the median, e.g. ``-2%/+5%``."""
        med = self.median
        low, high = min(self.seconds), max(self.seconds)
        return f"-{(med - low) / med:.0%}/+{(high - med) / med:.0%}"

    def us(self) -> float:
        """Microseconds per operation at the median."""
        return self.median * 1e6


def measure(
    batch: Callable[[int], float], n: int, repeats: int, warmup: int | None = None
) -> Stats:
    """Run ``batch(n)`` (which returns the seconds it took for ``n`` operations)
    ``repeats`` times after a warm-up of ``warmup`` operations (default ``n // 10``)."""
    batch(max(warmup if warmup is not None else n // 10, 1))
    seconds = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            seconds.append(batch(n) / n)
        finally:
            gc.enable()
    return Stats(tuple(seconds))


def timed_loop(operation: Callable[[], object]) -> Callable[[int], float]:
    """A batch that calls ``operation()`` ``n`` times."""

    def batch(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            operation()
        return time.perf_counter() - start

    return batch


def versions(names: Iterable[str]) -> str:
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def machine(libraries: Iterable[str] = ("mrtr", "orjson")) -> str:
    """One line: what these figures were measured on."""
    try:
        load = f"load {os.getloadavg()[0]:.2f}"
    except OSError:  # pragma: no cover - not on every platform
        load = "load n/a"
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}) on "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, {load}; "
        f"{versions(libraries)}"
    )


def ratio(ours: Stats, other: Stats) -> float:
    """How many times longer ours takes than ``other`` (medians)."""
    return ours.median / other.median
