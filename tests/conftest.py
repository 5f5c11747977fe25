"""Shared test settings: Hypothesis profiles, markers by folder, the loops, xdist groups.

Hypothesis profiles (``HYPOTHESIS_PROFILE``): ``quick``, the default, runs a fifth of the
examples with fresh random ones on every run, for the local loop; ``ci`` (set by
``.ci/run``) runs the full budgets derandomized, so a submission is judged on the same
examples every time.  A test that needs more or fewer examples than its profile says so
with ``support.budget.examples(times=...)``.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from support.budget import FULL_EXAMPLES
from support.marker_logic import never_true
from support.xdist_groups import name_its_group

#: Both profiles: "input generation is slow" is a wall-clock guess, and on parallel workers
#: sharing two cores it fails tests whose inputs are fine (seen at a load of 11).
_SHARED_CORES = {"suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile(
    "ci", max_examples=FULL_EXAMPLES, derandomize=True, print_blob=True, **_SHARED_CORES
)
settings.register_profile("quick", max_examples=20, **_SHARED_CORES)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "quick"))

#: The loops a test marked ``anyio`` runs on: trio (the default host) and asyncio.
_BACKENDS = ("trio", "asyncio")
_RUNNERS = ("trio", "anyio", "asyncio")

TESTS = Path(__file__).resolve().parent

#: Every test under one of these folders (relative to tests/) carries these markers, so
#: ``-m`` can leave whole kinds out; a slow test elsewhere is marked where it is written.
FOLDER_MARKERS: dict[str, tuple[str, ...]] = {
    "fuzz": ("slow", "subprocess"),
    "packaging": ("slow", "subprocess"),
    "transports/interop": ("interop", "subprocess"),
    "transports/load": ("slow", "serial"),
    "transports/scale": ("scale",),
}

#: The legs of the official conformance suite (a Node program run against us).
CONFORMANCE_LEGS = (
    "transports/testing/test_conformance_client.py",
    "transports/testing/test_conformance_client_auth.py",
    "transports/cli/test_call_conformance_auth.py",
    "transports/testing/test_conformance_server.py",
    "transports/asgi/test_asgi_conformance.py",
)
_LEG_MARKERS = ("conformance", "subprocess")

#: Files marked as a folder would be, where the rest of their folder is not: the auth tests
#: that run the OpenID provider (a Node process, like the interop peers) beside auth tests
#: that run none.
_WITH_THE_PROVIDER = ("interop", "subprocess")
FILE_MARKERS: dict[str, tuple[str, ...]] = {
    "transports/auth/test_oidc_provider.py": _WITH_THE_PROVIDER,
    "transports/auth/test_end_to_end.py": _WITH_THE_PROVIDER,
    "transports/auth/test_dpop_end_to_end.py": _WITH_THE_PROVIDER,
    "transports/auth/test_sdk_clients_auth.py": _WITH_THE_PROVIDER,
    "transports/auth/test_serve_introspection.py": _WITH_THE_PROVIDER,
    "transports/cli/test_call_oauth.py": _WITH_THE_PROVIDER,
    "transports/cli/test_call_oauth_ws.py": _WITH_THE_PROVIDER,
    "transports/cli/test_call_dpop_key.py": _WITH_THE_PROVIDER,
    "transports/client/test_ws_auth.py": _WITH_THE_PROVIDER,
    "transports/client/test_oauth_ws_sign_in.py": _WITH_THE_PROVIDER,
}


def _file_markers(where: str) -> tuple[str, ...]:
    """The markers of the test file at ``where`` (relative to tests/) as a whole."""
    return _LEG_MARKERS if where in CONFORMANCE_LEGS else FILE_MARKERS.get(where, ())


def pytest_configure(config: pytest.Config) -> None:
    """A folder or leg moved away would silently lose its markers (and ``make check``
    would run it): say so instead."""
    marked = (*FOLDER_MARKERS, *CONFORMANCE_LEGS, *FILE_MARKERS)
    gone = [p for p in marked if not (TESTS / p).exists()]
    if gone:
        raise pytest.UsageError(f"tests/conftest.py marks {gone}, which no longer exist")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A folder or leg whose markers the ``-m`` expression rules out is not even imported.

    ``make check`` leaves out every test of the interop, scale, load, fuzz, packaging and
    conformance files; deselecting them after collection would still import each of them
    (the official SDK, redis' client ...) on every worker: seconds of CPU per worker.
    """
    if not config.option.markexpr or not collection_path.is_relative_to(TESTS):
        return None
    where = collection_path.relative_to(TESTS).as_posix()
    carried = FOLDER_MARKERS.get(where) or _file_markers(where)
    if carried and never_true(config.option.markexpr, frozenset(carried)):
        return True
    return None


@pytest.fixture(params=_BACKENDS)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Each ``@pytest.mark.anyio`` test runs on every loop the host layer supports."""
    return str(request.param)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        _mark_by_folder(item)
        _run_async_under_trio(item)
        if xdist and not _one_at_a_time_if_serial(item):
            _keep_shared_fixtures_on_one_worker(item)
        if getattr(config.option, "loadgroup", False):  # (an xdist worker, --dist loadgroup:
            # support/xdist_groups.py says why this is ours to do)
            name_its_group(item)


def _mark_by_folder(item: pytest.Item) -> None:
    if not item.path.is_relative_to(TESTS):  # e.g. a pytester run in a temporary folder
        return
    where = item.path.relative_to(TESTS).as_posix()
    for folder, names in FOLDER_MARKERS.items():
        if where.startswith(folder + "/"):
            for name in names:
                item.add_marker(name)
    for name in _file_markers(where):
        item.add_marker(name)


def _run_async_under_trio(item: pytest.Item) -> None:
    """An ``async def`` test with no runner marker runs under trio (pytest-trio)."""
    test = getattr(item, "obj", None)
    inner = getattr(getattr(test, "hypothesis", None), "inner_test", None)
    if not inspect.iscoroutinefunction(inner or test):
        return
    if any(item.get_closest_marker(name) is not None for name in _RUNNERS):
        return
    item.add_marker(pytest.mark.trio)


def _one_at_a_time_if_serial(item: pytest.Item) -> bool:
    """The ``serial`` tests (load and backpressure: each a server and its clients at full
    speed) run one after another on one worker, while the other workers go on with the
    rest.  They used to run after everything else, alone: the last two minutes of
    ``make test``, on a machine that other work keeps busy anyway."""
    if item.get_closest_marker("serial") is None:
        return False
    item.add_marker(pytest.mark.xdist_group("serial"))
    return True


#: Broadest first: a test that uses a session fixture and a module one is grouped by the first.
_SHARED_SCOPES = ("session", "package", "module")


def _keep_shared_fixtures_on_one_worker(item: pytest.Item) -> None:
    """Tests sharing a module- or session-scoped fixture of ours run on one xdist worker.

    ``--dist loadgroup`` (the Makefile's) spreads tests one by one; each worker would
    otherwise build its own copy of a fixture meant to be built once (a virtualenv, a
    peer server, nginx and redis).  The group is what shares one copy of the fixture: the
    test's module for a module-scoped one (wherever it is defined), else the module or
    folder that defines it; and, for a parametrized fixture, which of its values the test
    uses: each value is a copy of its own, so the values can go to different workers
    (uvicorn's tests on one, hypercorn's on another).
    """
    info = getattr(item, "_fixtureinfo", None)  # pytest keeps the resolved fixtures here
    if info is None:
        return
    defs = [d for ds in info.name2fixturedefs.values() for d in ds if d.baseid]
    callspec = getattr(item, "callspec", None)
    for scope in _SHARED_SCOPES:
        for fixturedef in defs:
            if fixturedef.scope == scope:
                group = item.nodeid.split("::")[0] if scope == "module" else fixturedef.baseid
                if fixturedef.params is not None and callspec is not None:
                    # (no "]" in a group name: xdist reads NODEID@GROUP only when "@" is last)
                    group += f"#{callspec.indices.get(fixturedef.argname, '')}"
                item.add_marker(pytest.mark.xdist_group(group))
                return


#: A skip reason that holds this is a whole kind of test not run (the scale-out tests
#: without nginx and redis): repeated in a banner at the end, not lost among the skips.
LOUD_SKIP = "NOT TESTED: "


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Here, read from the reports: under xdist the skips happen in the workers, and the
    # process that writes the summary loads this conftest but not the deeper ones.
    reasons = {
        str(report.longrepr[2]).removeprefix("Skipped: ")
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and LOUD_SKIP in str(report.longrepr[2])
    }
    if reasons:
        terminalreporter.section("TESTS NOT RUN", sep="!", red=True, bold=True)
        for reason in sorted(reasons):
            terminalreporter.line(reason, red=True, bold=True)
