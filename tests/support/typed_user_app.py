"""A user's app as ``mypy --strict`` must accept it, importing only from ``mrtr_transports``.

Each ask's answer has the type of that ask (``typing.assert_type``, checked by mypy and a
no-op when run), and the one ``McpApp`` goes to every host and the test client.  Run as a
program, it calls its tools through ``TestClient`` and prints the results as JSON.
"""

from __future__ import annotations

import json
import sys
from typing import Any, assert_type

import trio
from mrtr_transports import (
    Ask,
    Context,
    CreateMessageResult,
    ElicitResult,
    HttpServer,
    ListRootsResult,
    McpApp,
    McpAsgi,
    TestClient,
    WsServer,
    accept,
    elicit_form,
    elicit_url,
    list_roots,
    roots,
    sample,
    sampled,
    serve_http,
    serve_stdio,
    serve_ws,
    tool_error,
)

app = McpApp("typed", "1.0")
NAME = elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])
POEM = sample("A line about rain", max_tokens=40)
ROOTS = list_roots()
SIGN_IN = elicit_url("Sign in to continue", "https://example.com/sign-in")


@app.tool(description="Asks a form, the client's LLM and its roots at once.")
def introduce(ctx: Context) -> str | Ask | dict[str, Any]:
    name = ctx.answer("name", NAME)
    assert_type(name, ElicitResult | None)
    poem = ctx.answer("poem", POEM)
    assert_type(poem, CreateMessageResult | None)
    where = ctx.answer("roots", ROOTS)
    assert_type(where, ListRootsResult | None)
    if name is None or poem is None or where is None:
        return ctx.ask({"name": NAME, "poem": POEM, "roots": ROOTS})
    if name.action != "accept":  # no isinstance: the form's answer is an ElicitResult
        return tool_error("no name given")
    text = poem.content["text"] if isinstance(poem.content, dict) else ""
    folders = ", ".join(root.uri for root in where.roots)
    return f"{(name.content or {}).get('name')} ({poem.model}: {text}) in {folders}"


@app.tool(description="Sends the user to sign in, parked until they did.", continuation=True)
async def sign_in(ctx: Context) -> str:
    answer = await ctx.wait_for_answer("sign_in", SIGN_IN)
    assert_type(answer, ElicitResult)
    return f"sign-in: {answer.action}"


async def serve(transport: str) -> None:
    """The same app on every host (what ``mrtr serve`` does, by hand)."""
    if transport == "stdio":
        await serve_stdio(app)
    elif transport == "http":
        await serve_http(app, "127.0.0.1", 0)
    else:
        await serve_ws(app, "127.0.0.1", 0)


def hosts() -> tuple[HttpServer, WsServer, McpAsgi]:
    """The hosts a program builds itself: an HTTP and a WebSocket server, an ASGI app."""
    return HttpServer(app), WsServer(app), McpAsgi(app)


async def calls() -> list[dict[str, Any]]:
    """Both tools called through the test client, every question answered."""
    answers = {
        "name": accept(name="Ada"),
        "poem": sampled("rain on the roof"),
        "roots": roots("file:///home/ada"),
        "sign_in": accept(),
    }
    async with TestClient(app, answers=answers) as client:
        return [await client.call_tool("introduce"), await client.call_tool("sign_in")]


if __name__ == "__main__":
    json.dump(trio.run(calls), sys.stdout)
