"""The normalized tables: the one contract between ingest, analysis, store and reports.

Every trace format (Kineto JSON, rocprofv3 CSV/JSON/rocpd, RPD) is turned into these two tables.
Column names and units are stable; ``SCHEMA_VERSION`` changes when they do.

History of ``SCHEMA_VERSION``:
  1 (kprof 0.1): first version.
  2 (kprof 0.2): ``kernel_events.file``, the file each row came from.

``kernel_events`` — one row per device activity (kernel, memcpy, memset):

================  =======  ==================================================================
column            type     meaning
================  =======  ==================================================================
rank              int32    rank of the file (``distributedInfo.rank`` or order on the command line)
file              string*  the trace file the row came from, as given on the command line
device            int32    GPU index as the trace names it (Kineto ``args.device``/pid, agent index)
stream            int64    stream (CUDA/HIP) or queue (rocprof) id
start_ns          int64    start, absolute integer ns in the trace's clock domain (``clock`` in meta)
end_ns            int64    end, same clock
dur_ns            int64    ``end_ns - start_ns``
name              string*  full name as recorded (demangled when the trace left it mangled)
short_name        string*  name without C++ return type, template arguments and parameter list
kind              string*  ``kernel``, ``memcpy`` or ``memset``
correlation       int64    launch correlation id (graph replays share their launch's id); null if none
grid_x..grid_z    int32    grid in blocks (work-item grids are divided by the block); null if unknown
block_x..block_z  int32    block (work-group) size in threads; null if unknown
registers         int32    registers per thread (CUDA) or arch VGPRs (AMD); null if unknown
shared_mem_bytes  int32    static + dynamic shared memory / LDS bytes; null if unknown
launch_ns         int64    CPU time of the launching API call, same clock; null if unknown
launch_tid        int64    host thread of that call; null if unknown
step              int64    step number (``ProfilerStep#N`` → N, else order of the matched range)
annotation        string*  innermost ``record_function``/``gpu_user_annotation``/marker range
================  =======  ==================================================================

The types are those stored (parquet) and those a reader may rely on. In memory an integer column
is a pandas nullable column in the narrowest signed width that holds its values (a trace of small
ids and sizes takes a byte or two a value, not eight), never wider than its type here; times
(``*_ns``) are int64 whatever their values, so that arithmetic on them cannot wrap. Do arithmetic
on another integer column in int64 (``astype("Int64")``), not in the width it happens to have.

``ranges`` — annotated time ranges (steps, ``record_function``, roctx markers):

=========  ======  ==========================================================================
name       string  range name
start_ns   int64   start, same clock as the kernel events
end_ns     int64   end
domain     string  ``gpu`` (projected onto a GPU stream) or ``cpu`` (a host thread's range)
device     int32   GPU index for ``gpu`` ranges, -1 for ``cpu``
pid        int64   process of a ``cpu`` range
tid        int64   thread of a ``cpu`` range (ranges match launches on the same thread)
=========  ======  ==========================================================================
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2

# Names repeat across thousands of events: store each once (Arrow dictionary, pandas Categorical).
DICT_STRING = pa.dictionary(pa.int32(), pa.string())

KERNEL_EVENTS = pa.schema(
    [
        ("rank", pa.int32()),
        ("file", DICT_STRING),
        ("device", pa.int32()),
        ("stream", pa.int64()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("name", DICT_STRING),
        ("short_name", DICT_STRING),
        ("kind", DICT_STRING),
        ("correlation", pa.int64()),
        ("grid_x", pa.int32()),
        ("grid_y", pa.int32()),
        ("grid_z", pa.int32()),
        ("block_x", pa.int32()),
        ("block_y", pa.int32()),
        ("block_z", pa.int32()),
        ("registers", pa.int32()),
        ("shared_mem_bytes", pa.int32()),
        ("launch_ns", pa.int64()),
        ("launch_tid", pa.int64()),
        ("step", pa.int64()),
        ("annotation", DICT_STRING),
    ],
    metadata={"kprof_schema_version": str(SCHEMA_VERSION)},
)

RANGES = pa.schema(
    [
        ("name", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("domain", pa.string()),
        ("device", pa.int32()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
    ],
    metadata={"kprof_schema_version": str(SCHEMA_VERSION)},
)
