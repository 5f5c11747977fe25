"""The peer's requests: how each is admitted as it arrives, and what goes out for it.

An arriving request is answered by the connection (``server/discover``,
``initialize``, ``ping``: an :class:`AutoReply`), handed to the app, or refused
(an :class:`InvalidMessage` whose reply a server sends).  What the app then
sends for it (its answer, progress, log messages) passes through here: a
server's results are checked and completed, and nothing goes out for a request
the peer cancelled.  Each request's state moves through the lifecycle table of
:mod:`._requests`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    LocalProtocolError,
    RemoteProtocolError,
    describe,
)
from .._meta import (
    META_PROTOCOL_VERSION,
    RequestInfo,
    has_modern_meta,
    is_log_level,
    is_retry_leg,
    log_level_allows,
    negotiate_legacy,
    progress_token_of,
    read_modern_request,
)
from ..wire._inputs import InputRegistry
from ..wire._model import (
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    ResultResponse,
    error_response,
)
from ._events import (
    AutoReply,
    ConnectionEvent,
    InvalidMessage,
    LogMessage,
    Progress,
    SessionOpened,
)
from ._handshake import Agreement
from ._requests import (
    INCOMING_LIFECYCLE,
    BoundedSet,
    Incoming,
    IncomingInput,
    IncomingKind,
    IncomingState,
)
from ._server_rules import (
    discover_result,
    finish_result,
    initialize_result,
    modern_only_initialize_refusal,
)
from ._session import Session, SessionInput, SessionState

T = TypeVar("T")

#: Methods a 2026-07-28 request may not use (the app owns ``logging/setLevel``).
REMOVED_IN_2026 = frozenset({"ping", "initialize"})


class PeerRequests:
    """The requests the peer sent us and we have not answered yet."""

    __slots__ = (
        "_agreement",
        "_capabilities",
        "_info",
        "_input_kinds",
        "_instructions",
        "_legacy_versions",
        "_modern_versions",
        "_owed_replies",
        "_server",
        "_session",
        "cache_scope",
        "cache_ttl_ms",
        "max_incoming",
        "requests",
    )

    def __init__(
        self,
        session: Session,
        agreement: Agreement,
        *,
        server: bool,
        modern_versions: Sequence[str],
        legacy_versions: Sequence[str],
        capabilities: Mapping[str, Any],
        info: Mapping[str, Any] | None,
        instructions: str | None,
        cache_ttl_ms: int,
        cache_scope: str,
        max_incoming: int,
        input_kinds: InputRegistry,
    ) -> None:
        self._session = session
        self._input_kinds = input_kinds
        self._agreement = agreement
        self._server = server
        self._modern_versions = modern_versions
        self._legacy_versions = legacy_versions
        self._capabilities = capabilities
        self._info = info
        self._instructions = instructions
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        self.max_incoming = max_incoming
        self.requests: dict[RequestId, Incoming] = {}
        # Ids of refused requests whose error reply was handed out: each may be sent once.
        self._owed_replies = BoundedSet(max_incoming)

    def _incoming(self, request_id: object) -> Incoming | None:
        # The app's id may be anything: only a string or an integer names a request
        # (and anything else, a list say, could not even be looked up).
        return self.requests.get(request_id) if isinstance(request_id, (str, int)) else None

    def info(self, request_id: RequestId) -> RequestInfo:
        incoming = self._incoming(request_id)
        if incoming is None or incoming.info is None:
            raise LocalProtocolError(f"no request {describe(request_id)} is waiting for an answer")
        return incoming.info

    # --- Arriving ------------------------------------------------------------------------

    def invalid(self, error: RemoteProtocolError, *, replyable: bool) -> InvalidMessage:
        """Report bad input; a server also gets the error response to send."""
        if not self._server or not replyable:
            return InvalidMessage(error=error, reply=None)
        rid = error.request_id
        if rid is not None and (rid in self.requests or rid in self._owed_replies):
            rid = None  # never answer under an id the peer is still waiting on
        if rid is not None:
            self._owed_replies.add(rid)  # IncomingState.REFUSED
        return InvalidMessage(error=error, reply=error_response(rid, error))

    def _refuse(
        self, request: Request, message: str, code: int, data: Any = None
    ) -> InvalidMessage:
        error = RemoteProtocolError(message, code=code, data=data, request_id=request.id)
        return self.invalid(error, replyable=True)

    def on_request(self, request: Request) -> ConnectionEvent:
        rid = request.id
        if rid in self.requests or rid in self._owed_replies:
            return InvalidMessage(
                error=RemoteProtocolError(
                    f"request id {describe(rid)} is already in use by a request we have not "
                    "answered",
                    code=INVALID_REQUEST,
                    request_id=rid,
                ),
                reply=None,
            )
        if len(self.requests) >= self.max_incoming:
            return self._refuse(
                request,
                f"more than max_incoming={self.max_incoming} requests in flight",
                INTERNAL_ERROR,
            )
        if not self._server:
            return self._on_server_request(request)
        method = request.method
        modern = self._modern_versions
        if method in REMOVED_IN_2026 and has_modern_meta(request.params) and modern:
            return self._refuse(request, f"{method} was removed in 2026-07-28", METHOD_NOT_FOUND)
        if method == "ping":
            return self._auto_reply(request, {})
        if method == "initialize":
            return self._on_initialize(request)
        params = request.params
        if not modern and method == "server/discover":
            # A 2025-only server looks like one: dual-era clients fall back on -32601.
            return self._refuse(request, "server/discover is a 2026-07-28 method", METHOD_NOT_FOUND)
        if has_modern_meta(params) and modern:
            assert params is not None
            try:
                info = read_modern_request(rid, method, params, modern)
            except RemoteProtocolError as exc:
                return self.invalid(exc, replyable=True)
            if method == "server/discover":
                self.requests[rid] = Incoming(IncomingKind.AUTO, method, info)
                found = discover_result(modern, self._capabilities, self._instructions)
                result = self._finish(info, found)
                return AutoReply(request=request, reply=ResultResponse(id=rid, result=result))
            self.requests[rid] = Incoming(IncomingKind.APP, method, info, info.progress_token)
            return request
        if not self._session.remote(SessionInput.RECV_LEGACY_REQUEST):
            return self._refuse(
                request,
                f"missing _meta {META_PROTOCOL_VERSION}: a 2026-07-28 request must carry "
                "protocolVersion and clientCapabilities in _meta, and a 2025-era client "
                "must complete initialize first",
                INVALID_PARAMS,
                {"supported": list(modern)} if modern else None,
            )
        agreement = self._agreement
        info = RequestInfo(
            id=rid,
            method=method,
            era="legacy",
            protocol_version=agreement.protocol_version or "",
            capabilities=agreement.peer_capabilities,
            client_info=agreement.peer_info,
            log_level=None,
            progress_token=progress_token_of(params),
            retry=is_retry_leg(params),
        )
        self.requests[rid] = Incoming(IncomingKind.APP, method, info, info.progress_token)
        return request

    def _auto_reply(self, request: Request, result: dict[str, Any]) -> AutoReply:
        self.requests[request.id] = Incoming(IncomingKind.AUTO, request.method)
        return AutoReply(request=request, reply=ResultResponse(id=request.id, result=result))

    def _on_initialize(self, request: Request) -> ConnectionEvent:
        params = request.params or {}
        if not self._legacy_versions:
            message, data = modern_only_initialize_refusal(self._modern_versions)
            return self._refuse(request, message, METHOD_NOT_FOUND, data)
        requested = params.get("protocolVersion")
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        if (
            not isinstance(requested, str)
            or not isinstance(capabilities, Mapping)
            or not isinstance(client_info, Mapping)
        ):
            return self._refuse(
                request,
                "initialize needs protocolVersion (string), capabilities and clientInfo (objects)",
                INVALID_PARAMS,
            )
        if not self._session.remote(SessionInput.RECV_INITIALIZE):
            return self._refuse(
                request,
                f"initialize is not accepted in session state {self._session.state.value}",
                INVALID_REQUEST,
            )
        version = negotiate_legacy(requested, self._legacy_versions)
        agreement = self._agreement
        agreement.era = "legacy"
        agreement.protocol_version = version
        agreement.peer_capabilities = capabilities
        agreement.peer_info = client_info
        result = initialize_result(version, self._capabilities, self._info, self._instructions)
        self.requests[request.id] = Incoming(IncomingKind.INITIALIZE, "initialize")
        return AutoReply(request=request, reply=ResultResponse(id=request.id, result=result))

    def _on_server_request(self, request: Request) -> ConnectionEvent:
        if not self._session.remote(SessionInput.RECV_SERVER_REQUEST):
            return InvalidMessage(
                error=RemoteProtocolError(
                    f"a server sent a {describe(request.method)} request "
                    "outside a 2025-era session",
                    code=INVALID_REQUEST,
                    request_id=request.id,
                ),
                reply=None,
            )
        if request.method == "ping":
            return self._auto_reply(request, {})
        token = progress_token_of(request.params)
        self.requests[request.id] = Incoming(IncomingKind.APP, request.method, None, token)
        return request

    def on_initialized(self) -> SessionOpened | InvalidMessage | None:
        """Server: a 2025-era client's ``notifications/initialized``."""
        before = self._session.state
        if not self._session.remote(SessionInput.RECV_INITIALIZED):
            return InvalidMessage(
                error=RemoteProtocolError(
                    "notifications/initialized before initialize was answered",
                    code=INVALID_REQUEST,
                )
            )
        if before is SessionState.READY:
            return None  # a duplicate
        agreement = self._agreement
        return SessionOpened(
            era="legacy",
            protocol_version=agreement.protocol_version or "",
            peer_info=agreement.peer_info,
            peer_capabilities=agreement.peer_capabilities,
        )

    def cancelled_by_peer(self, request_id: RequestId) -> bool:
        """The peer gave up on ``request_id``; whether that cancels a request the app holds."""
        incoming = self._incoming(request_id)
        if (
            incoming is None
            or incoming.kind is not IncomingKind.APP
            or not incoming.allows(IncomingInput.PEER_CANCELLED)
        ):
            return False
        incoming.move(IncomingInput.PEER_CANCELLED)
        return True

    # --- Going out -----------------------------------------------------------------------

    def answer(
        self, response: ResultResponse | ErrorResponse, emit: Callable[[Message], T]
    ) -> T | None:
        """``emit`` the answer the app sends (checked and completed), or ``None`` when
        nothing goes out (the peer cancelled the request)."""
        if isinstance(response, ResultResponse) and not isinstance(response.result, Mapping):
            raise LocalProtocolError(
                "a ResultResponse's result is a mapping (the method's result object; {} "
                f"for an empty one), not {describe(response.result)}"
            )
        rid = response.id
        if rid is None:
            return emit(response)
        given = (
            IncomingInput.SEND_RESULT
            if isinstance(response, ResultResponse)
            else IncomingInput.SEND_ERROR
        )
        incoming = self._incoming(rid)
        if incoming is None:
            refused_may_answer = (IncomingState.REFUSED, given) in INCOMING_LIFECYCLE
            owed = isinstance(rid, (str, int)) and self._owed_replies.discard(rid)
            if owed and refused_may_answer:
                return emit(response)
            raise LocalProtocolError(f"no request {describe(rid)} is waiting for an answer")
        if incoming.state is IncomingState.CANCELLED:
            incoming.move(given)
            del self.requests[rid]
            return None  # cancelled by the peer: nothing further goes out for this id
        info = incoming.info
        if isinstance(response, ResultResponse) and incoming.kind is IncomingKind.APP and info:
            response = ResultResponse(id=rid, result=self._finish(info, response.result))
        if incoming.kind is IncomingKind.INITIALIZE:
            self._session.local(
                SessionInput.SEND_INITIALIZE_RESULT
                if isinstance(response, ResultResponse)
                else SessionInput.SEND_INITIALIZE_ERROR
            )
        out = emit(response)
        incoming.move(given)
        del self.requests[rid]
        return out

    def end(self, request_id: Any) -> None:
        """We end a 2026 request without an answer (``notifications/cancelled`` from a
        server: the end of a ``subscriptions/listen`` stream)."""
        incoming = self.requests.get(request_id) if self._server else None
        if incoming is not None and incoming.info and incoming.info.era == "modern":
            # (Ids of 2025-era requests share the number space of our own requests.)
            incoming.move(IncomingInput.END)
            del self.requests[request_id]

    def _notice_target(self, request_id: RequestId) -> Incoming | None:
        incoming = self._incoming(request_id)
        if incoming is None or not incoming.allows(IncomingInput.SEND_NOTICE):
            return None
        incoming.move(IncomingInput.SEND_NOTICE)
        return incoming

    def progress(self, progress: Progress) -> Notification | None:
        incoming = self._notice_target(progress.request_id)
        if incoming is None or incoming.progress_token is None:
            return None
        params: dict[str, Any] = {
            "progressToken": incoming.progress_token,
            "progress": progress.progress,
        }
        if progress.total is not None:
            params["total"] = progress.total
        if progress.message is not None:
            params["message"] = progress.message
        return Notification(method="notifications/progress", params=params)

    def log(self, log: LogMessage) -> Notification | None:
        if not self._server:
            raise LocalProtocolError("only a server sends log messages")
        if not is_log_level(log.level):
            raise LocalProtocolError(f"unknown log level {log.level!r}")
        incoming = self._notice_target(log.request_id)
        if incoming is None or incoming.info is None:
            return None
        info = incoming.info
        if info.era == "modern" and not log_level_allows(info.log_level, log.level):
            return None
        params: dict[str, Any] = {"level": log.level, "data": log.data}
        if log.logger is not None:
            params["logger"] = log.logger
        return Notification(method="notifications/message", params=params)

    def _finish(self, info: RequestInfo, result: Mapping[str, Any]) -> dict[str, Any]:
        return finish_result(
            info,
            result,
            server_info=self._info,
            cache_ttl_ms=self.cache_ttl_ms,
            cache_scope=self.cache_scope,
            input_kinds=self._input_kinds,
        )
