"""In-process demo: a client and a server ``Connection`` with only bytes between them.

The client settles the era with ``server/discover``, then calls a tool.  Round 1
asks for an elicitation; round 2 asks for sampling and roots together; then the
tool completes.  Every line that crosses the wire is printed.  Run it with
``python examples/pair_demo.py``.
"""

from __future__ import annotations

import itertools
from typing import Any

import mrtr_core as m

CAPABILITIES: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
ORIGINAL_PARAMS = {"name": "plan_trip", "arguments": {"destination": "Lisbon"}}


def scripted_server(request: m.Request) -> m.ResultResponse:
    """A stateless server: everything it needs comes back in each retry."""
    params = request.params or {}
    answers = params.get("inputResponses", {})
    state = params.get("requestState")
    if state is None:
        result: dict[str, Any] = {
            "resultType": "input_required",
            "inputRequests": {
                "traveller": {
                    "method": "elicitation/create",
                    "params": {
                        "message": "Who is travelling?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                        },
                    },
                }
            },
            "requestState": "round-1:Lisbon",
        }
    elif state == "round-1:Lisbon":
        name = answers["traveller"]["content"]["name"]
        result = {
            "resultType": "input_required",
            "inputRequests": {
                "tip": {
                    "method": "sampling/createMessage",
                    "params": {
                        "messages": [
                            {"role": "user", "content": {"type": "text", "text": "A Lisbon tip?"}}
                        ],
                        "maxTokens": 50,
                    },
                },
                "workspace": {"method": "roots/list"},
            },
            "requestState": f"round-2:Lisbon:{name}",
        }
    else:
        name = state.rsplit(":", 1)[1]
        tip = answers["tip"]["content"]["text"]
        folder = answers["workspace"]["roots"][0]["uri"]
        text = f"Trip for {name}: {tip} Itinerary saved to {folder}."
        result = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    return m.ResultResponse(id=request.id, result=result)


def answer(request: m.wire.InputRequest) -> m.wire.InputResponse:
    """The client's input handlers (a real client would ask the user or an LLM)."""
    if isinstance(request, m.wire.ElicitFormRequest):
        return m.wire.ElicitResult(action="accept", content={"name": "Ada"})
    if isinstance(request, m.wire.CreateMessageRequest):
        return m.wire.CreateMessageResult(
            role="assistant",
            content={"type": "text", "text": "Take tram 28 early."},
            model="demo-model",
        )
    return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///home/ada/trips", name="trips")])


def show(direction: str, data: bytes) -> None:
    if data:
        print(f"{direction} {data.decode().rstrip()}")


def main() -> None:
    """A client and a server Connection with only bytes between them."""
    clock = itertools.count(0.0, 0.01)  # a fake monotonic clock: the core never reads one
    client = m.Connection(
        m.CLIENT,
        era="auto",
        info={"name": "mrtr-demo", "version": "0.1.0"},
        capabilities=CAPABILITIES,
    )
    server = m.Connection(m.SERVER, info={"name": "demo-server", "version": "0.1.0"})
    call = client.call("tools/call", ORIGINAL_PARAMS, leg_timeout=30.0, total_timeout=300.0)
    for _ in range(100):
        now = next(clock)
        while (event := client.next_event(now)) is not m.NEED_DATA:
            if isinstance(event, m.HandshakeStep):
                data = client.send(event.message)
                show("-->", data)
                server.receive_data(data)
            elif isinstance(event, m.SessionOpened):
                print(f"    era settled: {event.era} {event.protocol_version}")
            elif isinstance(event, m.CallEvent):
                inner = event.event
                if isinstance(inner, (m.engine.SendRequest, m.engine.SendRetry)):
                    data = client.send(event)
                    show(f"--> leg {inner.leg}:", data)
                    server.receive_data(data)
                elif isinstance(inner, m.engine.RoundStarted):
                    print(f"    round {inner.round}: the server asks for {', '.join(inner.kinds)}")
                elif isinstance(inner, m.engine.DispatchInput):
                    client.provide(call, inner.key, answer(inner.request), now)
                elif isinstance(inner, m.engine.Done):
                    print("done:", inner.result["content"][0]["text"])
                    return
                else:
                    raise SystemExit(f"flow ended without a result: {inner}")
            else:
                raise SystemExit(f"unexpected {event!r}")
        while (event := server.next_event(now)) is not m.NEED_DATA:
            if isinstance(event, m.AutoReply):  # server/discover: the connection answers it
                reply = event.reply
            elif isinstance(event, m.Request):
                reply = scripted_server(event)
            else:
                raise SystemExit(f"unexpected {event!r}")
            data = server.send(reply)
            show("<--", data)
            client.receive_data(data)
    raise SystemExit("the flow did not finish")


if __name__ == "__main__":
    main()
