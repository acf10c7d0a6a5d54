"""A run folder: meta.json plus parquet parts written round by round.

Layout (columns and units documented here, the one place):

* ``meta.json`` — command, workload, preset, cases, features, legs, design, seed, rounds, samples,
  buffer sets, dtype, timer/device description, versions, git revision, and per-case status.
* ``samples/`` — one part per (case, round). Columns: ``case`` (str), ``leg`` (str), ``round``
  (int; 0 is the burn-in round), ``sample`` (int), ``buffer_set`` (int), ``slot`` (position of the
  leg in the round's order), ``time_ns`` (float64), ``timer`` (which clock measured it),
  ``burn_in`` (bool).
* ``rounds/`` — one part per (case, round): ``case``, ``round``, ``attempt`` (a round is redone
  when the SM clock sags), and whatever clock/temperature/throttle readings the timer has.
* ``checks/`` — correctness results: ``case``, ``leg``, ``round`` (−1 before timing),
  ``buffer_set``, ``rule``, ``passed``, ``vs_baseline``, ``vs_reference``, ``detail``.
* ``compile/`` — Triton metadata per leg and kernel: ``case``, ``leg``, ``kernel``, ``num_warps``,
  ``num_stages``, ``shared_bytes``, ``registers``, ``spills``, ``programs_per_sm`` (CUDA occupancy
  rules; empty on ROCm and under the interpreter).
* ``kernels/`` — with ``--collector torch``: device time per kernel, from the profiled replay of
  every timed round: ``case``, ``leg``, ``round``, ``kernel`` (short name), ``calls``, ``total_us``.
* ``traces/`` — the profiler traces those came from (Kineto JSON, readable by ``kprof trace``).

Any parquet reader reads a folder (``pyarrow.dataset``, ``pandas.read_parquet``, DuckDB).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from kprof.errors import KprofInputError

RUN_FORMAT_VERSION = 1
TABLES = ("samples", "rounds", "checks", "compile", "kernels")


def _write(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), tmp)
    os.replace(tmp, path)


class RunStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def meta_path(self) -> Path:
        return self.root / "meta.json"

    def create(self, meta: dict[str, Any]) -> None:
        if self.meta_path.exists():
            raise KprofInputError(self.root, "already holds a run (use --resume to continue it, or another --out)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.write_meta(dict(meta, run_format_version=RUN_FORMAT_VERSION))

    def read_meta(self) -> dict[str, Any]:
        if not self.meta_path.exists():
            raise KprofInputError(self.root, "is not a kprof run folder (no meta.json)")
        try:
            return json.loads(self.meta_path.read_text())
        except json.JSONDecodeError as e:
            raise KprofInputError(self.meta_path, f"is not valid JSON ({e})") from None

    def write_meta(self, meta: dict[str, Any]) -> None:
        tmp = self.meta_path.with_name("meta.json.partial")
        tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
        os.replace(tmp, self.meta_path)

    def update(self, **fields: Any) -> None:
        self.write_meta(dict(self.read_meta(), **fields))

    def update_case(self, case_name: str, **fields: Any) -> None:
        meta = self.read_meta()
        meta.setdefault("case_status", {}).setdefault(case_name, {}).update(fields)
        self.write_meta(meta)

    def write_part(self, table: str, case_index: int, round_index: int | None, frame: pd.DataFrame) -> None:
        assert table in TABLES
        suffix = "pre" if round_index is None else f"r{round_index:04d}"
        _write(frame, self.root / table / f"c{case_index:03d}-{suffix}.parquet")

    def read(self, table: str) -> pd.DataFrame:
        folder = self.root / table
        parts = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
        if not parts:
            return pd.DataFrame()
        return pd.concat([pq.read_table(p).to_pandas() for p in parts], ignore_index=True)

    def finished_rounds(self, case_index: int) -> list[int]:
        folder = self.root / "samples"
        if not folder.is_dir():
            return []
        return sorted(int(p.stem.split("-r")[1]) for p in folder.glob(f"c{case_index:03d}-r*.parquet"))
