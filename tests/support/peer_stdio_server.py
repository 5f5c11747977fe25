"""A small stdio MCP server for the client tests, built on ``mrtr_core.Connection(SERVER)``.

It is deliberately simple (one blocking loop, no trio) and can misbehave on
request.  Usage: ``python tests/peer_stdio_server.py [FLAGS]``:

``--legacy-only``       speak only 2025 versions (a 2025 server: no server/discover)
``--silent-discover``   never answer ``server/discover`` (a 2025 server that ignores it)
``--ignore-stdin-eof``  keep running after stdin closes (shutdown needs a signal)
``--ignore-sigterm``    ignore SIGTERM too (shutdown needs SIGKILL)
``--exit-at-start N``   write to stderr and exit with status N before reading anything

It always writes a few lines (and some invalid UTF-8) to stderr at start.
Tools: ``echo``; ``env`` (a variable and the working directory); ``ask`` (one
elicitation, requestState ``st-1``); ``pair`` (two elicitations in one
round); ``mixed`` (elicitation, sampling and roots in one round);
``state_only`` (``legs`` requestState-only rounds); ``forever`` (asks again
every round); ``slow`` (sleeps ``seconds``); ``progress``; ``garbage`` (a
non-JSON line on stdout first); ``die`` (exits mid-call).
In a 2025 session the same tools are served through ``LegacyShim``: their
questions become server-to-client requests.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

import mrtr_core as m

ASK_NAME = {
    "method": "elicitation/create",
    "params": {
        "message": "What is your name?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
}
ASK_LLM = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 10,
    },
}
ASK_ROOTS = {"method": "roots/list"}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def tool(params: dict[str, Any], out: Any) -> dict[str, Any]:
    """One leg of a tool: the wire result (complete or input_required)."""
    name = params.get("name")
    args = params.get("arguments") or {}
    answers = params.get("inputResponses") or {}
    state = params.get("requestState")
    if name == "echo":
        return text(json.dumps(args, sort_keys=True))
    if name == "env":
        return text(f"{os.environ.get(str(args.get('name')))} in {os.getcwd()}")
    if name == "ask":
        if "name" not in answers:
            return {
                "resultType": "input_required",
                "inputRequests": {"name": ASK_NAME},
                "requestState": "st-1",
            }
        if state != "st-1":
            raise m.MrtrError(
                f"requestState came back as {state!r}", code=m.ErrorCode.INVALID_PARAMS
            )
        reply = answers["name"]
        if reply.get("action") != "accept":
            return text(f"no name: {reply.get('action')}")
        return text(f"Hello {reply['content']['name']}")
    if name == "pair":
        if not {"a", "b"} <= answers.keys():
            return {"resultType": "input_required", "inputRequests": {"a": ASK_NAME, "b": ASK_NAME}}
        return text(f"a={answers['a']['content']['name']} b={answers['b']['content']['name']}")
    if name == "mixed":
        if not {"who", "llm", "where"} <= answers.keys():
            asks = {"who": ASK_NAME, "llm": ASK_LLM, "where": ASK_ROOTS}
            return {"resultType": "input_required", "inputRequests": asks, "requestState": "mixed"}
        said = answers["llm"]["content"]["text"]
        roots = ",".join(root["uri"] for root in answers["where"]["roots"])
        return text(f"who={answers['who']['content']['name']} llm={said} roots={roots}")
    if name == "state_only":
        seen = int(state) if state else 0
        if seen < int(args.get("legs", 2)):
            return {"resultType": "input_required", "requestState": str(seen + 1)}
        return text(f"legs={seen}")
    if name == "forever":
        count = int(state or 0) + 1
        return {
            "resultType": "input_required",
            "inputRequests": {f"q{count}": ASK_NAME},
            "requestState": str(count),
        }
    if name == "slow":
        time.sleep(float(args.get("seconds", 1)))
        return text("slow done")
    if name == "progress":
        for step in (1, 2):
            out(
                m.Progress(
                    request_id=params["__id"], progress=step, total=2, message=f"step {step}"
                )
            )
        return text("progress done")
    if name == "garbage":
        sys.stdout.buffer.write(b"this is not json\n")
        return text("after garbage")
    if name == "die":
        sys.stderr.write("fatal: the die tool was called\n")
        sys.stderr.flush()
        os._exit(3)
    raise m.MrtrError(f"no tool {name!r}", code=m.ErrorCode.INVALID_PARAMS)


def main(argv: list[str]) -> None:
    flags = set(argv)
    sys.stderr.write("peer starting\n")
    sys.stderr.buffer.write(b"a line with invalid utf-8: \xff\xfe\n")
    sys.stderr.flush()
    if "--exit-at-start" in flags:
        status = int(argv[argv.index("--exit-at-start") + 1])
        sys.stderr.write(f"giving up with status {status}\n")
        sys.stderr.flush()
        sys.exit(status)
    if "--ignore-sigterm" in flags:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    versions = (
        m.LEGACY_VERSIONS if "--legacy-only" in flags else m.MODERN_VERSIONS + m.LEGACY_VERSIONS
    )
    conn = m.Connection(
        m.SERVER, info={"name": "peer-stdio", "version": "1"}, capabilities={"tools": {}},
        versions=versions,
    )  # fmt: skip
    shims: dict[Any, m.server.LegacyShim] = {}  # 2025 calls, by the original request's id
    stdout = sys.stdout.buffer

    def out(event: Any) -> None:
        data = conn.send(event)
        if data:
            stdout.write(data)
            stdout.flush()

    def run_shim(shim: m.server.LegacyShim) -> None:
        while not isinstance(event := shim.next_event(), m.Wait):
            if isinstance(event, m.server.ShimRun):
                try:
                    shim.leg_done(tool(dict(event.request.params or {}), out))
                except m.MrtrError as exc:
                    shim.leg_done(exc)
            elif isinstance(event, m.server.ShimSend):
                out(event.message)
            elif isinstance(event, m.server.ShimWait):
                time.sleep(event.delay)
                shim.resume(time.monotonic())
            elif isinstance(event, m.server.ShimDone):
                out(event.response)
                break

    while True:
        event = conn.next_event(time.monotonic())
        if event is m.NEED_DATA:
            conn.receive_data(os.read(0, 65536))
            continue
        if isinstance(event, m.ConnectionClosed):
            break
        if isinstance(event, m.AutoReply):
            if event.request.method == "server/discover" and "--silent-discover" in flags:
                continue
            out(event.reply)
        elif isinstance(event, m.InvalidMessage):
            if event.reply is not None:
                if "--silent-discover" in flags and "server/discover" in str(event.error):
                    continue
                out(event.reply)
        elif isinstance(event, m.Request):
            info = conn.request_info(event.id)
            if info.era == "legacy" and event.method == "tools/call":
                shim = m.server.LegacyShim(
                    None, event, info, new_id=conn.new_request_id, sealer=None, principal=None
                )
                shims[event.id] = shim
                shim.start(time.monotonic())
                run_shim(shim)
                continue
            if event.method == "tools/list":
                tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "ask")]
                out(m.ResultResponse(id=event.id, result={"tools": tools}))
                continue
            try:
                params = {**(event.params or {}), "__id": event.id}
                result = tool(params, out)
            except m.MrtrError as exc:
                out(m.error_response(event.id, exc))
                continue
            out(m.ResultResponse(id=event.id, result=result))
        elif isinstance(event, (m.ResultResponse, m.ErrorResponse)):
            for shim in list(shims.values()):
                if event.id in shim.waiting_for:
                    shim.receive(event, time.monotonic())
                    run_shim(shim)
    if "--ignore-stdin-eof" in flags:
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1:])
