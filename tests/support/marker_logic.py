"""Whether a ``-m`` expression can select an item, knowing only some of its markers.

``tests/conftest.py`` asks it of the folders it marks as a whole, so that ``make check``
does not import the test files whose every test it would deselect.
"""

from __future__ import annotations

from functools import cache

from _pytest.mark.expression import Expression


@cache
def never_true(expression: str, carried: frozenset[str]) -> bool:
    """Whether ``expression`` is false for every item carrying the markers ``carried``,
    whatever other markers it has: every set of answers the expression can ask for is tried."""
    expr = Expression.compile(expression)
    scripts: list[tuple[bool, ...]] = [()]
    while scripts:
        markers = _ScriptedMarkers(carried, scripts.pop())
        if expr.evaluate(markers):
            return False
        scripts.extend(markers.untried)
    return True


class _ScriptedMarkers:
    """An item's markers as ``-m`` asks about them: ``carried`` are there; any other is
    answered from ``script`` in the order asked and, past its end, absent (its presence
    noted in ``untried``, a script still to run)."""

    def __init__(self, carried: frozenset[str], script: tuple[bool, ...]) -> None:
        self.carried = carried
        self.script = list(script)
        self.answers: dict[tuple[str, frozenset[tuple[str, object]]], bool] = {}
        self.untried: list[tuple[bool, ...]] = []

    def __call__(self, name: str, /, **kwargs: str | int | bool | None) -> bool:
        if name in self.carried and not kwargs:
            return True
        key = (name, frozenset(kwargs.items()))
        if key not in self.answers:
            asked = len(self.answers)
            if asked == len(self.script):
                self.untried.append((*self.script, True))
                self.script.append(False)
            self.answers[key] = self.script[asked]
        return self.answers[key]
