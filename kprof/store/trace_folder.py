"""`kprof trace --save`: the normalized tables and the result tables as parquet, with a meta.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from kprof.errors import KprofInputError
from kprof.schema import KERNEL_EVENTS, RANGES, SCHEMA_VERSION
from kprof.store.atomic import write_parquet, write_text


def prepare_dir(out: Path) -> Path:
    if out.exists() and not out.is_dir():
        raise KprofInputError(out, "exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".kprof-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise KprofInputError(out, f"cannot be written ({e.strerror or e})") from None
    return out


def save_frames(out: Path, frames: dict[str, pd.DataFrame], meta: dict[str, Any]) -> list[Path]:
    """Write each frame as ``NAME.parquet`` and ``meta.json``; the normalized tables keep their schema."""
    prepare_dir(out)
    fixed = {"kernel_events": KERNEL_EVENTS, "ranges": RANGES}
    written = []
    for name, frame in frames.items():
        path = out / f"{name}.parquet"
        write_parquet(pa.Table.from_pandas(frame, schema=fixed.get(name), preserve_index=False), path)
        written.append(path)
    meta_path = out / "meta.json"
    write_text(json.dumps(dict(meta, kprof_schema_version=SCHEMA_VERSION), indent=2, default=str) + "\n", meta_path)
    return [*written, meta_path]


def load_frame(path: Path) -> pd.DataFrame:
    try:
        return pq.read_table(path).to_pandas()
    except (OSError, pa.ArrowException) as e:
        raise KprofInputError(path, f"not a readable parquet table ({e})") from None
