"""A client that drops its connection in the middle of an SSE response (HTTP subprocess).

The tool is ``streamed``: its first leg asks a question, its second (the
retry, with the answer and the ``requestState``) streams progress
notifications for a while before its result.  The client reads the stream's
head and its first progress event, then drops the connection.  What must
hold: the server cancels the handler and frees the connection's slot (a
whole ``max_connections`` worth of clients is served at once afterwards).
Then the same round is sent again, with the same ``requestState``:

* by an app without a single-use store (``support.load_app:unspent``) it is
  served again, to its result;
* by an app with one (the default: every redeemed state is spent before its
  handler runs, docs/server.md) it is refused as documented, -32602 with
  ``data.reason == "replayed"``, and a side effect the handler had done
  (``ctx.once``) happened once.  The client starts the call over.
"""

from __future__ import annotations

from typing import Any

import trio
from support.load_servers import http_server
from support.raw_http import (
    RawHttp,
    echo,
    hold_served,
    post_when_served,
    retry_of,
    sse_messages,
    tool_call,
)

BUDGET = 60
SLOTS = 4
UNSPENT = "support.load_app:unspent"


async def stats(port: int) -> dict[str, Any]:
    reply = await post_when_served(port, tool_call("stats"))
    figures: dict[str, Any] = reply.json()["result"]["structuredContent"]
    return figures


async def drop_in_the_middle(port: int, guarded: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Leg 1, then leg 2 dropped after its first progress event; (leg 2, stats after)."""
    arguments = {"n": 5, "guarded": guarded, "steps": 20, "interval": 0.1}
    first = tool_call("streamed", arguments, progress_token="p5")
    asked = (await post_when_served(port, first)).json()["result"]
    assert asked["resultType"] == "input_required", asked
    second = retry_of(first, {"go": echo("streamed 5")}, asked["requestState"])
    conn = await RawHttp.connect(port)
    await conn.send(second)
    head = await conn.head()
    assert dict(head.headers)[b"content-type"] == b"text/event-stream"
    seen = await conn.read_until(b"notifications/progress")
    assert b"step 1 of flow 5" in seen
    await conn.aclose()  # gone, two seconds before the result
    # The server notices, cancels the handler and closes its side.
    while (now := await stats(port))["running"] != 0:
        await trio.sleep(0.05)
    return second, now


async def test_a_dropped_stream_frees_its_slot_and_the_round_can_be_sent_again() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=SLOTS, app=UNSPENT) as server:
            second, after = await drop_in_the_middle(server.port, guarded=False)
            assert (after["started"], after["cancelled"], after["finished"]) == (1, 1, 0)
            # No slot leaked: max_connections clients at once, each served.
            for conn in await hold_served(server.port, SLOTS):
                await conn.aclose()
            # The same round again, the same requestState: it runs to its result.
            replay = await post_when_served(server.port, {**second, "id": 3})
            messages = sse_messages(replay.body)
            final = messages[-1]
            assert final["id"] == 3
            assert final["result"]["content"][0]["text"] == "streamed 5"
            assert sum(msg.get("method") == "notifications/progress" for msg in messages) == 20
            assert (await stats(server.port))["finished"] == 1


async def test_with_a_single_use_store_the_round_sent_again_is_refused_as_replayed() -> None:
    with trio.fail_after(BUDGET):
        async with http_server(max_connections=SLOTS) as server:
            second, after = await drop_in_the_middle(server.port, guarded=True)
            assert after["effects"] == 1 and after["cancelled"] == 1
            for conn in await hold_served(server.port, SLOTS):
                await conn.aclose()
            replay = await post_when_served(server.port, {**second, "id": 3})
            assert replay.status == 400
            error = replay.json()["error"]
            assert error["code"] == -32602
            assert error["data"] == {"reason": "replayed"}
            final = await stats(server.port)
            assert final["effects"] == 1  # not done twice
            assert final["started"] == 1  # refused before the handler ran again
