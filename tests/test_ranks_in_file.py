"""Several ranks in one file: TraceLens's merged Kineto file (real), and the same layout made here
with and without the process names that say which rank each process is."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from kprof.commands.trace import run_trace
from kprof.ingest.load import load_traces
from tests.conftest import real
from tests.kineto_events import kernel, launch, step, write_trace

MERGED = "kineto_rocm_4ranks_merged_tracelens_amd_hpctraining.json.gz"


@pytest.mark.slow  # 5–12 s on the 2-core machine: CI's slow step runs it
def test_tracelens_merged_file_gives_four_ranks_with_their_own_steps() -> None:
    path = real(MERGED)
    doc = json.loads(gzip.decompress(path.read_bytes()))
    # independent sums: the file's own per-rank kernels (args.rank, which TraceLens writes)
    expected: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            expected[e["args"]["rank"]][0] += 1
            expected[e["args"]["rank"]][1] += round(e["dur"] * 1000)
    result = run_trace([path])
    assert [r.tables.rank for r in result.ranks] == [0, 1, 2, 3]
    for r in result.ranks:
        calls, total_ns = expected[r.tables.rank]
        kernels = r.tables.kernels[r.tables.kernels["kind"] == "kernel"]
        assert int(kernels["calls"].sum()) == calls
        assert abs(kernels["total_us"].sum() * 1000 - total_ns) <= calls  # rounding of µs decimals
        steps = r.tables.steps
        assert list(steps["step"]) == [9, 10, 11]
        assert (steps["devices"] == 1).all()
        assert (steps["busy_us"] <= steps["span_us"]).all() and (steps["idle_us"] >= 0).all()
        assert r.meta["rank_source"] == "process names (RANK n)" and r.meta["ranks_in_file"] == 4
    assert result.cross is not None and len(result.cross.frames()["rank_steps"]) == 2


def _merged(tmp_path: Path, named: bool) -> Path:
    """Two ranks in one Kineto file, pids remapped as TraceLens does, each rank's GPU on its own pid."""
    events = []
    for rank in (0, 1):
        cpu, gpu = 1000 + rank * 100_000_000, 2 + rank * 100_000_000
        if named:
            events += [
                {"ph": "M", "name": "process_name", "pid": cpu, "tid": 0, "args": {"name": f"RANK {rank} - CPU"}},
                {"ph": "M", "name": "process_name", "pid": gpu, "tid": 0, "args": {"name": f"RANK {rank} - GPU"}},
            ]
        for n in (1, 2, 3):
            corr = n * 10  # both ranks use the same correlation ids
            events.append(step(n, n * 1000, 900, pid=cpu, tid=cpu))
            events.append(launch(n * 1000 + 10, corr, pid=cpu, tid=cpu, dur=5, name="hipLaunchKernel"))
            events.append(kernel(f"k{rank}", n * 1000 + 100 + rank, 500, corr, device=2 + rank, stream=0, pid=gpu))
    return write_trace(tmp_path / ("named.json" if named else "unnamed.json"), events)


def test_named_processes_split_and_unnamed_ones_are_warned_about(tmp_path: Path) -> None:
    traces = load_traces(_merged(tmp_path, named=True))
    assert [t.meta["rank"] for t in traces] == [0, 1]
    for t in traces:
        assert set(t.events["short_name"]) == {f"k{t.meta['rank']}"}
        # each kernel is joined to its own rank's launch although both ranks use one correlation id
        assert list(t.events["launch_ns"]) == [s * 1_000_000 + 10_000 for s in (1, 2, 3)]
        assert list(t.events["step"]) == [1, 2, 3]
    (one,) = load_traces(_merged(tmp_path, named=False))
    assert any("recorded by several processes" in w for w in one.warnings)
