"""Trace ingest: kprof vs HolisticTraceAnalysis (HTA) on the same Kineto trace, seconds and peak RSS.

Each measurement runs in a fresh Python process, which reports its own peak RSS (ru_maxrss), its
peak RSS once its imports are done (the floor the libraries set before any work), the seconds its
imports took (kprof's: the trace command, the report and every trace-format module)
and the seconds spent after them, from which MB/s is computed. kprof does what `kprof trace --format json` does (ingest,
step/annotation attribution, per-kernel/step/annotation tables, JSON); HTA does
`TraceAnalysis(trace_dir=…)` (its parse) plus `get_gpu_kernel_breakdown()`.

HTA lives in its own environment (it pulls in jupyterlab and ~90 packages):

    python -m venv /tmp/hta && /tmp/hta/bin/pip install -r benchmarks/requirements-hta.txt
    python benchmarks/make_large_trace.py traces/llama_eager_decode.pt.trace.json.gz /tmp/t120.json --mb 120
    python benchmarks/ingest_vs_hta.py /tmp/t120.json --hta-python /tmp/hta/bin/python

``--whole-process N`` times instead what a user waits for: N pairs of whole processes, interleaved
(kprof, HTA, kprof, HTA, …, so that a machine's drift falls on both alike), each from interpreter
start to exit — ``python -m kprof trace FILE --format json`` against HTA's parse and kernel
breakdown — and prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPORT = """
import json, resource, time
t0 = time.perf_counter()
{work}
print(json.dumps({{"seconds": time.perf_counter() - t0, "import_seconds": imports, "import_rss_mb": import_rss,
                   "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

KPROF = """
from pathlib import Path
from kprof.commands.trace import run_trace
from kprof.ingest.registry import formats
from kprof.report.trace_report import to_json
formats()  # imports every format module (done on the first probe otherwise)
imports = time.perf_counter() - t0
import_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
result = run_trace([Path({path!r})])
out = json.dumps(to_json(result.tables))
kernels = result.tables[0].summary["kernels"]
"""

HTA = """
from hta.trace_analysis import TraceAnalysis
imports = time.perf_counter() - t0
import_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
analysis = TraceAnalysis(trace_dir={trace_dir!r})
breakdown = analysis.get_gpu_kernel_breakdown(visualize=False)
"""


def measure(python: str, work: str) -> dict[str, float]:
    code = REPORT.format(work=work)
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"benchmark process failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


HTA_WHOLE = """
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir={trace_dir!r}).get_gpu_kernel_breakdown(visualize=False)
"""


def wall(cmd: list[str]) -> float:
    """Seconds one whole process takes, start to exit (its output discarded)."""
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:3]}…: exit {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds


def whole_process(trace: Path, hta_python: str, pairs: int) -> dict[str, float]:
    """Medians of ``pairs`` interleaved whole-process timings of kprof and HTA on ``trace``."""
    kprof_cmd = [sys.executable, "-m", "kprof", "trace", str(trace), "--format", "json"]
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / trace.name).symlink_to(trace.resolve())
        hta_cmd = [hta_python, "-c", HTA_WHOLE.format(trace_dir=d)]
        kprof_s, hta_s = [], []
        for _ in range(pairs):
            kprof_s.append(wall(kprof_cmd))
            hta_s.append(wall(hta_cmd))
    k, h = statistics.median(kprof_s), statistics.median(hta_s)
    return {"kprof_s": k, "kprof_max_s": max(kprof_s), "hta_s": h, "hta_max_s": max(hta_s), "ratio": h / k}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--hta-python", help="python of an environment with holistictraceanalysis installed")
    ap.add_argument("--kprof-runs", type=int, default=3)
    ap.add_argument("--hta-runs", type=int, default=1)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--whole-process", type=int, metavar="PAIRS", help="interleaved whole-process pairs instead")
    args = ap.parse_args()
    if args.whole_process:
        if not args.hta_python:
            ap.error("--whole-process needs --hta-python")
        print("| trace | MB | kprof s (median, slowest) | HTA s (median, slowest) | HTA / kprof |")
        print("|---|---:|---:|---:|---:|")
        for trace in args.traces:
            r = whole_process(trace, args.hta_python, args.whole_process)
            print(
                f"| {trace.name} | {trace.stat().st_size / 1e6:.1f} | {r['kprof_s']:.2f} ({r['kprof_max_s']:.2f}) | "
                f"{r['hta_s']:.2f} ({r['hta_max_s']:.2f}) | {r['ratio']:.1f}× |",
                flush=True,
            )
        return

    rows = []
    for trace in args.traces:
        size_mb = trace.stat().st_size / 1e6
        kp = [measure(sys.executable, KPROF.format(path=str(trace))) for _ in range(args.kprof_runs)]
        row = {
            "trace": trace.name,
            "size_mb": round(size_mb, 1),
            "kprof_seconds": statistics.median(r["seconds"] for r in kp),
            "kprof_mb_per_s": size_mb / statistics.median(r["seconds"] for r in kp),
            "kprof_import_seconds": statistics.median(r["import_seconds"] for r in kp),
            "kprof_peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in kp),
            "kprof_import_rss_mb": statistics.median(r["import_rss_mb"] for r in kp),
            "kprof_runs": len(kp),
        }
        if args.hta_python:
            with tempfile.TemporaryDirectory() as d:
                (Path(d) / trace.name).symlink_to(trace.resolve())
                hta = [measure(args.hta_python, HTA.format(trace_dir=d)) for _ in range(args.hta_runs)]
            row.update(
                hta_seconds=statistics.median(r["seconds"] for r in hta),
                hta_peak_rss_mb=statistics.median(r["peak_rss_mb"] for r in hta),
                hta_import_rss_mb=statistics.median(r["import_rss_mb"] for r in hta),
                hta_runs=len(hta),
            )
            row["speedup"] = row["hta_seconds"] / row["kprof_seconds"]
            row["memory_ratio"] = row["kprof_peak_rss_mb"] / row["hta_peak_rss_mb"]
        rows.append(row)
        print(json.dumps(row), flush=True)

    # "after imports": the peak RSS before the first byte is read (the libraries' floor), so that a
    # reader sees how much of each peak is the work
    print(
        "\n| trace | MB | kprof s | kprof MB/s | kprof imports s | kprof MB after imports | kprof peak MB | HTA s |",
        end="",
    )
    print(" HTA MB after imports | HTA peak MB | speed-up | memory ratio |\n|" + "---|" * 12)
    for r in rows:
        hta = (
            f"{r['hta_seconds']:.2f} | {r['hta_import_rss_mb']:.0f} | {r['hta_peak_rss_mb']:.0f} | "
            f"{r['speedup']:.1f}× | {r['memory_ratio']:.2f}"
            if "hta_seconds" in r
            else "– | – | – | – | –"
        )
        kprof = (
            f"{r['kprof_seconds']:.2f} | {r['kprof_mb_per_s']:.0f} | {r['kprof_import_seconds']:.2f} | "
            f"{r['kprof_import_rss_mb']:.0f} | {r['kprof_peak_rss_mb']:.0f}"
        )
        print(f"| {r['trace']} | {r['size_mb']} | {kprof} | {hta} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
