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
