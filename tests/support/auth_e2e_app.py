"""The app ``mrtr serve --http --auth-...`` serves in the end-to-end authorization tests
(``--app support.auth_e2e_app:app``): a tool any token may call, one that needs the
``tools:deploy`` scope, an MRTR tool that asks for input (its sealed ``requestState`` is
the caller's) and a task tool (its task is the caller's).  Each says who called it, so a
test sees the identity the server took from the token."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.apps.task_runs import TaskContext

import mrtr_core as m

app = McpApp("auth-e2e", "1.0")

CONFIRM = m.server.elicit_form("Deploy now?", {"ok": {"type": "boolean"}}, required=["ok"])


def _subject(ctx: Context) -> str:
    return ctx.identity.subject if ctx.identity is not None else "nobody"


@app.tool
def whoami(ctx: Context) -> str:
    """The caller as the token says: subject, client and scopes (JSON)."""
    identity = ctx.identity
    if identity is None:
        return json.dumps(None)
    said = {"sub": identity.subject, "client_id": identity.client_id}
    return json.dumps({**said, "scopes": sorted(identity.scopes)})


@app.tool(scopes=["tools:deploy"])
def deploy(ctx: Context, target: str = "staging") -> str:
    """Needs the tools:deploy scope."""
    return f"deployed {target} for {_subject(ctx)}"


@app.tool
def confirm(ctx: Context) -> Any:
    """Asks (an input_required round), then answers the caller who confirmed."""
    answer = ctx.answer("ok", CONFIRM)
    if answer is None:
        return ctx.ask({"ok": CONFIRM})
    return f"confirmed for {_subject(ctx)}"


@app.tool(task="optional")
def build(ctx: Context, seconds: float = 0.0) -> Any:
    """Runs as a task (when the client declared the extension) for ``seconds``."""
    return ctx.run_task(_build, seconds)


async def _build(task: TaskContext, seconds: float) -> str:
    await anyio.sleep(seconds)  # a tasks/cancel of its owner cancels it here
    subject = task.identity.subject if task.identity is not None else "nobody"
    return f"built for {subject}"
