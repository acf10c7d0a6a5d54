"""The package's import graph: no circle (a module that imports, at any depth and from any function,
a module that imports it back), and no arrow from a lower layer up into the engine or the commands.
Counted from the source with ``ast``, function-level imports included: a lazy import still ties two
modules together for a reader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "kprof"
# Layers that know nothing of how runs are executed or commands are offered.
LOWER = (
    "kprof.analysis",
    "kprof.designs",
    "kprof.store",
    "kprof.ingest",
    "kprof.report",
    "kprof.timer",
    "kprof.intervals",
)
UPPER = ("kprof.engine", "kprof.revisions", "kprof.commands", "kprof.cli", "kprof.collectors")


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """Each kprof module → the kprof modules it imports (a name imported from a package counts as
    the submodule when there is one)."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    target = full if full in modules else node.module
                    if target in modules:
                        edges[name].add(target)
            elif isinstance(node, ast.Import):
                edges[name].update(a.name for a in node.names if a.name in modules)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_finds_a_planted_circle() -> None:
    """The search itself: a circle of three and a lone self-contained module."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    found = circles(import_graph())
    assert not found, f"import circles: {found}"


@pytest.mark.parametrize("lower", LOWER)
def test_no_arrow_from_a_lower_layer_up(lower: str) -> None:
    edges = import_graph()
    up = sorted(
        f"{m} → {t}"
        for m, targets in edges.items()
        if m == lower or m.startswith(lower + ".")
        for t in targets
        if t.startswith(UPPER)
    )
    assert not up, up


def test_analysis_reads_no_folder() -> None:
    """Analysis takes tables (kprof.commands.analyse reads a run folder into them): no module of
    kprof.analysis imports the store."""
    edges = import_graph()
    reads = sorted(
        f"{m} → {t}"
        for m, ts in edges.items()
        if m.startswith("kprof.analysis")
        for t in ts
        if t.startswith("kprof.store")
    )
    assert not reads, reads


def test_the_architecture_notes_show_the_code_as_it_is() -> None:
    """docs/architecture.md's figures are the script's, not typed by hand (benchmarks/code_shape.py)."""
    import importlib.util

    script = ROOT.parent / "benchmarks" / "code_shape.py"
    spec = importlib.util.spec_from_file_location("code_shape", script)
    assert spec is not None and spec.loader is not None
    code_shape = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code_shape)
    doc = code_shape.DOC.read_text()
    assert code_shape.written(doc, code_shape.figures(ROOT.parent)) == doc, (
        "docs/architecture.md: the code's shape changed; run python benchmarks/code_shape.py --write"
    )
