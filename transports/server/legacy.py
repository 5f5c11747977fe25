"""One 2025-era request run through the legacy shim, on a transport that keeps a connection.

A 2025-era client cannot take an ``input_required`` result, so each round the
app returns becomes real server-to-client requests (``mrtr_core.server.LegacyShim``).
Every transport that keeps one connection per client does the same thing with
it: send the shim's questions through the connection, remember which request
each belongs to (so the client's answers can be routed back), run the app's
legs, wait for the answers, and when the request ends without a response
(cancelled, a question the connection refused, no answer in time) withdraw the
open questions and say why.  :func:`run_legacy` is that, once; the stdio/TCP
driver (``driver.py``) and the HTTP sessions (``http/session.py``) differ only
in how bytes are written and how long an answer may take, which they pass in.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

import anyio

import mrtr_core as m
from mrtr_core import AppResultRefused

from .app import Outlet, ServerApp, run_app

__all__ = ["DEFAULT_LEGACY_ANSWER_TIMEOUT", "LegacyFlow", "run_legacy"]

log = logging.getLogger("mrtr.server.legacy")

Response = m.ResultResponse | m.ErrorResponse

#: Seconds a 2025-era request waits for the client to answer one of our questions, on
#: every transport (a person may be answering an elicitation: minutes, not seconds;
#: never for ever).
DEFAULT_LEGACY_ANSWER_TIMEOUT = 300.0


class LegacyFlow:
    """The answers the client sends to one legacy request's questions, as they come."""

    def __init__(self) -> None:
        # Bounded by the questions of one round (the shim's waiting_for).
        self.inbox: deque[Response] = deque()
        self.arrived = anyio.Event()

    def deliver(self, response: Response) -> None:
        self.inbox.append(response)
        self.arrived.set()

    async def next_answer(self) -> Response:
        while not self.inbox:
            self.arrived = anyio.Event()
            await self.arrived.wait()
        return self.inbox.popleft()


async def run_legacy(
    app: ServerApp,
    conn: m.Connection,
    request: m.Request,
    info: m.server.RequestInfo,
    outlet: Outlet,
    scope: AbstractContextManager[Any],
    *,
    questions: dict[m.RequestId, LegacyFlow],
    write: Callable[[bytes], Awaitable[None]],
    next_answer: Callable[[LegacyFlow], Awaitable[Response | None]],
    unanswered: Callable[[], str],
) -> Response:
    """Run ``request`` through the shim in ``scope``; the response to send for it.

    ``questions`` maps each question we send (our request id) to its flow, for
    the transport to route the client's answers (``LegacyFlow.deliver``);
    ``next_answer`` waits for the next one (``None``: none will come);
    ``unanswered()`` says why, for the error the request then gets.  When the
    scope was cancelled the connection sends nothing for the response anyway.
    """
    shim = m.server.LegacyShim(
        None, request, info, new_id=conn.new_request_id, sealer=None, principal=None
    )
    flow = LegacyFlow()

    async def ask(message: m.Request | m.Notification) -> None:
        data = conn.send(message)  # may refuse: AppResultRefused, LocalProtocolError
        if isinstance(message, m.Request):
            questions[message.id] = flow
        await write(data)

    response: Response | None = None
    refusal: m.ErrorResponse | None = None
    with scope:
        shim.start(anyio.current_time())
        try:
            while True:
                event = shim.next_event()
                if event is m.Wait.NEED_INPUT:  # every question is out: wait for the answers
                    answer = await next_answer(flow)
                    if answer is None:
                        break
                    shim.receive(answer, anyio.current_time())
                elif isinstance(event, m.server.ShimRun):
                    shim.leg_done(await run_app(app, event.request, info, outlet))
                elif isinstance(event, m.server.ShimSend):
                    await ask(event.message)
                elif isinstance(event, m.server.ShimWait):
                    await anyio.sleep(event.delay)
                    shim.resume(anyio.current_time())
                else:
                    # (Each ShimRun runs at once, so NEED_RESULT never shows.)
                    assert isinstance(event, m.server.ShimDone), event
                    response = event.response
                    break
        except (AppResultRefused, m.LocalProtocolError) as exc:  # a question not sent
            log.warning("cannot ask the client: %s", exc.message)
            refused = m.ErrorObject(
                code=m.ErrorCode.INTERNAL_ERROR, message=exc.message, data=exc.data
            )
            refusal = m.ErrorResponse(id=request.id, error=refused)
    if response is not None:
        return response
    shim.cancel()  # cancelled, refused, or the client never answered
    while not isinstance(event := shim.next_event(), m.Wait):
        if isinstance(event, m.server.ShimSend):  # withdraw our open questions
            await write(conn.send(event.message))
    for rid in [rid for rid, waiting in questions.items() if waiting is flow]:
        del questions[rid]
    if refusal is None:
        error = m.MrtrError(f"the client {unanswered()}: the server's questions went unanswered")
        refusal = m.error_response(request.id, error)
    return refusal  # (nothing goes out when the client cancelled)
