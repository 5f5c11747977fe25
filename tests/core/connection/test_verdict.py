"""The era verdict a client remembers (mrtr_core.Verdict)."""

from __future__ import annotations

import pytest
from support.pairing import ALL_CAPS, CLIENT_INFO, SERVER_INFO, drain, handshake

import mrtr_core as m
from mrtr_core import Verdict


def test_a_verdict_round_trips_and_checks_every_field() -> None:
    verdict = Verdict(era="legacy", protocol_version="2025-06-18", probe_kills=True)
    assert Verdict.from_json(verdict.to_json()) == verdict
    assert Verdict(era="modern", protocol_version="2026-07-28").to_json() == {
        "era": "modern",
        "protocolVersion": "2026-07-28",
    }
    for bad in (
        None,
        {"era": "modern"},
        {"era": 1, "protocolVersion": "2026-07-28"},
        {"era": "future", "protocolVersion": "2026-07-28"},
        {"era": "modern", "protocolVersion": "2025-11-25"},
        {"era": "legacy", "protocolVersion": "2026-07-28"},
        {"era": "legacy", "protocolVersion": "2025-11-25", "probeKills": 1},
    ):
        with pytest.raises(m.LocalProtocolError):
            Verdict.from_json(bad)


def test_a_modern_only_server_names_its_versions_to_initialize() -> None:
    # The spec: a server that supports only modern versions SHOULD name them in any
    # error it returns to initialize (a 2025 client has no way forward).
    server = m.Connection(
        m.SERVER, info=SERVER_INFO, capabilities=ALL_CAPS, versions=("2026-07-28",)
    )
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}}
    server.receive_data(
        m.wire._codec.default_codec.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        )
        + b"\n"
    )
    event = server.next_event()
    assert isinstance(event, m.InvalidMessage) and event.reply is not None
    error = event.reply.error
    assert error.code == m.ErrorCode.METHOD_NOT_FOUND
    assert "2026-07-28" in error.message and "initialize" in error.message
    assert error.data == {"supported": ["2026-07-28"]}


def test_a_2025_session_cancels_with_a_notification_even_over_streams() -> None:
    # 2025 Streamable HTTP: closing a stream is not a cancellation there, so a client
    # built for HTTP (cancellation="close_stream") still says notifications/cancelled
    # once its session is a 2025 one.
    client = m.Connection(
        m.CLIENT, era="legacy", cancellation="close_stream", info=CLIENT_INFO, capabilities=ALL_CAPS
    )
    server = m.Connection(m.SERVER, info=SERVER_INFO, capabilities={"tools": {}})
    handshake(client, server)
    call = client.call("tools/call", {"name": "slow", "arguments": {}})
    (leg,) = drain(client)
    request = m.wire._codec.default_codec.loads(client.send(leg))
    client.cancel(call)
    cancel_leg = next(e for e in drain(client) if isinstance(e.event, m.engine.CancelLeg))
    assert m.wire._codec.default_codec.loads(client.send(cancel_leg)) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request["id"]},
    }
