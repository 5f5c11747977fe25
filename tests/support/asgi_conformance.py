"""The conformance fixtures app (``tests/support/conformance_app.py``) as ``McpAsgi``, for
the official conformance suite's 2026-07-28 server leg under an ASGI server (the fixtures
sleep with anyio: any worker loop)."""

from __future__ import annotations

from mrtr_transports.asgi import McpAsgi

from support.conformance_app import build_conformance_app

app = McpAsgi(build_conformance_app())
