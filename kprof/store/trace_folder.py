"""`kprof trace --save`: the normalized tables and the result tables as parquet, with a meta.json."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from kprof.errors import KprofInputError
from kprof.schema import KERNEL_EVENTS, RANGES, SCHEMA_VERSION
from kprof.store.atomic import write_parquet, write_text
from kprof.store.layout import FOLDER_LOCK, META
from kprof.store.locks import held_alone

# What a `kprof trace --save` folder holds (besides NAME.parquet result tables): a save replaces
# exactly these, and a folder holding anything else is not one.
_SAVED = {"kernel_events", "ranges", META, FOLDER_LOCK}


@contextmanager
def claimed(out: Path) -> Iterator[None]:
    """Hold ``out`` for one save and clear the previous save's tables, so a save replaces an earlier
    one as a whole (a one-rank save over a two-rank one left the second rank's tables). A run folder,
    a folder holding other files, and a folder another kprof process is saving into are refused in
    one line: the save wrote over a run's meta.json before, and two saves mixed their traces."""
    prepare_dir(out)
    meta = out / META
    if meta.is_file():
        try:
            command = json.loads(meta.read_text()).get("command")
        except (OSError, ValueError, AttributeError):
            command = None
        if command != "trace":
            raise KprofInputError(
                out,
                "holds a kprof run or other data (its meta.json): --save writes trace tables "
                "into an empty folder or over an earlier --save; give another folder",
            )
    foreign = sorted(p.name for p in out.iterdir() if p.name not in _SAVED and p.suffix != ".parquet")
    if foreign:
        raise KprofInputError(
            out, f"is not empty and holds no kprof trace save ({', '.join(foreign[:3])}…): give an empty or new folder"
        )
    with held_alone(out, "is being saved into by another kprof process (one at a time)"):
        for stale in ("kernel_events", "ranges"):
            shutil.rmtree(out / stale, ignore_errors=True)
        for stale in [*out.glob("*.parquet"), meta]:
            stale.unlink(missing_ok=True)
        yield


def prepare_dir(out: Path) -> Path:
    try:
        if out.exists() and not out.is_dir():
            raise KprofInputError(out, "exists and is not a directory")
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".kprof-write-check"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise KprofInputError(out, f"cannot be written ({e.strerror or e})") from None
    return out


# The normalized tables are saved as datasets partitioned by rank (hive layout: ``NAME/rank=R/``):
# pandas, pyarrow, DuckDB and polars read a folder as one table, the rank coming from the path.
PARTITIONED = {"kernel_events": KERNEL_EVENTS, "ranges": RANGES}


def write_rank_partition(out: Path, rank: int, position: int, events: pd.DataFrame, ranges: pd.DataFrame) -> None:
    """One rank's events and ranges into ``out/kernel_events/rank=R/`` and ``out/ranges/rank=R/``
    (the rank lives in the path, not in the file: readers would see it twice)."""
    for name, frame in (("kernel_events", events), ("ranges", ranges)):
        schema = PARTITIONED[name]
        if "rank" in schema.names:  # dropped before the conversion: pandas metadata naming it would
            schema = schema.remove(schema.get_field_index("rank"))  # make readers build it twice
        table = pa.Table.from_pandas(frame.reindex(columns=schema.names), schema=schema, preserve_index=False)
        folder = out / name / f"rank={rank}"
        folder.mkdir(parents=True, exist_ok=True)
        write_parquet(table, folder / f"part-{position:05d}.parquet")


def read_dataset(folder: Path) -> pd.DataFrame:
    """A partitioned table written by ``write_rank_partition``, with ``rank`` (from the path) as int32."""
    try:
        table = pq.read_table(folder, partitioning=ds.partitioning(pa.schema([("rank", pa.int32())]), flavor="hive"))
    except (OSError, pa.ArrowException) as e:
        raise KprofInputError(folder, f"not a readable parquet dataset ({e})") from None
    return table.to_pandas()


def save_frames(out: Path, frames: dict[str, pd.DataFrame], meta: dict[str, Any]) -> list[Path]:
    """Write each (small) frame as ``NAME.parquet`` and ``meta.json``."""
    prepare_dir(out)
    written = []
    for name, frame in frames.items():
        path = out / f"{name}.parquet"
        if "rank" in frame.columns:  # int32, as the partitioned tables' rank folders read back
            frame = frame.astype({"rank": "int32"})
        write_parquet(pa.Table.from_pandas(frame, preserve_index=False), path)
        written.append(path)
    meta_path = out / META
    write_text(json.dumps(dict(meta, kprof_schema_version=SCHEMA_VERSION), indent=2, default=str) + "\n", meta_path)
    return [*written, meta_path]


def load_frame(path: Path) -> pd.DataFrame:
    try:
        return pq.read_table(path).to_pandas()
    except (OSError, pa.ArrowException) as e:
        raise KprofInputError(path, f"not a readable parquet table ({e})") from None
