"""A deploy tool whose side effect must happen exactly once, and only when confirmed.

The tool asks the user to confirm (form elicitation), then deploys.  The
deployment is guarded by ``ctx.once("deploy")``, and the app spends every
redeemed ``requestState`` in its single-use store before the handler runs, so:

* in a normal flow it runs once;
* a client that replays the confirmed leg (a retry after a lost answer, or an
  attacker with a captured state) gets -32602 ``replayed``, and nothing runs;
  so does one that replays an *earlier* state to walk forward again;
* a client that skips the question and sends ``inputResponses.confirm`` on its
  first call, with no ``requestState``, reaches the guard with an answer nothing
  proves was asked: ``ctx.once`` refuses with -32602 ``unproven`` and nothing
  runs.  (With ``@app.tool(require_proof=True)`` such an answer would read as
  missing instead, and the client would simply be asked.)
* a user who declines (or cancels, or answers no) gets a tool error
  (``isError``) saying nothing was deployed, and nothing runs.

Run: ``.venv/bin/python examples/deploy.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio
from mrtr_transports import Context, McpApp, MrtrError, elicit_form, tool_error

import mrtr_core as m

CONFIRM = elicit_form(
    "Deploy to production?", {"confirm": {"type": "boolean"}}, required=["confirm"]
)
deployments: list[str] = []
app = McpApp("deployer", "1.0", principal="ada")


@app.tool()
def deploy(ctx: Context) -> Any:
    """Deploys after the user confirms."""
    env = ctx.arguments.get("env", "staging")
    answer = ctx.answer("confirm", CONFIRM)
    if answer is None:
        return ctx.ask({"confirm": CONFIRM}, state={"env": env})
    if answer.action != "accept" or not (answer.content or {}).get("confirm"):
        # Declined, cancelled or answered no: a tool error, so nobody reads it as deployed.
        return tool_error(f"Not deployed to {env}: the user did not confirm.")
    if ctx.once("deploy"):
        deployments.append(env)  # the side effect: exactly once per flow
    return f"Deployed to {env}."


class Silent:
    """The Outlet of a leg: this tool streams nothing before its result."""

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        pass

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        pass

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        pass


async def main() -> None:
    info = m.server.RequestInfo(
        id=0,
        method="tools/call",
        era="modern",
        protocol_version="2026-07-28",
        capabilities={"elicitation": {}},
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=False,
    )
    params: dict[str, Any] = {"name": "deploy", "arguments": {"env": "prod"}}

    async def leg(request_params: dict[str, Any]) -> Mapping[str, Any]:
        request = m.Request(id=1, method="tools/call", params=request_params)
        try:
            return await app.handle(request, info, Silent())
        except MrtrError as exc:
            return {"error": m.error_response(1, exc).error.data}

    yes = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    print("skipping the question:", await leg({**params, "inputResponses": yes}))
    asked = await leg(params)
    print("leg 1:", list(asked["inputRequests"]))
    confirmed = {**params, "requestState": asked["requestState"], "inputResponses": yes}
    print("leg 2:", (await leg(confirmed))["content"][0]["text"])
    print("replay of leg 2:", await leg(confirmed))
    no = {"confirm": {"action": "decline"}}
    again = await leg(params)
    declined = await leg({**params, "requestState": again["requestState"], "inputResponses": no})
    print("declined:", declined["content"][0]["text"], "isError:", declined["isError"])
    assert deployments == ["prod"], deployments
    print("deployments:", deployments)


if __name__ == "__main__":
    trio.run(main)
