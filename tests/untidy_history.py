"""A repository whose history is as untidy as real ones: a src/ layout, a changelog every commit
edits, a later commit that edits lines an earlier one added, a commit that does not compile until
the next one fixes it, two real changes (one slower, one faster) and a docs-only commit. The
benchmark lives outside the repository and imports the package.

    build(root) -> Untidy   # the repository at root/untidy, the benchmark at root/bench/bench_untidy.py

Roles, in order: base, slower (4 → 8 passes), comment (a comment beside the passes), broken (the
first half of a refactor: a syntax error), faster (its second half: the error gone, 8 → 1 passes),
reword (rewords the comment the comment commit added), docs (README and changelog only).
"""

from __future__ import annotations

from pathlib import Path

from own_benchmark_repo import History, commit, git, init_repo

OPS = '''"""untidy's one op: y = 2·x after a host-side wait of PASSES half-milliseconds (steady on a CPU)."""
import time

import torch

PASSES = 4


def work(x, out):
    time.sleep(PASSES * 0.0005)
    return torch.mul(x, 2.0, out=out)
'''

BENCHMARK = '''"""A benchmark kept outside untidy's repository: each revision's untidy is imported."""
import torch

import untidy
from kprof.workload import Case, Workload


class Untidy(Workload):
    name = "untidy"
    presets = {"smoke": (Case("n", {"n": 512}),)}

    def setup(self, case, device, dtype, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(case.params["n"], generator=g).to(device=device, dtype=getattr(torch, dtype))
        return {"x": x, "y": torch.empty_like(x)}

    def launch(self, state, features, params):
        return lambda: untidy.work(state["x"], state["y"])

    def outputs(self, state):
        return {"y": state["y"]}

    def reference(self, state):
        return {"y": state["x"].double() * 2.0}


WORKLOAD = Untidy()
'''

PYPROJECT = """[project]
name = "untidy"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]
"""

BROKEN = "def _half_done(:  # the refactor's first half\n"
OPS_PATH = "src/untidy/ops.py"


class Untidy(History):
    @property
    def range(self) -> str:
        return f"{self.shas['base']}..{self.shas['docs']}"


def _commit(h: Untidy, role: str, *edits: tuple[str, str, str]) -> None:
    """One commit of edits, and a changelog line, as every commit of a real project adds."""
    commit(h, role, role, *edits, ("CHANGELOG.md", "", f"- {role}\n"))


def build(root: Path) -> Untidy:
    repo = root / "untidy"
    files = {"src/untidy/__init__.py": "from untidy.ops import work\n", OPS_PATH: OPS, "pyproject.toml": PYPROJECT}
    init_repo(repo, files | {"CHANGELOG.md": "# Changes\n", ".gitignore": "__pycache__/\n"}, "base")
    (root / "bench").mkdir()
    h = Untidy(repo, root / "bench" / "bench_untidy.py")
    h.benchmark.write_text(BENCHMARK)
    h.shas["base"] = git(repo, "rev-parse", "--short=7", "HEAD")
    _commit(h, "slower", (OPS_PATH, "PASSES = 4", "PASSES = 8"))
    _commit(h, "comment", (OPS_PATH, "PASSES = 8", "# passes over the input\nPASSES = 8"))
    _commit(h, "broken", (OPS_PATH, "", "\n" + BROKEN))
    _commit(h, "faster", (OPS_PATH, "\n" + BROKEN, ""), (OPS_PATH, "PASSES = 8", "PASSES = 1"))
    _commit(h, "reword", (OPS_PATH, "# passes over the input", "# how many times the input is read"))
    _commit(h, "docs", ("README.md", "", "untidy: one op\n"))
    return h
