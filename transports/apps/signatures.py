"""A handler's signature, read once at registration: its JSON Schemas and its calling.

The model: a tool written as ``def weather(ctx, city: str, days: int = 1) -> Forecast``
says what it takes and what it gives.  :func:`read_signature` turns that into

* the tool's ``inputSchema`` (one property per parameter after the context, required
  unless it has a default; the default in the schema; ``Annotated[T, "text"]`` is its
  description), which the core checks every call's arguments against
  (``mrtr_core.server._validation.compile_schema``: the one home of that rule);
* a converter per parameter, which makes the checked JSON into the annotated types
  (``float`` from ``1``, an ``Enum`` member, a ``tuple``, an attrs instance...) before
  the handler runs: a value the schema let through but the type refuses (an attrs
  validator, say) is an :class:`InvalidArguments`, a tool result with ``isError``;
* an ``outputSchema`` when the return annotation is an object (an attrs class, a
  ``TypedDict`` or ``dict[str, X]``): the result is then ``structuredContent``.

The context parameter is the one annotated with a ``Context`` (any subclass of
``mrtr_core.server.HandlerContext``), or else the first parameter when it has no
annotation (``def f(ctx)``, as every handler was written before) or is a ``ctx``
annotated ``Any``.  A handler may take none.

Generated here, not by pydantic: ``benchmarks/bench_schemas.py`` measured both (and
the figures are in ``docs/server.md``); this module is small, fast to import, and
needs nothing the package does not already have.  An annotation it has no schema
for fails at registration (``TypeError``), never at call time; an explicit
``input_schema=`` always wins over the generated one.
"""

from __future__ import annotations

import datetime
import enum
import inspect
import json
import operator
import types
import typing
from collections.abc import Callable, Collection, Mapping, MutableSequence, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import attrs

import mrtr_core as m

Convert = Callable[[Any], Any]
#: A JSON Schema and the converter from the checked JSON value to the annotated type
#: (``None``: the JSON value already is one).
Built = tuple[dict[str, Any], Convert | None]
Namespace = Mapping[str, Any] | None

_EMPTY = inspect.Parameter.empty
_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_JSON_TYPES: dict[type, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}


class InvalidArguments(ValueError):
    """Arguments the schema accepted but the annotated type refused (a tool error)."""


@attrs.frozen
class Parameter:
    name: str
    schema: Mapping[str, Any]
    convert: Convert | None
    required: bool


@attrs.frozen
class Signature:
    """What :func:`read_signature` found in a handler."""

    #: The context parameter's name, and whether it is passed by position (it is first).
    context: str | None
    context_first: bool
    parameters: tuple[Parameter, ...]
    #: The ``**kwargs`` parameter, which takes the arguments no parameter names.
    extra: str | None
    #: The return annotation (``inspect.Parameter.empty`` when there is none).
    returns: Any
    #: The handler's module namespace (for names in string annotations of classes).
    namespace: Namespace = attrs.field(default=None, eq=False, repr=False)

    @property
    def plain(self) -> bool:
        """A handler of the context alone: called as it is, ``fn(ctx)``."""
        return self.context_first and not self.parameters and self.extra is None

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {p.name: dict(p.schema) for p in self.parameters},
        }
        required = [p.name for p in self.parameters if p.required]
        if required:
            schema["required"] = required
        if self.extra is None:
            schema["additionalProperties"] = False
        return schema

    def output_schema(self, what: str) -> dict[str, Any] | None:
        """The ``outputSchema`` of an object-typed return annotation, else ``None``
        (a structured result must be a JSON object for 2025-era clients).  A mapping
        of ``Any`` (``dict[str, Any]``) says no more than "a ``CallToolResult``"."""
        base = _strip_annotated(self.returns)
        origin = typing.get_origin(base) or base
        values = typing.get_args(base)[1:]
        if (
            attrs.has(base)
            or typing.is_typeddict(base)
            or (
                isinstance(origin, type)
                and issubclass(origin, Mapping)
                and values not in ((), (Any,), (object,))
            )
        ):
            return build(self.returns, f"{what}, its return annotation", self.namespace)[0]
        return None

    @property
    def returns_none(self) -> bool:
        """Declared ``-> None``: the tool is an action, its result empty content."""
        return self.returns is None or self.returns is type(None)

    def bind(self, fn: Callable[..., Any], source: str = "arguments") -> Callable[[Any], Any]:
        """``fn`` as a handler of one context: the arguments (``ctx.<source>``)
        converted, then passed."""
        if self.plain:
            return fn
        read = operator.attrgetter(source)
        converters = [(p.name, p.convert) for p in self.parameters]
        names = {p.name for p in self.parameters}
        context, first, extra = self.context, self.context_first, self.extra

        def handler(ctx: Any) -> Any:
            arguments = read(ctx)
            kwargs: dict[str, Any] = {}
            for name, convert in converters:
                if name in arguments:
                    value = arguments[name]
                    kwargs[name] = value if convert is None else _converted(name, convert, value)
            if extra is not None:
                kwargs.update((k, v) for k, v in arguments.items() if k not in names)
            if first:
                return fn(ctx, **kwargs)
            if context is not None:
                kwargs[context] = ctx
            return fn(**kwargs)

        return handler


def _converted(name: str, convert: Convert, value: Any) -> Any:
    try:
        return convert(value)
    except (ValueError, TypeError) as exc:
        raise InvalidArguments(f"Invalid argument {name!r}: {exc}") from exc


def read_signature(fn: Callable[..., Any], what: str) -> Signature:
    """The signature of handler ``fn`` (``what`` names it in errors: ``tool 'x'``).

    Raises ``TypeError`` for what cannot be a tool's parameters: ``*args``, a
    positional-only parameter, an annotation with no JSON Schema here.
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what}: cannot read the handler's signature: {exc}") from exc
    hints = _hints(fn, what)
    namespace = getattr(fn, "__globals__", None)
    params = list(sig.parameters.values())
    context = next((p for p in params if _is_context(hints.get(p.name, p.annotation))), None)
    first = params[0] if params else None
    if context is None and first is not None and first.kind is not inspect.Parameter.VAR_KEYWORD:
        # ``def f(ctx)``, as handlers always were; and ``ctx: Any``
        loose = first.annotation is _EMPTY or hints.get(first.name) in (Any, object)
        if first.annotation is _EMPTY or (loose and first.name in ("ctx", "context")):
            context = first
    parameters: list[Parameter] = []
    extra = None
    for param in params:
        if param is context:
            continue
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            extra = param.name
            continue
        if param.kind not in _KEYWORD_KINDS:
            raise TypeError(f"{what}: parameter {param.name!r} must be passable by keyword")
        hint = hints.get(param.name, _EMPTY)
        schema, convert = build(hint, f"{what}, parameter {param.name!r}", namespace)
        if param.default is not _EMPTY:
            try:  # the default in the schema, when it is JSON
                default = to_json(param.default)
                json.dumps(default, allow_nan=False)
                schema = {**schema, "default": default}
            except (TypeError, ValueError):
                pass
        parameters.append(Parameter(param.name, schema, convert, param.default is _EMPTY))
    return Signature(
        context=None if context is None else context.name,
        context_first=context is not None and context is params[0],
        parameters=tuple(parameters),
        extra=extra,
        returns=hints.get("return", sig.return_annotation),
        namespace=namespace,
    )


def _hints(fn: Callable[..., Any], what: str) -> dict[str, Any]:
    """The resolved annotations of ``fn``; a name only a type checker sees (imported
    under ``TYPE_CHECKING``) is fine for the context, an error for anything else."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # NameError, mostly; resolve one by one below
        pass
    found: dict[str, Any] = {}
    namespace = getattr(fn, "__globals__", {})
    for name, annotation in getattr(fn, "__annotations__", {}).items():
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # what get_type_hints does
            except Exception as exc:
                if not _is_context(annotation):
                    raise TypeError(
                        f"{what}: cannot resolve the annotation of {name!r}: {exc}"
                    ) from exc
        found[name] = annotation
    return found


def _is_context(annotation: Any) -> bool:
    if isinstance(annotation, str):  # unresolvable, so only named: ``"Context"``
        return annotation.rsplit(".", 1)[-1].endswith("Context")
    base = _strip_annotated(annotation)
    return isinstance(base, type) and issubclass(base, m.server.HandlerContext)


def _strip_annotated(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = annotation.__origin__
    return annotation


@attrs.frozen
class ToolShape:
    """What a tool's registration takes from its handler's signature."""

    handler: Callable[[Any], Any]
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    returns_none: bool


def tool_shape(
    fn: Callable[..., Any],
    what: str,
    input_schema: Mapping[str, Any] | None,
    output_schema: Mapping[str, Any] | None,
) -> ToolShape:
    """The handler, schemas and result rule of tool ``fn``; the schemas given win."""
    sig = read_signature(fn, what)
    if input_schema is not None:
        schema = dict(input_schema)
    elif sig.plain:
        schema = {"type": "object"}  # its arguments are read from ``ctx.arguments``
    else:
        schema = sig.input_schema()
    output = dict(output_schema) if output_schema is not None else sig.output_schema(what)
    return ToolShape(sig.bind(fn), schema, output, sig.returns_none)


def prompt_shape(
    fn: Callable[..., Any], what: str, arguments: tuple[Mapping[str, Any], ...]
) -> tuple[Callable[[Any], Any], tuple[Mapping[str, Any], ...]]:
    """The handler of prompt ``fn`` and its ``PromptArgument`` list (given ones win):
    a prompt's arguments are strings, so its parameters are ``str`` (or ``str | None``)."""
    sig = read_signature(fn, what)
    if arguments or sig.plain:
        return sig.bind(fn), arguments
    found: list[Mapping[str, Any]] = []
    for param in sig.parameters:
        kind = param.schema.get("type")
        options = [branch.get("type") for branch in param.schema.get("anyOf", ())]
        if kind not in ("string", None) or (not kind and set(options) - {"string", "null"}):
            raise TypeError(f"{what}: prompt argument {param.name!r} is a string (str)")
        argument: dict[str, Any] = {"name": param.name, "required": param.required}
        if "description" in param.schema:
            argument["description"] = param.schema["description"]
        found.append(argument)
    return sig.bind(fn), tuple(found)


def reader_shape(
    fn: Callable[..., Any], what: str, variables: Collection[str]
) -> Callable[[Any], Any]:
    """The handler of resource reader ``fn``: its ``str`` parameters after the context
    are the URI template's ``variables`` of those names."""
    sig = read_signature(fn, what)
    for param in sig.parameters:
        if param.name not in variables:
            raise TypeError(f"{what}: parameter {param.name!r} is no variable of the URI")
        if param.schema.get("type") != "string":
            raise TypeError(f"{what}: URI variable {param.name!r} is a string (str)")
    return sig.bind(fn, "uri_params")


# --- from an annotation to a JSON Schema and a converter --------------------------------


def build(annotation: Any, where: str, namespace: Namespace = None) -> Built:
    """The JSON Schema of ``annotation`` and the converter into it (``TypeError`` when
    there is none: ``where`` names the parameter).  ``namespace``: where else to look
    up the names in a class's string annotations (the handler's module)."""
    return _build(annotation, where, (), namespace)


def _build(tp: Any, where: str, seen: tuple[type, ...], ns: Namespace) -> Built:
    if tp is _EMPTY or tp is Any or tp is object:
        return {}, None
    if tp is None or tp is type(None):
        return {"type": "null"}, None
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        schema, convert = _build(tp.__origin__, where, seen, ns)
        notes = [note for note in tp.__metadata__ if isinstance(note, str)]
        return ({**schema, "description": " ".join(notes)} if notes else schema), convert
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}, _NUMBER_CONVERTERS.get(tp)
    if origin is typing.Literal:
        return _enum_schema(list(tp.__args__), where), None
    if origin is typing.Union or origin is types.UnionType:
        return _union(tp.__args__, where, seen, ns)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([member.value for member in tp], where), _member_of(tp)
    if tp is datetime.datetime or tp is datetime.date:
        fmt = "date-time" if tp is datetime.datetime else "date"
        return {"type": "string", "format": fmt}, tp.fromisoformat
    if attrs.has(tp) or typing.is_typeddict(tp):
        if tp in seen:
            raise TypeError(f"{where}: {tp.__name__} is recursive; give input_schema=")
        if attrs.has(tp):
            return _attrs_class(tp, where, (*seen, tp), ns)
        return _typed_dict(tp, where, (*seen, tp), ns)
    return _container(tp, origin, where, seen, ns)


def _container(tp: Any, origin: Any, where: str, seen: tuple[type, ...], ns: Namespace) -> Built:
    args = typing.get_args(tp)
    kind = origin if origin is not None else tp
    if kind is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            schema, convert = _build(args[0] if args else Any, where, seen, ns)
            return {"type": "array", "items": schema}, _each(convert, tuple)
        built = [_build(arg, where, seen, ns) for arg in args]
        items = [schema for schema, _ in built]
        converts = [convert for _, convert in built]
        fixed = {"type": "array", "prefixItems": items, "minItems": len(items)}
        return {**fixed, "maxItems": len(items)}, lambda v: tuple(
            value if c is None else c(value) for c, value in zip(converts, v, strict=True)
        )
    if isinstance(kind, type) and issubclass(kind, Mapping):
        key, value = args if args else (str, Any)
        if key is not str:
            raise TypeError(f"{where}: object keys are strings, not {key!r}")
        schema, convert = _build(value, where, seen, ns)
        out = (
            {"type": "object"}
            if value is Any
            else {"type": "object", "additionalProperties": schema}
        )
        if convert is None:
            return out, None
        return out, lambda v: {k: convert(item) for k, item in v.items()}
    if isinstance(kind, type) and issubclass(kind, (Sequence, AbstractSet)):
        if kind in (str, bytes, bytearray):  # sequences, but not arrays
            raise TypeError(f"{where}: no JSON Schema for {tp!r}; give input_schema=")
        schema, convert = _build(args[0] if args else Any, where, seen, ns)
        out = {"type": "array", "items": schema} if args else {"type": "array"}
        if issubclass(kind, AbstractSet):
            return {**out, "uniqueItems": True}, _each(
                convert, frozenset if kind is frozenset else set
            )
        if issubclass(kind, MutableSequence) or kind is Sequence:
            return out, _each(convert, None)
        return out, _each(convert, tuple)
    raise TypeError(
        f"{where}: no JSON Schema for {tp!r} (str, int, float, bool, None, list, tuple, "
        "dict[str, X], Literal, Enum, unions, datetime, attrs classes and TypedDicts have one); "
        "give input_schema= to write it yourself"
    )


def _each(convert: Convert | None, into: Callable[[Any], Any] | None) -> Convert | None:
    if convert is _to_int and into is None:  # ``list[int]``: integers as they came, mostly
        return lambda v: v if all(type(item) is int for item in v) else [_to_int(i) for i in v]
    if convert is None:
        return into
    if into is None:
        return lambda v: [convert(item) for item in v]
    return lambda v: into(convert(item) for item in v)


def _enum_schema(values: list[Any], where: str) -> dict[str, Any]:
    kinds = {_JSON_TYPES.get(type(v)) if v is not None else "null" for v in values}
    if None in kinds:
        raise TypeError(f"{where}: enumerated values must be str, int, float, bool or None")
    schema: dict[str, Any] = {"enum": values} if len(values) != 1 else {"const": values[0]}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _union(args: tuple[Any, ...], where: str, seen: tuple[type, ...], ns: Namespace) -> Built:
    built = [_build(arg, where, seen, ns) for arg in args]
    schema = {"anyOf": [s for s, _ in built]}
    if all(convert is None for _, convert in built):
        return schema, None
    if len(built) == 2 and built[1][0] == {"type": "null"}:  # ``X | None``
        into = built[0][1]
        assert into is not None
        return schema, lambda value: None if value is None else into(value)
    # The value passed the union's schema: the branch it matches says what it is.  Its
    # JSON type tells most unions apart (``X | None``); the validator tells the rest.
    branches = [
        (_types_of(s), m.server._validation.compile_schema(s), convert) for s, convert in built
    ]

    def convert(value: Any) -> Any:
        kind = _json_type(value)
        typed = [(check, into) for types, check, into in branches if types is None or kind in types]
        if len(typed) > 1:
            typed = [(check, into) for check, into in typed if check.problem(value) is None]
        if not typed:
            raise ValueError("matches none of the union's types")  # (the schema said it does)
        into = typed[0][1]
        return value if into is None else into(value)

    return schema, convert


def _types_of(schema: Mapping[str, Any]) -> frozenset[str] | None:
    """The JSON types a schema of ours allows (``None``: any)."""
    kind = schema.get("type")
    if kind is None:
        return None
    return frozenset({"integer", "number"} if kind == "number" else {kind})


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _attrs_class(cls: type, where: str, seen: tuple[type, ...], ns: Namespace) -> Built:
    try:
        try:
            attrs.resolve_types(cls, include_extras=True)
        except NameError:  # a class defined beside the handler, not in a module of its own
            attrs.resolve_types(cls, globalns=dict(ns or {}), include_extras=True)
    except Exception as exc:
        message = f"{where}: cannot resolve the annotations of {cls.__name__}: {exc}"
        raise TypeError(message) from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: list[tuple[str, Convert | None]] = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        name = field.alias or field.name
        schema, convert = _build(field.type, f"{where}, {cls.__name__}.{name}", seen, ns)
        if field.default is attrs.NOTHING:
            required.append(name)
        elif not isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            try:
                default = to_json(field.default)
                json.dumps(default, allow_nan=False)
                schema = {**schema, "default": default}
            except (TypeError, ValueError):
                pass
        properties[name] = schema
        converters.append((name, convert))
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False

    def structure(value: Any) -> Any:
        return cls(
            **{
                name: value[name] if into is None else into(value[name])
                for name, into in converters
                if name in value
            }
        )

    return out, structure


def _typed_dict(cls: Any, where: str, seen: tuple[type, ...], ns: Namespace) -> Built:
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError:
        hints = typing.get_type_hints(cls, globalns=dict(ns or {}), include_extras=True)
    built = {
        name: _build(tp, f"{where}, {cls.__name__}.{name}", seen, ns) for name, tp in hints.items()
    }
    out: dict[str, Any] = {"type": "object", "properties": {k: s for k, (s, _) in built.items()}}
    required = [name for name in hints if name in cls.__required_keys__]
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    converters = {name: convert for name, (_, convert) in built.items() if convert is not None}
    if not converters:
        return out, None
    return out, lambda v: {
        k: converters[k](item) if k in converters else item for k, item in v.items()
    }


def _member_of(cls: type[enum.Enum]) -> Convert:
    """The member of a value (a lookup: calling the class is ten times slower)."""
    members = {(type(member.value), member.value): member for member in cls}

    def member(value: Any) -> Any:
        found = members.get((type(value), value))
        if found is not None:
            return found
        try:
            return cls(value)  # (``1.0`` for ``1``, say)
        except ValueError:
            raise ValueError(f"{value!r} is not a {cls.__name__}") from None

    return member


def _to_int(value: Any) -> int:
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():  # 2020-12: 1.0 is an integer
        return int(value)
    raise ValueError(f"{value!r} is not an integer")


_NUMBER_CONVERTERS: dict[type, Convert] = {int: _to_int, float: float}


# --- from a result to JSON --------------------------------------------------------------


def to_json(value: Any) -> Any:
    """``value`` as JSON (attrs instances by their ``__init__`` names, enums by value,
    sets and tuples as arrays, dates in ISO 8601); ``TypeError`` for anything else."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, (str, int, float)):  # subclasses (bool is an int)
        return value
    if attrs.has(type(value)):
        return {
            (field.alias or field.name): to_json(getattr(value, field.name))
            for field in attrs.fields(type(value))
        }
    if isinstance(value, Mapping):
        return {_key(k): to_json(item) for k, item in value.items()}
    if isinstance(value, (list, tuple, AbstractSet)):
        return [to_json(item) for item in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    raise TypeError(f"an object key must be a string, not {type(key).__name__}")


__all__ = [
    "InvalidArguments",
    "Parameter",
    "Signature",
    "ToolShape",
    "build",
    "prompt_shape",
    "reader_shape",
    "read_signature",
    "tool_shape",
    "to_json",
]
