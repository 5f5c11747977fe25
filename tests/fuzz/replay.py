"""Replay the fuzz corpus (the seeds, and what runs found) and measure which of
mrtr_core's branches it reaches.

    python tests/fuzz/replay.py                  # every target, seeds + found/
    python tests/fuzz/replay.py --seeds-only     # the committed seeds alone
    python tests/fuzz/replay.py client server    # some targets

Runs each input through its target in this process (no atheris: the targets are
plain functions) under ``coverage`` with branch measurement, prints the report
for mrtr_core with the lines and branches not reached, and two totals: all
branches, and the *peer-reachable* ones (all minus those ``not_peer_reachable.py``
lists, each with its reason), followed by every peer-reachable branch not reached.
An input that crashes is reported and the replay goes on; the exit status is then 1.
The data file is ``tests/fuzz/.coverage.fuzz`` (git-ignored), apart from the
test suite's.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import coverage

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import not_peer_reachable  # noqa: E402
from run import CORPUS, FOUND, TARGET_NAMES  # noqa: E402

Arc = tuple[int, int]


def _functions(tree: ast.Module) -> dict[str, ast.AST]:
    """Every function of a module by qualified name (``name``, ``Class.name``)."""
    found: dict[str, ast.AST] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[prefix + child.name] = child
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")

    visit(tree, "")
    return found


def _statement_at(tree: ast.Module, line: int) -> ast.stmt:
    """The outermost statement that starts on ``line``, else the innermost one that
    spans it (a line inside a multi-line condition names its ``if``)."""
    spanning: list[ast.stmt] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            if node.lineno == line:
                return node
            if node.lineno < line <= (node.end_lineno or node.lineno):
                spanning.append(node)
    return max(spanning, key=lambda node: node.lineno)


def excluded_lines(module: str, source: str) -> dict[int, str]:
    """The lines of ``module`` (under mrtr_core/) no peer reaches, each with its reason."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out: dict[int, str] = {}

    def cover(node: ast.AST, reason: str) -> None:
        end = node.end_lineno or node.lineno  # type: ignore[attr-defined]
        for number in range(node.lineno, end + 1):  # type: ignore[attr-defined]
            out.setdefault(number, reason)

    for number, text in enumerate(lines, start=1):
        for start, reason in not_peer_reachable.RULES.items():
            if text.strip().startswith(start):
                cover(_statement_at(tree, number), reason)
    functions = _functions(tree)
    for entry in not_peer_reachable.EXCLUSIONS:
        if entry.module != module:
            continue
        if entry.anchor.startswith("def "):
            name = entry.anchor[4:]
            if name not in functions:
                raise SystemExit(f"not_peer_reachable: no function {name} in {module}")
            cover(functions[name], entry.reason)
            continue
        hits = [n for n, text in enumerate(lines, start=1) if entry.anchor in text]
        if len(hits) != 1:
            raise SystemExit(
                f"not_peer_reachable: {entry.anchor!r} matches {len(hits)} lines of {module}"
            )
        cover(_statement_at(tree, hits[0]), entry.reason)
    return out


def peer_reachable_report(cov: coverage.Coverage) -> tuple[int, int, int, int, list[str]]:
    """(branches reached, branches, statements reached, statements) counting only the
    peer-reachable ones, and each peer-reachable branch not reached."""
    reached = total = lines_reached = lines_total = 0
    missing: list[str] = []
    seen_modules: set[str] = set()
    for filename in sorted(cov.get_data().measured_files()):
        module = filename.split("mrtr_core/", 1)[1]
        seen_modules.add(module)
        source = Path(filename).read_text()
        skip = excluded_lines(module, source)
        analysis = cov._analyze(filename)
        executed = analysis.executed_branch_arcs()
        not_taken = analysis.missing_branch_arcs()
        for start in sorted(set(executed) | set(not_taken)):
            for end in sorted(executed.get(start, [])) + sorted(not_taken.get(start, [])):
                if start in skip or end in skip:
                    continue
                total += 1
                if end in executed.get(start, []):
                    reached += 1
                else:
                    missing.append(f"{module}:{start}->{end if end > 0 else 'exit'}")
        statements = set(analysis.statements) - set(skip)
        lines_total += len(statements)
        lines_reached += len(statements - set(analysis.missing))
    stale = {e.module for e in not_peer_reachable.EXCLUSIONS} - seen_modules
    if stale:
        raise SystemExit(f"not_peer_reachable: unknown modules {sorted(stale)}")
    return reached, total, lines_reached, lines_total, missing


def inputs(target: str, *, seeds_only: bool) -> list[Path]:
    folders = [CORPUS / target] + ([] if seeds_only else [FOUND / target])
    return sorted(p for folder in folders if folder.is_dir() for p in folder.iterdir())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds-only", action="store_true", help="ignore found/")
    parser.add_argument("targets", nargs="*", help=f"some of {', '.join(TARGET_NAMES)}")
    args = parser.parse_args(argv)
    names = args.targets or list(TARGET_NAMES)
    cov = coverage.Coverage(
        data_file=str(HERE / ".coverage.fuzz"),
        branch=True,
        source=["mrtr_core"],
        config_file=False,
    )
    cov.start()
    import targets  # mrtr_core is imported (and measured) from here on

    crashed = 0
    counts = {}
    for name in names:
        files = inputs(name, seeds_only=args.seeds_only)
        counts[name] = len(files)
        for path in files:
            try:
                targets.run(targets.TARGETS[name], path.read_bytes())
            except Exception:
                crashed += 1
                print(f"CRASH {name} {path}\n{traceback.format_exc()}", file=sys.stderr)
    cov.stop()
    cov.save()
    print("inputs replayed: " + ", ".join(f"{n} {c}" for n, c in counts.items()))
    cov.report(show_missing=True, skip_covered=True, precision=1)
    report = HERE / ".coverage.fuzz.json"
    cov.json_report(outfile=str(report))
    totals = json.loads(report.read_text())["totals"]
    report.unlink()
    print(
        f"mrtr_core branches reached: {totals['covered_branches']}/{totals['num_branches']} "
        f"({100 * totals['covered_branches'] / totals['num_branches']:.1f}%); statements "
        f"{totals['covered_lines']}/{totals['num_statements']} "
        f"({100 * totals['covered_lines'] / totals['num_statements']:.1f}%)"
    )
    reached, total, lines_reached, lines_total, missing = peer_reachable_report(cov)
    if missing:
        print("peer-reachable branches not reached: " + " ".join(missing))
    print(
        f"peer-reachable branches reached: {reached}/{total} ({100 * reached / total:.1f}%); "
        f"statements {lines_reached}/{lines_total} "
        f"({100 * lines_reached / lines_total:.1f}%)  [excluded, with reasons: "
        "tests/fuzz/not_peer_reachable.py]"
    )
    if crashed:
        print(f"{crashed} inputs crashed", file=sys.stderr)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
