"""The example app's URL-elicitation tool: ``connect_provider`` (``docs/url-elicitation.md``).

It sends the user to a (demo) OAuth-style provider with ``ctx.ask_provider``
and finishes when the provider's redirect reaches the server's callback
(``{endpoint}/auth/callback``).  The provider here is a placeholder
(``provider.example`` does not exist): a test, or a person trying it, plays the
browser by opening the ``redirect_uri`` of the URL shown with its ``state`` and
a ``code``.  :func:`add_to` registers it (the example app's builder calls it), so
``mrtr serve --http`` serves it.  It needs the client's
``elicitation.url`` capability and an HTTP server (stdio has no callback).
Declined at the provider, refused or dismissed by the user, or failed at the
provider: the tool ends with a tool error that says which.
"""

from __future__ import annotations

from typing import Any

from .context import Context
from .mcp_app import McpApp
from .results import tool_error

__all__ = ["PROVIDER_URL", "add_to", "connect_provider"]

#: The demo provider's authorization URL: the server rewrites ``state`` and
#: ``redirect_uri``; the provider's own ``state`` comes back in ``provider_state``.
PROVIDER_URL = (
    "https://provider.example/authorize?response_type=code&client_id=mrtr-example"
    "&scope=read&state=demo-state&redirect_uri=https%3A%2F%2Fplaceholder.invalid%2F"
)


DESCRIPTION = (
    "Signs in to a demo OAuth-style provider through URL elicitation: shows a sign-in "
    "URL, then completes when the provider redirects back to this server's callback."
)


def add_to(app: McpApp) -> None:
    """Register ``connect_provider`` on ``app``."""
    app.add_tool(connect_provider, "connect_provider", description=DESCRIPTION)


async def connect_provider(ctx: Context) -> Any:
    outcome = await ctx.ask_provider(
        "sign_in", PROVIDER_URL, message="Sign in to the demo provider to connect it."
    )
    if outcome.ask is not None:
        return outcome.ask  # the URL round, or a requestState-only poll while pending
    if outcome.status == "completed":
        # A real app exchanges the code at the provider's token endpoint here.
        code = outcome.code or ""
        return (
            f"Connected: the provider returned an authorization code ending in {code[-4:]!r} "
            f"(provider state {outcome.provider_state!r})."
        )
    # The user or the provider said no: a tool error that says who and how, like the
    # example's other tools (see mrtr_transports.apps.example on decline and cancel).
    if outcome.error == "access_denied":
        return tool_error("Not connected: the sign-in was declined at the provider.")
    if outcome.error == "consent_declined":
        return tool_error("Not connected: you did not consent to open the sign-in page.")
    if outcome.error == "cancelled":
        return tool_error("Not connected: you dismissed the sign-in page without answering.")
    return tool_error(f"Not connected: the provider reported an error: {str(outcome.error)[:100]}")
