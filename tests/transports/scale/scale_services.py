"""Real redis-server and nginx for the scale-out tests, each started with its own config.

``located()`` finds (and, when missing, installs through ``scripts/services.py
install``) Debian's binaries.  ``RedisServer`` and ``Nginx`` each run one
instance in a temp dir, on free ports on 127.0.0.1, with no persistence and no
system service involved; readiness is a successful TCP connect, polled with
generous timeouts (the machine may be loaded).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SERVICES_SCRIPT = ROOT / "scripts" / "services.py"
#: How long a service may take to accept connections on a loaded machine.
START_TIMEOUT = 30.0

_located: dict[str, str] | str | None = None


def located() -> dict[str, str] | str:
    """``{"nginx": path, "redis-server": path}``, or why they cannot be had (once per session)."""
    global _located
    if _located is None:
        done = subprocess.run(
            [sys.executable, str(SERVICES_SCRIPT), "install"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode == 0:
            pairs = (line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
            _located = dict(pairs)
        else:
            reason = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            _located = f"nginx and redis-server are not available: {reason[0]}"
    return _located


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, log: Path) -> None:
    """Until ``port`` accepts a connection; AssertionError (with the log) if ``process`` dies."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited {process.returncode}: {tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{what} did not accept connections in {START_TIMEOUT} s: {tail(log)}")


def tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if process is not None and process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


class RedisServer:
    """One redis-server: no persistence (``save ""``, no AOF), 127.0.0.1 only."""

    def __init__(self, binary: str, directory: Path, port: int | None = None) -> None:
        self.binary = binary
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        config = self.directory / f"redis-{self.port}.conf"
        log = self.directory / f"redis-{self.port}.log"
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\nprotected-mode yes\ndaemonize no\n"
            f'save ""\nappendonly no\ndir {self.directory}\nlogfile {log}\n'
        )
        self.process = subprocess.Popen([self.binary, str(config)], stdout=subprocess.DEVNULL)
        wait_for_port(self.port, self.process, "redis-server", log)
        return self

    def kill(self) -> None:
        stop(self.process, signal.SIGKILL)

    def pause(self) -> None:
        """SIGSTOP: the port stays open, nothing answers."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused server cannot handle SIGTERM
        stop(self.process)


#: The proxy settings a Streamable HTTP upstream needs: HTTP/1.1 to the workers, no
#: buffering (SSE events reach the client as they are written), long reads.
PROXY_SETTINGS = """
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_cache off;
            proxy_read_timeout 300s;
            proxy_next_upstream error timeout;
"""


class Nginx:
    """One nginx (``daemon off``, its pid, logs and temp files in ``directory``).

    It listens on three ports in front of the same workers: ``port`` balances
    round-robin, ``sticky_port`` hashes the client address (every leg of a
    client's flows to one worker), and ``route_port`` sends the task methods to
    the worker their task id names (``routes``: a task id prefix, e.g. ``w1.``,
    to the worker's port; by the ``Mcp-Method`` and ``Mcp-Name`` headers) and
    balances everything else round-robin.  Its access log has one line per request,
    ``|``-separated: the test's ``X-Leg`` header, ``$upstream_addr`` (every
    worker tried, comma-separated), ``$upstream_status`` and the status.
    """

    def __init__(
        self,
        binary: str,
        directory: Path,
        workers: Sequence[int],
        routes: Mapping[str, int] | None = None,
    ) -> None:
        self.binary = binary
        self.directory = directory
        self.workers = list(workers)
        self.routes = dict(routes or {})
        self.port = free_port()
        self.sticky_port = free_port()
        self.route_port = free_port()
        self.access_log = directory / "nginx-access.log"
        self.error_log = directory / "nginx-error.log"
        self.process: subprocess.Popen[bytes] | None = None

    def config(self) -> str:
        # a worker that refused a connection is left out for a second only (a test restarts it)
        servers = "".join(
            f"        server 127.0.0.1:{port} max_fails=1 fail_timeout=1s;\n"
            for port in self.workers
        )
        temp = "".join(
            f"    {kind}_temp_path {self.directory}/{kind}-temp;\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        sites = ""
        sides = [(self.port, "round_robin"), (self.sticky_port, "sticky")]
        sides.append((self.route_port, "$task_worker"))
        for port, upstream in sides:
            sites += f"""
    server {{
        listen 127.0.0.1:{port};
        access_log {self.access_log} legs;
        location / {{
            proxy_pass http://{upstream};{PROXY_SETTINGS}        }}
    }}
"""
        user = "user root;\n" if hasattr(os, "geteuid") and os.geteuid() == 0 else ""
        return f"""{user}daemon off;
worker_processes 1;
pid {self.directory}/nginx.pid;
error_log {self.error_log} info;
events {{ worker_connections 256; }}
http {{
{temp}    log_format legs '$http_x_leg|$upstream_addr|$upstream_status|$status';
    upstream round_robin {{
{servers}    }}
    upstream sticky {{
        hash $remote_addr consistent;
{servers}    }}
{self.routing()}{sites}}}
"""

    def routing(self) -> str:
        """The task methods to the worker their task id's prefix names, the rest to the
        round robin.  One server per worker's upstream: no failover (its tasks are there)."""
        cases, upstreams = "", ""
        for number, (prefix, port) in enumerate(sorted(self.routes.items())):
            pattern = re.escape(prefix)
            cases += f'        "~^tasks/(get|update|cancel):{pattern}" task_worker_{number};\n'
            server = f"server 127.0.0.1:{port} max_fails=1 fail_timeout=1s;"
            upstreams += f"    upstream task_worker_{number} {{ {server} }}\n"
        return f"""    map "$http_mcp_method:$http_mcp_name" $task_worker {{
        default round_robin;
{cases}    }}
{upstreams}"""

    def start(self) -> Nginx:
        conf = self.directory / "nginx.conf"
        conf.write_text(self.config())
        argv = [self.binary, "-p", str(self.directory), "-c", str(conf), "-e", str(self.error_log)]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for_port(self.port, self.process, "nginx", self.error_log)
        wait_for_port(self.sticky_port, self.process, "nginx", self.error_log)
        wait_for_port(self.route_port, self.process, "nginx", self.error_log)
        return self

    def legs(self, expected: Sequence[str] = ()) -> dict[str, list[str]]:
        """``X-Leg`` -> the upstreams nginx tried for it, in order (from the access log).

        nginx logs a request once it is done with it, which may be just after the
        client read the response: wait (a while) for the ``expected`` legs.
        """
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            found = self._logged()
            if all(leg in found for leg in expected) or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def _logged(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for line in self.access_log.read_text().splitlines():
            leg, upstreams, _ = line.split("|", 2)
            # "a, b" when nginx tried a then b; "a : b" across upstream groups
            found[leg] = [addr.strip() for addr in upstreams.replace(" : ", ", ").split(",")]
        return found

    def stop(self) -> None:
        stop(self.process, signal.SIGQUIT)  # graceful: lets the access log flush
