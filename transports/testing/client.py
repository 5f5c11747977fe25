"""``TestClient``: call an app in memory, with scripted answers, and look at every round.

The model: a test wants what a real client gets, without a socket or a
subprocess.  ``TestClient(app)`` is a real
:class:`~mrtr_transports.client.client.Client` (its connection, round engine,
caps and checks) over a :class:`~mrtr_transports.testing.memory.MemoryLink`
to the app served by the shared server driver, as ``mrtr serve --stdio``
serves it.  Both eras work: ``era="modern"`` (2026-07-28, the default: rounds
of ``input_required`` and retries) and ``era="legacy"`` (the 2025-11-25
handshake, where the server sends ``elicitation/create``,
``sampling/createMessage`` and ``roots/list`` requests of its own); ``"auto"``
probes as a real client does::

    async with TestClient(app) as client:
        result = await client.call_tool(
            "weather", {"days": 2}, answers={"city": accept(city="Oslo")}
        )
        assert client.last_call.rounds[0].input_requests["city"]["method"] == "elicitation/create"

Answers are scripted (:mod:`~mrtr_transports.testing.answers`): the client's
``answers=`` for every call, a call's ``answers=`` first for that call.

Every call is recorded as a :class:`CallRecord` (``client.calls``,
``client.last_call``): the rounds it took, each with the input requests the
server asked, the ``requestState`` it handed out, and the answers sent back,
then the result or the error.  The record is read from the client's trace of
the messages themselves, so it shows what crossed the wire.  In a 2025-era
session each request the server sent is a round of one input request under
its method, without a state.

``send_leg`` sends one leg by hand (``inputResponses`` and ``requestState`` as
given, no rounds followed): what the request-state attacks of
:mod:`~mrtr_transports.testing.attacks` are made of.

A handler that raises an exception other than ``MrtrError`` gives the client
-32603 "Internal error"; with ``raise_app_errors`` (the default) the call
raises the app's own exception instead (the ``CallError`` as its context), so
the test shows the traceback of the bug.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import mrtr_core as m

from ..client.client import Client
from ..client.errors import CallError
from ..client.inputs import INPUT_METHODS
from ..client.opening import open_client
from ..client.tracing import TraceRecord
from ..server.app import ServerApp
from .answers import Answer, AnswerScript
from .memory import MemoryLink

__all__ = ["CallRecord", "Round", "TestClient", "active_client"]

#: What every test client declares unless told otherwise: every kind of input.
ALL_CAPABILITIES: Mapping[str, Any] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {},
}

_MRTR_METHODS = m._meta.MRTR_METHODS
_SERVE_LOGGER = "mrtr.server"


@dataclass
class Round:
    """One round of a call: what the server asked, and what the client answered.

    ``input_requests`` maps each key to the request as on the wire
    (``{"method", "params"}``); ``request_state`` is the state the server handed
    out with it (``None``: none, and always in a 2025-era session);
    ``answers`` maps each key to the answer sent back (empty until answered).
    """

    number: int
    input_requests: dict[str, dict[str, Any]]
    request_state: str | None
    answers: dict[str, Any] = field(default_factory=dict)


@dataclass
class CallRecord:
    """One call (``tools/call``, ``prompts/get``, ``resources/read``) of a test client.

    ``params`` are the caller's (without ``_meta``); ``rounds`` in order;
    ``legs`` every leg's params as sent (with ``inputResponses`` and
    ``requestState``, without ``_meta``); ``result`` the complete result, or
    ``error`` what the call raised.
    """

    method: str
    params: dict[str, Any]
    rounds: list[Round] = field(default_factory=list)
    legs: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: BaseException | None = None

    @property
    def name(self) -> str | None:
        """The tool or prompt name, or the resource URI."""
        target = self.params.get("name", self.params.get("uri"))
        return target if isinstance(target, str) else None

    def describe(self) -> str:
        return f"{self.method} of {self.name!r}"


#: The test clients open now, innermost last (the side-effect detector asks which leg runs).
_open_clients: list[TestClient] = []


def active_client() -> TestClient | None:
    """The test client opened last and still open, if any."""
    return _open_clients[-1] if _open_clients else None


class TestClient:
    """An in-memory client of ``app`` (see the module docstring).

    ``era``: ``"modern"``, ``"legacy"`` or ``"auto"``.  ``answers``: the script
    for every call (a mapping or a callable; see
    :class:`~mrtr_transports.testing.answers.AnswerScript`).  ``capabilities``:
    what each request declares (default: elicitation form and URL, sampling,
    roots).  ``server_options`` go to the server driver (``drain_timeout``,
    ``legacy_answer_timeout``, connection bounds); ``client_options`` to the
    :class:`~mrtr_transports.client.client.Client` (``log_level``, ``info``,
    ``on_notification``, ...).
    """

    __test__ = False  # (pytest: a class named Test* that is not a test)

    def __init__(
        self,
        app: ServerApp,
        *,
        era: Literal["modern", "legacy", "auto"] = "modern",
        answers: Mapping[str, Answer] | Callable[..., Any] | AnswerScript | None = None,
        capabilities: Mapping[str, Any] | None = None,
        raise_app_errors: bool = True,
        server_options: Mapping[str, Any] | None = None,
        **client_options: Any,
    ) -> None:
        self.app = app
        self.era_asked = era
        self.answers = answers if isinstance(answers, AnswerScript) else AnswerScript(answers)
        self.capabilities = ALL_CAPABILITIES if capabilities is None else capabilities
        self.raise_app_errors = raise_app_errors
        self._server_options = dict(server_options or {})
        self._client_options = client_options
        #: Every call, in the order they started.
        self.calls: list[CallRecord] = []
        #: Exceptions the app raised (logged by the server with their traceback).
        self.app_errors: list[BaseException] = []
        #: Notifications the server sent (progress, log messages, list changes, ...).
        self.notifications: list[dict[str, Any]] = []
        self._call_scripts: list[AnswerScript] = []
        self._starting: list[CallRecord] = []
        self._by_flow: dict[int, CallRecord] = {}
        self._server_asks: dict[m.RequestId, Round] = {}
        self._legs_sent = 0
        self._stack: AsyncExitStack | None = None
        self._client: Client | None = None
        self._log_handler = _AppErrors(self.app_errors)

    # --- opening and closing ----------------------------------------------------------

    async def __aenter__(self) -> TestClient:
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            logging.getLogger(_SERVE_LOGGER).addHandler(self._log_handler)
            stack.callback(logging.getLogger(_SERVE_LOGGER).removeHandler, self._log_handler)
            link = MemoryLink(self.app, **self._server_options)
            self._client = await stack.enter_async_context(
                open_client(
                    link,
                    answer=self._answer,
                    capabilities=self.capabilities,
                    era=self.era_asked,
                    tracer=self._trace,
                    **self._client_options,
                )
            )
            _open_clients.append(self)
            stack.callback(_open_clients.remove, self)
        except BaseException as exc:
            await stack.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        stack, self._stack = self._stack, None
        if stack is None:
            return None
        return await stack.__aexit__(exc_type, exc, tb)

    @property
    def client(self) -> Client:
        """The underlying :class:`~mrtr_transports.client.client.Client` (while open)."""
        if self._client is None:
            raise RuntimeError("the test client is not open: use `async with TestClient(app)`")
        return self._client

    @property
    def era(self) -> str | None:
        """``"modern"`` or ``"legacy"``: what the session settled on."""
        return self.client.era

    # --- calls --------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        answers: Mapping[str, Answer] | Callable[..., Any] | None = None,
        **call_options: Any,
    ) -> dict[str, Any]:
        """Run a call to its end (rounds answered from the script); its complete result.

        ``answers`` are tried before the client's for this call.  Raises what
        :meth:`Client.call <mrtr_transports.client.client.Client.call>` raises
        (``CallError``, ``InputUnavailable``, ``RoundCapExceeded``, ...), or the
        app's own exception (see ``raise_app_errors``).
        """
        record = CallRecord(method, dict(params or {}))
        self.calls.append(record)
        self._starting.append(record)
        script = AnswerScript(answers) if answers is not None else None
        if script is not None:
            self._call_scripts.append(script)
        errors_before = len(self.app_errors)
        try:
            record.result = await self.client.call(method, params, **call_options)
        except Exception as exc:
            record.error = exc
            self._raise_app_error(exc, errors_before)
            raise
        finally:
            if record in self._starting:
                self._starting.remove(record)
            if script is not None:
                self._call_scripts.remove(script)
        return record.result

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answers: Mapping[str, Answer] | Callable[..., Any] | None = None,
        **call_options: Any,
    ) -> dict[str, Any]:
        """``tools/call`` of ``name``; see :meth:`call`."""
        params = {"name": name, "arguments": dict(arguments or {})}
        return await self.call("tools/call", params, answers=answers, **call_options)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        answers: Mapping[str, Answer] | Callable[..., Any] | None = None,
        **call_options: Any,
    ) -> dict[str, Any]:
        """``prompts/get`` of ``name``; see :meth:`call`."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return await self.call("prompts/get", params, answers=answers, **call_options)

    async def read_resource(
        self,
        uri: str,
        *,
        answers: Mapping[str, Answer] | Callable[..., Any] | None = None,
        **call_options: Any,
    ) -> dict[str, Any]:
        """``resources/read`` of ``uri``; see :meth:`call`."""
        return await self.call("resources/read", {"uri": uri}, answers=answers, **call_options)

    @property
    def last_call(self) -> CallRecord:
        """The call started last."""
        if not self.calls:
            raise LookupError("no call was made yet")
        return self.calls[-1]

    # --- plain requests ---------------------------------------------------------------

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One plain request (no rounds followed): its result, or ``CallError``."""
        return await self.client.request(method, params, cache="bypass")

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool (all pages)."""
        return await self.client.list_tools(cache="bypass")

    async def list_prompts(self) -> list[dict[str, Any]]:
        """Every prompt (all pages)."""
        return await self._list_all("prompts/list", "prompts")

    async def list_resources(self) -> list[dict[str, Any]]:
        """Every resource (all pages)."""
        return await self._list_all("resources/list", "resources")

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        """Every resource template (all pages)."""
        return await self._list_all("resources/templates/list", "resourceTemplates")

    async def _list_all(self, method: str, field_name: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(1000):  # (a bound: a server whose cursors never end)
            result = await self.request(method, {"cursor": cursor} if cursor else None)
            items.extend(result.get(field_name) or [])
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        return items

    async def send_leg(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
    ) -> dict[str, Any]:
        """One leg of ``method`` as given, its result as it came (``input_required``
        included): no answers looked up, no retry.  A JSON-RPC error raises
        ``CallError``.  2026-07-28 only: a 2025-era session has no legs to send."""
        if self.era != "modern":
            raise RuntimeError("send_leg needs a 2026-07-28 session (era='modern')")
        leg = dict(params)
        if input_responses is not None:
            leg["inputResponses"] = dict(input_responses)
        if request_state is not None:
            leg["requestState"] = request_state
        return await self.request(method, leg)

    # --- where a leg runs (for the side-effect detector) ------------------------------

    def current_leg(self) -> tuple[CallRecord | None, int]:
        """The call whose leg was sent last and that leg's number (1-based; 0: none)."""
        if not self.calls:
            return None, 0
        for record in reversed(self.calls):
            if record.legs:
                return record, len(record.legs)
        return None, 0

    # --- answers ------------------------------------------------------------------------

    async def _answer(
        self, key: str, request: m.wire.InputRequest
    ) -> m.wire.InputResponse | Mapping[str, Any]:
        for script in reversed(self._call_scripts):
            if script.find(key, request) is not None:
                return await script(key, request)
        return await self.answers(key, request)

    def _raise_app_error(self, exc: Exception, errors_before: int) -> None:
        if not (self.raise_app_errors and isinstance(exc, CallError)):
            return
        if exc.code != m.ErrorCode.INTERNAL_ERROR or len(self.app_errors) <= errors_before:
            return
        raise self.app_errors[-1] from exc

    # --- the record, from the trace -----------------------------------------------------

    def _trace(self, record: TraceRecord) -> None:
        msg = record.msg
        if record.dir == "send":
            self._sent(record, msg)
        elif "method" in msg and "id" in msg:
            self._server_asked(msg)
        elif "method" in msg:
            self.notifications.append(msg)
        elif record.flow is not None:
            self._leg_answered(record, msg)

    def _sent(self, record: TraceRecord, msg: dict[str, Any]) -> None:
        if msg.get("method") in _MRTR_METHODS and record.flow is not None:
            params = {k: v for k, v in (msg.get("params") or {}).items() if k != "_meta"}
            call = self._by_flow.get(record.flow)
            if call is None:
                call = self._claim(msg["method"], params)
                if call is None:
                    return
                self._by_flow[record.flow] = call
            call.legs.append(params)
            answers = params.get("inputResponses")
            if record.round and isinstance(answers, dict) and record.round <= len(call.rounds):
                call.rounds[record.round - 1].answers = dict(answers)
        elif "id" in msg and "method" not in msg:  # our answer to a 2025-era server's request
            asked = self._server_asks.pop(msg["id"], None)
            if asked is not None:
                (key,) = asked.input_requests
                asked.answers = {key: msg.get("result", msg.get("error"))}

    def _claim(self, method: str, params: dict[str, Any]) -> CallRecord | None:
        """The call whose first leg this is: the earliest started one with these params."""
        for call in self._starting:
            wanted = {k: v for k, v in call.params.items() if k != "_meta"}
            if call.method == method and all(params.get(k) == v for k, v in wanted.items()):
                self._starting.remove(call)
                return call
        return None

    def _server_asked(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method not in INPUT_METHODS:
            return
        live = [call for call in self.calls if call.result is None and call.error is None]
        if len(live) != 1:
            return  # (several calls at once: which one asked is not known)
        call = live[0]
        asked = Round(
            len(call.rounds) + 1, {method: {"method": method, "params": msg.get("params")}}, None
        )
        call.rounds.append(asked)
        self._server_asks[msg["id"]] = asked

    def _leg_answered(self, record: TraceRecord, msg: dict[str, Any]) -> None:
        call = self._by_flow.get(record.flow) if record.flow is not None else None
        result = msg.get("result")
        if call is None or not isinstance(result, dict):
            return
        if result.get("resultType") == "input_required":
            requests = result.get("inputRequests")
            state = result.get("requestState")
            call.rounds.append(
                Round(
                    len(call.rounds) + 1,
                    dict(requests) if isinstance(requests, dict) else {},
                    state if isinstance(state, str) else None,
                )
            )


class _AppErrors(logging.Handler):
    """Keeps the exceptions the server logs with their traceback (an app's bugs)."""

    def __init__(self, errors: list[BaseException]) -> None:
        super().__init__(level=logging.ERROR)
        self._errors = errors

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self._errors.append(record.exc_info[1])
