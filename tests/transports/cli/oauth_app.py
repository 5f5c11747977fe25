"""The app ``mrtr serve --app oauth_app:app`` serves in ``test_call_oauth.py``: ``whoami``
(the caller's subject, any token) and ``deploy`` (needs the ``tools:deploy`` scope)."""

from __future__ import annotations

from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp

app = McpApp("oauth-cli-test", "1.0")


@app.tool
def whoami(ctx: Context) -> str:
    """The caller's subject."""
    return ctx.identity.subject if ctx.identity is not None else "nobody"


@app.tool(scopes=["tools:deploy"])
def deploy(ctx: Context, target: str) -> str:
    """Needs the tools:deploy scope."""
    who = ctx.identity.subject if ctx.identity is not None else "nobody"
    return f"{who} deployed {target}"
