"""A scaled-out deployment for tests: redis-server, three ``mrtr serve --http`` workers, nginx.

The workers are real subprocesses sharing one keys file (``--state-keys``)
and one Redis (``--single-use``); nginx (see ``scale_services.Nginx``) balances
over them round-robin on one port and by client address on another.  The MCP
side is raw HTTP (``http.client``, one connection per leg), so a test controls
every leg: which ``requestState`` it sends, and the ``X-Leg`` header nginx
logs next to the worker that served it.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from mrtr_transports.stores.keys import new_state_keys
from scale_services import Nginx, RedisServer, free_port, stop, wait_for_port

import mrtr_core as m

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
META = {
    m.wire.META_PROTOCOL_VERSION: "2026-07-28",
    m.wire.META_CLIENT_CAPABILITIES: {"elicitation": {"form": {}}},
}
#: A request that declares the tasks extension (SEP-2663) besides.
TASKS_META = {
    m.wire.META_PROTOCOL_VERSION: "2026-07-28",
    m.wire.META_CLIENT_CAPABILITIES: {
        "elicitation": {"form": {}},
        "extensions": {m.tasks.TASKS_EXTENSION: {}},
    },
}
#: A generous bound for one leg through nginx on a loaded machine.
LEG_TIMEOUT = 30.0


class Worker:
    """One ``mrtr serve --http`` process on a fixed port (so it can be started again)."""

    def __init__(
        self,
        directory: Path,
        keys: Path,
        store_url: str,
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.directory = directory
        self.keys = keys
        self.store_url = store_url
        #: More ``mrtr serve`` options (``--task-store``, ``--task-id-prefix``).
        self.extra = list(extra)
        self.env = dict(env or {})
        self.log = directory / f"worker-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """How nginx's ``$upstream_addr`` names this worker."""
        return f"127.0.0.1:{self.port}"

    def spawn(self) -> None:
        argv = [sys.executable, "-m", "mrtr_transports.cli.main", "serve"]
        argv += ["--http", self.address, "--app", "scale_app:app"]
        argv += ["--state-keys", str(self.keys), "--single-use", self.store_url, *self.extra]
        path = [str(HERE), str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, **self.env, "PYTHONPATH": os.pathsep.join(path)}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=log, env=env)

    def wait_ready(self) -> None:
        assert self.process is not None
        wait_for_port(self.port, self.process, f"worker {self.address}", self.log)

    def kill(self) -> None:
        stop(self.process, signal.SIGKILL)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        stop(self.process, signal.SIGINT)  # Ctrl-C: how a server is stopped


@attrs.define
class Cluster:
    redis: RedisServer
    workers: list[Worker]
    nginx: Nginx

    @classmethod
    def start(
        cls,
        services: Mapping[str, str],
        directory: Path,
        size: int = 3,
        *,
        worker_args: Callable[[int, str], Sequence[str]] | None = None,
        routes: Callable[[int], str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Cluster:
        """``worker_args(i, redis_url)``: more options for worker ``i``; ``routes(i)``:
        the task id prefix nginx's ``route_port`` sends to worker ``i``."""
        redis = RedisServer(services["redis-server"], directory).start()
        keys = directory / "state-keys.json"
        keys.write_text(new_state_keys())
        extra = worker_args or (lambda i, url: ())
        url = redis.url
        workers = [Worker(directory, keys, url, extra(i, url), env) for i in range(size)]
        routed = {routes(i): w.port for i, w in enumerate(workers)} if routes else None
        nginx = Nginx(services["nginx"], directory, [w.port for w in workers], routed)
        cluster = cls(redis, workers, nginx)
        try:
            for worker in workers:  # all importing at once: faster on two cores than in turn
                worker.spawn()
            for worker in workers:
                worker.wait_ready()
            nginx.start()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def worker_at(self, address: str) -> Worker:
        return next(w for w in self.workers if w.address == address)

    def stop(self) -> None:
        self.nginx.stop()
        for worker in self.workers:
            worker.stop()
        self.redis.stop()


# --- legs and flows over raw HTTP ---------------------------------------------------------


def post(
    port: int, message: Mapping[str, Any], leg: str, client: str | None = None
) -> dict[str, Any]:
    """POST one JSON-RPC request to ``/mcp`` through nginx; the JSON-RPC response.

    The answer may be JSON or an SSE stream (the worker chooses): for a stream,
    the last message is the response.
    """
    response, body = exchange(port, message, leg, client)
    # a JSON-RPC error may come with an error status (a refused requestState is a 400)
    assert response.status == 200 or b'"error"' in body, (response.status, body[:500])
    if response.getheader("Content-Type", "").startswith("text/event-stream"):
        decoder = m.http.SseDecoder()
        decoder.feed(body)
        decoder.feed_eof()
        messages = []
        while (event := decoder.next_event()) is not m.wire.END_OF_STREAM:
            assert isinstance(event, m.http._sse.SseEvent)
            messages.append(json.loads(event.data))
        return dict(messages[-1])
    return dict(json.loads(body))


def exchange(
    port: int, message: Mapping[str, Any], leg: str, client: str | None = None
) -> tuple[http.client.HTTPResponse, bytes]:
    """POST one JSON-RPC request to ``/mcp`` through nginx: the HTTP response and its body.
    ``Mcp-Name`` is the tool's name, or the task id of a task method; ``client``: the
    address sent as ``X-Forwarded-For`` (whose share a task counts against, for a
    worker that trusts the proxy)."""
    params = message["params"]
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": message["method"],
        "Mcp-Name": params["name"] if "name" in params else params["taskId"],
        "X-Leg": leg,
        "Connection": "close",
    }
    if client is not None:
        headers["X-Forwarded-For"] = client
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LEG_TIMEOUT)
    try:
        connection.request("POST", "/mcp", json.dumps(message), headers)
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    return response, body


def task_call(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A ``tools/call`` that declares the tasks extension (a task tool answers a task)."""
    params = {"name": name, "arguments": dict(arguments), "_meta": TASKS_META}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def task_method(method: str, task_id: str, **more: Any) -> dict[str, Any]:
    """``tasks/get``, ``tasks/update`` (``inputResponses=...``) or ``tasks/cancel``."""
    params = {"taskId": task_id, "_meta": TASKS_META, **more}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def tool_leg(
    name: str,
    arguments: Mapping[str, Any],
    *,
    responses: Mapping[str, Any] | None = None,
    state: str | None = None,
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments), "_meta": META}
    if responses is not None:
        params["inputResponses"] = dict(responses)
    if state is not None:
        params["requestState"] = state
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def accept(content: Mapping[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": dict(content)}


@attrs.define
class Flow:
    """One tool call driven leg by leg; ``legs`` are the ``X-Leg`` values sent, in order."""

    port: int
    name: str
    arguments: Mapping[str, Any]
    flow_id: str
    legs: list[str] = attrs.Factory(list)
    last: dict[str, Any] = attrs.Factory(dict)
    #: what the last leg sent (to send it again: a replay)
    sent: dict[str, Any] = attrs.Factory(dict)

    def leg(self, responses: Mapping[str, Any] | None = None) -> dict[str, Any]:
        state = self.last.get("result", {}).get("requestState") if self.last else None
        self.sent = tool_leg(self.name, self.arguments, responses=responses, state=state)
        return self.send(self.sent)

    def send(self, message: Mapping[str, Any]) -> dict[str, Any]:
        leg = f"{self.flow_id}.{len(self.legs) + 1}"
        self.legs.append(leg)
        self.last = post(self.port, message, leg)
        return self.last

    def answer(self, answers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """Answer what the last result asked, from ``answers`` (key -> form content)."""
        asked = self.last["result"]["inputRequests"]
        return self.leg({key: accept(answers[key]) for key in asked})

    def run(self, answers: Mapping[str, Mapping[str, Any]], max_legs: int = 6) -> dict[str, Any]:
        """Legs until a complete result (or an error); the last response."""
        if not self.legs:
            self.leg()
        while "result" in self.last and self.last["result"].get("resultType") == "input_required":
            assert len(self.legs) < max_legs, self.last
            self.answer(answers)
        return self.last


def text_of(response: Mapping[str, Any]) -> str:
    assert "result" in response, response
    return "".join(part["text"] for part in response["result"]["content"])


def error_reason(response: Mapping[str, Any]) -> tuple[int, str | None]:
    assert "error" in response, response
    error = response["error"]
    return error["code"], (error.get("data") or {}).get("reason")
