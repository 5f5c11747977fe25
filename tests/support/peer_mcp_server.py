"""A server built on the official ``mcp`` 2.3.0 ``MCPServer``: the peer our client must work with.

Usage: ``python tests/peer_mcp_server.py stdio`` serves on stdin/stdout;
``python tests/peer_mcp_server.py http`` binds 127.0.0.1 on a free port, prints
``PORT <n>`` on stdout and serves Streamable HTTP at ``/mcp`` until killed.

The tools cover both ways ``MCPServer`` asks for input:

* hand-rolled multi round-trip tools that return an ``InputRequiredResult`` and
  read ``ctx.input_responses`` / ``ctx.request_state`` on the retry (2026-07-28
  only).  ``MCPServer`` seals every ``requestState`` it sends (AES-GCM under a
  key made at start-up) and opens every echo, so a state that comes back
  changed by a single byte is refused with a JSON-RPC error;
* ``Resolve(...)`` parameters (``Elicit``, ``Sample``, ``ListRoots``), which the
  SDK batches into one ``InputRequiredResult`` on 2026-07-28 and sends as
  server-to-client requests on a 2025 session.
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp_types import (
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

server = MCPServer("peer-mcp-server", version="2.3.0-peer")

NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


def ask_name() -> ElicitRequest:
    return ElicitRequest(
        params=ElicitRequestFormParams(message="What is your name?", requested_schema=NAME_SCHEMA)
    )


def ask_llm(prompt: str) -> CreateMessageRequest:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    return CreateMessageRequest(
        params=CreateMessageRequestParams(messages=[message], max_tokens=50)
    )


def text(value: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=value)])


@server.tool()
async def three_rounds(ctx: Context) -> CallToolResult | InputRequiredResult:
    """Round 1 asks a name, round 2 samples the LLM, round 3 lists roots; state carries progress."""
    answers = ctx.input_responses or {}
    state: dict[str, Any] = json.loads(ctx.request_state) if ctx.request_state else {}
    if "name" not in state:
        reply = answers.get("name")
        if not isinstance(reply, ElicitResult) or reply.action != "accept" or not reply.content:
            return InputRequiredResult(
                input_requests={"name": ask_name()}, request_state=json.dumps({"round": 1})
            )
        state["name"] = reply.content["name"]
    if "llm" not in state:
        reply = answers.get("llm")
        if not isinstance(reply, CreateMessageResult):
            return InputRequiredResult(
                input_requests={"llm": ask_llm(f"Greet {state['name']}")},
                request_state=json.dumps(state),
            )
        content = reply.content
        state["llm"] = content.text if isinstance(content, TextContent) else str(content)
    reply = answers.get("where")
    if not isinstance(reply, ListRootsResult):
        return InputRequiredResult(
            input_requests={"where": ListRootsRequest()}, request_state=json.dumps(state)
        )
    roots = ",".join(str(root.uri) for root in reply.roots)
    return text(f"name={state['name']} llm={state['llm']} roots={roots}")


@server.tool()
async def state_only(ctx: Context, legs: int = 2) -> CallToolResult | InputRequiredResult:
    """Sheds load: ``legs`` requestState-only rounds, then the count it saw come back."""
    seen = int(ctx.request_state) if ctx.request_state else 0
    if seen < legs:
        return InputRequiredResult(request_state=str(seen + 1))
    return text(f"state-only legs={seen}")


@server.tool()
async def all_at_once(ctx: Context) -> CallToolResult | InputRequiredResult:
    """One round asking for a name, an LLM completion and the roots together."""
    answers = ctx.input_responses or {}
    name, llm, where = answers.get("name"), answers.get("llm"), answers.get("where")
    if not (
        isinstance(name, ElicitResult)
        and isinstance(llm, CreateMessageResult)
        and isinstance(where, ListRootsResult)
    ):
        return InputRequiredResult(
            input_requests={"name": ask_name(), "llm": ask_llm("hi"), "where": ListRootsRequest()},
            request_state="asked-all",
        )
    if ctx.request_state != "asked-all":
        return text(f"unexpected state {ctx.request_state!r}")
    said = llm.content.text if isinstance(llm.content, TextContent) else "?"
    who = (name.content or {}).get("name") if name.action == "accept" else name.action
    return text(f"name={who} llm={said} roots={len(where.roots)}")


class Person(BaseModel):
    name: str


async def person(ctx: Context) -> Elicit[Person]:
    return Elicit("Who are you?", Person)


async def completion() -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text="Say hi"))
    return Sample([message], max_tokens=20)


async def roots() -> ListRoots:
    return ListRoots()


@server.tool()
async def resolved(
    who: Annotated[Person, Resolve(person)],
    said: Annotated[CreateMessageResult, Resolve(completion)],
    where: Annotated[ListRootsResult, Resolve(roots)],
) -> str:
    """Resolver-injected input: one InputRequiredResult on 2026, server requests on 2025."""
    llm = said.content.text if isinstance(said.content, TextContent) else "?"
    return f"who={who.name} llm={llm} roots={len(where.roots)}"


@server.tool()
def add(a: int, b: int) -> str:
    """A plain tool: no input needed."""
    return str(a + b)


@server.prompt()
async def haiku(ctx: Context) -> str | InputRequiredResult:
    """prompts/get asking a question first (whose name the haiku is about)."""
    reply = (ctx.input_responses or {}).get("topic")
    if not isinstance(reply, ElicitResult) or not reply.content:
        return InputRequiredResult(input_requests={"topic": ask_name()}, request_state="topic")
    return f"haiku about {reply.content['name']}"


def serve_http() -> None:
    import uvicorn

    # IPPROTO_TCP, not 0: asyncio turns TCP_NODELAY on only for sockets that name TCP, and
    # without it Nagle meets delayed ACKs and every POST waits ~40 ms.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    app = server.streamable_http_app(stateless_http=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")

    async def main() -> None:
        await uvicorn.Server(config).serve(sockets=[listener])

    anyio.run(main)


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        serve_http()
    else:
        server.run("stdio")
