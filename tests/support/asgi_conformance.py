"""The conformance fixtures app (``mrtr_transports.testing.conformance_app``) as
``McpAsgi``, for the official conformance suite's 2026-07-28 server leg under an ASGI server
(hypercorn's trio worker: the fixtures sleep with trio)."""

from __future__ import annotations

from mrtr_transports.asgi import McpAsgi
from mrtr_transports.cli.app_loading import load_app

app = McpAsgi(load_app("mrtr_transports.testing.conformance_app:app"))
