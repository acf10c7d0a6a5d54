"""Many rank traces as one dataset: parallel reads, a hive-partitioned save, cross-rank tables."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pyarrow.dataset as ds
import pytest
from typer.testing import CliRunner

from conftest import GRAPH
from kprof.analysis.cross_rank import collective_calls, cross_rank_tables
from kprof.analysis.trace_tables import TraceTables
from kprof.cli import app

runner = CliRunner()
RANKS = 3
STRAGGLER = 2  # its kernels last 20% longer


def _rank_traces(folder: Path) -> Path:
    """The recorded GQA trace as three ranks of one job; rank 2 is 20% slower."""
    doc = json.loads(gzip.decompress(GRAPH.read_bytes()))
    folder.mkdir()
    for rank in range(RANKS):
        copy = json.loads(json.dumps(doc))
        copy["distributedInfo"] = {"rank": rank, "world_size": RANKS}
        if rank == STRAGGLER:
            for e in copy["traceEvents"]:
                if e.get("cat") == "kernel":
                    e["dur"] = round(e["dur"] * 1.2, 3)
        (folder / f"rank{rank}.json.gz").write_bytes(gzip.compress(json.dumps(copy).encode()))
    return folder


def _json(*args: str) -> dict:
    res = runner.invoke(app, ["trace", *args, "--format", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_a_folder_of_ranks_in_parallel_is_one_dataset(tmp_path: Path) -> None:
    ranks = _rank_traces(tmp_path / "ranks")
    serial = _json(str(ranks))
    parallel = _json(str(ranks), "--jobs", "2", "--save", str(tmp_path / "saved"))
    assert parallel == serial  # the same tables whichever way the files were read
    assert [r["rank"] for r in parallel["summary"]["ranks"]] == [0, 1, 2]
    # the saved events: one hive-partitioned dataset any parquet reader takes as one table
    dataset = ds.dataset(tmp_path / "saved" / "kernel_events", partitioning="hive")
    table = dataset.to_table()
    assert table.num_rows == RANKS * 320
    assert sorted(set(table.column("rank").to_pylist())) == [0, 1, 2]
    # cross-rank tables: the straggler is the slowest rank of every steady step, by about 20%
    steps = parallel["rank_steps"]
    assert steps and {s["slowest_rank"] for s in steps} == {STRAGGLER}
    kernels = pd.DataFrame(parallel["rank_kernels"])
    top = kernels.iloc[0]
    assert top["slowest_rank"] == STRAGGLER and 18 < top["spread_pct"] < 22


def test_a_glob_names_the_ranks(tmp_path: Path) -> None:
    ranks = _rank_traces(tmp_path / "ranks")
    out = _json(str(ranks / "rank[01].json.gz"))
    assert [r["rank"] for r in out["summary"]["ranks"]] == [0, 1]
    res = runner.invoke(app, ["trace", str(ranks / "nothing*.json")])
    assert res.exit_code == 2 and "matches no file" in res.stderr


def _tables(rank: int) -> TraceTables:
    empty = pd.DataFrame(columns=["step", "warmup", "busy_us"])
    kernels = pd.DataFrame(
        {"name": ["ncclAllReduce"], "short_name": ["ncclAllReduce"], "kind": ["kernel"], "total_us": [1.0]}
    )
    return TraceTables(rank, kernels, empty, None, pd.DataFrame(), {})


def _calls(durations: list[float], name: str = "ncclDevKernel_AllReduce") -> pd.DataFrame:
    return collective_calls(
        pd.DataFrame(
            {
                "kind": ["kernel"] * len(durations),
                "short_name": [name] * len(durations),
                "start_ns": range(len(durations)),
                "dur_ns": [int(d * 1000) for d in durations],
            }
        )
    )


def test_collective_wait_is_time_beyond_the_shortest_call() -> None:
    """Rank 0 arrives late to both all-reduces (its calls are short); rank 1 waits 20 µs in each."""
    cross = cross_rank_tables([_tables(0), _tables(1)], [_calls([10, 10]), _calls([30, 30])])
    waits = cross.collectives.set_index("rank")
    assert waits.loc[0, "wait_us"] == 0 and waits.loc[1, "wait_us"] == pytest.approx(40)
    assert waits.loc[1, "collective_us"] == pytest.approx(60) and waits.loc[1, "wait_pct"] == pytest.approx(200 / 3)
    uneven = cross_rank_tables([_tables(0), _tables(1)], [_calls([10, 10]), _calls([30])])
    assert uneven.collectives["wait_us"].sum() == 0 and "different number of times" in uneven.notes[0]


def test_instantiations_that_share_a_short_name_stay_apart_across_ranks() -> None:
    """Two GEMM instantiations named alike in short: each keeps its own row, spread and slowest rank."""
    names = ["void cutlass::Kernel<gemm_128x128>(Params)", "void cutlass::Kernel<gemm_64x64>(Params)"]

    def rank(r: int, totals: list[float]) -> TraceTables:
        kernels = pd.DataFrame(
            {"name": names, "short_name": ["cutlass::Kernel"] * 2, "kind": "kernel", "total_us": totals}
        )
        return TraceTables(r, kernels, pd.DataFrame(columns=["step", "warmup", "busy_us"]), None, pd.DataFrame(), {})

    cross = cross_rank_tables([rank(0, [100.0, 10.0]), rank(1, [100.0, 20.0])], [_calls([]), _calls([])])
    rows = cross.kernels.set_index("name")
    assert len(rows) == 2 and rows.loc[names[1], "slowest_rank"] == 1 and rows.loc[names[1], "spread_pct"] > 60
    assert rows.loc[names[0], "spread_pct"] == 0


def test_a_bad_rank_read_by_a_worker_is_a_one_line_error(tmp_path: Path) -> None:
    """A worker process meets the broken file: the user gets kprof's one line naming it, exit 2."""
    ranks = _rank_traces(tmp_path / "ranks")
    (ranks / "rank1.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "cat": "kernel" "oops"}]}'))
    res = runner.invoke(app, ["trace", str(ranks), "--jobs", "2"])
    assert res.exit_code == 2
    assert "rank1.json.gz: malformed JSON" in res.output and "Traceback" not in res.output
