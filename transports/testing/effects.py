"""The run-twice detector: side effects a multi round-trip flow performs more than once.

The model: under 2026-07-28 a re-entrant handler runs again from the top on
every leg of its flow.  A side effect it performs before it asks for input
(charging a card, sending an email, creating a ticket) therefore runs once per
leg: twice for a flow of two rounds, three times for three.  The guard is
``ctx.once("name")`` (recorded in the sealed state, so later legs skip it), or
moving the effect after the last question.

:class:`SideEffects` records each call of the functions a test names as
effects (``watch``, which wraps them for the test's duration, or ``record``,
for a test double that reports itself), together with the call of the test
client whose leg was running and that leg's number.  ``repeated()`` lists the
effects that ran more than once with the same arguments within one call;
``assert_each_once()`` fails the test with them::

    effects.watch(billing, "charge")
    await client.call_tool("buy", {"item": "book"}, answers={"confirm": accept()})
    effects.assert_each_once()   # "billing.charge('book') ran 2 times in ... (legs 1, 2)"
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .client import CallRecord, active_client

__all__ = ["Effect", "Repeat", "SideEffects"]


@dataclass(frozen=True)
class Effect:
    """One run of a watched effect: its name and arguments, the call and leg it ran in."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    call: CallRecord | None
    leg: int

    def signature(self) -> str:
        parts = [repr(arg) for arg in self.args]
        parts += [f"{key}={value!r}" for key, value in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


@dataclass
class Repeat:
    """An effect that ran more than once with the same arguments in one call."""

    signature: str
    call: CallRecord | None
    legs: list[int] = field(default_factory=list)

    def describe(self) -> str:
        where = self.call.describe() if self.call is not None else "no test client call"
        legs = ", ".join(str(leg) for leg in self.legs)
        return f"{self.signature} ran {len(self.legs)} times in one {where} (legs {legs})"


class SideEffects:
    """Records watched effects (see the module docstring).

    ``undo`` holds what ``watch`` must put back; the pytest fixture runs it at
    the end of the test (``restore()``).
    """

    def __init__(self) -> None:
        #: Every recorded run, in order.
        self.runs: list[Effect] = []
        self._undo: list[Callable[[], None]] = []

    def watch(self, target: Any, attribute: str | None = None, *, name: str | None = None) -> None:
        """Record every call of ``target.attribute`` (or of the dotted path
        ``"package.module.function"``) until :meth:`restore`.

        The function is replaced on its owner, so the app must look it up there
        when it runs (``billing.charge(...)``, not a name imported before).
        """
        owner, attribute = _owner_and_attribute(target, attribute)
        original = getattr(owner, attribute)
        label = name or f"{getattr(owner, '__name__', type(owner).__name__)}.{attribute}"
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def watched_async(*args: Any, **kwargs: Any) -> Any:
                self.record(label, *args, **kwargs)
                return await original(*args, **kwargs)

            setattr(owner, attribute, watched_async)
        else:

            @functools.wraps(original)
            def watched(*args: Any, **kwargs: Any) -> Any:
                self.record(label, *args, **kwargs)
                return original(*args, **kwargs)

            setattr(owner, attribute, watched)
        self._undo.append(functools.partial(setattr, owner, attribute, original))

    def record(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Record one run of the effect ``name`` now (in the leg that runs now)."""
        client = active_client()
        call, leg = client.current_leg() if client is not None else (None, 0)
        self.runs.append(Effect(name, args, dict(kwargs), call, leg))

    def restore(self) -> None:
        """Put every watched function back."""
        while self._undo:
            self._undo.pop()()

    def count(self, name: str) -> int:
        """How many times the effect ``name`` ran."""
        return sum(1 for run in self.runs if run.name == name)

    def repeated(self) -> list[Repeat]:
        """The effects that ran more than once, with the same arguments, in one call."""
        groups: dict[tuple[int, str], Repeat] = {}
        for run in self.runs:
            signature = run.signature()
            key = (id(run.call), signature)
            group = groups.setdefault(key, Repeat(signature, run.call))
            group.legs.append(run.leg)
        return [group for group in groups.values() if len(group.legs) > 1]

    def assert_each_once(self) -> None:
        """Fail when an effect ran more than once in one call (see :meth:`repeated`)."""
        repeats = self.repeated()
        if repeats:
            lines = "\n".join(f"  {repeat.describe()}" for repeat in repeats)
            raise AssertionError(
                "side effects ran more than once in one flow:\n"
                f"{lines}\n"
                "A re-entrant handler runs again from the top on every leg: guard the effect "
                "with `if ctx.once('...'):` or perform it after the last question."
            )


def _owner_and_attribute(target: Any, attribute: str | None) -> tuple[Any, str]:
    if attribute is not None:
        return target, attribute
    if not isinstance(target, str) or "." not in target:
        raise TypeError("watch(owner, 'attribute') or watch('package.module.function')")
    path, _, attribute = target.rpartition(".")
    parts = path.split(".")
    for split in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            owner: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            owner = getattr(owner, part)
        return owner, attribute
    raise ImportError(f"cannot import a module of {target!r}")
