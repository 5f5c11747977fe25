"""The conformance fixtures app (``mrtr_transports.testing.conformance_app``) as
``McpAsgi``: ``app`` for the official conformance suite's server legs under an ASGI server
(uvicorn, hypercorn), ``endpoint()`` (uvicorn's ``--factory``) with the options given as
JSON in ``MRTR_ASGI_OPTIONS``, of the app ``MRTR_ASGI_APP`` names (``support.asgi_hosts``)."""

from __future__ import annotations

import json
import os

from mrtr_transports.asgi import McpAsgi
from mrtr_transports.server.driver import load_app

FIXTURES = "mrtr_transports.testing.conformance_app:app"

app = McpAsgi(load_app(FIXTURES))


def endpoint() -> McpAsgi:
    """``McpAsgi`` of the app named by ``MRTR_ASGI_APP`` (default: the fixtures app)."""
    options = json.loads(os.environ.get("MRTR_ASGI_OPTIONS", "{}"))
    if "versions" in options:
        options["versions"] = tuple(options["versions"])
    return McpAsgi(load_app(os.environ.get("MRTR_ASGI_APP", FIXTURES)), **options)
