"""The pytest plugin, as a user meets it: a project with no configuration, its own app
and test file, run by pytest in a subprocess; the outcomes say what the plugin caught."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess

pytest_plugins = ["pytester"]

SHOP_APP = (Path(__file__).parent / "shop_app.py").read_text()

CONFTEST = """
import pytest
import shop_app

@pytest.fixture
def mrtr_app():
    return shop_app.app
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A user's project: the shop app and a conftest that names it, nothing else."""
    pytester.makepyfile(shop_app=SHOP_APP)
    pytester.makeconftest(CONFTEST)
    return pytester


def test_tests_using_the_client_run_under_trio_with_scripted_answers(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_shop="""
        import trio
        import pytest
        from mrtr_transports.testing import accept, decline

        async def test_trio_runs_it(mrtr_client):
            await trio.sleep(0)
            assert trio.lowlevel.current_task() is not None

        async def test_plan_trip(mrtr_client, mrtr_answers):
            mrtr_answers["traveller"] = accept(name="Ada")
            result = await mrtr_client.call_tool(
                "plan_trip", {"to": "Lisbon"}, answers={"nights": accept(nights=2)}
            )
            assert result["content"][0]["text"] == "Trip to Lisbon for Ada: 2 nights."
            assert [list(r.input_requests) for r in mrtr_client.last_call.rounds] == [
                ["traveller"], ["nights"]
            ]

        @pytest.mark.mrtr_era("modern", "legacy")
        async def test_both_eras(mrtr_client, mrtr_era, mrtr_answers):
            mrtr_answers["*"] = decline()
            result = await mrtr_client.call_tool("plan_trip", {"to": "Rome"})
            assert mrtr_client.era == mrtr_era
            assert result["content"][0]["text"] == "No trip: nobody is travelling."

        async def test_an_unexpected_question_fails(mrtr_client):
            await mrtr_client.call_tool("plan_trip", {"to": "Oslo"})
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*no scripted answer for the input request 'traveller'*"])
    verbose = project.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-k", "both_eras")
    verbose.stdout.fnmatch_lines(
        ["*test_both_eras?modern-trio? PASSED*", "*test_both_eras?legacy-trio? PASSED*"]
    )


def test_the_state_fixtures_catch_a_server_that_accepts_a_replayed_state(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_state="""
        import pytest
        import shop_app
        from mrtr_transports.testing import accept

        ANSWERS = {"traveller": accept(name="Ada"), "nights": accept(nights=3)}

        async def test_sealed_state_holds(mrtr_client, mrtr_state):
            await mrtr_client.call_tool("plan_trip", {"to": "Lisbon"}, answers=ANSWERS)
            await mrtr_state.assert_tampered_refused()
            await mrtr_state.assert_expired_refused()
            await mrtr_state.assert_replay_refused()

        @pytest.mark.parametrize("mrtr_app", [shop_app.leaky_app])
        async def test_leaky_replay(mrtr_client, mrtr_state):
            await mrtr_client.call_tool("plan_trip", {"to": "Lisbon"}, answers=ANSWERS)
            await mrtr_state.assert_tampered_refused()
            await mrtr_state.assert_replay_refused()

        @pytest.mark.parametrize("mrtr_app", [shop_app.plain_app])
        async def test_plain_state_tampered(mrtr_client, mrtr_state):
            await mrtr_client.call_tool("count", answers={"n": accept(n=1)})
            await mrtr_state.assert_tampered_refused()

        @pytest.mark.parametrize("mrtr_app", [shop_app.plain_app])
        async def test_plain_state_expired(mrtr_client, mrtr_state):
            await mrtr_client.call_tool("count", answers={"n": accept(n=1)})
            await mrtr_state.assert_expired_refused()
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*_ test_leaky_replay*",
            "*AssertionError: a replayed requestState (round 1 of tools/call of 'plan_trip') "
            "should be refused with a JSON-RPC error -32602, but the server accepted it*",
            "*_ test_plain_state_tampered*",
            "*AssertionError: a tampered requestState*should be refused*accepted it*",
            "*_ test_plain_state_expired*",
            "*AssertionError: an expired requestState*should be refused*accepted it*",
        ]
    )


def test_the_run_twice_detector_fails_an_effect_before_the_question(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_effects="""
        import shop_app
        from mrtr_transports.testing import accept

        async def test_buy_charges_once(mrtr_client, mrtr_effects):
            mrtr_effects.watch(shop_app, "charge_card")
            answers = {"confirm": accept(ok=True)}
            await mrtr_client.call_tool("buy", {"item": "lamp"}, answers=answers)
            mrtr_effects.assert_each_once()
            assert mrtr_effects.count("shop_app.charge_card") == 1

        async def test_buy_unsafe_charges_twice(mrtr_client, mrtr_effects):
            mrtr_effects.watch(shop_app, "charge_card")
            await mrtr_client.call_tool(
                "buy_unsafe", {"item": "book"}, answers={"confirm": accept(ok=True)}
            )
            mrtr_effects.assert_each_once()
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*shop_app.charge_card('book', 1200) ran 2 times in one tools/call of "
            "'buy_unsafe' (legs 1, 2)*",
            "*guard the effect with `if ctx.once('...'):`*",
        ]
    )


def test_the_app_can_be_named_in_the_configuration(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(shop_app=SHOP_APP)
    pytester.makeini("[pytest]\nmrtr_app = shop_app:app\n")
    pytester.makepyfile(
        test_named="""
        async def test_tools(mrtr_client):
            assert "plan_trip" in {tool["name"] for tool in await mrtr_client.list_tools()}
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_without_an_app_the_fixture_says_how_to_give_one(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_no_app="""
        async def test_tools(mrtr_client):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*define a fixture `mrtr_app` that returns it*"])


def test_a_project_on_asyncio_keeps_its_runner(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_other="""
        import pytest
        import sniffio

        @pytest.mark.anyio
        async def test_on_asyncio():
            assert sniffio.current_async_library() == "asyncio"

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        async def test_unmarked_with_the_client_goes_to_trio(mrtr_client):
            assert sniffio.current_async_library() == "trio"
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_the_documented_test_file_passes_through_the_plugin(pytester: pytest.Pytester) -> None:
    doc = (Path(__file__).parents[3] / "docs" / "testing.md").read_text()
    example = doc.split("<!-- plugin example -->\n```python\n", 1)[1].split("```", 1)[0]
    pytester.makepyfile(test_documented=example)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_buying_asks_first?legacy-trio? PASSED*"])
    # Charging before the question, the same test file fails, saying where it ran twice.
    first_line = '    confirm = ctx.answer("confirm", CONFIRM)\n'
    assert first_line in example
    charge_first = example.replace(first_line, '    charge(ctx.arguments["item"])\n' + first_line)
    pytester.makepyfile(test_documented=charge_first)
    unguarded = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    unguarded.assert_outcomes(passed=3, failed=1)
    unguarded.stdout.fnmatch_lines(
        ["*test_documented.charge('lamp') ran 3 times in one tools/call of 'buy' (legs 1, 2, 2)*"]
    )


def test_a_project_in_trio_mode_keeps_it(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ntrio_mode = true\n")
    project.makepyfile(
        test_trio_mode="""
        import trio

        async def test_tools(mrtr_client):
            await trio.sleep(0)
            assert "buy" in {tool["name"] for tool in await mrtr_client.list_tools()}
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_plugin_loads_where_only_the_core_is_installed() -> None:
    # pytest imports the plugin wherever mrtr is installed, trio or not.
    code = (
        "import sys\n"
        "for name in ('trio', 'h11', 'wsproto'):\n"
        "    sys.modules[name] = None  # not installed\n"
        "import mrtr_transports.testing.pytest_plugin\n"
        "print(sorted(n for n in sys.modules if n.startswith('mrtr_transports')))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert ran.stdout.strip() == (
        "['mrtr_transports', 'mrtr_transports.testing', 'mrtr_transports.testing.pytest_plugin']"
    )


# --- Beside other runners: the plugin runs only the tests that use its loop fixtures --------

BESIDE = """
import asyncio
import pytest
import sniffio

async def test_client_unmarked_runs_on_trio(mrtr_client):
    assert sniffio.current_async_library() == "trio"
    assert "buy" in {tool["name"] for tool in await mrtr_client.list_tools()}

@pytest.mark.trio
async def test_client_marked_trio_keeps_pytest_trio(mrtr_client):
    assert sniffio.current_async_library() == "trio"
    assert "buy" in {tool["name"] for tool in await mrtr_client.list_tools()}

@pytest.mark.anyio
async def test_marked_anyio_keeps_anyio(anyio_backend):
    assert sniffio.current_async_library() == anyio_backend

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.asyncio
async def test_marked_asyncio_keeps_pytest_asyncio():
    await asyncio.sleep(0)

async def test_unmarked_without_the_fixtures_is_not_ours():
    await asyncio.sleep(0)
"""


@pytest.mark.parametrize("setting", ["plain", "pytest-asyncio"])
def test_the_plugin_takes_only_the_tests_using_its_loop_fixtures(
    project: pytest.Pytester, setting: str
) -> None:
    # In a plain project (no asyncio plugin) and beside pytest-asyncio (strict mode,
    # its default): an unmarked async test without mrtr's fixtures is left alone
    # (pytest refuses it: nobody runs it), the marked ones keep their runners.
    source = BESIDE
    options = ["-p", "no:cacheprovider", "-v"]
    if setting == "plain":
        options += ["-p", "no:asyncio"]
        source = source.replace("@pytest.mark.asyncio\n", "@pytest.mark.anyio\n")
    project.makepyfile(test_beside=source)
    result = project.runpytest_subprocess(*options)
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_client_unmarked_runs_on_trio?trio? PASSED*",
            "*test_client_marked_trio_keeps_pytest_trio PASSED*",
            "*test_unmarked_without_the_fixtures_is_not_ours FAILED*",
            "*async def functions are not natively supported*",
        ]
    )


def test_pytest_asyncio_auto_mode_keeps_every_async_test(project: pytest.Pytester) -> None:
    # In auto mode pytest-asyncio takes every async test: the plugin runs none.
    project.makepyfile(
        test_auto="""
        import asyncio
        import sniffio

        async def test_unmarked_runs_on_asyncio():
            await asyncio.sleep(0)
            assert sniffio.current_async_library() == "asyncio"
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-o", "asyncio_mode=auto")
    result.assert_outcomes(passed=1)


def test_an_unknown_backend_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makepyfile(test_x="def test_x(): pass")
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "-o", "mrtr_backend=curio")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*mrtr_backend = curio: expected trio or asyncio*"])
