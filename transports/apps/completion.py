"""``completion/complete``: the app's one completion handler, behind checked params.

The request's ``ref`` must name a registered prompt (``ref/prompt``) or a
resource or template (``ref/resource``), and ``argument`` must have a string
name and value; anything else is -32602.  The handler (``@app.completion()``)
gets a :class:`~mrtr_transports.apps.context.Context` whose ``params`` hold
``ref``, ``argument`` and ``context``, and returns the suggestions (any
iterable: at most 100 go out, with ``total`` and ``hasMore``) or a whole
``CompleteResult`` mapping.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from typing import Any

import mrtr_core as m
from mrtr_core._errors import clip

from .context import Context
from .registry import Handler

#: The schema's bound on ``completion.values``.
MAX_VALUES = 100


async def complete(
    handler: Handler, ctx: Context, prompts: Collection[str], uris: Collection[str]
) -> dict[str, Any]:
    """Check ``ctx.params`` against the registered ``prompts`` and ``uris``, run
    ``handler`` and shape what it returns into the result."""
    params = ctx.params
    ref = params.get("ref")
    argument = params.get("argument")
    if not isinstance(ref, Mapping) or not isinstance(argument, Mapping):
        raise m.MrtrError(
            "completion needs ref and argument objects", code=m.ErrorCode.INVALID_PARAMS
        )
    if not isinstance(argument.get("name"), str) or not isinstance(argument.get("value"), str):
        raise m.MrtrError("argument needs a name and a value", code=m.ErrorCode.INVALID_PARAMS)
    kind = ref.get("type")
    if kind == "ref/prompt":
        if ref.get("name") not in prompts:
            shown = clip(ref.get("name"))  # (a peer's value: never echoed whole)
            raise m.MrtrError(f"Unknown prompt: {shown}", code=m.ErrorCode.INVALID_PARAMS)
    elif kind == "ref/resource":
        if ref.get("uri") not in uris:
            raise m.MrtrError(
                "Resource not found",
                code=m.ErrorCode.INVALID_PARAMS,
                data={"uri": clip(ref.get("uri"))},
            )
    else:
        raise m.MrtrError(
            f"unknown completion ref type {clip(kind)}", code=m.ErrorCode.INVALID_PARAMS
        )
    outcome = handler(ctx)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    if isinstance(outcome, Mapping):
        return dict(outcome)
    values = [str(v) for v in outcome]
    return {
        "completion": {
            "values": values[:MAX_VALUES],
            "total": len(values),
            "hasMore": len(values) > MAX_VALUES,
        }
    }


__all__ = ["MAX_VALUES", "complete"]
