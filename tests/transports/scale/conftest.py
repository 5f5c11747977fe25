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

_skipped_because: list[str] = []


@pytest.fixture(scope="session")
def services() -> dict[str, str]:
    found = scale_services.located()
    if isinstance(found, str):
        _skipped_because.append(found)
        pytest.skip(f"SCALE-OUT NOT TESTED: {found} (run `make services` as root)")
    return found


@pytest.fixture
def redis_server(services: dict[str, str], tmp_path: Path) -> Iterator[scale_services.RedisServer]:
    server = scale_services.RedisServer(services["redis-server"], tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _skipped_because:
        terminalreporter.section("SCALE-OUT TESTS SKIPPED", sep="!", red=True, bold=True)
        terminalreporter.line(_skipped_because[0], red=True, bold=True)
        terminalreporter.line("install them with `make services` (root, Debian's mirrors)")
