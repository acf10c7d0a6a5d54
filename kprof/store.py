"""Writing normalized tables and result tables as parquet, with a meta.json beside them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from kprof.errors import KprofInputError
from kprof.schema import KERNEL_EVENTS, RANGES, SCHEMA_VERSION


def _write_atomic(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(path.name + ".partial")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def prepare_dir(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise KprofInputError(out, "exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    return out


def save_frames(out: Path, frames: dict[str, pd.DataFrame], meta: dict[str, Any]) -> list[Path]:
    """Write each frame as ``NAME.parquet`` and ``meta.json``; the normalized tables keep their schema."""
    prepare_dir(out)
    fixed = {"kernel_events": KERNEL_EVENTS, "ranges": RANGES}
    written = []
    for name, frame in frames.items():
        schema = fixed.get(name)
        table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
        path = out / f"{name}.parquet"
        _write_atomic(table, path)
        written.append(path)
    meta = dict(meta, kprof_schema_version=SCHEMA_VERSION)
    (out / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    written.append(out / "meta.json")
    return written


def load_frame(path: Path) -> pd.DataFrame:
    try:
        return pq.read_table(path).to_pandas()
    except (OSError, pa.ArrowInvalid) as e:
        raise KprofInputError(path, f"not a readable parquet table ({e})") from None
