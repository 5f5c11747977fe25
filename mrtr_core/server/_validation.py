"""Checking a value against a JSON Schema: the one home of that rule on the server.

Two things the client sends are checked against a schema the server wrote: an
accepted form answer against the ``requestedSchema`` it was asked with
(:class:`~mrtr_core.server.Answers`), and a tool's arguments against its
``inputSchema`` (the app framework).  Both go through :func:`compile_schema`.

The dialect is the schema's ``$schema``, JSON Schema 2020-12 when absent (as MCP
2026-07-28 says); the formats ``email``, ``uri``, ``date`` and ``date-time`` (and
the others the library knows) are asserted, not just annotations.  A ``$ref`` to a
network URI is never fetched (the spec forbids it by default): the schema fails to
compile instead.  The library is ``jsonschema-rs``, chosen by measurement
(``benchmarks/bench_validation.py``: 50-170x faster than ``jsonschema`` per valid
call, about 5x per invalid one) and because it checks all four elicitation formats
without extra packages.

A compiled schema is kept in a bounded cache keyed by the schema's canonical JSON,
so the same schema (a module-level ask, say) is compiled once, not on every answer.
A value nested too deeply for the validator is reported as a problem, never raised.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import attrs
import jsonschema_rs

from .._errors import LocalProtocolError, clip

#: Compiled schemas kept at most (least recently used dropped first).
MAX_COMPILED_SCHEMAS = 512


@attrs.frozen
class SchemaProblem:
    """Why a value does not match a schema: where (a JSON Pointer into the value,
    ``""`` for the value itself) and what is wrong."""

    field: str
    reason: str


def _pointer(path: list[str | int]) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


class CompiledSchema:
    """One schema, compiled; :meth:`problem` checks a value against it."""

    __slots__ = ("_validator",)

    def __init__(self, schema: Mapping[str, Any]) -> None:
        try:
            self._validator = jsonschema_rs.validator_for(
                dict(schema), validate_formats=True, offline=True
            )
        except ValueError as exc:  # an invalid schema, an unknown dialect, an unresolved $ref
            first_line = str(exc).split("\n", 1)[0]
            raise LocalProtocolError(f"not a usable JSON Schema: {first_line}") from exc

    def problem(self, value: Any) -> SchemaProblem | None:
        """The first reason ``value`` does not match, or ``None`` when it does."""
        try:
            for error in self._validator.iter_errors(value):
                path = list(error.instance_path)
                kind = error.kind
                # Name the field itself when the error is about one the object lacks or has.
                if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
                    path.append(kind.property)
                elif isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
                    path.append(kind.unexpected[0])
                # (both quote the peer's value or key: clipped, never echoed whole)
                return SchemaProblem(str(clip(_pointer(path))), str(clip(error.message)))
        except (ValueError, RecursionError):
            # The validator reads the value into its own form first and gives up on one
            # nested past its recursion limit (or on something that is not JSON at all).
            return SchemaProblem("", "the value is nested too deeply, or is not a JSON value")
        return None


_compiled: OrderedDict[str, CompiledSchema] = OrderedDict()

# The same schema object asked again and again (a module-level ask, a tool's
# inputSchema) skips the canonical key: found by identity, and used while it still
# equals what it held when compiled (a deep snapshot, compared with ``==`` in C).
# ``==`` takes ``True`` for ``1``: a schema mutated in place from one to the other
# between two uses keeps its first compilation (mutating a schema in use is a bug).
_by_identity: dict[int, tuple[Mapping[str, Any], Any, CompiledSchema]] = {}


def compile_schema(schema: Mapping[str, Any]) -> CompiledSchema:
    """``schema`` compiled, from the cache when it was compiled before.

    Raises :class:`~mrtr_core.LocalProtocolError` for a schema that cannot be used
    (the server wrote it: a bug to fix, not a client's fault).
    """
    seen = _by_identity.get(id(schema))
    if seen is not None and seen[0] is schema and seen[1] == schema:
        return seen[2]
    try:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise LocalProtocolError(f"a JSON Schema is a JSON object: {exc}") from exc
    found = _compiled.get(key)
    if found is not None:
        _compiled.move_to_end(key)
    else:
        found = CompiledSchema(schema)
        _compiled[key] = found
        if len(_compiled) > MAX_COMPILED_SCHEMAS:
            _compiled.popitem(last=False)
    if len(_by_identity) >= MAX_COMPILED_SCHEMAS:
        _by_identity.clear()  # (rare: a server with that many schema objects)
    # The snapshot is the canonical JSON read back: its own copy, plain dicts and lists.
    _by_identity[id(schema)] = (schema, json.loads(key), found)
    return found


def schema_problem(schema: Mapping[str, Any], value: Any) -> SchemaProblem | None:
    """The first reason ``value`` does not match ``schema``, or ``None`` when it does."""
    return compile_schema(schema).problem(value)
