"""rocprofv3 (CSV in every layout, JSON, rocpd) and RPD ingest."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import pytest

from conftest import real, rocpd_db
from kprof.errors import KprofInputError
from kprof.ingest.load import load_trace


def test_docs_kernel_trace_csv_2024_layout() -> None:
    path = real("rocprofv3_csv_kernel_trace_rocprofiler-sdk_docs.csv")
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r]
    t = load_trace(path)
    assert len(t.events) == len(rows) == 7
    first = t.events.iloc[0]
    assert first["short_name"] == "addition_kernel"
    assert int(first["start_ns"]) == 8819330200067564
    assert int(first["grid_x"]) == 1024 // 64 and int(first["grid_y"]) == 1024
    assert int(first["launch_tid"]) == 69
    assert t.meta["format"] == "rocprofv3-csv"


CURRENT_HEADER = (
    "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,"
    "Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,"
    "Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
)


def _current_layout(tmp_path: Path) -> Path:
    """The current rocprofv3 layout, as in the rocprofiler-sdk docs' example rows."""
    rows = [
        '"KERNEL_DISPATCH","Agent 4",1,1,852831,1,10,"void addition_kernel<float>(float*, float const*, float const*, '
        'int, int)",1,1551874061244694,1551874061255734,0,0,8,0,16,64,1,1,1024,1024,1',
        '"KERNEL_DISPATCH","Agent 4",1,1,852831,2,11,"triton_poi_fused_add_0",2,1551874061300000,1551874061310000,'
        "512,0,32,0,16,128,1,1,4096,1,1",
    ]
    path = tmp_path / "run_kernel_trace.csv"
    path.write_text(CURRENT_HEADER + "\n" + "\n".join(rows) + "\n")
    return path


def test_current_layout_with_marker_and_hip_traces_beside_it(tmp_path: Path) -> None:
    path = _current_layout(tmp_path)
    (tmp_path / "run_marker_api_trace.csv").write_text(
        "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp\n"
        '"MARKER_CORE_RANGE_API","step 1",852831,852831,3,1551874061200000,1551874061290000\n'
        '"MARKER_CORE_RANGE_API","step 2",852831,852831,4,1551874061290000,1551874061400000\n'
        '"MARKER_CORE_API","a mark",852831,852831,5,1551874061250000,1551874061250000\n'
    )
    (tmp_path / "run_hip_api_trace.csv").write_text(
        "Domain,Function,Process_Id,Thread_Id,Correlation_Id,Start_Timestamp,End_Timestamp\n"
        '"HIP_RUNTIME_API","hipLaunchKernel",852831,852831,1,1551874061240000,1551874061241000\n'
        '"HIP_RUNTIME_API","hipModuleLaunchKernel",852831,852831,2,1551874061295000,1551874061296000\n'
    )
    t = load_trace(path, step_pattern=r"^step (\d+)$")
    k = t.events
    assert k["device"].tolist() == [4, 4]
    assert k["launch_ns"].tolist() == [1551874061240000, 1551874061295000]
    assert k["step"].tolist() == [1, 2]
    assert k["registers"].tolist() == [8, 32]
    assert k["shared_mem_bytes"].tolist() == [0, 512]
    assert k["grid_x"].tolist() == [16, 32]
    assert len(t.ranges) == 2  # the zero-length mark is not a range


def test_rocpd_convert_layout_is_matched_by_header_name(tmp_path: Path) -> None:
    src = _current_layout(tmp_path).read_text().splitlines()
    header = "Guid," + src[0].replace("LDS_Block_Size", "Lds_Block_Size").replace("VGPR_Count", "Vgpr_Count")
    path = tmp_path / "out_kernel_trace.csv"
    path.write_text("\n".join([header] + ["abc-123," + r for r in src[1:]]) + "\n")
    k = load_trace(path).events
    assert k["short_name"].tolist() == ["addition_kernel", "triton_poi_fused_add_0"]
    assert k["shared_mem_bytes"].tolist() == [0, 512]


def test_bad_number_in_csv_names_the_line(tmp_path: Path) -> None:
    path = _current_layout(tmp_path)
    path.write_text(path.read_text().replace("1551874061244694", "soon"))
    with pytest.raises(KprofInputError, match="line 2"):
        load_trace(path)


def test_a_blank_csv_field_leaves_the_column_exact(tmp_path: Path) -> None:
    path = _current_layout(tmp_path)
    rows = path.read_text().splitlines()
    rows[1] = rows[1].replace('int, int)",1,', 'int, int)",,')  # no Correlation_Id
    rows[2] = rows[2].replace('"triton_poi_fused_add_0",2,', f'"triton_poi_fused_add_0",{2**53 + 1},')
    path.write_text("\n".join(rows) + "\n")
    correlation = load_trace(path).events.sort_values("start_ns")["correlation"]
    assert correlation.isna().iloc[0] and correlation.iloc[1] == 2**53 + 1


def test_a_fractional_grid_in_csv_names_its_column_and_line(tmp_path: Path) -> None:
    path = _current_layout(tmp_path)
    rows = path.read_text().splitlines()
    rows[2] = rows[2].rsplit(",", 1)[0] + ",1.5"  # the last column: Grid_Size_Z
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(KprofInputError, match="Grid_Size_Z on line 3 is not an integer"):
        load_trace(path)


def test_rocprofv3_json_mi350x() -> None:
    t = load_trace(real("rocprofv3_json_mi350x_tracelens_908_results.json.gz"))
    assert len(t.events) == 43915
    assert t.events["device"].between(0, 7).all()  # 8 GPU agents mapped to their gpu_index
    first = t.events.iloc[0]
    assert first["name"] == "__amd_rocclr_copyBuffer" and int(first["dur_ns"]) == 2840
    assert int(first["registers"]) == 8


def test_rocpd_views(tmp_path: Path) -> None:
    path = tmp_path / "host_1_results.db"
    rocpd_db(path)
    t = load_trace(path)
    k = t.events.iloc[0]
    assert t.meta["format"] == "rocpd" and t.meta["rocpd_schema_version"] == "3.0.1"
    assert k["short_name"] == "addition_kernel"
    assert int(k["device"]) == 2 and int(k["grid_x"]) == 16
    assert k["annotation"] == "decode"


def _execute(path: Path, sql: str, *params: object) -> None:
    con = sqlite3.connect(path)
    con.execute(sql, params)
    con.commit()
    con.close()


def test_database_integers_beyond_2_53_stay_exact_beside_a_null(tmp_path: Path) -> None:
    """pandas reads an integer column that holds a NULL as float64, which rounds values beyond 2**53
    (ns of a clock past 104 days of uptime)."""
    path = tmp_path / "host_1_results.db"
    rocpd_db(path)
    big = 2**53 + 1
    _execute(path, 'UPDATE k_1 SET start = ?, "end" = ?, corr_id = ?', big, big + 1000, big + 2)
    _execute(path, "INSERT INTO k_1 SELECT * FROM k_1")
    _execute(path, "UPDATE k_1 SET corr_id = NULL, start = ? WHERE rowid = 2", big + 2)
    k = load_trace(path).events.sort_values("start_ns")
    assert k["start_ns"].tolist() == [big, big + 2] and k["end_ns"].tolist() == [big + 1000, big + 1000]
    assert k["correlation"].iloc[0] == big + 2 and k["correlation"].isna().iloc[1]


def test_text_in_an_integer_column_of_a_database_is_a_one_line_error(tmp_path: Path) -> None:
    """SQLite lets any column hold text: kprof names the column and row instead of failing later."""
    path = tmp_path / "host_1_results.db"
    rocpd_db(path)
    _execute(path, "UPDATE k_1 SET start = 'soon'")
    with pytest.raises(KprofInputError, match=r"kernels\.start is not a number in kernel 1"):
        load_trace(path)


def test_a_database_with_text_that_is_not_utf8_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "host_1_results.db"
    rocpd_db(path)
    _execute(path, "UPDATE k_1 SET name = CAST(? AS TEXT)", b"\xffkernel")
    with pytest.raises(KprofInputError, match="could not be read .Could not decode to UTF-8"):
        load_trace(path)


def test_a_schema_damaged_with_bytes_that_are_not_utf8_is_a_one_line_error(tmp_path: Path) -> None:
    """SQLite's error message quotes the damaged schema; sqlite3 fails to decode the message itself."""
    path = tmp_path / "host_1_results.db"
    rocpd_db(path)
    path.write_bytes(path.read_bytes().replace(b"CREATE TABLE k_1(", b"CREATE TABL\xff k_1("))
    with pytest.raises(KprofInputError, match="malformed schema, with bytes that are not UTF-8"):
        load_trace(path)


def test_a_database_damaged_where_its_rows_are_is_a_one_line_error(tmp_path: Path) -> None:
    """Damage that SQLite finds only when the rows are read (pandas wraps sqlite3's error in its own)."""
    path = tmp_path / "host_1_results.db"
    rocpd_db(path)
    data = bytearray(path.read_bytes())
    data[8192 : 8192 + 64] = b"\xff" * 64  # a page of the tables, not the schema
    path.write_bytes(bytes(data))
    with pytest.raises(KprofInputError, match="SQLite database could not be read .database disk image is malformed"):
        load_trace(path)


def test_rpd_text_in_an_op_time_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "matmul.rpd"
    path.write_bytes(real("rpd_matmul_result.rpd").read_bytes())
    _execute(path, "UPDATE rocpd_op SET start = 'x' WHERE id = (SELECT max(id) FROM rocpd_op)")
    with pytest.raises(KprofInputError, match=r"rocpd_op\.start is not a number in GPU op \d+"):
        load_trace(path)


def test_rpd_without_gpu_ops_says_so_in_one_line(tmp_path: Path) -> None:
    """A real RPD of host calls only (an agent pipeline under runTracer.sh): it crashed in Arrow."""
    path = tmp_path / "agent.rpd"
    path.write_bytes(real("rpd_matmul_result.rpd").read_bytes())
    _execute(path, "DELETE FROM rocpd_op")
    t = load_trace(path)
    assert len(t.events) == 0
    assert t.warnings == [
        "no GPU operations in the trace (125 API calls, no kernel, copy or fill): every table is empty"
    ]


def test_rpd_op_linked_to_two_api_calls_is_counted_once(tmp_path: Path) -> None:
    """An op met twice in the join (two API links) is one activity, kept as first met: the reader's
    fast path (ids that rise) must not keep both."""
    path = tmp_path / "matmul.rpd"
    path.write_bytes(real("rpd_matmul_result.rpd").read_bytes())
    before = load_trace(path)
    _execute(path, "INSERT INTO rocpd_api_ops (api_id, op_id) SELECT api_id, op_id FROM rocpd_api_ops")
    after = load_trace(path)
    assert len(before.events) > 0 and len(after.events) == len(before.events)
    assert after.events["start_ns"].tolist() == before.events["start_ns"].tolist()


def test_rpd_mi300_vllm() -> None:
    t = load_trace(real("rpd_sqlite_mi300_vllm_rocmprofiledata.rpd.gz"))
    kinds = t.events["kind"].value_counts()
    assert kinds["memcpy"] == 804 + 22 + 350
    assert kinds["kernel"] == 1228 + 7720
    assert t.events["short_name"].str.contains("paged_attention").any()
    assert t.events["launch_ns"].notna().mean() > 0.5


def test_rocprofv3_json_marker_ranges(tmp_path: Path) -> None:
    """The real MI350X file has no markers: add roctx records in the layout rocprofiler-sdk's own tests
    read (buffer_records.marker_api, names in strings.marker_api keyed by the internal correlation id)."""
    import gzip
    import json

    src = real("rocprofv3_json_mi350x_tracelens_908_results.json.gz")
    with gzip.open(src) as f:
        doc = json.load(f)
    proc = doc["rocprofiler-sdk-tool"][0]
    first = proc["buffer_records"]["kernel_dispatch"][:6]
    t0, t1 = first[0]["start_timestamp"] - 10, first[2]["end_timestamp"] + 10
    tid = first[0]["thread_id"]
    proc["buffer_records"]["marker_api"] = [
        {
            "kind": 7,
            "operation": 1,
            "thread_id": tid,
            "correlation_id": {"internal": 900001, "external": 0},
            "start_timestamp": t0,
            "end_timestamp": t1,
        },
        {
            "kind": 7,
            "operation": 2,
            "thread_id": tid,
            "correlation_id": {"internal": 900002, "external": 0},
            "start_timestamp": t1,
            "end_timestamp": t1,
        },  # a mark, not a range
    ]
    proc["strings"]["marker_api"] = [{"key": 900001, "value": "decode step"}, {"key": 900002, "value": "mark"}]
    path = tmp_path / "with_markers_results.json"
    path.write_text(json.dumps(doc))
    t = load_trace(path)
    assert t.ranges["name"].tolist() == ["decode step"]
    inside = t.events[(t.events["start_ns"] >= t0) & (t.events["start_ns"] <= t1) & (t.events["launch_tid"] == tid)]
    assert len(inside) >= 3 and (inside["annotation"] == "decode step").all()


def test_legacy_rocprof_v1_results_csv(tmp_path: Path) -> None:
    """rocprof v1 ``results.csv`` (header and row as in ROCm/aomp's examples)."""
    path = tmp_path / "results.csv"
    path.write_text(
        '"Index","KernelName","gpu-id","queue-id","queue-index","pid","tid","grd","wgr","lds","scr","arch_vgpr",'
        '"accum_vgpr","sgpr","wave_size","sig","obj","DispatchNs","BeginNs","EndNs","CompleteNs","DurationNs"\n'
        '0,"__omp_offloading_fd00_5871764_main_l19.kd",2,1,0,3495164,3495164,256,256,512,0,4,4,16,64,'
        '"0x153e64afca00","0x153d64770ec0",5323868593531200,5323868593552306,5323868593554226,5323868593566416,1920\n'
    )
    k = load_trace(path).events.iloc[0]
    assert k["short_name"] == "__omp_offloading_fd00_5871764_main_l19"
    assert int(k["dur_ns"]) == 1920 and int(k["device"]) == 2
    assert int(k["grid_x"]) == 1 and int(k["block_x"]) == 256 and int(k["registers"]) == 4


def test_out_of_range_and_backwards_timestamps(tmp_path: Path) -> None:
    header = "Kind,Agent_Id,Queue_Id,Kernel_Name,Start_Timestamp,End_Timestamp"
    huge = tmp_path / "huge_kernel_trace.csv"
    huge.write_text(f"{header}\nKERNEL_DISPATCH,1,1,k,1,99999999999999999999999\n")
    with pytest.raises(KprofInputError, match="End_Timestamp on line 2 is not an integer of 64 bits"):
        load_trace(huge)
    backwards = tmp_path / "back_kernel_trace.csv"
    backwards.write_text(f"{header}\nKERNEL_DISPATCH,1,1,k,200,100\nKERNEL_DISPATCH,1,1,k,300,400\n")
    t = load_trace(backwards)
    assert list(t.events["dur_ns"]) == [0, 100]
    assert any("1 activities end before they start" in w and "counted as 0 µs" in w for w in t.warnings)
