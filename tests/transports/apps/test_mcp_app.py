"""McpApp: the registries, dispatch, error codes, caching hints, sealed legs, listen streams.

Most tests call ``app.handle`` directly with real ``Request``/``RequestInfo`` objects
and a recording outlet; the flow tests run a client and a server ``Connection`` with
only bytes between them (``serve_call``, shared with ``test_example_app.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from mrtr_transports.apps.mcp_app import (
    MAX_SUBSCRIBED_URIS,
    SUBSCRIPTION_ID,
    Context,
    McpApp,
    compile_uri_template,
    header_params,
)

import mrtr_core as m

MODERN = "2026-07-28"
ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
NAME = m.server.elicit_form("Name?", {"name": {"type": "string"}}, required=["name"])
TONE = m.server.sample("A tone?", max_tokens=5)


class RecordingOutlet:
    """An Outlet that keeps what the handler streamed, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.changed = trio.Event()

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self.sent.append(("progress", progress, total, message))
        self._wake()

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        self.sent.append(("log", level, data, logger))
        self._wake()

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        self.sent.append(("notify", method, params))
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def wait_for(self, count: int) -> None:
        while len(self.sent) < count:
            await self.changed.wait()


def request_info(
    method: str,
    *,
    capabilities: Mapping[str, Any] | None = None,
    era: str = "modern",
    rid: m.RequestId = 1,
    retry: bool = False,
) -> m.server.RequestInfo:
    return m.server.RequestInfo(
        id=rid,
        method=method,
        era=era,  # type: ignore[arg-type]
        protocol_version=MODERN if era == "modern" else "2025-11-25",
        capabilities=ALL_CAPS if capabilities is None else capabilities,
        client_info=None,
        log_level=None,
        progress_token=None,
        retry=retry,
    )


async def call(
    app: McpApp,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    outlet: RecordingOutlet | None = None,
    rid: m.RequestId = 1,
    **info: Any,
) -> dict[str, Any]:
    request = m.Request(id=rid, method=method, params=dict(params or {}))
    with trio.fail_after(2):
        result = await app.handle(
            request, request_info(method, rid=rid, **info), outlet or RecordingOutlet()
        )
    return dict(result)


async def error_of(
    app: McpApp, method: str, params: Mapping[str, Any] | None = None, **kw: Any
) -> m.MrtrError:
    with pytest.raises(m.MrtrError) as caught:
        await call(app, method, params, **kw)
    return caught.value


def fresh_app(**options: Any) -> McpApp:
    """A small app with one of each kind of thing."""
    app = McpApp("test-app", "1.0", **options)

    @app.tool()
    def echo(ctx: Context) -> str:
        """Echoes its text argument.

        More detail that is not part of the description."""
        return str(ctx.arguments.get("text", ""))

    @app.tool(input_schema={"type": "object", "properties": {}, "required": []})
    def greet(ctx: Context) -> Any:
        """Asks a name, then greets."""
        name = ctx.answer("name", NAME)
        if name is None:
            return ctx.ask({"name": NAME}, state={"asked": "name"})
        assert ctx.state == {"asked": "name"}
        return f"Hello, {name.content['name']}"  # type: ignore[union-attr]

    @app.resource("mem://hello", mime_type="text/plain")
    def hello(ctx: Context) -> str:
        """A greeting."""
        return "hello"

    @app.prompt(arguments=[{"name": "topic", "required": True}])
    def about(ctx: Context) -> str:
        """Talk about a topic."""
        return f"Tell me about {ctx.arguments['topic']}"

    return app


def retry_params(
    params: Mapping[str, Any], result: Mapping[str, Any], answers: Any
) -> dict[str, Any]:
    out = {**params, "inputResponses": answers}
    if "requestState" in result:
        out["requestState"] = result["requestState"]
    return out


# --- discovery and lists ------------------------------------------------------------------


def test_capabilities_follow_what_is_registered() -> None:
    app = McpApp("x", "1")
    assert app.capabilities == {"logging": {}}
    assert McpApp("x", "1", logging=False).capabilities == {}
    app.tool("t")(lambda ctx: "")
    app.prompt("p")(lambda ctx: "")
    assert app.capabilities == {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "logging": {},
    }
    app.resource_template("mem://{id}", name="t")(lambda ctx: "")
    app.completion()(lambda ctx: [])
    assert app.capabilities["resources"] == {"subscribe": True, "listChanged": True}
    assert app.capabilities["completions"] == {}
    app.remove_tool("t")  # an empty list is still a list: the capability stays
    assert "tools" in app.capabilities
    assert app.info == {"name": "x", "version": "1"}


async def test_tools_list_describes_tools_in_registration_order() -> None:
    app = fresh_app()
    result = await call(app, "tools/list")
    assert result["tools"] == [
        {
            "name": "echo",
            "description": "Echoes its text argument.",  # the docstring's first paragraph
            "inputSchema": {"type": "object"},
        },
        {
            "name": "greet",
            "description": "Asks a name, then greets.",
            "inputSchema": {"type": "object", "properties": {}, "required": []},
        },
    ]
    assert "nextCursor" not in result
    assert "ttlMs" not in result  # left to the connection's defaults


async def test_tool_metadata_is_listed() -> None:
    app = McpApp("x", "1")
    out_schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    app.tool(
        "count",
        description="Counts",
        title="Counter",
        output_schema=out_schema,
        annotations={"readOnlyHint": True},
    )(lambda ctx: {"n": 1})
    (tool,) = (await call(app, "tools/list"))["tools"]
    assert tool == {
        "name": "count",
        "title": "Counter",
        "description": "Counts",
        "inputSchema": {"type": "object"},
        "outputSchema": out_schema,
        "annotations": {"readOnlyHint": True},
    }


async def test_list_caching_hints_are_set_on_modern_results_only() -> None:
    app = fresh_app(cache_ttl_ms=5000, cache_scope="public")
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        result = await call(app, method)
        assert (result["ttlMs"], result["cacheScope"]) == (5000, "public"), method
        legacy = await call(app, method, era="legacy")
        assert "ttlMs" not in legacy and "cacheScope" not in legacy, method
    with pytest.raises(ValueError, match="cache_ttl_ms"):
        McpApp("x", "1", cache_ttl_ms=-1)


async def test_lists_are_paged_with_cursors() -> None:
    app = McpApp("x", "1", page_size=2)
    for name in "abcde":
        app.tool(name)(lambda ctx: "")
    first = await call(app, "tools/list")
    assert [t["name"] for t in first["tools"]] == ["a", "b"]
    second = await call(app, "tools/list", {"cursor": first["nextCursor"]})
    third = await call(app, "tools/list", {"cursor": second["nextCursor"]})
    assert [t["name"] for t in second["tools"] + third["tools"]] == ["c", "d", "e"]
    assert "nextCursor" not in third
    for bad in ("0", "99", "x", 3, "-1"):
        error = await error_of(app, "tools/list", {"cursor": bad})
        assert (error.code, error.data) == (m.ErrorCode.INVALID_PARAMS, {"cursor": bad})
    with pytest.raises(ValueError):
        McpApp("x", "1", page_size=0)


async def test_unknown_and_unoffered_methods_are_method_not_found() -> None:
    empty = McpApp("x", "1", logging=False)
    for method in (
        "tools/list",
        "tools/call",
        "prompts/get",
        "resources/read",
        "completion/complete",
        "no/such",
        "ping",
    ):
        error = await error_of(empty, method, {"name": "x", "uri": "x"})
        assert error.code == m.ErrorCode.METHOD_NOT_FOUND, method
    app = fresh_app()
    # 2025-era only methods are not 2026 methods; a 2026 listen is not a 2025 one.
    for method, era in (
        ("logging/setLevel", "modern"),
        ("resources/subscribe", "legacy"),
        ("subscriptions/listen", "legacy"),
    ):
        error = await error_of(app, method, {"level": "info", "notifications": {}}, era=era)
        assert error.code == m.ErrorCode.METHOD_NOT_FOUND, method


async def test_legacy_set_level_checks_the_level() -> None:
    app = fresh_app()
    assert await call(app, "logging/setLevel", {"level": "debug"}, era="legacy") == {}
    error = await error_of(app, "logging/setLevel", {"level": "loud"}, era="legacy")
    assert error.code == m.ErrorCode.INVALID_PARAMS


# --- tools/call ---------------------------------------------------------------------------


async def test_tool_results_are_shaped_from_what_handlers_return() -> None:
    app = McpApp("x", "1")
    block = {"type": "text", "text": "b"}
    app.tool("text")(lambda ctx: "plain")
    app.tool("blocks")(lambda ctx: [block])
    app.tool("full")(lambda ctx: {"content": [block], "isError": False})
    app.tool("structured", output_schema={"type": "object"})(lambda ctx: {"n": 2})
    app.tool("number")(lambda ctx: 42)
    app.tool("wrong")(lambda ctx: object())
    app.tool("forgot")(lambda ctx: None)
    assert await call(app, "tools/call", {"name": "text"}) == {
        "content": [{"type": "text", "text": "plain"}]
    }
    assert await call(app, "tools/call", {"name": "blocks"}) == {"content": [block]}
    assert await call(app, "tools/call", {"name": "full"}) == {"content": [block], "isError": False}
    assert await call(app, "tools/call", {"name": "structured"}) == {
        "content": [{"type": "text", "text": '{"n": 2}'}],
        "structuredContent": {"n": 2},
    }
    assert await call(app, "tools/call", {"name": "number"}) == {
        "content": [{"type": "text", "text": "42"}]
    }
    wrong = await call(app, "tools/call", {"name": "wrong"})
    assert wrong["isError"] is True
    assert wrong["content"][0]["text"].startswith("tool 'wrong' returned object, which is not")
    forgot = await call(app, "tools/call", {"name": "forgot"})
    assert forgot["isError"] is True
    assert "returned None: return its result" in forgot["content"][0]["text"]


async def test_tool_exceptions_are_tool_errors_but_protocol_errors_stay_errors() -> None:
    app = McpApp("x", "1")

    @app.tool()
    def boom(ctx: Context) -> str:
        raise ValueError("the disk is full")

    @app.tool()
    def silent(ctx: Context) -> str:
        raise KeyError()

    @app.tool()
    def refuse(ctx: Context) -> str:
        raise m.MrtrError("no", code=m.ErrorCode.INVALID_PARAMS, data={"why": "because"})

    assert await call(app, "tools/call", {"name": "boom"}) == {
        "content": [{"type": "text", "text": "the disk is full"}],
        "isError": True,
    }
    assert (await call(app, "tools/call", {"name": "silent"}))["content"][0]["text"] == "KeyError"
    error = await error_of(app, "tools/call", {"name": "refuse"})
    assert (error.code, error.data) == (m.ErrorCode.INVALID_PARAMS, {"why": "because"})


async def test_tools_call_params_are_checked() -> None:
    app = McpApp("x", "1")
    app.tool(
        "needs",
        input_schema={"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]},
    )(lambda ctx: "ran")
    unknown = await error_of(app, "tools/call", {"name": "nope"})
    assert (unknown.code, unknown.message, unknown.data) == (
        m.ErrorCode.INVALID_PARAMS,
        "Unknown tool: nope",
        {"name": "nope"},
    )
    assert (await error_of(app, "tools/call", {"name": 7})).code == m.ErrorCode.INVALID_PARAMS
    bad_args = await error_of(app, "tools/call", {"name": "needs", "arguments": [1]})
    assert bad_args.code == m.ErrorCode.INVALID_PARAMS
    # Missing arguments are an input error the model can fix: a tool result.
    missing = await call(app, "tools/call", {"name": "needs", "arguments": {"a": 1}})
    assert missing == {
        "content": [{"type": "text", "text": "Invalid argument 'b': \"b\" is a required property"}],
        "isError": True,
    }
    ok = await call(app, "tools/call", {"name": "needs", "arguments": {"a": 1, "b": 2}})
    assert ok["content"][0]["text"] == "ran"


async def test_async_tools_stream_progress_and_logs_before_the_result() -> None:
    app = McpApp("x", "1")

    @app.tool()
    async def slow(ctx: Context) -> str:
        await ctx.progress(1, 2, "half")
        await trio.sleep(0)
        await ctx.log("info", {"step": 2}, logger="slow")
        await ctx.notify("notifications/custom", {"x": 1})
        await ctx.progress(2, 2)
        return "done"

    outlet = RecordingOutlet()
    assert await call(app, "tools/call", {"name": "slow"}, outlet=outlet) == {
        "content": [{"type": "text", "text": "done"}]
    }
    assert outlet.sent == [
        ("progress", 1, 2, "half"),
        ("log", "info", {"step": 2}, "slow"),
        ("notify", "notifications/custom", {"x": 1}),
        ("progress", 2, 2, None),
    ]


def test_tool_registration_is_checked() -> None:
    app = McpApp("x", "1")
    app.tool("ok.name-1_")(lambda ctx: "")
    with pytest.raises(ValueError, match="twice"):
        app.tool("ok.name-1_")(lambda ctx: "")
    for bad in ("", "has space", "x" * 129, "é"):
        with pytest.raises(ValueError, match="tool name"):
            app.tool(bad)(lambda ctx: "")
    with pytest.raises(ValueError, match="type 'object'"):
        app.tool("arr", input_schema={"type": "array"})(lambda ctx: "")
    with pytest.raises(ValueError, match="HTTP token"):
        app.tool(
            "h",
            input_schema={
                "type": "object",
                "properties": {"a": {"type": "string", "x-mcp-header": "A B"}},
            },
        )(lambda ctx: "")
    assert "h" not in app.tools


# --- x-mcp-header annotations -------------------------------------------------------------


def test_header_params_map_headers_to_argument_paths() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
            "nested": {
                "type": "object",
                "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
            },
            "plain": {"type": "string"},
        },
    }
    assert header_params("t", schema) == {
        "Region": ("region",),
        "Count": ("count",),
        "Flag": ("flag",),
        "Zone": ("nested", "zone"),
    }
    app = McpApp("x", "1")
    app.tool("t", input_schema=schema)(lambda ctx: "")
    assert app.tool_header_params("t") == header_params("t", schema)
    assert app.tool_header_params("missing") is None


@pytest.mark.parametrize(
    ("prop", "reason"),
    [
        ({"type": "string", "x-mcp-header": ""}, "HTTP token"),
        ({"type": "string", "x-mcp-header": "Region:1"}, "HTTP token"),
        ({"type": "string", "x-mcp-header": "Région"}, "HTTP token"),
        ({"type": "string", "x-mcp-header": "Tab\t"}, "HTTP token"),
        ({"type": "string", "x-mcp-header": 5}, "HTTP token"),
        ({"type": "number", "x-mcp-header": "Score"}, "string, integer or boolean"),
        ({"type": "object", "x-mcp-header": "Data"}, "string, integer or boolean"),
        ({"type": "array", "x-mcp-header": "Items"}, "string, integer or boolean"),
        ({"type": "null", "x-mcp-header": "Nil"}, "string, integer or boolean"),
    ],
)
def test_invalid_header_annotations_are_refused(prop: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        header_params("t", {"type": "object", "properties": {"p": prop}})


def test_header_annotations_must_be_unique_and_statically_reachable() -> None:
    twice = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "MyField"},
            "b": {"type": "string", "x-mcp-header": "myfield"},
        },
    }
    with pytest.raises(ValueError, match="used twice"):
        header_params("t", twice)
    for unreachable in (
        {
            "type": "object",
            "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}],
        },
        {
            "type": "object",
            "properties": {
                "a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}
            },
        },
        {"type": "object", "$defs": {"a": {"type": "string", "x-mcp-header": "A"}}},
        {"type": "object", "x-mcp-header": "Root"},  # was ignored here, refused by clients
    ):
        with pytest.raises(ValueError, match="only on properties"):
            header_params("t", unreachable)
    app = McpApp("x", "1")
    with pytest.raises(ValueError, match="tool 'r': x-mcp-header 'Root'"):
        app.tool("r", input_schema={"type": "object", "x-mcp-header": "Root"})(lambda ctx: "")
    assert "r" not in app.tools


# --- multi round-trip legs ------------------------------------------------------------------


async def test_an_ask_is_sealed_and_the_retry_completes() -> None:
    app = fresh_app()
    params = {"name": "greet", "arguments": {}}
    first = await call(app, "tools/call", params)
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"name": m.wire._convert.unstructure_input_request(NAME)}
    assert first["requestState"].startswith("mrtr1.")
    answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    done = await call(app, "tools/call", retry_params(params, first, answer), rid=2, retry=True)
    assert done == {"content": [{"type": "text", "text": "Hello, Ada"}]}


async def test_a_tampered_or_misbound_state_is_refused_before_the_handler_runs() -> None:
    app = fresh_app()
    params = {"name": "greet", "arguments": {}}
    first = await call(app, "tools/call", params)
    answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    tampered = {**retry_params(params, first, answer), "requestState": first["requestState"] + "x"}
    error = await error_of(app, "tools/call", tampered)
    assert (error.code, error.message) == (
        m.ErrorCode.INVALID_PARAMS,
        "Invalid or expired requestState",
    )
    assert error.data["reason"] in m.server._sealing.REQUEST_STATE_REASONS
    other_args = {**retry_params(params, first, answer), "arguments": {"who": "eve"}}
    error = await error_of(app, "tools/call", other_args)
    assert error.data == {"reason": "wrong_params"}
    # Another app's keys cannot open it either.
    stranger = await error_of(fresh_app(), "tools/call", retry_params(params, first, answer))
    assert stranger.data == {"reason": "bad_signature"}


async def test_sealed_states_expire_by_the_apps_clock() -> None:
    now = [1000.0]
    app = fresh_app(clock=lambda: now[0])
    params = {"name": "greet", "arguments": {}}
    first = await call(app, "tools/call", params)
    now[0] += 601  # past the sealer's default 600 s
    answer = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    error = await error_of(app, "tools/call", retry_params(params, first, answer))
    assert error.data == {"reason": "expired"}


async def test_once_holds_against_a_replayed_leg() -> None:
    app = McpApp("x", "1")
    effects: list[str] = []
    confirm = m.server.elicit_form("Sure?", {"ok": {"type": "boolean"}})

    @app.tool()
    def launch(ctx: Context) -> Any:
        if ctx.answer("ok", confirm) is None:
            return ctx.ask({"ok": confirm})
        if ctx.once("launch"):
            effects.append("launched")
        return "launched"

    params = {"name": "launch", "arguments": {}}
    first = await call(app, "tools/call", params)
    retry = retry_params(params, first, {"ok": {"action": "accept", "content": {"ok": True}}})
    assert (await call(app, "tools/call", retry))["content"][0]["text"] == "launched"
    replay = await error_of(app, "tools/call", retry)
    assert replay.data == {"reason": "replayed"}
    assert effects == ["launched"]


async def test_steps_run_on_the_apps_context() -> None:
    app = McpApp("x", "1")
    seen: list[type] = []
    steps = m.server.Steps()

    @steps.step("ask")
    def ask_name(ctx: Context, data: Any) -> Any:
        seen.append(type(ctx))
        return m.server.Next({"n": 1}, ask={"name": NAME})

    @steps.step("greet")
    def greet(ctx: Context, data: Any) -> Any:
        seen.append(type(ctx))
        name = ctx.answer("name", NAME)
        return {"content": [{"type": "text", "text": f"Hello, {name.content['name']}"}]}  # type: ignore[union-attr]

    app.add_tool(steps, "steps")
    params = {"name": "steps", "arguments": {}}
    first = await call(app, "tools/call", params)
    assert first["inputRequests"] == {"name": m.wire._convert.unstructure_input_request(NAME)}
    retry = retry_params(params, first, {"name": accept({"name": "Ada"})})
    assert await call(app, "tools/call", retry) == {
        "content": [{"type": "text", "text": "Hello, Ada"}]
    }
    assert seen == [Context, Context]
    assert (await error_of(app, "tools/call", retry)).data == {"reason": "replayed"}  # ran once


async def test_asking_beyond_the_declared_capabilities_is_32021() -> None:
    app = McpApp("x", "1")
    app.tool("tone")(lambda ctx: ctx.ask({"tone": TONE}))
    error = await error_of(app, "tools/call", {"name": "tone"}, capabilities={"elicitation": {}})
    assert error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
    assert error.data == {"requiredCapabilities": {"sampling": {}}}


async def test_input_responses_must_be_an_object_when_present() -> None:
    app = fresh_app()
    for bad in (None, 12, ["x"]):
        params = {"name": "greet", "arguments": {}, "inputResponses": bad}
        error = await error_of(app, "tools/call", params)
        assert error.code == m.ErrorCode.INVALID_PARAMS, bad
    # A malformed answer under the asked key: -32602 naming the key.
    params = {"name": "greet", "arguments": {}, "inputResponses": {"name": 12345}}
    error = await error_of(app, "tools/call", params)
    assert (error.code, error.data["key"]) == (m.ErrorCode.INVALID_PARAMS, "name")
    # Answers to other keys only: asked again, not an error.
    params = {"name": "greet", "arguments": {}, "inputResponses": {"other": {"action": "accept"}}}
    assert (await call(app, "tools/call", params))["resultType"] == "input_required"


# --- resources ------------------------------------------------------------------------------


async def test_resources_are_listed_and_read() -> None:
    app = McpApp("x", "1")

    @app.resource("mem://text", name="text", mime_type="text/plain", title="Text", size=5)
    def text(ctx: Context) -> str:
        """Some text."""
        return "hello"

    @app.resource(
        "mem://bytes", mime_type="application/octet-stream", ttl_ms=10, cache_scope="private"
    )
    def raw(ctx: Context) -> bytes:
        return b"\x00\xff"

    @app.resource("mem://full")
    def full(ctx: Context) -> dict[str, Any]:
        return {
            "contents": [{"uri": "mem://full", "text": "a"}, {"uri": "mem://full#2", "text": "b"}]
        }

    listed = await call(app, "resources/list")
    assert listed["resources"][0] == {
        "uri": "mem://text",
        "name": "text",
        "title": "Text",
        "description": "Some text.",
        "mimeType": "text/plain",
        "size": 5,
    }
    assert [r["name"] for r in listed["resources"]] == ["text", "raw", "full"]
    assert await call(app, "resources/read", {"uri": "mem://text"}) == {
        "contents": [{"uri": "mem://text", "mimeType": "text/plain", "text": "hello"}]
    }
    assert await call(app, "resources/read", {"uri": "mem://bytes"}) == {
        "contents": [
            {"uri": "mem://bytes", "mimeType": "application/octet-stream", "blob": "AP8="}
        ],
        "ttlMs": 10,
        "cacheScope": "private",
    }
    assert len((await call(app, "resources/read", {"uri": "mem://full"}))["contents"]) == 2


async def test_unknown_resources_are_32602_with_the_uri() -> None:
    app = fresh_app()
    error = await error_of(app, "resources/read", {"uri": "mem://nope"})
    assert (error.code, error.message, error.data) == (
        m.ErrorCode.INVALID_PARAMS,
        "Resource not found",
        {"uri": "mem://nope"},
    )
    assert (await error_of(app, "resources/read", {})).code == m.ErrorCode.INVALID_PARAMS


async def test_templates_match_one_segment_per_variable_and_exact_uris_win() -> None:
    app = McpApp("x", "1")

    @app.resource("mem://users/me/profile")
    def me(ctx: Context) -> str:
        return "me"

    @app.resource_template("mem://users/{user}/{part}", name="user-part", mime_type="text/plain")
    def part(ctx: Context) -> str:
        return f"{ctx.uri_params['user']}:{ctx.uri_params['part']} of {ctx.uri}"

    assert (await call(app, "resources/templates/list"))["resourceTemplates"] == [
        {"uriTemplate": "mem://users/{user}/{part}", "name": "user-part", "mimeType": "text/plain"}
    ]
    read = await call(app, "resources/read", {"uri": "mem://users/ada/profile"})
    assert read["contents"][0]["text"] == "ada:profile of mem://users/ada/profile"
    assert (await call(app, "resources/read", {"uri": "mem://users/me/profile"}))["contents"][0][
        "text"
    ] == "me"
    for miss in ("mem://users/ada", "mem://users/a/b/c", "mem://users//x"):
        assert (await error_of(app, "resources/read", {"uri": miss})).data == {"uri": miss}


def test_uri_templates_compile_level_one_only() -> None:
    pattern = compile_uri_template("file:///{dir}/x.{ext}")
    found = pattern.fullmatch("file:///docs/x.md")
    assert found is not None and found.groupdict() == {"dir": "docs", "ext": "md"}
    for bad in ("a/{+path}", "a/{x", "a/x}", "{a}/{a}"):
        with pytest.raises(ValueError):
            compile_uri_template(bad)


async def test_resource_reads_can_ask_for_input() -> None:
    app = McpApp("x", "1")

    @app.resource("mem://secret")
    def secret(ctx: Context) -> Any:
        name = ctx.answer("name", NAME)
        if name is None:
            return ctx.ask({"name": NAME})
        return f"for {name.content['name']}"  # type: ignore[union-attr]

    first = await call(app, "resources/read", {"uri": "mem://secret"})
    assert first["resultType"] == "input_required"
    answers = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    done = await call(app, "resources/read", retry_params({"uri": "mem://secret"}, first, answers))
    assert done["contents"] == [{"uri": "mem://secret", "text": "for Ada"}]


# --- prompts ----------------------------------------------------------------------------------


async def test_prompts_are_listed_and_got() -> None:
    app = fresh_app()
    assert (await call(app, "prompts/list"))["prompts"] == [
        {
            "name": "about",
            "description": "Talk about a topic.",
            "arguments": [{"name": "topic", "required": True}],
        }
    ]
    got = await call(app, "prompts/get", {"name": "about", "arguments": {"topic": "trio"}})
    assert got == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Tell me about trio"}}]
    }


async def test_prompt_errors_are_32602() -> None:
    app = fresh_app()
    unknown = await error_of(app, "prompts/get", {"name": "nope"})
    assert (unknown.code, unknown.message) == (m.ErrorCode.INVALID_PARAMS, "Unknown prompt: nope")
    missing = await error_of(app, "prompts/get", {"name": "about"})
    assert (missing.code, missing.data) == (m.ErrorCode.INVALID_PARAMS, {"missing": ["topic"]})
    not_strings = await error_of(app, "prompts/get", {"name": "about", "arguments": {"topic": 1}})
    assert not_strings.code == m.ErrorCode.INVALID_PARAMS


async def test_prompt_results_are_shaped() -> None:
    app = McpApp("x", "1")
    image = {"type": "image", "data": "AA==", "mimeType": "image/png"}
    app.prompt("many")(lambda ctx: [{"role": "assistant", "content": image}, "then text"])
    app.prompt("full")(lambda ctx: {"description": "d", "messages": []})
    app.prompt("wrong")(lambda ctx: 3)
    assert await call(app, "prompts/get", {"name": "many"}) == {
        "messages": [
            {"role": "assistant", "content": image},
            {"role": "user", "content": {"type": "text", "text": "then text"}},
        ]
    }
    assert await call(app, "prompts/get", {"name": "full"}) == {"description": "d", "messages": []}
    with pytest.raises(TypeError):
        await call(app, "prompts/get", {"name": "wrong"})
    with pytest.raises(ValueError, match="twice"):
        app.prompt("full")(lambda ctx: "")
    with pytest.raises(ValueError, match="needs a name"):
        app.prompt("bad", arguments=[{"required": True}])(lambda ctx: "")


# --- completion -------------------------------------------------------------------------------


async def test_completion_values_are_bounded_and_refs_checked() -> None:
    app = fresh_app()
    seen: list[Mapping[str, Any]] = []

    @app.completion()
    async def complete(ctx: Context) -> list[str]:
        seen.append(ctx.params)
        return [f"{ctx.params['argument']['value']}{i}" for i in range(150)]

    app.resource_template("mem://t/{x}", name="t")(lambda ctx: "")
    params = {
        "ref": {"type": "ref/prompt", "name": "about"},
        "argument": {"name": "topic", "value": "v"},
    }
    result = await call(app, "completion/complete", params)
    assert result["completion"]["values"][:2] == ["v0", "v1"]
    assert len(result["completion"]["values"]) == 100
    assert (result["completion"]["total"], result["completion"]["hasMore"]) == (150, True)
    template_ref = {
        "ref": {"type": "ref/resource", "uri": "mem://t/{x}"},
        "argument": {"name": "x", "value": ""},
    }
    assert (await call(app, "completion/complete", template_ref))["completion"]["total"] == 150
    for bad in (
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
        {
            "ref": {"type": "ref/resource", "uri": "mem://zzz"},
            "argument": {"name": "a", "value": ""},
        },
        {"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/prompt", "name": "about"}, "argument": {"name": "a"}},
        {"ref": "about", "argument": {"name": "a", "value": ""}},
    ):
        assert (
            await error_of(app, "completion/complete", bad)
        ).code == m.ErrorCode.INVALID_PARAMS, bad
    assert len(seen) == 2  # the bad ones never reached the handler


async def test_a_completion_handler_may_return_the_whole_result() -> None:
    app = fresh_app()
    app.completion()(lambda ctx: {"completion": {"values": ["x"]}})
    params = {
        "ref": {"type": "ref/prompt", "name": "about"},
        "argument": {"name": "t", "value": ""},
    }
    assert await call(app, "completion/complete", params) == {"completion": {"values": ["x"]}}


# --- subscriptions/listen ---------------------------------------------------------------------

LISTEN_ALL = {
    "toolsListChanged": True,
    "promptsListChanged": True,
    "resourcesListChanged": True,
    "resourceSubscriptions": ["mem://hello", "mem://other"],
}


@attrs.define
class Listening:
    outlet: RecordingOutlet
    result: dict[str, Any] | None = None


async def start_listening(
    nursery: trio.Nursery, app: McpApp, wanted: Mapping[str, Any], rid: m.RequestId = 9
) -> Listening:
    listening = Listening(RecordingOutlet())

    async def listen() -> None:
        listening.result = await call(
            app,
            "subscriptions/listen",
            {"notifications": dict(wanted)},
            outlet=listening.outlet,
            rid=rid,
        )

    nursery.start_soon(listen)
    await listening.outlet.wait_for(1)  # the acknowledgement
    return listening


def notes(listening: Listening) -> list[tuple[str, Any]]:
    return [(item[1], item[2]) for item in listening.outlet.sent]


async def test_listen_acknowledges_then_forwards_what_was_asked_tagged() -> None:
    app = fresh_app()
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            everything = await start_listening(nursery, app, LISTEN_ALL, rid=9)
            tools_only = await start_listening(nursery, app, {"toolsListChanged": True}, rid="t")
            assert app.subscription_count == 2
            tag = {SUBSCRIPTION_ID: 9}
            assert notes(everything) == [
                (
                    "notifications/subscriptions/acknowledged",
                    {"_meta": tag, "notifications": LISTEN_ALL},
                )
            ]
            app.add_tool(lambda ctx: "", name="late")  # announces tools/list_changed
            app.notify_prompts_changed()
            app.notify_resource_updated("mem://hello")
            app.notify_resource_updated("mem://unwatched")
            await everything.outlet.wait_for(4)
            await tools_only.outlet.wait_for(2)
            await trio.testing.wait_all_tasks_blocked()
            assert notes(everything)[1:] == [
                ("notifications/tools/list_changed", {"_meta": tag}),
                ("notifications/prompts/list_changed", {"_meta": tag}),
                ("notifications/resources/updated", {"_meta": tag, "uri": "mem://hello"}),
            ]
            assert notes(tools_only)[1:] == [
                ("notifications/tools/list_changed", {"_meta": {SUBSCRIPTION_ID: "t"}})
            ]
            app.close_subscriptions()
        assert everything.result == {"_meta": tag}
        assert tools_only.result == {"_meta": {SUBSCRIPTION_ID: "t"}}
    assert app.subscription_count == 0


async def test_listen_agrees_only_to_what_the_app_can_deliver() -> None:
    app = McpApp("x", "1")
    app.tool("t")(lambda ctx: "")
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            listening = await start_listening(
                nursery, app, {**LISTEN_ALL, "toolsListChanged": "yes", "promptsListChanged": True}
            )
            assert listening.outlet.sent[0][2]["notifications"] == {}  # no prompts, no resources
            app.close_subscriptions()
        await start_listening_and_close(app, {"toolsListChanged": True}, {"toolsListChanged": True})


async def start_listening_and_close(
    app: McpApp, wanted: Mapping[str, Any], agreed: Mapping[str, Any]
) -> None:
    async with trio.open_nursery() as nursery:
        listening = await start_listening(nursery, app, wanted)
        assert listening.outlet.sent[0][2]["notifications"] == agreed
        app.close_subscriptions()


async def test_repeated_changes_coalesce_while_a_listener_is_busy() -> None:
    app = fresh_app()
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            listening = await start_listening(nursery, app, LISTEN_ALL)
            for _ in range(50):  # no checkpoint in between: the listener has not run
                app.notify_tools_changed()
                app.notify_resource_updated("mem://other")
            await listening.outlet.wait_for(3)
            await trio.testing.wait_all_tasks_blocked()
            assert [n[0] for n in notes(listening)[1:]] == [
                "notifications/tools/list_changed",
                "notifications/resources/updated",
            ]
            app.close_subscriptions()


async def test_a_cancelled_listen_stream_forgets_its_listener() -> None:
    app = fresh_app()
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            listening = await start_listening(nursery, app, LISTEN_ALL)
            assert app.subscription_count == 1
            nursery.cancel_scope.cancel()  # what the transport does when the stream closes
    assert app.subscription_count == 0
    assert listening.result is None
    app.notify_tools_changed()  # nobody to tell: no error


async def test_listen_filters_are_checked_and_streams_bounded() -> None:
    app = fresh_app(max_subscriptions=1)
    for bad in (
        {},
        {"notifications": "all"},
        {"notifications": {"resourceSubscriptions": "mem://x"}},
        {"notifications": {"resourceSubscriptions": [1]}},
        {"notifications": {"resourceSubscriptions": ["u"] * (MAX_SUBSCRIBED_URIS + 1)}},
    ):
        assert (
            await error_of(app, "subscriptions/listen", bad)
        ).code == m.ErrorCode.INVALID_PARAMS, bad
    with trio.fail_after(2):
        async with trio.open_nursery() as nursery:
            await start_listening(nursery, app, {"toolsListChanged": True})
            full = await error_of(app, "subscriptions/listen", {"notifications": {}})
            # (Issue 22: "come back later" naming the bound, not -32603.)
            assert full.code == m.ErrorCode.SERVER_BUSY and "max_subscriptions" in full.message
            app.close_subscriptions()


# --- through a pair of Connections ------------------------------------------------------------


@attrs.define
class Served:
    """What a client saw of one call made through a client and a server Connection."""

    result: dict[str, Any] | None = None
    error: m.MrtrError | None = None
    legs: int = 0
    rounds: list[tuple[str, ...]] = attrs.field(factory=list)
    progress: list[tuple[float, float | None]] = attrs.field(factory=list)
    notifications: list[m.Notification] = attrs.field(factory=list)


Answerer = Callable[[str, m.wire.InputRequest], Any]


class ConnectionOutlet:
    """The server side's Outlet: through ``server.send`` straight into the client."""

    def __init__(self, server: m.Connection, client: m.Connection, rid: m.RequestId) -> None:
        self.server, self.client, self.rid = server, client, rid

    def _deliver(self, data: bytes) -> None:
        if data:
            self.client.receive_data(data)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self._deliver(
            self.server.send(
                m.Progress(request_id=self.rid, progress=progress, total=total, message=message)
            )
        )

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        self._deliver(
            self.server.send(
                m.LogMessage(request_id=self.rid, level=level, data=data, logger=logger)
            )
        )

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        self._deliver(
            self.server.send(m.Notification(method=method, params=dict(params) if params else None))
        )


async def serve_call(
    app: McpApp,
    method: str,
    params: Mapping[str, Any],
    answer: Answerer | None = None,
    *,
    capabilities: Mapping[str, Any] = ALL_CAPS,
    log_level: str | None = None,
    progress: bool = False,
) -> Served:
    """One multi round-trip call from a 2026-07-28 client Connection to ``app``."""
    client = m.Connection(
        m.CLIENT,
        era="modern",
        info={"name": "t", "version": "1"},
        capabilities=capabilities,
        log_level=log_level,
    )
    server = m.Connection(
        m.SERVER, info=app.info, capabilities=app.capabilities, instructions=app.instructions
    )
    handle = client.call(method, params, progress=progress)
    served = Served()
    with trio.fail_after(2):
        while True:
            while (event := client.next_event()) is not m.NEED_DATA:
                if isinstance(event, m.Notification):
                    served.notifications.append(event)
                    continue
                if isinstance(event, m.Progress):
                    served.progress.append((event.progress, event.total))
                    continue
                assert isinstance(event, m.CallEvent) and event.call == handle, event
                inner = event.event
                if isinstance(inner, (m.engine.SendRequest, m.engine.SendRetry)):
                    server.receive_data(client.send(event))
                    served.legs += 1
                elif isinstance(inner, m.engine.RoundStarted):
                    served.rounds.append(inner.keys)
                elif isinstance(inner, m.engine.DispatchInput):
                    assert answer is not None, f"unexpected ask {inner.key}"
                    client.provide(handle, inner.key, answer(inner.key, inner.request))
                elif isinstance(inner, m.engine.Done):
                    served.result = dict(inner.result)
                    return served
                elif isinstance(inner, m.engine.Failed):
                    served.error = inner.error
                    return served
                else:
                    raise AssertionError(f"unexpected {inner!r}")
            while (request := server.next_event()) is not m.NEED_DATA:
                assert isinstance(request, m.Request), request
                outlet = ConnectionOutlet(server, client, request.id)
                try:
                    reply: Any = m.ResultResponse(
                        id=request.id,
                        result=await app.handle(request, server.request_info(request.id), outlet),
                    )
                except m.MrtrError as exc:
                    reply = m.error_response(request.id, exc)
                client.receive_data(server.send(reply))


def accept(content: Mapping[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": dict(content)}


async def test_a_two_round_flow_over_connections() -> None:
    app = fresh_app()
    served = await serve_call(
        app, "tools/call", {"name": "greet", "arguments": {}}, lambda k, r: accept({"name": "Ada"})
    )
    assert served.result == {
        "content": [{"type": "text", "text": "Hello, Ada"}],
        "resultType": "complete",
        "_meta": {m.wire.META_SERVER_INFO: app.info},
    }
    assert (served.legs, served.rounds) == (2, [("name",)])


async def test_over_connections_errors_reach_the_client_with_their_codes() -> None:
    app = fresh_app()
    unknown = await serve_call(app, "tools/call", {"name": "nope", "arguments": {}})
    assert unknown.error is not None and unknown.error.code == m.ErrorCode.INVALID_PARAMS
    no_caps = await serve_call(
        app, "tools/call", {"name": "greet", "arguments": {}}, capabilities={}
    )
    assert no_caps.error is not None and no_caps.error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
    missing = await serve_call(app, "resources/read", {"uri": "mem://nope"})
    assert missing.error is not None and missing.error.data == {"uri": "mem://nope"}


async def test_over_connections_cacheable_reads_carry_hints_and_progress_follows_the_call() -> None:
    app = fresh_app()

    @app.tool()
    async def work(ctx: Context) -> str:
        for step in (1, 2):
            await ctx.progress(step, 2)
            await ctx.log("debug", f"step {step}")
        return "worked"

    read = await serve_call(app, "resources/read", {"uri": "mem://hello"})
    assert read.result is not None
    assert (read.result["ttlMs"], read.result["cacheScope"]) == (
        0,
        "private",
    )  # connection defaults
    quiet = await serve_call(app, "tools/call", {"name": "work", "arguments": {}})
    assert (quiet.progress, quiet.notifications) == ([], [])  # no token, no logLevel: nothing
    loud = await serve_call(
        app, "tools/call", {"name": "work", "arguments": {}}, progress=True, log_level="debug"
    )
    assert loud.progress == [(1, 2), (2, 2)]
    assert [n.params["data"] for n in loud.notifications if n.params] == ["step 1", "step 2"]
