"""In-process demo: a scripted two-round server driven through the round engine.

Round 1 asks for an elicitation; round 2 asks for sampling and roots together;
then the tool completes.  Every leg is printed as the JSON line that would go
on the wire.  Run it with ``make demo``.
"""

from __future__ import annotations

import itertools
from typing import Any

import mrtr_core as m

CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {}}
ORIGINAL_PARAMS = {
    "name": "plan_trip",
    "arguments": {"destination": "Lisbon"},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
        "io.modelcontextprotocol/clientInfo": {"name": "mrtr-demo", "version": "0.1.0"},
    },
}


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


def answer(request: m.InputRequest) -> m.InputResponse:
    """The client's input handlers (a real client would ask the user or an LLM)."""
    if isinstance(request, m.ElicitFormRequest):
        return m.ElicitResult(action="accept", content={"name": "Ada"})
    if isinstance(request, m.CreateMessageRequest):
        return m.CreateMessageResult(
            role="assistant",
            content={"type": "text", "text": "Take tram 28 early."},
            model="demo-model",
        )
    return m.ListRootsResult(roots=[m.Root(uri="file:///home/ada/trips", name="trips")])


def main() -> None:
    codec = m.Codec()
    ids = itertools.count(1)
    clock = itertools.count(0.0, 0.01)  # a fake monotonic clock: the core never reads one
    engine = m.RoundEngine("tools/call", ORIGINAL_PARAMS, leg_timeout=30.0, total_timeout=300.0)
    engine.start(next(clock))
    while True:
        event = engine.next_event()
        if isinstance(event, (m.SendRequest, m.SendRetry)):
            line = codec.encode(m.Request(id=next(ids), method="tools/call", params=event.params))
            print(f"--> leg {event.leg}: {line.decode()}")
            reply = scripted_server(codec.decode(line))  # type: ignore[arg-type]
            wire = codec.encode(reply)
            print(f"<-- {wire.decode()}")
            decoded = codec.decode(wire)
            assert isinstance(decoded, m.ResultResponse)
            engine.receive_result(decoded.result, next(clock))
        elif isinstance(event, m.RoundStarted):
            print(f"    round {event.round}: the server asks for {', '.join(event.kinds)}")
        elif isinstance(event, m.DispatchInput):
            engine.provide(event.key, answer(event.request), next(clock))
        elif isinstance(event, m.Done):
            print("done:", event.result["content"][0]["text"])
            return
        elif isinstance(event, (m.Failed, m.TimedOut, m.Cancelled)):
            raise SystemExit(f"flow ended without a result: {event}")
        else:
            raise SystemExit(f"unexpected {event!r}")


if __name__ == "__main__":
    main()
