"""``McpApp``: a ``ServerApp`` built from decorated functions (tools, resources, prompts).

The model: an app is four registries (tools, resources and resource templates,
prompts, one completion handler) and a dispatcher.  ``handle`` looks at the
request's method, finds the registered function and runs it for one leg::

    app = McpApp("weather", "1.0")

    CITY = m.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])

    @app.tool("weather", description="The weather in a city")
    def weather(ctx):
        city = ctx.answer("city", CITY)
        if city is None:
            return ctx.ask({"city": CITY})  # an input_required round
        return f"Sunny in {city.content['city']}"

A handler is a function of one :class:`Context`, plain (the re-entrant style of
``docs/server.md``: it runs again from the top on every leg, and everything it
needs comes back in the answers and its sealed state) or ``async def`` (it may
``await ctx.progress(...)`` and ``await ctx.log(...)`` while it runs).  It
returns the result, or ``ctx.ask(...)`` for another round.  Each leg is
``mrtr_core.open_leg`` (the ``requestState`` opened and verified before any
handler code runs), the handler, then ``mrtr_core.close_leg`` (an ask sealed
into a new ``requestState``), so any process holding the sealer's keys can
serve any leg.

What a handler may return, per kind (anything else is a bug: ``TypeError``):

* tool: a ``CallToolResult`` mapping, a string (one text block) or a list of
  content blocks; with an ``output_schema``, a mapping without ``content`` is
  the structured result (a JSON text block is added).  An exception that is
  not an ``MrtrError`` becomes a tool result with ``isError: true`` (the model
  can read it); an ``MrtrError`` is the JSON-RPC error.
* resource: a ``ReadResourceResult`` mapping, ``str`` (text), ``bytes``
  (base64 blob) or a list of contents.
* prompt: a ``GetPromptResult`` mapping, a string (one user message) or a
  list of messages (each a mapping or a string).
* completion: a list of strings (at most 100 are sent) or a ``CompleteResult``.

Errors follow the 2026-07-28 spec: an unknown tool, prompt or resource and
bad params are -32602 (a resource's carries ``data.uri``); an unknown method
is -32601; asking for input the request did not declare is -32021
(``ctx.ask`` raises it); a forged, expired or replayed ``requestState`` is
-32602.  ``inputResponses`` must be an object when present (``null`` is -32602).

Caching: ``cache_ttl_ms``/``cache_scope`` set the hints of the four list
results, and each resource may set its own for ``resources/read``; what is
left unset gets the connection's defaults.  Hints go only on 2026-07-28
results; the connection zeroes them on retry legs (they are never cacheable).

``subscriptions/listen`` (2026-07-28): the handler acknowledges the filter it
agreed to, then forwards ``notifications/{tools,prompts,resources}/list_changed``
and ``notifications/resources/updated`` as the app announces them
(:meth:`McpApp.notify_tools_changed` and friends; adding or removing a tool,
prompt or resource announces it), each tagged with the subscription id, until
the stream closes (the transport cancels the handler) or the app closes it
gracefully (:meth:`McpApp.close_subscriptions`: the request gets its result;
the stdio server calls it at the end of stdin, ``HttpServer.aclose`` at shutdown).
A 2025-era session has no such stream: there ``resources/subscribe`` is -32601.

Bounds: at most ``max_subscriptions`` listen streams at once (more: -32603);
each stream holds at most one pending notification per kind and per
subscribed URI (repeats coalesce), and a filter names at most
``MAX_SUBSCRIBED_URIS`` URIs; list results are paged ``page_size`` at a time.

The sealer: by default a random key made for this process, with an in-memory
single-use store (``ctx.once`` holds against replays).  Several processes that
serve one deployment need the same keys and a shared store: pass ``sealer=``.
Sealed states expire by the wall clock (``clock``, ``time.time``), which every
process shares, unlike a trio clock.
"""

from __future__ import annotations

import base64
import inspect
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import attrs
import trio

import mrtr_core as m

from ..server.app import Outlet

#: ``_meta`` key tying a notification (and the final result) to its listen stream.
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: Most URIs one ``subscriptions/listen`` filter may name.
MAX_SUBSCRIBED_URIS = 256
#: Tool names the spec recommends (1-128 of these characters).
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")

CacheScope = Literal["public", "private"]
Handler = Callable[["Context"], Any]
F = TypeVar("F", bound=Callable[..., Any])
E = TypeVar("E")
P = ParamSpec("P")

_LIST_CHANGED = {
    "toolsListChanged": "notifications/tools/list_changed",
    "promptsListChanged": "notifications/prompts/list_changed",
    "resourcesListChanged": "notifications/resources/list_changed",
}
_RESOURCE_UPDATED = "notifications/resources/updated"
#: Each registry: the capability registering in it offers, and the
#: ``list_changed`` flag a change announces (none for templates: the spec
#: has no notification for ``resources/templates/list``).
_REGISTRIES: dict[str, tuple[str, str | None]] = {
    "tool": ("tools", "toolsListChanged"),
    "resource": ("resources", "resourcesListChanged"),
    "resource template": ("resources", None),
    "prompt": ("prompts", "promptsListChanged"),
}


class Context:
    """What a handler sees for one leg: the core's context plus the request's outlet.

    ``answer``/``ask``/``can_ask``/``once`` and ``state`` are those of
    :class:`mrtr_core.HandlerContext` (see ``docs/server.md``); ``progress``,
    ``log`` and ``notify`` stream to the client before the result (async
    handlers only: a plain function cannot await them).
    """

    def __init__(
        self,
        leg: m.HandlerContext,
        outlet: Outlet,
        app: McpApp,
        *,
        uri: str | None = None,
        uri_params: Mapping[str, str] | None = None,
    ) -> None:
        self.leg = leg
        self.outlet = outlet
        self.app = app
        #: ``resources/read``: the URI read, and a template's variables in it.
        self.uri = uri
        self.uri_params: Mapping[str, str] = uri_params or {}

    # --- the leg ----------------------------------------------------------------------

    @property
    def request(self) -> m.Request:
        return self.leg.request

    @property
    def info(self) -> m.RequestInfo:
        return self.leg.info

    @property
    def params(self) -> Mapping[str, Any]:
        return self.leg.params

    @property
    def arguments(self) -> Mapping[str, Any]:
        """``params.arguments`` (tools, prompts), ``{}`` when absent."""
        return self.leg.arguments

    @property
    def capabilities(self) -> Mapping[str, Any]:
        """What this request declared the client can answer."""
        return self.leg.capabilities

    @property
    def state(self) -> Any:
        """The verified state the previous round asked to get back (``None`` at first)."""
        return self.leg.state

    @property
    def principal(self) -> str | None:
        return self.leg.principal

    def answer(self, key: str, asked: m.InputRequest) -> m.InputResponse | None:
        """The typed answer under ``key`` to ``asked``, or ``None`` (then ask again)."""
        return self.leg.answer(key, asked)

    def ask(
        self, requests: Mapping[str, m.InputRequest] | None = None, *, state: Any = None
    ) -> m.Ask:
        """Another round: ask for ``requests`` and get ``state`` back (sealed) with the answers.

        Raises -32021 when the request did not declare what they need.
        """
        return self.leg.ask(requests, state=state)

    def can_ask(self, *requests: m.InputRequest) -> bool:
        """Whether this request declared what ``requests`` need."""
        return self.leg.can_ask(*requests)

    def once(self, name: str) -> bool:
        """True exactly once per flow: guard a side effect with it."""
        return self.leg.once(name)

    # --- streaming ------------------------------------------------------------------

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


# --- the registries -----------------------------------------------------------------------


@attrs.frozen
class Tool:
    name: str
    fn: Handler
    description: str | None
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    title: str | None = None
    #: ``x-mcp-header`` name -> the property path of the argument it mirrors.
    header_params: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            out["title"] = self.title
        if self.description is not None:
            out["description"] = self.description
        out["inputSchema"] = dict(self.input_schema)
        if self.output_schema is not None:
            out["outputSchema"] = dict(self.output_schema)
        if self.annotations is not None:
            out["annotations"] = dict(self.annotations)
        return out


@attrs.frozen
class Resource:
    uri: str
    fn: Handler
    name: str
    description: str | None = None
    mime_type: str | None = None
    title: str | None = None
    size: int | None = None
    annotations: Mapping[str, Any] | None = None
    ttl_ms: int | None = None
    cache_scope: CacheScope | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name}
        _put(out, title=self.title, description=self.description, mimeType=self.mime_type)
        _put(out, size=self.size, annotations=self.annotations)
        return out


@attrs.frozen
class ResourceTemplate:
    uri_template: str
    fn: Handler
    name: str
    pattern: re.Pattern[str]
    description: str | None = None
    mime_type: str | None = None
    title: str | None = None
    annotations: Mapping[str, Any] | None = None
    ttl_ms: int | None = None
    cache_scope: CacheScope | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        _put(out, title=self.title, description=self.description, mimeType=self.mime_type)
        _put(out, annotations=self.annotations)
        return out

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        return found.groupdict() if found else None


@attrs.frozen
class Prompt:
    name: str
    fn: Handler
    description: str | None
    arguments: tuple[Mapping[str, Any], ...] = ()
    title: str | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        _put(out, title=self.title, description=self.description)
        if self.arguments:
            out["arguments"] = [dict(a) for a in self.arguments]
        return out


def _put(out: dict[str, Any], **fields: Any) -> None:
    """Set the fields that are not ``None``."""
    out.update({key: value for key, value in fields.items() if value is not None})


def _description(fn: Callable[..., Any], given: str | None) -> str | None:
    """``given``, or else the first paragraph of ``fn``'s docstring."""
    if given is not None:
        return given
    doc = inspect.getdoc(fn)
    return doc.split("\n\n")[0].replace("\n", " ").strip() if doc else None


def _decorator_of(
    add: Callable[Concatenate[McpApp, Handler, P], object],
) -> Callable[Concatenate[McpApp, P], Callable[[F], F]]:
    """The decorator form of a registering method: ``@app.tool("name", ...)`` over
    ``fn`` is ``app.add_tool(fn, "name", ...)``, with the same options (and types)."""

    def decorator(self: McpApp, /, *args: P.args, **kwargs: P.kwargs) -> Callable[[F], F]:
        def register(fn: F) -> F:
            add(self, fn, *args, **kwargs)
            return fn

        return register

    kind = add.__name__.removeprefix("add_")
    decorator.__name__ = kind
    decorator.__qualname__ = add.__qualname__.removesuffix(add.__name__) + kind
    decorator.__doc__ = f"Decorator form of ``{add.__name__}(fn, ...)``: {add.__doc__}"
    return decorator


def compile_uri_template(template: str) -> re.Pattern[str]:
    """A regex for an RFC 6570 level-1 template: ``{name}`` matches one path segment."""
    out: list[str] = []
    pos = 0
    for found in re.finditer(r"\{([A-Za-z0-9_]+)\}", template):
        out.append(re.escape(template[pos : found.start()]))
        out.append(f"(?P<{found.group(1)}>[^/?#]+)")
        pos = found.end()
    rest = template[pos:]
    if any("{" in part or "}" in part for part in _literals(template)):
        raise ValueError(f"unsupported URI template expression in {template!r}")
    out.append(re.escape(rest))
    try:
        return re.compile("".join(out))
    except re.error as exc:  # a variable named twice
        raise ValueError(f"bad URI template {template!r}: {exc}") from exc


def _literals(template: str) -> list[str]:
    """The literal parts of a template, between its ``{name}`` expressions."""
    return re.split(r"\{[A-Za-z0-9_]+\}", template)


def header_params(name: str, schema: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The ``x-mcp-header`` annotations of a tool's input schema: header name -> path.

    Raises ``ValueError`` (``InvalidHeaderAnnotation``) for an annotation clients
    must reject (and so drop the tool): the core rule, ``schema_header_params``.
    """
    from mrtr_core.protocol import schema_header_params

    return schema_header_params(schema, tool=name)


# --- subscriptions ------------------------------------------------------------------------


class _Listener:
    """One ``subscriptions/listen`` stream: what it wants, and what is due on it."""

    def __init__(self, subscription_id: m.RequestId, agreed: Mapping[str, Any]) -> None:
        self.subscription_id = subscription_id
        self.methods = {_LIST_CHANGED[k] for k in _LIST_CHANGED if agreed.get(k)}
        self.uris = frozenset(agreed.get("resourceSubscriptions", ()))
        #: Due notifications by (method, uri); repeats coalesce, so this stays small.
        self.pending: dict[tuple[str, str | None], None] = {}
        self.wake = trio.Event()
        self.closing = False

    def offer(self, method: str, uri: str | None) -> None:
        wanted = uri in self.uris if method == _RESOURCE_UPDATED else method in self.methods
        if wanted:
            self.pending[(method, uri)] = None
            self.wake.set()


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
        sealer: m.StateSealer | None = None,
        principal: str | None = None,
        clock: Callable[[], float] = time.time,
        flow_ttl: float = 3600.0,
        cache_ttl_ms: int | None = None,
        cache_scope: CacheScope | None = None,
        page_size: int = 100,
        max_subscriptions: int = 1000,
        logging: bool = True,
    ) -> None:
        info: dict[str, Any] = {"name": name, "version": version}
        _put(info, title=title, description=description)
        self.info: Mapping[str, Any] = info
        self.instructions = instructions
        if sealer is None:
            sealer = m.StateSealer(
                {"k1": m.StateSealer.new_key()}, "k1", store=m.MemoryNonceStore()
            )
        self.sealer = sealer
        self.principal = principal
        self.clock = clock
        self.flow_ttl = flow_ttl
        if cache_ttl_ms is not None and (not isinstance(cache_ttl_ms, int) or cache_ttl_ms < 0):
            raise ValueError("cache_ttl_ms must be a non-negative integer")
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        if page_size < 1:
            raise ValueError("page_size must be positive")
        self.page_size = page_size
        self.max_subscriptions = max_subscriptions
        self.logging = logging
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, ResourceTemplate] = {}
        self._prompts: dict[str, Prompt] = {}
        self._completion: Handler | None = None
        # A kind is advertised once anything of it was registered, and stays:
        # a list may become empty, and listChanged says so.
        self._offers: set[str] = set()
        self._listeners: set[_Listener] = set()

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

    def tool_header_params(self, name: str) -> Mapping[str, tuple[str, ...]] | None:
        """For the HTTP transport: the ``Mcp-Param-*`` headers of tool ``name``
        (header name -> argument path), or ``None`` for an unknown tool."""
        tool = self._tools.get(name)
        return None if tool is None else tool.header_params

    # --- registering ----------------------------------------------------------------------
    # Each kind has ``add_<kind>(fn, ...)`` and the decorator ``<kind>(...)`` made from it
    # by ``_decorator_of``: the same options, written once.

    def add_tool(
        self,
        fn: Handler,
        name: str | None = None,
        *,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        title: str | None = None,
    ) -> Tool:
        """Register ``fn(ctx)`` as a tool (name and description default to the
        function's name and docstring; the input schema to no arguments)."""
        tool_name = name or fn.__name__
        if not TOOL_NAME.fullmatch(tool_name):
            raise ValueError(f"tool name {tool_name!r}: 1-128 of A-Z a-z 0-9 _ - .")
        schema = dict(input_schema) if input_schema is not None else {"type": "object"}
        if schema.get("type") != "object":
            raise ValueError(f"tool {tool_name!r}: inputSchema needs type 'object' at the root")
        tool = Tool(
            name=tool_name,
            fn=fn,
            description=_description(fn, description),
            input_schema=schema,
            output_schema=output_schema,
            annotations=annotations,
            title=title,
            header_params=header_params(tool_name, schema),
        )
        return self._register("tool", self._tools, tool_name, tool)

    tool = _decorator_of(add_tool)

    def remove_tool(self, name: str) -> None:
        self._unregister("tool", self._tools, name)

    def add_resource(
        self,
        fn: Handler,
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
    ) -> Resource:
        """Register ``fn(ctx)`` as the reader of the resource ``uri``."""
        resource = Resource(
            uri=uri,
            fn=fn,
            name=name or fn.__name__,
            description=_description(fn, description),
            mime_type=mime_type,
            title=title,
            size=size,
            annotations=annotations,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
        )
        return self._register("resource", self._resources, uri, resource)

    resource = _decorator_of(add_resource)

    def remove_resource(self, uri: str) -> None:
        self._unregister("resource", self._resources, uri)

    def add_resource_template(
        self,
        fn: Handler,
        uri_template: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        title: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        ttl_ms: int | None = None,
        cache_scope: CacheScope | None = None,
    ) -> ResourceTemplate:
        """Register ``fn(ctx)`` as the reader of every URI matching ``uri_template``
        (``{name}`` is one path segment, in ``ctx.uri_params``).  Exact resources
        win over templates; templates are tried in order."""
        template = ResourceTemplate(
            uri_template=uri_template,
            fn=fn,
            name=name or fn.__name__,
            pattern=compile_uri_template(uri_template),
            description=_description(fn, description),
            mime_type=mime_type,
            title=title,
            annotations=annotations,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
        )
        return self._register("resource template", self._templates, uri_template, template)

    resource_template = _decorator_of(add_resource_template)

    def add_prompt(
        self,
        fn: Handler,
        name: str | None = None,
        *,
        description: str | None = None,
        arguments: Iterable[Mapping[str, Any]] = (),
        title: str | None = None,
    ) -> Prompt:
        """Register ``fn(ctx)`` as a prompt.  ``arguments`` are the wire
        ``PromptArgument`` objects (``{"name", "description", "required"}``)."""
        prompt_name = name or fn.__name__
        args = tuple(dict(a) for a in arguments)
        if not all(isinstance(a.get("name"), str) for a in args):
            raise ValueError(f"prompt {prompt_name!r}: every argument needs a name")
        prompt = Prompt(
            name=prompt_name,
            fn=fn,
            description=_description(fn, description),
            arguments=args,
            title=title,
        )
        return self._register("prompt", self._prompts, prompt_name, prompt)

    prompt = _decorator_of(add_prompt)

    def remove_prompt(self, name: str) -> None:
        self._unregister("prompt", self._prompts, name)

    def completion(self) -> Callable[[F], F]:
        """Decorator: register ``fn(ctx)`` for ``completion/complete``.  ``ctx.params``
        holds ``ref``, ``argument`` and ``context``, already checked against the
        registered prompts and templates."""

        def register(fn: F) -> F:
            self._completion = fn
            return fn

        return register

    # --- announcing changes ---------------------------------------------------------------

    def notify_tools_changed(self) -> None:
        self._announce("notifications/tools/list_changed")

    def notify_prompts_changed(self) -> None:
        self._announce("notifications/prompts/list_changed")

    def notify_resources_changed(self) -> None:
        self._announce("notifications/resources/list_changed")

    def notify_resource_updated(self, uri: str) -> None:
        self._announce(_RESOURCE_UPDATED, uri)

    def close_subscriptions(self) -> None:
        """End every listen stream gracefully (shutdown): each gets its result."""
        for listener in self._listeners:
            listener.closing = True
            listener.wake.set()

    @property
    def subscription_count(self) -> int:
        return len(self._listeners)

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
            self._announce(_LIST_CHANGED[flag])

    def _announce(self, method: str, uri: str | None = None) -> None:
        for listener in self._listeners:
            listener.offer(method, uri)

    # --- serving --------------------------------------------------------------------------

    async def handle(
        self, request: m.Request, info: m.RequestInfo, outlet: Outlet
    ) -> Mapping[str, Any]:
        method = request.method
        params: Mapping[str, Any] = request.params or {}
        modern = info.era == "modern"
        if method == "tools/call" and "tools" in self._offers:
            return await self._call_tool(request, info, outlet, params)
        if method == "tools/list" and "tools" in self._offers:
            return self._page(info, params, "tools", [t.describe() for t in self._tools.values()])
        if method == "resources/read" and "resources" in self._offers:
            return await self._read_resource(request, info, outlet, params)
        if method == "resources/list" and "resources" in self._offers:
            found = [r.describe() for r in self._resources.values()]
            return self._page(info, params, "resources", found)
        if method == "resources/templates/list" and "resources" in self._offers:
            found = [t.describe() for t in self._templates.values()]
            return self._page(info, params, "resourceTemplates", found)
        if method == "prompts/get" and "prompts" in self._offers:
            return await self._get_prompt(request, info, outlet, params)
        if method == "prompts/list" and "prompts" in self._offers:
            return self._page(
                info, params, "prompts", [p.describe() for p in self._prompts.values()]
            )
        if method == "completion/complete" and self._completion is not None:
            return await self._complete(request, info, outlet, params)
        if method == "subscriptions/listen" and modern:
            return await self._listen(request, outlet, params)
        if method == "logging/setLevel" and not modern and self.logging:
            # 2025 era only (2026 opts in per request); the connection sends a
            # 2025 session every log message, so the level is only checked here.
            if params.get("level") not in m.LOG_LEVELS:
                raise m.MrtrError("unknown log level", code=m.INVALID_PARAMS)
            return {}
        raise m.MrtrError(f"Method not found: {method}", code=m.METHOD_NOT_FOUND)

    # --- lists ----------------------------------------------------------------------------

    def _page(
        self, info: m.RequestInfo, params: Mapping[str, Any], key: str, items: list[Any]
    ) -> dict[str, Any]:
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            if not (isinstance(cursor, str) and cursor.isdigit() and 0 < int(cursor) < len(items)):
                raise m.MrtrError("Invalid cursor", code=m.INVALID_PARAMS, data={"cursor": cursor})
            start = int(cursor)
        end = start + self.page_size
        result: dict[str, Any] = {key: items[start:end]}
        if end < len(items):
            result["nextCursor"] = str(end)
        return self._cacheable(info, result, self.cache_ttl_ms, self.cache_scope)

    def _cacheable(
        self,
        info: m.RequestInfo,
        result: dict[str, Any],
        ttl_ms: int | None,
        scope: CacheScope | None,
    ) -> dict[str, Any]:
        if info.era == "modern":  # 2025 results have no caching hints
            _put(result, ttlMs=ttl_ms, cacheScope=scope)
        return result

    # --- the three multi round-trip methods -------------------------------------------------

    async def _run(
        self,
        fn: Handler,
        request: m.Request,
        info: m.RequestInfo,
        outlet: Outlet,
        shape: Callable[[Any], Mapping[str, Any]],
        *,
        on_error: Callable[[Exception], Mapping[str, Any]] | None = None,
        uri: str | None = None,
        uri_params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """One leg of ``fn``: open the state, run it (awaiting it if async), seal an ask."""
        params = request.params or {}
        if "inputResponses" in params and not isinstance(params["inputResponses"], Mapping):
            raise m.MrtrError(
                "inputResponses must be an object",
                code=m.INVALID_PARAMS,
                data={"reason": "inputResponses must be an object"},
            )
        leg = m.open_leg(
            request,
            info,
            sealer=self.sealer,
            principal=self.principal,
            now=self.clock(),
            flow_ttl=self.flow_ttl,
        )
        ctx = Context(leg, outlet, self, uri=uri, uri_params=uri_params)
        try:
            outcome = fn(ctx)
            if inspect.isawaitable(outcome):
                outcome = await outcome
        except m.MrtrError:
            raise
        except Exception as exc:
            if on_error is None:
                raise
            return dict(on_error(exc))
        if isinstance(outcome, m.Ask):
            return m.close_leg(leg, outcome)
        return m.close_leg(leg, shape(outcome))

    async def _call_tool(
        self, request: m.Request, info: m.RequestInfo, outlet: Outlet, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        tool = _named(params, self._tools, "tool")
        arguments = params.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise m.MrtrError("arguments must be an object", code=m.INVALID_PARAMS)
        missing = [k for k in tool.input_schema.get("required", ()) if k not in arguments]
        if missing:  # an input error the model can correct: a tool result, not a protocol error
            return _tool_error(f"Missing required arguments: {', '.join(missing)}")

        def shape(outcome: Any) -> Mapping[str, Any]:
            return _tool_result(tool, outcome)

        return await self._run(tool.fn, request, info, outlet, shape, on_error=_tool_exception)

    async def _read_resource(
        self, request: m.Request, info: m.RequestInfo, outlet: Outlet, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        uri = _required_string(params, "uri")
        found: Resource | ResourceTemplate | None = self._resources.get(uri)
        uri_params: dict[str, str] | None = None
        if found is None:
            for template in self._templates.values():
                uri_params = template.match(uri)
                if uri_params is not None:
                    found = template
                    break
        if found is None:
            raise m.MrtrError("Resource not found", code=m.INVALID_PARAMS, data={"uri": uri})
        reader = found

        def shape(outcome: Any) -> Mapping[str, Any]:
            result = _resource_result(uri, reader.mime_type, outcome)
            return self._cacheable(info, result, reader.ttl_ms, reader.cache_scope)

        return await self._run(
            reader.fn, request, info, outlet, shape, uri=uri, uri_params=uri_params
        )

    async def _get_prompt(
        self, request: m.Request, info: m.RequestInfo, outlet: Outlet, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        prompt = _named(params, self._prompts, "prompt")
        arguments = params.get("arguments", {})
        if not isinstance(arguments, Mapping) or not all(
            isinstance(v, str) for v in arguments.values()
        ):
            raise m.MrtrError("prompt arguments must be strings", code=m.INVALID_PARAMS)
        missing = [
            a["name"] for a in prompt.arguments if a.get("required") and a["name"] not in arguments
        ]
        if missing:
            raise m.MrtrError(
                f"Missing required arguments: {', '.join(missing)}",
                code=m.INVALID_PARAMS,
                data={"missing": missing},
            )
        return await self._run(prompt.fn, request, info, outlet, _prompt_result)

    # --- completion -----------------------------------------------------------------------

    async def _complete(
        self, request: m.Request, info: m.RequestInfo, outlet: Outlet, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        assert self._completion is not None
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, Mapping) or not isinstance(argument, Mapping):
            raise m.MrtrError("completion needs ref and argument objects", code=m.INVALID_PARAMS)
        if not isinstance(argument.get("name"), str) or not isinstance(argument.get("value"), str):
            raise m.MrtrError("argument needs a name and a value", code=m.INVALID_PARAMS)
        kind = ref.get("type")
        if kind == "ref/prompt":
            if ref.get("name") not in self._prompts:
                raise m.MrtrError(f"Unknown prompt: {ref.get('name')}", code=m.INVALID_PARAMS)
        elif kind == "ref/resource":
            if ref.get("uri") not in self._templates and ref.get("uri") not in self._resources:
                raise m.MrtrError(
                    "Resource not found", code=m.INVALID_PARAMS, data={"uri": ref.get("uri")}
                )
        else:
            raise m.MrtrError(f"unknown completion ref type {kind!r}", code=m.INVALID_PARAMS)
        leg = m.open_leg(request, info, sealer=None, principal=self.principal, now=self.clock())
        outcome = self._completion(Context(leg, outlet, self))
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if isinstance(outcome, Mapping):
            return dict(outcome)
        values = [str(v) for v in outcome]
        return {
            "completion": {
                "values": values[:100],  # the schema's bound
                "total": len(values),
                "hasMore": len(values) > 100,
            }
        }

    # --- subscriptions/listen -------------------------------------------------------------

    async def _listen(
        self, request: m.Request, outlet: Outlet, params: Mapping[str, Any]
    ) -> dict[str, Any]:
        wanted = params.get("notifications")
        if not isinstance(wanted, Mapping):
            raise m.MrtrError(
                "subscriptions/listen needs a notifications filter", code=m.INVALID_PARAMS
            )
        uris = wanted.get("resourceSubscriptions", [])
        if not (isinstance(uris, list) and all(isinstance(u, str) for u in uris)):
            raise m.MrtrError("resourceSubscriptions must be a list of URIs", code=m.INVALID_PARAMS)
        if len(uris) > MAX_SUBSCRIBED_URIS:
            raise m.MrtrError(
                f"at most {MAX_SUBSCRIBED_URIS} resourceSubscriptions", code=m.INVALID_PARAMS
            )
        if len(self._listeners) >= self.max_subscriptions:
            raise m.MrtrError(
                f"more than max_subscriptions={self.max_subscriptions} listen streams",
                code=m.INTERNAL_ERROR,
            )
        # Agree to what we can deliver; what we cannot is left out of the acknowledgement.
        offered = {
            "toolsListChanged": "tools" in self._offers,
            "promptsListChanged": "prompts" in self._offers,
            "resourcesListChanged": "resources" in self._offers,
        }
        agreed: dict[str, Any] = {
            k: True for k, ok in offered.items() if ok and wanted.get(k) is True
        }
        if uris and "resources" in self._offers:
            agreed["resourceSubscriptions"] = list(dict.fromkeys(uris))
        listener = _Listener(request.id, agreed)
        tag = {SUBSCRIPTION_ID: request.id}
        self._listeners.add(listener)
        try:
            await outlet.notify(
                "notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": agreed}
            )
            while True:
                await listener.wake.wait()
                listener.wake = trio.Event()
                due, listener.pending = listener.pending, {}
                for method, uri in due:
                    note: dict[str, Any] = {"_meta": tag}
                    if uri is not None:
                        note["uri"] = uri
                    await outlet.notify(method, note)
                if listener.closing:
                    return {"_meta": tag}
        finally:
            self._listeners.discard(listener)


# --- shaping results ----------------------------------------------------------------------


def _required_string(params: Mapping[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise m.MrtrError(f"params.{key} must be a string", code=m.INVALID_PARAMS)
    return value


def _named(params: Mapping[str, Any], table: Mapping[str, E], what: str) -> E:
    """The registered ``what`` that ``params.name`` names (unknown: -32602)."""
    name = _required_string(params, "name")
    found = table.get(name)
    if found is None:
        raise m.MrtrError(f"Unknown {what}: {name}", code=m.INVALID_PARAMS, data={"name": name})
    return found


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool_error(message: str) -> dict[str, Any]:
    return {"content": [_text(message)], "isError": True}


def _tool_exception(exc: Exception) -> Mapping[str, Any]:
    return _tool_error(str(exc) or type(exc).__name__)


def _tool_result(tool: Tool, outcome: Any) -> Mapping[str, Any]:
    if isinstance(outcome, str):
        return {"content": [_text(outcome)]}
    if isinstance(outcome, Mapping):
        if tool.output_schema is not None and "content" not in outcome:
            return {"content": [_text(json.dumps(outcome))], "structuredContent": dict(outcome)}
        return outcome
    if isinstance(outcome, list):
        return {"content": outcome}
    raise TypeError(f"tool {tool.name!r} returned {type(outcome).__name__}")


def _resource_result(uri: str, mime_type: str | None, outcome: Any) -> dict[str, Any]:
    if isinstance(outcome, Mapping):
        return dict(outcome)
    if isinstance(outcome, list):
        return {"contents": outcome}
    entry: dict[str, Any] = {"uri": uri}
    _put(entry, mimeType=mime_type)
    if isinstance(outcome, str):
        entry["text"] = outcome
    elif isinstance(outcome, (bytes, bytearray, memoryview)):
        entry["blob"] = base64.b64encode(bytes(outcome)).decode("ascii")
    else:
        raise TypeError(f"resource {uri!r} returned {type(outcome).__name__}")
    return {"contents": [entry]}


def _prompt_result(outcome: Any) -> Mapping[str, Any]:
    if isinstance(outcome, Mapping):
        return outcome
    if isinstance(outcome, str):
        outcome = [outcome]
    if isinstance(outcome, Sequence):
        messages = [
            {"role": "user", "content": _text(msg)} if isinstance(msg, str) else dict(msg)
            for msg in outcome
        ]
        return {"messages": messages}
    raise TypeError(f"a prompt returned {type(outcome).__name__}")


__all__ = [
    "MAX_SUBSCRIBED_URIS",
    "SUBSCRIPTION_ID",
    "Context",
    "McpApp",
    "Prompt",
    "Resource",
    "ResourceTemplate",
    "Tool",
    "compile_uri_template",
    "header_params",
]
