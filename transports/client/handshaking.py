"""The client's opening: the handshake steps, their timer, the era settled, and the
second chances of :mod:`~mrtr_transports.client.era` (a wrong prior, a stdio server
that died of the probe).

A part of :class:`~mrtr_transports.client.client.Client` (its base class), kept
apart so the client module stays one concept: moving messages between a
connection and a link.  The connection drives the handshake; this code only
sends its steps, times them out (``handshake_timeout``), waits for the session,
and when :class:`~mrtr_transports.client.era.EraControl` grants it, starts over
on a fresh connection (the link restarted: a new child for stdio).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

import mrtr_core as m
from mrtr_core.connection import Sendable

from .era import EraControl, Verdict
from .errors import CallError, ClientError, TransportError
from .flows import Flow, Waiter
from .link import Link, Outbound, OutboundKind
from .loop import LoopTools

logger = logging.getLogger("mrtr.client")


class Handshaking:
    """The opening half of a :class:`~mrtr_transports.client.client.Client`."""

    link: Link
    _task_group: TaskGroup
    _conn: m.Connection
    _era_control: EraControl
    _handshake_timeout: float
    _handshake_timer: anyio.CancelScope | None
    _opened: anyio.Event
    _session_error: m.MrtrError | None
    _lost: TransportError | None
    _lost_while_probing: bool
    _eof_fed: bool
    _closed: bool
    _flows: dict[int, Flow]
    _waiters: dict[m.RequestId, Waiter]
    _loop: LoopTools

    if TYPE_CHECKING:  # (the client's own)

        def _pump(self) -> None: ...
        def _send_out(self, out: Outbound) -> None: ...
        def _outbound(self, event: Sendable, kind: OutboundKind, **fields: Any) -> Outbound: ...
        def _new_connection(self) -> None: ...
        def _lost_error(self) -> TransportError: ...

    @property
    def verdict(self) -> Verdict | None:
        """What the client learned of the server's era (``None`` until settled): pass it
        back as ``prior=`` to skip the probe next time (``verdict.to_json()`` to store)."""
        return self._era_control.verdict(self._conn.era, self._conn.protocol_version)

    async def _first_chance(self, send: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """``send()``; while a modern prior is unconfirmed, a failure that is a 2025
        server's answer starts over with a probe and sends once more (``era.py``)."""
        control = self._era_control
        if not control.unconfirmed:
            return await send()
        try:
            result = await send()
        except ClientError as exc:
            era = control.after_first_failure(exc) if self._idle_but_one() else None
            if era is None:
                raise
            logger.info("the remembered era failed (%s): probing the server again", exc)
            await self._reopen()
            await self._open()
            return await send()
        control.confirmed()
        return result

    def _idle_but_one(self) -> bool:
        """Nothing in flight besides the request that just failed (safe to start over)."""
        live = [flow for flow in self._flows.values() if not flow.finished]
        return not live and not self._waiters

    # --- The handshake ---------------------------------------------------------------

    def _on_handshake_step(self, event: m.HandshakeStep) -> None:
        message = event.message
        self._cancel_handshake_timer()
        request_id = message.id if isinstance(message, m.Request) else None
        self._send_out(
            self._outbound(message, "handshake", method=message.method, request_id=request_id)
        )
        if isinstance(message, m.Request) and not self._eof_fed:
            scope = self._handshake_timer = self._loop.cancel_scope()
            self._task_group.start_soon(self._handshake_timeout_task, scope)

    async def _handshake_timeout_task(self, scope: anyio.CancelScope) -> None:
        with scope:
            await anyio.sleep(self._handshake_timeout)
            self._conn.handshake_timed_out()
            self._pump()

    def _cancel_handshake_timer(self) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    def _end_handshake(self) -> None:
        self._cancel_handshake_timer()
        self._opened.set()

    async def _open(self) -> None:
        """Open the session; a wrong prior, or a stdio server that died of the probe, gets
        one second chance (``era.py``)."""
        self._pump()  # the first handshake step, if any
        try:
            await self._wait_open()
        except ClientError as exc:
            era = self._era_control.after_open_failure(
                exc,
                probing=self._lost_while_probing,
                restartable=getattr(self.link, "respawns", False),
            )
            if era is None:
                raise
            logger.info("opening failed (%s): starting over with era=%r", exc, era)
            await self._reopen()
            await self._open()
            return
        if self._conn.era == "legacy":
            self._era_control.confirmed()  # (initialize answered: the prior held)

    async def _reopen(self) -> None:
        """A new connection in the era control's era, over the link restarted."""
        self._cancel_handshake_timer()
        self._new_connection()
        restart = getattr(self.link, "restart", None)
        if restart is not None:
            await restart(self, self._task_group)

    async def _wait_open(self) -> None:
        await self._opened.wait()
        if self._session_error is not None:
            error = self._session_error
            if self._lost is not None:
                raise self._lost_error()
            raise CallError(
                error.code,
                f"the server refused to open the conversation: {error.message}",
                error.data,
            )
        if self._closed:
            raise self._lost_error()
