"""Install and locate the real services the scale-out tests run: nginx and redis-server.

::

    python scripts/services.py install   # apt-get install what is missing, then print paths
    python scripts/services.py locate    # print paths; exit 1 (and say why) if one is missing

Both print one ``NAME=PATH`` line per service on stdout (``nginx=/usr/sbin/nginx``).
The packages are Debian's (``nginx``, ``redis-server``), installed with apt-get
when missing, non-interactively and *without* enabling or starting the system
services: the tests start their own instances, with their own config files in a
temp dir, on free ports on 127.0.0.1.  When the machine has no
``/usr/sbin/policy-rc.d`` (what keeps a package's postinst from starting its
service), one that refuses every start is put there for the install and removed
after.

``install`` fails (exit 1, with the reason on stderr) when it cannot install:
no apt-get, not root, no network.  The tests then skip with that reason, loudly
(see ``tests/transports/scale/conftest.py``); ``make pytest`` runs ``install``
first, so there they never skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: service name -> (Debian package, the binary, where Debian puts it)
SERVICES: dict[str, tuple[str, str, str]] = {
    "nginx": ("nginx", "nginx", "/usr/sbin/nginx"),
    "redis-server": ("redis-server", "redis-server", "/usr/bin/redis-server"),
}
#: the system units the packages enable at install, disabled again right after
UNITS = {"nginx": "nginx", "redis-server": "redis-server"}
POLICY_RC = Path("/usr/sbin/policy-rc.d")
# exit 101: "action forbidden by policy", what invoke-rc.d reads as "do not start"
DENY_ALL = "#!/bin/sh\n# written by mrtr scripts/services.py for one install\nexit 101\n"


def locate(name: str) -> str | None:
    """The path of ``name``'s binary, or None."""
    _, binary, debian_path = SERVICES[name]
    found = shutil.which(binary)
    if found:
        return found
    return debian_path if os.access(debian_path, os.X_OK) else None


def missing() -> list[str]:
    return [name for name in SERVICES if locate(name) is None]


def apt_install(packages: list[str]) -> None:
    """``apt-get install`` ``packages``, starting no service; CalledProcessError, OSError."""
    if shutil.which("apt-get") is None:
        raise OSError("apt-get is not on PATH (not a Debian machine)")
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        raise OSError("installing packages needs root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "RUNLEVEL": "1"}
    own_policy = not POLICY_RC.exists()
    if own_policy:
        POLICY_RC.write_text(DENY_ALL)
        POLICY_RC.chmod(0o755)
    try:
        flags = ["-q", "-y", "--no-install-recommends"]
        install = ["apt-get", "install", *flags, *packages]
        if subprocess.run(install, env=env, check=False).returncode != 0:
            # a stale package list is the usual reason: refresh it once, then try again
            subprocess.run(["apt-get", "update", "-q"], env=env, check=True)
            subprocess.run(install, env=env, check=True)
    finally:
        if own_policy:
            POLICY_RC.unlink(missing_ok=True)
    for package in packages:
        disable_at_boot(UNITS.get(package, package))


def disable_at_boot(unit: str) -> None:
    """Undo what the package's postinst enabled: this machine runs no system nginx or redis."""
    for command in (
        ["deb-systemd-helper", "disable", f"{unit}.service"],
        ["update-rc.d", unit, "disable"],
    ):
        if shutil.which(command[0]):
            subprocess.run(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
            )


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "locate"
    if command not in ("install", "locate"):
        sys.stderr.write("usage: services.py [install | locate]\n")
        return 2
    if command == "install" and missing():
        packages = [SERVICES[name][0] for name in missing()]
        try:
            apt_install(packages)
        except (OSError, subprocess.CalledProcessError) as exc:
            sys.stderr.write(f"services.py: cannot install {' '.join(packages)}: {exc}\n")
            return 1
    absent = missing()
    if absent:
        sys.stderr.write(f"services.py: not installed: {', '.join(absent)} (make services)\n")
        return 1
    for name in SERVICES:
        print(f"{name}={locate(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
