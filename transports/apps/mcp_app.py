"""``McpApp``: a ``ServerApp`` built from decorated functions (tools, resources, prompts).

The model: an app is four registries (tools, resources and resource templates,
prompts, one completion handler; their entries are in ``registry``) and a
dispatcher.  ``handle`` looks at the request's method, finds the registered
function and runs it for one leg (``legs``)::

    from mrtr_transports import Ask, Context, McpApp, elicit_form

    app = McpApp("weather", "1.0")

    CITY = elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])

    @app.tool("weather", description="The weather in a city")
    def weather(ctx: Context) -> str | Ask:
        city = ctx.answer("city", CITY)  # an ElicitResult, or None
        if city is None:
            return ctx.ask({"city": CITY})  # an input_required round
        return f"Sunny in {(city.content or {}).get('city')}"

A tool's parameters after the context are its arguments: ``@app.tool`` over
``def forecast(ctx, city: str, days: int = 1) -> Forecast`` lists their JSON Schema
and gets them checked and converted (``signatures``; ``docs/server.md`` section 8).
A handler is a function of a :class:`~mrtr_transports.apps.context.Context`
in one of the styles of ``docs/server.md`` (``context`` tells them apart):
re-entrant (with ``ctx.once``, or a ``mrtr_core.server.Steps``), plain or ``async
def``, or continuation (``continuation=True``: parked between rounds in the
app's :class:`~mrtr_transports.apps.continuations.ContinuationStore`,
``continuations=``, or one with the default bounds made on demand).  What it
returns becomes the result as ``results`` says.

Errors follow the 2026-07-28 spec: an unknown tool, prompt or resource and
bad params are -32602 (a resource's carries ``data.uri``); an unknown method
is -32601; asking for input the request did not declare is -32021
(``ctx.ask`` raises it); a forged, expired or replayed ``requestState`` is
-32602.  ``inputResponses`` must be an object when present (``null`` is -32602).

Caching: ``cache_ttl_ms``/``cache_scope`` set the hints of the four list
results (paged ``page_size`` at a time), and each resource may set its own
for ``resources/read``; what is left unset gets the connection's defaults.
The connection zeroes them on retry legs (they are never cacheable).
``subscriptions/listen`` is served as ``subscriptions`` says, at most
``max_subscriptions`` streams at once, ``max_subscriptions_per_client`` of one
client (``Context.client``: -32000 past it).

Tasks (SEP-2663): a tool registered with ``task="optional"`` or ``"required"`` may
``return ctx.run_task(work, ...)`` (``task_runs``); the app then serves
``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (``task_methods``) from its
:class:`~mrtr_transports.apps.task_store.TaskStore` (``tasks=``, or one with the
default bounds made on demand), ``taskIds`` on ``subscriptions/listen``, and
advertises the extension under ``capabilities.extensions`` (``docs/server.md``
section 9).

The sealer: by default a random key made for this process, and an in-memory
single-use store (``single_use``) in which every redeemed state is spent before
its handler runs (so ``ctx.once`` and ``Steps`` hold against replays).  Several
processes that serve one deployment need the same keys and one shared store:
``app.configure_state(keys, signing_key, single_use=...)`` (or ``sealer=`` and
``single_use=`` when the app is made).  Sealed states expire by the wall clock
(``clock``, ``time.time``), which every process shares, unlike a trio clock.

Trust: a tool's arguments are checked against its ``inputSchema`` (a failure is a
tool result with ``isError``, which the model can correct); a form answer against
the schema it was asked with; ``require_proof=True`` makes a tool read answers no
sealed state proves were asked as missing (``docs/server.md``).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, overload

import mrtr_core as m
from mrtr_core._errors import clip

from ..auth.identity import CURRENT_IDENTITY
from ..server.app import Outlet
from .completion import complete
from .context import Context
from .continuations import ContinuationStore
from .decorators import DecoratorOf
from .legs import call_tool, get_prompt, read_resource
from .registry import (
    TOOL_NAME,
    CacheScope,
    Handler,
    Prompt,
    Resource,
    ResourceTemplate,
    Tool,
    compile_uri_template,
    description_of,
    name_of,
    put_present,
)
from .results import with_cache_hints
from .signatures import prompt_shape, reader_shape, tool_shape
from .single_use import MemorySingleUse, SingleUseStore
from .subscriptions import (
    DEFAULT_MAX_SUBSCRIPTIONS_PER_CLIENT,
    LIST_CHANGED,
    MAX_SUBSCRIBED_URIS,
    RESOURCE_UPDATED,
    SUBSCRIPTION_ID,
    Subscriptions,
)
from .task_methods import TASK_METHODS, listened_tasks, serve_task_method
from .task_runs import TASK_SUPPORT, TaskContext, TaskSupport
from .task_store import MemoryTaskStore, TaskStore
from .url_flows import UrlFlows

#: ``single_use`` left out: a fresh in-memory store for this app.
_OWN_STORE: Any = object()

F = TypeVar("F", bound=Callable[..., Any])
E = TypeVar("E")

#: Each registry: the capability registering in it offers, and the
#: ``list_changed`` flag a change announces (none for templates: the spec
#: has no notification for ``resources/templates/list``).
_REGISTRIES: dict[str, tuple[str, str | None]] = {
    "tool": ("tools", "toolsListChanged"),
    "resource": ("resources", "resourcesListChanged"),
    "resource template": ("resources", None),
    "prompt": ("prompts", "promptsListChanged"),
}


def header_params(name: str, schema: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The ``x-mcp-header`` annotations of a tool's input schema: header name -> path.

    Raises ``ValueError`` (``InvalidHeaderAnnotation``) for an annotation clients
    must reject (and so drop the tool): the core rule, ``schema_header_params``.
    """
    from mrtr_core.http import schema_header_params

    return schema_header_params(schema, tool=name)


def _scope_names(scopes: Iterable[str], what: str) -> tuple[str, ...]:
    """A tool's ``scopes=``: scope tokens (RFC 6749 3.3: printable ASCII but space,
    ``"`` and ``\\``), each once, in order."""
    if isinstance(scopes, str):
        raise TypeError(f"{what}: scopes is a list of scope names, not one string")
    names: list[str] = []
    for scope in scopes:
        if not (
            isinstance(scope, str)
            and scope
            and all(0x21 <= ord(c) <= 0x7E and c not in '"\\' for c in scope)
        ):
            raise ValueError(f"{what}: {scope!r} is not a scope name")
        if scope not in names:
            names.append(scope)
    return tuple(names)


# --- the app ------------------------------------------------------------------------------


class McpApp:
    """A ``ServerApp`` of registered tools, resources, prompts and a completion handler."""

    def __init__(
        self,
        name: str,
        version: str,
        *,
        instructions: str | None = None,
        title: str | None = None,
        description: str | None = None,
        sealer: m.server.StateSealer | None = None,
        principal: str | None = None,
        clock: Callable[[], float] = time.time,
        flow_ttl: float = 3600.0,
        cache_ttl_ms: int | None = None,
        cache_scope: CacheScope | None = None,
        page_size: int = 100,
        max_subscriptions: int = 1000,
        max_subscriptions_per_client: int = DEFAULT_MAX_SUBSCRIPTIONS_PER_CLIENT,
        logging: bool = True,
        continuations: ContinuationStore | None = None,
        single_use: SingleUseStore | None = _OWN_STORE,
        url_flows: UrlFlows | None = None,
        tasks: TaskStore | None = None,
    ) -> None:
        info: dict[str, Any] = {"name": name, "version": version}
        put_present(info, title=title, description=description)
        self.info: Mapping[str, Any] = info
        self.instructions = instructions
        if sealer is None:
            sealer = m.server.StateSealer({"k1": m.server.StateSealer.new_key()}, "k1")
        self.sealer = sealer
        #: Where each redeemed state is spent before its handler runs (``None``: nowhere,
        #: and a replayed state is served again; ``once`` then holds in a normal flow only).
        self.single_use: SingleUseStore | None = (
            MemorySingleUse() if single_use is _OWN_STORE else single_use
        )
        #: The principal of a request no transport authenticated (stdio, an in-memory
        #: link); an authenticated request's is its identity's (``principal``).
        self.fixed_principal = principal
        self.clock = clock
        self.flow_ttl = flow_ttl
        if cache_ttl_ms is not None and (not isinstance(cache_ttl_ms, int) or cache_ttl_ms < 0):
            raise ValueError("cache_ttl_ms must be a non-negative integer")
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        if page_size < 1:
            raise ValueError("page_size must be positive")
        self.page_size = page_size
        self.logging = logging
        #: Where continuation-style handlers are parked between rounds; made with the
        #: default bounds when the first one is registered, if not given.
        self.continuations = continuations
        #: Provider flows of URL elicitation (``ctx.ask_provider``), whose callback the
        #: HTTP server serves under the endpoint (``docs/url-elicitation.md``).
        self.url_flows = url_flows if url_flows is not None else UrlFlows(clock=clock)
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, ResourceTemplate] = {}
        self._prompts: dict[str, Prompt] = {}
        self._completion: Handler | None = None
        # A kind is advertised once anything of it was registered, and stays:
        # a list may become empty, and listChanged says so.
        self._offers: set[str] = set()
        self._subscriptions = Subscriptions(max_subscriptions, max_subscriptions_per_client)
        #: Where tasks live (``task_store``); made with the default bounds when the first
        #: tool with ``task=`` is registered, if not given.
        self.tasks: TaskStore | None = None
        if tasks is not None:
            self.use_task_store(tasks)

    @property
    def principal(self) -> str | None:
        """Who the request being served is, for everything bound to a principal
        (sealed state, single-use entries, continuations, URL flows, tasks): the verified
        identity's issuer and subject where the transport authenticated the request
        (``McpAsgi(auth=...)``), else ``McpApp(principal=...)``."""
        identity = CURRENT_IDENTITY.get()
        return identity.principal if identity is not None else self.fixed_principal

    @principal.setter
    def principal(self, value: str | None) -> None:
        self.fixed_principal = value

    def use_task_store(self, store: TaskStore) -> None:
        """Keep the app's tasks in ``store`` from now on (``McpApp(tasks=...)`` at
        construction; ``mrtr serve --task-store`` for a shared one): status changes
        reach the listen streams that watch a task."""
        self.tasks = store
        # Status changes reach the listen streams that watch the task.
        store.watch(
            lambda record: self._subscriptions.announce_task(
                record.task_id, record.detailed().to_notification_params
            )
        )

    def configure_state(
        self,
        keys: Mapping[str, bytes],
        signing_key: str,
        single_use: SingleUseStore | None = _OWN_STORE,
    ) -> None:
        """Seal and open ``requestState`` with ``keys`` (signing with ``signing_key``)
        and spend redeemed states in ``single_use``: what several processes serving one
        deployment share (the same keys, one shared store).  Leaving ``single_use`` out
        gives a fresh in-memory store, right for one process only."""
        self.sealer = m.server.StateSealer(keys, signing_key, ttl=self.sealer.ttl)
        self.single_use = MemorySingleUse() if single_use is _OWN_STORE else single_use

    # --- what discovery says --------------------------------------------------------------

    @property
    def capabilities(self) -> Mapping[str, Any]:
        caps: dict[str, Any] = {}
        if "tools" in self._offers:
            caps["tools"] = {"listChanged": True}
        if "prompts" in self._offers:
            caps["prompts"] = {"listChanged": True}
        if "resources" in self._offers:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self._completion is not None:
            caps["completions"] = {}
        if self.logging:
            caps["logging"] = {}
        if "tasks" in self._offers:
            caps["extensions"] = {m.tasks.TASKS_EXTENSION: {}}
        return caps

    @property
    def tools(self) -> Mapping[str, Tool]:
        return dict(self._tools)

    @property
    def prompts(self) -> Mapping[str, Prompt]:
        return dict(self._prompts)

    @property
    def resources(self) -> Mapping[str, Resource]:
        return dict(self._resources)

    @property
    def resource_templates(self) -> Mapping[str, ResourceTemplate]:
        return dict(self._templates)

    def tool_scopes(self, name: str) -> tuple[str, ...] | None:
        """For the HTTP endpoint's gate: the scopes tool ``name`` needs, or ``None`` for
        an unknown tool."""
        tool = self._tools.get(name)
        return None if tool is None else tool.scopes

    def tool_header_params(self, name: str) -> Mapping[str, tuple[str, ...]] | None:
        """For the HTTP transport: the ``Mcp-Param-*`` headers of tool ``name``
        (header name -> argument path), or ``None`` for an unknown tool."""
        tool = self._tools.get(name)
        return None if tool is None else tool.header_params

    # --- registering ----------------------------------------------------------------------
    # Each kind has ``add_<kind>(fn, ...)`` and the decorator ``<kind>(...)`` made from it
    # by ``DecoratorOf`` (``@app.tool`` or ``@app.tool(...)``): the same options, written
    # once.  A tool's or prompt's parameters after the context are its arguments, and
    # its return annotation its output (``signatures``).  ``continuation=True``: ``fn``
    # is an ``async def`` in the continuation style (``await ctx.wait_for(...)``).

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        *,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        title: str | None = None,
        continuation: bool = False,
        require_proof: bool = False,
        task: TaskSupport | None = None,
        scopes: Iterable[str] = (),
    ) -> Tool:
        """Register ``fn`` as a tool: name and description default to the function's
        name and docstring, the input schema to its parameters after the context, the
        output schema to its return annotation when that is an object (given schemas
        win).  ``require_proof``: answers no sealed state proves were asked read as
        missing (``ctx.require_proof()`` from the first line).  ``task``: the handler
        may ``return ctx.run_task(work, ...)`` (``"optional"``: a task when the request
        declared the tasks extension, ``work`` inline otherwise; ``"required"``: -32021
        to a request that did not declare it, before the handler runs).  ``scopes``: the
        OAuth scopes a caller's token needs (``docs/auth.md``; 403 ``insufficient_scope``
        over HTTP, before the handler runs)."""
        tool_name = name_of(fn, name, "tool")
        if not TOOL_NAME.fullmatch(tool_name):
            raise ValueError(f"tool name {tool_name!r}: 1-128 of A-Z a-z 0-9 _ - .")
        what = f"tool {tool_name!r}"
        if task is not None and task not in TASK_SUPPORT:
            raise ValueError(f"{what}: task is 'optional', 'required' or None, not {task!r}")
        shape = tool_shape(fn, what, input_schema, output_schema)
        schema = shape.input_schema
        if schema.get("type") != "object":
            raise ValueError(f"{what}: inputSchema needs type 'object' at the root")
        try:
            arguments_schema = m.server._validation.compile_schema(schema)
            out = shape.output_schema
            result_schema = None if out is None else m.server._validation.compile_schema(out)
        except m.LocalProtocolError as exc:
            raise ValueError(f"{what}: {exc.message}") from exc
        tool = Tool(
            name=tool_name,
            fn=shape.handler,
            description=description_of(fn, description),
            input_schema=schema,
            output_schema=shape.output_schema,
            annotations=annotations,
            title=title,
            header_params=header_params(tool_name, schema),
            continuation=self._style(fn, continuation, what),
            arguments_schema=arguments_schema,
            require_proof=require_proof,
            returns_none=shape.returns_none,
            result_schema=result_schema,
            task=task,
            scopes=_scope_names(scopes, what),
        )
        if task is not None:
            if self.tasks is None:
                self.use_task_store(MemoryTaskStore())
            self._offers.add("tasks")  # advertised from now on, as the other kinds
        return self._register("tool", self._tools, tool_name, tool)

    tool = DecoratorOf(add_tool)

    def remove_tool(self, name: str) -> None:
        self._unregister("tool", self._tools, name)

    def add_resource(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        title: str | None = None,
        size: int | None = None,
        annotations: Mapping[str, Any] | None = None,
        ttl_ms: int | None = None,
        cache_scope: CacheScope | None = None,
        continuation: bool = False,
    ) -> Resource:
        """Register ``fn(ctx)`` (or ``fn()``) as the reader of the resource ``uri``."""
        resource = Resource(
            uri=uri,
            fn=reader_shape(fn, f"resource {uri!r}", ()),
            name=name_of(fn, name, "resource"),
            description=description_of(fn, description),
            mime_type=mime_type,
            title=title,
            size=size,
            annotations=annotations,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
            continuation=self._style(fn, continuation, f"resource {uri!r}"),
        )
        return self._register("resource", self._resources, uri, resource)

    resource = DecoratorOf(add_resource)

    def remove_resource(self, uri: str) -> None:
        self._unregister("resource", self._resources, uri)

    def add_resource_template(
        self,
        fn: Callable[..., Any],
        uri_template: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        title: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        ttl_ms: int | None = None,
        cache_scope: CacheScope | None = None,
        continuation: bool = False,
    ) -> ResourceTemplate:
        """Register ``fn(ctx)`` as the reader of every URI matching ``uri_template``
        (``{name}`` is one path segment, in ``ctx.uri_params``, and a ``str``
        parameter of ``fn`` if it has one).  Exact resources win over templates;
        templates are tried in order."""
        pattern = compile_uri_template(uri_template)
        template = ResourceTemplate(
            uri_template=uri_template,
            fn=reader_shape(fn, f"resource template {uri_template!r}", pattern.groupindex),
            name=name_of(fn, name, "resource template"),
            pattern=pattern,
            description=description_of(fn, description),
            mime_type=mime_type,
            title=title,
            annotations=annotations,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
            continuation=self._style(fn, continuation, f"resource template {uri_template!r}"),
        )
        return self._register("resource template", self._templates, uri_template, template)

    resource_template = DecoratorOf(add_resource_template)

    def add_prompt(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        *,
        description: str | None = None,
        arguments: Iterable[Mapping[str, Any]] = (),
        title: str | None = None,
        continuation: bool = False,
    ) -> Prompt:
        """Register ``fn`` as a prompt.  ``arguments`` are the wire ``PromptArgument``
        objects (``{"name", "description", "required"}``); by default, its ``str``
        parameters after the context."""
        prompt_name = name_of(fn, name, "prompt")
        what = f"prompt {prompt_name!r}"
        handler, args = prompt_shape(fn, what, tuple(dict(a) for a in arguments))
        if not all(isinstance(a.get("name"), str) for a in args):
            raise ValueError(f"{what}: every argument needs a name")
        prompt = Prompt(
            name=prompt_name,
            fn=handler,
            description=description_of(fn, description),
            arguments=args,
            title=title,
            continuation=self._style(fn, continuation, what),
        )
        return self._register("prompt", self._prompts, prompt_name, prompt)

    prompt = DecoratorOf(add_prompt)

    def remove_prompt(self, name: str) -> None:
        self._unregister("prompt", self._prompts, name)

    @overload
    def completion(self, fn: F, /) -> F: ...
    @overload
    def completion(self, /) -> Callable[[F], F]: ...
    def completion(self, fn: Any = None, /) -> Any:
        """Decorator (``@app.completion`` or ``@app.completion()``): register ``fn(ctx)``
        for ``completion/complete``.  ``ctx.params`` holds ``ref``, ``argument`` and
        ``context``, already checked against the registered prompts and templates."""

        def register(fn: F) -> F:
            if not callable(fn):
                raise TypeError(f"@app.completion decorates a function, not {fn!r}")
            self._completion = fn
            return fn

        return register if fn is None else register(fn)

    def _style(self, fn: Handler, continuation: bool, what: str) -> bool:
        """Check a continuation handler's shape, and make sure there is a store to park it."""
        if continuation:
            # Explicit, never guessed from the shape: an ``async def`` may as well be
            # re-entrant, and only this style needs sticky routing.
            if not inspect.iscoroutinefunction(fn):
                raise TypeError(f"{what}: a continuation handler is an async def")
            if self.continuations is None:
                self.continuations = ContinuationStore()
        return continuation

    # --- announcing changes ---------------------------------------------------------------

    def notify_tools_changed(self) -> None:
        self._subscriptions.announce("notifications/tools/list_changed")

    def notify_prompts_changed(self) -> None:
        self._subscriptions.announce("notifications/prompts/list_changed")

    def notify_resources_changed(self) -> None:
        self._subscriptions.announce("notifications/resources/list_changed")

    def notify_resource_updated(self, uri: str) -> None:
        self._subscriptions.announce(RESOURCE_UPDATED, uri)

    def close_subscriptions(self) -> None:
        """End every listen stream gracefully (shutdown): each gets its result."""
        self._subscriptions.close()

    @property
    def subscription_count(self) -> int:
        return len(self._subscriptions)

    @property
    def max_subscriptions(self) -> int:
        return self._subscriptions.max_streams

    def _register(self, what: str, table: dict[str, E], key: str, entry: E) -> E:
        """Add ``entry`` to the registry ``table`` of ``what`` (see ``_REGISTRIES``)
        under ``key`` (registered twice is a bug), offer its kind and announce it."""
        if key in table:
            raise ValueError(f"{what} {key!r} is registered twice")
        table[key] = entry
        self._changed(what)
        return entry

    def _unregister(self, what: str, table: dict[str, Any], key: str) -> None:
        del table[key]
        self._changed(what)

    def _changed(self, what: str) -> None:
        kind, flag = _REGISTRIES[what]
        self._offers.add(kind)
        if flag is not None:
            self._subscriptions.announce(LIST_CHANGED[flag])

    # --- serving --------------------------------------------------------------------------

    async def handle(
        self, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
    ) -> Mapping[str, Any]:
        method = request.method
        params: Mapping[str, Any] = request.params or {}
        modern = info.era == "modern"
        if method == "tools/call" and "tools" in self._offers:
            tool = _named(params, self._tools, "tool")
            return await call_tool(self, tool, request, info, outlet)
        if method == "tools/list" and "tools" in self._offers:
            return self._page(info, params, "tools", [t.describe() for t in self._tools.values()])
        if method == "resources/read" and "resources" in self._offers:
            uri = _required_string(params, "uri")
            reader, uri_params = self._reader_of(uri)
            return await read_resource(self, reader, uri, uri_params, request, info, outlet)
        if method == "resources/list" and "resources" in self._offers:
            found = [r.describe() for r in self._resources.values()]
            return self._page(info, params, "resources", found)
        if method == "resources/templates/list" and "resources" in self._offers:
            found = [t.describe() for t in self._templates.values()]
            return self._page(info, params, "resourceTemplates", found)
        if method == "prompts/get" and "prompts" in self._offers:
            prompt = _named(params, self._prompts, "prompt")
            return await get_prompt(self, prompt, request, info, outlet)
        if method == "prompts/list" and "prompts" in self._offers:
            return self._page(
                info, params, "prompts", [p.describe() for p in self._prompts.values()]
            )
        if method == "completion/complete" and self._completion is not None:
            leg = m.server.open_leg(
                request, info, sealer=None, principal=self.principal, now=self.clock()
            )
            context = Context(leg, outlet, self)
            return await complete(self._completion, context, self._prompts, self._known_uris())
        if method in TASK_METHODS and modern and self.tasks is not None:
            now = self.clock()
            return await serve_task_method(self.tasks, request, info, self.principal, now)
        if method == "subscriptions/listen" and modern:

            async def tasks(task_ids: Any) -> list[str]:
                store, caps, now = self.tasks, info.capabilities, self.clock()
                return await listened_tasks(store, task_ids, caps, self.principal, now)

            return await self._subscriptions.listen(request, outlet, params, self._offers, tasks)
        if method == "logging/setLevel" and not modern and self.logging:
            # 2025 era only (2026 opts in per request); the connection sends a
            # 2025 session every log message, so the level is only checked here.
            if params.get("level") not in m._meta.LOG_LEVELS:
                raise m.MrtrError("unknown log level", code=m.ErrorCode.INVALID_PARAMS)
            return {}
        raise m.MrtrError(f"Method not found: {clip(method)}", code=m.ErrorCode.METHOD_NOT_FOUND)

    # --- lists ----------------------------------------------------------------------------

    def _page(
        self, info: m.server.RequestInfo, params: Mapping[str, Any], key: str, items: list[Any]
    ) -> dict[str, Any]:
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            if not (isinstance(cursor, str) and cursor.isdigit() and 0 < int(cursor) < len(items)):
                raise m.MrtrError(
                    "Invalid cursor",
                    code=m.ErrorCode.INVALID_PARAMS,
                    data={"cursor": clip(cursor)},
                )
            start = int(cursor)
        end = start + self.page_size
        result: dict[str, Any] = {key: items[start:end]}
        if end < len(items):
            result["nextCursor"] = str(end)
        return with_cache_hints(info, result, self.cache_ttl_ms, self.cache_scope)

    def _known_uris(self) -> set[str]:
        """What a ``ref/resource`` of ``completion/complete`` may name."""
        return set(self._templates) | set(self._resources)

    # --- resources/read -------------------------------------------------------------------

    def _reader_of(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str] | None]:
        """The resource ``uri`` names, or the first template matching it (with its variables)."""
        found = self._resources.get(uri)
        if found is not None:
            return found, None
        for template in self._templates.values():
            uri_params = template.match(uri)
            if uri_params is not None:
                return template, uri_params
        raise m.MrtrError(
            "Resource not found", code=m.ErrorCode.INVALID_PARAMS, data={"uri": clip(uri)}
        )


def _required_string(params: Mapping[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise m.MrtrError(f"params.{key} must be a string", code=m.ErrorCode.INVALID_PARAMS)
    return value


def _named(params: Mapping[str, Any], table: Mapping[str, E], what: str) -> E:
    """The registered ``what`` that ``params.name`` names (unknown: -32602)."""
    name = _required_string(params, "name")
    found = table.get(name)
    if found is None:
        shown = clip(name)  # (a peer's name: never echoed at its full size)
        raise m.MrtrError(
            f"Unknown {what}: {shown}", code=m.ErrorCode.INVALID_PARAMS, data={"name": shown}
        )
    return found


# The registry entries and the Context live in their own modules; they are re-exported
# here, where the app that uses them is.
__all__ = [
    "MAX_SUBSCRIBED_URIS",
    "SUBSCRIPTION_ID",
    "Context",
    "ContinuationStore",
    "McpApp",
    "MemoryTaskStore",
    "Prompt",
    "Resource",
    "ResourceTemplate",
    "TaskContext",
    "TaskStore",
    "Tool",
    "compile_uri_template",
    "header_params",
]
