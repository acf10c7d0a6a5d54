"""A small third-party-style repository for revision runs: a package with a Triton kernel (run under the
interpreter at tiny sizes) that needs a build step, and a history a real PR has — an API the older
revisions lack, a slow commit, docs-only commits, a commit that breaks the import and the one that
fixes it, neutral commits. The benchmark lives outside the repository, as a user's would.

    build_repo(root) -> History   # the repository at root/minikern-repo, the benchmark at root/bench/
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

KERNEL = '''"""minikern's kernel: y = alpha * x, a tile per program."""
import torch
import triton
import triton.language as tl

REPEATS = 1  # passes over each tile


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, alpha, REPEATS: tl.constexpr, BLOCK: tl.constexpr):
    i_b = tl.program_id(0)
    o_x = i_b * BLOCK + tl.arange(0, BLOCK)
    mask_x = o_x < n
    b_x = tl.load(x_ptr + o_x, mask=mask_x, other=0.0).to(tl.float32)
    b_y = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in tl.static_range(REPEATS):
        b_y += b_x * alpha
    b_y = b_y / REPEATS
    tl.store(y_ptr + o_x, b_y.to(y_ptr.dtype.element_ty), mask=mask_x)


def _launch(x, y, alpha):
    n, block = x.numel(), 128
    _scale_kernel[(triton.cdiv(n, block),)](x, y, n, alpha, REPEATS=REPEATS, BLOCK=block)


def scale(x, alpha):
    y = torch.empty_like(x)
    _launch(x, y, alpha)
    return y
'''

INIT = '''"""minikern: a scale kernel."""
from minikern._built import BUILD_ID  # written by `python build.py`: the package needs its build step
from minikern.kernel import scale
'''

BUILD = '''"""minikern's build step (as `setup.py build_ext --inplace` would be): writes minikern/_built.py."""
import hashlib
from pathlib import Path

here = Path(__file__).parent
source = (here / "minikern" / "kernel.py").read_bytes()
(here / "minikern" / "_built.py").write_text(f'BUILD_ID = "{hashlib.sha256(source).hexdigest()[:12]}"\\n')
'''

BENCHMARK = '''"""A benchmark for minikern kept outside its repository: each revision's minikern is imported."""
import torch

import minikern
from kprof.workload import Case, Workload


class Scale(Workload):
    name = "minikern_scale"
    presets = {"smoke": (Case("n256", {"n": 256}),), "pr": (Case("n16M", {"n": 1 << 24}),)}

    def setup(self, case, device, dtype, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(case.params["n"], generator=g).to(device=device, dtype=getattr(torch, dtype))
        return {"x": x, "y": torch.empty_like(x)}

    def launch(self, state, features, params):
        x, y = state["x"], state["y"]
        if hasattr(minikern, "scale_into"):  # the API the head has; older revisions lack it
            return lambda: minikern.scale_into(x, 2.0, out=y)
        return lambda: y.copy_(minikern.scale(x, 2.0))

    def outputs(self, state):
        return {"y": state["y"]}

    def reference(self, state):
        return {"y": state["x"].double() * 2.0}


WORKLOAD = Scale()
'''

BROKEN = "def _unfinished(:  # the refactor's first half\n"


@dataclass
class History:
    repo: Path
    benchmark: Path
    shas: dict[str, str] = field(default_factory=dict)  # role → short sha
    subjects: dict[str, str] = field(default_factory=dict)  # role → subject


def git(repo: Path, *args: str) -> str:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def commit(h: History, role: str, subject: str, *edits: tuple[str, str, str]) -> None:
    """One commit of edits (path, old, new): ``old`` replaced by ``new``, or ``new`` appended."""
    for path, old, new in edits:
        file = h.repo / path
        text = file.read_text() if file.exists() else ""
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text.replace(old, new, 1) if old else text + new)
        git(h.repo, "add", path)
    git(h.repo, "commit", "-q", "-m", subject)
    h.shas[role], h.subjects[role] = git(h.repo, "rev-parse", "--short=7", "HEAD"), subject


def init_repo(repo: Path, files: dict[str, str], message: str) -> None:
    """A new repository at ``repo`` whose first commit holds ``files`` (path → text)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", message)


def build_repo(root: Path) -> History:
    """The repository and the benchmark outside it. Roles: base, api, readme, slow, docs, broken,
    fix, comment, tests (in that order). With --paths minikern the readme and docs commits are
    left out; the broken revision fails to import; reverting or adding broken/fix alone conflicts
    or fails to import."""
    repo = root / "minikern-repo"
    files = {"minikern/kernel.py": KERNEL, "minikern/__init__.py": INIT, "build.py": BUILD}
    files |= {".gitignore": "minikern/_built.py\n__pycache__/\n", "README.md": "# minikern\n"}
    init_repo(repo, files, "minikern: a scale kernel")
    (root / "bench").mkdir()
    h = History(repo, root / "bench" / "bench_minikern.py")
    h.benchmark.write_text(BENCHMARK)
    h.shas["base"] = git(repo, "rev-parse", "--short=7", "HEAD")
    kernel = "minikern/kernel.py"
    into = "\n\ndef scale_into(x, alpha, out):\n    _launch(x, out, alpha)\n    return out\n"
    export = ("minikern/__init__.py", "import scale\n", "import scale, scale_into\n")
    commit(h, "api", "Add scale_into: write into a given output", (kernel, "", into), export)
    commit(h, "readme", "README: usage", ("README.md", "", "Call minikern.scale(x, alpha).\n"))
    commit(h, "slow", "Tile loop: 64 passes over each tile", (kernel, "REPEATS = 1 ", "REPEATS = 64 "))
    commit(h, "docs", "Docs: what a pass is", ("README.md", "", "A pass reads a tile once.\n"))
    commit(h, "broken", "Refactor the launcher, first half", (kernel, "", "\n" + BROKEN))
    commit(h, "fix", "Refactor the launcher, second half", (kernel, "\n" + BROKEN, ""))
    commit(h, "comment", "Comment on the grid", (kernel, "def _launch", "# one program per tile\ndef _launch"))
    commit(h, "tests", "Add a test of scale", ("minikern/test_scale.py", "", "def test_nothing():\n    pass\n"))
    return h
