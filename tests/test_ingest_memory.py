"""A trace that memory cannot hold is refused in one line before it is read (issue: memory bounded
by design), in every format; the guard's view of free memory comes from meminfo, cgroup and
``ulimit -v``; and the columnar readers give the tables the old readers gave."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from kprof.cli import app
from kprof.errors import KprofInputError
from kprof.ingest import memory
from kprof.ingest.load import load_traces
from kprof.ingest.normalize import looked_up
from tests.synthetic_traces import WRITERS

runner = CliRunner()
KERNELS = 3000


@pytest.fixture(scope="module", params=sorted(WRITERS))
def synthetic(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    fmt = request.param
    return fmt, WRITERS[fmt](tmp_path_factory.mktemp(fmt) / f"t-{fmt}", KERNELS)


def _free(monkeypatch: pytest.MonkeyPatch, activities: float) -> None:
    monkeypatch.setattr(memory, "free_bytes", lambda: int(activities * memory.PEAK_BYTES_PER_ACTIVITY))


def test_a_trace_that_cannot_fit_is_refused_in_one_line(
    synthetic: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fmt, path = synthetic
    _free(monkeypatch, KERNELS / 2)
    res = runner.invoke(app, ["trace", str(path)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, (fmt, res.output, repr(res.exception))
    assert res.stderr.startswith(f"kprof: error: {path}: holds about "), res.stderr
    assert f"{memory.CHECK_VARIABLE}=0 reads it anyway" in res.stderr
    held = int(res.stderr.split("holds about ")[1].split(" ")[0].replace(",", ""))
    assert KERNELS <= held <= 1.2 * KERNELS  # counted (SQLite) or projected from the file read (streams)


def test_a_trace_that_fits_is_read_and_the_check_can_be_turned_off(
    synthetic: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fmt, path = synthetic
    _free(monkeypatch, KERNELS * 2)
    assert sum(len(t.events) for t in load_traces(path)) == KERNELS
    _free(monkeypatch, 1)
    monkeypatch.setenv(memory.CHECK_VARIABLE, "0")
    assert sum(len(t.events) for t in load_traces(path)) == KERNELS


def test_a_stream_is_projected_from_the_share_read() -> None:
    guard = memory.MemoryGuard(Path("t.json"), free=100 * memory.PEAK_BYTES_PER_ACTIVITY)
    guard.position(1, 100)
    guard.expect_share(10)  # 1% read: too early to project 1,000
    guard.position(10, 100)
    guard.expect_share(9)  # 90 in all: fits
    with pytest.raises(KprofInputError, match="holds about 110 device activities"):
        guard.expect_share(11)


def test_free_memory_is_the_least_of_meminfo_cgroup_and_address_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = tmp_path / "memory" / "job"
    group.mkdir(parents=True)
    (group / "memory.limit_in_bytes").write_text("1000000000\n")
    (group / "memory.usage_in_bytes").write_text("400000000\n")
    membership = tmp_path / "cgroup"
    membership.write_text("5:cpu:/\n4:memory:/job\n0::/\n")
    assert memory._cgroup_room(str(tmp_path), str(membership)) == 600_000_000
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text("max\n")
    (v2 / "memory.current").write_text("5\n")
    membership.write_text("0::/v2\n")
    assert memory._cgroup_room(str(tmp_path), str(membership)) is None  # "max": no limit
    (v2 / "memory.max").write_text("105\n")
    assert memory._cgroup_room(str(tmp_path), str(membership)) == 100

    monkeypatch.setattr(memory.resource, "getrlimit", lambda _: (1 << 62, 1 << 62))
    room = memory._address_space_room()
    assert room is not None and 0 < room < 1 << 62  # the limit less what the process has mapped
    monkeypatch.setattr(memory, "_meminfo_available", lambda: 5_000)
    monkeypatch.setattr(memory, "_cgroup_room", lambda: 3_000)
    monkeypatch.setattr(memory, "_address_space_room", lambda: None)
    assert memory.free_bytes() == 3_000


def test_a_looked_up_key_gives_the_last_matching_row_or_null() -> None:
    keys = pd.Series([3, None, 7, 1], dtype="Int64")
    table = pd.Series([1, 3, 3, 5], dtype="Int64")
    values = pd.Series([10, 30, 31, 50], dtype="Int64")
    assert looked_up([keys], [table], values).tolist() == [31, pd.NA, pd.NA, 10]
    pid, corr = pd.Series([1, 3, 1], dtype="Int64"), pd.Series([3, 5, 6], dtype="Int64")
    got = looked_up([pid, corr], [table[:2], table[2:]], values[:2])  # keys (1, 3) and (3, 5)
    assert got.tolist() == [10, 30, pd.NA]


def test_a_plain_csv_is_counted_from_its_size_and_first_lines(tmp_path: Path) -> None:
    from kprof.ingest.csv_columns import _SAMPLE_BYTES, _rows_estimate

    path = WRITERS["rocprofv3-csv"](tmp_path / "big", 20_000)
    assert path.stat().st_size > 2 * _SAMPLE_BYTES  # the estimate, not the exact count of a short file
    assert 0.9 * 20_000 <= _rows_estimate(path) <= 1.1 * 20_000


def test_an_activity_without_a_device_is_counted_on_device_minus_one(tmp_path: Path) -> None:
    import sqlite3

    path = WRITERS["rpd"](tmp_path / "nodevice", 40)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE rocpd_op SET gpuId = NULL WHERE id % 2 = 0")
    (trace,) = load_traces(path)
    assert (trace.events["device"] == -1).sum() == 20 and trace.events["device"].notna().all()
    assert "20 activities name no device: counted on device -1" in trace.warnings
    res = runner.invoke(app, ["trace", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output


def test_a_key_looked_up_in_an_empty_table_is_null() -> None:
    keys = pd.Series([1, None], dtype="Int64")
    assert looked_up([keys], [pd.Series([], dtype="Int64")], pd.Series([], dtype="Int64")).isna().all()
