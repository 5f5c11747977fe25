"""The pytest plugin of mrtr: test an app in memory, with no configuration.

Installed with mrtr (a ``pytest11`` entry point), so pytest loads it by itself
in any environment where mrtr is installed.  It gives:

* **A runner for the tests that use its fixtures, and for no others.**  The
  rule, so that it lives beside pytest-asyncio, anyio's plugin and pytest-trio:

  - An ``async def`` test that uses ``mrtr_client`` or ``mrtr_state`` (directly
    or through other fixtures) and carries no runner marker runs on the loop
    the ``mrtr_backend`` option names: ``trio`` (the default) or ``asyncio``.
    It runs through anyio's test runner (anyio's pytest plugin, installed with
    anyio), so its async fixtures share that loop; its id gains the loop's name
    (``test_buy[trio]``).
  - A test marked ``anyio``, ``asyncio`` or ``trio`` keeps its runner, which
    sets up the fixtures on its own loop (pytest-asyncio does so for plain async
    fixtures in its ``asyncio_mode = auto`` only).
  - A project whose runner takes every async test (pytest-trio's
    ``trio_mode = true``, pytest-asyncio's ``asyncio_mode = auto``, anyio's
    ``anyio_mode = auto``) keeps it: the plugin runs nothing then.
  - Every other async test is none of the plugin's business.

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

import contextlib
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

#: Markers of the runners a test may choose for itself.
_RUNNERS = ("anyio", "asyncio", "trio")
#: The fixtures that need a running loop: a test using one is the plugin's to run.
_LOOP_FIXTURES = ("mrtr_client", "mrtr_state")
_BACKENDS = ("trio", "asyncio")
#: The keyword of the tests the plugin runs (a mark of their loop's parameter).
_MARK = "mrtr_loop"
_NEEDS_ANYIO = (
    "mrtr's test fixtures run through anyio's pytest plugin: install mrtr's transports "
    "(pip install 'mrtr[testing]')"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "mrtr_app",
        "the app the mrtr_app fixture gives, as package.module:attribute",
        default="",
    )
    parser.addini(
        "mrtr_backend",
        "the loop an unmarked async test using mrtr_client or mrtr_state runs on: "
        "trio (the default) or asyncio",
        default="trio",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mrtr_era(*eras): run the test once per protocol era of the mrtr_client fixture "
        "('modern' for 2026-07-28, 'legacy' for the 2025-11-25 handshake, 'auto')",
    )
    config.addinivalue_line(
        "markers", f"{_MARK}: set by mrtr's plugin on the tests it runs (on mrtr_backend)"
    )
    backend = _backend(config)
    if backend not in _BACKENDS:
        raise pytest.UsageError(f"mrtr_backend = {backend}: expected trio or asyncio")


def _backend(config: pytest.Config) -> str:
    return str(config.getini("mrtr_backend") or "trio").strip()


def _ini(config: pytest.Config, name: str) -> str:
    try:
        return str(config.getini(name) or "").strip().lower()
    except ValueError:  # (that runner's plugin is not loaded: no such option)
        return ""


def _auto_mode(config: pytest.Config) -> bool:
    """Another runner takes every async test (see the module docstring)."""
    if config.pluginmanager.has_plugin("trio") and _ini(config, "trio_mode") in ("true", "1"):
        return True
    asyncio_mode = config.getoption("asyncio_mode", None) or _ini(config, "asyncio_mode")
    if config.pluginmanager.has_plugin("asyncio") and asyncio_mode == "auto":
        return True
    anyio_mode = config.getoption("anyio_mode", None) or _ini(config, "anyio_mode")
    return anyio_mode == "auto"


def _is_async_test(function: Any) -> bool:
    hypothesis = getattr(function, "hypothesis", None)
    return inspect.iscoroutinefunction(getattr(hypothesis, "inner_test", function))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``@pytest.mark.mrtr_era(...)``: one test per era; and the loop of the tests the
    plugin runs (the rule of the module docstring)."""
    marker = metafunc.definition.get_closest_marker("mrtr_era")
    if marker is not None and "mrtr_era" in metafunc.fixturenames:
        eras = list(marker.args) or ["modern", "legacy"]
        unknown = sorted(set(eras) - {"modern", "legacy", "auto"})
        if unknown:
            raise pytest.UsageError(f"mrtr_era: unknown eras {unknown} (modern, legacy, auto)")
        metafunc.parametrize("mrtr_era", eras, indirect=True)
    if _runs_it(metafunc):
        # A direct parameter takes the place of any ``anyio_backend`` fixture for this
        # test alone; anyio's plugin then runs it, and its async fixtures, on that loop.
        if "anyio_backend" not in metafunc.fixturenames:
            metafunc.fixturenames.append("anyio_backend")
        loop = pytest.param(_backend(metafunc.config), marks=getattr(pytest.mark, _MARK))
        metafunc.parametrize("anyio_backend", [loop])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep ``anyio_backend`` among the fixtures of the tests the plugin runs: pytest
    prunes a directly parametrized name nothing requests, but anyio's plugin sets up
    the async fixtures on its loop only for tests that have it."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or _MARK not in getattr(item, "keywords", {}):
            continue
        names = getattr(item, "fixturenames", None)
        if isinstance(names, list) and "anyio_backend" not in names:
            names.append("anyio_backend")


def _runs_it(metafunc: pytest.Metafunc) -> bool:
    if not _is_async_test(metafunc.function):
        return False
    if not any(name in metafunc.fixturenames for name in _LOOP_FIXTURES):
        return False
    if any(metafunc.definition.get_closest_marker(name) for name in _RUNNERS):
        return False
    return not _auto_mode(metafunc.config)


def pytest_runtest_setup(item: pytest.Item) -> None:
    fixtures = getattr(item, "fixturenames", ())
    needs_loop = any(name in fixtures for name in _LOOP_FIXTURES)
    if needs_loop and not item.config.pluginmanager.has_plugin("anyio"):
        pytest.fail(_NEEDS_ANYIO, pytrace=False)


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
    async with _held_open(TestClient(mrtr_app, era=era, answers=mrtr_answers)) as client:
        yield client


@contextlib.asynccontextmanager
async def _held_open(client: TestClient) -> AsyncIterator[TestClient]:
    """``client``, opened and closed by one task of its own on asyncio.

    pytest-asyncio sets an async fixture up in one task and tears it down in
    another; the client's task group must be entered and left by the same task.
    (trio's runners, and anyio's on either loop, keep a fixture in one task.)
    """
    import sniffio

    if sniffio.current_async_library() != "asyncio":
        async with client:
            yield client
        return
    import asyncio

    loop = asyncio.get_running_loop()
    opened: asyncio.Future[None] = loop.create_future()
    leave = asyncio.Event()

    async def hold() -> None:
        try:
            async with client:
                opened.set_result(None)
                await leave.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    holder = loop.create_task(hold())
    try:
        await opened
        yield client
    finally:
        leave.set()
        await holder


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
