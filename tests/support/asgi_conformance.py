"""The app ``mrtr serve`` serves by default (the conformance fixtures among its tools) as
``McpAsgi``, for the official conformance suite's 2026-07-28 server leg under an ASGI server
(hypercorn's trio worker: the fixtures sleep with trio)."""

from __future__ import annotations

from mrtr_transports.asgi import McpAsgi
from mrtr_transports.server.driver import load_app
from mrtr_transports.server.entry import DEFAULT_APP

app = McpAsgi(load_app(DEFAULT_APP))
