"""``McpAsgi``'s WebSocket under foreign ASGI servers: uvicorn with ``--ws wsproto``
(asyncio) and hypercorn's trio worker.

Each runs as a subprocess on 127.0.0.1 serving ``support.asgi_ws_app:app`` (the bare
endpoint), with its own WebSocket bounds set as docs/asgi.md says: the message size
(uvicorn ``--ws-max-size``, hypercorn ``websocket_max_message_size``; here larger than
the endpoint's ``max_message_size``, so each bound is met on its own) and the pings
(keep-alive is the server's: ASGI has no ping), uvicorn without compression.  Our
WebSocket client drives them on both loops: calls, an MRTR round, an asyncio-only tool
(uvicorn), pings answered, the refusals (Origin, path) with their statuses and bodies,
and messages past either bound closed with 1009.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from mrtr_transports.client.errors import TransportError
from mrtr_transports.client.ws import open_ws_client
from support.asgi_servers import serving
from support.asgi_ws_app import ALLOWED_ORIGIN, MAX_MESSAGE

import mrtr_core as m

pytestmark = [pytest.mark.subprocess, pytest.mark.anyio]

#: uvicorn's own bound on a message: larger than the endpoint's.
SERVER_MAX_SIZE = 2 * MAX_MESSAGE
UVICORN_WS = [
    "--ws", "wsproto",
    "--ws-max-size", str(SERVER_MAX_SIZE),
    "--ws-ping-interval", "0.2",
    "--ws-ping-timeout", "5",
    "--ws-per-message-deflate", "false",
]  # fmt: skip


#: hypercorn's: config settings (its flag for pings takes whole seconds only).
HYPERCORN_CONFIG = (
    f"websocket_max_message_size = {SERVER_MAX_SIZE}\nwebsocket_ping_interval = 0.2\n"
)


@dataclass(frozen=True)
class Served:
    server: str
    url: str


@pytest.fixture(scope="module", params=["uvicorn", "hypercorn-trio"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """Each server serving the endpoint for the whole module: its WebSocket URL."""
    where = tmp_path_factory.mktemp("asgi-ws")
    options = UVICORN_WS
    if request.param == "hypercorn-trio":
        (where / "hypercorn.toml").write_text(HYPERCORN_CONFIG)
        options = ["--config", str(where / "hypercorn.toml")]
    log = where / f"{request.param}.log"
    with serving(request.param, "support.asgi_ws_app:app", log, options=options) as base:
        yield Served(request.param, base.replace("http://", "ws://") + "/mcp")


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    return m.wire.ElicitResult(action="accept", content={"city": "Oslo"})


async def test_calls_a_round_and_an_asyncio_tool(served: Served) -> None:
    url = served.url
    with anyio.fail_after(30):
        async with open_ws_client(url, answer=answer, capabilities={"elicitation": {}}) as client:
            assert (client.era, client.protocol_version) == ("modern", "2026-07-28")
            echo = await client.call_tool("echo", {"text": "hi"})
            assert echo["content"][0]["text"] == "hi"
            trip = await client.call_tool("trip")
            assert trip["content"][0]["text"] == "Trip to Oslo"
            if served.server == "uvicorn":  # (an asyncio server: the tool awaits asyncio)
                loop = await client.call_tool("loop")
                assert loop["content"][0]["text"].startswith("asyncio ")
            await anyio.sleep(0.7)  # uvicorn pings meanwhile: the client answers, the socket stays
            again = await client.call_tool("echo", {"text": "still here"})
            assert again["content"][0]["text"] == "still here"
            link: Any = client.link
        assert link.close_received == (1000, "")  # the endpoint answered our close


async def test_a_2025_client_is_served_through_the_legacy_shim(served: Served) -> None:
    with anyio.fail_after(30):
        async with open_ws_client(
            served.url, answer=answer, era="legacy", capabilities={"elicitation": {}}
        ) as client:
            assert client.era == "legacy"
            trip = await client.call_tool("trip")
            assert trip["content"][0]["text"] == "Trip to Oslo"


async def test_refusals_have_their_status_and_a_json_rpc_body(served: Served) -> None:
    url = served.url
    with anyio.fail_after(30):
        with pytest.raises(TransportError) as foreign:
            async with open_ws_client(url, headers={"Origin": "https://evil.example"}):
                pass
        assert (foreign.value.kind, foreign.value.status) == ("http", 403)
        assert "allowed_origins" in foreign.value.message
        with pytest.raises(TransportError) as elsewhere:
            async with open_ws_client(url.replace("/mcp", "/nope")):
                pass
        assert (elsewhere.value.kind, elsewhere.value.status) == ("http", 404)
        async with open_ws_client(url, headers={"Origin": ALLOWED_ORIGIN}) as client:
            echo = await client.call_tool("echo", {"text": "allowed"})
            assert echo["content"][0]["text"] == "allowed"


@pytest.mark.parametrize(
    ("size", "whose"),
    [(MAX_MESSAGE + 500, "the endpoint's"), (SERVER_MAX_SIZE + 500, "the server's")],
    ids=["endpoint-bound", "server-bound"],
)
async def test_a_message_past_a_bound_closes_with_1009(
    served: Served, size: int, whose: str
) -> None:
    with anyio.fail_after(30):
        async with open_ws_client(served.url) as client:
            with pytest.raises(TransportError) as caught:
                await client.call_tool("echo", {"text": "x" * size})
            assert caught.value.kind == "disconnect", whose
            assert "1009" in caught.value.message, (whose, caught.value.message)
            if whose == "the endpoint's":  # (the core's rule, and its words)
                assert "max_message_size" in caught.value.message
