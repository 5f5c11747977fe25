"""What a handler returns, made into the wire result of its method.

Per kind (anything else is a bug: ``TypeError``):

* tool: a ``CallToolResult`` mapping, a string (one text block) or a list of
  content blocks; with an ``output_schema``, a mapping without ``content`` is
  the structured result (a JSON text block is added).  An exception that is
  not an ``MrtrError`` becomes a tool result with ``isError: true`` (the model
  can read it); an ``MrtrError`` is the JSON-RPC error.
* resource: a ``ReadResourceResult`` mapping, ``str`` (text), ``bytes``
  (base64 blob) or a list of contents.
* prompt: a ``GetPromptResult`` mapping, a string (one user message) or a
  list of messages (each a mapping or a string).

Caching hints (``ttlMs``, ``cacheScope``) go only on 2026-07-28 results.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

import mrtr_core as m

from .registry import CacheScope, Tool, put_present


def with_cache_hints(
    info: m.protocol.RequestInfo,
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
    if isinstance(outcome, str):
        return {"content": [text_block(outcome)]}
    if isinstance(outcome, Mapping):
        if tool.output_schema is not None and "content" not in outcome:
            return {
                "content": [text_block(json.dumps(outcome))],
                "structuredContent": dict(outcome),
            }
        return outcome
    if isinstance(outcome, list):
        return {"content": outcome}
    raise TypeError(f"tool {tool.name!r} returned {type(outcome).__name__}")


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
