"""Every real fixture of ../shared/fixtures/real against sums taken from the file here, with the
standard library (json, csv, sqlite3), never through kprof: per kind, the calls and the total ns,
and the multiset of per-kernel call counts."""

from __future__ import annotations

import csv
import gzip
import io
import json
import sqlite3
from collections import Counter, defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pytest

from kprof.ingest.load import load_traces
from tests.conftest import REAL

KINETO_KINDS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy"}
KINETO_KINDS |= {"gpu_memset": "memset", "Memset": "memset"}
Totals = dict[str, tuple[int, int, list[int]]]  # kind -> (calls, total ns, sorted calls per name)


def _text(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode()


def _totals(rows: list[tuple[str, str, int]]) -> Totals:
    calls: dict[str, int] = defaultdict(int)
    ns: dict[str, int] = defaultdict(int)
    per_name: dict[str, Counter] = defaultdict(Counter)
    for kind, name, dur in rows:
        calls[kind] += 1
        ns[kind] += max(dur, 0)
        per_name[kind][name] += 1
    return {k: (calls[k], ns[k], sorted(per_name[k].values())) for k in calls}


def _ns(us: Decimal) -> int:
    return int((us * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


def _kineto(path: Path) -> Totals:
    doc = json.loads(_text(path), parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    rows = [
        (KINETO_KINDS[e["cat"]], e["name"], _ns(Decimal(e["dur"])))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in KINETO_KINDS and "ts" in e and "dur" in e
    ]
    return _totals(rows)


def _rocprofv3_json(path: Path) -> Totals:
    doc = json.loads(_text(path))
    rows = []
    for node in doc["rocprofiler-sdk-tool"]:
        symbols = {s["kernel_id"]: s["kernel_name"] for s in node["kernel_symbols"]}
        for d in node["buffer_records"]["kernel_dispatch"]:
            rows.append(("kernel", symbols[d["dispatch_info"]["kernel_id"]], d["end_timestamp"] - d["start_timestamp"]))
    return _totals(rows)


def _kernel_csv(path: Path) -> Totals:
    reader = csv.DictReader(io.StringIO(_text(path)))
    lower = [{k.lower(): v for k, v in r.items()} for r in reader]
    start = "start_timestamp" if "start_timestamp" in lower[0] else "beginns"
    end = "end_timestamp" if "end_timestamp" in lower[0] else "endns"
    return _totals([("kernel", r["kernel_name"], int(r[end]) - int(r[start])) for r in lower])


def _rpd(path: Path, tmp: Path) -> Totals:
    db = tmp / "copy.rpd"
    db.write_bytes(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    con = sqlite3.connect(db)
    rows = []
    query = (
        "SELECT t.string, d.string, o.end - o.start FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id "
        "JOIN rocpd_string d ON d.id = o.description_id"
    )
    for op_type, desc, dur in con.execute(query):
        low = op_type.lower()
        kind = "memcpy" if "copy" in low else "memset" if "fill" in low or "memset" in low else "kernel"
        if kind == "kernel" and "kernel" not in low and low != "task":
            continue
        rows.append((kind, desc or op_type, dur))
    con.close()
    return _totals(rows)


def _nsys(path: Path) -> Totals:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = [
        ("kernel", str(n), d)
        for n, d in con.execute("SELECT demangledName, end - start FROM CUPTI_ACTIVITY_KIND_KERNEL")
    ]
    rows += [
        ("memcpy", str(k), d) for k, d in con.execute("SELECT copyKind, end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    ]
    rows += [("memset", "memset", d) for (d,) in con.execute("SELECT end - start FROM CUPTI_ACTIVITY_KIND_MEMSET")]
    con.close()
    return _totals(rows)


def _reader(name: str):
    if name.endswith(".sqlite"):
        return _nsys
    if ".rpd" in name:
        return _rpd
    if name.startswith("rocprofv3_json"):
        return _rocprofv3_json
    if name.endswith(".csv"):
        return None if "counter_collection" in name or "api_trace" in name else _kernel_csv
    if "chrome" in name:
        return None  # rpd2tracing's JSON: refused, with the files to give instead
    return _kineto


FIXTURES = sorted(p.name for p in REAL.glob("*") if p.name != "SOURCES.md") if REAL.is_dir() else []


@pytest.mark.skipif(not FIXTURES, reason="../shared/fixtures/real is absent")
@pytest.mark.parametrize("name", [n for n in FIXTURES if _reader(n) is not None])
def test_per_kernel_calls_and_totals_equal_the_files_own(name: str, tmp_path: Path) -> None:
    path = REAL / name
    reader = _reader(name)
    expected = reader(path, tmp_path) if reader is _rpd else reader(path)
    rows = [
        (str(k), str(n), int(d))
        for t in load_traces(path)
        for k, n, d in zip(t.events["kind"], t.events["name"], t.events["dur_ns"])
    ]
    got = _totals(rows)
    assert {k: v[:2] for k, v in got.items()} == {k: v[:2] for k, v in expected.items()}
    # per-kernel calls: names differ by demangling, so compare how many calls each name has
    assert {k: v[2] for k, v in got.items() if k == "kernel"} == {k: v[2] for k, v in expected.items() if k == "kernel"}
