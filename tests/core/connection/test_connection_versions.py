"""Version negotiation on 2026-07-28: -32022 and the client's one retry.

Only one per-request protocol version exists today, so a client that needs to
retry can only be built by pretending a newer one exists.  The tests patch the
connection's list of per-request versions to ("2099-01-01", "2026-07-28"): a
client that prefers the made-up version meets a real 2026-07-28 server.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.pairing import ALL_CAPS, CLIENT_INFO, SERVER_INFO, drain, handshake

# a connection splits the versions it is given with the versions its options module knows
import mrtr_core._connection._options as options_module
from mrtr_core import (
    CLIENT,
    SERVER,
    CallEvent,
    Connection,
    HandshakeStep,
    InvalidMessage,
    PeerError,
    Request,
    ResultResponse,
    SessionFailed,
    SessionOpened,
)
from mrtr_core.engine import Done, Failed, SendRequest

pytestmark = pytest.mark.usefixtures("wire_variant")

FUTURE = "2099-01-01"


@pytest.fixture
def future_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options_module, "MODERN_VERSIONS", (FUTURE, "2026-07-28"))


def _client(era: Any, versions: tuple[str, ...] = (FUTURE, "2026-07-28")) -> Connection:
    return Connection(CLIENT, era=era, info=CLIENT_INFO, capabilities=ALL_CAPS, versions=versions)


def _server() -> Connection:
    return Connection(SERVER, info=SERVER_INFO, versions=("2026-07-28",))


def version_error(request_id: Any, supported: list[str], requested: str) -> bytes:
    """A -32022 answer to ``request_id``, as a peer writes it."""
    data = {"supported": supported, "requested": requested}
    error = {"code": -32022, "message": "unsupported protocol version", "data": data}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n"


def _meta_version(request: Request) -> Any:
    assert request.params is not None
    return request.params["_meta"]["io.modelcontextprotocol/protocolVersion"]


@pytest.mark.usefixtures("future_version")
def test_discover_retries_once_with_a_version_the_server_named() -> None:
    client, server = _client("auto"), _server()
    (step,) = drain(client)
    assert isinstance(step, HandshakeStep) and _meta_version(step.message) == FUTURE
    server.receive_data(client.send(step.message))
    (refusal,) = drain(server)
    assert isinstance(refusal, InvalidMessage)
    assert refusal.error.code == -32022
    assert refusal.error.data == {"supported": ["2026-07-28"], "requested": FUTURE}
    client.receive_data(server.send(refusal.reply))
    (again,) = drain(client)
    assert isinstance(again, HandshakeStep)
    assert again.message.method == "server/discover"
    assert _meta_version(again.message) == "2026-07-28"
    assert again.message.id != step.message.id
    server.receive_data(client.send(again.message))
    client_seen, _ = handshake(client, server)
    assert client_seen == [
        SessionOpened(
            era="modern",
            protocol_version="2026-07-28",
            peer_info=SERVER_INFO,
            peer_capabilities={},
        )
    ]
    assert client.protocol_version == "2026-07-28"


@pytest.mark.usefixtures("future_version")
def test_a_second_version_error_on_discover_fails_the_session_without_fallback() -> None:
    client = _client("auto")
    (step,) = drain(client)
    client.send(step.message)
    client.receive_data(version_error(step.message.id, ["2026-07-28"], "x"))
    (again,) = drain(client)
    client.send(again.message)
    client.receive_data(version_error(again.message.id, ["2099-01-01"], "2026-07-28"))
    (failed,) = drain(client)
    assert isinstance(failed, SessionFailed)
    assert isinstance(failed.error, PeerError) and failed.error.code == -32022


@pytest.mark.usefixtures("future_version")
def test_a_leg_answered_with_32022_is_sent_again_once_with_the_named_version() -> None:
    client, server = _client("modern"), _server()
    call = client.call("tools/call", {"name": "weather", "arguments": {}})
    (send,) = drain(client)
    assert isinstance(send, CallEvent) and isinstance(send.event, SendRequest)
    server.receive_data(client.send(send))
    (refusal,) = drain(server)
    assert isinstance(refusal, InvalidMessage) and refusal.error.code == -32022
    client.receive_data(server.send(refusal.reply))
    (resend,) = drain(client)
    assert resend == send  # the same leg, again
    server.receive_data(client.send(resend))
    (request,) = drain(server)
    assert isinstance(request, Request) and _meta_version(request) == "2026-07-28"
    client.receive_data(server.send(ResultResponse(id=request.id, result={"content": []})))
    (done,) = drain(client)
    assert done == CallEvent(
        call=call,
        event=Done(
            result={
                "content": [],
                "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
            }
        ),
    )


@pytest.mark.usefixtures("future_version")
def test_a_leg_is_resent_at_most_once_for_version_errors() -> None:
    client = _client("modern")
    call = client.call("tools/call", {"name": "t"})
    (send,) = drain(client)
    client.send(send)
    leg = client.outstanding[0]
    client.receive_data(version_error(leg, ["2026-07-28"], "2099-01-01"))
    (resend,) = drain(client)
    client.send(resend)
    leg = client.outstanding[0]
    client.receive_data(version_error(leg, ["2099-01-01"], "2026-07-28"))
    (failed,) = drain(client)
    assert isinstance(failed, CallEvent) and failed.call == call
    assert isinstance(failed.event, Failed)
    assert isinstance(failed.event.error, PeerError) and failed.event.error.code == -32022


def test_a_version_error_naming_our_current_version_is_retried_once_then_fails() -> None:
    # A server may refuse for another reason first and name the very version we sent
    # (the conformance suite's request-metadata scenario does): retry once, never loop.
    client = Connection(CLIENT, era="modern")
    client.call("tools/call", {"name": "t"})
    (send,) = drain(client)
    client.send(send)
    first = client.outstanding[0]
    client.receive_data(version_error(first, ["2026-07-28"], "2026-07-28"))
    (resend,) = drain(client)
    assert isinstance(resend.event, SendRequest) and resend.event.params == {"name": "t"}
    client.send(resend)
    second = client.outstanding[0]
    assert second != first and client.protocol_version == "2026-07-28"
    client.receive_data(version_error(second, ["2026-07-28"], "2026-07-28"))
    (failed,) = drain(client)
    assert isinstance(failed.event, Failed) and failed.event.error.code == -32022
