"""A stdio MCP server whose every ``tools/call`` result nests DEPTH lists deep.

Usage: ``python tests/support/deep_result_server.py [DEPTH]`` (default 1000).
The result is ``{"content": [...], "structuredContent": {"deep": [[[...]]]}}``
with ``"bottom"`` at the end of DEPTH nested lists.  It is written by hand:
our own encoders refuse to nest that deep, which is the point (a peer may
send what we would never write, and ``mrtr call`` must print whatever its
decoder accepted).  Everything else (``server/discover``, bad input) is
answered by ``mrtr_core.Connection``; one blocking loop, no trio.
"""

from __future__ import annotations

import json
import os
import sys
import time

import mrtr_core as m


def deep_result_line(request_id: m.RequestId, depth: int) -> bytes:
    nested = "[" * depth + '"bottom"' + "]" * depth
    result = (
        '{"content":[{"type":"text","text":"deep"}],"structuredContent":{"deep":' + nested + "}}"
    )
    return f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{result}}}\n'.encode()


def main(argv: list[str]) -> None:
    depth = int(argv[0]) if argv else 1000
    conn = m.Connection(
        m.SERVER, info={"name": "deep", "version": "1.0"}, capabilities={"tools": {}}
    )
    stdout = sys.stdout.buffer
    while True:
        event = conn.next_event(time.monotonic())
        if event is m.NEED_DATA:
            conn.receive_data(os.read(0, 65536))
            continue
        if isinstance(event, m.ConnectionClosed):
            return
        data = b""
        if isinstance(event, m.AutoReply) or (
            isinstance(event, m.InvalidMessage) and event.reply is not None
        ):
            data = conn.send(event.reply)
        elif isinstance(event, m.Request) and event.method == "tools/call":
            data = deep_result_line(event.id, depth)  # (the connection never sees it go out)
        elif isinstance(event, m.Request):
            error = m.MrtrError(f"no {event.method} here", code=m.ErrorCode.METHOD_NOT_FOUND)
            data = conn.send(m.error_response(event.id, error))
        stdout.write(data)
        stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
