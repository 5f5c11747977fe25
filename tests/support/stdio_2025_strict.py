"""A 2025-only stdio MCP server that exits when it sees a method it does not know.

Some 2025-era servers do exactly that with ``server/discover``; the client's
probe must survive it.  Standard library only.  It speaks ``initialize`` (2025
versions only), ``notifications/initialized``, ``ping``, ``tools/list`` and
``tools/call`` of ``greet`` (-32600 before ``initialize``, as 2025 servers do),
which asks the client its name with a real ``elicitation/create`` request
before answering.  Every message it reads is
appended (one JSON line) to the file named by ``MRTR_WIRE_LOG``, if set, so a
test can see what was on the wire, across restarts.
"""

from __future__ import annotations

import json
import os
import sys

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
WIRE_LOG = os.environ.get("MRTR_WIRE_LOG")
TOOL = {"name": "greet", "inputSchema": {"type": "object", "properties": {}}}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def read() -> dict:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    message = json.loads(line)
    if WIRE_LOG:
        with open(WIRE_LOG, "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "method": message.get("method")}) + "\n")
    return message


def ask_name(request_id: object) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    ask = {"message": "Who are you?", "requestedSchema": schema}
    send({"jsonrpc": "2.0", "id": "ask-1", "method": "elicitation/create", "params": ask})
    while True:
        reply = read()
        if reply.get("id") == "ask-1" and "method" not in reply:
            break
    content = (reply.get("result") or {}).get("content") or {}
    text = f"hello {content.get('name', 'nobody')}"
    result = {"content": [{"type": "text", "text": text}]}
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def main() -> None:
    initialized = False
    while True:
        message = read()
        method, request_id = message.get("method"), message.get("id")
        if method in ("tools/list", "tools/call") and not initialized:
            error = {"code": -32600, "message": "Invalid request: the session is not initialized"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
        elif method == "initialize":
            initialized = True
            asked = (message.get("params") or {}).get("protocolVersion")
            result = {
                "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "strict-2025", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method in ("notifications/initialized", "notifications/cancelled"):
            continue
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [TOOL]}})
        elif method == "tools/call":
            ask_name(request_id)
        else:
            sys.stderr.write(f"unknown method {method!r}: exiting\n")
            sys.exit(1)


if __name__ == "__main__":
    main()
