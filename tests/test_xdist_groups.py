"""``--dist loadgroup`` keeps an ``xdist_group`` on one worker (``support/xdist_groups.py``).

A real pytest run on two xdist workers, in a temporary project whose conftest marks its
tests as ``tests/conftest.py`` does: the tests of one group run in one process, one
module-scoped fixture is built once per group, and a group name xdist would not see is
refused rather than spread silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.xdist_groups import name_its_group

pytestmark = pytest.mark.subprocess

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

CONFTEST = """
import pytest
from support.xdist_groups import name_its_group

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(GROUP_OF(item)))
        if getattr(config.option, "loadgroup", False):
            name_its_group(item)
"""

TESTS_OF_TWO_GROUPS = """
import os
import pytest

@pytest.fixture(scope="module", params=["a", "b"])
def shared(request, tmp_path_factory):
    with open(os.environ["SEEN"], "a") as seen:
        seen.write(f"setup {request.param} {os.getpid()}\\n")
    return request.param

@pytest.mark.parametrize("n", range(4))
def test_one_of_many(shared, n):
    with open(os.environ["SEEN"], "a") as seen:
        seen.write(f"run {shared} {os.getpid()}\\n")
"""


#: The temporary project's settings (pytest-asyncio, installed here, asks for this one).
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


def _run(pytester: pytest.Pytester, group_of: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen = pytester.path / "seen.txt"
    monkeypatch.setenv("SEEN", str(seen))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    )
    pytester.makeini(INI)
    pytester.makeconftest(CONFTEST.replace("GROUP_OF(item)", group_of))
    pytester.makepyfile(test_groups=TESTS_OF_TWO_GROUPS)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--dist", "loadgroup")
    result.assert_outcomes(passed=8)
    return seen.read_text().splitlines()


def test_a_group_runs_on_one_worker_and_builds_its_fixture_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the group of a test is the value of the fixture it uses, named as the conftest does
    lines = _run(pytester, '"shared#" + item.callspec.params["shared"]', monkeypatch)
    for value in ("a", "b"):
        setups = [line for line in lines if line.startswith(f"setup {value} ")]
        runs = {line.split()[2] for line in lines if line.startswith(f"run {value} ")}
        assert len(setups) == 1, lines
        assert runs == {setups[0].split()[2]}, lines  # every test of it in that one process


@pytest.mark.parametrize("name", ["module[0]", "a@b"])
def test_a_group_name_xdist_would_not_see_is_refused(pytester: pytest.Pytester, name: str) -> None:
    pytester.makeini(INI)
    item = pytester.getitem("def test_func(): pass")
    item.add_marker(pytest.mark.xdist_group(name))
    with pytest.raises(pytest.UsageError, match="xdist would not see the group"):
        name_its_group(item)


def test_the_group_is_named_in_the_id_pytest_reads(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    item = pytester.getitem("def test_func(): pass")
    name_its_group(item)  # no group: unchanged
    assert item.nodeid.endswith("::test_func")
    item.add_marker(pytest.mark.xdist_group("shared#1"))
    name_its_group(item)
    assert item.nodeid.endswith("::test_func@shared#1")
    name_its_group(item)  # (named once)
    assert item.nodeid.endswith("::test_func@shared#1")
