"""A scripted task server (SEP-2663) for the client's task tests: a plain ``ServerApp`` on
the core's server ``Connection``, served with ``mrtr serve --stdio|--http|--ws ... --app
support.task_peer:app``.

Each tool names a script.  A ``tools/call`` that declared the tasks extension gets a
``CreateTaskResult`` (``pollIntervalMs`` from the ``interval`` argument, 20 ms by
default) and each ``tasks/get`` moves the task one step along its script (polls,
not time, drive it: the same on a loaded machine); a step that asks waits there until
``tasks/update`` answered every key it asks.  The steps:

``quick``           working, then completed ("done")
``ask``             input_required {name: a form}, then completed ("hello <name>")
``ask_twice``       input_required {a: a form} (still shown once after its answer: the
                    SEP's eventual consistency), then {b: sampling}, then completed
``fail``            working, then failed (-32603 "disk full", data {"disk": "/"})
``tool_error``      completed with an ``isError: true`` result
``server_cancel``   working, then cancelled ("operator stopped it")
``forever``         working, for ever (a timeout, a cancel)
``forever_ask``     input_required {name: a form}, for ever
``slow_get``        working, each tasks/get answered after 30 s (a request's timeout)
``withdraw``        input_required {a} for three polls, then working (the ask
                    dropped unanswered), then completed ("went on without it")
``vanish``          working, then the task is unknown (-32602: expired and purged)
``die``             working, then the server process exits mid-poll
``pair``            input_required {a, b: two forms}, then completed
``noisy_status``    working with a statusMessage full of escapes, then completed
``confirm``         first an MRTR round on the ``tools/call`` (input_required {confirm}
                    and requestState ``rs-1``), then the ``ask`` task
hostile: ``other_id`` (a tasks/get for another taskId), ``regress`` (created
``completed``, then ``working``), ``huge_interval`` (pollIntervalMs 10^9),
``zero_interval`` (a tasks/get with pollIntervalMs 0), ``many_asks`` (300 asks in one
poll), ``not_a_task`` (a tasks/get result that is no task).

A ``tools/call`` that did not declare the extension gets a plain result ("no task:
<tool>"), as a server that may run the tool either way answers.  ``log`` returns (as
JSON text) every task request received: its method and params, ``_meta`` replaced by
whether it declared the extension.  The task methods are gated (-32021) and an
unknown id is -32602, as the SEP says.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from typing import Any

import anyio

import mrtr_core as m

STAMP = "2026-07-28T10:00:00Z"
NAME = m.server.elicit_form("Your name?", {"name": {"type": "string"}}, required=["name"])
CONFIRM = m.server.elicit_form("Go ahead?", {"ok": {"type": "boolean"}}, required=["ok"])
TONE = m.server.sample("Three words", max_tokens=10)
OBJECT: dict[str, Any] = {
    "type": "object",
    "properties": {"interval": {"type": "integer"}, "ttl": {"type": "integer"}},
}
#: A statusMessage that would drive a terminal (a window title, a colour, a line break).
NOISY = "\x1b]0;pwned\x07red \x1b[31mtext\nsecond line \u202eevil"
SCRIPTS = (
    *("quick", "ask", "ask_twice", "fail", "tool_error", "server_cancel"),
    *("forever", "forever_ask", "confirm", "noisy_status", "pair", "slow_get"),
    *("withdraw", "vanish", "die"),
    *("other_id", "regress", "huge_interval", "zero_interval", "many_asks", "not_a_task"),
)


def text(value: str, *, error: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": value}]}
    if error:
        out["isError"] = True
    return out


def ask_wire(ask: Any) -> dict[str, Any]:
    return m.wire._convert.unstructure_input_request(ask)


class Task:
    """One task: its script, where it is, the answers it got."""

    def __init__(self, script: str, interval: int) -> None:
        self.id = secrets.token_urlsafe(16)
        self.script = script
        self.interval = interval
        self.polls = 0
        self.answers: dict[str, Any] = {}
        self.cancelled = False
        self.shown_after_answer = False

    def fields(self, status: str, **extra: Any) -> dict[str, Any]:
        out = {
            "resultType": "complete",
            "taskId": self.id,
            "status": status,
            "createdAt": STAMP,
            "lastUpdatedAt": STAMP,
            "ttlMs": 600_000,
            "pollIntervalMs": self.interval,
            **extra,
        }
        return out

    def created(self) -> dict[str, Any]:
        status = "completed" if self.script == "regress" else "working"
        out = self.fields(status)
        out["resultType"] = "task"
        return out

    def asking(self, asks: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
        wire = {key: ask_wire(ask) for key, ask in asks.items()}
        return self.fields("input_required", inputRequests=wire, **extra)

    def step(self) -> dict[str, Any]:
        """The next tasks/get answer."""
        self.polls += 1
        script, polls = self.script, self.polls
        if self.cancelled:
            return self.fields("cancelled", statusMessage="cancelled by the client")
        if script in ("quick", "huge_interval"):
            if polls < 2:
                return self.fields("working")
            return self.fields("completed", result=text("done"))
        if script in ("ask", "confirm", "forever_ask"):
            if "name" not in self.answers or script == "forever_ask":
                return self.asking({"name": NAME}, statusMessage="waiting for a name")
            name = (self.answers["name"].get("content") or {}).get("name")
            return self.fields("completed", result=text(f"hello {name}"))
        if script == "ask_twice":
            if "a" not in self.answers:
                return self.asking({"a": NAME})
            if not self.shown_after_answer:
                self.shown_after_answer = True
                return self.asking({"a": NAME})  # the update not yet visible
            if "b" not in self.answers:
                return self.asking({"b": TONE})
            name = (self.answers["a"].get("content") or {}).get("name")
            words = (self.answers["b"].get("content") or {}).get("text")
            return self.fields("completed", result=text(f"{name}: {words}"))
        if script == "fail":
            if polls < 2:
                return self.fields("working")
            error = {"code": -32603, "message": "disk full", "data": {"disk": "/"}}
            return self.fields("failed", error=error, statusMessage="the disk filled up")
        if script == "tool_error":
            return self.fields("completed", result=text("bad input", error=True))
        if script == "server_cancel":
            if polls < 2:
                return self.fields("working", statusMessage="started")
            return self.fields("cancelled", statusMessage="operator stopped it")
        if script == "withdraw":
            if polls <= 3:
                return self.asking({"a": NAME})
            if polls == 4:
                return self.fields("working")
            return self.fields("completed", result=text("went on without it"))
        if script == "pair":
            if not {"a", "b"} <= set(self.answers):
                return self.asking({"a": NAME, "b": NAME})
            names = [(self.answers[k].get("content") or {}).get("name") for k in "ab"]
            return self.fields("completed", result=text(" and ".join(map(str, names))))
        if script == "noisy_status":
            if polls < 2:
                return self.fields("working", statusMessage=NOISY)
            return self.fields("completed", result=text("quiet now"))
        if script == "other_id":
            return {**self.fields("working"), "taskId": "someone-elses"}
        if script == "regress":
            return self.fields("working")
        if script == "zero_interval":
            return self.fields("working", pollIntervalMs=0)
        if script == "many_asks":
            return self.asking({f"k{n}": NAME for n in range(300)})
        if script == "not_a_task":
            return {"resultType": "complete", "hello": "world"}
        return self.fields("working", statusMessage=f"poll {polls}")  # forever


class TaskPeer:
    """The app (see the module docstring)."""

    info: Mapping[str, Any] = {"name": "task-peer", "version": "1"}
    capabilities: Mapping[str, Any] = {
        "tools": {},
        "extensions": {m.tasks.TASKS_EXTENSION: {}},
    }
    instructions: str | None = None

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.log: list[dict[str, Any]] = []

    def tool_header_params(self, name: str) -> Mapping[str, tuple[str, ...]] | None:
        return {}

    async def handle(self, request: m.Request, info: m.server.RequestInfo, outlet: Any) -> Any:
        method = request.method
        params = dict(request.params or {})
        if method == "tools/list":
            tools = [{"name": name, "inputSchema": OBJECT} for name in (*SCRIPTS, "log")]
            return {"tools": tools}
        if method == "tools/call":
            return self.call(params, info)
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            return await self.task_method(method, params, info)
        raise m.MrtrError(f"no method {method!r} here", code=m.ErrorCode.METHOD_NOT_FOUND)

    def call(self, params: dict[str, Any], info: m.server.RequestInfo) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if name == "log":
            return text(json.dumps(self.log))
        if name not in SCRIPTS:
            raise m.MrtrError(f"unknown tool {name!r}", code=m.ErrorCode.INVALID_PARAMS)
        if name == "confirm":
            answers = params.get("inputResponses") or {}
            if "confirm" not in answers or params.get("requestState") != "rs-1":
                return {
                    "resultType": "input_required",
                    "inputRequests": {"confirm": ask_wire(CONFIRM)},
                    "requestState": "rs-1",
                }
        if not m.tasks.declares_tasks(info.capabilities):
            return text(f"no task: {name}")
        interval = 10**9 if name == "huge_interval" else int(arguments.get("interval", 20))
        task = Task(str(name), interval)
        self.tasks[task.id] = task
        return task.created()

    async def task_method(
        self, method: str, params: dict[str, Any], info: m.server.RequestInfo
    ) -> dict[str, Any]:
        m.tasks.require_tasks(info.capabilities, method)
        meta = params.pop("_meta", None)
        self.log.append(
            {
                "method": method,
                "params": params,
                "declared": m.tasks.declares_tasks(
                    (meta or {}).get(m.wire.META_CLIENT_CAPABILITIES)
                ),
            }
        )
        request = m.tasks.TaskRequest.from_params(method, params)
        task = self.tasks.get(request.task_id)
        if task is None:
            raise m.tasks.UnknownTask(request.task_id)
        if method == "tasks/get":
            if task.script == "slow_get" and not task.cancelled:
                await anyio.sleep(30)
            if task.script == "vanish" and task.polls >= 1:
                del self.tasks[task.id]
                raise m.tasks.UnknownTask(task.id)
            if task.script == "die" and task.polls >= 1:
                os._exit(3)
            return task.step()
        if method == "tasks/update":
            for key, answer in (request.input_responses or {}).items():
                task.answers[key] = dict(answer)
        else:
            task.cancelled = True
        return {"resultType": "complete"}


app = TaskPeer()


def rogue() -> None:
    """``python tests/support/task_peer.py --rogue``: a stdio server that answers every
    ``tools/call`` and ``prompts/get`` with a task, declared or not (the core's server
    ``Connection`` would refuse: the task result is written raw)."""
    import sys

    conn = m.Connection(m.SERVER, info={"name": "rogue", "version": "1"}, capabilities={})
    task = Task("forever", 20).created()
    while True:
        event = conn.next_event()
        if event is m.NEED_DATA:
            conn.receive_data(os.read(0, 65536))
            continue
        if isinstance(event, m.ConnectionClosed):
            return
        if isinstance(event, (m.AutoReply, m.InvalidMessage)) and event.reply is not None:
            sys.stdout.buffer.write(conn.send(event.reply))
        elif isinstance(event, m.Request):
            line = {"jsonrpc": "2.0", "id": event.id, "result": task}
            sys.stdout.buffer.write(json.dumps(line).encode() + b"\n")
        sys.stdout.flush()


if __name__ == "__main__":
    rogue()
