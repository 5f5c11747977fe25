"""Property tests of the round engine: random servers, clocks, limits and apps.

A scripted server answers each leg with the next result of a random script
(complete, input_required with random input requests, requestState only).  A
driver in the style of ``examples/demo.py`` feeds the engine, answers its input
requests, and now and then cancels, fails, breaks a stream or lets a timer fire.
Alongside it runs an oracle: from what it fed and when, the driver knows which
events must come out next, and checks them batch by batch.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st
from support.budget import examples

import mrtr_core as m

SETTINGS = settings(
    max_examples=examples(times=2),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: The whole-flow properties are the heart of this file: they get more examples.
FLOW_SETTINGS = settings(SETTINGS, max_examples=examples(times=4))

ROUND_FIELDS = ("inputResponses", "requestState")
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
TERMINAL = (m.engine.Done, m.engine.Failed, m.engine.TimedOut, m.engine.Cancelled)
SENDS = (m.engine.SendRequest, m.engine.SendRetry)


def pace(n: int, cap: float = m.engine._engine.PACE_CAP) -> float:
    """The delay of the n-th (0-based) requestState-only leg since the last input round."""
    return min(m.engine._engine.PACE_FIRST * 2**n, cap)


def strip(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in ROUND_FIELDS}


def min_opt(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


# --- Strategies ------------------------------------------------------------------

texts = st.text(max_size=10)  # any unicode, "" included
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)


FULL_CAPS: dict[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {"tools": {}, "context": {}},
    "roots": {},
}


@st.composite
def capabilities(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.sampled_from(["full", "full", "random"])) == "full":
        return copy.deepcopy(FULL_CAPS)  # often enough, every request is allowed
    caps: dict[str, Any] = {}
    elicitation = draw(st.sampled_from(["-", "{}", "form", "url", "both"]))
    if elicitation != "-":
        caps["elicitation"] = {
            "{}": {},
            "form": {"form": {}},
            "url": {"url": {}},
            "both": {"form": {}, "url": {}},
        }[elicitation]
    sampling = draw(st.sampled_from(["-", "{}", "tools", "context", "both"]))
    if sampling != "-":
        caps["sampling"] = {
            "{}": {},
            "tools": {"tools": {}},
            "context": {"context": {}},
            "both": {"tools": {}, "context": {}},
        }[sampling]
    if draw(st.booleans()):
        caps["roots"] = {}
    return caps


@st.composite
def form_request(draw: st.DrawFn) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}
    if draw(st.booleans()):
        schema["required"] = ["name"]
    params: dict[str, Any] = {"message": draw(texts), "requestedSchema": schema}
    if draw(st.booleans()):
        params["mode"] = "form"
    return {"method": "elicitation/create", "params": params}


@st.composite
def url_request(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": draw(texts), "url": "https://x.test/" + draw(texts)},
    }


@st.composite
def sampling_request(draw: st.DrawFn) -> dict[str, Any]:
    message = {
        "role": draw(st.sampled_from(["user", "assistant"])),
        "content": {"type": "text", "text": draw(texts)},
    }
    params: dict[str, Any] = {
        "messages": [message] * draw(st.integers(1, 2)),
        "maxTokens": draw(st.integers(1, 4096)),
    }
    if draw(st.booleans()):
        params["systemPrompt"] = draw(texts)
    if draw(st.booleans()):
        params["temperature"] = draw(st.floats(0, 2))
    tools = draw(st.sampled_from(["none", "tools", "choice", "both"]))
    if tools in ("tools", "both"):
        params["tools"] = [{"name": draw(texts), "inputSchema": {"type": "object"}}]
    if tools in ("choice", "both"):
        params["toolChoice"] = {"mode": "auto"}
    context = draw(st.sampled_from(["-", "none", "thisServer", "allServers"]))
    if context != "-":
        params["includeContext"] = context
    return {"method": "sampling/createMessage", "params": params}


roots_request = st.sampled_from(
    [
        {"method": "roots/list"},
        {"method": "roots/list", "params": {}},
        {"method": "roots/list", "params": {"_meta": {"trace": "r"}}},
    ]
).map(copy.deepcopy)

input_requests = st.one_of(form_request(), url_request(), sampling_request(), roots_request)


@st.composite
def script_result(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["input"] * 4 + ["state"] * 2 + ["complete"]))
    if kind == "complete":
        result: dict[str, Any] = {"content": [{"type": "text", "text": draw(texts)}]}
        if draw(st.booleans()):
            result["resultType"] = "complete"
        return result
    result = {"resultType": "input_required"}
    if kind == "input":
        result["inputRequests"] = draw(
            st.dictionaries(texts, input_requests, min_size=1, max_size=3)
        )
        if draw(st.booleans()):
            result["requestState"] = draw(texts)
    else:
        result["requestState"] = draw(texts)
        if draw(st.booleans()):
            result["inputRequests"] = {}  # an empty map: a requestState-only result
    if draw(st.booleans()):
        result["_meta"] = {"io.modelcontextprotocol/serverInfo": {"name": "s"}}
    return result


@st.composite
def original_params(draw: st.DrawFn, stale: bool = True) -> dict[str, Any]:
    params: dict[str, Any] = {
        "name": draw(texts),
        "arguments": draw(st.dictionaries(texts, json_values, max_size=3)),
    }
    if draw(st.booleans()):
        meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
        if draw(st.booleans()):
            meta[CAPS_KEY] = draw(capabilities())
        params["_meta"] = meta
    if stale and draw(st.booleans()):
        params["inputResponses"] = draw(
            st.dictionaries(texts, st.just({"action": "decline"}), max_size=2)
        )
    if stale and draw(st.booleans()):
        params["requestState"] = draw(texts)
    return params


ACTION_KINDS = ["normal"] * 36 + [
    "cancel",
    "broken",
    "broken",
    "leg_timeout",
    "fail",
    "input_timeout",
    "misuse",
]


@dataclass
class Action:
    kind: str
    step: float
    as_mapping: bool
    pick: int


@dataclass
class Plan:
    method: str
    original: dict[str, Any]
    caps: dict[str, Any] | None
    options: dict[str, Any]
    script: list[dict[str, Any]]
    actions: list[Action]
    start: float
    honour_leg: bool
    honour_input: bool
    read_only: bool = False  # hand the engine a MappingProxyType: any write would raise


float_steps = st.one_of(
    st.just(0.0),
    st.floats(0, 0.5, allow_nan=False),
    st.floats(0, 0.5, allow_nan=False),
    st.floats(0, 40, allow_nan=False),
)
# Multiples of 1/64: clock arithmetic on them is exact, so a run and its
# snapshot/restore twin (whose clock is shifted) compare times identically.
dyadic_steps = st.one_of(
    st.integers(0, 32).map(lambda n: n / 64),
    st.integers(0, 32).map(lambda n: n / 64),
    st.integers(0, 64 * 40).map(lambda n: n / 64),
)
float_limits = st.none() | st.floats(2, 30) | st.floats(0.01, 2)
dyadic_limits = (
    st.none()
    | st.integers(64 * 2, 64 * 30).map(lambda n: n / 64)
    | st.integers(1, 64 * 2).map(lambda n: n / 64)
)


@st.composite
def plans(draw: st.DrawFn, *, dyadic: bool = False, stale: bool = True) -> Plan:
    steps = dyadic_steps if dyadic else float_steps
    limits = dyadic_limits if dyadic else float_limits
    actions = draw(
        st.lists(
            st.builds(
                Action,
                kind=st.sampled_from(ACTION_KINDS),
                step=steps,
                as_mapping=st.booleans(),
                pick=st.integers(0, 7),
            ),
            max_size=25,
        )
    )
    options = {
        "leg_timeout": draw(limits),
        "total_timeout": draw(limits),
        "input_timeout": draw(limits),
        # (sampled_from favours its first items: the roomy values come first.)
        "max_rounds": draw(st.sampled_from([10, 3, 2, 1, 0])),
        "max_state_only_legs": draw(st.sampled_from([10, 3, 2, 1, 0])),
        "max_leg_reissues": draw(st.sampled_from([3, 1, 0])),
    }
    start = (
        draw(st.integers(0, 64 * 10**6)) / 64
        if dyadic
        else draw(st.floats(-1e6, 1e6, allow_nan=False))
    )
    original = draw(original_params(stale=stale))
    caps: dict[str, Any] | None = draw(capabilities())
    if draw(st.integers(0, 3)) == 0:
        # Capabilities declared in the request's _meta only (or nowhere).
        meta = original.setdefault("_meta", {})
        meta.pop(CAPS_KEY, None)
        if draw(st.integers(0, 4)):
            meta[CAPS_KEY] = caps
        caps = None
    return Plan(
        method=draw(st.sampled_from(sorted(m._meta.MRTR_METHODS))),
        original=original,
        caps=caps,
        options=options,
        script=draw(st.lists(script_result(), min_size=1, max_size=8)),
        actions=actions,
        start=start,
        honour_leg=False if dyadic else draw(st.booleans()),
        honour_input=draw(st.booleans()),
        read_only=draw(st.booleans()),
    )


# --- The oracle's view of input requests and answers -------------------------------


def request_kind(raw: dict[str, Any]) -> str:
    params = raw.get("params") or {}
    if raw["method"] == "elicitation/create" and params.get("mode") == "url":
        return "elicitation/create#url"
    return str(raw["method"])


def allowed(raw: dict[str, Any], caps: dict[str, Any]) -> bool:
    """The client capability rules, written out independently of the engine."""
    kind = request_kind(raw)
    params = raw.get("params") or {}
    elicitation = caps.get("elicitation")
    sampling = caps.get("sampling")
    if kind == "elicitation/create":
        return isinstance(elicitation, dict) and (not elicitation or "form" in elicitation)
    if kind == "elicitation/create#url":
        return isinstance(elicitation, dict) and "url" in elicitation
    if kind == "sampling/createMessage":
        if not isinstance(sampling, dict):
            return False
        uses_tools = "tools" in params or "toolChoice" in params
        if uses_tools and "tools" not in sampling:
            return False
        # includeContext beyond "none" needs sampling.context (2025-11-25 onwards).
        uses_context = params.get("includeContext", "none") != "none"
        return not uses_context or "context" in sampling
    return isinstance(caps.get("roots"), dict)


RESPONSE_CLASS: dict[str, type] = {
    "elicitation/create": m.wire.ElicitResult,
    "elicitation/create#url": m.wire.ElicitResult,
    "sampling/createMessage": m.wire.CreateMessageResult,
    "roots/list": m.wire.ListRootsResult,
}


def answer_for(raw: dict[str, Any], key: str, variant: int) -> dict[str, Any]:
    """A valid wire answer for ``raw`` (its typed twin is built from it)."""
    kind = request_kind(raw)
    if kind == "elicitation/create":
        action = ("accept", "decline", "cancel")[variant % 3]
        if action == "accept":
            return {"action": "accept", "content": {"name": f"{key}-{variant}"}}
        return {"action": action}
    if kind == "elicitation/create#url":
        return {"action": ("accept", "decline")[variant % 2]}
    if kind == "sampling/createMessage":
        out: dict[str, Any] = {
            "role": "assistant",
            "content": {"type": "text", "text": f"{key}-{variant}"},
            "model": "m",
        }
        if variant % 2:
            out["stopReason"] = "endTurn"
        return out
    root: dict[str, Any] = {"uri": f"file:///r/{variant}"}
    if variant % 2:
        root["name"] = key
    return {"roots": [root]}


# --- The driver and its oracle -----------------------------------------------------


@dataclass
class Leg:
    kind: type  # SendRequest or SendRetry
    params: Any
    timeout: float | None
    delay: float
    sent: float
    number: int
    limit: str  # what a leg timeout would be reported as
    restored: bool = False


@dataclass
class Outcome:
    kind: str
    detail: tuple[Any, ...]
    action: int
    via_restored_leg_timeout: bool = False


@dataclass
class Run:
    plan: Plan
    restore_at: int | None = None
    offset: float = 0.0
    snapshots: bool = True
    stop_at: int | None = None  # leave the flow open at this quiescent point
    points: list[m.Wait] = field(default_factory=list)  # what each quiescent point waited for

    # Filled in as the run goes.
    engine: m.engine.RoundEngine = field(init=False)
    fed: list[tuple[int, Any]] = field(default_factory=list)  # (script index, leg params)
    sends: list[tuple[float, Any]] = field(default_factory=list)
    outcome: Outcome | None = None
    quiescent: int = 0

    def __post_init__(self) -> None:
        plan = self.plan
        self.pristine = copy.deepcopy(plan.original)
        self.stripped = strip(self.pristine)
        self.opts = plan.options
        if plan.caps is not None:
            self.caps = plan.caps
        else:
            meta = plan.original.get("_meta")
            found = meta.get(CAPS_KEY) if isinstance(meta, dict) else None
            self.caps = found if isinstance(found, dict) else {}
        given_params: Any = (
            types.MappingProxyType(plan.original) if plan.read_only else plan.original
        )
        self.engine = m.engine.RoundEngine(
            plan.method, given_params, capabilities=plan.caps, **plan.options
        )
        self.now = plan.start
        self.started = plan.start
        self.action_no = 0
        self.script_pos = 0
        self.identity = True
        self.restored = False
        # Model of the flow.
        self.round = 0
        self.input_rounds = 0
        self.state_only = 0
        self.pace_n = 0
        self.reissues = 0
        self.leg: Leg | None = None
        self.pending: list[str] = []
        self.requests: dict[str, dict[str, Any]] = {}
        self.answers: dict[str, dict[str, Any]] = {}
        self.round_has_state = False
        self.round_state: Any = None
        self.deadline: float | None = None
        self.input_limit = "input"
        self.wait: m.Wait = m.Wait.NEED_START
        self.last_input_required: dict[str, Any] | None = None
        self.input_retries = 0
        self.state_only_retries = 0
        # A URL elicitation accepted in this round; since when its person is waited for
        # (the state-only legs after it are human time: not counted, bounded in seconds).
        self.url_accepted = False
        self.url_wait_since: float | None = None
        self.url_wait_retries = 0

    # --- helpers ---

    def call(self, name: str, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except m.MrtrError as exc:
            raise AssertionError(f"{name}: unexpected {exc!r} in a valid flow") from exc

    def drain(self) -> tuple[list[Any], m.Wait]:
        events: list[Any] = []
        while True:
            ev = self.engine.next_event()
            if isinstance(ev, m.Wait):
                break
            events.append(ev)
        terminals = [e for e in events if isinstance(e, TERMINAL)]
        assert len(terminals) <= 1, events
        if terminals:
            assert events[-1] is terminals[0], events  # nothing after the terminal event
            assert ev is m.Wait.FINISHED
            assert self.engine.next_event() is m.Wait.FINISHED
        elif self.engine.state is not m.engine.EngineState.ERROR:
            assert ev is not m.Wait.FINISHED, events  # a flow ends with a terminal event
        return events, ev

    def remaining(self, now: float, delay: float = 0.0) -> float | None:
        total = self.opts["total_timeout"]
        if total is None:
            return None
        return total - (now - self.started) - delay

    def spent(self, now: float, reserve: float = 0.0) -> bool:
        total = self.opts["total_timeout"]
        return total is not None and total - (now - self.started) <= reserve

    def finish(self, events: list[Any], kind: str, detail: tuple[Any, ...]) -> None:
        assert self.outcome is None
        self.outcome = Outcome(kind, detail, self.action_no)
        assert not any(isinstance(e, SENDS) for e in events)

    def expect_total_timeout(self, events: list[Any], wait: m.Wait, prefix: int = 0) -> None:
        assert len(events) == prefix + 1, events
        (ev,) = events[prefix:]
        assert isinstance(ev, m.engine.TimedOut), events
        assert ev.limit == "total"
        assert ev.budget == self.opts["total_timeout"]
        assert not any(isinstance(e, m.engine.DispatchInput) for e in events)
        self.finish(events, "timed_out", ("total",))

    def expect_failed(self, events: list[Any], cls: type, **attrs_: Any) -> None:
        ev = events[-1]
        assert isinstance(ev, m.engine.Failed), events
        assert type(ev.error) is cls, ev
        for name, value in attrs_.items():
            assert getattr(ev.error, name) == value, (name, ev.error)
        self.finish(events, "failed", (cls.__name__, *sorted(attrs_.items(), key=str)))

    def expect_send(
        self,
        events: list[Any],
        *,
        kind: type,
        params: Any,
        delay: float,
        reissue: bool,
    ) -> None:
        assert len(events) == 1, events
        (ev,) = events
        assert type(ev) is kind, ev
        assert ev.reissue is reissue
        if params is not None:
            assert ev.params == params
        leg_timeout = self.opts["leg_timeout"]
        rem = self.remaining(self.now, delay)
        # The leg's timeout: bounded by leg_timeout and by what is left of the budget
        # once the pacing delay has run, and not needlessly shorter than both.
        if rem is not None:
            assert rem > 0, "a leg was sent with the whole-flow budget spent"
            assert self.now - self.started < self.opts["total_timeout"]
        want = min_opt(leg_timeout, rem)
        if want is None:
            assert ev.timeout is None
        else:
            assert ev.timeout is not None
            assert ev.timeout > 0
            assert math.isclose(ev.timeout, want, rel_tol=1e-9, abs_tol=1e-9), (ev.timeout, want)
            if leg_timeout is not None:
                assert ev.timeout <= leg_timeout
            if rem is not None:
                assert ev.timeout <= rem + 1e-9
        if kind is m.engine.SendRetry:
            assert math.isclose(ev.delay, delay), (ev.delay, delay)
            assert ev.round == self.round
        budget_bound = rem is not None and (leg_timeout is None or rem <= leg_timeout)
        limit = "total" if budget_bound else "leg"
        self.leg = Leg(kind, ev.params, ev.timeout, delay, self.now, ev.leg, limit)
        self.sends.append((self.now, ev))

    def check_retry_params(
        self, params: Any, *, answers: dict[str, Any] | None, state: Any
    ) -> None:
        """The one retry rule: original minus round fields, this round's answers, the state."""
        want = dict(self.stripped)
        if answers:
            want["inputResponses"] = answers
        if state is not None:
            want["requestState"] = state
        assert dict(params) == want
        if answers:
            assert set(params["inputResponses"]) == set(self.requests)
        else:
            assert "inputResponses" not in params
        if state is None:
            assert "requestState" not in params
        else:
            assert type(params["requestState"]) is str
            if self.identity:
                assert params["requestState"] is state  # byte-exact: the very str received

    # --- the loop ---

    def run(self) -> Run:
        self.call("start", lambda: self.engine.start(self.now))
        events, wait = self.drain()
        # The first leg: the original minus any stale round fields the caller left in.
        self.expect_send(
            events, kind=m.engine.SendRequest, params=self.stripped, delay=0.0, reissue=False
        )
        while wait is not m.Wait.FINISHED:
            self.quiescent += 1
            self.points.append(wait)
            if self.stop_at == self.quiescent:
                self.wait = wait
                return self
            if self.snapshots:
                snap = self.engine.snapshot(self.now)
                text = json.dumps(snap, allow_nan=False)
                if self.restore_at == self.quiescent and not self.restored:
                    event(f"restored in {self.engine.state.value}, {len(self.answers)} answered")
                    wait = self.restore(json.loads(text), wait)
                    continue
            wait = self.act(wait)
        assert self.engine.state in m.engine._state.TERMINAL_STATES
        assert self.engine.next_event() is m.Wait.FINISHED
        assert self.plan.original == self.pristine, "the original params were mutated"
        # Legs on the wire, counted from the events themselves (reissues of a leg
        # are the same leg again): within the caps.
        retries = [
            ev for _, ev in self.sends if isinstance(ev, m.engine.SendRetry) and not ev.reissue
        ]
        with_answers = [ev for ev in retries if "inputResponses" in ev.params]
        assert len(with_answers) == self.input_retries <= self.opts["max_rounds"]
        state_only = len(retries) - len(with_answers)
        assert state_only == self.state_only_retries + self.url_wait_retries
        assert self.state_only_retries <= self.opts["max_state_only_legs"]
        return self

    def next_action(self) -> Action:
        if self.action_no < len(self.plan.actions):
            action = self.plan.actions[self.action_no]
        else:
            action = Action("normal", 1 / 64, False, 0)
        self.action_no += 1
        return action

    def act(self, wait: m.Wait) -> m.Wait:
        action = self.next_action()
        if action.kind == "misuse":
            return self.misuse(wait)
        if wait is m.Wait.NEED_RESULT:
            return self.act_on_leg(action)
        assert wait is m.Wait.NEED_INPUT
        return self.act_on_round(action)

    def misuse(self, wait: m.Wait) -> m.Wait:
        engine = self.engine
        with pytest.raises(m.LocalProtocolError):
            if wait is m.Wait.NEED_RESULT:
                engine.provide("no such key", {"action": "accept"}, self.now)
            else:
                engine.leg_broken(self.now)
        assert engine.state is m.engine.EngineState.ERROR
        events, wait = self.drain()
        # A dead flow sends nothing and asks nothing (withdrawing prompts is fine).
        assert not any(
            isinstance(e, (*SENDS, m.engine.DispatchInput, m.engine.RoundStarted)) for e in events
        )
        assert wait is m.Wait.FINISHED
        self.outcome = Outcome("error", (), self.action_no)
        return wait

    # --- a leg is out ---

    def act_on_leg(self, action: Action) -> m.Wait:
        leg = self.leg
        assert leg is not None
        t = self.now + action.step
        leg_deadline = None if leg.timeout is None else leg.sent + leg.delay + leg.timeout
        kind = action.kind
        if kind == "leg_timeout" and leg_deadline is None:
            kind = "normal"
        if (
            kind == "normal"
            and self.plan.honour_leg
            and leg_deadline is not None
            and t > leg_deadline
        ):
            kind = "leg_timeout"
        if kind == "cancel":
            self.now = t
            self.call("cancel", lambda: self.engine.cancel(t))
            events, wait = self.drain()
            assert len(events) == 2, events
            assert events[0] == m.engine.CancelLeg(leg=leg.number)
            assert events[1] == m.engine.Cancelled()
            self.finish(events, "cancelled", ())
            return wait
        if kind == "leg_timeout":
            assert leg_deadline is not None
            t = max(self.now, leg_deadline)
            self.now = t
            self.call("leg_timed_out", lambda: self.engine.leg_timed_out(t))
            events, wait = self.drain()
            assert len(events) == 2, events
            assert events[0] == m.engine.CancelLeg(leg=leg.number)
            assert isinstance(events[1], m.engine.TimedOut)
            assert events[1].limit == leg.limit, (events[1], leg)
            self.finish(events, "timed_out", (events[1].limit,))
            assert self.outcome is not None
            self.outcome.via_restored_leg_timeout = leg.restored
            return wait
        if kind == "broken":
            self.now = t
            self.call("leg_broken", lambda: self.engine.leg_broken(t))
            self.reissues += 1
            events, wait = self.drain()
            if self.reissues > self.opts["max_leg_reissues"]:
                assert len(events) == 1, events
                self.expect_failed(
                    events,
                    m.engine.RoundLimitExceeded,
                    limit_name="max_leg_reissues",
                    last_result=self.last_input_required,
                )
            elif self.spent(t):
                self.expect_total_timeout(events, wait)
            else:
                self.expect_send(events, kind=leg.kind, params=leg.params, delay=0.0, reissue=True)
                assert self.leg is not None
                self.leg.restored = leg.restored
            return wait
        return self.feed(t)

    def feed(self, t: float) -> m.Wait:
        assert self.leg is not None
        if self.script_pos < len(self.plan.script):
            result = self.plan.script[self.script_pos]
        else:
            result = {"resultType": "complete", "content": []}
        self.fed.append((self.script_pos, dict(self.leg.params)))
        self.script_pos += 1
        self.now = t
        self.call("receive_result", lambda: self.engine.receive_result(result, t))
        self.reissues = 0
        events, wait = self.drain()
        if result.get("resultType", "complete") == "complete":
            assert events == [m.engine.Done(result=result)]
            self.finish(events, "done", (self.script_pos,))
            return wait
        self.last_input_required = result
        if self.spent(t):
            # The budget ran out while the server worked: nobody is asked anything.
            event("an input_required result arrived after the budget")
            self.expect_total_timeout(events, wait)
            return wait
        requests = result.get("inputRequests") or {}
        if requests:
            return self.open_round(result, requests, events, wait)
        return self.state_only_leg(result, events, wait)

    def open_round(
        self, result: dict[str, Any], requests: dict[str, Any], events: list[Any], wait: m.Wait
    ) -> m.Wait:
        self.input_rounds += 1
        if self.input_rounds > self.opts["max_rounds"]:
            assert len(events) == 1, events
            self.expect_failed(
                events, m.engine.RoundLimitExceeded, limit_name="max_rounds", last_result=result
            )
            assert events[0].error.last_result is result
            return wait
        for key, raw in requests.items():
            if not allowed(raw, self.caps):
                assert len(events) == 1, events
                self.expect_failed(events, m.engine.MissingCapability, key=key)
                return wait
        self.round += 1
        self.pace_n = 0
        self.url_accepted = False
        self.url_wait_since = None
        keys = tuple(requests)
        rem = self.remaining(self.now)
        wait_for = min_opt(self.opts["input_timeout"], rem)
        self.deadline = None if wait_for is None else self.now + wait_for
        self.input_limit = "total" if rem is not None and wait_for == rem else "input"
        assert events[0] == m.engine.RoundStarted(
            round=self.round,
            keys=keys,
            kinds=tuple(request_kind(r) for r in requests.values()),
            input_timeout=wait_for,
        )
        assert events[1:] == [
            m.engine.DispatchInput(
                key=k, request=m.wire.structure_input_request(r), round=self.round
            )
            for k, r in requests.items()
        ]
        assert wait is m.Wait.NEED_INPUT
        assert self.engine.pending_keys == keys
        self.pending = list(keys)
        self.requests = dict(requests)
        self.answers = {}
        self.round_has_state = "requestState" in result
        self.round_state = result.get("requestState")
        return wait

    def state_only_leg(self, result: dict[str, Any], events: list[Any], wait: m.Wait) -> m.Wait:
        url_wait = self.url_wait_since is not None
        if self.url_wait_since is not None:
            waited = self.now - self.url_wait_since
            if waited > m.engine._engine.DEFAULT_URL_WAIT:
                assert events == [
                    m.engine.TimedOut(
                        elapsed=waited, budget=m.engine._engine.DEFAULT_URL_WAIT, limit="input"
                    )
                ]
                self.finish(events, "timed_out", ("url",))
                return wait
        else:
            self.state_only += 1
        if not url_wait and self.state_only > self.opts["max_state_only_legs"]:
            assert len(events) == 1, events
            self.expect_failed(
                events,
                m.engine.RoundLimitExceeded,
                limit_name="max_state_only_legs",
                last_result=result,
            )
            return wait
        self.round += 1
        delay = pace(
            self.pace_n, m.engine._engine.URL_PACE_CAP if url_wait else m.engine._engine.PACE_CAP
        )
        self.pace_n += 1
        assert events[0] == m.engine.RoundStarted(
            round=self.round, keys=(), kinds=(), input_timeout=None
        )
        if self.spent(self.now, reserve=delay):
            self.expect_total_timeout(events, wait, prefix=1)
            return wait
        self.requests = {}
        self.expect_send(
            events[1:], kind=m.engine.SendRetry, params=None, delay=delay, reissue=False
        )
        assert self.leg is not None
        self.check_retry_params(self.leg.params, answers=None, state=result["requestState"])
        if url_wait:
            self.url_wait_retries += 1
        else:
            self.state_only_retries += 1
        return wait

    # --- a round waits for answers ---

    def act_on_round(self, action: Action) -> m.Wait:
        assert self.pending
        assert self.engine.pending_keys == tuple(self.pending)
        t = self.now + action.step
        kind = action.kind
        if kind in ("leg_timeout", "broken"):
            kind = "normal"
        if kind == "input_timeout" and self.deadline is None:
            kind = "normal"
        if (
            kind == "normal"
            and self.plan.honour_input
            and self.deadline is not None
            and t > self.deadline
        ):
            kind = "input_timeout"
        if kind == "cancel":
            self.now = t
            self.call("cancel", lambda: self.engine.cancel(t))
            events, wait = self.drain()
            # No answer is made up for the keys left open: no decline, no retry.
            assert events == [m.engine.CancelInputs(keys=tuple(self.pending)), m.engine.Cancelled()]
            self.finish(events, "cancelled", ())
            return wait
        if kind == "fail":
            key = self.pending[action.pick % len(self.pending)]
            self.call("fail", lambda: self.engine.fail(key, "nope"))
            events, wait = self.drain()
            others = tuple(k for k in self.pending if k != key)
            if others:
                assert events[0] == m.engine.CancelInputs(keys=others)
            assert len(events) == 1 + bool(others), events
            self.expect_failed(events, m.engine.InputFailed, key=key)
            return wait
        if kind == "input_timeout":
            assert self.deadline is not None
            t = max(self.now, self.deadline)
            self.now = t
            self.call("input_timed_out", lambda: self.engine.input_timed_out(t))
            events, wait = self.drain()
            self.expect_input_expired(events, self.pending)
            return wait
        return self.answer(action, t)

    def expect_input_expired(self, events: list[Any], left: list[str]) -> None:
        if left:
            assert events[0] == m.engine.CancelInputs(keys=tuple(left))
        assert len(events) == 1 + bool(left), events
        ev = events[-1]
        assert isinstance(ev, m.engine.TimedOut)
        assert ev.limit == self.input_limit, (ev, self.input_limit)
        self.finish(events, "timed_out", (ev.limit,))

    def answer(self, action: Action, t: float) -> m.Wait:
        key = self.pending[action.pick % len(self.pending)]
        raw = self.requests[key]
        wire = answer_for(raw, key, action.pick)
        typed = m.wire.structure(wire, RESPONSE_CLASS[request_kind(raw)])
        response: Any = dict(wire) if action.as_mapping else typed
        self.now = t
        self.call("provide", lambda: self.engine.provide(key, response, t))
        self.pending.remove(key)
        events, wait = self.drain()
        if self.deadline is not None and t > self.deadline:
            # Too late: the answer is dropped, the round's other prompts withdrawn.
            event("an answer arrived after the input deadline")
            self.expect_input_expired(events, self.pending)
            return wait
        self.answers[key] = wire
        if request_kind(raw) == "elicitation/create#url" and wire["action"] == "accept":
            self.url_accepted = True
        if self.pending:
            assert events == []
            assert wait is m.Wait.NEED_INPUT
            return wait
        if self.spent(t):
            self.expect_total_timeout(events, wait)
            return wait
        self.url_wait_since = t if self.url_accepted else None
        self.expect_send(events, kind=m.engine.SendRetry, params=None, delay=0.0, reissue=False)
        assert self.leg is not None
        self.check_retry_params(
            self.leg.params,
            answers=self.answers,
            state=self.round_state if self.round_has_state else None,
        )
        self.input_retries += 1
        return wait

    # --- snapshot and restore ---

    def restore(self, snap: dict[str, Any], wait: m.Wait) -> m.Wait:
        if wait is m.Wait.NEED_INPUT and self.deadline is not None and self.now >= self.deadline:
            # Exactly at the input deadline the live engine still takes an answer, while a
            # restored round with no time left times out instead of prompting for 0 s
            # (test_restore_after_a_deadline_passed checks that): not the same flow.
            reject()
        self.restored = True
        later = self.now + self.offset
        elapsed = snap["elapsed"]
        self.engine = m.engine.RoundEngine.restore(snap, later)
        self.started = later - float(elapsed)
        if self.url_wait_since is not None:  # stored as time waited: rebased like the rest
            self.url_wait_since += self.offset
        self.now = later
        self.identity = False  # the state went through JSON: equal, no longer the same str
        events, new_wait = self.drain()
        assert new_wait is wait
        if wait is m.Wait.NEED_RESULT:
            leg = self.leg
            assert leg is not None
            # The leg in flight died with the old process: restore re-issues it as a
            # broken leg, counted against max_leg_reissues.
            self.expect_send(events, kind=leg.kind, params=leg.params, delay=0.0, reissue=True)
            assert self.leg is not None
            self.leg.restored = True
            return new_wait
        assert self.deadline is not None or self.opts["input_timeout"] is None
        assert events[0] == m.engine.RoundStarted(
            round=self.round,
            keys=tuple(self.pending),
            kinds=tuple(request_kind(self.requests[k]) for k in self.pending),
            input_timeout=events[0].input_timeout,
        )
        assert events[1:] == [
            m.engine.DispatchInput(
                key=k, request=m.wire.structure_input_request(self.requests[k]), round=self.round
            )
            for k in self.pending
        ]
        new_deadline = None if events[0].input_timeout is None else later + events[0].input_timeout
        old_deadline = None if self.deadline is None else self.deadline + self.offset
        assert new_deadline == old_deadline, (new_deadline, old_deadline)
        self.deadline = new_deadline
        assert self.engine.pending_keys == tuple(self.pending)
        return new_wait


# --- The properties ----------------------------------------------------------------


def pick_point(run: Run) -> st.SearchStrategy[int]:
    """A quiescent point of ``run`` (1-based), rounds waiting for answers first
    (sampled_from favours early items, and legs are the common case anyway)."""
    rounds = [n for n, w in enumerate(run.points, 1) if w is m.Wait.NEED_INPUT]
    legs = [n for n, w in enumerate(run.points, 1) if w is not m.Wait.NEED_INPUT]
    return st.sampled_from(rounds + legs)


@FLOW_SETTINGS
@given(plans())
def test_flow_properties(plan: Plan) -> None:
    """Every rule, checked on every leg and every round of a random flow."""
    run = Run(plan).run()
    assert run.outcome is not None
    event(f"outcome: {run.outcome.kind} {run.outcome.detail[:1]}")
    event(f"retries with answers: {run.input_retries}")
    event(f"requestState-only legs: {run.state_only_retries}")


@SETTINGS
@given(plans(dyadic=True), st.data())
def test_restore_after_a_deadline_passed(plan: Plan, data: st.DataObject) -> None:
    """A snapshot taken (or restored) late: the process was down past a deadline.

    The restored engine must not re-issue a leg, nor show prompts, once the time
    for them has run out; otherwise it re-emits them with a non-negative timeout.
    """
    reference = Run(plan, snapshots=False).run()
    at = data.draw(pick_point(reference), label="stop at")
    run = Run(plan, snapshots=False, stop_at=at).run()
    if run.engine.state in m.engine._state.TERMINAL_STATES:
        return
    late = data.draw(dyadic_steps, label="late")
    snap_at = run.now + late
    snap = json.loads(json.dumps(run.engine.snapshot(snap_at)))
    engine = m.engine.RoundEngine.restore(snap, 5000.0)
    events: list[Any] = []
    while not isinstance(ev := engine.next_event(), m.Wait):
        events.append(ev)
    total = plan.options["total_timeout"]
    remaining = None if total is None else total - (snap_at - run.started)
    expired: set[str] = set()
    if run.wait is m.Wait.NEED_RESULT:
        if remaining is not None and remaining <= 0:
            expired.add("total")  # as when a leg is sent: no budget left, no leg
    else:
        # A round restored with no time left (exactly none included) times out rather
        # than prompt someone with a zero-second deadline.
        if remaining is not None and remaining <= 0:
            expired.add("total")
        if run.deadline is not None and snap_at >= run.deadline:
            expired.add(run.input_limit)  # as provide() would find it: too late
    if expired:
        assert not any(isinstance(e, (*SENDS, m.engine.DispatchInput)) for e in events), events
        assert events, "a restored flow past its deadline must time out"
        assert isinstance(events[-1], m.engine.TimedOut), events
        assert events[-1].limit in expired
        assert ev is m.Wait.FINISHED
        return
    assert ev is run.wait
    if run.wait is m.Wait.NEED_RESULT:
        (send,) = events
        assert isinstance(send, SENDS)
        assert send.reissue
        assert send.timeout is None or send.timeout > 0
    else:
        started = events[0]
        assert isinstance(started, m.engine.RoundStarted)
        assert started.input_timeout is None or started.input_timeout >= 0
        assert [e.key for e in events[1:]] == run.pending


ONE_PROMPT: dict[str, Any] = {
    "resultType": "input_required",
    "inputRequests": {
        "a": {
            "method": "elicitation/create",
            "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
        }
    },
}


@pytest.mark.parametrize(
    ("opts", "limit"),
    [({"total_timeout": 10.0}, "total"), ({"input_timeout": 5.0}, "input")],
)
def test_restore_past_a_deadline_does_not_prompt_again(opts: dict[str, Any], limit: str) -> None:
    """The minimal case of test_restore_after_a_deadline_passed for a round."""
    engine = m.engine.RoundEngine(
        "tools/call", {"name": "t"}, capabilities={"elicitation": {}}, **opts
    )
    engine.start(0.0)
    engine.next_event()
    engine.receive_result(ONE_PROMPT, 1.0)
    while not isinstance(engine.next_event(), m.Wait):
        pass
    snap = json.loads(json.dumps(engine.snapshot(20.0)))  # the deadline passed at 6 or 10
    restored = m.engine.RoundEngine.restore(snap, 100.0)
    events = []
    while not isinstance(ev := restored.next_event(), m.Wait):
        events.append(ev)
    assert not any(isinstance(e, m.engine.DispatchInput) for e in events), events
    assert isinstance(events[-1], m.engine.TimedOut), events
    assert events[-1].limit == limit
    assert ev is m.Wait.FINISHED


def test_restore_past_the_budget_does_not_resend_the_leg() -> None:
    engine = m.engine.RoundEngine("tools/call", {"name": "t"}, total_timeout=10.0)
    engine.start(0.0)
    engine.next_event()
    snap = json.loads(json.dumps(engine.snapshot(20.0)))
    restored = m.engine.RoundEngine.restore(snap, 100.0)
    ev = restored.next_event()
    assert isinstance(ev, m.engine.TimedOut)
    assert ev.limit == "total"
    assert restored.next_event() is m.Wait.FINISHED


SNAPSHOT_KEYS = [
    "version",
    "method",
    "params",
    "capabilities",
    "options",
    "state",
    "elapsed",
    "round",
    "legs",
    "input_rounds",
    "state_only_legs",
    "reissues",
    "pace",
    "leg_params",
    "leg_is_retry",
    "pending",
    "responses",
    "request_state",
    "round_elapsed",
    "last_input_required",
]


@SETTINGS
@given(plans(), st.data())
def test_restore_of_a_damaged_snapshot_raises_local_protocol_error_only(
    plan: Plan, data: st.DataObject
) -> None:
    """Stored data can rot: restore() either works or raises LocalProtocolError,
    and an engine it returns fails only with MrtrError afterwards."""
    reference = Run(plan, snapshots=False).run()
    at = data.draw(pick_point(reference), label="stop at")
    run = Run(plan, snapshots=False, stop_at=at).run()
    if run.engine.state in m.engine._state.TERMINAL_STATES:
        return
    snap = json.loads(json.dumps(run.engine.snapshot(run.now)))
    for _ in range(data.draw(st.integers(1, 3), label="damages")):
        key = data.draw(st.sampled_from(sorted(snap) or SNAPSHOT_KEYS), label="key")
        how = data.draw(st.sampled_from(["replace", "delete", "inner"]), label="how")
        if how == "delete":
            snap.pop(key, None)
        elif how == "inner" and isinstance(snap.get(key), dict) and snap[key]:
            inner = data.draw(st.sampled_from(sorted(snap[key])), label="inner key")
            snap[key][inner] = data.draw(json_values, label="inner value")
        else:
            snap[key] = data.draw(json_values, label="value")
    try:
        engine = m.engine.RoundEngine.restore(snap, 10.0)
    except m.LocalProtocolError:
        return
    # Whatever came back must behave: events out, then a few inputs, MrtrError only.
    for _ in range(20):
        if isinstance(engine.next_event(), m.Wait):
            break
    moves: list[Callable[[], Any]] = [
        lambda: engine.receive_result({"content": []}, 11.0),
        lambda: engine.provide(
            (engine.pending_keys or ("k",))[0], {"action": "accept", "content": {}}, 11.0
        ),
        lambda: engine.leg_broken(11.0),
        lambda: engine.leg_timed_out(11.0),
        lambda: engine.input_timed_out(11.0),
        lambda: engine.cancel(11.0),
    ]
    move = data.draw(st.sampled_from(moves), label="move")
    with contextlib.suppress(m.MrtrError):
        move()
    for _ in range(20):
        if isinstance(engine.next_event(), m.Wait):
            break


def test_snapshot_in_idle_restores_to_a_fresh_flow() -> None:
    original = {"name": "t", "requestState": "stale"}
    engine = m.engine.RoundEngine("tools/call", original, total_timeout=5.0)
    snap = json.loads(json.dumps(engine.snapshot(3.0)))
    restored = m.engine.RoundEngine.restore(snap, 100.0)
    assert restored.next_event() is m.Wait.NEED_START
    restored.start(200.0)
    ev = restored.next_event()
    assert isinstance(ev, m.engine.SendRequest)
    assert ev.params == {"name": "t"}
    assert ev.timeout == 5.0


@FLOW_SETTINGS
@given(plans(dyadic=True), st.data())
def test_snapshot_restore_continues_the_same_flow(plan: Plan, data: st.DataObject) -> None:
    reference = Run(plan, snapshots=False).run()
    event(f"reference: {reference.points.count(m.Wait.NEED_INPUT)} points waiting for input")
    at = data.draw(pick_point(reference), label="restore at")
    offset = data.draw(st.integers(0, 64 * 10**4).map(lambda n: n / 64), label="offset")
    resumed = Run(plan, restore_at=at, offset=offset).run()
    ref, res = reference.outcome, resumed.outcome
    assert ref is not None and res is not None
    assert res.kind == ref.kind
    assert res.action == ref.action
    if not (res.via_restored_leg_timeout or ref.via_restored_leg_timeout):
        # A restored leg is a new leg with its own timeout; only then may the
        # limit reported for an explicit leg timeout differ.
        assert res.detail == ref.detail
    # The same legs were answered, carrying the same params.
    assert resumed.fed == reference.fed


@SETTINGS
@given(original_params(stale=True), capabilities(), st.data())
def test_first_leg_strips_stale_round_fields(
    original: dict[str, Any], caps: dict[str, Any], data: st.DataObject
) -> None:
    """A caller's params with leftover inputResponses/requestState: the engine owns
    the flow, so neither field reaches the wire on the first leg, its reissues or a
    restored copy of it, and the caller's mapping is left alone."""
    pristine = copy.deepcopy(original)
    engine = m.engine.RoundEngine("tools/call", original, capabilities=caps)
    engine.start(0.0)
    ev = engine.next_event()
    assert isinstance(ev, m.engine.SendRequest)
    assert ev.params == strip(pristine)
    if data.draw(st.booleans()):
        engine.leg_broken(1.0)
        ev = engine.next_event()
        assert isinstance(ev, m.engine.SendRequest)
        assert ev.reissue
        assert ev.params == strip(pristine)
    snap = json.loads(json.dumps(engine.snapshot(2.0)))
    restored = m.engine.RoundEngine.restore(snap, 100.0)
    ev = restored.next_event()
    assert isinstance(ev, m.engine.SendRequest)
    assert ev.reissue
    assert ev.params == strip(pristine)
    assert original == pristine


@SETTINGS
@given(
    original_params(stale=True),
    st.none()
    | st.dictionaries(
        texts,
        st.sampled_from(
            [
                m.wire.ElicitResult(action="accept", content={"a": 1}),
                {"action": "decline"},
                m.wire.CreateMessageResult(role="assistant", content={"type": "text"}, model="x"),
                m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///a", name="a")]),
                {"roots": []},
            ]
        ),
        max_size=3,
    ),
    st.none() | texts,
)
def test_build_retry_params(
    original: dict[str, Any], responses: dict[str, Any] | None, state: str | None
) -> None:
    pristine = copy.deepcopy(original)
    responses_before = copy.deepcopy(responses)
    params = m.engine.build_retry_params(original, responses, state)
    assert original == pristine
    assert responses == responses_before
    assert params is not original
    want = strip(pristine)
    if responses:
        want["inputResponses"] = {
            k: m.wire._convert.unstructure_input_response(v) for k, v in responses.items()
        }
        assert set(params["inputResponses"]) == set(responses)
    if state is not None:
        want["requestState"] = state
        assert params["requestState"] is state
    assert params == want
    assert m.engine._retry.strip_round_fields(params) == strip(pristine)
    # JSON-able whenever the inputs are.
    json.dumps(params)
    # The result is the caller's own: changing it leaves the original alone.
    params["extra"] = 1
    params.pop("name", None)
    assert original == pristine


@given(st.one_of(st.integers(), st.binary(), st.lists(st.integers())), st.none() | texts)
def test_build_retry_params_rejects_non_mapping_params(bad: Any, state: str | None) -> None:
    with pytest.raises(m.LocalProtocolError):
        m.engine.build_retry_params(bad, None, state)


@given(original_params(), st.one_of(st.integers(), st.binary(), st.floats(), st.just(["s"])))
def test_build_retry_params_rejects_non_str_state(original: dict[str, Any], bad: Any) -> None:
    with pytest.raises(m.LocalProtocolError):
        m.engine.build_retry_params(original, None, bad)


def test_pacing_sequence() -> None:
    assert [pace(n) for n in range(6)] == [0.05, 0.1, 0.2, 0.25, 0.25, 0.25]


@SETTINGS
@given(st.lists(st.integers(0, 7), min_size=1, max_size=4), st.lists(texts, min_size=30))
def test_state_only_legs_are_paced_and_the_pace_resets(
    blocks: list[int], states: list[str]
) -> None:
    """Runs of requestState-only legs wait 0.05, 0.1, 0.2, 0.25, 0.25, ... s; a round
    with input requests between two runs starts the next run at 0.05 s again."""
    expected = [0.05, 0.1, 0.2, 0.25, 0.25, 0.25, 0.25]
    engine = m.engine.RoundEngine(
        "tools/call", {"name": "t"}, capabilities=FULL_CAPS, max_state_only_legs=100
    )
    now = 0.0
    engine.start(now)
    pool = iter(states)
    for number, block in enumerate(blocks):
        assert isinstance(
            engine.next_event(), m.engine.SendRequest if number == 0 else m.engine.SendRetry
        )
        delays = []
        for _ in range(block):
            state = next(pool)
            now += 1.0
            engine.receive_result({"resultType": "input_required", "requestState": state}, now)
            assert isinstance(engine.next_event(), m.engine.RoundStarted)
            retry = engine.next_event()
            assert isinstance(retry, m.engine.SendRetry)
            assert retry.params == {"name": "t", "requestState": state}
            delays.append(retry.delay)
        assert delays == expected[:block]
        # A round with an input request resets the pace.
        now += 1.0
        engine.receive_result(
            {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}}, now
        )
        assert isinstance(engine.next_event(), m.engine.RoundStarted)
        assert isinstance(engine.next_event(), m.engine.DispatchInput)
        engine.provide("r", m.wire.ListRootsResult(roots=[]), now)
    assert isinstance(engine.next_event(), m.engine.SendRetry)
