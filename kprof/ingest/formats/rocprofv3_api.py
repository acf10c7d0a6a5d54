"""rocprofv3 API traces (``hip_api_trace.csv``, ``marker_api_trace.csv``, …): host calls with a
``Domain`` and ``Function`` column and no kernels. kprof reads them beside the kernel trace they
were recorded with (launch times, roctx ranges); given alone, one line says so."""

from __future__ import annotations

from kprof.errors import KprofInputError
from kprof.ingest.registry import LoadOptions, Probe, TraceFormat
from kprof.trace import Trace

API_COLUMNS = {"domain", "function", "start_timestamp"}


def _is_api_csv(p: Probe) -> bool:
    return p.csv_columns >= API_COLUMNS and "kernel_name" not in p.csv_columns


def _refuse(p: Probe, options: LoadOptions) -> Trace:
    raise KprofInputError(
        p.path,
        "a rocprofv3 API trace (host calls, no kernels): kprof reads it beside the kernel_trace.csv recorded "
        "with it (same prefix, same folder); give kprof that kernel trace",
    )


FORMAT = TraceFormat(
    "rocprofv3-api", "rocprofv3 API trace CSV (beside a kernel trace)", _is_api_csv, _refuse, priority=5
)
