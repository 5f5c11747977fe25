"""The server's hot step: one retry line in, the handler's input, one result line out.

The mirror of ``bench_round_step.py`` on the server.  A ``tools/call`` retry comes
in with its answer in ``inputResponses`` and the sealed ``requestState`` of the leg
before; the server opens and verifies the state, spends its nonce once, reads the
answer against what was asked (validated against the ``requestedSchema``), runs
the handler, and writes its result.  Two cases:

* ``final`` -- the handler's result is complete (``Booked``);
* ``ask``   -- the handler asks one more question: an ``input_required`` result
               with a freshly sealed ``requestState`` (the same HMAC-SHA256 sealer).

For each JSON backend (stdlib ``json``, ``orjson``), in one run:

* ``floor``      -- the bare libraries only: ``loads(line)``; split the token,
                    ``hmac.compare_digest`` of its HMAC-SHA256, ``b64decode`` +
                    ``loads`` of its payload, its expiry and method, the SHA-256 of the
                    canonical salient params against the one sealed in it, its nonce
                    into a set; for ``ask`` a new payload (a fresh random nonce) sealed
                    the same way (canonical ``dumps``, ``b64encode``, HMAC from a key
                    schedule made once); ``dumps(result)``.
                    No schema validation, no typed objects: the least any server
                    that keeps its state in a sealed token must spend;
* ``core``       -- the sans-IO server core: ``Codec.decode`` -> the request's
                    ``_meta`` read -> ``mrtr_core.server.run_handler`` (open, spend,
                    answers, handler, seal) -> the result checked and completed as a
                    connection does (``finish_result``) -> ``Codec.encode(ResultResponse)``;
* ``connection`` -- the same through a server ``mrtr_core.Connection``:
                    ``receive_data`` -> ``next_event`` (the ``Request``) ->
                    ``request_info`` -> ``run_handler`` -> ``send(ResultResponse)``
                    (the connection checks and completes the result and frames it);
* ``app``        -- the app framework: the same ``Connection`` steps around
                    ``McpApp.handle`` (tool lookup, ``inputSchema`` check of the
                    arguments, ``open_leg``, the single-use store, ``Context``,
                    ``close_leg``, the tool result), run without trio: its coroutine
                    never suspends, so one ``send(None)`` finishes it;
* ``mcp``        -- the ``mcp`` 2.3.0 SDK's message-level step (only in the orjson
                    table, where it belongs to no backend: pydantic parses and writes):
                    ``jsonrpc_message_adapter.validate_json`` -> ``CallToolRequestParams``
                    -> the SDK's AES-GCM ``unseal`` of the state -> the typed answer ->
                    ``CallToolResult`` (or ``InputRequiredResult`` with a new ``seal``)
                    -> ``JSONRPCResponse(...).model_dump_json``.  The SDK checks no
                    answer against its schema here and binds no params: it does less.

Memory: bytes per outstanding nonce in ``MemoryNonceStore`` and in the app's
``MemorySingleUse``, and per parked continuation (``ContinuationStore``), by
``tracemalloc`` over 10,000 of each.

Each row is the median of ``repeats`` batches with its spread (``_harness``).  Each
step needs a token never spent before, so the lines of a batch are sealed (and the
stores made fresh) before its timer starts.  No pass/fail.
Run: ``nice -n 10 .venv/bin/python benchmarks/bench_server_step.py [--quick]``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import gc
import hashlib
import hmac
import json
import secrets
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from _harness import Stats, machine, ratio

import mrtr_core as m
from mrtr_core._connection._server_rules import finish_result
from mrtr_core._meta import read_modern_request

TOOL_FINAL = "book_table"
TOOL_ASK = "book_slot"
ARGUMENTS = {"restaurant": "Casa Lisboa", "party": 4}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0.1.0"},
}
ANSWER = {"action": "accept", "content": {"confirm": True, "note": "window seat"}}
VERSIONS = ("2026-07-28",)
SERVER_INFO = {"name": "bench-server", "version": "1.0"}
NOW = 1_000_000.0
KEY = b"k" * 32
ROUND_KEYS = ("_meta", "inputResponses", "requestState")

ASK_CONFIRM = m.server.elicit_form(
    "Book a table for 4 at 20:00?",
    {"confirm": {"type": "boolean"}, "note": {"type": "string", "maxLength": 200}},
    required=["confirm"],
)
ASK_TIME = m.server.elicit_form(
    "Which time?", {"time": {"type": "string", "format": "date-time"}}, required=["time"]
)
BOOKED = {"content": [{"type": "text", "text": "Booked: window seat"}]}


def handler_final(ctx: m.server.HandlerContext) -> Any:
    reply = ctx.answer("confirm", ASK_CONFIRM)
    if not isinstance(reply, m.wire.ElicitResult) or reply.content is None:
        return ctx.ask({"confirm": ASK_CONFIRM})
    return {"content": [{"type": "text", "text": f"Booked: {reply.content['note']}"}]}


def handler_ask(ctx: m.server.HandlerContext) -> Any:
    if ctx.state is None:
        reply = ctx.answer("confirm", ASK_CONFIRM)
        if not isinstance(reply, m.wire.ElicitResult) or reply.content is None:
            return ctx.ask({"confirm": ASK_CONFIRM})
        return ctx.ask({"time": ASK_TIME}, state={"note": reply.content["note"]})
    return BOOKED  # (the leg after this benchmark's step)


HANDLERS = {TOOL_FINAL: handler_final, TOOL_ASK: handler_ask}


# --- the lines -------------------------------------------------------------------------


def first_params(tool: str) -> dict[str, Any]:
    return {"name": tool, "arguments": ARGUMENTS, "_meta": META}


def new_sealer() -> m.server.StateSealer:
    return m.server.StateSealer({"k1": KEY}, "k1", store=m.server.MemoryNonceStore(1_000_000))


def first_leg_state(sealer: m.server.StateSealer, tool: str) -> str:
    """The sealed state the first leg (which asks ``confirm``) hands the client."""
    params = first_params(tool)
    request = m.Request(id=1, method="tools/call", params=params)
    info = read_modern_request(1, "tools/call", params, VERSIONS)
    result = m.server.run_handler(
        HANDLERS[tool], request, info, sealer=sealer, principal=None, now=NOW - 1
    )
    state = result["requestState"]
    assert isinstance(state, str)
    return state


def retry_line(sealer: m.server.StateSealer, tool: str, request_id: int = 2) -> bytes:
    params = dict(first_params(tool))
    params["inputResponses"] = {"confirm": ANSWER}
    params["requestState"] = first_leg_state(sealer, tool)
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    return json.dumps(message, separators=(",", ":")).encode()


def fresh_lines(tool: str, n: int) -> tuple[m.server.StateSealer, list[bytes]]:
    sealer = new_sealer()
    return sealer, [retry_line(sealer, tool, 2 + i) for i in range(n)]


# --- the floor ---------------------------------------------------------------------------


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_KEYED = hmac.new(KEY, digestmod=hashlib.sha256)  # keyed once, copied per MAC (as ours)


def _mac(signed: bytes) -> str:
    mac = _KEYED.copy()
    mac.update(signed)
    return _b64e(mac.digest())


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def floor_step(
    loads: Callable[[bytes], Any], dumps: Callable[[Any], bytes], ask: bool
) -> Callable[[bytes, set[str]], bytes]:
    ask_result = {
        "resultType": "input_required",
        "inputRequests": {
            "time": {
                "method": "elicitation/create",
                "params": {
                    "message": ASK_TIME.message,
                    "requestedSchema": ASK_TIME.requested_schema,
                },
            }
        },
    }

    def step(line: bytes, spent: set[str]) -> bytes:
        message = loads(line)
        params = message["params"]
        version, key_id, body, mac = params["requestState"].split(".")
        signed = f"{version}.{key_id}.{body}".encode("ascii")
        assert hmac.compare_digest(mac, _mac(signed))
        payload = json.loads(_b64d(body))
        assert payload["exp"] >= NOW and payload["m"] == message["method"]
        salient = {k: v for k, v in params.items() if k not in ROUND_KEYS}
        digest = _b64e(hashlib.sha256(_canonical(salient)).digest())
        assert payload["a"] == digest
        assert payload["n"] not in spent
        spent.add(payload["n"])
        if not ask:
            result = {"content": [{"type": "text", "text": "Booked: window seat"}]}
            result["resultType"] = "complete"
        else:
            new = {
                "m": message["method"],
                "a": digest,
                "p": None,
                "iat": NOW,
                "exp": NOW + 600,
                "n": secrets.token_urlsafe(16),
                "s": {"f": "flow", "d": NOW + 3600, "g": [], "q": {"time": "elicitation"}, "v": {}},
            }
            new_body = _b64e(_canonical(new))
            signed = f"{version}.{key_id}.{new_body}".encode("ascii")
            token = f"{version}.{key_id}.{new_body}.{_mac(signed)}"
            result = dict(ask_result, requestState=token)
        result["_meta"] = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
        return dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + b"\n"

    return step


# --- our paths ---------------------------------------------------------------------------


def core_step(codec: m.wire.Codec, tool: str) -> Callable[[bytes, m.server.StateSealer], bytes]:
    handler = HANDLERS[tool]

    def step(line: bytes, sealer: m.server.StateSealer) -> bytes:
        request = codec.decode(line)
        assert isinstance(request, m.Request) and request.params is not None
        info = read_modern_request(request.id, request.method, request.params, VERSIONS)
        result = m.server.run_handler(
            handler, request, info, sealer=sealer, principal=None, now=NOW
        )
        result = finish_result(
            info, result, server_info=SERVER_INFO, cache_ttl_ms=0, cache_scope="private"
        )
        return codec.encode(m.ResultResponse(id=request.id, result=result))

    return step


def server_connection(codec: m.wire.Codec) -> m.Connection:
    return m.Connection(
        m.SERVER, era="modern", json=codec, info=SERVER_INFO, capabilities={"tools": {}}
    )


def connection_step(tool: str) -> Callable[[m.Connection, bytes, m.server.StateSealer], bytes]:
    handler = HANDLERS[tool]

    def step(conn: m.Connection, line: bytes, sealer: m.server.StateSealer) -> bytes:
        conn.receive_data(line)
        request = conn.next_event()
        assert isinstance(request, m.Request)
        info = conn.request_info(request.id)
        result = m.server.run_handler(
            handler, request, info, sealer=sealer, principal=None, now=NOW
        )
        return conn.send(m.ResultResponse(id=request.id, result=result))

    return step


class _NoOutlet:
    async def progress(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the benchmark tools stream nothing")

    log = notify = progress


def bench_app(sealer: m.server.StateSealer) -> Any:
    from mrtr_transports.apps.mcp_app import McpApp

    app = McpApp("bench-server", "1.0", sealer=sealer, clock=lambda: NOW)
    schema = {
        "type": "object",
        "properties": {"restaurant": {"type": "string"}, "party": {"type": "integer"}},
        "required": ["restaurant", "party"],
    }
    app.tool(TOOL_FINAL, input_schema=schema)(handler_final)
    app.tool(TOOL_ASK, input_schema=schema)(handler_ask)
    return app


def app_step(app: Any) -> Callable[[m.Connection, bytes], bytes]:
    outlet = _NoOutlet()

    def step(conn: m.Connection, line: bytes) -> bytes:
        conn.receive_data(line)
        request = conn.next_event()
        assert isinstance(request, m.Request)
        coroutine = app.handle(request, conn.request_info(request.id), outlet)
        try:
            coroutine.send(None)
        except StopIteration as done:
            result = done.value
        else:  # pragma: no cover - the benchmark's tools never suspend
            raise AssertionError("the app step suspended")
        return conn.send(m.ResultResponse(id=request.id, result=result))

    return step


# --- the mcp SDK -------------------------------------------------------------------------


def mcp_step(ask: bool) -> tuple[Callable[[bytes], bytes], Callable[[int], bytes]] | None:
    try:
        import mcp_types as t
        from mcp.server.request_state import AESGCMRequestStateCodec
    except ImportError:
        return None
    codec = AESGCMRequestStateCodec([KEY])
    ask_time = t.ElicitRequest(
        params=t.ElicitRequestFormParams(
            message=ASK_TIME.message, requested_schema=ASK_TIME.requested_schema
        )
    )

    def line_for(request_id: int) -> bytes:
        state = codec.seal(b'{"asked":["confirm"]}')
        params = {**first_params(TOOL_ASK if ask else TOOL_FINAL)}
        params["inputResponses"] = {"confirm": ANSWER}
        params["requestState"] = state
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return json.dumps(message, separators=(",", ":")).encode()

    def step(line: bytes) -> bytes:
        message = t.jsonrpc_message_adapter.validate_json(line, by_name=False)
        params = t.CallToolRequestParams.model_validate(message.params, by_name=False)
        codec.unseal(params.request_state)
        reply = (params.input_responses or {})["confirm"]
        assert isinstance(reply, t.ElicitResult) and reply.content
        result: Any
        if ask:
            state = codec.seal(b'{"asked":["time"],"note":"window seat"}')
            result = t.InputRequiredResult(input_requests={"time": ask_time}, request_state=state)
        else:
            text = f"Booked: {reply.content['note']}"
            result = t.CallToolResult(content=[t.TextContent(type="text", text=text)])
        response = t.JSONRPCResponse(
            jsonrpc="2.0", id=message.id, result=result.model_dump(by_alias=True, exclude_none=True)
        )
        return response.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"

    return step, line_for


def mcp_batch(
    step: Callable[[bytes], bytes], line_for: Callable[[int], bytes]
) -> Callable[[int], float]:
    def batch(k: int) -> float:
        lines = [line_for(2 + i) for i in range(k)]
        t0 = time.perf_counter()
        for line in lines:
            step(line)
        return time.perf_counter() - t0

    return batch


# --- memory ------------------------------------------------------------------------------


def bytes_per(make: Callable[[], Any], add: Callable[[Any, int], None], count: int) -> float:
    holder = make()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for i in range(count):
        add(holder, i)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return grown / count


def memory_rows(count: int) -> list[tuple[str, float]]:
    from mrtr_transports.apps.single_use import MemorySingleUse

    nonce = m.server.MemoryNonceStore(count * 2)

    def add_nonce(store: Any, i: int) -> None:
        store.consume(f"{i:022d}", NOW + 600 + i, NOW)

    def add_single_use(store: Any, i: int) -> None:
        coroutine = store.consume(f"{i:022d}", NOW + 600 + i, NOW)
        with contextlib.suppress(StopIteration):
            coroutine.send(None)

    rows = [
        ("outstanding nonce (MemoryNonceStore)", bytes_per(lambda: nonce, add_nonce, count)),
        (
            "outstanding nonce (apps MemorySingleUse)",
            bytes_per(lambda: MemorySingleUse(count * 2), add_single_use, count),
        ),
    ]
    parked = parked_continuation_bytes(count)
    if parked is not None:
        rows.append(("parked continuation (ContinuationStore, trio)", parked))
    return rows


def parked_continuation_bytes(count: int) -> float | None:
    """Bytes per continuation-style tool call parked at its first ask (trio tasks)."""
    try:
        import trio
    except ImportError:  # pragma: no cover
        return None
    from mrtr_transports.apps.context import Context
    from mrtr_transports.apps.mcp_app import McpApp

    app = McpApp("bench-server", "1.0", sealer=new_sealer(), clock=lambda: NOW)
    from mrtr_transports.apps.continuations import ContinuationStore

    app.continuations = ContinuationStore(max_parked=count * 2, idle_timeout=3600)

    @app.tool("wait", continuation=True)
    async def wait(ctx: Context) -> str:
        answers = await ctx.wait_for({"confirm": ASK_CONFIRM})
        return "ok" if "confirm" in answers else "no"

    outlet = _NoOutlet()
    info_params = first_params("wait")
    info = read_modern_request(1, "tools/call", info_params, VERSIONS)
    grown = 0.0

    async def main() -> None:
        nonlocal grown
        async with trio.open_nursery() as nursery:
            app.continuations._nursery = nursery  # type: ignore[union-attr]
            await trio.sleep(0)
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            for i in range(count):
                request = m.Request(id=i, method="tools/call", params=info_params)
                await app.handle(request, info, outlet)
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
            grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    except Exception as exc:  # the memory row is best effort
        print(f"(parked continuation row skipped: {exc!r})")
        return None
    return grown / count


# --- where the time goes (--profile) ----------------------------------------------------


OURS_SEGMENTS = (
    "receive: line -> Request, RequestInfo",
    "open: sealer.open (MAC, payload, digest)",
    "context: state read, HandlerContext",
    "spend: nonce into the store",
    "handler: answer read + checked, ask",
    "close_leg: result (ask: seal + build)",
    "send: finish_result + encode + frame",
)
FLOOR_SEGMENTS = (
    "loads",
    "MAC verify",
    "payload b64decode + loads",
    "params digest (canonical + SHA-256)",
    "nonce into a set",
    "seal the next (ask)",
    "dumps",
)


def profile(tool: str, ask: bool, n: int, repeats: int) -> None:
    """Each segment of the orjson connection step and of the floor, timed inside the
    step with ``perf_counter_ns`` (about 0.1 us of timer per segment), medians."""
    import statistics

    import orjson

    from mrtr_core.server import _handlers

    clock = time.perf_counter_ns
    handler = HANDLERS[tool]
    codec = m.wire.Codec("orjson")
    ours: dict[str, list[float]] = {k: [] for k in OURS_SEGMENTS}
    floor: dict[str, list[float]] = {k: [] for k in FLOOR_SEGMENTS}
    for _ in range(repeats):
        sealer, lines = fresh_lines(tool, n)
        conn = server_connection(codec)
        spent = dict.fromkeys(OURS_SEGMENTS, 0)
        for line in lines:
            t0 = clock()
            conn.receive_data(line + b"\n")
            request = conn.next_event()
            assert isinstance(request, m.Request) and request.params is not None
            info = conn.request_info(request.id)
            t1 = clock()
            opened = sealer.open(
                request.params["requestState"],
                method=info.method,
                params=request.params,
                principal=None,
                now=NOW,
            )
            t2 = clock()
            flow, deadline, guards, proven, state = _handlers._read_state(opened)
            ctx = m.server.HandlerContext(
                request,
                info,
                opened=opened,
                flow=flow,
                deadline=deadline,
                guards=guards,
                state=state,
                sealer=sealer,
                principal=None,
                now=NOW,
                proven=proven,
            )
            t3 = clock()
            m.server._handlers.spend_redeemed(ctx, sealer.store)
            t4 = clock()
            outcome = handler(ctx)
            t5 = clock()
            result = m.server.close_leg(ctx, outcome)
            t6 = clock()
            conn.send(m.ResultResponse(id=request.id, result=result))
            t7 = clock()
            for key, start, end in zip(
                OURS_SEGMENTS,
                (t0, t1, t2, t3, t4, t5, t6),
                (t1, t2, t3, t4, t5, t6, t7),
                strict=True,
            ):
                spent[key] += end - start
        for key in OURS_SEGMENTS:
            ours[key].append(spent[key] / n / 1000)

        _, lines = fresh_lines(tool, n)
        seen: set[str] = set()
        spent = dict.fromkeys(FLOOR_SEGMENTS, 0)
        for line in lines:
            t0 = clock()
            message = orjson.loads(line)
            params = message["params"]
            t1 = clock()
            version, key_id, body, mac = params["requestState"].split(".")
            assert hmac.compare_digest(mac, _mac(f"{version}.{key_id}.{body}".encode("ascii")))
            t2 = clock()
            payload = orjson.loads(_b64d(body))
            t3 = clock()
            salient = {k: v for k, v in params.items() if k not in ROUND_KEYS}
            digest = _b64e(hashlib.sha256(_canonical(salient)).digest())
            assert payload["a"] == digest
            t4 = clock()
            assert payload["n"] not in seen
            seen.add(payload["n"])
            t5 = clock()
            if ask:
                new = {"m": "tools/call", "a": digest, "p": None, "iat": NOW, "exp": NOW + 600}
                new["n"] = secrets.token_urlsafe(16)
                new["s"] = {"f": "flow", "d": NOW + 3600, "g": [], "q": {"time": "x"}, "v": {}}
                sealed = _b64e(_canonical(new))
                _mac(f"{version}.{key_id}.{sealed}".encode("ascii"))
            t6 = clock()
            orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": BOOKED})
            t7 = clock()
            for key, start, end in zip(
                FLOOR_SEGMENTS,
                (t0, t1, t2, t3, t4, t5, t6),
                (t1, t2, t3, t4, t5, t6, t7),
                strict=True,
            ):
                spent[key] += end - start
        for key in FLOOR_SEGMENTS:
            floor[key].append(spent[key] / n / 1000)

    for title, table in (("ours: server Connection, orjson", ours), ("floor, orjson", floor)):
        print(f"  {title} ({'ask' if ask else 'final'} case)")
        total = 0.0
        for key, values in table.items():
            median = statistics.median(values)
            total += median
            print(f"    {key:<42} {median:7.2f} us")
        print(f"    {'sum':<42} {total:7.2f} us")


# --- running -----------------------------------------------------------------------------


def check_same_value(ours: bytes, floor: bytes, ask: bool) -> None:
    a, b = json.loads(ours), json.loads(floor)
    if ask:  # the sealed tokens differ (fresh nonce, flow id): compare all but them
        a["result"].pop("requestState")
        b["result"].pop("requestState")
    assert a == b, (a, b)


def stdlib_dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (noisier figures)")
    parser.add_argument(
        "--profile", action="store_true", help="only the time of each segment of the step"
    )
    args = parser.parse_args()
    n, repeats = (1_000, 3) if args.quick else (5_000, 7)
    if args.profile:
        print(machine(("mrtr", "orjson", "jsonschema-rs")))
        for tool, ask in ((TOOL_FINAL, False), (TOOL_ASK, True)):
            profile(tool, ask, n, repeats)
        return
    memory_count = 2_000 if args.quick else 10_000

    backends: list[tuple[str, Callable[[bytes], Any], Callable[[Any], bytes]]] = [
        ("stdlib", json.loads, stdlib_dumps)
    ]
    try:
        import orjson
    except ImportError:
        print("orjson is not installed: its rows are skipped (pip install 'mrtr[speedups]')")
    else:
        backends.append(("orjson", orjson.loads, orjson.dumps))

    print(machine(("mrtr", "orjson", "jsonschema-rs", "mcp", "pydantic")))
    print(
        f"median of {repeats} batches x {n} steps, the rows of a case interleaved batch by "
        "batch (spread: fastest/slowest batch; best: ratio of the fastest batches)"
    )
    print(
        f"{'case':<6} {'backend':<7} {'path':<11} {'us/step':>8} {'spread':>10} "
        f"{'ours/floor':>10} {'best':>6} {'mcp/ours':>9}"
    )
    for case, tool, ask in (("final", TOOL_FINAL, False), ("ask", TOOL_ASK, True)):
        batches: dict[tuple[str, str], Callable[[int], float]] = {}
        for name, loads, dumps in backends:
            codec = m.wire.Codec(name)  # type: ignore[arg-type]
            for path, batch in paths(codec, tool, ask, loads, dumps):
                batches[(name, path)] = batch
        mcp = mcp_step(ask)
        if mcp is not None:
            batches[("-", "mcp 2.3.0")] = mcp_batch(*mcp)
        found = measure_interleaved(batches, n, repeats)
        mcp_stats = found.get(("-", "mcp 2.3.0"))
        for (name, path), stats in found.items():
            floor = found[(backends[-1][0] if name == "-" else name, "floor")]
            shown = "-" if stats is floor else f"{ratio(stats, floor):.2f}x"
            best = "-" if stats is floor else f"{min(stats.seconds) / min(floor.seconds):.2f}x"
            vs_mcp = f"{ratio(mcp_stats, stats):.1f}x" if mcp_stats else "-"
            print(
                f"{case:<6} {name:<7} {path:<11} {stats.us():>8.2f} {stats.spread:>10} "
                f"{shown:>10} {best:>6} {vs_mcp:>9}"
            )
    print("targets: ours/floor <= 1.5x (stdlib), <= 2.5x (orjson); mcp/ours >= 8x (orjson)")
    print(f"memory, by tracemalloc over {memory_count:,}:")
    for what, size in memory_rows(memory_count):
        print(f"  {what:<48} {size:>7.0f} bytes each")


def measure_interleaved(
    batches: dict[tuple[str, str], Callable[[int], float]], n: int, repeats: int
) -> dict[tuple[str, str], Stats]:
    """``_harness.measure`` for several rows at once, their batches taken in turn
    (warm-up first, the collector paused inside each batch): on a shared machine a
    burst of load then falls on every row of the comparison, not on one."""
    for batch in batches.values():
        batch(max(n // 10, 1))
    seconds: dict[tuple[str, str], list[float]] = {key: [] for key in batches}
    for _ in range(repeats):
        for key, batch in batches.items():
            gc.collect()
            gc.disable()
            try:
                seconds[key].append(batch(n) / n)
            finally:
                gc.enable()
    return {key: Stats(tuple(found)) for key, found in seconds.items()}


def paths(
    codec: m.wire.Codec,
    tool: str,
    ask: bool,
    loads: Callable[[bytes], Any],
    dumps: Callable[[Any], bytes],
) -> list[tuple[str, Callable[[int], float]]]:
    floor = floor_step(loads, dumps, ask)
    core = core_step(codec, tool)
    through = connection_step(tool)

    # Check once that every path writes what the floor writes.
    sealer, (line,) = fresh_lines(tool, 1)
    expected = floor(line, set())
    check_same_value(core(line, sealer), expected, ask)
    sealer, (line,) = fresh_lines(tool, 1)
    check_same_value(through(server_connection(codec), line + b"\n", sealer), expected, ask)
    sealer, (line,) = fresh_lines(tool, 1)
    check_same_value(
        app_step(bench_app(sealer))(server_connection(codec), line + b"\n"), expected, ask
    )

    def floor_batch(k: int) -> float:
        _, lines = fresh_lines(tool, k)
        spent: set[str] = set()
        t0 = time.perf_counter()
        for line in lines:
            floor(line, spent)
        return time.perf_counter() - t0

    def core_batch(k: int) -> float:
        sealer, lines = fresh_lines(tool, k)
        t0 = time.perf_counter()
        for line in lines:
            core(line, sealer)
        return time.perf_counter() - t0

    def connection_batch(k: int) -> float:
        sealer, lines = fresh_lines(tool, k)
        conn = server_connection(codec)
        framed = [line + b"\n" for line in lines]
        t0 = time.perf_counter()
        for line in framed:
            through(conn, line, sealer)
        return time.perf_counter() - t0

    def app_batch(k: int) -> float:
        sealer, lines = fresh_lines(tool, k)
        step = app_step(bench_app(sealer))
        conn = server_connection(codec)
        framed = [line + b"\n" for line in lines]
        t0 = time.perf_counter()
        for line in framed:
            step(conn, line)
        return time.perf_counter() - t0

    return [
        ("floor", floor_batch),
        ("core", core_batch),
        ("connection", connection_batch),
        ("app", app_batch),
    ]


if __name__ == "__main__":
    main()
