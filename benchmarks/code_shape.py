"""The shape of the code: lines per module and the longest functions, for the architecture notes.

    python benchmarks/code_shape.py [ROOT]          # print the figures for a checkout (default: this one)
    python benchmarks/code_shape.py --write         # put them into docs/architecture.md

Counts every line of each module under ROOT/kprof (docstrings and comments included, as a reader
meets them) and each function's length from its ``def`` to its last line. Parsers (the modules of
``kprof/ingest/formats``, one per file format) are listed apart: a format's fields make long
functions that read best whole. ``--write`` replaces the block between the markers in
docs/architecture.md; a test checks that the block there is what this script prints now.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- code_shape: start -->", "<!-- code_shape: end -->"
PARSERS = "kprof/ingest/formats/"
SHOWN = 8


def shape(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(lines, module) for every module and (lines, module:function) for every function, longest first."""
    modules, functions = [], []
    for path in sorted((root / "kprof").rglob("*.py")):
        text = path.read_text()
        rel = path.relative_to(root).as_posix()
        modules.append((len(text.splitlines()), rel))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
    return sorted(modules, reverse=True), sorted(functions, reverse=True)


def figures(root: Path) -> str:
    """The markdown block the architecture notes show."""
    modules, functions = shape(root)
    lines = sorted(n for n, _ in modules)
    engine = [n for n, name in modules if name.startswith("kprof/engine/")]
    rest = [(n, name) for n, name in functions if not name.startswith(PARSERS)]
    parsers = [(n, name) for n, name in functions if name.startswith(PARSERS)]
    out = [
        f"- modules in `kprof/`: {len(modules)}, {sum(lines):,} lines, median {lines[len(lines) // 2]} per module;"
        f" `kprof/engine/`: {len(engine)} modules, {sum(engine):,} lines",
        "- largest modules: " + ", ".join(f"`{name}` {n}" for n, name in modules[:SHOWN]),
        "- longest functions outside the parsers: " + ", ".join(f"`{name}` {n}" for n, name in rest[:SHOWN]),
        "- longest parser functions: " + ", ".join(f"`{name}` {n}" for n, name in parsers[:3]),
        f"- functions outside the parsers over 60 lines: {sum(n > 60 for n, _ in rest)}",
    ]
    return "\n".join(out) + "\n"


def written(doc: str, block: str) -> str:
    """``doc`` with the block between the markers replaced."""
    head, start, rest = doc.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{DOC}: the markers {START} … {END} are missing")
    return f"{head}{START}\n{block}{END}{tail}"


def main() -> None:
    args = sys.argv[1:]
    if args == ["--write"]:
        DOC.write_text(written(DOC.read_text(), figures(ROOT)))
        return
    print(figures(Path(args[0]) if args else ROOT), end="")


if __name__ == "__main__":
    main()
