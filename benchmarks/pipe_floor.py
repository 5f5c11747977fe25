"""The blocking-pipe floor of ``bench_transports.py``: whole tool calls with no framework.

``python benchmarks/pipe_floor.py`` is a server on stdin/stdout: it reads one JSON-RPC
line at a time (stdlib ``json``, blocking reads), answers it with one line and flushes.
``FloorClient`` spawns it and makes the same calls as the benchmark's real clients.  What
is in it: the same messages as the real wire (JSON-RPC envelopes, ``tools/call`` with its
``name`` and ``arguments``, an ``input_required`` result with one form elicitation under
``name`` and a ``requestState``, the retry carrying ``inputResponses`` and the echoed
state, a text result).  What is not: no handshake, no validation of any shape, no
sealing (the state is the bare string ``asked``), no ids checked, no tasks, no event
loop: the cheapest a two-leg call over pipes can be in Python, the floor our stdio path
is measured against.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

ASK = {
    "resultType": "input_required",
    "inputRequests": {
        "name": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "What is your name?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            },
        }
    },
    "requestState": "asked",
}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    params = request["params"]
    if params["name"] == "plain":
        return text("done")
    reply = params.get("inputResponses", {}).get("name")
    if not reply or params.get("requestState") != "asked":
        return ASK
    return text(f"Hello {reply['content']['name']}")


def serve() -> None:
    read, write = sys.stdin.buffer, sys.stdout.buffer
    for line in read:
        request = json.loads(line)
        response = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
        write.write(json.dumps(response).encode() + b"\n")
        write.flush()


class FloorClient:
    """Blocking calls over the server's pipes, one line out and one line in per leg."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.next_id = 0

    def leg(self, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        result: dict[str, Any] = json.loads(self.process.stdout.readline())["result"]
        return result

    def call_tool(self, name: str, answer: Any) -> dict[str, Any]:
        """``answer(key, request)`` fills in each input request, like the real callbacks."""
        params: dict[str, Any] = {"name": name, "arguments": {}}
        result = self.leg(params)
        while result.get("resultType") == "input_required":
            responses = {key: answer(key, ask) for key, ask in result["inputRequests"].items()}
            retry = {**params, "inputResponses": responses, "requestState": result["requestState"]}
            result = self.leg(retry)
        return result

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


if __name__ == "__main__":
    serve()
