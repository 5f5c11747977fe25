"""``mrtr list TARGET [tools|prompts|resources|templates]``: what a server offers, readably.

The model: one plain request per page (``tools/list``, ``prompts/list``,
``resources/list``, ``resources/templates/list``; no rounds), every page
followed up to :data:`MAX_PAGES`.  Tools are listed as the client keeps them
(``Client.list_tools``: over HTTP a tool whose ``x-mcp-header`` annotations are
invalid is dropped, as it cannot be called).

The default output is for a person: each entry's name and description, then
what it takes, one line each::

    weather  The weather in a city
        city  string, required  The city to look up
        days  integer, default 1

``--json`` prints the entries as the server sent them instead, one JSON object
``{"tools": [...]}`` on stdout, for programs.  Everything in the readable form
comes from the server, so each piece is made safe for a terminal first
(:func:`~mrtr_transports.cli.terminal_text.one_line`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import mrtr_core as m

from ..client.client import Client
from ..client.errors import CallError
from .call import (
    client_failure,
    client_options,
    failure_text,
    parse_target,
    print_result,
    write_out,
)
from .connecting import UsageError, open_target, parse_headers
from .exit_codes import ExitCode
from .notices import Notices
from .signing_in import sign_in_plan, signed_in
from .terminal_text import one_line, shown

__all__ = ["KINDS", "MAX_PAGES", "describe_schema", "run_list", "show_entries"]

#: What can be listed: the request's method and the result's list field.
KINDS: Mapping[str, tuple[str, str]] = {
    "tools": ("tools/list", "tools"),
    "prompts": ("prompts/list", "prompts"),
    "resources": ("resources/list", "resources"),
    "templates": ("resources/templates/list", "resourceTemplates"),
}
MAX_PAGES = 100
#: How long a description may run in the readable form (the JSON form has it whole).
MAX_DESCRIPTION = 200
#: How deep the readable form goes into a nested ``properties`` schema.
MAX_SCHEMA_DEPTH = 4


async def fetch_entries(
    client: Client, what: str, timeout: float | None = None
) -> list[dict[str, Any]]:
    """Every entry of ``what`` (all pages, ``timeout`` seconds each)."""
    if what == "tools":
        return await client.list_tools(timeout=timeout)
    method, field = KINDS[what]
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        result = await client.request(
            method, {"cursor": cursor} if cursor else None, timeout=timeout
        )
        page = result.get(field)
        if not isinstance(page, list):
            raise CallError(
                m.ErrorCode.INVALID_PARAMS, f"the {method} result has no {field!r} list"
            )
        entries.extend(dict(entry) for entry in page if isinstance(entry, Mapping))
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return entries


# --- The readable form -----------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _text(value: Any, limit: int = MAX_DESCRIPTION) -> str:
    return one_line(value if isinstance(value, str) else str(value), limit)


def _type_of(prop: Mapping[str, Any]) -> str:
    """A property's type in a few words: ``string``, ``integer | null``, ``one of a, b``."""
    if isinstance(prop.get("enum"), list):
        return "one of " + ", ".join(one_line(_json(v), 40) for v in prop["enum"][:20])
    if "const" in prop:
        return "= " + one_line(_json(prop["const"]), 40)
    kind = prop.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if isinstance(kind, str):
        if kind == "array" and isinstance(prop.get("items"), Mapping):
            return f"array of {_type_of(prop['items'])}"
        return kind
    for combinator in ("anyOf", "oneOf"):
        options = prop.get(combinator)
        if isinstance(options, list):
            return " | ".join(_type_of(o) for o in options[:10] if isinstance(o, Mapping))
    return "any"


def describe_schema(schema: Any, indent: str = "    ", depth: int = 0) -> list[str]:
    """One line per property of an object ``schema``: name, type, required or default,
    description; nested object properties indented below their parent."""
    if not isinstance(schema, Mapping):
        return []
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return [f"{indent}(no arguments)"] if depth == 0 else []
    required = schema.get("required")
    required = set(required) if isinstance(required, list) else set()
    width = min(24, max(len(_text(name, 24)) for name in properties))
    lines = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        notes = [_text(_type_of(prop), 80)]
        if name in required:
            notes.append("required")
        if "default" in prop:
            notes.append("default " + one_line(_json(prop["default"]), 40))
        line = f"{indent}{_text(name, 24):<{width}}  {', '.join(notes)}"
        about = prop.get("description") or prop.get("title")
        if about:
            line += f"  {_text(about)}"
        lines.append(line)
        if depth + 1 < MAX_SCHEMA_DEPTH and prop.get("type") == "object":
            lines.extend(describe_schema(prop, indent + "  ", depth + 1))
    return lines


def _heading(name: Any, description: Any) -> str:
    line = _text(name, 120)
    return f"{line}  {_text(description)}" if description else line


def show_entries(what: str, entries: list[dict[str, Any]]) -> list[str]:
    """The readable lines of a list of ``what``."""
    if not entries:
        return [f"(no {what})"]
    lines: list[str] = []
    for entry in entries:
        if what == "tools":
            lines.append(_heading(entry.get("name"), entry.get("description")))
            lines.extend(describe_schema(entry.get("inputSchema")))
        elif what == "prompts":
            lines.append(_heading(entry.get("name"), entry.get("description")))
            arguments = entry.get("arguments")
            if not isinstance(arguments, list) or not arguments:
                lines.append("    (no arguments)")
            for argument in arguments or ():
                if isinstance(argument, Mapping):
                    line = f"    {_text(argument.get('name'), 40)}  string"
                    line += ", required" if argument.get("required") is True else ""
                    if argument.get("description"):
                        line += f"  {_text(argument['description'])}"
                    lines.append(line)
        else:
            where = entry.get("uri") if what == "resources" else entry.get("uriTemplate")
            lines.append(_heading(where, entry.get("description")))
            about = [f"name {_text(entry.get('name'), 80)}"] if entry.get("name") else []
            if entry.get("mimeType"):
                about.append(_text(entry["mimeType"], 80))
            if about:
                lines.append("    " + ", ".join(about))
    return lines


# --- The command ----------------------------------------------------------------------------


async def run_list(
    args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """``mrtr list``; returns the exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr

    def fail(code: int, message: str) -> int:
        err.write(f"mrtr list: {shown(message)}\n")
        err.flush()
        return code

    try:
        kind, where = parse_target(args.target)
        headers = parse_headers(args.header, kind)
        sign_in = sign_in_plan(args, kind, headers, sys.stdin)
        headers = sign_in.headers(headers)
    except UsageError as exc:
        return fail(ExitCode.USAGE, str(exc))
    options = client_options(args, None, Notices(err))
    try:
        async with signed_in(sign_in, args.target, err, "mrtr list") as auth:
            if auth is not None:
                options["auth"] = auth
            async with open_target(kind, where, headers, options) as client:
                entries = await fetch_entries(client, args.what, args.timeout)
    except BaseException as exc:  # sorted below; the rest re-raised
        code = client_failure(exc)
        if code is None:
            raise
        return fail(code, failure_text(exc, args.timeout))
    if args.json:
        return print_result(out, {KINDS[args.what][1]: entries}, ExitCode.RESULT, fail)
    return write_out(out, "\n".join(show_entries(args.what, entries)), ExitCode.RESULT, fail)
