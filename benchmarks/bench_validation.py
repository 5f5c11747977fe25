"""Validating an answer or a tool's arguments: ``jsonschema`` against ``jsonschema-rs``.

The server validates every accepted form answer against the ``requestedSchema`` it
asked with, and every ``tools/call``'s arguments against the tool's ``inputSchema``
(``docs/server.md``).  Both libraries compile a schema once into a validator; what
repeats per call is running it.  For two schemas, a small elicitation form and a
typical tool ``inputSchema`` (the conformance suite's 2020-12 one: ``$defs``, ``$ref``,
``allOf``/``anyOf``, an enum), this times per library:

* valid   -- ``is_valid(value)`` on a value that passes (the common case);
* invalid -- collecting the errors of a value that fails (``iter_errors``), as the
             server does to name the field;
* compile -- building the validator (what the cache saves on every call).

``jsonschema`` runs with its format checker and ``jsonschema-rs`` with
``validate_formats=True``, both Draft 2020-12.  Timing is ``time.perf_counter`` around
a batch, repeated, best batch kept, the garbage collector paused inside each batch.
No pass/fail: it prints microseconds per call and ``py/rs``, how many times longer
``jsonschema`` takes.  Run: ``.venv/bin/python benchmarks/bench_validation.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import platform
import time
from collections.abc import Callable
from typing import Any

import jsonschema
import jsonschema_rs

ELICITATION = {
    "type": "object",
    "properties": {
        "nights": {"type": "integer", "minimum": 1, "maximum": 30},
        "email": {"type": "string", "format": "email"},
        "room": {"type": "string", "enum": ["single", "double", "suite"]},
    },
    "required": ["nights", "email"],
}
ELICITATION_VALID = {"nights": 3, "email": "ada@example.com", "room": "double"}
ELICITATION_INVALID = {"nights": 40, "email": "nope", "room": "attic"}

TOOL_INPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            "required": ["city"],
        }
    },
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
    },
    "required": ["name"],
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "additionalProperties": False,
}
TOOL_VALID = {
    "name": "Ada",
    "address": {"street": "1 Main St", "city": "London"},
    "contactMethod": "email",
    "email": "ada@example.com",
    "tags": ["a", "b"],
}
TOOL_INVALID = {"name": "", "address": {"street": 1}, "contactMethod": "fax", "extra": True}

CASES = {
    "elicitation form": (ELICITATION, ELICITATION_VALID, ELICITATION_INVALID),
    "tool inputSchema": (TOOL_INPUT, TOOL_VALID, TOOL_INVALID),
}


def compile_py(schema: dict[str, Any]) -> Any:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def compile_rs(schema: dict[str, Any]) -> Any:
    return jsonschema_rs.validator_for(schema, validate_formats=True, offline=True)


def best_per_call(fn: Callable[[], object], batch: int, repeats: int) -> float:
    """Microseconds per call of ``fn``: the fastest of ``repeats`` batches."""
    for _ in range(min(batch, 200)):
        fn()
    best = float("inf")
    for _ in range(repeats):
        gc.disable()
        try:
            start = time.perf_counter()
            for _ in range(batch):
                fn()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best / batch * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, noisier")
    args = parser.parse_args()
    batch, repeats = (2_000, 3) if args.quick else (20_000, 7)
    print(
        f"python {platform.python_version()}, jsonschema {jsonschema_version()}, "
        f"jsonschema-rs {jsonschema_rs_version()}; {batch} calls x {repeats}, best batch"
    )
    print(f"{'schema':<18} {'row':<8} {'jsonschema µs':>14} {'jsonschema-rs µs':>17} {'py/rs':>7}")
    for name, (schema, valid, invalid) in CASES.items():
        for row, us_py, us_rs in measure(schema, valid, invalid, batch, repeats):
            print(f"{name:<18} {row:<8} {us_py:>14.2f} {us_rs:>17.2f} {us_py / us_rs:>7.1f}")


def measure(
    schema: dict[str, Any], valid: Any, invalid: Any, batch: int, repeats: int
) -> list[tuple[str, float, float]]:
    """Per row: its name, then µs per call with jsonschema and with jsonschema-rs."""
    py, rs = compile_py(schema), compile_rs(schema)
    # Both must agree before either is timed.
    assert py.is_valid(valid) and rs.is_valid(valid)
    assert not py.is_valid(invalid) and not rs.is_valid(invalid)
    rows: dict[str, tuple[Callable[[], object], Callable[[], object], int]] = {
        "valid": (lambda: py.is_valid(valid), lambda: rs.is_valid(valid), batch),
        "invalid": (
            lambda: list(py.iter_errors(invalid)),
            lambda: list(rs.iter_errors(invalid)),
            batch // 4,
        ),
        "compile": (lambda: compile_py(schema), lambda: compile_rs(schema), batch // 20),
    }
    return [
        (row, best_per_call(run_py, size, repeats), best_per_call(run_rs, size, repeats))
        for row, (run_py, run_rs, size) in rows.items()
    ]


def jsonschema_version() -> str:
    from importlib.metadata import version

    return version("jsonschema")


def jsonschema_rs_version() -> str:
    from importlib.metadata import version

    return version("jsonschema-rs")


if __name__ == "__main__":
    main()
