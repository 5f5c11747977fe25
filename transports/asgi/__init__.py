"""The MCP endpoint of a ``ServerApp`` as an ASGI 3 application: Streamable HTTP
(2026-07-28 requests and 2025-11-25 sessions) and WebSocket.

``McpAsgi(app)`` runs under any ASGI server (uvicorn on asyncio, hypercorn on
asyncio or trio) and mounts beside other routes in Starlette or FastAPI; the
model and the deployment: docs/asgi.md.  It needs ``anyio`` (the ``asgi``
extra: ``pip install 'mrtr[asgi]'``).

The parts, one concept each: ``endpoint.py`` (``McpAsgi``: the order of the rules,
2026-07-28 POSTs, listen streams), ``answer.py`` (one answer: JSON or SSE),
``sessions.py`` and ``session.py`` (the 2025-era side), ``policy.py`` (who may
talk), ``pools.py`` (listen streams, sessions' streams), ``routes.py`` (the health
check, ``Page``), ``callback.py`` (the URL-elicitation callback), ``websocket.py``
(MCP over a ``websocket`` scope).
"""

from .endpoint import McpAsgi

__all__ = ["McpAsgi"]
