"""What a task (SEP-2663) costs per poll and per creation, against a plain call in the same run.

Our ``mrtr serve --http`` (``bench_mrtr_app.py``) in a subprocess; one keep-alive
connection from this process, hand-built HTTP/1.1 requests, each answer checked.
Measured back to back, ``N`` requests each (``--quick``: fewer), median of
``--repeats`` batches:

* floor: ``tools/call`` of ``plain`` (one leg, no input, no task): what any request
  costs on this server;
* create: ``tools/call`` of ``parked`` with the tasks extension declared: a task
  made (durably: findable before its ``CreateTaskResult`` goes out) and its work
  started, parked at ``input_required``;
* poll, input_required: ``tasks/get`` of one of those tasks (``inputRequests`` inlined);
* poll, completed: ``tasks/get`` of a ``quick`` task (``result`` inlined).

Per kind: µs per request as the client sees it, and the server's CPU per request
(user + system from ``/proc``), each with its ratio to the floor's.  Memory per
task is ``bench_memory.py`` (``task, ...`` rows).  Not a test: no pass/fail.

Run: ``.venv/bin/python benchmarks/bench_tasks.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import machine  # noqa: E402
from bench_http import PROTOCOL, cpu_seconds, server  # noqa: E402

TASKS = "io.modelcontextprotocol/tasks"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench-tasks", "version": "1.0"},
}


class Link:
    """One keep-alive connection; ``call`` sends a request and returns its result."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        body = json.dumps(message, separators=(",", ":")).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nMCP-Protocol-Version: {PROTOCOL}\r\n"
            f"Mcp-Method: {method}\r\nMcp-Name: {name}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body)
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self.buffer += self.sock.recv(65536)
        head_bytes = self.buffer[:end].lower()
        assert head_bytes[9:12] == b"200", self.buffer[:300]
        length = int(head_bytes.split(b"content-length:")[1].split(b"\r\n")[0])
        while len(self.buffer) < end + 4 + length:
            self.buffer += self.sock.recv(65536)
        reply = json.loads(self.buffer[end + 4 : end + 4 + length])
        self.buffer = self.buffer[end + 4 + length :]
        assert "result" in reply, reply
        return reply["result"]  # type: ignore[no-any-return]


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "arguments": {}, "_meta": META}


def batch(link: Link, pid: int, n: int, one: Callable[[int], None]) -> tuple[float, float]:
    """(µs per request, server CPU µs per request) for ``n`` calls of ``one``."""
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    for i in range(n):
        one(i)
    wall = time.perf_counter() - started
    return wall / n * 1e6, (cpu_seconds(pid) - cpu) / n * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests, noisier")
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    n = 300 if options.quick else 2000
    repeats = 3 if options.quick else options.repeats
    print(machine())
    with server("mrtr", 256) as (port, pid):
        link = Link(port)

        def plain(_: int) -> None:
            assert link.call("tools/call", tool("plain"), "plain")["content"]

        parked_ids: list[str] = []

        def create(_: int) -> None:
            result = link.call("tools/call", tool("parked"), "parked")
            assert result["resultType"] == "task", result
            parked_ids.append(result["taskId"])

        for _ in range(50):  # warm-up, and tasks to poll
            plain(0)
            create(0)
        quick = link.call("tools/call", tool("quick"), "quick")["taskId"]
        time.sleep(0.2)

        def poll(task_id: str, status: str) -> Callable[[int], None]:
            params = {"taskId": task_id, "_meta": META}

            def one(_: int) -> None:
                assert link.call("tasks/get", params, task_id)["status"] == status

            return one

        kinds: dict[str, Callable[[int], None]] = {
            "floor: tools/call, no task": plain,
            "create a task (tools/call)": create,
            "poll, input_required": poll(parked_ids[0], "input_required"),
            "poll, completed": poll(quick, "completed"),
        }
        figures: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
        for _ in range(repeats):
            for kind, one in kinds.items():
                figures[kind].append(batch(link, pid, n, one))
    floor_wall = statistics.median(w for w, _ in figures["floor: tools/call, no task"])
    floor_cpu = statistics.median(c for _, c in figures["floor: tools/call, no task"])
    print(f"\n{n:,} requests per batch, median of {repeats}, one keep-alive connection")
    print(f"  {'request':30} {'µs/req':>8} {'x floor':>8} {'server CPU µs':>14} {'x floor':>8}")
    for kind, runs in figures.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(
            f"  {kind:30} {wall:8.0f} {wall / floor_wall:8.2f} {cpu:14.0f} {cpu / floor_cpu:8.2f}"
        )
    print(f"  ({len(parked_ids):,} tasks parked at input_required on the server by the end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
