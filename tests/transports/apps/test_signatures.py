"""Schemas from signatures: each annotation's JSON Schema and conversion, the context
parameter, the errors at registration, and what a call with good and bad arguments gets.

The schema of each annotation is compiled by the core
(``mrtr_core.server._validation.compile_schema``, the validator every call goes through)
and checked against a good and a bad value; the good value, converted, must be what the
annotation says.
"""

from __future__ import annotations

import datetime
import enum
from typing import Annotated, Any, Literal, TypedDict

import attrs
import pytest
from mrtr_transports.apps.mcp_app import Context, McpApp
from mrtr_transports.apps.signatures import InvalidArguments, build, read_signature, to_json
from test_mcp_app import call

import mrtr_core as m


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    x: float
    y: float = 0.0


@attrs.frozen
class Route:
    name: Annotated[str, "what the route is called"]
    stops: list[Point]
    color: Color = Color.RED
    tags: list[str] = attrs.field(factory=list)


@attrs.define
class Positive:
    value: int = attrs.field(validator=attrs.validators.gt(0))


class Movie(TypedDict, total=False):
    title: str
    year: int


@attrs.frozen
class Blob:
    data: bytes


@attrs.define
class Node:
    children: list[Node]


POINT = {
    "type": "object",
    "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
    "required": ["x"],
    "additionalProperties": False,
}

# (annotation, its schema, a good JSON value, that value converted, a bad JSON value)
CASES: list[tuple[Any, dict[str, Any], Any, Any, Any]] = [
    (str, {"type": "string"}, "a", "a", 1),
    (int, {"type": "integer"}, 3, 3, 3.5),
    (float, {"type": "number"}, 1, 1.0, "1"),
    (bool, {"type": "boolean"}, True, True, 1),
    (None, {"type": "null"}, None, None, 0),
    (list[int], {"type": "array", "items": {"type": "integer"}}, [1, 2], [1, 2], ["1"]),
    (
        dict[str, float],
        {"type": "object", "additionalProperties": {"type": "number"}},
        {"a": 1},
        {"a": 1.0},
        {"a": "x"},
    ),
    (
        tuple[int, str],
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "minItems": 2,
            "maxItems": 2,
        },
        [1, "a"],
        (1, "a"),
        [1, "a", 2],
    ),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}, [1, 2], (1, 2), [1.5]),
    (
        set[str],
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        ["a", "b"],
        {"a", "b"},
        ["a", "a"],
    ),
    (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}, "b", "b", "c"),
    (Literal[1, "x"], {"enum": [1, "x"]}, 1, 1, True),
    (Literal["only"], {"type": "string", "const": "only"}, "only", "only", "other"),
    (Color, {"type": "string", "enum": ["red", "blue"]}, "blue", Color.BLUE, "green"),
    (Level, {"type": "integer", "enum": [1, 2]}, 2, Level.HIGH, 3),
    (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}, None, None, "1"),
    (
        int | str,
        {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "7",
        "7",
        [7],
    ),
    (
        Color | int,
        {"anyOf": [{"type": "string", "enum": ["red", "blue"]}, {"type": "integer"}]},
        "red",
        Color.RED,
        "green",
    ),
    (list[int], {"type": "array", "items": {"type": "integer"}}, [1.0, 2], [1, 2], [1.5]),
    (
        dict[str, str] | Point,  # two objects: the validator tells which
        {"anyOf": [{"type": "object", "additionalProperties": {"type": "string"}}, POINT]},
        {"x": 2},
        Point(2.0),
        {"x": "2", "y": 1},
    ),
    (Annotated[str, "the city"], {"type": "string", "description": "the city"}, "x", "x", 2),
    (
        datetime.date,
        {"type": "string", "format": "date"},
        "2026-07-28",
        datetime.date(2026, 7, 28),
        "July",
    ),
    (
        datetime.datetime,
        {"type": "string", "format": "date-time"},
        "2026-07-28T10:00:00+00:00",
        datetime.datetime(2026, 7, 28, 10, tzinfo=datetime.UTC),
        "noon",
    ),
    (
        Point,
        {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
            "required": ["x"],
            "additionalProperties": False,
        },
        {"x": 1},
        Point(1.0),
        {"x": 1, "z": 2},
    ),
    (
        Movie,
        {
            "type": "object",
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "additionalProperties": False,
        },
        {"year": 1999},
        {"year": 1999},
        {"year": "1999"},
    ),
    (Any, {}, {"any": ["thing"]}, {"any": ["thing"]}, None),
]


@pytest.mark.parametrize(("annotation", "schema", "good", "converted", "bad"), CASES)
def test_each_annotation_has_a_schema_and_a_conversion(
    annotation: Any, schema: dict[str, Any], good: Any, converted: Any, bad: Any
) -> None:
    built, convert = build(annotation, "test")
    assert built == schema
    compiled = m.server._validation.compile_schema(built)
    assert compiled.problem(good) is None
    value = good if convert is None else convert(good)
    assert value == converted
    assert type(value) is type(converted)
    if bad is not None:
        assert compiled.problem(bad) is not None


def test_nested_attrs_classes_are_nested_objects_and_arrive_as_instances() -> None:
    schema, convert = build(Route, "test")
    assert schema["required"] == ["name", "stops"]
    assert schema["properties"]["name"] == {
        "type": "string",
        "description": "what the route is called",
    }
    assert schema["properties"]["stops"]["items"]["required"] == ["x"]
    assert schema["properties"]["color"]["default"] == "red"
    assert "default" not in schema["properties"]["tags"]  # a factory has no one default
    value = {"name": "coast", "stops": [{"x": 1}, {"x": 2, "y": 3}], "color": "blue"}
    assert m.server._validation.compile_schema(schema).problem(value) is None
    assert convert is not None
    assert convert(value) == Route("coast", [Point(1.0), Point(2.0, 3.0)], Color.BLUE)


def test_annotations_without_a_schema_fail_at_registration() -> None:
    for annotation, says in [
        (bytes, "no JSON Schema for <class 'bytes'>"),
        (dict[int, str], "object keys are strings"),
        (Node, "Node is recursive"),
        (Literal[b"x"], "enumerated values must be"),
    ]:
        with pytest.raises(TypeError, match=says):
            build(annotation, "tool 't', parameter 'p'")


def test_the_context_is_the_annotated_or_the_first_unannotated_parameter() -> None:
    def annotated(city: str, ctx: Context) -> None: ...
    def first(ctx, city: str) -> None: ...  # type: ignore[no-untyped-def]
    def none(city: str) -> None: ...
    def alone(c):  # type: ignore[no-untyped-def]
        ...

    assert (
        read_signature(annotated, "t").context,
        read_signature(annotated, "t").context_first,
    ) == ("ctx", False)
    assert read_signature(first, "t").context == "ctx"
    assert read_signature(none, "t").context is None
    assert read_signature(alone, "t").plain
    assert [p.name for p in read_signature(annotated, "t").parameters] == ["city"]


def test_a_context_imported_only_for_type_checkers_is_still_the_context() -> None:
    namespace: dict[str, Any] = {}
    source = "def tool(ctx: 'Context', n: 'int') -> 'str': return str(n)"
    exec(compile(source, "<user>", "exec", dont_inherit=True), namespace)
    found = read_signature(namespace["tool"], "t")
    assert found.context == "ctx"
    assert [p.schema for p in found.parameters] == [{"type": "integer"}]
    source = "def broken(ctx: 'Context', n: 'Missing') -> None: pass"
    exec(compile(source, "<user>", "exec", dont_inherit=True), namespace)
    with pytest.raises(TypeError, match="cannot resolve the annotation of 'n'"):
        read_signature(namespace["broken"], "t")


def test_what_cannot_be_arguments_fails_at_registration() -> None:
    app = McpApp("x", "1")

    def star(ctx: Context, *rest: int) -> str:
        return ""

    def positional(ctx: Context, n: int, /) -> str:
        return ""

    def raw(ctx: Context, data: bytes) -> str:
        return ""

    with pytest.raises(TypeError, match="'rest' must be passable by keyword"):
        app.tool(star)
    with pytest.raises(TypeError, match="'n' must be passable by keyword"):
        app.tool(positional)
    with pytest.raises(TypeError, match="tool 'raw', parameter 'data': no JSON Schema"):
        app.tool(raw)

    def blob() -> Blob:
        return Blob(b"")

    with pytest.raises(TypeError, match=r"tool 'blob', its return annotation, Blob\.data: no"):
        app.tool(blob)
    assert app.tools == {}


def test_defaults_are_optional_and_in_the_schema_when_they_are_json() -> None:
    marker = object()

    def tool(
        ctx: Context, city: str, days: int = 1, at: Any = marker, where: Point = Point(1)
    ) -> str:
        return ""

    schema = read_signature(tool, "t").input_schema()
    assert schema["required"] == ["city"]
    assert schema["properties"]["days"] == {"type": "integer", "default": 1}
    assert schema["properties"]["at"] == {}  # an object() default: no JSON for it
    assert schema["properties"]["where"]["default"] == {"x": 1.0, "y": 0.0}
    assert schema["additionalProperties"] is False


# --- registering ----------------------------------------------------------------------------


def test_decorators_with_and_without_parentheses_register() -> None:
    app = McpApp("x", "1")

    @app.tool
    def bare(ctx: Context, n: int) -> str:
        return str(n)

    @app.tool()
    def empty() -> str:
        return ""

    @app.tool("named", description="given")
    def other(n: int) -> int:
        return n

    @app.prompt
    def greeting(name: str) -> str:
        return name

    @app.completion
    def complete(ctx: Context) -> Any:
        return {}

    assert set(app.tools) == {"bare", "empty", "named"}
    assert app.tools["named"].description == "given"
    assert bare(Context.__new__(Context), 2) == "2"  # the function itself is kept
    assert set(app.prompts) == {"greeting"}
    assert "completions" in app.capabilities


def test_decorator_misuse_fails_loudly() -> None:
    app = McpApp("x", "1")

    def fn(ctx: Context) -> str:
        return ""

    with pytest.raises(TypeError, match="takes the function alone"):
        app.tool(fn, "name")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="decorates a function, not 'oops'"):
        app.tool("t")("oops")  # type: ignore[type-var]
    with pytest.raises(TypeError, match="a tool's name is a string"):
        app.add_tool(fn, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="uri"):
        app.resource(fn)  # a resource needs its URI
    with pytest.raises(TypeError, match="decorates a function"):
        app.completion()(3)  # type: ignore[type-var]
    assert app.tools == {} and app.resources == {}


def test_an_explicit_input_schema_wins_and_arguments_are_still_converted() -> None:
    app = McpApp("x", "1")
    given = {"type": "object", "properties": {"n": {"type": "number"}}}

    @app.tool(input_schema=given)
    def half(n: int = 0) -> str:
        return repr(n)

    assert app.tools["half"].input_schema == given


# --- calling --------------------------------------------------------------------------------


def typed_app() -> McpApp:
    app = McpApp("x", "1")

    @app.tool
    def plan(ctx: Context, route: Route, days: int = 1, level: Level | None = None) -> str:
        assert isinstance(ctx, Context) and isinstance(route, Route)
        kinds = [type(route.stops[0].x).__name__, type(route.color).__name__, repr(level)]
        return f"{route.name} {days} {' '.join(kinds)}"

    @app.tool
    def positive(p: Positive) -> int:
        return p.value

    @app.tool(input_schema={"type": "object", "properties": {"n": {"type": "number"}}})
    def loose(n: int) -> int:
        return n

    @app.tool(input_schema={"type": "object"})
    def paint(color: Color, level: Level = Level.LOW) -> str:
        return f"{color} {level!r}"

    @app.tool
    def forecast(city: str) -> Route:
        return Route(city, [Point(1, 2)])

    @app.tool
    def liar(city: str) -> Route:
        return "not a route"  # type: ignore[return-value]

    @app.tool
    def movie(year: int) -> Movie:
        return {"year": year}

    @app.tool
    def result() -> dict[str, Any]:
        return {"content": []}

    @app.tool
    def counts() -> dict[str, int]:
        return {"a": 1}

    @app.tool
    def action(name: str) -> None:
        pass

    @app.tool
    def everything(ctx: Context, first: str, **rest: Any) -> str:
        return f"{first} {sorted(rest.items())}"

    @app.tool(continuation=True)
    async def later(ctx: Context, n: int) -> int:
        return n * 2

    return app


async def tool_call(app: McpApp, name: str, arguments: Any) -> dict[str, Any]:
    return await call(app, "tools/call", {"name": name, "arguments": arguments})


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def test_good_arguments_arrive_converted_to_the_annotated_types() -> None:
    app = typed_app()
    route = {"name": "coast", "stops": [{"x": 1}]}
    assert text_of(await tool_call(app, "plan", {"route": route})) == "coast 1 float Color None"
    got = await tool_call(app, "plan", {"route": route, "days": 2, "level": 2})
    assert text_of(got) == "coast 2 float Color <Level.HIGH: 2>"
    assert text_of(await tool_call(app, "everything", {"first": "a", "b": 1})) == "a [('b', 1)]"
    assert text_of(await tool_call(app, "later", {"n": 4})) == "8"
    got = await tool_call(app, "paint", {"color": "red", "level": 2.0})
    assert text_of(got) == "Color.RED <Level.HIGH: 2>"


async def test_bad_arguments_are_tool_errors_that_name_the_argument() -> None:
    app = typed_app()
    for name, arguments, says in [
        ("plan", {}, "Invalid argument 'route'"),
        (
            "plan",
            {"route": {"name": "x", "stops": [{"x": "1"}]}},
            "Invalid argument 'route/stops/0/x'",
        ),
        ("plan", {"route": {"name": "x", "stops": []}, "days": "2"}, "Invalid argument 'days'"),
        ("plan", {"route": {"name": "x", "stops": []}, "dayz": 2}, "Invalid argument 'dayz'"),
        ("positive", {"p": {"value": -1}}, "Invalid argument 'p': 'value' must be > 0"),
        ("loose", {"n": 1.5}, "Invalid argument 'n'"),
        ("paint", {"color": "green"}, "Invalid argument 'color': 'green' is not a Color"),
    ]:
        result = await tool_call(app, name, arguments)
        assert result.get("isError") is True, (name, arguments, result)
        assert text_of(result).startswith(says), text_of(result)
    error = await call_error(app, {"name": "plan", "arguments": ["not", "an", "object"]})
    assert error.code == m.ErrorCode.INVALID_PARAMS


async def call_error(app: McpApp, params: dict[str, Any]) -> m.MrtrError:
    with pytest.raises(m.MrtrError) as caught:
        await call(app, "tools/call", params)
    return caught.value


async def test_object_return_annotations_give_structured_results() -> None:
    app = typed_app()
    route_schema = app.tools["forecast"].describe()["outputSchema"]
    assert route_schema["required"] == ["name", "stops"]
    assert app.tools["movie"].describe()["outputSchema"]["properties"]["year"] == {
        "type": "integer"
    }
    assert "outputSchema" not in app.tools["plan"].describe()  # -> str: text only
    assert "outputSchema" not in app.tools["result"].describe()  # a CallToolResult
    assert app.tools["counts"].describe()["outputSchema"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    assert (await tool_call(app, "counts", {}))["structuredContent"] == {"a": 1}
    result = await tool_call(app, "forecast", {"city": "Lisbon"})
    structured = {"name": "Lisbon", "stops": [{"x": 1, "y": 2}], "color": "red", "tags": []}
    assert result["structuredContent"] == structured
    assert (
        text_of(result)
        == '{"name": "Lisbon", "stops": [{"x": 1, "y": 2}], "color": "red", "tags": []}'
    )
    assert (await tool_call(app, "movie", {"year": 1999}))["structuredContent"] == {"year": 1999}
    liar = await tool_call(app, "liar", {"city": "x"})
    assert liar["isError"] is True
    assert "does not match its outputSchema" in text_of(liar)


async def test_none_is_an_empty_result_only_for_a_tool_declared_to_return_none() -> None:
    app = typed_app()
    assert await tool_call(app, "action", {"name": "x"}) == {"content": []}


async def test_prompt_arguments_come_from_str_parameters() -> None:
    app = McpApp("x", "1")

    @app.prompt
    def haiku(
        ctx: Context, topic: Annotated[str, "what it is about"], tone: str | None = None
    ) -> str:
        return f"{topic} {tone}"

    assert app.prompts["haiku"].describe()["arguments"] == [
        {"name": "topic", "required": True, "description": "what it is about"},
        {"name": "tone", "required": False},
    ]
    got = await call(app, "prompts/get", {"name": "haiku", "arguments": {"topic": "sea"}})
    assert got["messages"][0]["content"]["text"] == "sea None"

    def counted(n: int) -> str:
        return ""

    with pytest.raises(TypeError, match="prompt argument 'n' is a string"):
        app.prompt(counted)


def test_to_json_writes_results_and_refuses_what_is_not_json() -> None:
    when = datetime.date(2026, 7, 28)
    assert to_json({"a": (Color.RED, {1}), "when": when, "level": Level.LOW}) == {
        "a": ["red", [1]],
        "when": "2026-07-28",
        "level": 1,
    }
    for value in [object(), {1: "x"}]:
        with pytest.raises(TypeError):
            to_json(value)
    assert issubclass(InvalidArguments, ValueError)


def test_classes_beside_the_handler_resolve_in_the_handlers_namespace() -> None:
    source = """
from __future__ import annotations
import attrs
from typing import TypedDict

@attrs.frozen
class Inner:
    n: int

@attrs.frozen
class Outer:
    inner: Inner

class Row(TypedDict):
    inner: Inner

def tool(ctx, outer: Outer) -> Row:
    return {"inner": outer.inner}
"""
    namespace: dict[str, Any] = {"__name__": "not_a_module"}
    exec(compile(source, "<user>", "exec", dont_inherit=True), namespace)
    app = McpApp("x", "1")
    tool = app.add_tool(namespace["tool"])
    inner = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    inner["additionalProperties"] = False
    assert tool.input_schema["properties"]["outer"]["properties"]["inner"] == inner
    assert tool.output_schema is not None and tool.output_schema["properties"]["inner"] == inner


async def test_resource_readers_take_the_uri_variables_they_name() -> None:
    app = McpApp("x", "1")

    @app.resource("mem://motd")
    def motd() -> str:  # no context: it needs none
        return "hello"

    @app.resource_template("mem://users/{user}/notes/{note}")
    def note(ctx: Context, user: str, note: Annotated[str, "its id"]) -> str:
        return f"{user}:{note}:{ctx.uri}"

    got = await call(app, "resources/read", {"uri": "mem://motd"})
    assert got["contents"][0]["text"] == "hello"
    got = await call(app, "resources/read", {"uri": "mem://users/ada/notes/7"})
    assert got["contents"][0]["text"] == "ada:7:mem://users/ada/notes/7"

    def stray(user: str) -> str:
        return user

    def counted(n: int) -> str:
        return ""

    with pytest.raises(TypeError, match="parameter 'user' is no variable of the URI"):
        app.add_resource(stray, "mem://other")
    with pytest.raises(TypeError, match="URI variable 'n' is a string"):
        app.add_resource_template(counted, "mem://n/{n}")
