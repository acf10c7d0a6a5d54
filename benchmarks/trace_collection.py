"""Many rank traces in one `kprof trace` call: wall time and the peak memory of the whole process
tree (the CLI and its worker processes), for growing numbers of ranks.

Each measurement runs the CLI as a subprocess and samples the resident memory of it and all its
descendants every 20 ms from /proc (Linux); the peak of their sum is reported. Imports are included
(it is the command a user runs).

    for r in $(seq 0 63); do python benchmarks/make_large_trace.py \\
        traces/llama_eager_decode.pt.trace.json.gz /tmp/ranks64/rank$r.json --mb 50 \\
        --rank $r --world-size 64 --jitter 0.02; done
    python benchmarks/trace_collection.py /tmp/ranks64 --ranks 8 16 64 --jobs 2
    python benchmarks/trace_collection.py /tmp/ranks64 --ranks 8 16 --hta-python /tmp/hta/bin/python

With ``--hta-python`` the same folders go to HolisticTraceAnalysis's multi-rank load
(``TraceAnalysis(trace_dir=…)`` and ``get_gpu_kernel_breakdown()``), in its own environment.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
HTA = """
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir={folder!r})
analysis.get_gpu_kernel_breakdown(visualize=False)
"""


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
    return kids


def _tree_rss(root: int) -> int:
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError):
            continue
        todo += _children(pid)
    return total


def measure(cmd: list[str]) -> tuple[float, float]:
    """Seconds and peak resident MB of the process tree of ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.read().decode()[-2000:]}")
    return seconds, peak / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a folder of rank traces (rank0.json, rank1.json, …)")
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 64])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--hta-python", help="a Python with HolisticTraceAnalysis: measure it instead of kprof")
    args = ap.parse_args()
    files = sorted(args.folder.glob("rank*.json*"), key=lambda p: int("".join(filter(str.isdigit, p.name)) or 0))
    tool = "HTA" if args.hta_python else f"kprof --jobs {args.jobs}"
    print(f"{tool}\n\n| ranks | MB in all | jobs | seconds | MB/s | peak MB (process tree) |")
    print("|---|---|---|---|---|---|")
    for n in args.ranks:
        with tempfile.TemporaryDirectory() as tmp:
            for f in files[:n]:
                (Path(tmp) / f.name).symlink_to(f.resolve())
            size = sum(f.stat().st_size for f in files[:n]) / 1e6
            cmd = [sys.executable, "-m", "kprof", "trace", tmp, "--jobs", str(args.jobs), "--format", "json"]
            if args.hta_python:
                cmd = [args.hta_python, "-c", HTA.format(folder=tmp)]
            seconds, peak = measure(cmd)
        print(f"| {n} | {size:,.0f} | {args.jobs} | {seconds:.1f} | {size / seconds:,.0f} | {peak:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
