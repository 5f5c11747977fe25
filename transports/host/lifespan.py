"""The ASGI ``lifespan`` protocol, as the host drives it: startup before the first
connection, shutdown after the last one.

The app runs in a task of its own for the host's whole life with a ``lifespan``
scope.  An app that raises before it answers ``lifespan.startup`` is taken not
to speak the protocol (as uvicorn's ``--lifespan auto`` does): the host serves
without it.  ``lifespan.startup.failed`` stops the host before it listens
(``LifespanFailure``); ``lifespan.shutdown.failed`` is logged.  What the app
puts in ``scope["state"]`` at startup is copied into each request's scope
(ASGI ``state``).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .asgi import ASGI_VERSION, AsgiApp, Message

__all__ = ["Lifespan", "LifespanFailure"]

log = logging.getLogger("mrtr.host")


class LifespanFailure(RuntimeError):
    """The app answered ``lifespan.startup.failed``: the host does not serve it."""


class Lifespan:
    """One app's lifespan: ``startup`` (in a task group that outlives it), ``shutdown``."""

    def __init__(self, app: AsgiApp) -> None:
        self.app = app
        self.state: dict[str, Any] = {}
        self.supported = True
        to_app: tuple[MemoryObjectSendStream[Message], MemoryObjectReceiveStream[Message]]
        to_app = anyio.create_memory_object_stream[Message](2)
        self._to_app, self._app_inbox = to_app
        self._answers: list[Message] = []
        self._answered = anyio.Event()
        self._ended = anyio.Event()
        self._started = False  # the app answered lifespan.startup

    async def startup(self, tasks: anyio.abc.TaskGroup) -> str | None:
        """Start the app's lifespan task in ``tasks``; why its startup failed, if it did."""
        tasks.start_soon(self._run)
        failure = await self._ask("lifespan.startup")
        self._started = True
        return failure

    async def shutdown(self) -> None:
        if self.supported and not self._ended.is_set():
            failure = await self._ask("lifespan.shutdown")
            if failure is not None:
                log.error("%s", failure)

    async def _ask(self, kind: str) -> str | None:
        self._answered = anyio.Event()
        await self._to_app.send({"type": kind})
        await self._answered.wait()
        if not self.supported:
            return None
        answer = self._answers.pop(0) if self._answers else {"type": f"{kind}.complete"}
        if answer["type"] == f"{kind}.failed":
            return f"{kind} failed: {answer.get('message', '')}"
        return None

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": ASGI_VERSION, "state": self.state}
        try:
            await self.app(scope, self._receive, self._send)
        except Exception:
            if not self._started and not self._answers:
                log.debug("the app does not speak the ASGI lifespan protocol", exc_info=True)
                self.supported = False
            else:
                log.exception("the app failed in its lifespan")
        finally:
            self._ended.set()
            self._answered.set()

    async def _receive(self) -> Message:
        return await self._app_inbox.receive()

    async def _send(self, message: Message) -> None:
        self._answers.append(message)
        self._answered.set()
