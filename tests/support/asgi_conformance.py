"""The conformance fixtures app (``tests/support/conformance_app.py``) as ``McpAsgi``:
``app`` for the official conformance suite's server legs under an ASGI server (uvicorn,
hypercorn; the fixtures sleep with anyio, so any worker loop), ``endpoint()`` (uvicorn's
``--factory``) with the options given as JSON in ``MRTR_ASGI_OPTIONS``, of the app
``MRTR_ASGI_APP`` names (``support.asgi_hosts``)."""

from __future__ import annotations

import json
import os

from mrtr_transports.asgi import McpAsgi
from mrtr_transports.cli.app_loading import load_app

from support.conformance_suite import FIXTURES_APP

FIXTURES = FIXTURES_APP

app = McpAsgi(load_app(FIXTURES))


def endpoint() -> McpAsgi:
    """``McpAsgi`` of the app named by ``MRTR_ASGI_APP`` (default: the fixtures app)."""
    options = json.loads(os.environ.get("MRTR_ASGI_OPTIONS", "{}"))
    if "versions" in options:
        options["versions"] = tuple(options["versions"])
    return McpAsgi(load_app(os.environ.get("MRTR_ASGI_APP", FIXTURES)), **options)
