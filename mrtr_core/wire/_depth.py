"""How deep a JSON value nests, checked without recursion.

A message is bounded in depth as it is in size: the JSON backends parse far
deeper than any MCP message goes (orjson to 1024 levels, the standard library
to the interpreter's recursion limit), and every recursive consumer of a value
that deep (``repr``, ``json.dumps``, an app's own walk) is a ``RecursionError``
waiting to happen.  Depth counts objects and arrays: ``{}`` is 1 deep,
``{"a": [1]}`` 2; a scalar is 0.
"""

from __future__ import annotations

from typing import Any

from .._errors import LocalProtocolError, describe

_CONTAINERS = (dict, list, tuple)
_SCALARS = frozenset({str, int, float, bool, type(None)})

#: Deeper than every legitimate MCP message: the envelope, a result, a tool's
#: ``inputSchema`` with its nested properties, and room for nested arguments.
DEFAULT_MAX_DEPTH = 128


def check_max_depth(max_depth: Any) -> int:
    """``max_depth`` if it is a positive integer; ``LocalProtocolError`` otherwise."""
    if not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 1:
        raise LocalProtocolError(f"max_depth must be a positive integer, got {describe(max_depth)}")
    return max_depth


def may_be_deeper(raw: bytes | str, max_depth: int) -> bool:
    """Whether the JSON text ``raw`` can nest deeper than ``max_depth``.

    The fast pre-check: a text with at most ``max_depth`` opening brackets
    cannot (brackets inside strings only make the answer a conservative yes).
    """
    if isinstance(raw, str):
        return raw.count("{") + raw.count("[") > max_depth
    return raw.count(b"{") + raw.count(b"[") > max_depth


def deeper_than(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests objects and arrays (dicts, lists, tuples) deeper than
    ``max_depth``.

    Iterative and depth-first, so it stops at the first path that is too deep:
    a value that contains itself (only an app can hand one over) is simply too
    deep, found in ``max_depth`` steps down.
    """
    if not isinstance(value, _CONTAINERS):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > max_depth:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            # (Most children are strings and numbers: one set lookup passes them.)
            if type(child) not in _SCALARS and isinstance(child, _CONTAINERS):
                push((child, depth + 1))
    return False
