"""The client's side of the era question: the ``server/discover`` probe and the 2025 handshake.

``era="auto"`` probes ``server/discover``; a -32022 naming another version we
speak sends the probe once more; an error that is not a recognised 2026 error
(or the probe timing out) falls back to ``initialize``; the ``initialize``
result is followed by ``notifications/initialized``.  ``era="modern"`` opens at
once and ``era="legacy"`` starts with ``initialize``.

Every state change goes through the client table of :mod:`._session`; what an
answer means is read by the pure functions of :mod:`._handshake`.  The steps
come out as events for the app to send; failing the live calls when the
session fails is the connection's part.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import LocalProtocolError, MrtrError, PeerError, RemoteProtocolError
from .._meta import MODERN_ERROR_CODES
from ..wire._model import ErrorResponse, Notification, Request, RequestId, ResultResponse
from ._events import HandshakeStep, SessionFailed, SessionOpened
from ._handshake import (
    FALL_BACK,
    Agreement,
    Settled,
    initialize_params,
    read_discover_result,
    read_initialize_result,
    version_to_retry,
)
from ._requests import OutgoingKind, OutgoingTable
from ._session import Session, SessionInput, SessionState

#: ``stamp(params)``: params with the 2026-07-28 ``_meta`` for the version being probed.
ProbeStamp = Callable[[Mapping[str, Any] | None], dict[str, Any]]

HandshakeOutcome = HandshakeStep | SessionOpened | SessionFailed


def _opened(settled: Settled) -> SessionOpened:
    return SessionOpened(
        era=settled.era,
        protocol_version=settled.protocol_version,
        peer_info=settled.peer_info,
        peer_capabilities=settled.peer_capabilities,
        instructions=settled.instructions,
    )


class ClientHandshake:
    """One client's era probe and handshake."""

    __slots__ = (
        "_agreement",
        "_capabilities",
        "_discover_retried",
        "_info",
        "_legacy_versions",
        "_modern_versions",
        "_outgoing",
        "_session",
        "_settled",
        "_stamp",
        "_steps",
    )

    def __init__(
        self,
        session: Session,
        outgoing: OutgoingTable,
        agreement: Agreement,
        *,
        modern_versions: Sequence[str],
        legacy_versions: Sequence[str],
        capabilities: Mapping[str, Any],
        info: Mapping[str, Any] | None,
        stamp: ProbeStamp,
    ) -> None:
        self._session = session
        self._outgoing = outgoing
        self._agreement = agreement
        self._modern_versions = modern_versions
        self._legacy_versions = legacy_versions
        self._capabilities = capabilities
        self._info = info
        self._stamp = stamp
        # Steps handed out (sent or not) and not yet answered, by request id.
        self._steps: dict[RequestId, OutgoingKind] = {}
        self._discover_retried = False
        self._settled: Settled | None = None  # a 2025 session's, until initialized is sent

    def start(self, era: str) -> HandshakeStep | None:
        """The first step for ``era`` (``None`` for ``"modern"``, which is open at once)."""
        if era == "modern":
            if not self._modern_versions:
                raise LocalProtocolError("era='modern' needs a 2026-07-28 version in versions")
            self._session.remote(SessionInput.START_MODERN)
            self._agreement.era = "modern"
            self._agreement.protocol_version = self._modern_versions[0]
            return None
        if era == "auto" and self._modern_versions:
            return self._discover_step()
        if not self._legacy_versions:
            raise LocalProtocolError("era='legacy' needs a 2025-era version in versions")
        return self._initialize_step()

    # --- Sending the steps ---------------------------------------------------------------

    def sending(self, request: Request) -> bool:
        """Record ``request`` as sent if it is one of our steps; whether it was."""
        kind = self._steps.get(request.id)
        if kind is None:
            return False
        self._session.local(
            SessionInput.SEND_DISCOVER
            if kind is OutgoingKind.DISCOVER
            else SessionInput.SEND_INITIALIZE
        )
        self._outgoing.add(request.id, kind, request.method)
        return True

    def initialized_sent(self) -> SessionOpened:
        """``notifications/initialized`` goes out: the 2025 session is open."""
        self._session.local(SessionInput.SEND_INITIALIZED)
        assert self._settled is not None  # the table only allows this after the result
        return _opened(self._settled)

    def _discover_step(self) -> HandshakeStep:
        rid = self._outgoing.new_id()
        self._steps[rid] = OutgoingKind.DISCOVER
        if self._agreement.protocol_version is None:
            self._agreement.protocol_version = self._modern_versions[0]
        request = Request(id=rid, method="server/discover", params=self._stamp(None))
        return HandshakeStep(message=request)

    def _initialize_step(self) -> HandshakeStep:
        rid = self._outgoing.new_id()
        self._steps[rid] = OutgoingKind.INITIALIZE
        params = initialize_params(self._legacy_versions[0], self._capabilities, self._info)
        return HandshakeStep(message=Request(id=rid, method="initialize", params=params))

    # --- Reading the answers ---------------------------------------------------------------

    def on_answer(
        self, kind: OutgoingKind, response: ResultResponse | ErrorResponse
    ) -> HandshakeOutcome:
        assert response.id is not None
        self._steps.pop(response.id, None)
        if kind is OutgoingKind.DISCOVER:
            return self._on_discover_answer(response)
        return self._on_initialize_answer(response)

    def _on_discover_answer(self, response: ResultResponse | ErrorResponse) -> HandshakeOutcome:
        if isinstance(response, ErrorResponse):
            error = response.error
            if error.code not in MODERN_ERROR_CODES:
                return self._fall_back()
            version = version_to_retry(error, self._modern_versions)
            if version is not None and not self._discover_retried:
                self._discover_retried = True
                self._session.remote(SessionInput.RECV_VERSION_ERROR)
                self._agreement.protocol_version = version
                return self._discover_step()
            self._session.remote(SessionInput.RECV_MODERN_ERROR)
            return _failed(PeerError(error.code, error.message, error.data))
        outcome = read_discover_result(
            response.result, self._modern_versions, self._legacy_versions
        )
        if outcome == FALL_BACK:
            return self._fall_back()
        if isinstance(outcome, MrtrError):
            self._session.remote(SessionInput.RECV_MODERN_ERROR)
            return _failed(outcome)
        assert isinstance(outcome, Settled)
        self._session.remote(SessionInput.RECV_DISCOVER_RESULT)
        self._agreement.settle(outcome)
        return _opened(outcome)

    def _on_initialize_answer(self, response: ResultResponse | ErrorResponse) -> HandshakeOutcome:
        if isinstance(response, ErrorResponse):
            error = response.error
            self._session.remote(SessionInput.RECV_INITIALIZE_ERROR)
            return _failed(PeerError(error.code, error.message, error.data))
        outcome = read_initialize_result(response.result, self._legacy_versions)
        if isinstance(outcome, MrtrError):
            self._session.remote(SessionInput.RECV_INITIALIZE_ERROR)
            return _failed(outcome)
        self._session.remote(SessionInput.RECV_INITIALIZE_RESULT)
        self._settled = outcome
        self._agreement.settle(outcome)
        return HandshakeStep(message=Notification(method="notifications/initialized"))

    def _fall_back(self) -> HandshakeStep | SessionFailed:
        if not self._legacy_versions:
            self._session.remote(SessionInput.RECV_LEGACY_SIGNAL_NO_FALLBACK)
            return _failed(
                RemoteProtocolError("the server does not speak 2026-07-28 and legacy is disabled")
            )
        self._session.remote(SessionInput.RECV_LEGACY_SIGNAL)
        return self._initialize_step()

    def timed_out(self) -> HandshakeStep | SessionFailed | None:
        """The app's timer for a request step fired (``None``: no step in flight)."""
        state = self._session.state
        if state not in (SessionState.DISCOVERING, SessionState.INITIALIZING):
            return None
        for rid in self._steps:  # a late answer to the step is dropped
            self._outgoing.abandon(rid)
        self._steps.clear()
        if state is SessionState.DISCOVERING:
            return self._fall_back()
        self._session.remote(SessionInput.RECV_LEGACY_SIGNAL)
        return _failed(RemoteProtocolError("initialize timed out"))


def _failed(error: MrtrError) -> SessionFailed:
    return SessionFailed(error=error)
