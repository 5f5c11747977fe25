"""``run_inline``: a handler that answers at once runs without the watcher's task; one
that waits gets it just before its first wait, and runs in the caller's task and cancel
scopes throughout, as ``await`` would run it (on trio and asyncio)."""

from __future__ import annotations

import anyio
import pytest
from mrtr_transports.asgi.answer import run_inline


@pytest.mark.anyio
async def test_a_handler_that_answers_at_once_never_waits() -> None:
    waits: list[str] = []

    async def at_once() -> str:
        return "done"

    assert await run_inline(at_once(), lambda: waits.append("wait")) == "done"
    assert waits == []


@pytest.mark.anyio
async def test_a_handler_that_waits_in_its_own_scopes_is_told_once() -> None:
    waits: list[str] = []

    async def waiting() -> str:
        with anyio.move_on_after(10):  # its own scope, entered before its first wait
            await anyio.sleep(0)
            await anyio.sleep(0)
        with anyio.move_on_after(0.01) as timed:
            await anyio.sleep(10)
        return f"done, timed out: {timed.cancelled_caught}"

    value = await run_inline(waiting(), lambda: waits.append("wait"))
    assert value == "done, timed out: True"
    assert waits == ["wait"]


@pytest.mark.anyio
async def test_a_cancellation_reaches_the_handler() -> None:
    seen: list[str] = []

    async def sleeper() -> str:
        try:
            await anyio.sleep(10)
        finally:
            seen.append("cancelled")
        return "never"

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tasks:

            async def cancel_soon() -> None:
                await anyio.sleep(0.01)
                scope.cancel()

            tasks.start_soon(cancel_soon)
            await run_inline(sleeper(), lambda: None)
    assert scope.cancelled_caught and seen == ["cancelled"]


@pytest.mark.anyio
async def test_an_error_before_the_first_wait_is_the_callers() -> None:
    async def failing() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await run_inline(failing(), lambda: None)
