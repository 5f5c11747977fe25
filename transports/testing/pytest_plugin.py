"""The pytest plugin of mrtr: test an app in memory, with no configuration.

Installed with mrtr (a ``pytest11`` entry point), so pytest loads it by itself
in any environment where mrtr is installed.  It gives:

* **trio for async tests.**  mrtr's transports run on trio, so an ``async def``
  test (and the async fixtures it uses) runs under trio through pytest-trio,
  as if the project had set pytest-trio's ``trio_mode``.  A test marked for
  another runner (``asyncio``, ``anyio``, ``trio``) keeps its marker; a project
  that set ``trio_mode`` already gets nothing more; ``mrtr_trio_mode = false``
  in the pytest configuration turns this off.  pytest-trio comes with the
  ``testing`` extra (``pip install 'mrtr[testing]'``); without it the fixtures
  below say so.
* **Fixtures.**  ``mrtr_app`` (the app under test: override it, or name it in
  the configuration as ``mrtr_app = package.module:app``), ``mrtr_era``
  (``"modern"``; ``@pytest.mark.mrtr_era("modern", "legacy")`` runs the test
  once per era), ``mrtr_answers`` (the client's answer script, filled by the
  test), ``mrtr_client`` (a :class:`~mrtr_transports.testing.client.TestClient`
  of the app, open), ``mrtr_state`` (the request-state attacks:
  tampered, expired, replayed) and ``mrtr_effects`` (the run-twice detector).

The plugin imports nothing of mrtr's transports until a fixture is used, so it
costs nothing in a project that has only the core installed.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..server.app import ServerApp
    from .answers import AnswerScript
    from .attacks import StateAttacks
    from .client import TestClient
    from .effects import SideEffects

_OTHER_RUNNERS = ("trio", "asyncio", "anyio")
_NEEDS_TRIO = "mrtr's test fixtures run on trio: install pytest-trio (pip install 'mrtr[testing]')"
_TRIO_FIXTURES = ("mrtr_client", "mrtr_state")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "mrtr_app",
        "the app the mrtr_app fixture gives, as package.module:attribute",
        default="",
    )
    parser.addini(
        "mrtr_trio_mode",
        "run unmarked async tests under trio (pytest-trio) when trio_mode is not set",
        type="bool",
        default=True,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mrtr_era(*eras): run the test once per protocol era of the mrtr_client fixture "
        "('modern' for 2026-07-28, 'legacy' for the 2025-11-25 handshake, 'auto')",
    )


def _trio_plugin(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("trio")


def _trio_mode_already(config: pytest.Config) -> bool:
    try:
        return bool(config.getini("trio_mode"))
    except ValueError:  # (pytest-trio not loaded: no such option)
        return False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark unmarked ``async def`` tests for trio (see the module docstring)."""
    if not config.getini("mrtr_trio_mode") or not _trio_plugin(config):
        return
    if _trio_mode_already(config):
        return  # pytest-trio marks them itself
    for item in items:
        test = getattr(item, "obj", None)
        hypothesis = getattr(test, "hypothesis", None)
        if hypothesis is not None:
            test = hypothesis.inner_test
        if not inspect.iscoroutinefunction(test):
            continue
        if any(item.get_closest_marker(name) is not None for name in _OTHER_RUNNERS):
            continue
        item.add_marker(pytest.mark.trio)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``@pytest.mark.mrtr_era(...)``: one test per era."""
    marker = metafunc.definition.get_closest_marker("mrtr_era")
    if marker is None or "mrtr_era" not in metafunc.fixturenames:
        return
    eras = list(marker.args) or ["modern", "legacy"]
    unknown = sorted(set(eras) - {"modern", "legacy", "auto"})
    if unknown:
        raise pytest.UsageError(f"mrtr_era: unknown eras {unknown} (modern, legacy, auto)")
    metafunc.parametrize("mrtr_era", eras, indirect=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    fixtures = getattr(item, "fixturenames", ())
    if any(name in fixtures for name in _TRIO_FIXTURES) and not _trio_plugin(item.config):
        pytest.fail(_NEEDS_TRIO, pytrace=False)


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def mrtr_app(request: pytest.FixtureRequest) -> ServerApp:
    """The app under test: override this fixture, or set ``mrtr_app = MODULE:ATTR``."""
    spec = str(request.config.getini("mrtr_app") or "")
    if not spec:
        raise pytest.UsageError(
            "the mrtr_app fixture needs your app: define a fixture `mrtr_app` that returns it "
            "(in conftest.py), or set `mrtr_app = package.module:app` in the pytest configuration"
        )
    from ..cli.app_loading import AppSpecError, load_app

    try:
        return load_app(spec)
    except AppSpecError as exc:
        raise pytest.UsageError(f"mrtr_app = {spec}: {exc}") from exc


@pytest.fixture
def mrtr_era(request: pytest.FixtureRequest) -> str:
    """The era ``mrtr_client`` opens in: ``"modern"`` unless ``mrtr_era`` marks the test."""
    return str(getattr(request, "param", "modern"))


@pytest.fixture
def mrtr_answers() -> AnswerScript:
    """The answers ``mrtr_client`` gives by default: fill it in the test."""
    from .answers import AnswerScript

    return AnswerScript()


@pytest.fixture
async def mrtr_client(
    mrtr_app: ServerApp, mrtr_era: str, mrtr_answers: AnswerScript
) -> AsyncIterator[TestClient]:
    """An open :class:`~mrtr_transports.testing.client.TestClient` of ``mrtr_app``."""
    from .client import TestClient

    era: Any = mrtr_era
    async with TestClient(mrtr_app, era=era, answers=mrtr_answers) as client:
        yield client


@pytest.fixture
def mrtr_state(mrtr_client: TestClient) -> StateAttacks:
    """Tampered, expired and replayed ``requestState`` against ``mrtr_client``'s app."""
    from .attacks import StateAttacks

    return StateAttacks(mrtr_client)


@pytest.fixture
def mrtr_effects() -> Iterator[SideEffects]:
    """The run-twice detector: ``watch`` effects, then ``assert_each_once()``."""
    from .effects import SideEffects

    effects = SideEffects()
    try:
        yield effects
    finally:
        effects.restore()
