"""Our side of ``bench_transports.py``: an ``McpApp`` with the two benchmark tools.

Served by our own command lines, unchanged, e.g.
``PYTHONPATH=benchmarks python -m mrtr_transports serve --stdio --app bench_mrtr_app:app``
(or ``--http 127.0.0.1:0``).  The same two tools as ``bench_mcp_peer.py``:

* ``greet``: two legs.  The first asks one form elicitation under the key
  ``name`` (an ``input_required`` result with a sealed ``requestState``); the
  retry carries the answer and the echoed state, and gets ``Hello <name>``.
* ``plain``: one leg, no input: ``done``.
* ``parked`` and ``quick`` (for ``bench_tasks.py``): tasks whose work waits for a form
  answer, or completes at once.
"""

from __future__ import annotations

from typing import Any

from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.task_runs import TaskContext
from mrtr_transports.apps.task_store import MemoryTaskStore

import mrtr_core as m

#: (``bench_tasks.py`` creates thousands of tasks from one client: past the default shares.)
app = McpApp(
    "bench-mrtr",
    "1.0",
    tasks=MemoryTaskStore(max_tasks=1_000_000, max_tasks_per_client=1_000_000),
)

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


# Tasks (SEP-2663): ``bench_tasks.py`` creates and polls them.
async def _parked_work(task: TaskContext) -> str:
    answer = await task.wait_for_answer("name", ASK_NAME)  # input_required until answered
    return f"Hello {(answer.content or {}).get('name')}"


async def _quick_work(task: TaskContext) -> str:
    return "done"


@app.tool("parked", description="A task that waits for one form answer", task="optional")
def parked(ctx: Context) -> Any:
    return ctx.run_task(_parked_work)


@app.tool("quick", description="A task that completes at once", task="optional")
def quick(ctx: Context) -> Any:
    return ctx.run_task(_quick_work)
