"""An ``McpApp`` whose tools and prompt are described by their signatures alone.

Served as ``mrtr serve --stdio --app support.signature_app:app`` (``tests/`` on
``PYTHONPATH``) by ``tests/transports/apps/test_signature_server.py``.
"""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import attrs
from mrtr_transports.apps.mcp_app import Context, McpApp

app = McpApp("signatures", "1.0")


class Units(enum.Enum):
    METRIC = "metric"
    IMPERIAL = "imperial"


@attrs.frozen
class Place:
    city: str
    country: str | None = None


@attrs.frozen
class Forecast:
    place: Place
    days: int
    highs: list[float]
    units: Units


@app.tool
def forecast(
    ctx: Context,
    place: Annotated[Place, "where to forecast"],
    days: Annotated[int, "how many days"] = 1,
    units: Units = Units.METRIC,
) -> Forecast:
    """The forecast for a place."""
    return Forecast(place, days, [20.5 + day for day in range(days)], units)


@app.tool(name="add", description="Adds two numbers")
def add(a: int, b: float, mode: Literal["sum", "text"] = "sum") -> float | str:
    total = a + b
    return total if mode == "sum" else f"{a} + {b} = {total}"


@app.tool
def forget(ctx: Context, note: str) -> str:
    """Forgets to return."""
    note.upper()
    return None  # type: ignore[return-value]


@app.tool
def reset(ctx: Context) -> None:
    """An action with nothing to say."""


@app.prompt
def haiku(topic: Annotated[str, "what the haiku is about"], tone: str | None = None) -> str:
    """A haiku."""
    return f"Write a {tone or 'calm'} haiku about {topic}"


@app.resource_template("notes://{user}/{note}", mime_type="text/plain")
def note(user: str, note: str) -> str:
    """A user's note."""
    return f"note {note} of {user}"
