"""Schemas from signatures: our small generator against pydantic (and cattrs for conversion).

What ``@app.tool`` over ``def forecast(ctx, place: Place, days: int = 1, ...)`` costs, by
the way its schema is generated and its arguments checked and converted:

* ours     -- ``mrtr_transports.apps.signatures``: the schema written from the annotations,
              checked by the core's ``jsonschema-rs`` validator (compiled once), converted
              by closures built at registration;
* rs+cattrs -- the same schema and check, converted by ``cattrs.structure`` instead;
* pydantic -- what the official Python SDK does: a model made from the signature
              (``pydantic.create_model``), ``model_json_schema()`` for the schema,
              ``model_validate`` to check and convert.  pydantic has no attrs support, so
              its tool takes the same shapes as stdlib dataclasses.

Rows: the import (a fresh interpreter, ``mrtr_core`` already imported, as it always is
for an app), generating one tool's schema, and one call's arguments checked and
converted, valid and invalid.  Then which of the issue's annotation kinds each gives a
schema for and converts.  No pass/fail: figures for ``docs/server.md``.
Run: ``.venv/bin/python benchmarks/bench_schemas.py [--quick]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import enum
import statistics
import subprocess
import sys
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import attrs
import cattrs
import pydantic
from _harness import Stats, machine, measure, timed_loop
from mrtr_transports.apps.signatures import InvalidArguments, build, read_signature

import mrtr_core as m


class Units(enum.Enum):
    METRIC = "metric"
    IMPERIAL = "imperial"


@attrs.frozen
class Place:
    city: str
    country: str | None = None


@dataclasses.dataclass(frozen=True)
class PlaceDC:
    city: str
    country: str | None = None


def forecast(
    ctx: Any,
    place: Annotated[Place, "where"],
    days: Annotated[int, "how many days"] = 1,
    units: Units = Units.METRIC,
    hours: list[int] | None = None,
    mode: Literal["brief", "full"] = "brief",
    weights: dict[str, float] | None = None,
) -> str:
    return ""


FIELDS: dict[str, tuple[Any, Any]] = {
    "place": (Annotated[PlaceDC, pydantic.Field(description="where")], ...),
    "days": (Annotated[int, pydantic.Field(description="how many days")], 1),
    "units": (Units, Units.METRIC),
    "hours": (list[int] | None, None),
    "mode": (Literal["brief", "full"], "brief"),
    "weights": (dict[str, float] | None, None),
}

VALID = {
    "place": {"city": "Lisbon", "country": "PT"},
    "days": 3,
    "units": "imperial",
    "hours": [6, 12, 18],
    "weights": {"rain": 1},
}
INVALID = {**VALID, "days": "three"}


# --- the three ways -------------------------------------------------------------------


def ours_schema() -> dict[str, Any]:
    return read_signature(forecast, "tool 'forecast'").input_schema()


def pydantic_model() -> type[pydantic.BaseModel]:
    return pydantic.create_model("forecastArguments", **FIELDS)  # type: ignore[call-overload,no-any-return]


def pydantic_schema() -> dict[str, Any]:
    return pydantic_model().model_json_schema()


def ours_checker() -> Callable[[dict[str, Any]], Any]:
    sig = read_signature(forecast, "tool 'forecast'")
    check = m.server._validation.compile_schema(sig.input_schema())
    handler = sig.bind(lambda ctx, **kwargs: kwargs)

    class Ctx:
        arguments: dict[str, Any]

    ctx = Ctx()

    def call(arguments: dict[str, Any]) -> Any:
        if check.problem(arguments) is not None:
            return None
        ctx.arguments = arguments
        return handler(ctx)

    return call


def cattrs_checker() -> Callable[[dict[str, Any]], Any]:
    sig = read_signature(forecast, "tool 'forecast'")
    check = m.server._validation.compile_schema(sig.input_schema())
    hints = typing.get_type_hints(forecast)
    converter = cattrs.Converter()

    def call(arguments: dict[str, Any]) -> Any:
        if check.problem(arguments) is not None:
            return None
        return {k: converter.structure(v, hints[k]) for k, v in arguments.items()}

    return call


def pydantic_checker() -> Callable[[dict[str, Any]], Any]:
    model = pydantic_model()

    def call(arguments: dict[str, Any]) -> Any:
        try:
            return model.model_validate(arguments)
        except pydantic.ValidationError:
            return None

    return call


# --- import time ----------------------------------------------------------------------

IMPORTS = {
    "ours": "import mrtr_transports.apps.signatures",
    "cattrs (mrtr_core has it already)": "import cattrs",
    "pydantic": "import pydantic; pydantic.TypeAdapter",
}


def import_ms(statement: str, runs: int) -> float:
    code = (
        "import time, mrtr_core, mrtr_transports.apps; start = time.perf_counter(); "
        f"{statement}; print(time.perf_counter() - start)"
    )
    times = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout)
        for _ in range(runs)
    ]
    return statistics.median(times) * 1000


# --- coverage -------------------------------------------------------------------------

# (name, annotation, a JSON value of it, a test that the converted value has the type)
KINDS: list[tuple[str, Any, Any, Callable[[Any], bool]]] = [
    ("str/int/float/bool", tuple[str, int, float, bool], ["a", 1, 2, True], lambda v: v[2] == 2.0),
    ("None", None, None, lambda v: v is None),
    ("list[X]", list[int], [1, 2], lambda v: v == [1, 2]),
    ("dict[str, X]", dict[str, float], {"a": 1}, lambda v: type(v["a"]) is float),
    ("tuple[X, Y]", tuple[int, str], [1, "a"], lambda v: v == (1, "a")),
    ("Literal", Literal["a", "b"], "a", lambda v: v == "a"),
    ("Enum", Units, "metric", lambda v: v is Units.METRIC),
    ("X | None", int | None, None, lambda v: v is None),
    ("union", int | str, "x", lambda v: v == "x"),
    ("Annotated[T, str]", Annotated[str, "a city"], "x", lambda v: v == "x"),
    ("datetime", datetime.date, "2026-07-28", lambda v: v == datetime.date(2026, 7, 28)),
    ("attrs class", Place, {"city": "x"}, lambda v: isinstance(v, Place)),
]


def ours_covers(annotation: Any, value: Any, ok: Callable[[Any], bool]) -> str:
    try:
        schema, convert = build(annotation, "x")
        if m.server._validation.compile_schema(
            {"type": "object", "properties": {"v": schema}}
        ).problem({"v": value}):
            return "no (refused)"
        converted = value if convert is None else convert(value)
        description = schema.get("description")
        if typing.get_origin(annotation) is Annotated and description != "a city":
            return "schema lacks the description"
        return "yes" if ok(converted) else "converts wrongly"
    except (TypeError, InvalidArguments) as exc:
        return f"no ({str(exc)[:30]})"


def pydantic_covers(annotation: Any, value: Any, ok: Callable[[Any], bool]) -> str:
    try:
        adapter = pydantic.TypeAdapter(annotation)
        schema = adapter.json_schema()
        converted = adapter.validate_python(value)
        if typing.get_origin(annotation) is Annotated and schema.get("description") != "a city":
            return "yes, but Annotated[T, str] is no description"
        return "yes" if ok(converted) else "converts wrongly"
    except Exception as exc:  # pydantic's own errors: no schema for the type
        return f"no ({type(exc).__name__})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, noisier")
    args = parser.parse_args()
    n, repeats, runs = (200, 3, 3) if args.quick else (2_000, 7, 9)
    print(machine(("mrtr", "pydantic", "pydantic_core", "cattrs", "jsonschema-rs", "attrs")))
    print()
    print("import (ms, median of fresh interpreters, mrtr_core already imported)")
    for name, statement in IMPORTS.items():
        print(f"  {name:<36} {import_ms(statement, runs):8.1f}")
    print()
    print(f"{'per tool / per call':<34} {'ours µs':>9} {'rs+cattrs µs':>13} {'pydantic µs':>12}")
    rows: list[tuple[str, Stats | None, Stats | None, Stats]] = [
        (
            "schema of one tool",
            measure(timed_loop(ours_schema), n, repeats),
            None,
            measure(timed_loop(pydantic_schema), n, repeats),
        )
    ]
    checkers = (ours_checker(), cattrs_checker(), pydantic_checker())
    assert checkers[0](VALID)["place"] == Place("Lisbon", "PT")
    assert checkers[1](VALID)["place"] == Place("Lisbon", "PT")
    assert checkers[2](VALID).place == PlaceDC("Lisbon", "PT")
    assert all(check(INVALID) is None for check in checkers)
    for label, value in (("valid", VALID), ("invalid", INVALID)):
        ours, rs_cattrs, pyd = (
            measure(timed_loop(lambda c=c, v=value: c(v)), n * 10, repeats) for c in checkers
        )
        rows.append((f"arguments checked+converted, {label}", ours, rs_cattrs, pyd))
    for label, ours, rs_cattrs, pyd in rows:
        middle = f"{rs_cattrs.us():13.1f}" if rs_cattrs else f"{'-':>13}"
        print(f"{label:<34} {ours.us():9.1f} {middle} {pyd.us():12.1f}")
    print()
    print(f"{'annotation':<20} {'ours':<26} {'pydantic TypeAdapter':<30}")
    for name, annotation, value, ok in KINDS:
        ours_says = ours_covers(annotation, value, ok)
        print(f"{name:<20} {ours_says:<26} {pydantic_covers(annotation, value, ok):<30}")


if __name__ == "__main__":
    main()
