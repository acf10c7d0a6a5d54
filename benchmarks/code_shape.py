"""The shape of the code: lines per module and the longest functions, for the architecture notes.

    python benchmarks/code_shape.py [ROOT]          # ROOT: a checkout (default: this one)

Counts every line of each module under ROOT/kprof (docstrings and comments included, as a reader
meets them) and each function's length from its ``def`` to its last line.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def shape(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    modules, functions = [], []
    for path in sorted((root / "kprof").rglob("*.py")):
        text = path.read_text()
        rel = str(path.relative_to(root))
        modules.append((len(text.splitlines()), rel))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
    return sorted(modules, reverse=True), sorted(functions, reverse=True)


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    modules, functions = shape(root)
    lines = [n for n, _ in modules]
    print(f"modules: {len(modules)}, lines: {sum(lines)}, median {sorted(lines)[len(lines) // 2]} per module")
    print("largest modules:")
    for n, name in modules[:8]:
        print(f"  {n:5d}  {name}")
    print("longest functions:")
    for n, name in functions[:8]:
        print(f"  {n:5d}  {name}")


if __name__ == "__main__":
    main()
