"""A deploy tool whose side effect must happen exactly once, even against replays.

The tool asks the user to confirm (form elicitation), then deploys.  The
deployment is guarded by ``ctx.once("deploy")`` with a single-use store, so:

* in a normal flow it runs once;
* a client that replays the confirmed leg (a retry after a lost answer, or an
  attacker with a captured state) gets -32602 ``replayed``, and nothing runs;
* a client that replays an *earlier* state and walks forward again reaches
  the guard with the same flow id, and is refused the same way.

Run: ``.venv/bin/python examples/deploy.py``.
"""

from __future__ import annotations

from typing import Any

import mrtr_core as m

CONFIRM = m.elicit_form(
    "Deploy to production?", {"confirm": {"type": "boolean"}}, required=["confirm"]
)
deployments: list[str] = []


def deploy(ctx: m.HandlerContext) -> Any:
    env = ctx.arguments.get("env", "staging")
    answer = ctx.answer("confirm", CONFIRM)
    if answer is None:
        return ctx.ask({"confirm": CONFIRM}, state={"env": env})
    if answer.action != "accept" or not (answer.content or {}).get("confirm"):  # type: ignore[union-attr]
        return {"content": [{"type": "text", "text": "Not deployed."}]}
    if ctx.once("deploy"):
        deployments.append(env)  # the side effect: exactly once per flow
    return {"content": [{"type": "text", "text": f"Deployed to {env}."}]}


def main() -> None:
    sealer = m.StateSealer({"k1": m.StateSealer.new_key()}, "k1", store=m.MemoryNonceStore())
    info = m.RequestInfo(
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

    def leg(request_params: dict[str, Any], now: float) -> dict[str, Any]:
        request = m.Request(id=1, method="tools/call", params=request_params)
        try:
            return m.run_handler(deploy, request, info, sealer=sealer, principal="ada", now=now)
        except m.MrtrError as exc:
            return {"error": m.error_response(1, exc).error.data}

    asked = leg(params, now=0.0)
    print("leg 1:", list(asked["inputRequests"]))
    yes = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    confirmed = {**params, "requestState": asked["requestState"], "inputResponses": yes}
    print("leg 2:", leg(confirmed, now=1.0)["content"][0]["text"])
    print("replay of leg 2:", leg(confirmed, now=2.0))
    assert deployments == ["prod"], deployments
    print("deployments:", deployments)


if __name__ == "__main__":
    main()
