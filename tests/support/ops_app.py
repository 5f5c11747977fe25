"""The app of the operations tests (``tests/transports/server/test_serve_operations.py``).

Served by path (``--app tests/support/ops_app.py:app``), as a user would name a file.
``slow`` says on stderr when it has started, so a test can signal the server while
a call is in flight; ``boom`` raises (its traceback belongs on the server's stderr,
never in the client's answer); ``ask_name`` asks a question, so its first answer
carries a sealed ``requestState``.
"""

from __future__ import annotations

import sys
from typing import Any

import trio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp

import mrtr_core as m

app = McpApp("ops-test", "1.0")

#: What ``slow`` writes on stderr once it runs.
SLOW_STARTED = "ops: slow started"
#: The text ``boom`` raises with: internal, for the server's log only.
BOOM_DETAIL = "internal detail 4242"

NAME = m.server.elicit_form("What is your name?", {"name": {"type": "string"}}, required=["name"])


@app.tool()
async def slow(ctx: Context) -> str:
    """Sleeps ``seconds`` (default 1), then answers."""
    sys.stderr.write(SLOW_STARTED + "\n")
    sys.stderr.flush()
    await trio.sleep(float(ctx.arguments.get("seconds", 1.0)))
    return "slow done"


@app.tool()
def boom(ctx: Context) -> str:
    """Always raises."""
    raise RuntimeError(BOOM_DETAIL)


@app.tool()
def ask_name(ctx: Context) -> Any:
    """Asks the user's name, then greets them."""
    answer = ctx.answer("name", NAME)
    if answer is None:
        return ctx.ask({"name": NAME})
    return f"Hello, {answer.content.get('name')}!"  # type: ignore[union-attr]
