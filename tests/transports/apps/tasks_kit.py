"""What the task tests share: an app served over real HTTP on 127.0.0.1, clients that
declare (or not) the tasks extension, polling, and reading an error.

The project's client does not drive tasks yet (it is being built beside this), so the
tests send the task methods as plain requests (``client.request``): the results are
the wire's, as the server sent them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.client.client import Client
from mrtr_transports.client.errors import CallError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.server.http import HttpServer

import mrtr_core as m

TASKS = m.tasks.TASKS_EXTENSION
#: A client that declares the tasks extension (and forms, for the tasks that ask).
WITH_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS: {}}}
#: One that does not.
WITHOUT_TASKS: dict[str, Any] = {"elicitation": {}}
TERMINAL = ("completed", "failed", "cancelled")


@asynccontextmanager
async def served(app: McpApp, *, trusted_proxies: Iterable[str] = ()) -> AsyncIterator[str]:
    """``app`` behind a real ``HttpServer`` on 127.0.0.1; its endpoint URL."""
    server = HttpServer(app, trusted_proxies=trusted_proxies)
    async with anyio.create_task_group() as group:
        host, port = await group.start(server.serve, "127.0.0.1", 0)
        try:
            yield f"http://{host}:{port}/mcp"
        finally:
            await server.aclose(grace=0.5)


@asynccontextmanager
async def client_of(
    url: str, capabilities: Mapping[str, Any] = WITH_TASKS, **options: Any
) -> AsyncIterator[Client]:
    async with open_http_client(url, capabilities=dict(capabilities), **options) as client:
        yield client


async def call(client: Client, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
    """``tools/call`` sent as a plain request: the result as the server answered it."""
    return await client.request("tools/call", {"name": tool, "arguments": dict(arguments or {})})


async def get(client: Client, task_id: str) -> dict[str, Any]:
    return await client.request("tasks/get", {"taskId": task_id})


async def poll(
    client: Client, task_id: str, until: Iterable[str] = TERMINAL, timeout: float = 10
) -> dict[str, Any]:
    """``tasks/get`` until the task's status is one of ``until`` (or terminal)."""
    wanted = {*until, *TERMINAL}
    with anyio.fail_after(timeout):
        while True:
            task = await get(client, task_id)
            if task["status"] in wanted:
                return task
            await anyio.sleep(0.02)


async def error_of(send: Callable[[], Awaitable[Any]]) -> CallError:
    """The JSON-RPC error ``send()`` gets (failing if it gets a result)."""
    try:
        result = await send()
    except CallError as exc:
        return exc
    raise AssertionError(f"expected an error, got {result!r}")


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def without_meta(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result without the ``_meta`` the connection adds (server info)."""
    return {k: v for k, v in result.items() if k != "_meta"}
