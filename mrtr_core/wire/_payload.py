"""Structuring and unstructuring one payload class: straight-line code, generated once.

A payload class (one with an ``extra`` field) is read from a peer on every round
(the input requests of an ``input_required`` result, a client's answers), so its
hooks are on the hot path.  cattrs' generated hooks need the peer's keys split
into known and unknown first (two dict comprehensions and a copy per object) and
call a hook per field; the functions generated here do the split in the same
pass that finds it is needed (almost never), and check the usual field types
(``str``, ``int``, ``bool``, a JSON object, a ``Literal`` of strings, each of
them optional) inline.  Every other field type goes through the converter's own
hook, so nothing is checked less than before: the same type checks, the same
messages, a missing required key is the same ``KeyError``.

Unstructuring skips the hooks that are the identity (strings, numbers, literals)
and keeps cattrs' behaviour otherwise: a field equal to its default is omitted
unless its metadata says ``always``, and unknown keys in ``extra`` come first,
never overriding a known field.
"""

from __future__ import annotations

import linecache
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args, get_origin

import attrs
import cattrs
from cattrs.fns import identity

from .._errors import describe

NONE_TYPE = type(None)


def _optional_of(tp: Any) -> Any:
    """``X`` for ``X | None`` (of exactly one ``X``), else ``None``."""
    args = get_args(tp)
    if len(args) == 2 and NONE_TYPE in args:
        return args[0] if args[1] is NONE_TYPE else args[1]
    return None


def is_json_object(tp: Any) -> bool:
    return get_origin(tp) in (Mapping, dict) and get_args(tp) == (str, Any)


def _inline_check(tp: Any, index: int, ns: dict[str, Any]) -> list[str] | None:
    """Lines that check ``v`` against ``tp`` exactly as the converter's hook would, or
    ``None`` when ``tp`` is not one the generator knows (its hook is called instead)."""
    if tp is str:
        return [
            "if not isinstance(v, str):",
            "    raise TypeError(f'expected str, got {type(v).__name__}')",
        ]
    if tp is bool:
        return [
            "if not isinstance(v, bool):",
            "    raise TypeError(f'expected bool, got {type(v).__name__}')",
        ]
    if tp is int:
        return [
            "if not isinstance(v, int) or isinstance(v, bool):",
            "    raise TypeError(f'expected int, got {type(v).__name__}')",
        ]
    if is_json_object(tp):
        return [
            "if type(v) is not dict and not isinstance(v, Mapping):",
            "    raise TypeError(f'expected an object, got {type(v).__name__}')",
        ]
    if get_origin(tp) is Literal and all(type(a) is str for a in get_args(tp)):
        allowed = get_args(tp)
        ns[f"allowed_{index}"] = frozenset(allowed)
        ns[f"expected_{index}"] = ", ".join(repr(a) for a in allowed)
        # (type first: an unhashable value must not reach the set lookup)
        return [
            f"if type(v) is not str or v not in allowed_{index}:",
            f"    raise ValueError(f'expected one of {{expected_{index}}}, got {{describe(v)}}')",
        ]
    return None


def _check_lines(tp: Any, index: int, ns: dict[str, Any], converter: cattrs.Converter) -> list[str]:
    inline = _inline_check(tp, index, ns)
    if inline is not None:
        return inline
    inner = _optional_of(tp)
    if inner is not None:
        inline = _inline_check(inner, index, ns)
        if inline is not None:
            return ["if v is not None:", *("    " + line for line in inline)]
    ns[f"hook_{index}"] = converter.get_structure_hook(tp)
    ns[f"type_{index}"] = tp
    return [f"v = hook_{index}(v, type_{index})"]


def _fields(cls: type) -> list[attrs.Attribute[Any]]:
    """The fields of ``cls`` but ``extra``, their string annotations resolved (as cattrs
    resolves them)."""
    attrs.resolve_types(cls)
    return [f for f in attrs.fields(cls) if f.name != "extra"]


def _default_expr(field: attrs.Attribute[Any], index: int, ns: dict[str, Any]) -> str:
    """The expression for a field's default in generated code (a factory is called)."""
    default: Any = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        ns[f"factory_{index}"] = default.factory
        return f"factory_{index}()"
    ns[f"default_{index}"] = default
    return f"default_{index}"


def _compile(name: str, cls: type, lines: list[str], ns: dict[str, Any]) -> Any:
    source = "\n".join(lines) + "\n"
    filename = f"<mrtr generated {name} {cls.__module__}.{cls.__qualname__}>"
    # Registered with linecache so a traceback through it shows the code.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)
    return ns[name]


def make_structure(cls: type, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """The structure hook of payload class ``cls``: ``hook(raw, cls) -> cls``."""
    fields = _fields(cls)
    wire = {f.name: f.metadata.get("wire", f.name) for f in fields}
    ns: dict[str, Any] = {
        "cls": cls,
        "Mapping": Mapping,
        "describe": describe,
        "known": frozenset(wire.values()),
    }
    lines = [
        "def structure(raw, _):",
        "    if type(raw) is not dict and not isinstance(raw, Mapping):",
        "        raise TypeError(f'expected an object, got {type(raw).__name__}')",
        "    extra = {}",
        "    for k in raw:",
        "        if k not in known:  # unknown keys are rare: split only when there are some",
        "            extra = {k: v for k, v in raw.items() if k not in known}",
        "            break",
    ]
    args = []
    for index, field in enumerate(fields):
        key = repr(wire[field.name])
        check = ["    " + line for line in _check_lines(field.type, index, ns, converter)]
        if field.default is attrs.NOTHING:
            lines += [f"    v = raw[{key}]", *check, f"    a_{index} = v"]
        else:
            default = _default_expr(field, index, ns)
            lines += [
                f"    if {key} in raw:",
                f"        v = raw[{key}]",
                *("    " + line for line in check),
                f"        a_{index} = v",
                "    else:",
                f"        a_{index} = {default}",
            ]
        args.append(f"{field.name}=a_{index}")
    lines.append(f"    return cls({', '.join([*args, 'extra=extra'])})")
    return _compile("structure", cls, lines, ns)  # type: ignore[no-any-return]


_JSON_SCALARS = frozenset({str, int, float, bool, NONE_TYPE})


def is_flat_object(obj: dict[Any, Any]) -> bool:
    """Whether every value of ``obj`` is a JSON scalar (exactly: no subclasses)."""
    for value in obj.values():  # noqa: SIM110 (a loop: all() over a generator is slower)
        if type(value) not in _JSON_SCALARS:
            return False
    return True


def _unstructure_value(tp: Any, index: int, ns: dict[str, Any], converter: cattrs.Converter) -> str:
    hook = converter.get_unstructure_hook(tp)
    inner = _optional_of(tp)
    if hook is identity or (
        inner is not None and converter.get_unstructure_hook(inner) is identity
    ):
        return "v"
    ns[f"unhook_{index}"] = hook
    if is_json_object(tp) or (inner is not None and is_json_object(inner)):
        # cattrs copies a JSON object deeply, dispatching on each value's class; a flat
        # one (every value a JSON scalar, the usual answer's content) copies the same.
        ns["flat"] = is_flat_object
        return f"dict(v) if type(v) is dict and flat(v) else unhook_{index}(v)"
    return f"unhook_{index}(v)"


def make_unstructure(cls: type, converter: cattrs.Converter) -> Callable[[Any], dict[str, Any]]:
    """The unstructure hook of payload class ``cls``: ``hook(obj) -> dict``."""
    fields = _fields(cls)
    extra_field = attrs.fields_dict(cls)["extra"]
    ns: dict[str, Any] = {"extra_hook": converter.get_unstructure_hook(extra_field.type)}
    lines = ["def unstructure(obj):", "    out = {}"]
    for index, field in enumerate(fields):
        key = repr(field.metadata.get("wire", field.name))
        value = _unstructure_value(field.type, index, ns, converter)
        lines.append(f"    v = obj.{field.name}")
        if field.default is attrs.NOTHING or field.metadata.get("always"):
            lines.append(f"    out[{key}] = {value}")
            continue
        default = _default_expr(field, index, ns)
        lines += [f"    if v != {default}:", f"        out[{key}] = {value}"]
    lines += [
        "    if obj.extra:  # unknown keys first: a known field always wins",
        "        return {**extra_hook(obj.extra), **out}",
        "    return out",
    ]
    return _compile("unstructure", cls, lines, ns)  # type: ignore[no-any-return]
