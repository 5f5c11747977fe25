"""Shared test settings.

CI runs hypothesis derandomized (``HYPOTHESIS_PROFILE=ci``, set by ``.ci/run``), so a
submission is judged on the same examples every time; developers get fresh random
examples by default.
"""

import inspect
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

#: The loops a test marked ``anyio`` runs on: trio (the default host) and asyncio.
_BACKENDS = ("trio", "asyncio")
_RUNNERS = ("trio", "anyio", "asyncio")


@pytest.fixture(params=_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Each ``@pytest.mark.anyio`` test runs on every loop the host layer supports."""
    return str(request.param)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """An ``async def`` test with no runner marker runs under trio (pytest-trio)."""
    for item in items:
        test = getattr(item, "obj", None)
        inner = getattr(getattr(test, "hypothesis", None), "inner_test", None)
        if not inspect.iscoroutinefunction(inner or test):
            continue
        if any(item.get_closest_marker(name) is not None for name in _RUNNERS):
            continue
        item.add_marker(pytest.mark.trio)
