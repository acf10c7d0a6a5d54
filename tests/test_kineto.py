"""Kineto ingest on the project's own H200 traces and on hand-made files for each format quirk."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import EAGER, GRAPH, real
from kprof.errors import KprofInputError
from kprof.ingest.formats import kineto, kineto_stream
from kprof.ingest.load import load_trace


def _raw(path: Path) -> dict:
    with gzip.open(path) as f:
        return json.load(f, parse_float=Decimal)


@pytest.mark.parametrize("path", [EAGER, GRAPH])
def test_counts_and_exact_times_match_the_file(path: Path) -> None:
    doc = _raw(path)
    base = doc["baseTimeNanoseconds"]
    gpu = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    t = kineto.load(path)
    assert len(t.events) == len(gpu)
    expected = sorted(base + int(Decimal(e["ts"]) * 1000) for e in gpu)
    assert sorted(t.events["start_ns"].astype(int)) == expected
    expected_dur = sorted(int(Decimal(e["dur"]) * 1000) for e in gpu)
    assert sorted(t.events["dur_ns"].astype(int)) == expected_dur
    assert (t.events["end_ns"] - t.events["start_ns"] == t.events["dur_ns"]).all()


def test_graph_replays_share_one_correlation_and_one_launch() -> None:
    t = kineto.load(GRAPH)
    kernels = t.events[t.events["kind"] == "kernel"]
    per_launch = kernels.groupby("correlation").size()
    assert per_launch.max() == 60  # one cudaGraphLaunch replays the whole decode stack
    graph = kernels[kernels["correlation"].isin(per_launch[per_launch == 60].index)]
    assert graph.groupby("correlation")["launch_ns"].nunique().eq(1).all()
    assert graph["launch_ns"].notna().all()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


KERNEL_ARGS = '"args": {"device": 0, "stream": 7, "correlation": 5, "grid": [2,1,1], "block": [128,1,1]}'


@pytest.mark.parametrize(
    ("head", "ts", "expected_ns"),
    [
        ("", "1695835573023613", 1695835573023613000),  # generation 1: integer epoch µs
        ("", "1712195495519689.047", 1712195495519689047),  # generation 2: 19 digits, float64 would lose ns
        (
            '"baseTimeNanoseconds": 1727743122000000000,',
            "2413669097444.592",
            1727743122000000000 + 2413669097444592,
        ),
    ],
)
def test_three_ts_generations_give_exact_absolute_ns(tmp_path: Path, head: str, ts: str, expected_ns: int) -> None:
    text = (
        f'{{{head} "traceEvents": [{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
        f'"ts": {ts}, "dur": 1.5, {KERNEL_ARGS}}}]}}'
    )
    t = kineto.load(_write(tmp_path, "t.json", text))
    assert int(t.events["start_ns"].iloc[0]) == expected_ns
    assert int(t.events["dur_ns"].iloc[0]) == 1500


def test_base_time_written_after_the_events_is_still_applied(tmp_path: Path) -> None:
    text = (
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.001, '
        f'"dur": 2, {KERNEL_ARGS}}}], "traceName": "x", "baseTimeNanoseconds": 1000000000000000000}}'
    )
    t = kineto.load(_write(tmp_path, "late.json", text))
    assert int(t.events["start_ns"].iloc[0]) == 1000000000000010001


def test_small_pieces_give_the_same_table_as_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = load_trace(EAGER).events
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 4096)
    pieces = load_trace(EAGER).events
    assert pieces.equals(whole)


def test_pieces_are_decoded_in_place_in_one_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every piece but the last reaches msgspec as a view of the one reused buffer, not a copy."""
    monkeypatch.setenv("KPROF_NO_SCANNER", "1")
    seen: list[object] = []
    decode_piece = kineto_stream._decode_piece

    def recording(path: Path, decode: object, data: object) -> object:
        seen.append(data.obj if isinstance(data, memoryview) else type(data))
        return decode_piece(path, decode, data)

    monkeypatch.setattr(kineto_stream, "_decode_piece", recording)
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 1 << 16)
    load_trace(EAGER)
    assert len(seen) > 10
    assert all(isinstance(s, bytearray) for s in seen) and len({id(s) for s in seen}) == 1


def test_events_out_of_order_and_no_metadata(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{i}",
            "pid": 0,
            "tid": 7,
            "ts": 100 - 10 * i,
            "dur": 5,
            "args": {"correlation": i},
        }
        for i in range(5)
    ]
    t = load_trace(_write(tmp_path, "unordered.json", json.dumps({"traceEvents": events})))
    assert sorted(t.events["name"]) == [f"k{i}" for i in range(5)]
    assert t.meta["rank"] == 0


def _truncated_copy(src: Path, dest: Path, keep: float) -> tuple[Path, bytes]:
    with gzip.open(src) as f:
        data = f.read()
    cut = data[: int(len(data) * keep)]
    dest.write_bytes(cut)
    return dest, cut


def test_truncated_json_is_an_error_that_names_the_way_out(tmp_path: Path) -> None:
    path, _ = _truncated_copy(EAGER, tmp_path / "cut.json", 0.6)
    with pytest.raises(KprofInputError, match="truncated.*--recover"):
        kineto.load(path)


def test_unfinished_tmp_file_keeps_every_complete_event(tmp_path: Path) -> None:
    path, cut = _truncated_copy(EAGER, tmp_path / "trace.json.tmp", 0.6)
    t = kineto.load(path)
    assert any("truncated" in w for w in t.warnings)
    # Every kernel event that was completely written before the cut is kept.
    complete = cut[: cut.rfind(b"},") + 1]
    expected = complete.count(b'"cat": "kernel"')
    assert expected > 100
    assert (t.events["kind"] == "kernel").sum() == expected


def test_rocm_hip_graph_trace_is_read_and_demangled() -> None:
    t = load_trace(real("kineto_rocm_hipgraph_vllm_tracelens.json.gz"))
    assert (t.events["kind"] == "kernel").sum() == 425
    assert not t.events["name"].str.startswith("_Z").all()
    assert (t.events["correlation"] == 505113).sum() == 421  # one hipGraphLaunch


def test_rocm_ext_launch_grid_is_converted_to_blocks() -> None:
    t = load_trace(real("kineto_rocm_mi300x_triton_tracelens.json.gz"))
    gemm = t.events[t.events["name"].str.startswith("Cijk")]
    # hipExtModuleLaunchKernel passes work-items: 350208 / 256 = 1368 and 1400832 / 256 = 5472 blocks.
    assert sorted(set(gemm["grid_x"].astype(int))) == [1368, 5472]
    triton = t.events[t.events["name"] == "triton_red_fused_add_mean_mul_pow_rsqrt_0"]
    assert triton["grid_x"].tolist() == [16384]  # hipModuleLaunchKernel: already blocks
    assert triton["shared_mem_bytes"].tolist() == [8192]  # taken from the launch event on ROCm


def test_ns_resolution_v100_trace_steps() -> None:
    t = load_trace(real("kineto_cuda_v100_5steps_hta.pt.trace.json.gz"))
    assert sorted(t.events["step"].dropna().unique()) == [101, 102, 103, 104, 105]
    assert t.meta["rank_source"] == "distributedInfo"


def test_timestamp_beyond_int64_ns_is_an_input_error(tmp_path: Path) -> None:
    text = '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1180591620717411303424, "dur": 1}]}'
    with pytest.raises(KprofInputError, match="out of range"):
        kineto.load(_write(tmp_path, "huge.json", text))


def test_a_trace_without_device_activity_says_why() -> None:
    """Launches but no kernels (a CUPTI range-profiler session; an MTIA trace): a warning, not
    silent empty tables."""
    cupti = load_trace(real("hta_cupti_profiler.json.gz"))
    assert len(cupti.events) == 0
    (warning,) = cupti.warnings
    assert "no CUDA or ROCm device activity" in warning and "1,862 runtime calls" in warning
    assert "cuda_profiler_range (77)" in warning
    mtia = load_trace(real("hta_mtia_inference_rank0.json.gz"))
    assert any("mtia_ccp_events (1,313)" in w for w in mtia.warnings)


def test_rpd_chrome_json_points_to_the_rpd() -> None:
    with pytest.raises(
        KprofInputError,
        match=r"rpd_matmul_result_chrome.json: not a Kineto trace: .*rpd2tracing and of legacy rocprof \(v1\); "
        r"give kprof the \.rpd .*, or rocprof v1's results\.csv",
    ):
        load_trace(real("rpd_matmul_result_chrome.json"))


def test_truncated_gzip_recovers_like_plain_json(tmp_path: Path) -> None:
    """--recover on a cut .json.gz keeps every event inflated before the cut (gzip.open used to
    drop the last block's output and fail)."""
    data = gzip.decompress(EAGER.read_bytes())
    packed = gzip.compress(data)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(packed[: int(len(packed) * 0.6)])
    with pytest.raises(KprofInputError, match="cut.json.gz: gzip stream ends early.*--recover"):
        kineto.load(path)
    t = kineto.load(path, recover=True)
    assert any("truncated" in w for w in t.warnings)
    kept = (t.events["kind"] == "kernel").sum()
    assert 100 < kept < (load_trace(EAGER).events["kind"] == "kernel").sum()


def test_boundaries_inside_strings_and_lists_are_not_cuts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``}, {`` inside a name or a nested list of objects: with tiny pieces many cuts land there, and
    the table must still equal the one-piece read."""
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"k{i % 3} }}, {{ odd",
            "pid": 0,
            "tid": 7,
            "ts": 10 * i,
            "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": i, "shapes": [{"a": 1}, {"b": 2}] * 3},
        }
        for i in range(200)
    ]
    path = _write(tmp_path, "odd.json", json.dumps({"traceEvents": events}, indent=1))
    whole = kineto.load(path).events
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 97)
    assert kineto.load(path).events.equals(whole)
    assert len(whole) == 200 and whole["name"].str.contains("}, {").all()


def test_a_stretch_without_boundaries_is_read_in_linear_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Megabytes of blanks between events: each chunk is searched once (the bytes searched stay
    within twice the file), and a stretch beyond the limit is one line, not minutes of work."""
    path = tmp_path / "blank.json"
    event = json.dumps({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2})
    path.write_bytes(b'{"traceEvents": [' + event.encode() + b"," + b" " * (8 << 20) + event.encode() + b"]}")
    searched = []
    last_boundary = kineto_stream._last_boundary

    def counting(buf: bytearray, lo: int, hi: int, end: int) -> object:
        searched.append(hi - lo)
        return last_boundary(buf, lo, hi, end)

    monkeypatch.setattr(kineto_stream, "_last_boundary", counting)
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 1 << 16)
    assert len(kineto.load(path).events) == 2
    assert sum(searched) < 2 * path.stat().st_size
    monkeypatch.setattr(kineto_stream, "MAX_EVENT_BYTES", 1 << 20)
    with pytest.raises(KprofInputError, match="blank.json: no complete event within 1 MiB"):
        kineto.load(path)


def test_the_kineto_decoder_imports_no_pandas() -> None:
    """kineto_stream decodes a trace into compact columns with numpy and msgspec only, so a
    decoding worker process need not pay for pandas' (and pyarrow's) import."""
    import subprocess
    import sys

    code = (
        "import sys, kprof.ingest.formats.kineto_stream; "
        "print(sorted(m for m in ('pandas', 'pyarrow', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _threads_named_by_strings(n: int) -> list[dict]:
    """Kernels, their launches and ranges on threads named by strings (a pid ``"Spans"``), met in
    an order that interleaves launches and ranges."""
    events: list[dict] = []
    for i in range(n):
        thread = f"thread {(i * 7) % 5}"
        kernel_args = {"device": 0, "stream": 7, "correlation": i}
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": 10 * i + 3,
                "dur": 5,
                "args": kernel_args,
            }
        )
        if i % 10 == 0:
            events.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"r{i}",
                    "pid": "Spans",
                    "tid": thread,
                    "ts": 10 * i,
                    "dur": 90,
                }
            )
        launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": thread, "ts": 10 * i}
        events.append(launch | {"dur": 2, "args": {"correlation": i}})
    return events


def test_string_thread_ids_do_not_depend_on_where_pieces_are_cut(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Threads named by strings get negative ids in the order the file meets them: one piece or
    many, the launches' thread ids and the ranges are the same."""
    path = _write(tmp_path, "threads.json", json.dumps({"traceEvents": _threads_named_by_strings(200)}, indent=1))
    whole = kineto.load(path)
    monkeypatch.setattr(kineto_stream, "PIECE_BYTES", 256)
    pieces = kineto.load(path)
    assert (whole.events["launch_tid"] < 0).all() and whole.events["launch_tid"].nunique() == 5
    assert pieces.events.equals(whole.events) and pieces.ranges.equals(whole.ranges)


def test_input_errors_survive_a_process_boundary() -> None:
    """``kprof trace --jobs N`` reads files in worker processes: their errors must unpickle."""
    import pickle

    err = pickle.loads(pickle.dumps(KprofInputError("a.json", "malformed  JSON")))
    assert isinstance(err, KprofInputError) and (err.where, err.problem) == ("a.json", "malformed JSON")


def test_columns_already_in_pandas_form_are_taken_as_they_are() -> None:
    """The events table is built from the Kineto reader's nullable and categorical columns without
    the Arrow round trip (no copy, where a column is already as narrow as its values allow), and
    equals the table built from plain values, dtypes included."""
    import numpy as np
    import pandas as pd

    from kprof.trace import events_table

    start = np.array([10, 20, 30], dtype=np.int64)
    registers = np.array([32, 0, 64], dtype=np.int8)
    missing = np.array([False, True, False])
    names = pd.Categorical.from_codes([0, 1, 0], categories=["gemm", "copy"])
    pandas_form = events_table(
        {
            "start_ns": pd.arrays.IntegerArray(start, np.zeros(3, dtype=bool)),
            "registers": pd.arrays.IntegerArray(registers, missing),
            "name": names,
        }
    )
    plain = events_table({"start_ns": [10, 20, 30], "registers": [32, None, 64], "name": ["gemm", "copy", "gemm"]})
    pd.testing.assert_frame_equal(pandas_form, plain, check_exact=True)
    assert pandas_form["name"].cat.categories.dtype == plain["name"].cat.categories.dtype
    assert np.shares_memory(pandas_form["start_ns"].array._data, start)
    assert np.shares_memory(pandas_form["registers"].array._data, registers)


def test_integer_columns_take_the_narrowest_width_their_values_allow_and_times_stay_int64() -> None:
    """A table of tiny kernels is mostly the upper zeros of small ids and sizes: each integer column
    is held in the narrowest signed type that holds its values (nulls kept), times in int64."""
    import pandas as pd

    from kprof.trace import events_table

    t = events_table(
        {
            "start_ns": [1, 2, 3],
            "dur_ns": [1, 1, 1],
            "registers": [32, None, 64],
            "block_x": [128, 256, 1024],
            "grid_x": [1, 70_000, 2],
            "correlation": [None, None, None],
            "stream": [-(2**40), 7, 7],
        }
    )
    widths = {
        c: str(t[c].dtype) for c in ("start_ns", "dur_ns", "registers", "block_x", "grid_x", "correlation", "stream")
    }
    assert widths == {
        "start_ns": "Int64",
        "dur_ns": "Int64",
        "registers": "Int8",
        "block_x": "Int16",
        "grid_x": "Int32",
        "correlation": "Int8",
        "stream": "Int64",
    }
    assert t["registers"].tolist() == [32, pd.NA, 64] and t["grid_x"].tolist() == [1, 70_000, 2]
    assert t["stream"].tolist()[0] == -(2**40) and t["correlation"].isna().all()
