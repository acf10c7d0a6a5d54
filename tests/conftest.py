"""Shared paths: the project's own traces, and the real third-party fixtures when present."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# Triton picks the interpreter when a kernel is defined, so decide before any kernel module loads:
# without a GPU, kernels run under the interpreter on the CPU.
HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")
DEVICE = "cuda" if HAS_GPU else "cpu"

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
REAL = ROOT.parent / "shared" / "fixtures" / "real"

EAGER = TRACES / "llama_eager_decode.pt.trace.json.gz"
GRAPH = TRACES / "gqa_graph_decode.pt.trace.json.gz"


def real(name: str) -> Path:
    """A fixture from ../shared/fixtures/real, or skip: a user's clone does not have that folder."""
    path = REAL / name
    if not path.exists():
        pytest.skip(f"real fixture {name} not present (../shared/fixtures/real is absent)")
    return path


def report_fuzz_count(capsys: pytest.CaptureFixture[str], what: str, tried: list, at_least: int) -> None:
    """Print, past pytest's capture, how many damaged inputs a fuzz test tried, and check it tried
    enough; skip when the fuzz test itself did not run (e.g. deselected)."""
    if not tried:
        pytest.skip("the fuzz test did not run in this session")
    with capsys.disabled():
        print(f"\n{what} fuzz: {len(tried)} damaged {what} inputs tried, no traceback")
    assert len(tried) >= at_least
