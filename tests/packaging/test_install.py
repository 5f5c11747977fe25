"""``pip install .`` into a fresh virtualenv, as a user would, with no make and no editable.

One virtualenv for the module: first the core alone (``pip install .``), whose ``mrtr``
script must say in one line which extra it needs; then ``pip install '.[transports]'``,
after which ``mrtr serve --http`` (a real subprocess on 127.0.0.1) serves the example app
and a user's own program, and ``mrtr call`` answers their questions with ``--answer``;
a typed program hands its app to every host and the test client and runs its calls; last,
``mypy --strict`` checks the user's programs against the installed packages (through their
``py.typed``).  The build reads a copy of what a source distribution holds, so the work
tree is left as it was; dependencies come from pip's cache or the index.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.user_program import greet_program, typed_program

ROOT = Path(__file__).resolve().parents[2]
#: What the build needs: a source distribution's content.
SOURCE = ("pyproject.toml", "README.md", "LICENSE", "mrtr_core", "transports")
#: Seconds for one pip run (a build, and dependencies from the cache or the index).
PIP_TIMEOUT = 300


def _run(
    argv: Sequence[str | Path], *, timeout: float = 60, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )


def _pip_install(venv: Path, source: Path, requirement: str) -> None:
    done = _run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", requirement],
        cwd=source,
        timeout=PIP_TIMEOUT,
    )
    assert done.returncode == 0, f"pip install {requirement} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new virtualenv (no packages but pip) and the source copy it installs from."""
    home = tmp_path_factory.mktemp("fresh")
    source = home / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCE:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    venv = home / "venv"
    made = _run([sys.executable, "-m", "venv", venv], timeout=120)
    assert made.returncode == 0, made.stderr
    yield venv


@pytest.fixture(scope="module")
def core_only(fresh: Path) -> Path:
    _pip_install(fresh, fresh.parent / "src", ".")
    return fresh


@pytest.fixture(scope="module")
def with_transports(core_only: Path) -> Path:
    _pip_install(core_only, core_only.parent / "src", ".[transports]")
    return core_only


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without the project's own paths (the fresh venv must stand alone)."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return {**env, **extra}


def test_the_core_alone_installs_and_its_command_names_the_extra(core_only: Path) -> None:
    python = core_only / "bin" / "python"
    probe = (
        "import importlib.metadata as md, importlib.util, json, mrtr_core, mrtr_transports\n"
        "print(json.dumps([mrtr_core.__version__, mrtr_transports.__version__,"
        " md.version('mrtr'), importlib.util.find_spec('trio') is None]))"
    )
    ran = _run([python, "-c", probe], env=_clean_env(), cwd=core_only)
    assert ran.returncode == 0, ran.stderr
    core_version, transports_version, dist_version, no_trio = json.loads(ran.stdout)
    assert core_version == transports_version == dist_version
    assert no_trio, "the core alone must not bring trio"

    for argv in ([core_only / "bin" / "mrtr", "--help"], [python, "-m", "mrtr_transports"]):
        ran = _run(argv, env=_clean_env(), cwd=core_only)
        assert ran.returncode == 2, (argv, ran.stdout, ran.stderr)
        assert ran.stdout == ""
        assert ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr, ran.stderr
        assert "pip install 'mrtr[transports]'" in ran.stderr
        assert "trio" in ran.stderr


def test_both_packages_ship_their_type_marker_and_licence(with_transports: Path) -> None:
    probe = (
        "import json, pathlib, importlib.metadata as md, mrtr_core, mrtr_transports\n"
        "print(json.dumps([str(pathlib.Path(p.__file__).parent) for p in"
        " (mrtr_core, mrtr_transports)] + [md.metadata('mrtr').get('License-Expression')]"
        " + [str(f) for f in md.files('mrtr') if f.name.startswith('LICENSE')]))"
    )
    ran = _run(
        [with_transports / "bin" / "python", "-c", probe], env=_clean_env(), cwd=with_transports
    )
    assert ran.returncode == 0, ran.stderr
    core_dir, transports_dir, licence, *licence_files = json.loads(ran.stdout)
    for folder in (core_dir, transports_dir):
        assert (Path(folder) / "py.typed").is_file(), folder
        assert str(with_transports) in folder, "imported from the work tree, not the install"
    assert licence == "MIT"
    assert licence_files, "the wheel carries no LICENSE"


def test_every_subpackage_of_the_source_is_installed(with_transports: Path) -> None:
    site = _run(
        [
            with_transports / "bin" / "python",
            "-c",
            "import mrtr_core, os; print(os.path.dirname(os.path.dirname(mrtr_core.__file__)))",
        ],
        env=_clean_env(),
        cwd=with_transports,
    ).stdout.strip()
    homes = {"mrtr_core": ROOT / "mrtr_core", "mrtr_transports": ROOT / "transports"}
    for name, source in homes.items():
        for init in source.rglob("__init__.py"):
            relative = init.relative_to(source)
            assert (Path(site) / name / relative).is_file(), (
                f"{name}/{relative} is not in the wheel"
            )


@contextmanager
def serving(argv: Sequence[str | Path], **kwargs: object) -> Iterator[str]:
    """A ``mrtr serve --http`` subprocess; yields the URL of its banner on stderr."""
    process = subprocess.Popen(
        [str(a) for a in argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **kwargs,  # type: ignore[call-overload]
    )
    assert process.stderr is not None
    try:
        ready, _, _ = select.select([process.stderr], [], [], 60.0)
        line = process.stderr.readline().decode() if ready else ""
        assert line.startswith("mrtr serve: listening on http://127.0.0.1:"), line
        threading.Thread(target=process.stderr.read, daemon=True).start()  # never a full pipe
        yield line.split()[-1]
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _accept(content: dict[str, object]) -> str:
    return json.dumps({"action": "accept", "content": content})


def test_mrtr_serves_the_example_app_and_calls_a_two_round_tool(with_transports: Path) -> None:
    mrtr = with_transports / "bin" / "mrtr"
    env = _clean_env()
    helped = _run([mrtr, "--help"], env=env, cwd=with_transports)
    assert helped.returncode == 0, helped.stderr
    assert all(command in helped.stdout for command in ("serve", "call", "state"))

    with serving([mrtr, "serve", "--http", "127.0.0.1:0"], env=env, cwd=with_transports) as url:
        called = _run(
            [
                mrtr, "call", url, "plan_trip", '{"destination": "Lisbon"}',
                "--answer", "traveller=" + _accept({"name": "Ada"}),
                "--answer", "nights=" + _accept({"nights": 3}),
            ],
            env=env,
            cwd=with_transports,
        )  # fmt: skip
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["content"] == [{"type": "text", "text": "Trip to Lisbon for Ada: 3 nights."}]


def test_a_users_program_is_served_and_passes_mypy_strict(
    with_transports: Path, tmp_path: Path
) -> None:
    (tmp_path / "greet.py").write_text(greet_program())
    # The app on every host and the test client, each answer typed by its ask.
    (tmp_path / "typed_app.py").write_text(typed_program())
    # Wrong on purpose: the installed packages' annotations are what mypy checks it against.
    (tmp_path / "wrong.py").write_text(
        "import mrtr_transports\nfrom mrtr_transports import McpApp\n\n"
        "version: int = mrtr_transports.__version__\n"
        "app = McpApp(1, '1.0')\n"
    )
    mrtr = with_transports / "bin" / "mrtr"
    env = _clean_env(PYTHONPATH=str(tmp_path))
    with serving(
        [mrtr, "serve", "--http", "127.0.0.1:0", "--app", "greet:app"], env=env, cwd=tmp_path
    ) as url:
        called = _run(
            [mrtr, "call", url, "greet", "--answer", "name=" + _accept({"name": "Ada"})],
            env=env,
            cwd=tmp_path,
        )
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    ran = _run([with_transports / "bin" / "python", "typed_app.py"], env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    introduced, signed_in = json.loads(ran.stdout)
    assert introduced["content"][0]["text"].startswith("Ada (test-model: rain on the roof)")
    assert signed_in["content"] == [{"type": "text", "text": "sign-in: accept"}]

    # The project's mypy, reading the fresh virtualenv's site-packages (and nothing of the
    # work tree: the program's folder is the working directory, with no config file).
    mypy = Path(sys.executable).parent / "mypy"
    checked = _run(
        [
            mypy, "--strict", "--no-incremental",
            "--python-executable", with_transports / "bin" / "python",
            "greet.py", "typed_app.py", "wrong.py",
        ],
        env=_clean_env(),
        cwd=tmp_path,
        timeout=300,
    )  # fmt: skip
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert not [e for e in errors if not e.startswith("wrong.py")], checked.stdout
    assert len(errors) == 2, checked.stdout
    assert re.search(r'wrong\.py:4: error: Incompatible types .* "str".* "int"', checked.stdout)
    assert re.search(
        r"wrong\.py:5: error: Argument 1 to \"McpApp\" has incompatible type", checked.stdout
    )
