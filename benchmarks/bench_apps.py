"""The two servers `bench_stdio.py` runs as children: the same two tools, on mrtr and on `mcp`.

``python benchmarks/bench_apps.py mrtr`` serves our ``McpApp`` with
``serve_stdio``; ``python benchmarks/bench_apps.py mcp`` serves the official
SDK's ``MCPServer`` (``mcp`` 2.3.0) over stdio.  Both have ``echo`` (one leg)
and ``greet`` (one form elicitation under the key ``name``, then the result:
two legs, the retry carrying the answer and the echoed ``requestState``).
"""

import sys
from typing import Any

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def serve_mrtr() -> None:
    import trio
    from mrtr_transports.mcp_app import Context, McpApp
    from mrtr_transports.stdio_server import serve_stdio

    import mrtr_core as m

    app = McpApp("bench-mrtr", "1.0")
    ask = m.elicit_form("What is your name?", NAME_SCHEMA["properties"], required=["name"])

    @app.tool("echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}})
    def echo(ctx: Context) -> Any:
        return str(ctx.arguments.get("text", ""))

    @app.tool("greet")
    def greet(ctx: Context) -> Any:
        answer = ctx.answer("name", ask)
        if answer is None:
            return ctx.ask({"name": ask}, state="asked")
        return f"Hello {answer.content['name']}"  # type: ignore[union-attr]

    trio.run(serve_stdio, app)


def serve_mcp() -> None:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import (
        CallToolResult,
        ElicitRequest,
        ElicitRequestFormParams,
        ElicitResult,
        InputRequiredResult,
        TextContent,
    )

    server = MCPServer("bench-mcp", version="1.0")

    @server.tool()
    async def echo(text: str = "") -> str:
        return text

    @server.tool()
    async def greet(ctx: Context) -> CallToolResult | InputRequiredResult:
        reply = (ctx.input_responses or {}).get("name")
        if not isinstance(reply, ElicitResult) or not reply.content:
            ask = ElicitRequest(
                params=ElicitRequestFormParams(
                    message="What is your name?", requested_schema=NAME_SCHEMA
                )
            )
            return InputRequiredResult(input_requests={"name": ask}, request_state="asked")
        text = f"Hello {reply.content['name']}"
        return CallToolResult(content=[TextContent(type="text", text=text)])

    server.run("stdio")


if __name__ == "__main__":
    {"mrtr": serve_mrtr, "mcp": serve_mcp}[sys.argv[1]]()
