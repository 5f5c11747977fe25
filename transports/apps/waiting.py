"""``wait_for_answer``, typed by the ask: one home for the contexts that wait for answers.

A continuation handler's :class:`~mrtr_transports.apps.context.Context` and a task's
:class:`~mrtr_transports.apps.task_runs.TaskContext` both wait for answers with
``await x.wait_for({key: ask, ...})``; ``await x.wait_for_answer(key, ask)`` is the
one-key form of it, typed by what was asked (an ``ElicitResult`` for an elicitation, a
``CreateMessageResult`` for ``sample``, a ``ListRootsResult`` for ``list_roots``), as
the core's ``Answers.get`` is.  Each context says how it waits (``wait_for``); this
mixin adds the typed form once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import overload

import mrtr_core as m


class WaitsForAnswers:
    """A context with ``wait_for``; adds ``wait_for_answer``, typed by the ask."""

    __slots__ = ()

    async def wait_for(self, requests: Mapping[str, m.wire.InputRequest]) -> m.server.Answers:
        raise NotImplementedError

    @overload
    async def wait_for_answer(
        self, key: str, asked: m.wire.ElicitFormRequest | m.wire.ElicitUrlRequest
    ) -> m.wire.ElicitResult: ...
    @overload
    async def wait_for_answer(
        self, key: str, asked: m.wire.CreateMessageRequest
    ) -> m.wire.CreateMessageResult: ...
    @overload
    async def wait_for_answer(
        self, key: str, asked: m.wire.ListRootsRequest
    ) -> m.wire.ListRootsResult: ...
    @overload
    async def wait_for_answer(
        self, key: str, asked: m.wire.InputRequest
    ) -> m.wire.InputResponse: ...
    async def wait_for_answer(self, key: str, asked: m.wire.InputRequest) -> m.wire.InputResponse:
        """Ask ``asked`` under ``key`` until the client answers it; the typed answer."""
        while True:
            answer = (await self.wait_for({key: asked})).get(key, asked)
            if answer is not None:
                return answer


__all__ = ["WaitsForAnswers"]
