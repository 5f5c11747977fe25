"""The 2026-07-28 Streamable HTTP endpoint of a ``ServerApp`` as an ASGI 3 application.

``McpAsgi(app)`` runs under any ASGI server (uvicorn on asyncio, hypercorn on
asyncio or trio) and mounts beside other routes in Starlette or FastAPI; the
model and the deployment: docs/asgi.md.  It needs ``anyio`` (the ``asgi``
extra: ``pip install 'mrtr[asgi]'``).
"""

from .endpoint import McpAsgi

__all__ = ["McpAsgi"]
