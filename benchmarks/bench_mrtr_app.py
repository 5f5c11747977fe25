"""Our side of ``bench_transports.py``: an ``McpApp`` with the two benchmark tools.

Served by our own command lines, unchanged, e.g.
``PYTHONPATH=benchmarks python -m mrtr_transports serve --stdio --app bench_mrtr_app:app``
(or ``--http 127.0.0.1:0``).  The same two tools as ``bench_mcp_peer.py``:

* ``greet``: two legs.  The first asks one form elicitation under the key
  ``name`` (an ``input_required`` result with a sealed ``requestState``); the
  retry carries the answer and the echoed state, and gets ``Hello <name>``.
* ``plain``: one leg, no input: ``done``.
"""

from __future__ import annotations

from typing import Any

from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp

import mrtr_core as m

app = McpApp("bench-mrtr", "1.0")

ASK_NAME = m.server.elicit_form(
    "What is your name?", {"name": {"type": "string"}}, required=["name"]
)


@app.tool("greet", description="Asks for a name (one form elicitation), then greets it")
def greet(ctx: Context) -> Any:
    reply = ctx.answer("name", ASK_NAME)
    if not isinstance(reply, m.wire.ElicitResult) or reply.content is None:
        return ctx.ask({"name": ASK_NAME}, state="asked")
    return f"Hello {reply.content['name']}"


@app.tool("plain", description="One leg, no input")
def plain(ctx: Context) -> str:
    return "done"
