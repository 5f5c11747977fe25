"""The client's plain requests: one request, one answer, no rounds.

A collaborator of :class:`~mrtr_transports.client.client.Client`.  A plain
request (``tools/list``, ``server/discover``, any method without rounds) waits
for its answer in a :class:`~mrtr_transports.client.flows.Waiter`, kept by
:class:`PlainRequests` under its request id until the client's pump settles it
(the answer, the server's cancellation, the connection's end).  One given up on
is withdrawn by the client (``withdraw``: cancelled on the wire, for stdio and
2025 sessions, or by closing its stream).  :func:`all_tools` follows the pages of
``tools/list``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

import mrtr_core as m

from .errors import CallError, CallTimeout, ClientError, TransportError
from .flows import FlowContext, Waiter
from .person_time import PersonTime

__all__ = ["MAX_TOOL_PAGES", "PlainRequests", "all_tools"]

#: Pages of ``tools/list`` followed before giving up.
MAX_TOOL_PAGES = 100


class PlainRequests:
    """The plain requests in flight; ``withdraw(request_id)`` gives one up on the wire."""

    __slots__ = ("_withdraw", "waiters")

    def __init__(self, withdraw: Callable[[m.RequestId], None]) -> None:
        self._withdraw = withdraw
        self.waiters: dict[m.RequestId, Waiter] = {}

    async def send(
        self,
        ctx: FlowContext,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_id: Callable[[m.RequestId], None] | None = None,
    ) -> dict[str, Any]:
        """Send the request on ``ctx``'s connection and wait for its result (``CallError``,
        ``CallTimeout``, ``TransportError``); ``on_id`` is told its request id."""
        conn, loop = ctx.conn, ctx.loop
        request_id = conn.new_request_id()
        waiter = Waiter(method, loop.event())
        self.waiters[request_id] = waiter
        if on_id is not None:
            on_id(request_id)
        started = loop.now()
        try:
            sent = None if params is None else dict(params)
            request = m.Request(id=request_id, method=method, params=sent)
            try:
                out = ctx.outbound(request, "plain", method=method, request_id=request_id)
            except m.LocalProtocolError as exc:
                raise ClientError(f"cannot send {method}: {exc}") from exc
            ctx.send_out(out)
            if ctx.person is None:
                deadline = math.inf if timeout is None else started + timeout
                with loop.cancel_scope(deadline=deadline):
                    await waiter.event.wait()
            else:  # (a sign-in may come in between: the person's time is not counted)
                await _wait_server_time(ctx.person, waiter.event, timeout)
        finally:
            self.waiters.pop(request_id, None)
            if not waiter.event.is_set():
                self._withdraw(request_id)
        if waiter.error is not None:
            raise waiter.error
        response = waiter.response
        if response is None:
            raise CallTimeout(loop.now() - started, timeout, "total")
        if isinstance(response, m.ErrorResponse):
            error = response.error
            raise CallError(error.code, error.message, error.data)
        return dict(response.result)

    # --- What the pump (and the link) settle -------------------------------------------

    def answered(self, response: m.ResultResponse | m.ErrorResponse) -> bool:
        """The answer to one of ours (False: to none we wait for)."""
        waiter = self.waiters.get(response.id) if response.id is not None else None
        if waiter is None:
            return False
        waiter.settle(response=response)
        return True

    def cancelled(self, request_id: m.RequestId) -> None:
        """The server cancelled it."""
        waiter = self.waiters.get(request_id)
        if waiter is not None:
            waiter.settle(
                error=CallError(m.ErrorCode.INTERNAL_ERROR, "the server cancelled the request")
            )

    def fail(self, request_id: m.RequestId, error: ClientError) -> None:
        """It failed (its stream, its POST): the caller raises ``error``; withdrawn."""
        waiter = self.waiters.get(request_id)
        if waiter is not None:
            waiter.settle(error=error)
        self._withdraw(request_id)

    def fail_all(self, error: Callable[[], TransportError]) -> None:
        """The connection closed: each caller raises a fresh ``error()``."""
        for waiter in list(self.waiters.values()):
            waiter.settle(error=error())


async def all_tools(
    request: Callable[[Mapping[str, Any] | None], Awaitable[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Every tool of ``tools/list``, following ``nextCursor`` (at most ``MAX_TOOL_PAGES``);
    ``request(params)`` sends one page's request."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        result = await request({"cursor": cursor} if cursor else None)
        page = result.get("tools")
        if not isinstance(page, list):
            raise CallError(m.ErrorCode.INVALID_PARAMS, "the tools/list result has no 'tools' list")
        tools.extend(dict(tool) for tool in page if isinstance(tool, Mapping))
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return tools


async def _wait_server_time(
    person: PersonTime, answered: anyio.Event, timeout: float | None
) -> None:
    """Until ``answered``, or ``timeout`` seconds of the server's time went by."""
    async with anyio.create_task_group() as waiting:

        async def time_out() -> None:
            await person.server_sleep(math.inf if timeout is None else timeout)
            waiting.cancel_scope.cancel()

        waiting.start_soon(time_out)
        await answered.wait()
        waiting.cancel_scope.cancel()
