"""What a handler returns, made into the wire result of its method.

Per kind (anything else is a bug: ``TypeError``, or for a tool a result with ``isError``):

* tool: a ``CallToolResult`` mapping, a string (one text block), a list of
  content blocks, or any other JSON value (an ``int``, an attrs instance, a list
  of them: one text block of its JSON); with an ``output_schema``, anything but a
  ``CallToolResult`` is the structured result (a JSON text block is added),
  checked against that schema.  ``None`` is empty content for a tool declared
  ``-> None``; a result that is none of these (``None`` from a tool that did not
  say so: a forgotten ``return``) is a tool result with ``isError`` that says so.
  An exception that is not an ``MrtrError`` becomes a tool result with
  ``isError: true`` (the model can read it); an ``MrtrError`` is the JSON-RPC error.
* resource: a ``ReadResourceResult`` mapping, ``str`` (text), ``bytes``
  (base64 blob) or a list of contents.
* prompt: a ``GetPromptResult`` mapping, a string (one user message) or a
  list of messages (each a mapping or a string).

Caching hints (``ttlMs``, ``cacheScope``) go only on 2026-07-28 results.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import mrtr_core as m

from .registry import CacheScope, Tool, put_present
from .signatures import to_json

log = logging.getLogger("mrtr.apps")


def with_cache_hints(
    info: m.server.RequestInfo,
    result: dict[str, Any],
    ttl_ms: int | None,
    scope: CacheScope | None,
) -> dict[str, Any]:
    """``result`` with the caching hints that are set (2025 results have none)."""
    if info.era == "modern":
        put_present(result, ttlMs=ttl_ms, cacheScope=scope)
    return result


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_error(message: str) -> dict[str, Any]:
    return {"content": [text_block(message)], "isError": True}


def tool_exception(exc: Exception) -> Mapping[str, Any]:
    return tool_error(str(exc) or type(exc).__name__)


def tool_result(tool: Tool, outcome: Any) -> Mapping[str, Any]:
    if tool.output_schema is None:
        if isinstance(outcome, str):
            return {"content": [text_block(outcome)]}
        if isinstance(outcome, Mapping):
            return outcome  # a CallToolResult
    elif isinstance(outcome, Mapping) and "content" in outcome:
        return outcome  # a CallToolResult (its structuredContent is the handler's word)
    else:
        return _structured(tool, outcome)
    if outcome is None:
        if tool.returns_none:  # an action: nothing to say, and said so by ``-> None``
            return {"content": []}
        return _unusable(
            tool,
            "None: return its result (or `return ctx.ask(...)` for another round), "
            "or annotate it `-> None` to send an empty result",
        )
    if isinstance(outcome, list) and all(
        isinstance(block, Mapping) and "type" in block for block in outcome
    ):
        return {"content": outcome}
    try:  # a value (an int, a list of them, an attrs instance...): as JSON text
        return {"content": [text_block(json.dumps(to_json(outcome), allow_nan=False))]}
    except (TypeError, ValueError, RecursionError) as exc:
        return _unusable(tool, f"{type(outcome).__name__}, which is not a result ({exc})")


def _structured(tool: Tool, outcome: Any) -> Mapping[str, Any]:
    """``outcome`` as the ``structuredContent`` its ``outputSchema`` promises (the
    spec's MUST), with its JSON as text for clients that read only ``content``."""
    try:
        structured = to_json(outcome)
        text = json.dumps(structured, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return _unusable(tool, f"{type(outcome).__name__}, which is not JSON ({exc})")
    check = tool.result_schema
    problem = None if check is None else check.problem(structured)
    if problem is not None:
        where = f" at {problem.field!r}" if problem.field else ""
        return _unusable(
            tool, f"a result that does not match its outputSchema{where}: {problem.reason}"
        )
    return {"content": [text_block(text)], "structuredContent": structured}


def _unusable(tool: Tool, what: str) -> dict[str, Any]:
    """A handler's mistake, told to the client (a tool error: the call is over, and
    ``-32603`` would hide why) and to the server's log."""
    message = f"tool {tool.name!r} returned {what}"
    log.warning("%s", message)
    return tool_error(message)


def resource_result(uri: str, mime_type: str | None, outcome: Any) -> dict[str, Any]:
    if isinstance(outcome, Mapping):
        return dict(outcome)
    if isinstance(outcome, list):
        return {"contents": outcome}
    entry: dict[str, Any] = {"uri": uri}
    put_present(entry, mimeType=mime_type)
    if isinstance(outcome, str):
        entry["text"] = outcome
    elif isinstance(outcome, (bytes, bytearray, memoryview)):
        entry["blob"] = base64.b64encode(bytes(outcome)).decode("ascii")
    else:
        raise TypeError(f"resource {uri!r} returned {type(outcome).__name__}")
    return {"contents": [entry]}


def prompt_result(outcome: Any) -> Mapping[str, Any]:
    if isinstance(outcome, Mapping):
        return outcome
    if isinstance(outcome, str):
        outcome = [outcome]
    if isinstance(outcome, Sequence):
        messages = [
            {"role": "user", "content": text_block(msg)} if isinstance(msg, str) else dict(msg)
            for msg in outcome
        ]
        return {"messages": messages}
    raise TypeError(f"a prompt returned {type(outcome).__name__}")


__all__ = [
    "prompt_result",
    "resource_result",
    "text_block",
    "tool_error",
    "tool_exception",
    "tool_result",
    "with_cache_hints",
]
