"""The client's opening: the handshake steps, their timer, the era settled, and the
second chances of :mod:`~mrtr_transports.client.era` (a wrong prior, a stdio server
that died of the probe).

A collaborator of :class:`~mrtr_transports.client.client.Client`: the connection
drives the handshake; :class:`Opening` only sends its steps (through the client),
times them out (``handshake_timeout``), keeps what the session settled (opened or
refused, the server's instructions), waits for it, and when
:class:`~mrtr_transports.client.era.EraControl` grants it, asks the client to start
over on a fresh connection (the link restarted: a new child for stdio).  What it
knows of the connection in use is a :class:`Wire`, one per connection: the
connection itself and what became of its link (:class:`LinkState`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

import mrtr_core as m

from .._loop import LoopTools
from .era import EraControl, Verdict
from .errors import CallError, CallTimeout, ClientError, TransportError
from .person_time import PersonTime, server_sleep

__all__ = ["LinkState", "Opening", "Wire"]

logger = logging.getLogger("mrtr.client")


@dataclass(slots=True)
class LinkState:
    """What became of the link under one connection (the client updates it)."""

    #: The link's failure, once it failed.
    lost: TransportError | None = None
    #: It failed while ``server/discover`` was in flight (the stdio second chance).
    lost_while_probing: bool = False
    #: The end of input was fed to the connection: nothing more goes out or comes in.
    eof_fed: bool = False
    #: The connection said ``ConnectionClosed``.
    closed: bool = False

    def error(self) -> TransportError:
        """What a call that meets the closed connection raises."""
        if self.lost is not None:
            return self.lost.copy()
        return TransportError("the server closed the connection", kind="disconnect")


@dataclass(slots=True)
class Wire:
    """The connection in use and its link's state: a new one for every connection."""

    conn: m.Connection
    state: LinkState = field(default_factory=LinkState)


class Opening:
    """Opens the client's session, once per connection (see the module docstring).

    ``send_step(message)`` hands a handshake message to the link; ``pump()`` drains
    the connection; ``reconnect()`` makes the client start over on a new connection
    in the era control's era (it calls :meth:`begin`, then restarts the link);
    ``idle()`` says that nothing is in flight but the request that just failed.
    """

    def __init__(
        self,
        control: EraControl,
        *,
        timeout: float,
        loop: LoopTools,
        task_group: TaskGroup,
        restartable: bool,
        send_step: Callable[[m.Request | m.Notification], None],
        pump: Callable[[], None],
        reconnect: Callable[[], Awaitable[None]],
        idle: Callable[[], bool],
        person: PersonTime | None = None,
    ) -> None:
        self.control = control
        self._person = person
        self._timeout = timeout
        self._loop = loop
        self._task_group = task_group
        self._restartable = restartable
        self._send_step = send_step
        self._pump = pump
        self._reconnect = reconnect
        self._idle = idle
        self._timer: anyio.CancelScope | None = None
        self.wire: Wire | None = None
        self.opened = loop.event()
        self.refusal: m.MrtrError | None = None
        #: The last handshake request went unanswered past the timeout (a refusal that
        #: follows is the server's silence, not its answer: ``CallTimeout``).
        self.timed_out = False
        #: The server's ``instructions`` (2025 ``initialize``, 2026 ``server/discover``).
        self.instructions: str | None = None

    def begin(self, wire: Wire) -> None:
        """A new connection: nothing settled yet (a modern one has no handshake)."""
        self.cancel_timer()
        self.wire = wire
        self.opened = self._loop.event()
        if wire.conn.era == "modern":
            self.opened.set()
        self.refusal = None
        self.timed_out = False
        self.instructions = None

    @property
    def ready(self) -> bool:
        """The session is open and usable: no wait needed."""
        assert self.wire is not None
        return self.opened.is_set() and self.refusal is None and not self.wire.state.closed

    def verdict(self) -> Verdict | None:
        assert self.wire is not None
        conn = self.wire.conn
        return self.control.verdict(conn.era, conn.protocol_version)

    # --- The connection's events ------------------------------------------------------

    def step(self, event: m.HandshakeStep) -> None:
        """Send a handshake step; a request's answer is timed."""
        assert self.wire is not None
        message = event.message
        self.cancel_timer()
        if isinstance(message, m.Request):
            self.timed_out = False  # (a notification after a timeout, e.g. cancelled, keeps it)
        self._send_step(message)
        if isinstance(message, m.Request) and not self.wire.state.eof_fed:
            scope = self._timer = self._loop.cancel_scope()
            self._task_group.start_soon(self._time_out, scope, self.wire.conn)

    async def _time_out(self, scope: anyio.CancelScope, conn: m.Connection) -> None:
        with scope:
            await server_sleep(self._person, self._timeout)
            self.timed_out = True
            conn.handshake_timed_out()
            self._pump()

    def settled(
        self, *, instructions: str | None = None, refusal: m.MrtrError | None = None
    ) -> None:
        """The session opened (``instructions``), was refused (``refusal``), or the
        connection closed: whoever waits may go on."""
        if refusal is not None:
            self.refusal = refusal
        elif instructions is not None:
            self.instructions = instructions
        self.cancel_timer()
        self.opened.set()

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # --- Opening, waiting, second chances ---------------------------------------------

    async def open(self) -> None:
        """Open the session; a wrong prior, or a stdio server that died of the probe, gets
        one second chance (``era.py``)."""
        self._pump()  # the first handshake step, if any
        try:
            await self.wait()
        except ClientError as exc:
            assert self.wire is not None
            era = self.control.after_open_failure(
                exc,
                probing=self.wire.state.lost_while_probing,
                restartable=self._restartable,
            )
            if era is None:
                raise
            logger.info("opening failed (%s): starting over with era=%r", exc, era)
            await self._start_over()
            await self.open()
            return
        assert self.wire is not None
        if self.wire.conn.era == "legacy":
            self.control.confirmed()  # (initialize answered: the prior held)

    async def wait(self) -> None:
        """Until the session is open; ``CallError`` when the server refused it, the link's
        ``TransportError`` when it is gone, ``CallTimeout`` (``limit="handshake"``) when
        it never answered."""
        await self.opened.wait()
        assert self.wire is not None
        state = self.wire.state
        if self.refusal is not None:
            error = self.refusal
            if state.lost is not None:
                raise state.error()
            if self.timed_out:
                raise CallTimeout(self._timeout, self._timeout, "handshake")
            raise CallError(
                error.code,
                f"the server refused to open the conversation: {error.message}",
                error.data,
            )
        if state.closed:
            raise state.error()

    async def first_chance(self, send: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """``send()``; while a modern prior is unconfirmed, a failure that is a 2025
        server's answer starts over with a probe and sends once more (``era.py``)."""
        control = self.control
        if not control.unconfirmed:
            return await send()
        try:
            result = await send()
        except ClientError as exc:
            era = control.after_first_failure(exc) if self._idle() else None
            if era is None:
                raise
            logger.info("the remembered era failed (%s): probing the server again", exc)
            await self._start_over()
            await self.open()
            return await send()
        control.confirmed()
        return result

    async def _start_over(self) -> None:
        self.cancel_timer()
        await self._reconnect()
