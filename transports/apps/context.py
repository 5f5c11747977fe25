"""``Context``: what an app handler sees, whichever of the four styles it is written in.

``Context`` is the core's :class:`mrtr_core.server.HandlerContext` (the request, its
answers, the verified state, ``once``), so a :class:`mrtr_core.server.Steps` runs on it
as it is, plus what the app adds: the request's outlet (``progress``, ``log``,
``notify``), the URI of a resource read, and, for a continuation, the
suspension its ``wait_for`` parks on.  How a handler asks for input is what
sets the styles apart (``docs/server.md``):

=================================  ======================================================
style (how it is registered)       how it asks, and what it gets back
=================================  ======================================================
re-entrant, ``once``, ``Steps``    ``return ctx.ask({...}, state=...)``: the leg ends with
(``@app.tool(...)``)               an ``input_required`` round; the handler runs again from
                                   the top, reading ``ctx.answer(key, asked)`` and
                                   ``ctx.state``
continuation (``@app.tool(...,     ``answers = await ctx.wait_for({...})`` or
continuation=True)``, an           ``await ctx.wait_for_answer(key, asked)``: the coroutine
``async def``)                     is parked between rounds and resumed with the answers
=================================  ======================================================

Any of them may hand the rest of a tool's work to a task (SEP-2663) with
``return ctx.run_task(work, *args)``, in a tool registered with ``task=``
(``task_runs``): ``work`` gets a :class:`TaskContext`, which waits for answers
through the task (``await task.wait_for_answer(...)``, typed as here: ``waiting``).

Mixing them is a bug, and said so: ``wait_for`` in a re-entrant handler raises
``RuntimeError``, and a continuation that returns ``ctx.ask(...)`` fails the
request (-32603).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol

import mrtr_core as m

from .._shares import CURRENT_CLIENT
from ..auth.identity import CURRENT_IDENTITY, Identity
from ..server.app import Outlet
from .task_runs import TaskContext, TaskHandoff, TaskSupport
from .waiting import WaitsForAnswers

if TYPE_CHECKING:
    from .continuations import ContinuationStore, Leg, Suspension
    from .single_use import SingleUseStore
    from .task_store import TaskStore
    from .url_flows import ProviderOutcome, UrlFlows

P = ParamSpec("P")


class HostApp(Protocol):
    """The app a handler runs in, as its legs and handlers see it (``McpApp`` is one)."""

    sealer: m.server.StateSealer
    single_use: SingleUseStore | None
    principal: str | None
    clock: Callable[[], float]
    flow_ttl: float
    continuations: ContinuationStore | None
    url_flows: UrlFlows
    tasks: TaskStore | None

    def notify_tools_changed(self) -> None: ...
    def notify_prompts_changed(self) -> None: ...
    def notify_resources_changed(self) -> None: ...
    def notify_resource_updated(self, uri: str) -> None: ...


class Context(m.server.HandlerContext, WaitsForAnswers):
    """What a handler sees for one leg: the core's context plus the app and the outlet.

    Re-entrant styles: ``answer``/``ask``/``can_ask``/``once`` and ``state`` are
    those of :class:`mrtr_core.server.HandlerContext`; ``return ctx.ask(...)`` for another
    round.  Continuation style: ``await ctx.wait_for(...)`` for the answers.
    ``progress``, ``log`` and ``notify`` stream to the client before the result
    (``async def`` handlers: a plain function cannot await them).
    """

    def __init__(
        self,
        leg: m.server.HandlerContext,
        outlet: Outlet,
        app: HostApp,
        *,
        uri: str | None = None,
        uri_params: Mapping[str, str] | None = None,
        suspension: Suspension | None = None,
        client: str | None = None,
        identity: Identity | None = None,
        task: TaskSupport | None = None,
    ) -> None:
        # This context *is* the opened leg (Steps and close_leg take it as one): it takes
        # over the leg as it stands (its state spent, proof required, its answers), rather
        # than build the same context a second time on every leg.
        self.__dict__.update(leg.__dict__)
        self.outlet = outlet
        self.app = app
        #: ``resources/read``: the URI read, and a template's variables in it.
        self.uri = uri
        self.uri_params: Mapping[str, str] = uri_params or {}
        self._suspension = suspension
        #: Who sent the request (``mrtr_transports._shares.client_key``): whose share of
        #: the app's shared stores (single-use entries, URL flows, continuations) this
        #: leg's entries count against.  ``client``, else the one the endpoint set.
        self.client = client if client is not None else CURRENT_CLIENT.get()
        #: The verified caller (``mrtr_transports.auth.Identity``: subject, issuer,
        #: scopes, claims) where the transport authenticates it (HTTP with ``auth=``);
        #: ``None`` elsewhere (stdio).  ``identity``, else the one the endpoint set.
        self.identity = identity if identity is not None else CURRENT_IDENTITY.get()
        #: How the tool may run as a task (``add_tool(task=...)``): ``None``, never.
        self.task = task

    # --- handing the work to a task (task_runs.py) ------------------------------------------

    def run_task(
        self,
        work: Callable[Concatenate[TaskContext, P], Awaitable[Any]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> TaskHandoff:
        """``return ctx.run_task(work, *args)``: hand the rest of this call to a task
        running ``await work(task, *args)`` (a :class:`TaskContext` first).  Answered with
        a ``CreateTaskResult`` when the request declared the tasks extension; otherwise
        ``work`` runs here and its outcome is the call's result (``docs/server.md``).

        Raises ``TypeError`` in a tool registered without ``task=``.
        """
        if self.task is None:
            raise TypeError(
                "ctx.run_task needs a tool registered with task='optional' or "
                "task='required' (@app.tool(task=...))"
            )
        if not callable(work):
            raise TypeError(f"ctx.run_task runs an async def, not {work!r}")
        return TaskHandoff(work, args, kwargs)

    # --- the continuation style -----------------------------------------------------------

    async def wait_for(self, requests: Mapping[str, m.wire.InputRequest]) -> m.server.Answers:
        """Continuation style: ask the client for ``requests`` and wait, parked, for the
        retry that brings the answers (a key may still be unanswered: ask again).

        From then on this context describes that retry's leg: its params, its declared
        capabilities, its outlet.  Raises -32021 when this leg did not declare what
        ``requests`` need, and ``RuntimeError`` in a handler not registered with
        ``continuation=True`` (a re-entrant handler returns ``ctx.ask(...)`` instead).
        """
        if self._suspension is None:
            raise RuntimeError(
                "await ctx.wait_for(...) needs a handler registered with continuation=True; "
                "a re-entrant handler returns ctx.ask(...)"
            )
        asks = self.ask(requests).requests  # -32021 for what this leg did not declare
        self._resume_at(await self._suspension.suspend(asks), asked=asks)
        return self.answers

    def _resume_at(self, leg: Leg, asked: Mapping[str, m.wire.InputRequest]) -> None:
        """Become the leg that resumed the parked handler; the flow stays the same.

        The answers to ``asked`` are proven: the store checked that this leg's state
        names this parked handler at this round, the one that asked them.
        """
        require_proof = self.answers.require_proof
        super().__init__(
            leg.request,
            leg.info,
            opened=None,  # the requestState was the store's reference, not a handler state
            flow=self.flow,
            deadline=self.deadline,
            guards=self._guards,
            state=None,
            sealer=self._sealer,
            principal=leg.principal,
            now=leg.now,
            input_kinds=self.input_kinds,
            proven={key: self.input_kinds.kind_for(ask).name for key, ask in asked.items()},
        )
        self.answers.require_proof = require_proof
        self.outlet = leg.outlet
        self.client = leg.client
        self.identity = leg.identity

    # --- URL elicitation through a provider (url_flows.py) --------------------------------

    async def ask_provider(
        self, key: str, provider_url: str, *, message: str, state: Any = None
    ) -> ProviderOutcome:
        """Send the user to ``provider_url`` (an OAuth-style page that redirects back to
        this server's callback) and read the outcome on later legs: return
        ``outcome.ask`` while it is set; then ``outcome.status`` is ``"completed"``
        (``outcome.code``, ``outcome.params``), ``"declined"`` or ``"failed"``.
        Re-entrant handlers only; ``docs/url-elicitation.md``."""
        if self._suspension is not None:
            raise RuntimeError(
                "ctx.ask_provider needs a re-entrant handler: its pending rounds carry only "
                "requestState, which a continuation's wait_for does not wait out"
            )
        return await self.app.url_flows.ask_provider(
            self, key, provider_url, message=message, state=state
        )

    # --- streaming ------------------------------------------------------------------------

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """``notifications/progress`` (sent only if the request has a progress token)."""
        await self.outlet.progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """``notifications/message`` (sent only at or above the request's ``logLevel``).

        Logging is deprecated in 2026-07-28 (SEP-2577), still served.
        """
        await self.outlet.log(level, data, logger)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        await self.outlet.notify(method, params)


__all__ = ["Context", "HostApp", "TaskContext"]
