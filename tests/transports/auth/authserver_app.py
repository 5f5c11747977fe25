"""The app ``mrtr serve --app authserver_app:app`` serves in the CLI test: ``whoami``
(the caller's subject) and ``purge`` (needs the ``admin`` scope)."""

from __future__ import annotations

from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp

app = McpApp("authserver-cli-test", "1.0")


@app.tool
def whoami(ctx: Context) -> str:
    """The caller's subject."""
    return ctx.identity.subject if ctx.identity is not None else "nobody"


@app.tool(scopes=["admin"])
def purge(ctx: Context) -> str:
    """Needs the admin scope."""
    return "purged"
