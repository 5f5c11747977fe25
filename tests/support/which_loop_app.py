"""An app that says which event loop runs it: ``--app support.which_loop_app:app``.

``which_loop`` answers ``asyncio`` when an asyncio loop is running, else ``trio``;
``asyncio_only`` awaits an asyncio-only call first (as a tool built on an
asyncio library would), so it only answers on asyncio.
"""

from __future__ import annotations

import asyncio

from mrtr_transports.apps.mcp_app import McpApp

app = McpApp("loops", "1.0")


def running_loop() -> str:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no asyncio loop in this thread: trio runs the command
        return "trio"
    return "asyncio"


@app.tool("which_loop", description="Names the event loop the server runs on")
async def which_loop(ctx: object) -> str:
    return running_loop()


@app.tool("asyncio_only", description="Awaits an asyncio-only call, then names the loop")
async def asyncio_only(ctx: object) -> str:
    await asyncio.wrap_future(asyncio.get_running_loop().run_in_executor(None, lambda: None))
    return running_loop()
