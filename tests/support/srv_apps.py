"""A small ServerApp for the server transport tests (stdio, HTTP, interop with ``mcp``).

Served as ``python -m mrtr_transports serve --stdio --app support.srv_apps:TestApp`` with
``tests/`` on ``PYTHONPATH``, or in-process.  Its tools cover what the
transports must carry: a two-round MRTR flow with sealed state (``trip``:
elicitation, then sampling), roots, a requestState-only round (``pause``),
progress and log lines (``progress``), stray output (``noisy``), a handler
that runs until cancelled (``sleep``) and counts cancellations (``stats``), a
crash, ``x-mcp-header`` arguments (``headers``), and a slow handler (``slow``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio
from mrtr_transports.server.app import Outlet

import mrtr_core as m
from mrtr_core.http import schema_header_params

CITY = m.server.elicit_form("Which city?", {"city": {"type": "string"}}, required=["city"])
TONE = m.server.sample("Describe the trip in three words", max_tokens=20)
ROOTS = m.server.list_roots()
OBJECT: dict[str, Any] = {"type": "object", "properties": {}}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {"name": "trip", "description": "asks for a city, then samples a tone", "inputSchema": OBJECT},
    {"name": "roots", "description": "lists the client's roots", "inputSchema": OBJECT},
    {"name": "pause", "description": "one requestState-only round", "inputSchema": OBJECT},
    {"name": "ask_sampling", "description": "needs sampling", "inputSchema": OBJECT},
    {"name": "progress", "description": "progress and log lines", "inputSchema": OBJECT},
    {"name": "noisy", "description": "prints to stdout", "inputSchema": OBJECT},
    {"name": "sleep", "description": "runs until cancelled", "inputSchema": OBJECT},
    {"name": "stats", "description": "counts", "inputSchema": OBJECT},
    {
        "name": "trickle",
        "description": "one progress note, then runs for `seconds` (default: until cancelled)",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    },
    {"name": "crash", "description": "raises", "inputSchema": OBJECT},
    {
        "name": "slow",
        "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
    },
    {
        "name": "headers",
        "description": "arguments mirrored into Mcp-Param-* headers",
        "inputSchema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "Count"},
                "flag": {"type": "boolean", "x-mcp-header": "Flag"},
                "opts": {
                    "type": "object",
                    "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
                },
                "query": {"type": "string"},
            },
        },
    },
]


def text(value: str, *, error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": value}]}
    if error:
        result["isError"] = True
    return result


Result = Mapping[str, Any] | m.server.Ask
Tool = Callable[[m.server.HandlerContext, Outlet], Awaitable[Result]]


class TestApp:
    """The app: tools over ``open_leg``/``close_leg`` with a sealed requestState."""

    __test__ = False  # not a pytest class

    info: Mapping[str, Any] = {"name": "srv-test", "version": "1.0"}
    capabilities: Mapping[str, Any] = {"tools": {}, "prompts": {}, "resources": {}}
    instructions: str | None = "A test server for the mrtr transports."

    def __init__(self) -> None:
        self.sealer = m.server.StateSealer({"k1": m.server.StateSealer.new_key()}, "k1")
        self.counts = {"started": 0, "cancelled": 0, "finished_slow": 0}
        self.tools: dict[str, Tool] = {
            "echo": self.echo,
            "trip": self.trip,
            "roots": self.roots,
            "pause": self.pause,
            "ask_sampling": self.ask_sampling,
            "progress": self.progress,
            "noisy": self.noisy,
            "sleep": self.sleep,
            "stats": self.stats,
            "trickle": self.trickle,
            "crash": self.crash,
            "slow": self.slow,
            "headers": self.headers,
        }

    async def handle(
        self, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
    ) -> Mapping[str, Any]:
        params = request.params or {}
        method = request.method
        if method == "tools/list":
            return {"tools": TOOLS}
        if method == "tools/call":
            tool = self.tools.get(params.get("name"))  # type: ignore[arg-type]
            if tool is None:
                raise m.MrtrError(
                    f"unknown tool {params.get('name')!r}", code=m.ErrorCode.INVALID_PARAMS
                )
            ctx = m.server.open_leg(request, info, sealer=self.sealer, principal=None, now=now())
            return m.server.close_leg(ctx, await tool(ctx, outlet))
        if method == "prompts/list":
            return {"prompts": [{"name": "hello"}]}
        if method == "prompts/get" and params.get("name") == "hello":
            message = {"role": "user", "content": {"type": "text", "text": "Hello!"}}
            return {"messages": [message]}
        if method == "resources/list":
            return {"resources": [{"uri": "test://doc", "name": "doc"}]}
        if method == "resources/read" and params.get("uri") == "test://doc":
            return {"contents": [{"uri": "test://doc", "mimeType": "text/plain", "text": "doc"}]}
        raise m.MrtrError(f"no method {method!r} here", code=m.ErrorCode.METHOD_NOT_FOUND)

    def tool_header_params(self, name: str) -> Mapping[str, tuple[str, ...]] | None:
        """For the HTTP server: the ``Mcp-Param-*`` headers of a tool (``ServerApp``)."""
        tool = next((t for t in TOOLS if t["name"] == name), None)
        return None if tool is None else schema_header_params(tool["inputSchema"], tool=name)

    async def echo(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        return text(str(ctx.arguments.get("text", "")))

    async def trip(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        """Two rounds: a city (elicitation), then a tone (sampling); the city rides in state."""
        state = ctx.state or {}
        if "city" not in state:
            city = ctx.answer("city", CITY)
            if city is None:
                return ctx.ask({"city": CITY})
            assert isinstance(city, m.wire.ElicitResult)
            if city.action != "accept" or not city.content:
                return text(f"No city ({city.action}), no trip.", error=True)
            return ctx.ask({"tone": TONE}, state={"city": city.content["city"]})
        tone = ctx.answer("tone", TONE)
        if tone is None:
            return ctx.ask({"tone": TONE}, state=state)
        assert isinstance(tone, m.wire.CreateMessageResult)
        words = tone.content.get("text", "") if isinstance(tone.content, dict) else ""
        return text(f"Trip to {state['city']}: {words}")

    async def roots(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        found = ctx.answer("where", ROOTS)
        if found is None:
            return ctx.ask({"where": ROOTS})
        assert isinstance(found, m.wire.ListRootsResult)
        return text(" ".join(root.uri for root in found.roots))

    async def pause(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        """A load-shedding round: only requestState, nothing asked; the retry completes."""
        if ctx.state is None:
            return ctx.ask({}, state={"paused": True})
        return text("resumed after a state-only round")

    async def ask_sampling(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        answer = ctx.answer("tone", TONE)
        if answer is None:
            return ctx.ask({"tone": TONE})  # CapabilityRequired (-32021) without sampling
        return text("sampled")

    async def progress(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        for step in (1, 2, 3):
            await outlet.progress(step, total=3, message=f"step {step}")
            await trio.sleep(0.01)
        await outlet.log("info", {"note": "halfway"}, logger="srv")
        await outlet.log("debug", "too chatty")
        return text("progressed")

    async def noisy(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        print("print() from a handler")
        sys.stdout.write("sys.stdout.write from a handler\n")
        sys.stdout.flush()
        os.write(1, b"os.write(1) from a handler\n")  # what a C extension would do
        return text("made some noise")

    async def sleep(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        self.counts["started"] += 1
        try:
            await trio.sleep_forever()
        finally:
            self.counts["cancelled"] += 1
        raise AssertionError("unreachable")  # pragma: no cover

    async def trickle(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        self.counts["started"] += 1
        await outlet.progress(1, message="started")
        seconds = ctx.arguments.get("seconds")
        try:
            await trio.sleep(float("inf") if seconds is None else float(seconds))
        except trio.Cancelled:
            self.counts["cancelled"] += 1
            raise
        return text("trickled")

    async def stats(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        return {**text(repr(self.counts)), "structuredContent": dict(self.counts)}

    async def crash(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        raise RuntimeError("secret detail that must stay in the server's log")

    async def slow(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        self.counts["started"] += 1
        await trio.sleep(float(ctx.arguments.get("seconds", 0.2)))
        self.counts["finished_slow"] += 1
        return text("slow done")

    async def headers(self, ctx: m.server.HandlerContext, outlet: Outlet) -> Result:
        return text(f"headers ok: {dict(ctx.arguments)}")


def now() -> float:
    return trio.current_time()
