"""Shared helpers for connection tests: drain events, feed bytes three ways, pair two ends."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mrtr_core import (
    CLIENT,
    NEED_DATA,
    SERVER,
    AutoReply,
    ConnectionClosed,
    HandshakeStep,
    InvalidMessage,
)
from mrtr_core import Connection as Connection

#: The three ways every reader test feeds its bytes.
FEED_MODES = ("whole", "bytewise", "trailing")
#: An incomplete next message for the "trailing" mode; it must stay buffered.
TRAILING = b'{"jsonrpc":"2.0","method":"notifications/x"'

CLIENT_INFO = {"name": "test-client", "version": "1.0"}
SERVER_INFO = {"name": "test-server", "version": "1.0"}
ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


def drain(conn: Connection, now: float = 0.0, limit: int = 10_000) -> list[Any]:
    """Every event up to NEED_DATA (or the first ConnectionClosed, included)."""
    out: list[Any] = []
    for _ in range(limit):
        event = conn.next_event(now)
        if event is NEED_DATA:
            return out
        out.append(event)
        if isinstance(event, ConnectionClosed):
            return out
    raise AssertionError(f"more than {limit} events: a loop?")


def feed(conn: Connection, data: bytes, mode: str, now: float = 0.0) -> list[Any]:
    """Feed ``data`` in ``mode`` and return every event it produced, in order."""
    if mode == "whole":
        conn.receive_data(data)
        return drain(conn, now)
    if mode == "bytewise":
        out: list[Any] = []
        for i in range(len(data)):
            conn.receive_data(data[i : i + 1])
            out.extend(drain(conn, now))
        return out
    assert mode == "trailing"
    conn.receive_data(data + TRAILING)
    out = drain(conn, now)
    conn.receive_data(b"}\n")
    tail = drain(conn, now)
    assert len(tail) == 1 and getattr(tail[0], "method", None) == "notifications/x", tail
    return out


def send_all(conn: Connection, events: Iterable[Any]) -> bytes:
    return b"".join(conn.send(e) for e in events)


def replies(events: Iterable[Any]) -> list[Any]:
    """The messages a server must send for AutoReply / InvalidMessage events."""
    out: list[Any] = []
    for event in events:
        reply = event.reply if isinstance(event, (AutoReply, InvalidMessage)) else None
        if reply is not None:
            out.append(reply)
    return out


def handshake(client: Connection, server: Connection) -> tuple[list[Any], list[Any]]:
    """Run the client's handshake steps against the server until both are quiet.

    Returns (client events, server events) other than the steps and auto replies.
    """
    client_seen: list[Any] = []
    server_seen: list[Any] = []
    for _ in range(10):
        moved = False
        for event in drain(client):
            if isinstance(event, HandshakeStep):
                server.receive_data(client.send(event.message))
                moved = True
            else:
                client_seen.append(event)
        for event in drain(server):
            if isinstance(event, AutoReply):
                client.receive_data(server.send(event.reply))
                moved = True
            else:
                server_seen.append(event)
        if not moved:
            return client_seen, server_seen
    raise AssertionError("handshake did not settle")


def modern_pair(**server_options: Any) -> tuple[Connection, Connection]:
    """A client (era="modern") and a server, newline framing."""
    client = Connection(CLIENT, era="modern", info=CLIENT_INFO, capabilities=ALL_CAPS)
    server = Connection(SERVER, info=SERVER_INFO, capabilities={"tools": {}}, **server_options)
    return client, server
