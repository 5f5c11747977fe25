"""``TestClient`` and the pytest plugin on both loops: trio and asyncio.

Each test marked ``anyio`` runs once per loop (``tests/conftest.py``).  The tools
await their own loop's library, not anyio: on asyncio that is the case that failed
(``no running event loop``) while the host layer ran on trio only.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import pytest
import sniffio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.testing import TestClient, accept

import mrtr_core as m

pytest_plugins = ["pytester"]

CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
UNITS = m.server.elicit_form("Units?", {"units": {"type": "string"}}, required=["units"])


async def native_sleep(seconds: float) -> str:
    """The running loop's own sleep (an asyncio-only call on asyncio)."""
    library = sniffio.current_async_library()
    if library == "asyncio":
        await asyncio.wait_for(asyncio.sleep(seconds), timeout=5)
    else:
        import trio

        await trio.sleep(seconds)
    return library


def weather_app() -> McpApp:
    app = McpApp("weather", "1.0")

    @app.tool()
    async def weather(ctx: Context) -> Any:
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})
        library = await native_sleep(0.01)
        return f"Sunny in {city.content['city']} ({library})"  # type: ignore[union-attr]

    @app.tool(continuation=True)
    async def forecast(ctx: Context) -> str:
        city = await ctx.wait_for_answer("city", CITY)
        library = await native_sleep(0.01)  # parked between rounds, on this loop
        units = await ctx.wait_for_answer("units", UNITS)
        return f"{city.content['city']}: 21 {units.content['units']} ({library})"  # type: ignore[union-attr]

    return app


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_tool_awaits_the_loop_the_test_client_runs_on(anyio_backend: str, era: Any) -> None:
    # (A 2025 session asks under the method: there the answers go in order.)
    legacy = era == "legacy"
    async with TestClient(weather_app(), era=era) as client:
        oslo = accept(city="Oslo")
        answers: dict[str, Any] = {"elicitation/create": oslo} if legacy else {"city": oslo}
        result = await client.call_tool("weather", answers=answers)
        assert result["content"][0]["text"] == f"Sunny in Oslo ({anyio_backend})"
        bergen, celsius = accept(city="Bergen"), accept(units="C")
        answers = {"city": bergen, "units": celsius}
        if legacy:
            answers = {"elicitation/create": [bergen, celsius]}
        result = await client.call_tool("forecast", answers=answers)
        assert result["content"][0]["text"] == f"Bergen: 21 C ({anyio_backend})"


@pytest.mark.anyio
async def test_many_calls_at_once_on_one_test_client(anyio_backend: str) -> None:
    async with TestClient(weather_app(), answers={"city": accept(city="Oslo")}) as client:
        results: list[str] = []

        async def call() -> None:
            result = await client.call_tool("weather")
            results.append(result["content"][0]["text"])

        async with anyio.create_task_group() as tasks:
            for _ in range(20):
                tasks.start_soon(call)
        assert results == [f"Sunny in Oslo ({anyio_backend})"] * 20


SHOP = (Path(__file__).parent / "shop_app.py").read_text()
ASYNCIO_TESTS = """
import asyncio
import sniffio

async def test_on_asyncio(mrtr_client):
    await asyncio.sleep(0)  # an asyncio-only call, in the test and in its fixtures' loop
    assert sniffio.current_async_library() == "asyncio"
    assert "buy" in {tool["name"] for tool in await mrtr_client.list_tools()}
"""


@pytest.mark.subprocess  # a pytest child per option, as in test_pytest_plugin.py
@pytest.mark.parametrize(
    "options",
    [["-o", "mrtr_backend=asyncio"], ["-o", "asyncio_mode=auto"]],
    ids=["mrtr_backend", "pytest-asyncio-auto"],
)
def test_the_plugin_fixtures_run_on_asyncio(pytester: pytest.Pytester, options: list[str]) -> None:
    # Either by the plugin's option, or under pytest-asyncio's auto mode.
    pytester.makepyfile(shop_app=SHOP)
    pytester.makeconftest(
        "import pytest, shop_app\n\n@pytest.fixture\ndef mrtr_app():\n    return shop_app.app\n"
    )
    pytester.makepyfile(test_loop=ASYNCIO_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *options)
    result.assert_outcomes(passed=1)
