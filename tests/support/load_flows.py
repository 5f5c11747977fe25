"""Many concurrent ``relay`` flows through real clients, and what came of each.

The model: a :class:`FlowDriver` runs flows ``n`` = 0, 1, 2, ... of the
``relay`` tool of :mod:`support.load_app` (three legs, two questions that name
their flow) over one or more open clients, ``concurrency`` at a time.  Its
:meth:`FlowDriver.answer` is the clients' input handler: it echoes the
question, so a flow's result is ``"flow N: flow N leg 1 + flow N leg 2"`` only
if every answer reached its own flow.  It also times each round: from the
leg that opened it (the call, or the answer that sent the retry) to the next
question or the result.

A flow that fails because the server refused it for now (HTTP 503 past
``max_connections``, as a bare status or with a JSON-RPC error body of code
:data:`SERVER_BUSY`, or a connection it closed or reset under load), or whose
re-issued leg was refused as ``replayed`` (the server spent that state, then
the answer was lost with the connection: docs/server.md says start over), is
started again, after a short backoff, up to ``max_attempts`` times: that is
the client-side retry, counted in ``refusals`` and ``retries``.  Anything
else (a wrong result, a protocol error, a timeout, attempts used up) counts
as *lost*, with its reason in ``failures``.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs
import trio
from mrtr_transports.client.client import Client
from mrtr_transports.client.errors import (
    CallError,
    ClientError,
    RoundCapExceeded,
    TransportError,
)

import mrtr_core as m

_QUESTION = re.compile(r"flow (\d+) leg (\d)")


def expected(n: int) -> str:
    """The result text of ``relay`` flow ``n`` when every answer reached its flow."""
    return f"flow {n}: flow {n} leg 1 + flow {n} leg 2"


def result_text(result: dict[str, Any]) -> str:
    """The text of a tool result's first content block."""
    content = result.get("content") or [{}]
    return str(content[0].get("text"))


async def echo_answer(key: str, request: m.wire.InputRequest) -> m.wire.ElicitResult:
    """An input handler that accepts every form with the question as its ``echo``."""
    assert isinstance(request, m.wire.ElicitFormRequest), request
    return m.wire.ElicitResult(action="accept", content={"echo": request.message})


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank); 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


@attrs.define
class LoadReport:
    """What came of a batch of flows."""

    flows: int = 0
    completed: int = 0
    #: Flows that did not end with their exact expected result, and why.
    failures: Counter[str] = attrs.field(factory=Counter)
    #: Refusals seen (``"busy"``: HTTP 503 or :data:`SERVER_BUSY`; or a connection closed or
    #: reset by the server under load), by kind.
    refusals: int = 0
    refusal_kinds: Counter[str] = attrs.field(factory=Counter)
    #: The first message of each kind of refusal (what the client was told).
    refusal_examples: dict[str, str] = attrs.field(factory=dict)
    #: Flows started again after a refusal.
    retries: int = 0
    #: Seconds per round (a leg and its answer), over every completed flow.
    rounds: list[float] = attrs.field(factory=list)
    elapsed: float = 0.0

    @property
    def lost(self) -> int:
        return self.flows - self.completed

    @property
    def flows_per_second(self) -> float:
        return self.completed / self.elapsed if self.elapsed > 0 else 0.0

    def summary(self) -> str:
        return (
            f"{self.completed}/{self.flows} flows, lost {self.lost} {dict(self.failures)}, "
            f"refusals {self.refusals} {dict(self.refusal_kinds)} {self.refusal_examples}, "
            f"retries {self.retries}, "
            f"{self.flows_per_second:.0f} flows/s, round p50 "
            f"{percentile(self.rounds, 0.5) * 1000:.1f} ms p99 "
            f"{percentile(self.rounds, 0.99) * 1000:.1f} ms"
        )


#: The JSON-RPC code of a server's "come back later" (a refusal or an eviction sent as a
#: JSON-RPC error body; -32000 to -32019 are left to servers).
SERVER_BUSY = -32000


def refusal_kind(error: ClientError) -> str | None:
    """Why ``error`` is a refusal worth retrying (the server shed load), or None."""
    if isinstance(error, CallError) and error.code == SERVER_BUSY:
        return "busy"  # a 503 (or an eviction) whose body is a JSON-RPC error
    if isinstance(error, CallError) and error.data == {"reason": "replayed"}:
        # A leg re-issued after its stream broke, whose state the server had already
        # spent: the answer was lost, and the documented response is to start over.
        return "replayed"
    if isinstance(error, TransportError):
        if error.status == 503:
            return "busy"  # a 503 whose body is not JSON-RPC
        if error.kind in ("disconnect", "connect") or (error.kind == "http" and not error.status):
            return error.kind  # closed or reset under load, before an answer
    if isinstance(error, RoundCapExceeded) and error.limit_name == "max_leg_reissues":
        return "reissues"  # every re-issue of a leg met a closed connection
    return None


class FlowDriver:
    """Runs ``relay`` flows over clients opened with ``answer=driver.answer``."""

    def __init__(
        self,
        *,
        max_attempts: int = 200,
        backoff: float = 0.02,
        flow_timeout: float = 60.0,
    ) -> None:
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.flow_timeout = flow_timeout
        self._marks: dict[int, float] = {}
        self._rounds: dict[int, list[float]] = {}

    async def answer(self, key: str, request: m.wire.InputRequest) -> m.wire.ElicitResult:
        """The clients' input handler: echo the question, and time the round it ends."""
        match = _QUESTION.fullmatch(getattr(request, "message", ""))
        if match is not None:
            self._lap(int(match.group(1)))
        return await echo_answer(key, request)

    def _lap(self, n: int) -> None:
        now = trio.current_time()
        mark = self._marks.get(n)
        if mark is not None:
            self._rounds.setdefault(n, []).append(now - mark)
        self._marks[n] = now  # the retry leg goes out now

    async def run(
        self, clients: Sequence[Client], numbers: Sequence[int], *, concurrency: int
    ) -> LoadReport:
        """Run flows ``numbers`` (``relay`` with ``n``), ``concurrency`` at once, spread
        over ``clients`` round-robin; each to its result, or lost."""
        report = LoadReport(flows=len(numbers))
        limiter = trio.CapacityLimiter(concurrency)
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for index, n in enumerate(numbers):
                nursery.start_soon(self._one, clients[index % len(clients)], n, limiter, report)
        report.elapsed = trio.current_time() - started
        return report

    async def _one(
        self, client: Client, n: int, limiter: trio.CapacityLimiter, report: LoadReport
    ) -> None:
        async with limiter:
            for attempt in range(1, self.max_attempts + 1):
                self._marks[n] = trio.current_time()
                self._rounds[n] = []
                try:
                    result = await client.call_tool("relay", {"n": n}, timeout=self.flow_timeout)
                except ClientError as exc:
                    kind = refusal_kind(exc)
                    if kind is None:
                        report.failures[f"{type(exc).__name__}: {exc}"[:160]] += 1
                        return
                    report.refusals += 1
                    report.refusal_kinds[kind] += 1
                    report.refusal_examples.setdefault(kind, str(exc)[:200])
                    if attempt == self.max_attempts:
                        report.failures[f"still refused after {attempt} attempts"] += 1
                        return
                    report.retries += 1
                    await trio.sleep(self.backoff * min(attempt, 10) * (0.5 + random.random()))
                    continue
                self._lap(n)
                text = result_text(result)
                if text != expected(n) or result.get("isError"):
                    report.failures[f"wrong result {text!r}"[:160]] += 1
                    return
                report.completed += 1
                report.rounds.extend(self._rounds.pop(n))
                self._marks.pop(n, None)
                return
