"""The user's benchmark in a revision run: a workload file, or the script of a whole program.

It comes from where the user keeps it, for every revision, and each revision's code comes from that
revision's tree: its package folders (a ``src/`` layout's too) go first on the import path, then
the benchmark's own folder (asv keeps its benchmarks apart from the history they measure for the
same reason: a benchmark written for a branch is almost never in the commits it must time); a
package of the tree imported from anywhere else is refused. ``--in-tree`` asks for the old way
instead: the file at the same path inside each revision's tree.

The benchmark's SHA-256 is recorded when the run is planned and checked whenever a process is about
to run it, so a run never mixes two versions of one benchmark (resume included).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser as a package
    import tomli as tomllib

from kprof.errors import KprofInputError
from kprof.run_model import BenchmarkRecord


def sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as e:
        raise KprofInputError(path, f"cannot be read ({e.strerror or e})") from None


def locate(spec: str, repo_root: Path, in_tree: bool) -> BenchmarkRecord:
    """The benchmark ``spec`` names (a path from the current directory), with its hash. With
    ``in_tree`` it must lie inside the repository: each revision's copy is used."""
    path = Path(spec).expanduser()
    if not path.is_file():
        raise KprofInputError(spec, "no such file")
    path = path.resolve()
    inside = _inside(path, repo_root)
    if in_tree and inside is None:
        raise KprofInputError(spec, f"--in-tree needs the benchmark inside the repository {repo_root}")
    return BenchmarkRecord(str(path), sha256(path), str(inside) if in_tree else "")


def _inside(path: Path, root: Path) -> Path | None:
    try:
        return path.relative_to(root.resolve())
    except ValueError:
        return None


def without_tree(text: str, tree: Path) -> str:
    """A message about a revision's files with the cache folder cut out: paths read as they do in
    the repository (``pkg/kernel.py``), never as a folder the user never made."""
    return text.replace(f"{tree}{os.sep}", "").replace(str(tree), ".")


class BenchmarkChanged(KprofInputError):
    """The benchmark is not the file the run was planned with: nothing more may be timed with it."""


def check_unchanged(bench: BenchmarkRecord) -> None:
    """A one-line error when the benchmark was changed, moved or removed since the run was planned."""
    path = Path(bench.path)
    if not path.is_file():
        raise BenchmarkChanged(path, "the run's benchmark is gone (moved or removed since the run started)")
    if sha256(path) != bench.sha256:
        raise BenchmarkChanged(
            path, f"changed since the run started (it had SHA-256 {bench.sha256[:12]}…): restore it, or start a new run"
        )


def in_tree_path(bench: BenchmarkRecord, tree: Path) -> Path:
    """The file a revision runs: its own copy with --in-tree, else the user's."""
    return tree / bench.in_tree if bench.in_tree else Path(bench.path)


def import_path(tree: Path, bench: BenchmarkRecord, repo_root: Path) -> list[str]:
    """What goes first on a revision's import path: the folders its packages are imported from
    (``package_roots``), then the benchmark's folder — as that revision has it when the benchmark
    lies inside the repository (so nothing of the user's checkout can stand in for the revision's
    code), else the folder itself."""
    folder = in_tree_path(bench, tree).parent
    inside = _inside(folder, repo_root)
    if inside is not None:
        folder = tree / inside
    entries = [*map(str, package_roots(tree)), str(folder)]
    return list(dict.fromkeys(entries))


def package_roots(tree: Path) -> list[Path]:
    """The folders of a revision's tree its packages are imported from: the folders
    ``pyproject.toml`` declares (setuptools' package-dir and packages.find, hatch's wheel packages,
    poetry's ``from``, maturin's python-source), a ``src/`` folder that holds a package, then the
    tree itself."""
    declared = [tree / d for d in _declared_roots(tree / "pyproject.toml")]
    src = tree / "src"
    if src.is_dir() and any(p.is_file() for p in src.glob("*/__init__.py")):
        declared.append(src)
    roots = [p for p in declared if p.is_dir() and p.resolve() != tree.resolve()]
    return [*dict.fromkeys(roots), tree]


def _declared_roots(pyproject: Path) -> list[str]:
    """Package folders (relative to the tree) a pyproject.toml declares; none where it has none or
    cannot be read (a revision's broken pyproject is the build's problem, not the import path's)."""
    try:
        config = tomllib.loads(pyproject.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    tool = config.get("tool", {})
    setuptools = tool.get("setuptools", {})
    found: list[str] = []
    package_dir = setuptools.get("package-dir", {})
    if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
        found.append(package_dir[""])
    find = setuptools.get("packages", {})
    if isinstance(find, dict):
        where = find.get("find", {}).get("where", [])
        found += [w for w in where if isinstance(w, str)]
    wheel = tool.get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {}).get("packages", [])
    found += [str(Path(p).parent) for p in wheel if isinstance(p, str) and "/" in p]
    found += [p["from"] for p in tool.get("poetry", {}).get("packages", []) if isinstance(p, dict) and "from" in p]
    source = tool.get("maturin", {}).get("python-source")
    found += [source] if isinstance(source, str) else []
    return [f for f in found if f not in ("", ".")]


def tree_packages(tree: Path) -> set[str]:
    """The top-level packages a revision's tree holds: in its package roots, and one folder down
    wherever a package lies in a folder that is none (``python/triton``: a layout kprof does not
    put on the path is still checked). kprof itself is left out: a bundled workload's tree is
    kprof's own, imported from the running kprof."""
    names = {p.stem for root in package_roots(tree)[:-1] for p in root.glob("*.py")}
    for init in [*tree.glob("*/__init__.py"), *tree.glob("*/*/__init__.py")]:
        folder = init.parent
        if not (folder.parent / "__init__.py").is_file() and not folder.parent.name.startswith("."):
            names.add(folder.name)
    return names - {"kprof"}


def shadowed(tree: Path, modules: dict[str, Any]) -> str:
    """A one-line refusal when a package the tree provides was imported from elsewhere (a copy
    installed in the environment, or one imported before the tree was on the path): every revision
    would then time that one copy and read SAME. Empty when every such module is the tree's."""
    here = tree.resolve()
    for name in sorted(tree_packages(tree)):
        module = modules.get(name)
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", []) or []), None)
        if module is None or where is None:
            continue
        if not Path(where).resolve().is_relative_to(here):
            return (
                f"imported {name} from {where}, not from the revision's tree: a copy installed in the environment "
                f"shadows it (pip uninstall {name}, or run kprof from an environment without it)"
            )
    return ""


@contextlib.contextmanager
def imports_from(entries: Sequence[str]) -> Iterator[None]:
    """``entries`` first on ``sys.path`` for the duration (the parent reads a benchmark's cases with
    the base revision's code, then gives its import path back)."""
    sys.path[:0] = list(entries)
    try:
        yield
    finally:
        for entry in entries:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def differs_in_trees(bench: BenchmarkRecord, repo_root: Path, trees: dict[str, Path], names: dict[str, str]) -> str:
    """A note when the benchmark is a file of the repository that some revisions hold in another
    version: the user's copy is run for every revision, which is what they asked for unless they
    meant each revision's own (--in-tree). Empty when nothing differs."""
    inside = _inside(Path(bench.path), repo_root)
    if bench.in_tree or inside is None:
        return ""
    differ = [
        names.get(k, k) for k, t in trees.items() if (t / inside).is_file() and sha256(t / inside) != bench.sha256
    ]
    if not differ:
        return ""
    shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
    return (
        f"{inside} is in the repository and differs at {shown}: the copy where you keep it runs for every "
        "revision (--in-tree runs each revision's own)"
    )


def program_env(env: dict[str, str], entries: Sequence[str]) -> dict[str, str]:
    """A whole program's environment in a revision's tree: ``entries`` first on Python's import path,
    and no script folder or current directory put before them (PYTHONSAFEPATH, Python ≥ 3.11), so a
    script kept in the user's checkout imports the revision's code, not the checkout's."""
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(env, PYTHONPATH=os.pathsep.join([*entries, *rest]), PYTHONSAFEPATH="1")


def script_index(program: Sequence[str]) -> int | None:
    """Which word of a command is its script: ``python [options] SCRIPT …`` (not ``-m``/``-c``),
    ``bash|sh SCRIPT``, or the command itself when it is a path (``./bench.sh``)."""
    first = Path(program[0]).name
    if first.startswith("python") or first in ("bash", "sh", "zsh"):
        i = 1
        while i < len(program) and program[i].startswith("-"):
            if program[i] in ("-m", "-c"):
                return None
            i += 2 if program[i] in ("-X", "-W") else 1
        return i if i < len(program) else None
    return 0 if "/" in program[0] else None


def locate_program(program: Sequence[str], repo_root: Path, in_tree: bool) -> tuple[list[str], BenchmarkRecord | None]:
    """The command with its script made absolute (it runs from where the user keeps it, while the
    command runs in each revision's tree); with ``in_tree``, relative to the repository's root (the
    command runs there: each tree's own copy)."""
    i = script_index(program)
    if i is None:
        return list(program), None
    bench = locate(program[i], repo_root, in_tree)
    return [*program[:i], bench.in_tree or bench.path, *program[i + 1 :]], bench
