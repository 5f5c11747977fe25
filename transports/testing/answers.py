"""Scripted answers: what a test client answers each input request with.

The model: a test says up front what the "user" (or the client's LLM, or its
roots) would answer, by the key the server asks under.  An
:class:`AnswerScript` is the client's
:class:`~mrtr_transports.client.inputs.InputHandler`; for each input request it
looks up, in order:

1. the server's key (``"city"``); in a 2025-era session, where the server asks
   with real requests, the key *is* the method;
2. the request's kind (``"elicitation/create#url"`` for a URL elicitation);
3. its method (``"elicitation/create"``, ``"sampling/createMessage"``,
   ``"roots/list"``);
4. ``"*"``, a catch-all.

What it finds is the answer: a mapping as on the wire (``accept(city="Oslo")``
builds one), a typed ``mrtr_core.wire`` response, a callable given the typed
request (plain or ``async``) that returns either, or a list of these, used one
per ask in order (for a server that asks the same key again).  Nothing found,
or a list used up, fails the call with
:class:`~mrtr_transports.client.errors.InputUnavailable` naming the key: a test
never hangs on a question it did not expect.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import mrtr_core as m
from mrtr_core.wire import INPUT_KINDS

from ..client.errors import InputUnavailable

__all__ = [
    "Answer",
    "AnswerScript",
    "accept",
    "cancel",
    "decline",
    "roots",
    "sampled",
]

#: One scripted answer (see the module docstring).
Answer = Any


def accept(content: Mapping[str, Any] | None = None, /, **fields: Any) -> dict[str, Any]:
    """An accepted elicitation: ``accept(city="Oslo")`` or ``accept({"city": "Oslo"})``;
    ``accept()`` for a URL elicitation (consent given)."""
    merged = {**(content or {}), **fields}
    return {"action": "accept", "content": merged} if merged else {"action": "accept"}


def decline() -> dict[str, Any]:
    """A declined elicitation (the user said no)."""
    return {"action": "decline"}


def cancel() -> dict[str, Any]:
    """A cancelled elicitation (the user dismissed it)."""
    return {"action": "cancel"}


def sampled(
    text: str, *, model: str = "test-model", stop_reason: str = "endTurn"
) -> dict[str, Any]:
    """A sampling answer: the client's LLM said ``text``."""
    return {
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": model,
        "stopReason": stop_reason,
    }


def roots(*uris: str) -> dict[str, Any]:
    """A ``roots/list`` answer: ``roots("file:///home/me/project")``."""
    return {"roots": [{"uri": uri} for uri in uris]}


class AnswerScript(MutableMapping[str, Answer]):
    """Answers by key, kind or method (see the module docstring); a mutable mapping,
    so a test may add answers as it goes (``script["city"] = accept(city="Oslo")``).

    ``asked`` lists every ``(key, request)`` it was asked, in order.
    """

    def __init__(
        self,
        answers: Mapping[str, Answer] | Callable[..., Any] | None = None,
        *,
        fallback: AnswerScript | None = None,
    ) -> None:
        self._answers: dict[str, Answer] = {}
        if callable(answers) and not isinstance(answers, Mapping):
            self._answers["*"] = answers
        elif answers is not None:
            self._answers.update(answers)
        self._fallback = fallback
        self._used: dict[str, int] = {}
        #: Every input request this script was asked to answer, as ``(key, request)``.
        self.asked: list[tuple[str, m.wire.InputRequest]] = []

    # --- the mapping ------------------------------------------------------------------

    def __getitem__(self, key: str) -> Answer:
        return self._answers[key]

    def __setitem__(self, key: str, answer: Answer) -> None:
        self._answers[key] = answer
        self._used.pop(key, None)

    def __delitem__(self, key: str) -> None:
        del self._answers[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._answers)

    def __len__(self) -> int:
        return len(self._answers)

    # --- answering --------------------------------------------------------------------

    def find(self, key: str, request: m.wire.InputRequest) -> tuple[str, Answer] | None:
        """The entry that answers ``request`` asked under ``key``: (its name, the answer)."""
        kind = INPUT_KINDS.kind_for(request).name
        method = kind.partition("#")[0]
        for name in dict.fromkeys((key, kind, method, "*")):
            if name in self._answers:
                return name, self._answers[name]
        if self._fallback is not None:
            return self._fallback.find(key, request)
        return None

    async def __call__(
        self, key: str, request: m.wire.InputRequest
    ) -> m.wire.InputResponse | Mapping[str, Any]:
        self.asked.append((key, request))
        found = self.find(key, request)
        if found is None:
            kind = INPUT_KINDS.kind_for(request).name
            hint = (
                " (a 2025-era session asks under the method, not the server's key)"
                if key == kind.partition("#")[0]
                else ""
            )
            raise InputUnavailable(
                f"no scripted answer for the input request {key!r} ({kind}); "
                f"give one in answers={{{key!r}: ...}}{hint}",
                key=key,
            )
        name, answer = found
        if isinstance(answer, list):
            used = self._used.get(name, 0)
            if used >= len(answer):
                raise InputUnavailable(
                    f"the scripted answers for {name!r} are used up "
                    f"({len(answer)} given, asked once more)",
                    key=key,
                )
            self._used[name] = used + 1
            answer = answer[used]
        if callable(answer):
            answer = _call_answer(answer, key, request)
            if inspect.isawaitable(answer):
                answer = await answer
        result: m.wire.InputResponse | Mapping[str, Any] = answer
        return result


def _call_answer(answer: Callable[..., Any], key: str, request: m.wire.InputRequest) -> Any:
    """A callable answer takes the typed request, or ``(key, request)``."""
    try:
        wants_key = len(inspect.signature(answer).parameters) >= 2
    except (TypeError, ValueError):  # (a builtin without a signature)
        wants_key = False
    return answer(key, request) if wants_key else answer(request)
