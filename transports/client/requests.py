"""The client's plain requests: one request, one answer, no rounds.

A part of :class:`~mrtr_transports.client.client.Client` (its base class, after
:mod:`~mrtr_transports.client.handshaking`), kept apart so the client module
stays one concept: moving messages between a connection and a link.  A plain
request (``tools/list``, ``server/discover``, any method without rounds) waits
for its answer in a :class:`~mrtr_transports.client.flows.Waiter`; one given up
on is cancelled on the wire (stdio, 2025 sessions) or by closing its stream;
cacheable ones go through the response cache when there is one.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import mrtr_core as m

from .cache import CacheMode, ResponseCache, plain_fetch
from .errors import CallError, CallTimeout, ClientError
from .flows import Waiter
from .handshaking import Handshaking

logger = logging.getLogger("mrtr.client")

#: Pages of ``tools/list`` followed before giving up.
MAX_TOOL_PAGES = 100


class PlainRequests(Handshaking):
    """The plain-request half of a :class:`~mrtr_transports.client.client.Client`."""

    cache: ResponseCache | None
    _tools_listed: bool

    if TYPE_CHECKING:  # (the client's own)

        @property
        def era(self) -> str | None: ...
        def is_waiting_for(self, request_id: m.RequestId) -> bool: ...

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        cache: CacheMode = "use",
    ) -> dict[str, Any]:
        """A plain request (no rounds): its result, or ``CallError``/``CallTimeout``/
        ``TransportError``.  ``cache``: how the response cache is used, if there is one."""
        fetch = functools.partial(self._plain_request, method, params, timeout=timeout)
        if self.cache is None:
            return await fetch()
        return await self.cache.fetch(method, params, plain_fetch(fetch), cache)

    async def _plain_request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_id: Callable[[m.RequestId], None] | None = None,
    ) -> dict[str, Any]:
        await self._wait_open()
        return await self._first_chance(
            functools.partial(self._request, method, params, timeout=timeout, on_id=on_id)
        )

    async def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_id: Callable[[m.RequestId], None] | None = None,
    ) -> dict[str, Any]:
        conn = self._conn
        request_id = conn.new_request_id()
        loop = self._loop
        waiter = Waiter(method, loop.event())
        self._waiters[request_id] = waiter
        if on_id is not None:
            on_id(request_id)
        started = loop.now()
        try:
            sent = None if params is None else dict(params)
            request = m.Request(id=request_id, method=method, params=sent)
            try:
                out = self._outbound(request, "plain", method=method, request_id=request_id)
            except m.LocalProtocolError as exc:
                raise ClientError(f"cannot send {method}: {exc}") from exc
            self._send_out(out)
            deadline = math.inf if timeout is None else started + timeout
            with loop.cancel_scope(deadline=deadline):
                await waiter.event.wait()
        finally:
            self._waiters.pop(request_id, None)
            if not waiter.event.is_set():
                self._abandon(request_id)
        if waiter.error is not None:
            raise waiter.error
        response = waiter.response
        if response is None:
            raise CallTimeout(loop.now() - started, timeout, "total")
        if isinstance(response, m.ErrorResponse):
            error = response.error
            raise CallError(error.code, error.message, error.data)
        return dict(response.result)

    def _abandon(self, request_id: m.RequestId) -> None:
        """Give up on a plain request: cancel it on the wire (stdio) or close its stream."""
        if self._eof_fed or not self.is_waiting_for(request_id):
            return
        note = m.Notification(method="notifications/cancelled", params={"requestId": request_id})
        try:  # (also forgets the id, so a late answer is dropped)
            out = self._outbound(note, "notification", method=note.method)
        except m.LocalProtocolError:
            return
        # Links that cancel by message (stdio, WebSocket) and 2025 HTTP (a POST) send it.
        if self.link.cancellation == "notify" or self.era == "legacy":
            self._send_out(out)
        self.link.close_stream(request_id)

    def _fail_plain(self, request_id: m.RequestId, error: ClientError) -> None:
        waiter = self._waiters.get(request_id)
        if waiter is not None:
            waiter.settle(error=error)
        self._abandon(request_id)

    async def list_tools(self, *, cache: CacheMode = "use") -> list[dict[str, Any]]:
        """Every tool of ``tools/list`` (all pages).  Over HTTP the tools whose
        ``x-mcp-header`` annotations are invalid are dropped (with a warning) and
        the rest are kept for mirroring arguments into ``Mcp-Param-*`` headers."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page_params = {"cursor": cursor} if cursor else None
            result = await self.request("tools/list", page_params, cache=cache)
            page = result.get("tools")
            if not isinstance(page, list):
                raise CallError(
                    m.protocol.INVALID_PARAMS, "the tools/list result has no 'tools' list"
                )
            tools.extend(dict(tool) for tool in page if isinstance(tool, Mapping))
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        kept = self.link.tools_listed(tools)
        self._tools_listed = True
        return kept

    async def _list_tools_quietly(self, cache: CacheMode = "use") -> None:
        try:
            await self.list_tools(cache=cache)
        except CallError as exc:  # a server without tools/list: call without mirroring
            logger.warning("tools/list failed (%s): Mcp-Param headers cannot be mirrored", exc)
            self._tools_listed = True
