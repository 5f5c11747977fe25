"""One leg of ``tools/call``, ``resources/read`` or ``prompts/get``: its handler, in its style.

The app finds the registered entry; here its params are checked, its handler
runs for one leg, and what it returns is shaped into the method's result
(``results``).

Re-entrant (plain, with ``once`` guards, or a ``mrtr_core.server.Steps``):
``mrtr_core.server.open_leg`` opens and verifies the ``requestState`` before any
handler code runs, the state it redeemed is spent in the app's single-use store
(a replay is refused there, also before any handler code), the handler runs with
a :class:`Context` (awaited if it is an ``async def``), and
``mrtr_core.server.close_leg`` seals an ask into the next ``requestState``, so any
process holding the sealer's keys (and sharing the store) can serve any leg.

A tool's arguments are first checked against its ``inputSchema``: a mismatch is
an input validation error, which the spec reports as a tool result with
``isError: true`` (the model can correct the call), not a protocol error.

A tool registered with ``task=`` may end its leg with ``return ctx.run_task(work,
...)``: the leg answers a ``CreateTaskResult`` (or, to a request that did not
declare the tasks extension, ``work``'s result), as ``task_runs`` says; a
``task="required"`` tool is refused with -32021 to such a request before anything
of it runs.

Continuation (``continuation=True``): the first leg starts the handler in the
app's :class:`~mrtr_transports.apps.continuations.ContinuationStore`, and a
retry resumes the parked handler its ``requestState`` names.  Either way the
leg returns the handler's next ask or its result, shaped for the method.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import Any

import mrtr_core as m

from .._shares import CURRENT_CLIENT
from ..auth.identity import CURRENT_IDENTITY, Identity
from ..auth.refusals import InsufficientScope, missing_scopes
from ..server.app import Outlet
from .context import Context, HostApp
from .continuations import Leg, Suspension
from .registry import Prompt, Resource, ResourceTemplate, Tool
from .results import (
    prompt_result,
    resource_result,
    tool_error,
    tool_exception,
    tool_result,
    with_cache_hints,
)
from .task_runs import TaskHandoff, start_task

log = logging.getLogger("mrtr.server")

Entry = Tool | Resource | ResourceTemplate | Prompt

# What a plain (not ``async``) handler returns most often: never awaitable, so the
# leg skips ``inspect.isawaitable`` (an ABC check) for them.
_NEVER_AWAITED = frozenset({dict, str, list, m.server.Ask, TaskHandoff})
_ABSENT = object()


async def call_tool(
    app: HostApp, tool: Tool, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
) -> dict[str, Any]:
    if tool.task == "required":
        # Before anything of the tool runs: it cannot answer this request but by a task.
        m.tasks.require_tasks(
            info.capabilities if info.era == "modern" else None, f"tool {tool.name!r}"
        )
    if tool.scopes:
        # The endpoint answered 403 already where it could (asgi/gate.py); this is the
        # rule for a transport with no status to say it (a WebSocket conversation).
        identity = CURRENT_IDENTITY.get()
        if identity is not None:
            missing = missing_scopes(tool.scopes, identity.scopes)
            if missing:
                raise InsufficientScope(tool.scopes, missing)
    arguments = (request.params or {}).get("arguments", {})
    if type(arguments) is not dict and not isinstance(arguments, Mapping):
        raise m.MrtrError("arguments must be an object", code=m.ErrorCode.INVALID_PARAMS)
    schema = tool.arguments_schema or m.server._validation.compile_schema(tool.input_schema)
    problem = schema.problem(arguments)
    if problem is not None:  # an input error the model can correct: a tool result
        where = f"argument {problem.field[1:]!r}" if problem.field else "arguments"
        return tool_error(f"Invalid {where}: {problem.reason}")

    def shape(outcome: Any) -> Mapping[str, Any]:
        return tool_result(tool, outcome)

    return await run_leg(app, tool, request, info, outlet, shape, on_error=tool_exception)


async def read_resource(
    app: HostApp,
    reader: Resource | ResourceTemplate,
    uri: str,
    uri_params: Mapping[str, str] | None,
    request: m.Request,
    info: m.server.RequestInfo,
    outlet: Outlet,
) -> dict[str, Any]:
    def shape(outcome: Any) -> Mapping[str, Any]:
        result = resource_result(uri, reader.mime_type, outcome)
        return with_cache_hints(info, result, reader.ttl_ms, reader.cache_scope)

    return await run_leg(app, reader, request, info, outlet, shape, uri=uri, uri_params=uri_params)


async def get_prompt(
    app: HostApp, prompt: Prompt, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
) -> dict[str, Any]:
    arguments = (request.params or {}).get("arguments", {})
    if not isinstance(arguments, Mapping) or not all(
        isinstance(v, str) for v in arguments.values()
    ):
        raise m.MrtrError("prompt arguments must be strings", code=m.ErrorCode.INVALID_PARAMS)
    missing = [
        a["name"] for a in prompt.arguments if a.get("required") and a["name"] not in arguments
    ]
    if missing:
        raise m.MrtrError(
            f"Missing required arguments: {', '.join(missing)}",
            code=m.ErrorCode.INVALID_PARAMS,
            data={"missing": missing},
        )
    return await run_leg(app, prompt, request, info, outlet, prompt_result)


async def run_leg(
    app: HostApp,
    entry: Entry,
    request: m.Request,
    info: m.server.RequestInfo,
    outlet: Outlet,
    shape: Callable[[Any], Mapping[str, Any]],
    *,
    on_error: Callable[[Exception], Mapping[str, Any]] | None = None,
    uri: str | None = None,
    uri_params: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One leg of ``entry``'s handler: the wire result (complete or ``input_required``).

    ``shape`` makes what the handler returned into the method's result;
    ``on_error`` (tools) makes an exception that is not an ``MrtrError`` into one.
    """
    params = request.params or {}
    answers = params.get("inputResponses", _ABSENT)
    if answers is not _ABSENT and type(answers) is not dict and not isinstance(answers, Mapping):
        raise m.MrtrError(
            "inputResponses must be an object",
            code=m.ErrorCode.INVALID_PARAMS,
            data={"reason": "inputResponses must be an object"},
        )
    now = app.clock()
    # Read here, in the request's task: a continuation's handler runs in a task of its own.
    client = CURRENT_CLIENT.get()
    identity = CURRENT_IDENTITY.get()
    if entry.continuation and "requestState" in params:
        assert app.continuations is not None  # made when the handler was registered
        leg = Leg(request, info, outlet, app.principal, now, client, identity)
        return await app.continuations.resume(leg, sealer=app.sealer)
    opened = m.server.open_leg(
        request, info, sealer=app.sealer, principal=app.principal, now=now, flow_ttl=app.flow_ttl
    )
    # Spend what this leg redeemed before any handler code runs: the handler may be a
    # plain function that calls ``ctx.once`` after reading answers, with no chance to
    # await the store then.  Every state spent once keeps the flow a single chain.
    # (``opened.to_spend`` of a leg just opened, without the Redeemed it builds.)
    redeemed = opened.opened
    if redeemed is not None and app.single_use is not None:
        first = await app.single_use.consume(
            redeemed.nonce, redeemed.expires_at, now, client=client
        )
        opened.record_spend(first)
    if isinstance(entry, Tool) and entry.require_proof:
        opened.require_proof()
    leg_run = _LegRun(
        entry, opened, outlet, app, shape, on_error, uri, uri_params, client, identity
    )
    if entry.continuation:
        assert app.continuations is not None
        leg = Leg(request, info, outlet, app.principal, now, client, identity)
        return await app.continuations.start(leg_run.run, leg, sealer=app.sealer)
    result = await leg_run.run(None)
    return result if type(result) is dict else dict(result)


class _LegRun:
    """The handler's part of one leg, run at once (re-entrant styles) or in the
    continuation store's task (``run(suspension)``)."""

    __slots__ = (
        "app",
        "client",
        "entry",
        "identity",
        "on_error",
        "opened",
        "outlet",
        "shape",
        "uri",
        "uri_params",
    )

    def __init__(
        self,
        entry: Entry,
        opened: m.server.HandlerContext,
        outlet: Outlet,
        app: HostApp,
        shape: Callable[[Any], Mapping[str, Any]],
        on_error: Callable[[Exception], Mapping[str, Any]] | None,
        uri: str | None,
        uri_params: Mapping[str, str] | None,
        client: str,
        identity: Identity | None,
    ) -> None:
        self.entry = entry
        self.identity = identity
        self.opened = opened
        self.outlet = outlet
        self.app = app
        self.shape = shape
        self.on_error = on_error
        self.uri = uri
        self.uri_params = uri_params
        self.client = client

    async def run(self, suspension: Suspension | None) -> Mapping[str, Any]:
        ctx = Context(
            self.opened,
            self.outlet,
            self.app,
            uri=self.uri,
            uri_params=self.uri_params,
            suspension=suspension,
            client=self.client,
            identity=self.identity,
            task=self.entry.task if isinstance(self.entry, Tool) else None,
        )
        try:
            outcome = self.entry.fn(ctx)
            if type(outcome) not in _NEVER_AWAITED and inspect.isawaitable(outcome):
                outcome = await outcome
        except m.MrtrError:
            raise
        except Exception as exc:
            if self.on_error is None:
                raise
            # The model reads the error in the result; the operator needs the traceback.
            log.error("the tool %r raised", getattr(self.entry, "name", "?"), exc_info=True)
            return self.on_error(exc)
        if isinstance(outcome, TaskHandoff):
            assert isinstance(self.entry, Tool)  # (ctx.run_task refuses any other entry)
            return await start_task(ctx, outcome, self.entry.name, self.shape, self.on_error)
        if isinstance(outcome, m.server.Ask):
            if suspension is not None:
                raise TypeError(
                    "a continuation handler awaits ctx.wait_for(...); it does not return ctx.ask()"
                )
            return m.server.close_leg(ctx, outcome)
        return m.server.close_leg(ctx, self.shape(outcome))


__all__ = ["Entry", "call_tool", "get_prompt", "read_resource", "run_leg"]
