"""The decorator form of an app's ``add_<kind>`` methods, with and without parentheses.

``@app.tool`` over ``fn`` is ``app.add_tool(fn)``; ``@app.tool("name", description=...)``
is ``app.add_tool(fn, "name", description=...)``: the same options, written once (on
``add_<kind>``), and typed so that a type checker checks them and the decorated
function keeps its own type.  A misuse fails where it is written, never by
registering nothing: ``@app.tool`` over something that is not a function, or
``@app.resource`` without the URI it needs, is a ``TypeError`` at import.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
App = TypeVar("App")


class Decorator(Protocol[P]):
    """``@app.<kind>`` (bare) or ``@app.<kind>(options)``."""

    @overload
    def __call__(self, fn: F, /) -> F: ...
    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Callable[[F], F]: ...


class DecoratorOf(Generic[App, P]):
    """A class attribute: ``tool = DecoratorOf(add_tool)`` gives ``app.tool``."""

    def __init__(self, add: Callable[Concatenate[App, Callable[..., Any], P], object]) -> None:
        # (called with the options as given: their types were checked at the call site)
        self.add: Callable[..., object] = add
        self.kind = add.__name__.removeprefix("add_")
        self.__doc__ = f"Decorator form of ``{add.__name__}(fn, ...)``: {add.__doc__}"

    @overload
    def __get__(self, app: None, owner: type[Any]) -> DecoratorOf[App, P]: ...
    @overload
    def __get__(self, app: App, owner: type[Any]) -> Decorator[P]: ...
    def __get__(self, app: App | None, owner: type[Any]) -> Any:
        if app is None:
            return self
        return functools.partial(self._decorate, app)

    def _decorate(self, app: App, /, *args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]) and not isinstance(args[0], str):
            if len(args) > 1 or kwargs:  # ``app.tool(fn, "name")``: say which form is meant
                raise TypeError(
                    f"@app.{self.kind} takes the function alone, or options and then the "
                    f"function: @app.{self.kind}(...) over it, or app.add_{self.kind}(fn, ...)"
                )
            self.add(app, args[0])  # bare: ``@app.tool``
            return args[0]

        def register(fn: F) -> F:
            if not callable(fn):
                raise TypeError(f"@app.{self.kind}(...) decorates a function, not {fn!r}")
            self.add(app, fn, *args, **kwargs)
            return fn

        return register


__all__ = ["Decorator", "DecoratorOf"]
