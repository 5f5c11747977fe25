"""JSON text for people and files, for any JSON value however deeply it nests.

Why not ``json.dumps``: with ``indent`` the standard library encodes in
Python, one recursive call per level, so a result nested a thousand deep (a
server may send one; our decoder may accept it) raised ``RecursionError``
while ``mrtr call`` printed it; the compact C encoder has the same limit a
little further down.  :func:`dumps` keeps its own stack instead, so depth
costs memory, never the interpreter's recursion limit.  Indentation stops at
:data:`MAX_INDENTED_DEPTH` levels: what nests deeper is written on one line
(indenting every level would make the text grow with the square of the depth,
and nobody reads column 2,000 anyway).  Up to that depth its text is exactly
``json.dumps(value, indent=..., ensure_ascii=False)``'s.  One more
difference: a character a terminal would obey or could not take is written
as its JSON escape (``"\\u202e"``), as JSON allows: DEL, the C1 controls
(U+009B is a CSI), the bidi controls (U+202E reverses what follows), the line
separators, a lone surrogate (which the standard library's reader lets in
from ``"\\ud800"``) (:mod:`~mrtr_transports.cli.terminal_text`, the one rule).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .terminal_text import json_unsafe

__all__ = ["MAX_INDENTED_DEPTH", "dumps"]

#: Containers nested deeper than this are written on one line.
MAX_INDENTED_DEPTH = 64

_END = object()


class _Open:
    """A container being written: its remaining items, how many were written, and
    what goes before each item and before its closing bracket."""

    __slots__ = ("before_closer", "before_item", "closer", "count", "identity", "items", "mapping")

    def __init__(
        self, items: Iterator[Any], mapping: bool, identity: int, margins: tuple[str, str]
    ) -> None:
        self.items = items
        self.mapping = mapping
        self.closer = "}" if mapping else "]"
        self.identity = identity
        self.count = 0
        self.before_item, self.before_closer = margins


def dumps(
    value: Any, *, indent: int | None = 2, default: Callable[[Any], Any] | None = None
) -> str:
    """``value`` as JSON text: ``indent`` spaces a level (``None``: one line, ``", "``
    and ``": "`` between items).  ``default`` turns what JSON has no type for into
    something it has (``TypeError`` without it); a container inside itself is
    ``ValueError``, as in ``json.dumps``."""
    out: list[str] = []
    stack: list[_Open] = []
    open_ids: set[int] = set()  # containers on the stack, to refuse cycles

    def margins(depth: int) -> tuple[str, str]:
        """Before each item and before the closing bracket of a container at ``depth``."""
        if indent is None or depth > MAX_INDENTED_DEPTH:
            return "", ""
        return "\n" + " " * (indent * depth), "\n" + " " * (indent * (depth - 1))

    def write(obj: Any) -> None:
        """A scalar is written; a non-empty container is opened and pushed."""
        if not _is_container(obj) and not _is_scalar(obj):
            if default is None:
                raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
            obj = default(obj)
        if _is_scalar(obj):
            out.append(_scalar(obj))
            return
        if not _is_container(obj):
            raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
        mapping = isinstance(obj, Mapping)
        if not obj:
            out.append("{}" if mapping else "[]")
            return
        if id(obj) in open_ids:
            raise ValueError("Circular reference detected")
        open_ids.add(id(obj))
        out.append("{" if mapping else "[")
        items = iter(obj.items() if mapping else obj)
        stack.append(_Open(items, mapping, id(obj), margins(len(stack) + 1)))

    write(value)
    while stack:
        container = stack[-1]
        item: Any = next(container.items, _END)
        if item is _END:
            stack.pop()
            open_ids.discard(container.identity)
            out.append(container.before_closer + container.closer)
            continue
        if container.count:
            out.append("," if container.before_item else ", ")
        container.count += 1
        out.append(container.before_item)
        if container.mapping:
            key, item = item
            out.append(_scalar(_key_text(key)) + ": ")
        write(item)
    return "".join(out)


def _is_scalar(obj: Any) -> bool:
    return obj is None or isinstance(obj, (str, int, float))  # (bool is an int)


def _is_container(obj: Any) -> bool:
    return isinstance(obj, (Mapping, list, tuple))


def _scalar(obj: str | int | float | None) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, str) and any(json_unsafe(char) for char in text):
        # DEL, C1 (U+009B is a CSI), bidi controls, lone surrogates: escaped, it is
        # still the same JSON, and the terminal it is printed on obeys none of them.
        text = "".join(f"\\u{ord(c):04x}" if json_unsafe(c) else c for c in text)
    return text


def _key_text(key: Any) -> str:
    """A member name as ``json.dumps`` writes it: keys that are not strings become one."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (int, float)):
        return json.dumps(key)  # true, false, null, 3, 1.5 (as json.dumps writes them)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
