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


def rocpd_db(path: Path) -> None:
    """A minimal database with the rocpd *views* kprof reads (columns as in rocpd's data_views.sql).

    No real rocpd file is public; this one is synthetic and only checks the query.
    """
    import sqlite3

    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE rocpd_metadata(tag TEXT, value TEXT);
        INSERT INTO rocpd_metadata VALUES ('schema_version', '3.0.1');
        CREATE TABLE k_1(name, agent_abs_index, agent_log_index, queue_id, stream_id, tid, start, "end", corr_id,
            grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, lds_size, vgpr_count);
        INSERT INTO k_1 VALUES ('_Z15addition_kernelIfEvPT_PKfS3_ii', 6, 2, 1, 0, 77, 1000, 3000, 9,
            1024, 1, 1, 64, 1, 1, 0, 16);
        CREATE VIEW kernels AS SELECT * FROM k_1;
        CREATE TABLE r_1(name, start, "end", pid, tid, category);
        INSERT INTO r_1 VALUES ('decode', 500, 5000, 1, 77, 'MARKER_CORE_RANGE_API');
        INSERT INTO r_1 VALUES ('hipLaunchKernel', 900, 950, 1, 77, 'HIP_RUNTIME_API');
        CREATE VIEW regions AS SELECT * FROM r_1;
    """)
    con.commit()
    con.close()


def report_fuzz_count(capsys: pytest.CaptureFixture[str], what: str, tried: list, at_least: int) -> None:
    """Print, past pytest's capture, how many damaged inputs a fuzz test tried, and check it tried
    enough; skip when the fuzz test itself did not run (e.g. deselected)."""
    if not tried:
        pytest.skip("the fuzz test did not run in this session")
    with capsys.disabled():
        print(f"\n{what} fuzz: {len(tried)} damaged {what} inputs tried, no traceback")
    assert len(tried) >= at_least
