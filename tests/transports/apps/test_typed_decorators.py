"""``mypy --strict`` on a small user program with ``@app.tool`` (bare) and ``@app.tool()``.

The decorators keep the decorated function's type, and check the options given.  mypy
runs as a real subprocess on the package's sources (``mrtr_transports`` is the
``transports`` folder, so it is reached through a folder of links on ``MYPYPATH``:
``support.typecheck``, whose cache the other type-checking tests share).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.typecheck import run_mypy

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

PROGRAM = '''
from typing import Annotated

import attrs
from mrtr_transports.apps.mcp_app import Context, McpApp

app = McpApp("weather", "1.0")


@attrs.frozen
class Forecast:
    city: str
    days: int


@app.tool
def forecast(ctx: Context, city: Annotated[str, "the city"], days: int = 1) -> Forecast:
    """The forecast for a city."""
    return Forecast(city, days)


@app.tool()
def echo(ctx: Context) -> str:
    return str(ctx.arguments.get("text", ""))


@app.tool("add", description="Adds two numbers")
def add(a: int, b: int) -> int:
    return a + b


@app.prompt
def haiku(topic: str) -> str:
    return f"A haiku about {topic}"


@app.completion
def complete(ctx: Context) -> dict[str, object]:
    return {}


def uses(ctx: Context) -> None:
    kept: Forecast = forecast(ctx, "Lisbon", days=2)
    total: int = add(1, 2)
    print(kept, total, echo(ctx), haiku("tea"))
'''

MISTAKES = """
from mrtr_transports.apps.mcp_app import McpApp

app = McpApp("weather", "1.0")


@app.tool(description=3)
def wrong_option(a: int) -> int:
    return a


@app.tool
def add(a: int, b: int) -> int:
    return a + b


text: str = add(1, 2)
"""


def mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    program = tmp_path / "user_program.py"
    program.write_text(source)
    return run_mypy([program], "--strict", cwd=tmp_path)


def test_mypy_strict_passes_on_a_program_with_bare_and_called_decorators(tmp_path: Path) -> None:
    done = mypy(tmp_path, PROGRAM)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout


def test_mypy_strict_catches_a_wrong_option_and_a_wrong_use_of_a_tool(tmp_path: Path) -> None:
    done = mypy(tmp_path, MISTAKES)
    assert done.returncode == 1
    assert 'No overload variant of "__call__" of "Decorator" matches' in done.stdout
    assert 'expression has type "int", variable has type "str"' in done.stdout
    assert "Found 3 errors in 1 file" in done.stdout, done.stdout  # (+ its untyped result)
