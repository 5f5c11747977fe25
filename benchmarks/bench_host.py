"""The host against hypercorn (configured) and uvicorn: the connection probes, and throughput.

Why: ``mrtr serve --http`` runs one ASGI endpoint (``McpAsgi``), and the
connection bounds belong to whatever hosts it.  Probed under uvicorn, McpAsgi let a
20 KiB and a 70 KiB head through and kept a head trickled at a byte a second
open past 15 s, where ``mrtr serve --http`` (``HttpServer``: the endpoint on the
host) answers 431 and 408.  This script measures, for each server, in a subprocess on 127.0.0.1:

* the probes: a 20 KiB and a 70 KiB header (the status), a request head
  trickled at 1 byte/s (what the server does, and when, within 15 s), and
  1,000 idle connections against a cap of 256 (how many the server still holds,
  and whether a real client is served, and how fast: at once, behind the flood
  in the accept queue, and a second later);
* sequential throughput: requests per second on one kept-alive connection, for a
  tiny ASGI app (``POST /echo``: the server's own cost) and for ``McpAsgi``
  (a ``tools/call``: what ``mrtr serve --http`` does), the median of batches.

The servers: ``host`` (``mrtr_transports.host``) on trio and on asyncio, with
its defaults (those of ``mrtr serve --http``); ``hypercorn`` (trio and asyncio
workers) configured as near those bounds as it goes (``h11_max_incomplete_size``
16 KiB, ``read_timeout`` 10 s, ``keep_alive_timeout`` 60 s: it has no head
deadline, no connection cap); ``uvicorn`` (h11, asyncio) with
``h11_max_incomplete_event_size`` 16 KiB, ``limit_concurrency`` 256,
``timeout_keep_alive`` 60 s; and ``mrtr-serve`` (``HttpServer`` on trio, MCP
only: what ``mrtr serve --http`` runs) as the reference.

Run: ``.venv/bin/python benchmarks/bench_host.py [--quick] [--only host-trio,...]``.
Figures, never pass or fail (``tests/transports/host`` holds the checks).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # support.asgi_apps: the MCP app both loops run

SERVERS = (
    "host-trio",
    "host-asyncio",
    "hypercorn-trio",
    "hypercorn-asyncio",
    "uvicorn",
    "mrtr-serve",
)
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
MCP_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "greet", "arguments": {"name": "Ada"}, "_meta": {}},
}


# --- The servers (run as: bench_host.py --serve KIND APP PORT) ---


async def tiny(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The smallest honest ASGI app: reads the body, answers it back."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def profile_on_signals(path: str) -> None:
    """Profile between ``SIGUSR1`` and ``SIGUSR2`` (then write the stats to ``path``):
    the server's own calls, none of the client's."""
    import cProfile
    import signal

    profiler = cProfile.Profile()

    def stop(*_: Any) -> None:
        profiler.disable()
        profiler.dump_stats(path)

    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())
    signal.signal(signal.SIGUSR2, stop)


def serve(kind: str, app_name: str, port: int) -> None:
    if os.environ.get("BENCH_PROFILE"):
        profile_on_signals(os.environ["BENCH_PROFILE"])
    if kind == "mrtr-serve":
        import trio
        from mrtr_transports.server.http import serve_http
        from support import asgi_apps

        trio.run(lambda: serve_http(asgi_apps.mcp, "127.0.0.1", port))
        return
    if app_name == "mcp":
        from mrtr_transports.asgi import McpAsgi
        from support import asgi_apps

        app: Any = McpAsgi(asgi_apps.mcp)
    else:
        app = tiny
    if kind.startswith("host-"):
        import anyio
        from mrtr_transports.host import serve_asgi

        anyio.run(lambda: serve_asgi(app, "127.0.0.1", port), backend=kind.split("-")[1])
    elif kind.startswith("hypercorn-"):
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.h11_max_incomplete_size = 16 * 1024
        config.read_timeout = 10
        config.keep_alive_timeout = 60
        config.graceful_timeout = 10
        config.keep_alive_max_requests = 10**9  # (default 1,000: a throughput run is longer)
        config.accesslog = None
        if kind.endswith("trio"):
            import trio
            from hypercorn.trio import serve as trio_serve

            trio.run(trio_serve, app, config)
        else:
            import asyncio

            from hypercorn.asyncio import serve as asyncio_serve

            asyncio.run(asyncio_serve(app, config))
    elif kind == "uvicorn":
        import uvicorn

        uvicorn.run(
            app,
            host="127.0.0.1",
            port=port,
            http="h11",
            loop="asyncio",
            h11_max_incomplete_event_size=16 * 1024,
            limit_concurrency=256,
            timeout_keep_alive=60,
            log_level="warning",
            access_log=False,
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """``kind`` serving ``app_name`` in a subprocess; with ``tree``, that source tree's
    ``mrtr_core`` and ``mrtr_transports`` (``_run_from_tree.py``: before/after figures)."""

    def __init__(self, kind: str, app_name: str, tree: str | None = None) -> None:
        self.port = free_port()
        command = [sys.executable, __file__, "--serve", kind, app_name, str(self.port)]
        if tree is not None:
            command[1:2] = [str(ROOT / "benchmarks" / "_run_from_tree.py"), tree, "bench_host"]
        paths = [str(ROOT / "tests"), str(ROOT / "benchmarks")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{kind} did not start")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


# --- The client: blocking sockets, as little work as it can ---


def read_response(sock: socket.socket, buffered: bytes = b"") -> tuple[int, bytes, bytes]:
    """(status, body, what was read past it) of one Content-Length response."""
    data = buffered
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        rest += chunk
    return int(head.split(b" ", 2)[1]), rest[:length], rest[length:]


def request_bytes(app_name: str, extra: bytes = b"") -> bytes:
    if app_name == "mcp":
        call = json.loads(json.dumps(MCP_CALL))
        call["params"]["_meta"] = META
        body = json.dumps(call).encode()
        fields = (
            b"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: greet\r\n"
        )
        target = b"/mcp"
    else:
        body = b'{"hello": "world"}'
        fields = b"Content-Type: application/json\r\n"
        target = b"/echo"
    return (
        b"POST " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + extra
        + b"Content-Length: %d\r\n\r\n" % len(body) + body
    )  # fmt: skip


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(
    served: Served, app_name: str, n: int, repeats: int
) -> tuple[float, float, float, float]:
    """On one kept-alive connection: requests per second (median, spread in %) and the
    server's CPU microseconds per request (median, spread in %).  Under a loaded
    machine the wall-clock rate is noisy; the server's CPU time per request is not."""
    data = request_bytes(app_name)
    rates = []
    costs = []
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for batch in range(repeats + 1):
            cpu = cpu_seconds(served.process.pid)
            started = time.perf_counter()
            rest = b""
            for _ in range(n):
                sock.sendall(data)
                status, _, rest = read_response(sock, rest)
                assert status == 200, (status, rest)
            if batch:  # the first is the warm-up
                rates.append(n / (time.perf_counter() - started))
                costs.append(1e6 * (cpu_seconds(served.process.pid) - cpu) / n)
    rate, cost = statistics.median(rates), statistics.median(costs)
    return (
        rate,
        100 * (max(rates) - min(rates)) / rate,
        cost,
        100 * (max(costs) - min(costs)) / cost,
    )


def probe_header(port: int, app_name: str, size: int) -> str:
    data = request_bytes(app_name, b"X-Filler: " + b"y" * size + b"\r\n")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(data)
            status, _, _ = read_response(sock)
            return str(status)
    except (ConnectionError, OSError) as exc:
        return f"closed ({type(exc).__name__})"


def probe_trickle(port: int, app_name: str, cap: float) -> str:
    """A head at one byte a second: what the server does, and after how long."""
    data = request_bytes(app_name)
    sock = socket.create_connection(("127.0.0.1", port))
    started = time.monotonic()
    try:
        for byte in data:
            if time.monotonic() - started > cap:
                return f"still open at {cap:.0f} s"
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return f"reset at {time.monotonic() - started:.1f} s"
            readable, _, _ = select.select([sock], [], [], 1.0)
            if readable:
                try:
                    received = sock.recv(65536)
                except OSError:
                    return f"reset at {time.monotonic() - started:.1f} s"
                at = time.monotonic() - started
                if not received:
                    return f"closed at {at:.1f} s"
                return f"{received.split(b' ', 2)[1].decode()} at {at:.1f} s"
        return "whole head sent"
    finally:
        sock.close()


def real_client(port: int, app_name: str) -> str:
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request_bytes(app_name))
            status, _, _ = read_response(sock)
            return f"{status} in {1000 * (time.monotonic() - started):.0f} ms"
    except (ConnectionError, OSError) as exc:
        return f"failed ({type(exc).__name__})"


def probe_idle(port: int, app_name: str, count: int) -> str:
    """``count`` connections that send nothing, then a real client at once (behind the
    flood in the accept queue) and one a second later."""
    idle = []
    for _ in range(count):
        try:
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    at_once = real_client(port, app_name)
    time.sleep(1.0)
    later = real_client(port, app_name)
    held = 0
    for sock in idle:
        sock.setblocking(False)
        try:
            sock.recv(1, socket.MSG_PEEK)  # a refusal, or the close: not held
        except BlockingIOError:
            held += 1  # nothing to read, not closed: the server holds it
        except OSError:
            pass
        sock.close()
    return f"{held}/{len(idle)} held; a real client: {at_once} at once, {later} 1 s later"


def probes(port: int, app_name: str) -> list[tuple[str, str]]:
    """Each probe's name and what the server did."""
    return [
        ("20 KiB header", probe_header(port, app_name, 20 * 1024)),
        ("70 KiB header", probe_header(port, app_name, 70 * 1024)),
        ("1,000 idle", probe_idle(port, app_name, 1000)),
        ("head at 1 B/s", probe_trickle(port, app_name, 15.0)),
    ]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", nargs=3, metavar=("KIND", "APP", "PORT"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(SERVERS))
    parser.add_argument("--no-probes", action="store_true")
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve[0], args.serve[1], int(args.serve[2]))
        return
    n, repeats = (300, 3) if args.quick else (2000, 5)
    print(f"# python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    for kind in args.only.split(","):
        apps = ("mcp",) if kind == "mrtr-serve" else ("tiny", "mcp")
        for app_name in apps:
            served = Served(kind, app_name)
            try:
                rate, spread, cost, cost_spread = throughput(served, app_name, n, repeats)
                print(
                    f"{kind:18} {app_name:4}  {rate:6.0f} req/s (±{spread:.0f}%)  "
                    f"server CPU {cost:5.0f} µs/req (±{cost_spread:.0f}%)",
                    flush=True,
                )
                if app_name == "mcp" and not args.no_probes:
                    for name, line in probes(served.port, app_name):
                        print(f"{kind:18} {name:14} {line}", flush=True)
            finally:
                served.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
