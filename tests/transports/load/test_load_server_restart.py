"""A server killed between two rounds: round 1 against process A, round 2 against process B.

Both processes serve ``support.load_app`` with the same state keys (the
app's sealer reads them from ``MRTR_LOAD_STATE_KEY``), on the same port, as a
restarted worker would.  One real client (``open_http_client``) runs four
calls at once, one per handler style; when every call has its first question,
A is killed with SIGKILL (nothing of it closes cleanly), B starts, and only
then are the questions answered, so every retry leg reaches B.  What must
hold, as ``docs/reliability.md`` says:

* the stateless style (``plan_trip``: its state is sealed in the
  ``requestState``) completes on B, through its next round too;
* the ``once`` style (``deploy``) and ``Steps`` (``checkout``) complete on B:
  B's single-use store never saw these flows;
* the continuation style (``tally``) fails with -32602,
  ``data.reason == "unknown_continuation"``: its handler was parked in A.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
import trio
from mrtr_transports.client.errors import CallError
from mrtr_transports.client.http import open_http_client
from support.load_flows import result_text
from support.load_servers import ServerProcess, http_server
from support.raw_http import echo, post_when_served, retry_of, tool_call

import mrtr_core as m

BUDGET = 90
#: The first question of each call (the round that A answers).
FIRST_QUESTIONS = {"Who is travelling?", "Deploy now?", "buy book?", "tally leg 1"}
ANSWERS: dict[str, dict[str, Any]] = {
    "Who is travelling?": {"name": "Ada"},
    "How many nights?": {"nights": 3},
    "Deploy now?": {"confirm": True},
}


class Restart:
    """Holds every first question until A is killed and B listens on its port."""

    def __init__(self, server_a: ServerProcess, key: bytes) -> None:
        self.server_a = server_a
        self.key = key
        self.asked: set[str] = set()
        self.all_asked = trio.Event()
        self.restarted = trio.Event()
        self.done = trio.Event()
        self.server_b: ServerProcess | None = None

    async def answer(self, key: str, request: m.wire.InputRequest) -> m.wire.ElicitResult:
        message = getattr(request, "message", "")
        if message in FIRST_QUESTIONS:
            self.asked.add(message)
            if self.asked == FIRST_QUESTIONS:
                self.all_asked.set()
            await self.restarted.wait()
        content = ANSWERS.get(message, {"echo": message})
        return m.wire.ElicitResult(action="accept", content=content)

    async def run(self) -> None:
        """Kill A once every call has its first question; serve B until ``done``."""
        await self.all_asked.wait()
        self.server_a.kill()
        await self.server_a.process.wait()
        async with http_server(port=self.server_a.port, state_key=self.key) as server_b:
            self.server_b = server_b
            self.restarted.set()
            await self.done.wait()


async def test_round_two_on_a_restarted_server_completes_but_a_continuation_is_gone() -> None:
    key = secrets.token_bytes(32)
    results: dict[str, Any] = {}

    async def call(client: Any, tool: str, arguments: dict[str, Any]) -> None:
        try:
            results[tool] = await client.call_tool(tool, arguments)
        except CallError as exc:
            results[tool] = exc

    with trio.fail_after(BUDGET):
        async with http_server(state_key=key) as server_a, trio.open_nursery() as servers:
            restart = Restart(server_a, key)
            servers.start_soon(restart.run)
            async with open_http_client(server_a.url, answer=restart.answer) as client:
                async with trio.open_nursery() as calls:
                    calls.start_soon(call, client, "plan_trip", {"destination": "Oslo"})
                    calls.start_soon(call, client, "deploy", {"env": "prod"})
                    calls.start_soon(call, client, "checkout", {"item": "book"})
                    calls.start_soon(call, client, "tally", {})
                stats = (await client.call_tool("stats"))["structuredContent"]
            assert restart.server_b is not None
            assert restart.server_b.pid != server_a.pid
            assert server_a.process.returncode == -9
            restart.done.set()
    assert result_text(results["plan_trip"]) == "Trip to Oslo for Ada: 3 nights."
    assert result_text(results["deploy"]) == "Deployed to prod."
    assert result_text(results["checkout"]) == "bought book (buy book?)"
    assert stats["effects"] == 1  # checkout's last step ran once, on B
    error = results["tally"]
    assert isinstance(error, CallError), error
    assert error.code == -32602
    assert error.data == {"reason": "unknown_continuation"}


@pytest.mark.parametrize("same_keys", [True, False])
async def test_a_state_sealed_by_a_is_opened_by_b_only_with_the_same_keys(same_keys: bool) -> None:
    """The raw round: A's ``requestState`` posted to B as it is."""
    key = secrets.token_bytes(32)
    with trio.fail_after(BUDGET):
        async with http_server(state_key=key) as server_a:
            first = tool_call("relay", {"n": 8})
            asked = (await post_when_served(server_a.port, first)).json()["result"]
            server_a.kill()
        other = key if same_keys else secrets.token_bytes(32)
        async with http_server(port=server_a.port, state_key=other) as server_b:
            second = retry_of(first, {"a": echo("flow 8 leg 1")}, asked["requestState"])
            reply = await post_when_served(server_b.port, second)
    if same_keys:
        result = reply.json()["result"]
        assert result["resultType"] == "input_required"
        assert list(result["inputRequests"]) == ["b"]
    else:
        assert reply.status == 400
        assert reply.json()["error"]["data"] == {"reason": "bad_signature"}
