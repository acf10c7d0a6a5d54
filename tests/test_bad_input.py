"""Property-based: damaged real traces either load or fail with a KprofInputError, never anything else."""

from __future__ import annotations

import gzip
import json
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import GRAPH, report_fuzz_count, rocpd_db
from kprof.errors import KprofInputError
from kprof.ingest.load import load_trace

with gzip.open(GRAPH) as f:
    RAW = f.read()
DOC = json.loads(RAW)
EVENTS = DOC["traceEvents"]
FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
SETTINGS = settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


TRIED: list[str] = []  # damaged files tried, counted in the output by the last test here


def _check(path: Path) -> None:
    TRIED.append(path.name)
    try:
        trace = load_trace(path)
    except KprofInputError as e:
        assert str(e).startswith(str(path)) and "\n" not in str(e)
    else:
        assert (trace.events["dur_ns"] >= 0).all()


@SETTINGS
@given(cut=st.integers(0, len(RAW) - 1))
def test_truncated_anywhere(tmp_path_factory, cut: int) -> None:
    path = tmp_path_factory.mktemp("cut") / "t.json"
    path.write_bytes(RAW[:cut])
    _check(path)


PACKED = GRAPH.read_bytes()


@SETTINGS
@given(cut=st.integers(2, len(PACKED) - 1))
def test_gzip_truncated_anywhere_recovers_or_says_so(tmp_path_factory, cut: int) -> None:
    """A .json.gz cut anywhere: without --recover one line; with it, every complete event before
    the cut (never more kernels than the whole file has)."""
    path = tmp_path_factory.mktemp("gzcut") / "t.json.gz"
    path.write_bytes(PACKED[:cut])
    _check(path)
    try:
        trace = load_trace(path, recover=True)
    except KprofInputError as e:
        assert "\n" not in str(e)
    else:
        assert len(trace.events) <= len(load_trace(GRAPH).events)


def _overwritten(path: Path, raw: bytes, pos: int, data: bytes) -> Path:
    """``path`` holding ``raw`` with ``data`` written over it from ``pos``."""
    path.write_bytes(raw[:pos] + data + raw[pos + len(data) :])
    return path


@SETTINGS
@given(pos=st.integers(0, len(RAW) - 1), data=st.binary(min_size=1, max_size=4))
def test_bytes_overwritten(tmp_path_factory, pos: int, data: bytes) -> None:
    _check(_overwritten(tmp_path_factory.mktemp("flip") / "t.json", RAW, pos, data))


@SETTINGS
@given(index=st.integers(0, len(EVENTS) - 1), field=st.sampled_from(FIELDS), value=ODD_VALUES, drop=st.booleans())
def test_field_with_wrong_type_or_missing(tmp_path_factory, index: int, field: str, value, drop: bool) -> None:
    events = [dict(e) for e in EVENTS]
    if drop:
        events[index].pop(field, None)
    else:
        events[index][field] = value
    path = tmp_path_factory.mktemp("field") / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(dict(DOC, traceEvents=events), f)
    _check(path)


@SETTINGS
@given(
    index=st.integers(0, len(EVENTS) - 1),
    key=st.sampled_from(["correlation", "grid", "block", "device", "stream", "registers per thread", "shared memory"]),
    value=ODD_VALUES,
)
def test_kernel_args_with_wrong_types(tmp_path_factory, index: int, key: str, value) -> None:
    events = [dict(e) for e in EVENTS]
    args = dict(events[index].get("args") or {})
    args[key] = value
    events[index]["args"] = args
    path = tmp_path_factory.mktemp("args") / "t.json"
    path.write_text(json.dumps(dict(DOC, traceEvents=events)))
    _check(path)


CSV = (
    b"Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,Start_Timestamp,"
    b"End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,Workgroup_Size_X,"
    b"Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z\n"
    b'"KERNEL_DISPATCH","Agent 4",1,1,852831,1,10,"void addition_kernel<float>(float*, int)",1,1551874061244694,'
    b"1551874061255734,0,0,8,0,16,64,1,1,1024,1024,1\n"
    b'"KERNEL_DISPATCH","Agent 4",1,1,852831,2,11,"triton_poi_fused_add_0",2,1551874061300000,1551874061310000,'
    b"512,0,32,0,16,128,1,1,4096,1,1\n"
)


@SETTINGS
@given(pos=st.integers(0, len(CSV) - 1), data=st.binary(min_size=1, max_size=3), cut=st.booleans())
def test_rocprof_csv_damaged(tmp_path_factory, pos: int, data: bytes, cut: bool) -> None:
    path = tmp_path_factory.mktemp("csv") / "run_kernel_trace.csv"
    if cut:
        path.write_bytes(CSV[:pos])
    else:
        _overwritten(path, CSV, pos, data)
    _check(path)


with tempfile.TemporaryDirectory() as _d:
    rocpd_db(Path(_d) / "x.db")
    ROCPD = (Path(_d) / "x.db").read_bytes()


@SETTINGS
@given(pos=st.integers(0, len(ROCPD) - 1), data=st.binary(min_size=1, max_size=64))
def test_rocpd_database_bytes_damaged(tmp_path_factory, pos: int, data: bytes) -> None:
    _check(_overwritten(tmp_path_factory.mktemp("rocpd") / "host_1_results.db", ROCPD, pos, data))


@SETTINGS
@given(table=st.sampled_from(["k_1", "r_1"]), column=st.integers(0, 16), value=ODD_VALUES)
def test_rocpd_database_value_of_any_type(tmp_path_factory, table: str, column: int, value) -> None:
    """SQLite keeps any value in any column: text, fractions, huge integers, blobs of JSON."""
    path = tmp_path_factory.mktemp("rocpd") / "host_1_results.db"
    path.write_bytes(ROCPD)
    con = sqlite3.connect(path)
    names = [row[1] for row in con.execute(f"PRAGMA table_info({table})")]
    stored = json.dumps(value) if isinstance(value, (list, dict)) else value
    if isinstance(stored, int) and abs(stored) >= 2**63:
        stored = str(stored)  # SQLite's integers are 64 bits: a larger one arrives as text
    con.execute(f'UPDATE {table} SET "{names[column % len(names)]}" = ?', (stored,))
    con.commit()
    con.close()
    _check(path)


def test_json_objects_without_trace_events_and_unwritable_outputs_are_one_line_errors(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kprof.cli import app

    runner = CliRunner()
    for text in ("{}", '{"run_format_version": 2, "legs": []}'):
        path = tmp_path / "x.json"
        path.write_text(text)
        res = runner.invoke(app, ["trace", str(path)])
        assert res.exit_code == 2 and "without traceEvents" in res.stderr and res.stderr.count("\n") == 1
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    res = runner.invoke(app, ["run", "paged_decode", "--device", "cpu", "--out", str(a_file / "run")])
    assert res.exit_code == 2 and "cannot hold a run folder" in res.stderr
    assert not (tmp_path / "runs").exists()


def test_fuzz_count(capsys) -> None:
    """Says how many damaged trace files the property tests above tried (it runs last in this file)."""
    report_fuzz_count(capsys, "trace", TRIED, 150)
