"""Shared paths: the project's own traces, and the real third-party fixtures when present."""

from __future__ import annotations

from pathlib import Path

import pytest

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
