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

#: tests/conftest.py repeats a skip whose reason says NOT TESTED in a banner at the end.
_NOT_TESTED = "SCALE-OUT NOT TESTED: "


# Per module, not per session: it only looks the binaries up, and tests/conftest.py keeps the
# tests sharing a session fixture on one xdist worker (all twenty of them, one by one).
@pytest.fixture(scope="module")
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
