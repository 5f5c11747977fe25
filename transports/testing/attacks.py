"""Attacks on ``requestState``: a tampered, an expired and a replayed state must be refused.

The model: the client carries the server's ``requestState`` between rounds and
is not trusted with it.  The spec asks a server to protect its integrity, bind
it to a time to live, and refuse a state used again where effects must happen at
most once; a refusal is a JSON-RPC error (peers use -32602 "Invalid or expired
requestState").  Each attack here takes a call a test already made (its
:class:`~mrtr_transports.testing.client.CallRecord`, the client's last call by
default: the params, and the answers of each round) and sends the leg that
answers one of its rounds again, with the state attacked:

* **tampered**: the flow is driven afresh up to that round (so the state is
  new, not spent), then one significant character of the state is changed;
* **expired**: driven afresh, then the leg is sent with the app's clock moved
  ``after`` seconds on (an app with a ``clock`` attribute, as ``McpApp`` has);
* **replayed**: the leg the call sent is sent again exactly (same answers, same
  state), after the call has used it.

Each returns a :class:`LegOutcome`; the ``assert_*_refused`` forms fail the test
with what the server did instead when it did not refuse.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..client.errors import CallError
from .client import CallRecord, TestClient

__all__ = ["LegOutcome", "StateAttacks", "tampered"]

#: -32602, what the spec's peers answer a bad ``requestState`` with.
INVALID_PARAMS = -32602
#: How far an expiry attack moves the app's clock by default: a day.
DEFAULT_EXPIRY_SHIFT = 86400.0

_RUN = re.compile(r"[A-Za-z0-9_-]+")


def tampered(state: str) -> str:
    """``state`` with one significant character changed.

    Not the last character of a base64url token: it carries padding bits a
    lenient decoder ignores, so the change might not change the bytes.  A
    character in the middle of the token's longest base64url run carries six
    significant bits.
    """
    runs = list(_RUN.finditer(state))
    if not runs:
        return state + "A"
    run = max(runs, key=lambda found: len(found.group()))
    index = (run.start() + run.end()) // 2
    replacement = "A" if state[index] != "A" else "B"
    return state[:index] + replacement + state[index + 1 :]


@dataclass(frozen=True)
class LegOutcome:
    """What the server did with an attacked leg: a ``result`` or an ``error``."""

    attack: str
    round: int
    result: dict[str, Any] | None = None
    error: CallError | None = None

    @property
    def refused(self) -> bool:
        return self.error is not None

    def describe(self) -> str:
        if self.error is not None:
            return f"refused with {self.error.code} {self.error.message!r}"
        result = self.result or {}
        kind = result.get("resultType", "complete")
        return f"accepted it: it answered with a result of type {kind!r}: {_short(result)}"


class StateAttacks:
    """The three attacks, against the app ``client`` serves (see the module docstring)."""

    def __init__(self, client: TestClient) -> None:
        self.client = client

    async def tampered(
        self, call: CallRecord | None = None, round: int | None = None
    ) -> LegOutcome:
        """Send round ``round``'s answers (default: the first round with a state) with
        a fresh state of that round, tampered."""
        call = self._call(call)
        number = _round_with_state(call, round)
        state = await self._fresh_state(call, number)
        return await self._send("tampered", call, number, tampered(state))

    async def expired(
        self,
        call: CallRecord | None = None,
        round: int | None = None,
        *,
        after: float = DEFAULT_EXPIRY_SHIFT,
    ) -> LegOutcome:
        """Send round ``round``'s answers with a fresh state of that round, ``after``
        seconds later by the app's clock."""
        call = self._call(call)
        number = _round_with_state(call, round)
        state = await self._fresh_state(call, number)
        with _clock_moved(self.client.app, after):
            return await self._send("expired", call, number, state)

    async def replayed(
        self, call: CallRecord | None = None, round: int | None = None
    ) -> LegOutcome:
        """Send the leg that answered round ``round`` again, as it was sent."""
        call = self._call(call)
        number = _round_with_state(call, round)
        if len(call.legs) <= number:
            raise AssertionError(
                f"{call.describe()} never answered round {number}: no leg to replay"
            )
        state = call.rounds[number - 1].request_state
        assert state is not None
        return await self._send("replayed", call, number, state)

    # --- the assert forms ---------------------------------------------------------------

    async def assert_tampered_refused(
        self,
        call: CallRecord | None = None,
        round: int | None = None,
        *,
        code: int | None = INVALID_PARAMS,
    ) -> CallError:
        """Fail unless a tampered state is refused (with ``code``; ``None``: any error)."""
        outcome = await self.tampered(call, round)
        return _refused(outcome, self._call(call), code)

    async def assert_expired_refused(
        self,
        call: CallRecord | None = None,
        round: int | None = None,
        *,
        after: float = DEFAULT_EXPIRY_SHIFT,
        code: int | None = INVALID_PARAMS,
    ) -> CallError:
        """Fail unless a state ``after`` seconds old is refused."""
        outcome = await self.expired(call, round, after=after)
        return _refused(outcome, self._call(call), code)

    async def assert_replay_refused(
        self,
        call: CallRecord | None = None,
        round: int | None = None,
        *,
        code: int | None = INVALID_PARAMS,
    ) -> CallError:
        """Fail unless a leg sent again with its spent state is refused."""
        outcome = await self.replayed(call, round)
        return _refused(outcome, self._call(call), code)

    def _call(self, call: CallRecord | None) -> CallRecord:
        return call if call is not None else self.client.last_call

    # --- legs -----------------------------------------------------------------------------

    async def _fresh_state(self, call: CallRecord, number: int) -> str:
        """Drive ``call`` afresh (its recorded answers) to the state of round ``number``."""
        answers: dict[str, Any] | None = None
        state: str | None = None
        for leg in range(number):
            result = await self._leg(call, answers, state)
            if result.get("resultType") != "input_required":
                raise AssertionError(
                    f"driven afresh, {call.describe()} ended after {leg + 1} legs, before "
                    f"round {number}: the flow does not repeat (answers or state differ?)"
                )
            fresh = result.get("requestState")
            if not isinstance(fresh, str):
                raise AssertionError(
                    f"driven afresh, round {leg + 1} of {call.describe()} carried no requestState"
                )
            answers, state = call.rounds[leg].answers, fresh
        assert state is not None
        return state

    async def _leg(
        self, call: CallRecord, answers: dict[str, Any] | None, state: str | None
    ) -> dict[str, Any]:
        return await self.client.send_leg(
            call.method, call.params, input_responses=answers, request_state=state
        )

    async def _send(self, attack: str, call: CallRecord, number: int, state: str) -> LegOutcome:
        answers = call.rounds[number - 1].answers
        try:
            result = await self._leg(call, answers, state)
        except CallError as exc:
            return LegOutcome(attack, number, error=exc)
        return LegOutcome(attack, number, result=result)


def _round_with_state(call: CallRecord, round: int | None) -> int:
    """The round to attack: ``round``, or the first that carried a ``requestState``."""
    if round is None:
        for candidate in call.rounds:
            if candidate.request_state is not None:
                return candidate.number
        raise AssertionError(
            f"{call.describe()} carried no requestState in any of its {len(call.rounds)} "
            "rounds: there is no state to attack"
        )
    if not 1 <= round <= len(call.rounds) or call.rounds[round - 1].request_state is None:
        raise AssertionError(f"round {round} of {call.describe()} carried no requestState")
    return round


def _refused(outcome: LegOutcome, call: CallRecord, code: int | None) -> CallError:
    error = outcome.error
    if error is None or (code is not None and error.code != code):
        expected = "a JSON-RPC error" if code is None else f"a JSON-RPC error {code}"
        raise AssertionError(
            f"{_article(outcome.attack)} {outcome.attack} requestState (round {outcome.round} of "
            f"{call.describe()}) "
            f"should be refused with {expected}, but the server {outcome.describe()}"
        )
    return error


@contextmanager
def _clock_moved(app: Any, after: float) -> Iterator[None]:
    """The app's wall clock ``after`` seconds on, for the block."""
    clock: Callable[[], float] | None = getattr(app, "clock", None)
    if not callable(clock):
        raise TypeError(
            f"an expiry attack moves the app's clock, and {type(app).__name__} has no "
            "`clock` attribute (McpApp has one)"
        )
    app.clock = lambda: clock() + after
    try:
        yield
    finally:
        app.clock = clock


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
