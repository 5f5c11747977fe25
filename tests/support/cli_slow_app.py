"""A server app for ``mrtr serve --app support.cli_slow_app:app``: a tool that never answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio
from mrtr_transports.server.app import Outlet

import mrtr_core as m


class SlowApp:
    """Answers nothing but ``tools/call``, and that never (until cancelled)."""

    info: Mapping[str, Any] = {"name": "slow", "version": "1.0"}
    capabilities: Mapping[str, Any] = {"tools": {}}
    instructions: str | None = None

    async def handle(
        self, request: m.Request, info: m.server.RequestInfo, outlet: Outlet
    ) -> Mapping[str, Any]:
        if request.method == "tools/call":
            await trio.sleep_forever()
        raise m.MrtrError(f"Method not found: {request.method}", code=m.ErrorCode.METHOD_NOT_FOUND)


app = SlowApp()
