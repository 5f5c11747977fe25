"""The documentation's Python examples run as they stand and check their outcome.

Every fenced ```python block of README.md and docs/*.md is executed on its own,
in a fresh namespace, in this process.  It is compiled with padding so that a
traceback names the Markdown file and its line.  A block must contain at least
one ``assert``, and every file at least one block.  The transition table in
docs/engine.md is also checked against ``mrtr_core.engine._state.TRANSITIONS``.

The examples are type-checked too: ``examples/*.py`` with ``mypy --strict``, and every
block that imports from ``mrtr_transports`` (an app author's code) with mypy's checks of
unannotated functions as well (``--check-untyped-defs``: a doc's short handlers go
without annotations, but a name, a call or an answer's attribute is checked).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.typecheck import mypy_errors

import mrtr_core as m

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
ENGINE_DOC = ROOT / "docs" / "engine.md"
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# A fence at the start of a line, "```python", up to the next closing fence.
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number of the block's first code line, code) for each python block."""
    text = path.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start(1)) + 1, match.group(1)) for match in FENCE.finditer(text)
    ]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _starts_a_child(code: str) -> bool:
    # `sys.executable`: a block starts a Python child with it (`mrtr serve --stdio` for a client)
    return "import subprocess" in code or "sys.executable" in code


BLOCKS = [
    pytest.param(
        path,
        line,
        code,
        id=f"{_rel(path)}:block{index}",
        # a block that starts a child (`mrtr`, a stdio server) takes seconds: out of `make check`
        marks=[pytest.mark.subprocess] if _starts_a_child(code) else [],
    )
    for path in DOC_FILES
    for index, (line, code) in enumerate(python_blocks(path))
]


def test_the_engine_guide_exists() -> None:
    assert ENGINE_DOC in DOC_FILES


@pytest.mark.parametrize("path", DOC_FILES, ids=_rel)
def test_every_doc_has_a_python_block(path: Path) -> None:
    assert python_blocks(path), f"{_rel(path)} has no ```python block"


@pytest.mark.parametrize(("path", "line", "code"), BLOCKS)
def test_python_block_runs(path: Path, line: int, code: str) -> None:
    # Pad with blank lines so that tracebacks point into the Markdown file.
    tree = ast.parse("\n" * (line - 1) + code, filename=str(path))
    assert any(isinstance(node, ast.Assert) for node in ast.walk(tree)), (
        f"the block at {_rel(path)}:{line} asserts nothing about its outcome"
    )
    namespace = {"__name__": "__docs__"}
    exec(compile(tree, str(path), "exec"), namespace)


def documented_transitions() -> dict[
    tuple[m.engine.EngineState, m.engine._state.EngineInput], frozenset[m.engine.EngineState]
]:
    """The table between the transitions markers of docs/engine.md, parsed."""
    text = ENGINE_DOC.read_text(encoding="utf-8")
    table = text.split("<!-- transitions:begin -->", 1)[1].split("<!-- transitions:end -->", 1)[0]
    found: dict[
        tuple[m.engine.EngineState, m.engine._state.EngineInput], frozenset[m.engine.EngineState]
    ] = {}
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue  # the header and its rule
        state, given, targets = (cell.strip().strip("`") for cell in row.split("|")[1:4])
        key = (m.engine.EngineState[state], m.engine._state.EngineInput(given.removesuffix("()")))
        assert key not in found, f"the table lists {row!r} twice"
        found[key] = frozenset(
            m.engine.EngineState[t.strip().strip("`")] for t in targets.split(",")
        )
    return found


def test_transition_table_matches_the_code() -> None:
    assert documented_transitions() == dict(m.engine._state.TRANSITIONS)


def test_the_api_reference_has_a_page_per_public_module() -> None:
    pages = {path.stem for path in (ROOT / "docs" / "api").glob("*.md")}
    submodules = {f"mrtr_core.{name}" for name in m.__all__ if name.islower() and name.isalpha()}
    assert {"mrtr_core", "mrtr_transports", *submodules} <= pages
    for page in pages - {"index"}:
        text = (ROOT / "docs" / "api" / f"{page}.md").read_text(encoding="utf-8")
        assert f".. automodule:: {page}\n" in text, page


def test_the_examples_pass_mypy_strict(tmp_path: Path) -> None:
    assert EXAMPLES
    assert mypy_errors(EXAMPLES, "--strict", cwd=tmp_path) == []


def test_the_app_authors_blocks_type_check(tmp_path: Path) -> None:
    files = []
    for path in DOC_FILES:
        for line, code in python_blocks(path):
            if "from mrtr_transports" in code:
                # One module per block, padded so that an error names the Markdown line.
                name = f"{path.stem.replace('-', '_')}_{line}.py".lower()
                (tmp_path / name).write_text("\n" * (line - 1) + code, encoding="utf-8")
                files.append(tmp_path / name)
    assert len(files) >= 10, files
    assert mypy_errors(files, "--check-untyped-defs", cwd=tmp_path) == []
