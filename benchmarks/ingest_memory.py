"""Peak memory and time of reading a trace, per kept device activity, in every format kprof reads.

For each format and size it writes a synthetic trace of tiny kernels (the worst case for memory per
activity: little text per row, so the per-row cost of kprof's tables is all there is), then reads
it in a fresh process: the imports and a warm-up read of a small trace of the same format come
first, so the figure is the work alone. Printed per run: kept activities, seconds, the process's
resident memory after the warm-up, its peak (``ru_maxrss``), and (peak − after warm-up) per kept
activity, beside the size of the finished events table per row.

    python benchmarks/ingest_memory.py --formats kineto,rocprofv3-csv,rpd,rocpd,nsys --events 1e6,2e6,4e6
"""

from __future__ import annotations

import argparse
import gzip
import json
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

NAMES = [f"triton_poi_fused_add_{i}" for i in range(8)]
STEP = 1000  # kernels per ProfilerStep / marker range


def kineto(path: Path, n: int) -> Path:
    """A PyTorch-profiler trace: per kernel one launch on the host thread and the kernel on stream 7,
    a ProfilerStep range every STEP kernels."""
    path = path.with_suffix(".json.gz")
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write('{"schemaVersion": 1, "traceEvents": [\n')
        for s in range(0, n, STEP):
            ts = s * 4.0
            f.write(
                f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#{s // STEP}","pid":1,"tid":1,'
                f'"ts":{ts},"dur":{STEP * 4.0 - 1}}},\n'
            )
            lines = []
            for i in range(s, min(n, s + STEP)):
                t = i * 4.0
                lines.append(
                    f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{t},"dur":1,'
                    f'"args":{{"correlation":{i}}}}},\n'
                    f'{{"ph":"X","cat":"kernel","name":"{NAMES[i % 8]}","pid":0,"tid":7,"ts":{t + 1.5},"dur":2,'
                    f'"args":{{"device":0,"stream":7,"correlation":{i},"grid":[{i % 97 + 1},1,1],"block":[128,1,1],'
                    f'"registers per thread":32,"shared memory":0}}}},\n'
                )
            f.write("".join(lines))
        f.write('{"ph":"M","name":"process_name","pid":0,"args":{"name":"GPU 0"}}\n]}\n')
    return path


CSV_HEADER = (
    "Kind,Agent_Id,Queue_Id,Stream_Id,Thread_Id,Dispatch_Id,Kernel_Id,Kernel_Name,Correlation_Id,"
    "Start_Timestamp,End_Timestamp,LDS_Block_Size,Scratch_Size,VGPR_Count,Accum_VGPR_Count,SGPR_Count,"
    "Workgroup_Size_X,Workgroup_Size_Y,Workgroup_Size_Z,Grid_Size_X,Grid_Size_Y,Grid_Size_Z"
)


def rocprofv3_csv(path: Path, n: int) -> Path:
    """rocprofv3's kernel trace in its current column layout."""
    path = path.with_name(path.name + "_kernel_trace.csv")
    t0 = 1551874061244694
    with path.open("w") as f:
        f.write(CSV_HEADER + "\n")
        for s in range(0, n, 10_000):
            f.write(
                "".join(
                    f'"KERNEL_DISPATCH","Agent 4",1,1,852831,{i},{i % 8},"{NAMES[i % 8]}",{i},'
                    f"{t0 + 4000 * i},{t0 + 4000 * i + 2000},0,0,32,0,16,128,1,1,{128 * (i % 97 + 1)},1,1\n"
                    for i in range(s, min(n, s + 10_000))
                )
            )
    return path


def rpd(path: Path, n: int) -> Path:
    """An RPD database: GPU ops linked to their launches and kernel arguments."""
    path = path.with_suffix(".rpd")
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE rocpd_string (id INTEGER PRIMARY KEY, string TEXT NOT NULL);
        CREATE TABLE rocpd_op (id INTEGER PRIMARY KEY, gpuId INTEGER, queueId INTEGER, sequenceId INTEGER,
            completionSignal TEXT, start INTEGER, "end" INTEGER, description_id INTEGER, opType_id INTEGER);
        CREATE TABLE rocpd_api (id INTEGER PRIMARY KEY, pid INTEGER, tid INTEGER, start INTEGER, "end" INTEGER,
            apiName_id INTEGER, args_id INTEGER);
        CREATE TABLE rocpd_api_ops (id INTEGER PRIMARY KEY, api_id INTEGER, op_id INTEGER);
        CREATE TABLE rocpd_kernelapi (api_ptr_id INTEGER PRIMARY KEY, stream TEXT, gridX INTEGER, gridY INTEGER,
            gridZ INTEGER, workgroupX INTEGER, workgroupY INTEGER, workgroupZ INTEGER, groupSegmentSize INTEGER,
            privateSegmentSize INTEGER, kernelArgAddress TEXT, aquireFence TEXT, releaseFence TEXT,
            codeObject_id INTEGER, kernelName_id INTEGER);
        CREATE TABLE rocpd_metadata (id INTEGER PRIMARY KEY, tag TEXT, value TEXT);
        INSERT INTO rocpd_metadata (tag, value) VALUES ('schema_version', '2');
    """)
    strings = ["", "KernelExecution", "hipLaunchKernel", "UserMarker", *NAMES]
    con.executemany("INSERT INTO rocpd_string VALUES (?, ?)", enumerate(strings))
    base = 1_000_000_000
    con.executemany(
        "INSERT INTO rocpd_api VALUES (?, 1, 1, ?, ?, 2, 0)",
        ((i, base + 4000 * i, base + 4000 * i + 1000) for i in range(n)),
    )
    con.executemany(
        "INSERT INTO rocpd_op VALUES (?, 0, 1, ?, '', ?, ?, ?, 1)",
        ((i, i, base + 4000 * i + 1500, base + 4000 * i + 3500, 4 + i % 8) for i in range(n)),
    )
    con.executemany("INSERT INTO rocpd_api_ops VALUES (?, ?, ?)", ((i, i, i) for i in range(n)))
    con.executemany(
        "INSERT INTO rocpd_kernelapi VALUES (?, '0x1', ?, 1, 1, 128, 1, 1, 0, 0, '0x0', '', '', 0, ?)",
        ((i, i % 97 + 1, 4 + i % 8) for i in range(n)),
    )
    con.commit()
    con.close()
    return path


def rocpd(path: Path, n: int) -> Path:
    """rocprofv3's rocpd database, as its ``kernels`` and ``regions`` views present it."""
    path = path.with_name(path.name + "_results.db")
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE rocpd_metadata(tag TEXT, value TEXT);
        INSERT INTO rocpd_metadata VALUES ('schema_version', '3.0.1');
        CREATE TABLE k_1(name, agent_abs_index, agent_log_index, queue_id, stream_id, tid, start, "end", corr_id,
            grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, lds_size, vgpr_count);
        CREATE VIEW kernels AS SELECT * FROM k_1;
        CREATE TABLE r_1(name, start, "end", pid, tid, category);
        CREATE VIEW regions AS SELECT * FROM r_1;
    """)
    con.executemany(
        "INSERT INTO k_1 VALUES (?, 6, 2, 1, 0, 77, ?, ?, ?, ?, 1, 1, 128, 1, 1, 0, 32)",
        ((NAMES[i % 8], 4000 * i + 1500, 4000 * i + 3500, i, 128 * (i % 97 + 1)) for i in range(n)),
    )
    con.executemany(
        "INSERT INTO r_1 VALUES ('hipLaunchKernel', ?, ?, 1, 77, 'HIP_RUNTIME_API')",
        ((4000 * i, 4000 * i + 1000) for i in range(n)),
    )
    con.commit()
    con.close()
    return path


def nsys(path: Path, n: int) -> Path:
    """An Nsight Systems SQLite export (the column set of older nsys: names through StringIds):
    kernels and the runtime calls that launched them."""
    path = path.with_suffix(".sqlite")
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
            demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, registersPerThread INTEGER NOT NULL,
            gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL,
            blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
            dynamicSharedMemory INTEGER NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
            returnValue INTEGER NOT NULL);
    """)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", enumerate(["cudaLaunchKernel", *NAMES]))
    tid = (1 << 48) | (100 << 24) | 100
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, 0, 0)",
        ((4000 * i, 4000 * i + 1000, tid, i) for i in range(n)),
    )
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, 7, ?, ?, ?, 32, ?, 1, 1, 128, 1, 1, 0, 0)",
        ((4000 * i + 1500, 4000 * i + 3500, i, 1 + i % 8, 1 + i % 8, i % 97 + 1) for i in range(n)),
    )
    con.commit()
    con.close()
    return path


WRITERS: dict[str, Callable[[Path, int], Path]] = {
    "kineto": kineto,
    "rocprofv3-csv": rocprofv3_csv,
    "rpd": rpd,
    "rocpd": rocpd,
    "nsys": nsys,
}

MEASURE = r"""
import json, resource, sys, time
from pathlib import Path
from kprof.ingest.load import load_traces

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

load_traces(Path(sys.argv[1]))
after_warm_up = rss_mb()
t0 = time.perf_counter()
traces = load_traces(Path(sys.argv[2]))
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
kept = sum(len(t.events) for t in traces)
table = sum(int(t.events.memory_usage(deep=True).sum()) for t in traces)
print(json.dumps({"kept": kept, "seconds": seconds, "after_warm_up_mb": after_warm_up, "peak_mb": peak,
                  "table_bytes_per_row": table / max(kept, 1)}))
"""


def measure(small: Path, big: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(small), str(big)], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": tail}
    result = json.loads(done.stdout)
    work = (result["peak_mb"] - result["after_warm_up_mb"]) * 2**20
    result["peak_bytes_per_kept"] = work / max(result["kept"], 1)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default=",".join(WRITERS))
    ap.add_argument("--events", default="1e6,2e6", help="comma-separated kernel counts")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats.split(","):
            small = WRITERS[fmt](Path(tmp) / f"small-{fmt}", 2000)
            for n in (int(float(x)) for x in args.events.split(",")):
                big = WRITERS[fmt](Path(tmp) / f"big-{fmt}-{n}", n)
                row = {"format": fmt, "events": n, "file_mb": big.stat().st_size / 1e6, **measure(small, big)}
                results.append(row)
                print(json.dumps(row), flush=True)
                big.unlink()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
