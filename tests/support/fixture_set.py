"""Fixtures written once, registered on any number of apps: a :class:`FixtureSet`.

``@fixtures.tool(...)``, ``@fixtures.prompt(...)`` ... record a handler and the
options of ``McpApp``'s decorator of the same name, and return the handler
unchanged; :meth:`FixtureSet.add_to` registers every one of them, in order, on an
app.  So a fixtures module defines its handlers at the top level, with the usual
decorators, without an app of its own to import (``build_conformance_app`` makes
the app and adds each module's set to it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mrtr_transports.apps.mcp_app import McpApp

__all__ = ["FixtureSet"]

Handler = Callable[..., Any]


class FixtureSet:
    """Handlers recorded with their decorator's options, for :meth:`add_to`."""

    def __init__(self) -> None:
        self._recorded: list[tuple[str, tuple[Any, ...], dict[str, Any], Handler]] = []

    def _recorder(self, kind: str, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
        def record(fn: Handler) -> Handler:
            self._recorded.append((kind, args, options, fn))
            return fn

        return record

    def tool(self, *args: Any, **options: Any) -> Any:
        return self._recorder("tool", args, options)

    def prompt(self, *args: Any, **options: Any) -> Any:
        return self._recorder("prompt", args, options)

    def resource(self, *args: Any, **options: Any) -> Any:
        return self._recorder("resource", args, options)

    def resource_template(self, *args: Any, **options: Any) -> Any:
        return self._recorder("resource_template", args, options)

    def completion(self, *args: Any, **options: Any) -> Any:
        return self._recorder("completion", args, options)

    def add_to(self, app: McpApp) -> None:
        """Register every recorded handler on ``app``, in the order they were written."""
        for kind, args, options, fn in self._recorded:
            getattr(app, kind)(*args, **options)(fn)
