"""Start-up: wall time of kprof commands that should answer at once, each in a fresh process as a
user runs it (interpreter start and imports included).

    python benchmarks/startup.py [--repeats 5] [--pipeline]

``--pipeline`` adds the README's whole pipeline on a CPU (a run of paged_decode under Triton's
interpreter, minutes; the README states how long it takes, and this is where that figure comes from).

Prints a markdown table: the median and the slowest of the repeats per command. "report, first on
this machine" runs with an empty cache folder (KPROF_CACHE): the report then draws the seeded
samples its rounds-for-SAME line needs and keeps them; every later report reads them back. Host
clock; the numbers depend on the machine's load (a busy 2-core VM varies by ±30%).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORED_RUN = "docs/runs/h200-2026-11-30-s3/gdn_pr"
# (label, arguments, cache folder, the exit code the command must give: a timing of a command that
# failed some other way would time the wrong thing)
COMMANDS = [
    ("kprof --help", ["--help"], None, 0),
    ("an option error (run --rounds -1)", ["run", "paged_decode", "--rounds", "-1"], None, 2),
    ("--gpus all on a CPU", ["run", "paged_decode", "--gpus", "all", "--device", "cpu"], None, 2),
    ("report of a stored H200 run", ["report", STORED_RUN], "warm", 0),
    ("report, first on this machine", ["report", STORED_RUN], "empty", 0),
    ("kprof kernels", ["kernels"], None, 0),
    ("the README's main job (kprof trace)", ["trace", "traces/gqa_graph_decode.pt.trace.json.gz"], None, 0),
]
PIPELINE = (
    "the README's CPU pipeline (run paged_decode --device cpu --case b2 --rounds 6 --samples 1)",
    ["run", "paged_decode", "--device", "cpu", "--case", "b2", "--rounds", "6", "--samples", "1", "--out", "OUT"],
    None,
    0,
)


def wall(args: list[str], env: dict[str, str], expected: int) -> float:
    """Seconds one fresh ``python -m kprof ARGS`` takes; exits if it did not end as expected."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kprof", *args], cwd=ROOT, env=env, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != expected:
        tail = done.stderr.decode()[-2000:]
        sys.exit(f"kprof {' '.join(args)}: exit {done.returncode}, expected {expected}:\n{tail}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pipeline", action="store_true", help="also the README's whole CPU pipeline (minutes)")
    given = parser.parse_args()
    repeats = given.repeats
    warm_cache = tempfile.mkdtemp(prefix="kprof-startup-")
    base = dict(os.environ, KPROF_CACHE=warm_cache)
    wall(COMMANDS[3][1], base, 0)  # fills the warm cache (and the OS file cache)
    print("| command | median s | slowest s |\n|---|---:|---:|")
    for label, args, cache, expected in [*COMMANDS, *([PIPELINE] if given.pipeline else [])]:
        times = []
        for _ in range(repeats):
            env = dict(base, KPROF_CACHE=tempfile.mkdtemp(prefix="kprof-empty-")) if cache == "empty" else base
            out = tempfile.mkdtemp(prefix="kprof-run-")  # a run's folder: a fresh one each time
            times.append(wall([out + "/run" if a == "OUT" else a for a in args], env, expected))
        print(f"| {label} | {statistics.median(times):.2f} | {max(times):.2f} |")


if __name__ == "__main__":
    main()
