"""The real services the scale-out tests need, or a loud skip.

``make pytest`` installs nginx and redis-server first (``make services``); a
bare ``pytest`` installs them here through the same script.  When that is
impossible (no apt-get, not root, no mirror) every test that needs them skips
with the reason, and the end of the run repeats it in a banner.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import scale_services

#: The start of every skip's reason here, so the summary can find them among the reports.
_NOT_TESTED = "SCALE-OUT NOT TESTED: "


@pytest.fixture(scope="session")
def services() -> dict[str, str]:
    found = scale_services.located()
    if isinstance(found, str):
        pytest.skip(f"{_NOT_TESTED}{found} (run `make services` as root)")
    return found


@pytest.fixture
def redis_server(services: dict[str, str], tmp_path: Path) -> Iterator[scale_services.RedisServer]:
    server = scale_services.RedisServer(services["redis-server"], tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Read from the reports, not from this process: under xdist the skips happen in workers.
    reasons = [
        str(report.longrepr[2]).partition(_NOT_TESTED)[2]
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and _NOT_TESTED in str(report.longrepr[2])
    ]
    if reasons:
        terminalreporter.section("SCALE-OUT TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.line(reasons[0], red=True, bold=True)
        terminalreporter.line("install them with `make services` (root, Debian's mirrors)")
