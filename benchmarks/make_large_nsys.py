"""Build a large Nsight Systems SQLite export by tiling a real one in time, for ingest benchmarks.

Copy i of every activity, API call and NVTX range is shifted by i × (the source's span + 1 ms), and
its correlation ids by i × (the largest id + 1), so copies never collide; everything else (strings,
processes, devices) is the source's. The result has the structure of the source export, only longer.

    python benchmarks/make_large_nsys.py SOURCE.sqlite OUT.sqlite --mb 1000

(SOURCE: for example the H200 export of the real fixtures, nsys_sqlite_h200_nvfuser_report1.sqlite)
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
from pathlib import Path

TILED = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, required=True, help="target size of the output, in MB (10^6 bytes)")
    args = ap.parse_args()
    shutil.copyfile(args.source, args.out)
    con = sqlite3.connect(args.out)
    tables = [t for t in TILED if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()]
    lo, hi = con.execute(f"SELECT MIN(start), MAX(end) FROM {tables[0]}").fetchone()
    for t in tables[1:]:
        a, b = con.execute(f"SELECT MIN(start), MAX(end) FROM {t}").fetchone()
        lo, hi = min(lo, a if a is not None else lo), max(hi, b if b is not None else hi)
    shift = hi - lo + 1_000_000
    max_corr = max(
        con.execute(f"SELECT COALESCE(MAX(correlationId), 0) FROM {t}").fetchone()[0]
        for t in tables
        if "correlationId" in _columns(con, t)
    )
    for t in tables:
        con.execute(f"CREATE TEMP TABLE src_{t} AS SELECT * FROM {t}")
    copies = 1
    while _size(con) < args.mb * 1e6:
        for t in tables:
            cols = _columns(con, t)
            exprs = [_shifted(c, copies, shift, max_corr + 1) for c in cols]
            con.execute(f"INSERT INTO {t} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM src_{t}")
        copies += 1
        con.commit()
    con.close()
    print(f"{args.out}: {copies} copies, {args.out.stat().st_size / 1e6:,.0f} MB")


def _size(con: sqlite3.Connection) -> int:
    return con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def _shifted(column: str, i: int, shift: int, corr: int) -> str:
    if column in ("start", "end"):
        return f'"{column}" + {i * shift}'
    if column == "correlationId":
        return f'"{column}" + {i * corr}'
    return f'"{column}"'


if __name__ == "__main__":
    main()
