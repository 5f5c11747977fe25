"""What an ``McpApp`` registers: tools, resources, resource templates and prompts.

Each entry keeps the handler (``fn``, a function of one
:class:`~mrtr_transports.apps.context.Context`), whether it is written in the
continuation style (``continuation``: parked between rounds instead of re-run,
see ``docs/server.md``), and the metadata its list result describes
(``describe()``, the wire object of ``tools/list``, ``resources/list``,
``resources/templates/list`` or ``prompts/list``).

A resource template is an RFC 6570 level-1 URI template: each ``{name}``
matches one path segment (:func:`compile_uri_template`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

import mrtr_core as m

if TYPE_CHECKING:
    from .context import Context

#: Tool names the spec recommends (1-128 of these characters).
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")

CacheScope = Literal["public", "private"]
Handler = Callable[["Context"], Any]


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
    continuation: bool = False
    #: ``input_schema`` compiled once, at registration: every call's arguments are checked.
    arguments_schema: m.server._validation.CompiledSchema | None = attrs.field(
        default=None, eq=False
    )
    #: Unproven answers read as missing (``ctx.require_proof()`` before the handler).
    require_proof: bool = False
    #: Declared ``-> None``: a result of ``None`` is empty content, not a mistake.
    returns_none: bool = False
    #: ``output_schema`` compiled once: every structured result is checked against it.
    result_schema: m.server._validation.CompiledSchema | None = attrs.field(default=None, eq=False)
    #: May it run as a task (SEP-2663; ``task_runs``): ``None`` never, ``"optional"``,
    #: ``"required"`` (-32021 to a request that did not declare the extension).
    #: Not listed: the 2026-07-28 ``Tool`` has no field for it.
    task: Literal["optional", "required"] | None = None
    #: The OAuth scopes a call needs (``add_tool(scopes=...)``): checked where the
    #: transport verified a token (``ctx.identity``), 403 ``insufficient_scope`` over
    #: HTTP.  Not listed: the ``Tool`` has no field for it.
    scopes: tuple[str, ...] = ()

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
    continuation: bool = False

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name}
        put_present(out, title=self.title, description=self.description, mimeType=self.mime_type)
        put_present(out, size=self.size, annotations=self.annotations)
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
    continuation: bool = False

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        put_present(out, title=self.title, description=self.description, mimeType=self.mime_type)
        put_present(out, annotations=self.annotations)
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
    continuation: bool = False

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        put_present(out, title=self.title, description=self.description)
        if self.arguments:
            out["arguments"] = [dict(a) for a in self.arguments]
        return out


def put_present(out: dict[str, Any], **fields: Any) -> None:
    """Set the fields that are not ``None``."""
    out.update({key: value for key, value in fields.items() if value is not None})


def name_of(fn: Callable[..., Any], name: str | None, what: str) -> str:
    """The name given, or the function's own."""
    if name is not None and not isinstance(name, str):
        raise TypeError(f"a {what}'s name is a string, not {name!r}")
    return name or str(getattr(fn, "__name__", ""))


def description_of(fn: Callable[..., Any], given: str | None) -> str | None:
    """``given``, or else the first paragraph of ``fn``'s docstring."""
    if given is not None:
        return given
    doc = inspect.getdoc(fn)
    return doc.split("\n\n")[0].replace("\n", " ").strip() if doc else None


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


__all__ = [
    "TOOL_NAME",
    "CacheScope",
    "Handler",
    "Prompt",
    "Resource",
    "ResourceTemplate",
    "Tool",
    "compile_uri_template",
    "description_of",
    "name_of",
    "put_present",
]
