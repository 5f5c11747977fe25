"""A round's input requests reach the input handler in the server's order, on every call.

trio starts new tasks in no fixed order (it reverses a batch half the time), so
without ``flows.InOrder`` the three handlers of a round were entered in either
order; a person at a terminal then saw the questions shuffled from run to run.
Against a real ``mrtr serve --stdio`` subprocess: 20 calls, one order.
"""

from __future__ import annotations

import shlex

import pytest
import trio
from mrtr_transports.client.stdio import open_stdio_client
from support.calling_app import QUESTION_KEYS, STDIO_TARGET

import mrtr_core as m

pytestmark = pytest.mark.subprocess


async def test_handlers_are_entered_in_the_servers_order_every_time():
    entered: list[str] = []

    async def answer(key: str, request: m.wire.InputRequest) -> m.wire.InputResponse:
        entered.append(key)
        await trio.sleep(0)  # (the others may run now: only the entry order is promised)
        return m.wire.ElicitResult(action="accept", content={key: key.upper()})

    orders = set()
    argv = shlex.split(STDIO_TARGET.removeprefix("stdio:"))
    async with open_stdio_client(argv, answer=answer) as client:
        for _ in range(20):
            entered.clear()
            result = await client.call_tool("three_questions", {})
            assert result["content"][0]["text"] == "ZETA ALPHA MID"
            orders.add(tuple(entered))
    assert orders == {QUESTION_KEYS}  # zeta, alpha, mid: as listed, not sorted


async def test_a_handler_that_fails_at_once_still_lets_the_next_ones_in():
    entered: list[str] = []

    def answer(key: str, request: m.wire.InputRequest) -> object:
        entered.append(key)
        raise RuntimeError("no coroutine at all")  # fails before it is even awaited

    argv = shlex.split(STDIO_TARGET.removeprefix("stdio:"))
    async with open_stdio_client(argv, answer=answer) as client:  # type: ignore[arg-type]
        try:
            await client.call_tool("three_questions", {})
        except Exception as exc:
            assert "input handler failed" in str(exc), exc
        else:
            raise AssertionError("the call should fail")
    assert entered[0] == "zeta"
