"""Inputs that once gave a traceback, hung, or printed an impossible number with exit 0: each is now
one line and exit 2, or a warning beside numbers that can be true."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from fake_runs import write_run
from kineto_events import kernel, write_trace
from typer.testing import CliRunner

from conftest import real
from kprof.cli import app
from kprof.designs.legs import design_legs
from kprof.errors import KprofInputError
from kprof.ingest.load import load_trace

runner = CliRunner()
TRACE = Path(__file__).resolve().parents[1] / "traces" / "gqa_graph_decode.pt.trace.json.gz"
KERNEL_HEADER = (
    "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,"
    "Start_Timestamp,End_Timestamp"
)


def _run(root: Path) -> Path:
    write_run(root, design_legs(("a",), "endpoints"), lambda leg, case: 0.0, rounds=6, features=("a",)).compact()
    return root


def _one_line(args: list[str], expect: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, (args, res.output, repr(res.exception))
    assert res.stderr.startswith("kprof: error: ") and expect in res.stderr, res.stderr


def _meta_deep(meta: Path) -> str:
    meta.write_text("[" * 100_000 + "]" * 100_000)
    return "nests values too deeply"


def _meta_infinite(meta: Path) -> str:
    record = json.loads(meta.read_text())
    meta.write_text(json.dumps({**record, "protocol": {**record["protocol"], "rounds": float("inf")}}))
    return "Expected `int`, got `float` - at `$.protocol.rounds`"


def _meta_nan(meta: Path) -> str:
    record = json.loads(meta.read_text())
    meta.write_text(json.dumps({**record, "protocol": {**record["protocol"], "rounds": float("nan")}}))
    return "Expected `int`, got `float` - at `$.protocol.rounds`"


def _meta_directory(meta: Path) -> str:
    meta.unlink()
    meta.mkdir()
    return "is a directory, not a meta.json"


def _meta_dev_zero(meta: Path) -> str:
    meta.unlink()
    meta.symlink_to("/dev/zero")  # read whole, it never ends (a MemoryError before)
    return "is not a regular file"


def _meta_fifo(meta: Path) -> str:
    meta.unlink()
    os.mkfifo(meta)  # read, it hangs until a writer comes
    return "is not a regular file"


@pytest.mark.parametrize("damage", [_meta_deep, _meta_infinite, _meta_nan, _meta_directory, _meta_dev_zero, _meta_fifo])
def test_a_meta_json_that_cannot_be_one_is_one_line(tmp_path: Path, damage) -> None:
    root = _run(tmp_path / "run")
    expect = damage(root / "meta.json")
    for command in ("report", "attribute"):
        _one_line([command, str(root)], expect)


def test_a_lock_file_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    root = _run(tmp_path / "run")
    (root / ".lock").mkdir()
    _one_line(["run", "--out", str(root), "--resume"], "cannot be opened as a lock file")


def test_a_stray_copy_of_a_part_is_warned_about_and_never_counted(tmp_path: Path) -> None:
    root = _run(tmp_path / "run")
    samples = root / "samples"
    shutil.copy(samples / "compact.parquet", samples / "c000-rXYZ.parquet")  # every row once more
    doc = json.loads(runner.invoke(app, ["report", str(root), "--format", "json"]).stdout)
    assert {r["rounds"] for r in doc["legs"] if r["verdict"] != "REFERENCE"} == {6}
    assert doc["warnings"] == [
        f"skipped a damaged part: {samples}/c000-rXYZ.parquet: left out, not a part kprof wrote (by its name)"
    ]
    pytest.importorskip("duckdb")
    count = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM samples", str(root), "--format", "json"])
    assert json.loads(count.stdout)["rows"] == [{"n": 7 * 3 * 3}]  # rounds (burn-in too) × legs × samples


def test_trace_inputs_that_are_no_file_say_what_they_are(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    dangling = tmp_path / "gone.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    _one_line(["trace", str(loop)], "is a symbolic link loop")
    _one_line(["trace", str(dangling)], "is a symbolic link to nothing")
    _one_line(["trace", str(fifo)], "is not a regular file")
    _one_line(["trace", "/dev/zero"], "is not a regular file")
    deep = tmp_path / "deep.json"
    kernel = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": '
    deep.write_text('{"traceEvents": [' + kernel + "[" * 100_000 + "]" * 100_000 + "}]}")
    _one_line(["trace", str(deep)], "nests values deeper than kprof's decoder reads")
    _one_line(["trace", str(TRACE), "--save", str(tmp_path / ("x" * 300))], "File name too long")


def test_impossible_times_are_left_out_or_zero_and_said(tmp_path: Path) -> None:
    """A negative start made one kernel's mean 1.5e12 µs; an end before its start made 961% busy."""
    path = tmp_path / "run_kernel_trace.csv"
    path.write_text(
        KERNEL_HEADER + "\n"
        '"KERNEL_DISPATCH","Agent 4",1,1,7,1,10,"k",1,-1551874061244694,1551874061255734\n'
        '"KERNEL_DISPATCH","Agent 4",1,1,7,2,10,"k",2,1551874061300000,1551874061310000\n'
        '"KERNEL_DISPATCH","Agent 4",1,1,7,3,10,"k",3,1551874061400000,1551874061390000\n'
    )
    trace = load_trace(path)
    assert trace.events["dur_ns"].tolist() == [10_000, 0]
    assert (trace.events["end_ns"] >= trace.events["start_ns"]).all()
    assert trace.warnings[:2] == [
        "1 activities start at or before time zero (0.0 µs of device time): left out",
        "1 activities end before they start (0.0 µs of device time): counted as 0 µs",
    ]
    doc = json.loads(runner.invoke(app, ["trace", str(path), "--format", "json"]).stdout)
    (row,) = doc["kernels"]
    assert row["pct_busy"] == pytest.approx(100.0) and row["max_us"] == pytest.approx(10.0)


def test_an_rpd_with_a_blob_where_times_belong_is_one_line(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "blob.rpd"
    shutil.copy(real("rpd_matmul_result.rpd"), path)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE rocpd_op SET \"end\" = x'00ff' WHERE id IN (SELECT id FROM rocpd_op LIMIT 3)")
    _one_line(["trace", str(path)], "holds a value that is neither a number nor UTF-8 text")


@pytest.mark.parametrize("damage", ["text times", "null times"])
def test_a_samples_part_of_wrong_types_or_nulls_is_not_a_finished_round(tmp_path: Path, damage: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kprof.store.run_folder import RunFolder

    root = _run(tmp_path / "run")
    rows = pq.read_table(root / "samples" / "compact.parquet").to_pandas()
    rows = rows[rows["_part"] == "c000-r0003"].drop(columns="_part")
    if damage == "text times":
        rows["time_ns"] = rows["time_ns"].map(lambda t: f"{t} ns")
    else:
        rows.loc[rows.index[0], "time_ns"] = None
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), root / "samples" / "c000-r0003.parquet")
    assert RunFolder(root).finished_rounds(0) == [0, 1, 2, 4, 5, 6]
    doc = json.loads(runner.invoke(app, ["report", str(root), "--format", "json"]).stdout)
    assert {r["rounds"] for r in doc["legs"] if r["verdict"] != "REFERENCE"} == {5}
    (warning,) = doc["warnings"]  # said once: as a damaged part, not again as an absent round
    assert "c000-r0003.parquet: is a damaged samples part" in warning


def test_a_full_disk_leaves_the_run_folder_as_it_was_and_says_so_in_one_line(tmp_path: Path, monkeypatch) -> None:
    import errno

    from kprof.store.run_folder import RunFolder

    root = _run(tmp_path / "run")
    RunFolder(root).update_case("c", status="done")
    before = {p: p.read_bytes() for p in (root / "meta.json", root / "status" / "c000.json")}

    def full(self: Path, data: bytes) -> int:
        Path.write_text(self, data.decode()[: len(data) // 2])  # part of it lands, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(KprofInputError, match="c000.json: cannot be written \\(No space left on device\\)"):
        RunFolder(root).update_case("c", status="")
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in before} == before and not list(root.rglob("*.partial"))


def test_damaged_parts_of_tables_the_report_does_not_read_are_warned_about(tmp_path: Path) -> None:
    root = _run(tmp_path / "run")
    for table in ("rounds", "launches"):
        (root / table).mkdir(exist_ok=True)
        (root / table / "c000-r0002.parquet").write_bytes(b"PAR1 cut short")
    doc = json.loads(runner.invoke(app, ["report", str(root), "--format", "json"]).stdout)
    assert [w.split(": ", 2)[1] for w in doc["warnings"]] == [
        f"{root}/{table}/c000-r0002.parquet" for table in ("rounds", "launches")
    ]


def test_a_trace_too_large_for_memory_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader whose allocation is refused (as under ``ulimit -v``) ends in one line naming the
    file and what reading costs, exit 2, not a MemoryError traceback."""
    import kprof.ingest.formats.kineto as kineto

    def refuse(*args: object, **kwargs: object) -> None:
        raise MemoryError

    trace = write_trace(tmp_path / "t.json", [kernel("k", 10, 5, 1)])
    monkeypatch.setattr(kineto, "_build", refuse)
    _one_line(["trace", str(trace)], f"{trace}: ran out of memory while reading it")


def test_memory_running_out_after_the_read_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read's check passed, but the tables built from the trace need more than the machine gives
    (seen under ``ulimit -v`` on a 1M-kernel Nsight Systems export): one line, exit 2."""
    import kprof.commands.trace as trace_command

    def refuse(*args: object, **kwargs: object) -> None:
        raise MemoryError

    trace = write_trace(tmp_path / "t.json", [kernel("k", 10, 5, 1)])
    monkeypatch.setattr(trace_command, "trace_tables", refuse)
    _one_line(["trace", str(trace)], "ran out of memory: this machine's available memory")


@pytest.mark.parametrize("fmt", ["rpd", "rocpd", "nsys"])
def test_a_database_whose_typed_columns_are_all_null_reads_or_is_one_line(fmt: str, tmp_path: Path) -> None:
    """SQLite keeps NULL in any column a schema does not forbid it in: every column but ids, times
    and strings NULL (a device, stream, grid, launch and API columns among them) once crashed the
    per-device busy time with a traceback."""
    import sqlite3

    from tests.synthetic_traces import WRITERS

    path = WRITERS[fmt](tmp_path / f"nulls-{fmt}", 50)
    nulled = 0
    with sqlite3.connect(path) as con:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            columns = [row[1] for row in con.execute(f'PRAGMA table_info("{table}")')]
            kept = ("id", "start", "end", "string", "value")
            for column in [c for c in columns if c not in kept and not c.endswith(("_id", "Id"))]:
                try:
                    con.execute(f'UPDATE "{table}" SET "{column}" = NULL')
                    nulled += 1
                except sqlite3.Error:  # a NOT NULL column (nsys's schema has some) stays as it is
                    pass
    assert nulled >= 1
    res = runner.invoke(app, ["trace", str(path), "--format", "json"])
    if res.exit_code == 2:
        assert res.stderr.startswith("kprof: error: ") and res.stderr.count("\n") == 1, res.stderr
    else:
        assert res.exit_code == 0, (res.output, repr(res.exception))
        assert json.loads(res.stdout)["kernels"], res.stdout


def test_traces_that_lie_are_caught(tmp_path: Path) -> None:
    """An end of INT64_MAX (an nsys export's) made a kernel total of -9.2e15 µs, exit 0; a Kineto
    kernel with a negative dur was counted as 0 without the warning other formats give; one file
    given twice was reported as two ranks."""
    from tests.kineto_events import kernel, write_trace

    path = tmp_path / "run_kernel_trace.csv"
    path.write_text(
        KERNEL_HEADER + "\n"
        '"KERNEL_DISPATCH","Agent 4",1,1,7,1,10,"k",1,1551874061300000,9223372036854775807\n'
        '"KERNEL_DISPATCH","Agent 4",1,1,7,2,10,"k",2,1551874061400000,1551874061410000\n'
    )
    trace = load_trace(path)
    assert trace.events["dur_ns"].tolist() == [10_000]
    assert any("1 activities last longer than the whole trace (an impossible end)" in w for w in trace.warnings)
    doc = json.loads(runner.invoke(app, ["trace", str(path), "--format", "json"]).stdout)
    assert doc["kernels"][0]["total_us"] == pytest.approx(10.0)
    kineto = write_trace(tmp_path / "k.json", [kernel("k", 10.0, 5.0, corr=1), kernel("k", 20.0, -3.0, corr=2)])
    loaded = load_trace(kineto)
    assert loaded.events["dur_ns"].tolist() == [5_000, 0]
    assert any("1 activities end before they start" in w and "counted as 0 µs" in w for w in loaded.warnings)
    _one_line(["trace", str(TRACE), str(TRACE)], "is given twice")


def test_stored_values_no_clock_or_reader_takes_are_one_line(tmp_path: Path) -> None:
    """Tracebacks the issue found: a leg's replica of Infinity (OverflowError), times of 0 (KeyError),
    a NaN threshold (every verdict UNRESOLVED under 'threshold ±nan%', exit 0), and a NaN in a
    status file (JSON output with a NaN token)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    replica = _run(tmp_path / "replica")
    meta = json.loads((replica / "meta.json").read_text())
    next(leg for leg in meta["legs"] if "A/A" in leg["name"])["replica"] = float("inf")
    (replica / "meta.json").write_text(json.dumps(meta))
    for command in ("report", "attribute"):
        _one_line([command, str(replica)], "OverflowError")
    threshold = _run(tmp_path / "threshold")
    meta = json.loads((threshold / "meta.json").read_text())
    meta["threshold_pct"] = float("nan")
    (threshold / "meta.json").write_text(json.dumps(meta))
    _one_line(["report", str(threshold)], "holds threshold_pct nan")
    zero = _run(tmp_path / "zero")
    compact = zero / "samples" / "compact.parquet"
    table = pq.read_table(compact).to_pandas().assign(time_ns=0.0)
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), compact)
    for command in ("report", "attribute"):
        _one_line([command, str(zero)], "time_ns values that are not > 0 and finite")
    status_nan = _run(tmp_path / "nan")
    path = status_nan / "status" / "c000.json"
    status = json.loads(path.read_text())
    status["baseline_warmup_ns"] = float("nan")
    path.write_text(json.dumps(status))
    out = runner.invoke(app, ["report", str(status_nan), "--format", "json"]).stdout
    json.loads(out, parse_constant=lambda token: pytest.fail(f"{token} in JSON output"))


def test_output_names_the_file_system_refuses_or_takes(tmp_path: Path) -> None:
    """A 300-character --output name was an OSError traceback; a legal 255-character one failed on
    the temporary file's longer name."""
    _one_line(["trace", str(TRACE), "--output", str(tmp_path / ("x" * 300 + ".md"))], "File name too long")
    longest = tmp_path / ("y" * 252 + ".md")
    assert runner.invoke(app, ["trace", str(TRACE), "--output", str(longest)]).exit_code == 0 and longest.exists()


def test_comparing_with_a_trace_without_gpu_activity_is_one_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    _one_line(["compare", str(TRACE), str(empty), "--fail-on", "slower>2%"], "holds no GPU activity")


def test_a_database_whose_reading_never_ends_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An RPD whose rocpd_op is a view that recurses without end was read for minutes, nothing said."""
    import sqlite3

    path = tmp_path / "endless.rpd"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE rocpd_string (id INTEGER PRIMARY KEY, string TEXT)")
        con.execute("CREATE TABLE rocpd_api (id INTEGER PRIMARY KEY, apiName_id INT, args_id INT, start INT, end INT)")
        con.execute(
            "CREATE VIEW rocpd_op AS WITH RECURSIVE r(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM r) "
            'SELECT id, 0 AS gpuId, 0 AS queueId, id AS start, id + 1 AS "end" FROM r'
        )
    monkeypatch.setenv("KPROF_SQLITE_SECONDS", "1")
    _one_line(["trace", str(path)], "reading the database took longer than 1 s (KPROF_SQLITE_SECONDS): stopped")


def test_a_rocprofv3_json_of_mostly_whitespace_is_refused_before_it_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """6.9 MB of gzip inflated to 1.5 GB of spaces and 3.2 GB of memory, exit 0; the Kineto and CSV
    readers refused such files. Here at 1/64 of the check's size, in the rocprofv3 layout."""
    import gzip

    from kprof.ingest.formats import rocprofv3_json

    monkeypatch.setattr(rocprofv3_json, "WHITESPACE_CHECK_BYTES", 1 << 20)
    path = tmp_path / "bomb_results.json.gz"
    with gzip.open(path, "wb") as f:
        f.write(b'{"rocprofiler-sdk-tool": [' + b" " * (4 << 20) + b"]}")
    _one_line(["trace", str(path)], "whitespace in its first")


def test_profiles_kprof_does_not_read_are_named(tmp_path: Path) -> None:
    """rocprof v1's results.db read as 'a SQLite database of no trace format'; a JAX profile was
    refused with a list of other formats (now read: one without device activity says so, and one
    where no XProf reader is installed says what to install)."""
    import gzip
    import sqlite3

    from xspace_proto import Event, Line, plane, xspace

    db = tmp_path / "results.db"
    with sqlite3.connect(db) as con:
        for table in ("KERN", "OPS", "HIP"):
            con.execute(f'CREATE TABLE "{table}" (BeginNs INTEGER, EndNs INTEGER, Name TEXT)')
    _one_line(["trace", str(db)], "rocprof v1's SQLite database (results.db)")
    xplane = tmp_path / "host.xplane.pb"
    xplane.write_bytes(xspace([plane(1, "/host:CPU", [Line("python", [Event("step", 0, 10)])])]))  # host only
    _one_line(["trace", str(xplane)], "is a JAX/XLA profile")
    packed = tmp_path / "host.xplane.pb.gz"
    packed.write_bytes(gzip.compress(xplane.read_bytes()))
    _one_line(["trace", str(packed)], "is a JAX/XLA profile")


def test_a_correlation_id_reused_by_two_launch_calls_is_said_and_refused_under_strict(tmp_path: Path) -> None:
    """Two launch calls with one correlation id (a producer that restarts its counter): the
    activities joined through that id are counted and said, a graph replay's many kernels under
    one launch are not, and --strict refuses the trace."""
    from tests.kineto_events import kernel, launch, step, write_trace

    events = [step(1, 0, 100), launch(10, 1), kernel("a", 20, 5, 1), launch(30, 2), kernel("b", 40, 5, 2)]
    events += [launch(50, 2), kernel("c", 60, 5, 2)]
    events += [launch(70, 3, name="cudaGraphLaunch"), kernel("g1", 75, 2, 3), kernel("g2", 78, 2, 3)]  # one call
    path = write_trace(tmp_path / "reused.json", events)
    trace = load_trace(path)
    said = [p for p in trace.meta["integrity"] if "ids reused" in p["problem"]]
    assert len(said) == 1 and said[0]["activities"] == 2 and said[0]["device_us"] == 10.0, trace.meta["integrity"]
    _one_line(["trace", str(path), "--strict"], "(--strict: a trace with impossible records is refused)")
    clean = write_trace(tmp_path / "clean.json", [e for e in events if e["name"] != "b" and e.get("ts") != 30])
    assert not any("ids reused" in p["problem"] for p in load_trace(clean).meta.get("integrity", []))


def test_each_integrity_problem_is_said_kept_out_and_refused_under_strict(tmp_path: Path) -> None:
    """Known producer bugs: a kernel before its own launch, a timestamp that wrapped at the start
    of a session, a duration longer than the trace. Each is one line with its count and device time,
    kept out of the figures it would falsify, and --strict refuses the trace."""
    from tests.kineto_events import event, kernel, launch, write_trace

    day_us, t0 = 86_400 * 1e6, 1e12  # µs: a session 11.6 days into its device clock
    events = [
        event("user_annotation", "ProfilerStep#1", t0, 100),
        event("user_annotation", "ProfilerStep#2", t0 + 100, 100),
        launch(t0 + 10, 1),
        kernel("ok", t0 + 20, 5, 1),
        launch(t0 + 150, 2),
        kernel("early", t0 + 40, 5, 2),  # starts in step 1's time, before its launch in step 2
        kernel("wrapped", t0 - 2 * day_us, 5, 3),
        kernel("endless", t0 + 60, 10 * day_us, 4),
    ]
    path = write_trace(tmp_path / "lies.json", events)
    trace = load_trace(path)
    assert sorted(trace.events["name"]) == ["early", "ok"]
    lines = "\n".join(trace.warnings)
    assert "1 activities start more than a day before the rest (a wrapped clock) (5.0 µs" in lines
    assert "1 activities last longer than the whole trace (an impossible end)" in lines
    assert "1 activities start before their launch (5.0 µs of device time): their launch time is not used" in lines
    assert trace.events.set_index("name")["step"].to_dict() == {"ok": 1, "early": 1}  # by its start
    assert [p["problem"] for p in trace.meta["integrity"]][-1] == "start before their launch"
    _one_line(["trace", str(path), "--strict"], "(--strict: a trace with impossible records is refused)")
    doc = json.loads(runner.invoke(app, ["trace", str(path), "--format", "json"]).stdout)
    assert [p["activities"] for p in doc["summary"]["ranks"][0]["integrity"]] == [1, 1, 1]
