"""How fast can one Python process get through a Kineto JSON at all? The floors under `kprof trace`.

Times, on one file's ``traceEvents`` array held in memory, the passes any ingest built on these
libraries must make or could make instead: one C-speed scan of the bytes, a regex search for the
categories kprof keeps, msgspec decoding every event as raw slices / as a struct with only ``cat``
/ as the struct kprof decodes, kprof's compiled scanner on the whole array in one thread, and the
peak memory of kprof's streaming decode without pandas at two piece sizes. Run it on the file
given to ``benchmarks/ingest_vs_hta.py`` to see how much of ``kprof trace``'s time is the decode
itself.

    python benchmarks/decode_floor.py /tmp/eager_120mb.json
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

KEPT = rb'"cat": ?"(?:kernel|gpu_memcpy|gpu_memset|cuda_runtime|cuda_driver|user_annotation|gpu_user_annotation)"'

PEAK = """
import json, resource, sys, time
from pathlib import Path
from kprof.ingest.formats import kineto_events as ke, kineto_stream as ks
ks.PIECE_BYTES = {piece}
t0 = time.perf_counter()
ks.collect(Path({path!r}), False, ke.FAST, None)
print(json.dumps({{"seconds": time.perf_counter() - t0,
                   "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                   "pandas_imported": "pandas" in sys.modules}}))
"""


class CategoryOnly(msgspec.Struct, gc=False):
    cat: str = ""


def best_of(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path, help="an uncompressed Kineto JSON")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    out: dict[str, object] = {"trace": args.trace.name}
    for piece in (4 << 20, 1 << 20):  # first: a child's peak RSS would count this process's pages after a fork
        code = PEAK.format(piece=piece, path=str(args.trace))
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        out[f"kprof streaming decode, {piece >> 20} MiB pieces, no pandas"] = json.loads(res.stdout)
    from kprof.ingest.formats import kineto_scan
    from kprof.ingest.formats.kineto_events import Event

    data = args.trace.read_bytes()
    start = data.index(b"[", data.index(b'"traceEvents"'))
    events = data[start : data.rindex(b"]") + 1]
    mb = len(data) / 1e6
    passes: dict[str, Callable[[], object]] = {
        "count one byte (a C-speed scan)": lambda: events.count(b"{"),
        "regex: the categories kprof keeps": lambda: len(re.findall(KEPT, events)),
        "msgspec: every event as a raw slice": lambda: msgspec.json.decode(events, type=list[msgspec.Raw]),
        "msgspec: every event, cat only": lambda: msgspec.json.decode(events, type=list[CategoryOnly]),
        "msgspec: every event, kprof's fields": lambda: msgspec.json.decode(events, type=list[Event]),
    }
    if kineto_scan.AVAILABLE:  # one thread, the whole array as one piece
        passes["compiled scanner: every event, kept rows"] = lambda: kineto_scan.scan(events)
    out["mb"] = round(mb, 1)
    for name, work in passes.items():
        seconds = best_of(args.runs, work)
        out[name] = {"seconds": round(seconds, 3), "mb_per_s": round(mb / seconds)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
